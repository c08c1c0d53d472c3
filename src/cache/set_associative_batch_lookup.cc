// SetAssociativeRowCache::LookupBatch: a gather's lookups, in stages over
// groups of rows.
//
// Why: one cached row costs two dependent random memory accesses -- its set's
// index line, then its payload -- and a loop of plain Lookups pays them one
// after another, so a cached gather ran at ~0.4x a flat in-memory gather of
// the same rows. Here each stage runs over every row of a group of
// kLookupGroup rows before the next (RunInGroups, set_probe.h), so the
// group's misses are in flight together (memory-level parallelism):
//
//   prepare:         hash the row, prefetch its first set's index line
//   find_in_first:   look for it in the first set (read without the lock, as
//                    a hint); found: prefetch its payload; not found:
//                    prefetch the second set's index line
//   find_in_second:  not in the first set: look in the second and prefetch
//                    its payload
//   serve:           a row the hints found is served where they found it
//                    without the set's lock, if no writer changed the set
//                    meanwhile (an unlocked read, set_layout.h); else a row
//                    the hints saw in its second set is served from that set
//                    alone if it is still there under the lock (one lock
//                    instead of two, no search of the first); else the
//                    ordinary Lookup, on warm lines
//
// The second set's line is fetched only for the rows not in the first set:
// the loop is bound by how many lines are in flight at once, and a row found
// in its first set then costs one index line, not two.
//
// The stages before serve change nothing (no counts, no sketch, no clock, no
// stamps), and serve does what Lookup does, in order (a row is in at most
// one set, so a hit found in its second set is the hit Lookup finds): the
// results, counters and sketch are those of sequential Lookups. Only the
// bookkeeping is batched: the batch takes its n ticks with one add to the
// clock, adds its hits and misses to the statistics once, and counts its rows
// in the sketch in bursts (sketch_increment_burst.h), flushed before any
// tick's upkeep and at the end, so no halving and no later operation sees a
// count missing. If another thread moves or evicts a row between its
// prefetch and its lookup, the lookup is simply slower, never wrong.
//
// With direct placement (set_hasher.h) none of that is needed: row r can only
// be in slot r, so a batch (LookupBatchDirect) tests r's residency bit
// (residency_bitmap.h) and copies slot r, the payloads of a group's resident
// rows prefetched first -- a flat memcpy gather plus one bit per row. Its
// hits stamp nothing (the stamp is what would fetch the index line); the
// outcomes and counts are still those of sequential Lookups.
#include "src/cache/set_associative_cache.h"

using engram::cache::set_associative_internal::PrefetchRange;
using engram::cache::set_associative_internal::RunInGroups;

namespace engram::cache {
namespace {

constexpr size_t kGroup = set_associative_internal::kLookupGroup;

}  // namespace

template <uint32_t kWays>
[[gnu::always_inline]] inline void SetAssociativeRowCache::PrefetchSet(uint64_t set) const {
  const uint8_t* base = index_.data() + set * LayoutFor<kWays>().stride;
  if constexpr (kWays != 0) {
    // Whole lines from the set's start: the stride is a multiple of 64 and
    // the index is page-aligned.
    for (uint32_t off = 0; off < LayoutFor<kWays>().stride; off += 64) __builtin_prefetch(base + off, 0, 3);
  } else {
    PrefetchRange(base, layout_.stride);
  }
}

void SetAssociativeRowCache::PrefetchIndex(const CandidateSets& c) const {
  PrefetchSet<0>(c.first);
  if (c.second != c.first) PrefetchSet<0>(c.second);
}

template <uint32_t kWays>
[[gnu::always_inline]] inline int SetAssociativeRowCache::FindWayHint(uint64_t set, uint64_t row_id) const {
  return set_associative_internal::FindWayUnlocked<kWays>(ViewIn<kWays>(set), layout_.ways, row_id);
}

size_t SetAssociativeRowCache::LookupBatch(std::span<const uint64_t> row_ids, std::span<std::byte* const> dsts,
                                           PinAction pin, std::span<uint8_t> hit) {
  // A batch that may have to consume a pin takes the path that reads the
  // pinned mask under the set's version.
  if (hasher_.direct() && (pin == PinAction::kKeep || !ever_pinned_.load(std::memory_order_relaxed))) {
    return LookupBatchDirect(row_ids, dsts, pin, hit);
  }
  if (layout_.compact) {
    switch (layout_.ways) {
      case 4: return LookupBatchIn<4>(row_ids, dsts, pin, hit);
      case 5: return LookupBatchIn<5>(row_ids, dsts, pin, hit);
      case 8: return LookupBatchIn<8>(row_ids, dsts, pin, hit);
      default: break;
    }
  }
  return LookupBatchIn<0>(row_ids, dsts, pin, hit);
}

template <uint32_t kWays>
size_t SetAssociativeRowCache::LookupBatchIn(std::span<const uint64_t> row_ids, std::span<std::byte* const> dsts,
                                             PinAction pin, std::span<uint8_t> hit) {
  const size_t n = row_ids.size();
  const bool copy = row_bytes_ != 0;
  // Per row of the group: its hash and first candidate set, and its second
  // set once the first has been searched without finding it (in_second).
  uint64_t hashes[kGroup];
  uint64_t first_sets[kGroup];
  uint64_t second_sets[kGroup];
  int first_ways[kGroup];  // the way of the first set the hint found the row in, or -1
  int second_ways[kGroup];  // the same for the second set (set only when in_second)
  bool in_second[kGroup];  // not found in the first set by the payload stage
  const bool two = hasher_.two_candidates();
  const bool count_frequency = CountsFrequency();
  SketchIncrementBurst increments(sketch_);
  // The stages are always inlined: GCC otherwise calls them out of line, and
  // each call reloads the captured arrays (~30 instructions per row). The GNU
  // attribute after the parameters applies to the call operator; GCC ignores
  // [[gnu::always_inline]] there (it would appertain to the lambda's type).
  auto prepare = [&](size_t j) __attribute__((always_inline)) {
    const uint64_t h = hasher_.Hash(row_ids[j]);
    hashes[j % kGroup] = h;
    first_sets[j % kGroup] = hasher_.First(h);
    PrefetchSet<kWays>(first_sets[j % kGroup]);
  };
  // The hints are read without the set locks: a locked instruction would wait
  // for the earlier rows' copies to drain from the store buffer, and a stale
  // hint costs one useless prefetch, never a wrong row.
  auto find_in_first = [&](size_t j) __attribute__((always_inline)) {
    const uint64_t first = first_sets[j % kGroup];
    const int way = FindWayHint<kWays>(first, row_ids[j]);
    first_ways[j % kGroup] = way;
    in_second[j % kGroup] = way < 0 && two;
    if (way >= 0) {
      if (copy) PrefetchRange(PayloadIn<kWays>(first, uint32_t(way)), row_bytes_);
    } else if (in_second[j % kGroup]) {
      second_sets[j % kGroup] = hasher_.Second(hashes[j % kGroup], first);
      PrefetchSet<kWays>(second_sets[j % kGroup]);
    }
  };
  auto find_in_second = [&](size_t j) __attribute__((always_inline)) {
    if (!in_second[j % kGroup]) return;
    const uint64_t second = second_sets[j % kGroup];
    const int way = FindWayHint<kWays>(second, row_ids[j]);
    second_ways[j % kGroup] = way;
    if (way >= 0 && copy) PrefetchRange(PayloadIn<kWays>(second, uint32_t(way)), row_bytes_);
  };
  // The batch's ticks are taken at once, and its counts added once: row i
  // holds tick first_tick + i and does that tick's upkeep right after its
  // sketch increment, as Lookup does (TickUpkeep flushes the burst first).
  const uint64_t first_tick = n != 0 ? TakeTicks(n) : 0;
  uint64_t next_halving = FirstHalvingFrom(first_tick);
  LookupCounts counts;
  auto serve = [&](size_t i) __attribute__((always_inline)) {
    std::span<std::byte> dst(dsts[i], copy && dsts[i] ? row_bytes_ : 0);
    if (count_frequency) increments.Add(hashes[i % kGroup]);
    TickUpkeep(first_tick + i, &next_halving, &increments);
    const uint32_t now = static_cast<uint32_t>(first_tick + i);
    // A row the hints found is served where they found it, without the lock
    // if no writer interferes; a row the hints saw in its second set is
    // otherwise served from that set alone when the hint still holds under
    // its lock; every other row takes the ordinary lookup.
    const bool second = in_second[i % kGroup];
    const int hinted_way = second ? second_ways[i % kGroup] : first_ways[i % kGroup];
    const uint64_t hinted_set = second ? second_sets[i % kGroup] : first_sets[i % kGroup];
    const bool found =
        (hinted_way >= 0 && ServeUnlocked<kWays>(row_ids[i], hinted_set, hinted_way, now, dst, pin, &counts)) ||
        (second && hinted_way >= 0 &&
         ServeHintedHit<kWays>(row_ids[i], hinted_set, hinted_way, now, dst, pin, &counts)) ||
        LookupHashed<kWays>(row_ids[i], hashes[i % kGroup], first_sets[i % kGroup], first_ways[i % kGroup], now, dst,
                            pin, &counts);
    hit[i] = found ? 1 : 0;
  };
  RunInGroups(n, prepare, find_in_first, find_in_second, serve);
  increments.Flush();
  counts.AddTo(Shard());
  return counts.hits;
}

size_t SetAssociativeRowCache::LookupBatchDirect(std::span<const uint64_t> row_ids, std::span<std::byte* const> dsts,
                                                 PinAction pin, std::span<uint8_t> hit) {
  const size_t n = row_ids.size();
  const bool copy = row_bytes_ != 0;
  const uint8_t* const slab = slab_.data();
  const bool consume = pin == PinAction::kConsume;
  // A resident row's payload is prefetched; for any other row (a miss, read
  // from the device anyway) the index line its locked lookup takes.
  auto prefetch = [&](size_t j) __attribute__((always_inline)) {
    const uint64_t r = row_ids[j];
    if (!residency_.Test(r)) {
      PrefetchSet<0>(hasher_.First(r));
    } else if (copy) {
      PrefetchRange(slab + r * row_bytes_, row_bytes_);
    }
  };
  // Ticks as LookupBatchIn takes them: a hit here stamps nothing, but the
  // clock's upkeep and the rows looked up under the lock go on as there.
  const uint64_t first_tick = n != 0 ? TakeTicks(n) : 0;
  uint64_t next_halving = FirstHalvingFrom(first_tick);
  LookupCounts counts;
  auto serve = [&](size_t i) __attribute__((always_inline)) {
    TickUpkeep(first_tick + i, &next_halving);
    const uint64_t r = row_ids[i];
    std::span<std::byte> dst(dsts[i], copy && dsts[i] ? row_bytes_ : 0);
    bool found;
    // A batch that consumes pins found none pinned when it began; a row seen
    // resident here that a pinned insert placed since (its bit was set after
    // ever_pinned_) takes the lookup that consumes the pin.
    if (residency_.Test(r) && !(consume && ever_pinned_.load(std::memory_order_relaxed))) {
      CopyRowOut(slab + r * row_bytes_, dst);
      ++counts.hits;
      ++counts.unlocked_hits;
      found = true;
    } else {
      found = LookupHashed<0>(r, r, hasher_.First(r), -1, static_cast<uint32_t>(first_tick + i), dst, pin, &counts);
    }
    hit[i] = found ? 1 : 0;
  };
  RunInGroups(n, prefetch, serve);
  counts.AddTo(Shard());
  return counts.hits;
}

void SetAssociativeRowCache::RecordHits(std::span<const uint64_t> row_ids) {
  const size_t n = row_ids.size();
  if (n == 0) return;
  // The same bookkeeping as the last stage of LookupBatchIn for a hit: one
  // tick and (unless placement is direct) one sketch increment per row, the
  // batch's ticks taken at once and the increments counted in bursts; the
  // index lines are requested a group at a time, as LookupBatchIn's are.
  const bool two = hasher_.two_candidates();
  const bool count_frequency = CountsFrequency();
  SketchIncrementBurst increments(sketch_);
  uint64_t hashes[kGroup];
  uint64_t first_sets[kGroup];
  auto prepare = [&](size_t j) __attribute__((always_inline)) {
    hashes[j % kGroup] = hasher_.Hash(row_ids[j]);
    first_sets[j % kGroup] = hasher_.First(hashes[j % kGroup]);
    PrefetchSet<0>(first_sets[j % kGroup]);
  };
  const uint64_t first_tick = TakeTicks(n);
  uint64_t next_halving = FirstHalvingFrom(first_tick);
  LookupCounts counts;
  auto record = [&](size_t i) __attribute__((always_inline)) {
    const uint64_t h = hashes[i % kGroup];
    if (count_frequency) increments.Add(h);
    TickUpkeep(first_tick + i, &next_halving, &increments);
    const uint64_t first = first_sets[i % kGroup];
    uint64_t set = first;
    int way = FindWayHint<0>(first, row_ids[i]);
    if (way < 0 && two) {
      set = hasher_.Second(h, first);
      way = FindWayHint<0>(set, row_ids[i]);
    }
    if (way >= 0) View(set).set_stamp(uint32_t(way), static_cast<uint32_t>(first_tick + i));
    ++counts.hits;
  };
  RunInGroups(n, prepare, record);
  increments.Flush();
  counts.AddTo(Shard());
}

}  // namespace engram::cache
