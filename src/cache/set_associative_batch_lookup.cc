// SetAssociativeRowCache::LookupBatch: a gather's lookups, software-pipelined.
//
// Why: one cached row costs two dependent random memory accesses -- its set's
// index line, then its payload -- and a loop of plain Lookups pays them one
// after another, so a cached gather ran at ~0.4x a flat in-memory gather of
// the same rows. Here the rows ahead of the current one are prepared in two
// stages, so their misses are in flight together (memory-level parallelism):
//
//   row i + kIndexAhead:    hash it, prefetch its candidate sets' index lines
//   row i + kPayloadAhead:  find its way (index now in cache; the set is locked
//                           only to read, one set at a time), prefetch payload
//   row i:                  the ordinary Lookup, on warm lines
//
// The first two stages change nothing (no counts, no sketch, no clock, no
// stamps; the sketch's line is only prefetched), and the third is exactly
// Lookup, in order: the results, counters and sketch are those of sequential
// Lookups. Only the bookkeeping is batched: the batch takes its n ticks with
// one add to the clock and adds its hits and misses to the statistics once. If another thread moves or
// evicts a row between its prefetch and its lookup, the lookup is simply
// slower, never wrong.
#include <algorithm>

#include "src/cache/set_associative_cache.h"

namespace engram::cache {
namespace {

constexpr size_t kIndexAhead = 8;
constexpr size_t kPayloadAhead = 4;
constexpr size_t kRing = 16;  // > kIndexAhead, power of two
static_assert(kRing > kIndexAhead && (kRing & (kRing - 1)) == 0);

inline void PrefetchRange(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  const uintptr_t first = reinterpret_cast<uintptr_t>(c) & ~uintptr_t{63};
  const uintptr_t last = reinterpret_cast<uintptr_t>(c + bytes - 1) & ~uintptr_t{63};
  for (uintptr_t line = first; line <= last; line += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 3);
  }
}

}  // namespace

void SetAssociativeRowCache::PrefetchIndex(const CandidateSets& c) const {
  PrefetchRange(index_.data() + c.first * layout_.stride, layout_.stride);
  if (c.second != c.first) PrefetchRange(index_.data() + c.second * layout_.stride, layout_.stride);
}

void SetAssociativeRowCache::PrefetchPayload(uint64_t row_id, const CandidateSets& c) {
  for (uint64_t set : {c.first, c.second}) {
    SetView s = View(set);
    s.Lock();
    const int way = FindWay(s, row_id);
    s.Unlock();
    if (way >= 0) {
      PrefetchRange(Payload(set, uint32_t(way)), row_bytes_);
      return;
    }
    if (c.second == c.first) return;
  }
}

size_t SetAssociativeRowCache::LookupBatch(std::span<const uint64_t> row_ids, std::span<std::byte* const> dsts,
                                           PinAction pin, std::span<uint8_t> hit) {
  const size_t n = row_ids.size();
  const bool copy = row_bytes_ != 0;
  uint64_t hashes[kRing];
  CandidateSets sets[kRing];
  auto prepare = [&](size_t j) {
    const uint64_t h = hasher_.Hash(row_ids[j]);
    hashes[j % kRing] = h;
    sets[j % kRing] = hasher_.Candidates(h);
    PrefetchIndex(sets[j % kRing]);
    sketch_.Prefetch(h);
  };
  for (size_t j = 0; j < std::min(n, kIndexAhead); ++j) prepare(j);
  if (copy) {
    for (size_t j = 0; j < std::min(n, kPayloadAhead); ++j) PrefetchPayload(row_ids[j], sets[j % kRing]);
  }
  // The batch's ticks are taken at once, and its counts added once: row i
  // holds tick first_tick + i and does that tick's upkeep right after its
  // sketch increment, as Lookup does.
  const uint64_t first_tick = n != 0 ? TakeTicks(n) : 0;
  LookupCounts counts;
  for (size_t i = 0; i < n; ++i) {
    if (i + kIndexAhead < n) prepare(i + kIndexAhead);
    if (copy && i + kPayloadAhead < n) PrefetchPayload(row_ids[i + kPayloadAhead], sets[(i + kPayloadAhead) % kRing]);
    std::span<std::byte> dst(dsts[i], copy && dsts[i] ? row_bytes_ : 0);
    const uint64_t hash = hashes[i % kRing];
    sketch_.Increment(hash);
    TickUpkeep(first_tick + i);
    const bool found = LookupHashed(row_ids[i], hash, static_cast<uint32_t>(first_tick + i), dst, pin, &counts);
    hit[i] = found ? 1 : 0;
  }
  counts.AddTo(Shard());
  return counts.hits;
}

}  // namespace engram::cache
