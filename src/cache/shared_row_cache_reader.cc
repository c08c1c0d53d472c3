#include "src/cache/shared_row_cache_reader.h"

#include "src/cache/row_copy.h"
#include "src/cache/set_probe.h"
#include "src/cache/staged_set_probe.h"

namespace engram::cache {
namespace {

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
  CopyRow(dst, StorageIn<kWays>().Payload(set, uint32_t(way)), row_bytes_);
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
      const int way = set_associative_internal::FindWayUnlocked<kWays>(s, layout_.ways, row_id);
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
  // The stages of the cache's own LookupBatch (staged_set_probe.h), then a
  // read the set's version validates.
  set_associative_internal::StagedSetProbe<kWays> probe(hasher_, StorageIn<kWays>(), row_ids,
                                                        /*prefetch_payloads=*/true);
  size_t hits = 0;
  auto serve = [&](size_t i) __attribute__((always_inline)) {
    const int way = probe.hinted_way(i);
    // A row the hints did not see is a miss: at worst one that a writer was
    // moving, which the owner then serves.
    const bool found = way >= 0 && (ReadRow<kWays>(probe.hinted_set(i), way, row_ids[i], dsts[i]) ||
                                    ReadAfresh<kWays>(row_ids[i], probe.hash(i), dsts[i]));
    hit[i] = found ? 1 : 0;
    hits += found;
  };
  probe.Run(serve);
  return hits;
}

}  // namespace engram::cache
