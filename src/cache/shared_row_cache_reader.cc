#include "src/cache/shared_row_cache_reader.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "src/cache/set_probe.h"

namespace engram::cache {
namespace {

using set_associative_internal::PrefetchRange;

// The same distances as the cache's own LookupBatch (set_probe.h).
using set_associative_internal::StageDistances;
constexpr size_t kRing = set_associative_internal::kLookupRing;
// Reads of a set that a writer interfered with before the row is left to
// the owner.
constexpr int kReadAttempts = 4;

}  // namespace

Result<SharedRowCacheReader> SharedRowCacheReader::Attach(const SharedCacheGeometry& geometry, const uint8_t* index,
                                                          const uint8_t* slab) {
  std::string why;
  if (!geometry.Valid(&why)) return Status::InvalidArgument("shared row cache: " + why);
  if (index == nullptr || slab == nullptr) return Status::InvalidArgument("shared row cache: no index or slab");
  return SharedRowCacheReader(geometry, index, slab);
}

template <uint32_t kWays>
const SetLayout& SharedRowCacheReader::LayoutFor() const {
  if constexpr (kWays == 0) {
    return layout_;
  } else {
    static constexpr SetLayout kLayout = SetLayout::For(kWays);
    return kLayout;
  }
}

template <uint32_t kWays>
[[gnu::always_inline]] inline int SharedRowCacheReader::FindWayHint(uint64_t set, uint64_t row_id) const {
  return set_associative_internal::FindWayUnlocked<kWays>(ViewOf<kWays>(set), layout_.ways, row_id);
}

template <uint32_t kWays>
[[gnu::always_inline]] inline bool SharedRowCacheReader::ReadRow(uint64_t set, int way, uint64_t row_id,
                                                                 std::byte* dst) const {
  const SetView s = ViewOf<kWays>(set);
  const uint32_t bit = 1u << way;
  [[maybe_unused]] UnlockedReadScope unchecked;
  const uint32_t version = s.ReadBegin();
  if ((version & 1) != 0 || !(s.OccupiedHint() & bit) || s.KeyHint(uint32_t(way)) != row_id ||
      (s.PinnedHint() & bit)) {
    return false;
  }
  std::memcpy(dst, Payload(set, uint32_t(way), LayoutFor<kWays>().ways), row_bytes_);
  return s.ReadValid(version);
}

template <uint32_t kWays>
bool SharedRowCacheReader::ReadAfresh(uint64_t row_id, uint64_t hash, std::byte* dst) const {
  const uint64_t first = hasher_.First(hash);
  const uint64_t second = hasher_.Second(hash, first);
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    bool busy = false;
    for (uint64_t set : {first, second}) {
      const SetView s = ViewOf<kWays>(set);
      const uint32_t version = s.ReadBegin();
      if ((version & 1) != 0) {
        busy = true;
        continue;
      }
      const int way = FindWayHint<kWays>(set, row_id);
      if (way < 0) {
        // Absent, if the set did not change while we looked.
        if (!s.ReadValid(version)) busy = true;
        continue;
      }
      if (s.PinnedHint() & (1u << way)) return false;  // the owner consumes the pin
      if (ReadRow<kWays>(set, way, row_id, dst)) return true;
      busy = true;
      if (set == second) break;
    }
    if (!busy) return false;
  }
  return false;
}

size_t SharedRowCacheReader::LookupBatch(std::span<const uint64_t> row_ids, std::span<std::byte* const> dsts,
                                         std::span<uint8_t> hit) const {
  if (layout_.compact) {
    switch (layout_.ways) {
      case 4: return LookupBatchIn<4>(row_ids, dsts, hit);
      case 5: return LookupBatchIn<5>(row_ids, dsts, hit);
      case 8: return LookupBatchIn<8>(row_ids, dsts, hit);
      default: break;
    }
  }
  return LookupBatchIn<0>(row_ids, dsts, hit);
}

template <uint32_t kWays>
size_t SharedRowCacheReader::LookupBatchIn(std::span<const uint64_t> row_ids, std::span<std::byte* const> dsts,
                                           std::span<uint8_t> hit) const {
  const size_t n = row_ids.size();
  const uint32_t ways = LayoutFor<kWays>().ways;
  const uint32_t stride = LayoutFor<kWays>().stride;
  uint64_t hashes[kRing];
  uint64_t first_sets[kRing];
  uint64_t second_sets[kRing];
  int first_ways[kRing];
  int second_ways[kRing];
  bool in_second[kRing];
  const bool two = hasher_.two_candidates();
  auto prefetch_set = [&](uint64_t set) __attribute__((always_inline)) {
    PrefetchRange(index_ + set * stride, stride);
  };
  auto prepare = [&](size_t j) __attribute__((always_inline)) {
    const uint64_t h = hasher_.Hash(row_ids[j]);
    hashes[j % kRing] = h;
    first_sets[j % kRing] = hasher_.First(h);
    prefetch_set(first_sets[j % kRing]);
  };
  auto find_in_first = [&](size_t j) __attribute__((always_inline)) {
    const uint64_t first = first_sets[j % kRing];
    const int way = FindWayHint<kWays>(first, row_ids[j]);
    first_ways[j % kRing] = way;
    in_second[j % kRing] = way < 0 && two;
    if (way >= 0) {
      PrefetchRange(Payload(first, uint32_t(way), ways), row_bytes_);
    } else if (in_second[j % kRing]) {
      second_sets[j % kRing] = hasher_.Second(hashes[j % kRing], first);
      prefetch_set(second_sets[j % kRing]);
    }
  };
  auto find_in_second = [&](size_t j) __attribute__((always_inline)) {
    if (!in_second[j % kRing]) return;
    const uint64_t second = second_sets[j % kRing];
    const int way = FindWayHint<kWays>(second, row_ids[j]);
    second_ways[j % kRing] = way;
    if (way >= 0) PrefetchRange(Payload(second, uint32_t(way), ways), row_bytes_);
  };
  const StageDistances ahead = StageDistances::For(n);
  for (size_t j = 0; j < std::min(n, ahead.index); ++j) prepare(j);
  for (size_t j = 0; j < std::min(n, ahead.first_set); ++j) find_in_first(j);
  for (size_t j = 0; j < std::min(n, ahead.second_set); ++j) find_in_second(j);
  size_t hits = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i + ahead.index < n) prepare(i + ahead.index);
    if (i + ahead.first_set < n) find_in_first(i + ahead.first_set);
    if (i + ahead.second_set < n) find_in_second(i + ahead.second_set);
    const bool second = in_second[i % kRing];
    const int way = second ? second_ways[i % kRing] : first_ways[i % kRing];
    const uint64_t set = second ? second_sets[i % kRing] : first_sets[i % kRing];
    // A row the hints did not see is a miss: at worst one that a writer was
    // moving, which the owner then serves.
    const bool found =
        way >= 0 && (ReadRow<kWays>(set, way, row_ids[i], dsts[i]) ||
                     ReadAfresh<kWays>(row_ids[i], hashes[i % kRing], dsts[i]));
    hit[i] = found ? 1 : 0;
    hits += found;
  }
  return hits;
}

}  // namespace engram::cache
