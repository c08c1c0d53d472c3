// SetAssociativeRowCache::LookupBatch: a gather's lookups, in stages over
// groups of rows.
//
// Why: one cached row costs two dependent random memory accesses -- its set's
// index line, then its payload -- and a loop of plain Lookups pays them one
// after another, so a cached gather ran at ~0.4x a flat in-memory gather of
// the same rows. Here each stage runs over every row of a group of
// kLookupGroup rows before the next (RunInGroups, set_probe.h), so the
// group's misses are in flight together (memory-level parallelism). The
// stages that find each row's set and way and request its lines are the
// StagedSetProbe's (staged_set_probe.h: hash, first set, second set); the
// last is the lookup's own:
//
//   serve:           a row the hints found is served where they found it
//                    without the set's lock, if no writer changed the set
//                    meanwhile (an unlocked read, set_layout.h); else a row
//                    the hints saw in its second set is served from that set
//                    alone if it is still there under the lock (one lock
//                    instead of two, no search of the first); else the
//                    ordinary Lookup, on warm lines
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
// RecordHits (the hits a shared cache's readers served) runs the same probe
// without the payloads, and stamps each row where it was found.
//
// With direct placement (set_hasher.h) none of that is needed: row r can only
// be in slot r, so a batch (LookupBatchDirect) tests r's residency bit
// (residency_bitmap.h) and copies slot r, the payloads of a group's resident
// rows prefetched first -- a flat memcpy gather plus one bit per row. Its
// hits stamp nothing (the stamp is what would fetch the index line); the
// outcomes and counts are still those of sequential Lookups.
#include "src/cache/set_associative_cache.h"
#include "src/cache/staged_set_probe.h"

using engram::cache::set_associative_internal::PrefetchRange;
using engram::cache::set_associative_internal::RunInGroups;
using engram::cache::set_associative_internal::StagedSetProbe;

namespace engram::cache {

template <uint32_t kWays>
[[gnu::always_inline]] inline void SetAssociativeRowCache::PrefetchSet(uint64_t set) const {
  set_associative_internal::PrefetchSetLines<kWays>(StorageIn<kWays>(), set);
}

void SetAssociativeRowCache::PrefetchIndex(const CandidateSets& c) const {
  PrefetchSet<0>(c.first);
  if (c.second != c.first) PrefetchSet<0>(c.second);
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
  StagedSetProbe<kWays> probe(hasher_, StorageIn<kWays>(), row_ids, /*prefetch_payloads=*/copy);
  const bool count_frequency = CountsFrequency();
  SketchIncrementBurst increments(sketch_);
  // The batch's ticks are taken at once, and its counts added once: row i
  // holds tick first_tick + i and does that tick's upkeep right after its
  // sketch increment, as Lookup does (TickUpkeep flushes the burst first).
  const uint64_t first_tick = n != 0 ? TakeTicks(n) : 0;
  uint64_t next_halving = FirstHalvingFrom(first_tick);
  LookupCounts counts;
  // Always inlined: GCC otherwise calls the stage out of line, and each call
  // reloads the captures (~30 instructions per row). The GNU attribute after
  // the parameters applies to the call operator; GCC ignores
  // [[gnu::always_inline]] there (it would appertain to the lambda's type).
  auto serve = [&](size_t i) __attribute__((always_inline)) {
    std::span<std::byte> dst(dsts[i], copy && dsts[i] ? row_bytes_ : 0);
    if (count_frequency) increments.Add(probe.hash(i));
    TickUpkeep(first_tick + i, &next_halving, &increments);
    const uint32_t now = static_cast<uint32_t>(first_tick + i);
    // A row the hints found is served where they found it, without the lock
    // if no writer interferes; a row the hints saw in its second set is
    // otherwise served from that set alone when the hint still holds under
    // its lock; every other row takes the ordinary lookup.
    const int hinted_way = probe.hinted_way(i);
    const uint64_t hinted_set = probe.hinted_set(i);
    const bool found =
        (hinted_way >= 0 && ServeUnlocked<kWays>(row_ids[i], hinted_set, hinted_way, now, dst, pin, &counts)) ||
        (probe.in_second(i) && hinted_way >= 0 &&
         ServeHintedHit<kWays>(row_ids[i], hinted_set, hinted_way, now, dst, pin, &counts)) ||
        LookupHashed<kWays>(row_ids[i], probe.hash(i), probe.first_set(i), probe.first_way(i), now, dst, pin,
                            &counts);
    hit[i] = found ? 1 : 0;
  };
  probe.Run(serve);
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
  // rows are found by the same probe, which here requests index lines only.
  StagedSetProbe<0> probe(hasher_, StorageIn<0>(), row_ids, /*prefetch_payloads=*/false);
  const bool count_frequency = CountsFrequency();
  SketchIncrementBurst increments(sketch_);
  const uint64_t first_tick = TakeTicks(n);
  uint64_t next_halving = FirstHalvingFrom(first_tick);
  LookupCounts counts;
  auto record = [&](size_t i) __attribute__((always_inline)) {
    if (count_frequency) increments.Add(probe.hash(i));
    TickUpkeep(first_tick + i, &next_halving, &increments);
    // A relaxed store, like an unlocked hit's stamp (ServeUnlocked): on a
    // row a writer has moved meanwhile it stamps the way's new row.
    const int way = probe.hinted_way(i);
    if (way >= 0) View(probe.hinted_set(i)).set_stamp(uint32_t(way), static_cast<uint32_t>(first_tick + i));
    ++counts.hits;
  };
  probe.Run(record);
  increments.Flush();
  counts.AddTo(Shard());
}

}  // namespace engram::cache
