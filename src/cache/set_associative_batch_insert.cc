// SetAssociativeRowCache::InsertBatch: a gather's inserts, software-pipelined.
//
// Why: an Insert waits on several independent cache misses -- its two
// candidate sets' index lines, its sketch line and its history bucket -- and
// a loop of plain Inserts pays them one row after another. Here, kInsertAhead
// rows before a row's Insert, its hash is computed and those lines are
// prefetched, so the misses of consecutive rows are in flight together.
// Prefetching changes nothing: the Inserts themselves run in order, exactly
// as sequential Inserts would, so outcomes and counts are the same (the
// emulator and the store agree on every count).
#include <algorithm>

#include "src/cache/free_way.h"
#include "src/cache/set_associative_cache.h"

namespace engram::cache {
namespace {

constexpr size_t kInsertAhead = 8;
constexpr size_t kSlotAhead = 4;  // < kInsertAhead: the index lines have landed by then
constexpr size_t kRing = 16;      // > kInsertAhead, power of two
static_assert(kRing > kInsertAhead && (kRing & (kRing - 1)) == 0);

}  // namespace

void SetAssociativeRowCache::InsertBatch(std::span<const uint64_t> row_ids, std::span<const std::byte* const> rows,
                                         std::span<InsertOutcome> outcomes) {
  const size_t n = row_ids.size();
  uint64_t hashes[kRing];
  CandidateSets candidates[kRing];
  auto prepare = [&](size_t j) {
    const uint64_t h = hasher_.Hash(row_ids[j]);
    hashes[j % kRing] = h;
    candidates[j % kRing] = hasher_.Candidates(h);
    PrefetchIndex(candidates[j % kRing]);
    if (CountsFrequency()) sketch_.Prefetch(h);
    if (ghost_) ghost_->Prefetch(h);
  };
  // While the cache is filling, the payload slot a free way would give the
  // row, from the sets' masks as they are now (a hint: the insert decides
  // under the locks), fetched for writing, so the row's copy into it does not
  // wait for those lines while holding the locks. A full cache's insert takes
  // a victim's slot, not known before the choice: nothing is fetched there.
  const SetStorage storage = Storage();
  const bool filling = row_bytes_ != 0 && empty_slots_.load(std::memory_order_relaxed) != 0;
  auto prefetch_slot = [&](size_t j) {
    if (!filling) return;
    const CandidateSets& c = candidates[j % kRing];
    const uint64_t sets[2] = {c.first, c.second};
    const int count = c.second == c.first ? 1 : 2;
    uint32_t free[2];
    for (int i = 0; i < count; ++i) free[i] = ~View(sets[i]).OccupiedHint() & storage.FullMask();
    int chosen = 0;
    uint32_t way;
    if (hasher_.direct()) {
      if (!hasher_.DirectWay(row_ids[j], &way)) return;  // a row ID with no slot is not placed
    } else if (!FreeWay::Choose(free, count, &chosen, &way)) {
      return;  // a victim's slot: not known before the choice
    }
    const uint8_t* slot = storage.Payload(sets[chosen], way);
    for (size_t off = 0; off < row_bytes_; off += 64) __builtin_prefetch(slot + off, 1, 3);
    __builtin_prefetch(slot + row_bytes_ - 1, 1, 3);
  };
  for (size_t j = 0; j < std::min(n, kInsertAhead); ++j) prepare(j);
  for (size_t j = 0; j < std::min(n, kSlotAhead); ++j) prefetch_slot(j);
  for (size_t i = 0; i < n; ++i) {
    if (i + kInsertAhead < n) prepare(i + kInsertAhead);
    if (i + kSlotAhead < n) prefetch_slot(i + kSlotAhead);
    const std::byte* row = rows.empty() ? nullptr : rows[i];
    outcomes[i] = InsertHashed(row_ids[i], hashes[i % kRing], std::span<const std::byte>(row, row ? row_bytes_ : 0));
  }
}

}  // namespace engram::cache
