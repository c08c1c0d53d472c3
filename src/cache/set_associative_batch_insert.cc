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

#include "src/cache/set_associative_cache.h"

namespace engram::cache {
namespace {

constexpr size_t kInsertAhead = 8;
constexpr size_t kRing = 16;  // > kInsertAhead, power of two
static_assert(kRing > kInsertAhead && (kRing & (kRing - 1)) == 0);

}  // namespace

void SetAssociativeRowCache::InsertBatch(std::span<const uint64_t> row_ids, std::span<const std::byte* const> rows,
                                         std::span<InsertOutcome> outcomes) {
  const size_t n = row_ids.size();
  uint64_t hashes[kRing];
  auto prepare = [&](size_t j) {
    const uint64_t h = hasher_.Hash(row_ids[j]);
    hashes[j % kRing] = h;
    PrefetchIndex(hasher_.Candidates(h));
    sketch_.Prefetch(h);
    if (ghost_) ghost_->Prefetch(h);
  };
  for (size_t j = 0; j < std::min(n, kInsertAhead); ++j) prepare(j);
  for (size_t i = 0; i < n; ++i) {
    if (i + kInsertAhead < n) prepare(i + kInsertAhead);
    const std::byte* row = rows.empty() ? nullptr : rows[i];
    outcomes[i] = InsertHashed(row_ids[i], hashes[i % kRing], std::span<const std::byte>(row, row ? row_bytes_ : 0));
  }
}

}  // namespace engram::cache
