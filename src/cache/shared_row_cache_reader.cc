#include "src/cache/shared_row_cache_reader.h"

#include "src/cache/row_copy.h"
#include "src/cache/set_probe.h"

namespace engram::cache {
namespace {

using set_associative_internal::PrefetchRange;

// The same distances as the cache's own LookupBatch (set_probe.h).
using set_associative_internal::RunInGroups;
constexpr size_t kGroup = set_associative_internal::kLookupGroup;
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
  CopyRow(dst, Payload(set, uint32_t(way), LayoutFor<kWays>().ways), row_bytes_);
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
  uint64_t hashes[kGroup];
  uint64_t first_sets[kGroup];
  uint64_t second_sets[kGroup];
  int first_ways[kGroup];
  int second_ways[kGroup];
  bool in_second[kGroup];
  const bool two = hasher_.two_candidates();
  auto prefetch_set = [&](uint64_t set) __attribute__((always_inline)) {
    PrefetchRange(index_ + set * stride, stride);
  };
  auto prepare = [&](size_t j) __attribute__((always_inline)) {
    const uint64_t h = hasher_.Hash(row_ids[j]);
    hashes[j % kGroup] = h;
    first_sets[j % kGroup] = hasher_.First(h);
    prefetch_set(first_sets[j % kGroup]);
  };
  auto find_in_first = [&](size_t j) __attribute__((always_inline)) {
    const uint64_t first = first_sets[j % kGroup];
    const int way = FindWayHint<kWays>(first, row_ids[j]);
    first_ways[j % kGroup] = way;
    in_second[j % kGroup] = way < 0 && two;
    if (way >= 0) {
      PrefetchRange(Payload(first, uint32_t(way), ways), row_bytes_);
    } else if (in_second[j % kGroup]) {
      second_sets[j % kGroup] = hasher_.Second(hashes[j % kGroup], first);
      prefetch_set(second_sets[j % kGroup]);
    }
  };
  auto find_in_second = [&](size_t j) __attribute__((always_inline)) {
    if (!in_second[j % kGroup]) return;
    const uint64_t second = second_sets[j % kGroup];
    const int way = FindWayHint<kWays>(second, row_ids[j]);
    second_ways[j % kGroup] = way;
    if (way >= 0) PrefetchRange(Payload(second, uint32_t(way), ways), row_bytes_);
  };
  size_t hits = 0;
  auto serve = [&](size_t i) __attribute__((always_inline)) {
    const bool second = in_second[i % kGroup];
    const int way = second ? second_ways[i % kGroup] : first_ways[i % kGroup];
    const uint64_t set = second ? second_sets[i % kGroup] : first_sets[i % kGroup];
    // A row the hints did not see is a miss: at worst one that a writer was
    // moving, which the owner then serves.
    const bool found =
        way >= 0 && (ReadRow<kWays>(set, way, row_ids[i], dsts[i]) ||
                     ReadAfresh<kWays>(row_ids[i], hashes[i % kGroup], dsts[i]));
    hit[i] = found ? 1 : 0;
    hits += found;
  };
  RunInGroups(n, prepare, find_in_first, find_in_second, serve);
  return hits;
}

}  // namespace engram::cache
