// SetAssociativeRowCache: the one RowCache implementation -- the mechanism
// (sets, locks, clock, sketch upkeep, statistics); the policy is in the four
// placement steps it runs, each its own type chosen by RowCacheConfig.
//
//  - A row lives in one of its candidate sets (1 or 2, SetHasher).
//  - Placement of a missed row (Place), in this order:
//      1. FreeWay (free_way.h): a free way in the emptier candidate set;
//      2. CuckooRelocation (cuckoo_relocation.h): with relocation_depth > 0,
//         moves residents to their other sets to free a way, evicting no one;
//      3. VictimChoice (victim_choice.h): else the unpinned resident to
//         replace (lowest estimate then oldest, or oldest; stale first);
//      4. Admission (admission.h): whether the row replaces that victim.
//    Read-ahead rows (InsertPinned) skip step 4.
//  - Pinned rows (InsertPinned) are never evicted and never relocated.
//
// Logical clock: every Lookup, Insert and InsertPinned takes one tick from a
// global counter; a hit stamps the way with its lookup's tick, an insert with
// its own. Stamps are 32-bit and compared as ages relative to the current
// tick. A cache may run for far more than 2^32 ticks (minutes at millions of
// lookups a second), so the clock's upkeep (Maintain) clamps every age to
// 2^30 at least once per 2^29 ticks: ages are exact below 2^30 and saturate
// there, and an idle row never wraps round to look young. The same upkeep
// keeps the ghost history's sweep up with the clock when nothing misses.
//
// Concurrency: each set's lock lives in the set (set_layout.h). Operations on
// two candidate sets lock them in ascending set order; relocation takes any
// further set only with TryLock and skips it when busy, so no thread ever
// waits while holding a lock out of order: deadlock-free. A Lookup copies the
// row while holding the set's lock; writers hold the same lock, so a copied
// row is never torn. LookupBatch serves the hits its hints found without the
// lock, by an unlocked read the set's version validates (set_layout.h), and
// takes the lock only when a writer interfered. With direct placement
// (set_hasher.h) a batch serves hits from the residency bitmap alone
// (residency_bitmap.h): no index line, no lock, no version check.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "src/cache/admission.h"
#include "src/cache/anonymous_memory.h"
#include "src/cache/cache_config.h"
#include "src/cache/cache_sizing.h"
#include "src/cache/cuckoo_relocation.h"
#include "src/cache/frequency_sketch.h"
#include "src/cache/ghost_history.h"
#include "src/cache/huge_page_promotion.h"
#include "src/cache/residency_bitmap.h"
#include "src/cache/row_cache.h"
#include "src/cache/row_copy.h"
#include "src/cache/set_hasher.h"
#include "src/cache/set_layout.h"
#include "src/cache/sketch_increment_burst.h"
#include "src/cache/set_probe.h"
#include "src/cache/set_storage.h"
#include "src/cache/stat_shard.h"
#include "src/cache/victim_choice.h"

namespace engram::cache {

class SetAssociativeRowCache final : public RowCache {
 public:
  // config must be valid; num_sets >= 1. max_rows: the row IDs the cache
  // will see are below it (RowCache::kNoRowLimit: any); when every one has a
  // slot, placement is direct (set_hasher.h).
  // `regions`, if given, provides the index and the row slab (RowCache::Create).
  static Result<std::unique_ptr<SetAssociativeRowCache>> Make(const RowCacheConfig& config, uint64_t num_sets,
                                                              uint32_t row_bytes, uint64_t max_rows = kNoRowLimit,
                                                              const CacheRegionAllocator& regions = {});

  bool Lookup(uint64_t row_id, std::span<std::byte> dst, PinAction pin = PinAction::kConsume) override;
  // In stages over groups of rows (set_associative_batch_lookup.cc): a
  // group's index lines, then its payloads, are prefetched before its first
  // row is served (set_probe.h), and the hits' sketch counts applied in
  // bursts (sketch_increment_burst.h).
  size_t LookupBatch(std::span<const uint64_t> row_ids, std::span<std::byte* const> dsts, PinAction pin,
                     std::span<uint8_t> hit) override;
  InsertOutcome Insert(uint64_t row_id, std::span<const std::byte> row) override;
  // Pipelined (set_associative_batch_insert.cc): the candidate sets' index
  // lines, the sketch line and the history bucket of a row are prefetched
  // kInsertAhead rows before its Insert.
  void InsertBatch(std::span<const uint64_t> row_ids, std::span<const std::byte* const> rows,
                   std::span<InsertOutcome> outcomes) override;
  InsertOutcome InsertPinned(uint64_t row_id, std::span<const std::byte> row) override;
  bool Unpin(uint64_t row_id) override;
  std::vector<ResidentRow> ResidentRowsByValue() override;
  bool InsertIntoFreeWay(uint64_t row_id, std::span<const std::byte> row, uint32_t estimate) override;

  void CommitMemory() override { huge_pages_.Start(MemoryRegions(), /*populate=*/true); }
  void WaitForMemory() override { huge_pages_.Wait(); }
  RowCacheStats Stats() const override;
  const RowCacheConfig& config() const override { return config_; }
  uint64_t capacity_rows() const override { return num_sets_ * layout_.ways; }
  uint32_t row_bytes() const override { return row_bytes_; }
  uint64_t memory_bytes() const override { return footprint_.total(); }

  std::optional<SharedCacheGeometry> SharedGeometry() const override;
  const uint8_t* index_data() const override { return index_.data(); }
  const uint8_t* slab_data() const override { return slab_.data(); }
  // Batched like LookupBatch (set_associative_batch_lookup.cc): the batch's
  // ticks are taken at once, and each row's way is found by the unlocked
  // hints and stamped without the set's lock (a row moved meanwhile keeps
  // its old stamp: policy, never correctness).
  void RecordHits(std::span<const uint64_t> row_ids) override;

  // ---- introspection for tests and tools (no stats, no sketch, no clock) ----
  uint64_t num_sets() const { return num_sets_; }
  const SetHasher& hasher() const { return hasher_; }
  // Whether lookups count in the frequency sketch. With direct placement
  // (set_hasher.h) no row ever competes for a slot, so the sketch would never
  // be read to choose a victim or admit a row: lookups skip it, which spares
  // a hit a random cache line read and written. Rows are still ranked by
  // their stamps for the hot set; there a stamp is the tick a row was placed
  // or last looked up one at a time (Lookup): a batch's hits touch no index
  // line to stamp (LookupBatchDirect).
  bool CountsFrequency() const { return !hasher_.direct(); }
  // Whether inserts and Maintain keep the reuse history the admission rule
  // reads (UsesGhostHistory rules, and never with direct placement).
  bool KeepsGhostHistory() const { return ghost_ != nullptr; }
  CandidateSets CandidateSetsOf(uint64_t row_id) const { return hasher_.CandidatesOf(row_id); }
  bool Contains(uint64_t row_id);
  bool IsPinned(uint64_t row_id);
  // The rows resident in one set, in way order.
  std::vector<uint64_t> ResidentsOf(uint64_t set);
  uint32_t EstimateOf(uint64_t row_id) const { return sketch_.Estimate(hasher_.Hash(row_id)); }
  // The hits served without a set lock so far (ServeUnlocked).
  uint64_t UnlockedHitsForTesting() const;
  const FrequencySketch& sketch() const { return sketch_; }
  // As if `ticks` operations touching no row ran: the clock advances and the
  // upkeep those ticks would do (halving, Maintain) is done, without ticking
  // one by one -- so a test can age rows by 2^31 ticks in milliseconds.
  void AdvanceClockForTesting(uint64_t ticks);
  // The next tick, and the ticks between two Maintain calls (a test can
  // then run a batch that does no clock upkeep).
  uint64_t ClockForTesting() const { return clock_.load(std::memory_order_relaxed); }
  uint64_t TicksBetweenUpkeepForTesting() const { return maintain_ticks_; }
  // The background promotion of the index and slab to huge pages (see
  // SlotFilled): tests wait for it and read its progress.
  HugePagePromotion& huge_pages_for_testing() { return huge_pages_; }

 private:
  // The candidate sets of one operation, locked in ascending order.
  struct LockedSets {
    CandidateSets sets;
    bool two;  // two distinct sets
  };

  enum class PlaceMode { kAdmit, kPinned };
  struct Placement {
    InsertOutcome outcome;
    uint64_t set;
    uint32_t way;
  };

  SetAssociativeRowCache(const RowCacheConfig& config, uint64_t num_sets, uint32_t row_bytes, bool direct,
                         const CacheFootprint& footprint, AnonymousMemory index, AnonymousMemory slab);

  SetStorage Storage() const { return StorageIn<0>(); }
  SetView View(uint64_t set) const { return Storage().View(set); }
  uint8_t* Payload(uint64_t set, uint32_t way) const { return Storage().Payload(set, way); }
  // The lookup path is compiled once per common set shape (kWays = 4, 5 or 8
  // ways: one or two index lines, the masks in one byte each) and once for
  // any shape (kWays = 0, the layout read at run time). With the shape fixed
  // at compile time the offsets, the stride and the key compare are
  // constants, and the set's header needs no branch on its width: a hit runs
  // about a tenth fewer instructions
  // (docs/lab-notes/2026-12-02-fast-device-the-batch-lookup-per-set-shape.md).
  // LookupBatch picks the instantiation once per batch.
  template <uint32_t kWays>
  const SetLayout& LayoutFor() const {
    if constexpr (kWays == 0) {
      return layout_;
    } else {
      static constexpr SetLayout kLayout = SetLayout::For(kWays);
      static_assert(kLayout.compact && kLayout.stride % 64 == 0);
      return kLayout;
    }
  }
  // The sets and payloads, addressed with one shape's layout.
  template <uint32_t kWays>
  SetStorage StorageIn() const {
    return {index_.data(), slab_.data(), &LayoutFor<kWays>(), row_bytes_};
  }
  template <uint32_t kWays>
  SetView ViewIn(uint64_t set) const {
    return StorageIn<kWays>().View(set);
  }
  template <uint32_t kWays>
  uint8_t* PayloadIn(uint64_t set, uint32_t way) const {
    return StorageIn<kWays>().Payload(set, way);
  }
  // The way of set `s` (locked) that holds the row, or -1. Defined below, with
  // LookupHashed's first-set path, so that both inline into LookupBatch.
  template <uint32_t kWays = 0>
  int FindWay(const SetView& s, uint64_t row_id) const;
  // What lookups add to the statistics, summed by the caller and added to its
  // shard once (LookupBatch adds a whole batch's with one add per counter).
  struct LookupCounts {
    uint64_t hits = 0, misses = 0;
    uint64_t unlocked_hits = 0;  // of the hits, those served without the lock
    int64_t pinned_delta = 0;
    void AddTo(StatShard& shard) const;
  };
  // Lookup with the row's candidate sets computed and its tick taken (the
  // caller has done the tick's upkeep, TickUpkeep, after counting the row in
  // the sketch: see Lookup); the outcome is added to *counts.
  // way_hint: the way of the first set the row was seen in without the lock
  // (StagedSetProbe), or -1; checked under the lock before it is used.
  template <uint32_t kWays = 0>
  bool LookupHashed(uint64_t row_id, uint64_t hash, uint64_t first_set, int way_hint, uint32_t now,
                    std::span<std::byte> dst, PinAction pin, LookupCounts* counts);
  // A hit on (set, way) if that way still holds row_id once the set is
  // locked (a hint read without the lock, StagedSetProbe); else false, with
  // nothing changed. A row is served from whichever candidate set holds it,
  // so a hit found here is the one Lookup would find.
  template <uint32_t kWays = 0>
  bool ServeHintedHit(uint64_t row_id, uint64_t set, int way, uint32_t now, std::span<std::byte> dst, PinAction pin,
                      LookupCounts* counts) {
    SetView s = ViewIn<kWays>(set);
    s.Lock();
    const bool holds = (s.occupied() >> way & 1u) && s.keys()[way] == row_id;
    s.Unlock(/*changed=*/holds && ServeHit<kWays>(s, set, way, now, dst, pin, counts));
    return holds;
  }
  // A hit on (set, way), found there by the unlocked hints, served without
  // the set's lock (an unlocked read, set_layout.h): true if the way holds
  // row_id and no writer came between, with the row copied, stamped and
  // counted; false (nothing counted, dst perhaps overwritten) when a writer
  // held or took the lock, the way holds another row, or a read-ahead pin
  // must be consumed -- the caller then looks the row up under the lock.
  // The stamp is written after the check, as a relaxed store: racing a writer
  // it may land on the row that writer has just put in the way (which then
  // carries this batch's tick, at most a batch older than the writer's), and
  // the clock's upkeep never clamps it back (Maintain).
  template <uint32_t kWays = 0>
  [[gnu::always_inline]] bool ServeUnlocked(uint64_t row_id, uint64_t set, int way, uint32_t now,
                                            std::span<std::byte> dst, PinAction pin, LookupCounts* counts) {
    SetView s = ViewIn<kWays>(set);
    const uint32_t bit = 1u << way;
    bool served = false;
    {
      [[maybe_unused]] UnlockedReadScope unchecked;
      const uint32_t version = s.ReadBegin();
      if ((version & 1) == 0 && (s.OccupiedHint() & bit) && s.KeyHint(uint32_t(way)) == row_id &&
          !(pin == PinAction::kConsume && (s.PinnedHint() & bit))) {
        CopyRowOut(PayloadIn<kWays>(set, uint32_t(way)), dst);
        served = s.ReadValid(version);
      }
    }
    if (!served) return false;
    s.set_stamp(uint32_t(way), now);
    ++counts->hits;
    ++counts->unlocked_hits;
    return true;
  }
  // Copies a resident row's payload to dst (none when either is empty).
  [[gnu::always_inline]] void CopyRowOut(const uint8_t* payload, std::span<std::byte> dst) const {
    if (row_bytes_ != 0 && !dst.empty()) CopyRow(dst.data(), payload, std::min<size_t>(dst.size(), row_bytes_));
  }
  // LookupHashed's rest, for a row not in its first set; called with the first
  // set locked, and unlocks it.
  bool LookupPastFirstSet(uint64_t row_id, const CandidateSets& c, uint32_t now, std::span<std::byte> dst,
                          PinAction pin, LookupCounts* counts);
  // A hit on (set, way), its set locked: copy the row out, stamp it, consume
  // its read-ahead pin if asked. Returns whether it changed the set beyond the
  // stamp (a pin consumed), for the release of the lock (SetView::Unlock).
  template <uint32_t kWays = 0>
  bool ServeHit(SetView& s, uint64_t set, int way, uint32_t now, std::span<std::byte> dst, PinAction pin,
                LookupCounts* counts) {
    CopyRowOut(PayloadIn<kWays>(set, uint32_t(way)), dst);
    s.set_stamp(uint32_t(way), now);
    const uint32_t bit = 1u << way;
    ++counts->hits;
    if (pin == PinAction::kConsume && (s.pinned() & bit)) {
      s.set_pinned(s.pinned() & ~bit);
      --counts->pinned_delta;
      return true;
    }
    return false;
  }
  // Insert with the row's hash computed.
  InsertOutcome InsertHashed(uint64_t row_id, uint64_t hash, std::span<const std::byte> row);
  // Prefetches the index lines of a row's candidate sets.
  void PrefetchIndex(const CandidateSets& c) const;
  // Prefetches one set's index lines (always inlined: see ARCHITECTURE.md).
  template <uint32_t kWays>
  void PrefetchSet(uint64_t set) const;
  // LookupBatch with direct placement: a row whose residency bit is set is
  // copied from its slot, a group's payloads prefetched first; any
  // other row takes the ordinary lookup (a miss, or a row placed meanwhile).
  size_t LookupBatchDirect(std::span<const uint64_t> row_ids, std::span<std::byte* const> dsts, PinAction pin,
                           std::span<uint8_t> hit);
  // Direct placement: the slot of step 1 of Place (and of InsertIntoFreeWay)
  // is the row's own (set_hasher.h), free unless the row is resident; a row
  // with no slot gets none.
  bool FindFreeWay(const LockedSets& l, uint64_t row_id, uint64_t* set, uint32_t* way) const;
  // LookupBatch for one set shape (see LayoutFor).
  template <uint32_t kWays>
  size_t LookupBatchIn(std::span<const uint64_t> row_ids, std::span<std::byte* const> dsts, PinAction pin,
                       std::span<uint8_t> hit);
  // One tick of the logical clock per operation; the operation whose tick
  // completes a halving period halves the sketch (exactly one does: ticks
  // are unique), so lookups share no counter beyond the clock itself. Every
  // maintain_ticks_ the ticking operation also does a bounded slice of clock
  // upkeep (Maintain). Called with no set lock held.
  uint64_t Tick64() {
    const uint64_t t = TakeTicks(1);
    TickUpkeep(t);
    return t;
  }
  // n consecutive ticks at once (the first is returned): a batch of n
  // operations takes the clock's locked add once. The operation holding tick
  // t must then call TickUpkeep(t) where it would have called Tick64().
  uint64_t TakeTicks(uint64_t n) { return clock_.fetch_add(n, std::memory_order_relaxed); }
  void TickUpkeep(uint64_t t) {
    uint64_t next_halving = FirstHalvingFrom(t);
    TickUpkeep(t, &next_halving);
  }
  // TickUpkeep for a run of consecutive ticks, with one division for the run
  // instead of one per tick: *next_halving starts at FirstHalvingFrom(the
  // run's first tick) and is advanced here past each halving.
  uint64_t FirstHalvingFrom(uint64_t t) const {
    if (halving_ticks_ == 0) return UINT64_MAX;
    return t + (halving_ticks_ - t % halving_ticks_) % halving_ticks_;
  }
  // `unflushed`: a batch's sketch increments not yet applied, flushed before
  // the tick's upkeep (if it has any) halves the sketch or runs Maintain.
  void TickUpkeep(uint64_t t, uint64_t* next_halving, SketchIncrementBurst* unflushed = nullptr) {
    const bool halve = t == *next_halving;
    const bool maintain = (t & (maintain_ticks_ - 1)) == 0;
    if (!halve && !maintain) return;
    if (unflushed != nullptr) unflushed->Flush();
    if (halve) {
      sketch_.Halve();
      *next_halving += halving_ticks_;
    }
    if (maintain) Maintain(t);
  }
  // Keeps the 32-bit stamps and the ghost history's epochs from wrapping
  // however long the cache only hits: clamps the ages of a slice of sets to
  // kMaxStampAge (every set once per kStampRefreshTicks) and catches the
  // ghost history's sweep up (which inserts alone would leave behind).
  void Maintain(uint64_t now);
  StatShard& Shard() const;

  LockedSets LockCandidates(uint64_t hash);
  void UnlockCandidates(const LockedSets& l);
  // Finds the row in the locked candidate sets.
  bool FindLocked(const LockedSets& l, uint64_t row_id, uint64_t* set, int* way);

  // Places row_id in the locked candidate sets (which do not hold it): free
  // way, relocation, victim choice, admission (kAdmit only).
  // candidate_age: ticks since the row's previous access (GhostHistory), for
  // the reuse-distance rules.
  Placement Place(const LockedSets& l, uint64_t row_id, uint64_t hash, uint32_t now, PlaceMode mode,
                  uint64_t candidate_age = GhostHistory::kNever);
  void WriteEntry(uint64_t set, uint32_t way, uint64_t row_id, uint32_t stamp, std::span<const std::byte> row,
                  bool pinned);

  const RowCacheConfig config_;
  const SetLayout layout_;
  const uint64_t num_sets_;
  const uint32_t row_bytes_;
  const CacheFootprint footprint_;
  const SetHasher hasher_;
  AnonymousMemory index_;
  AnonymousMemory slab_;
  FrequencySketch sketch_;
  // Direct placement only (no slots otherwise): which slots hold their row.
  // Paid from the budget's charge for the sketch, which a direct cache never
  // touches (CountsFrequency); 1 bit per slot against the sketch's 16.
  ResidencyBitmap residency_;
  // Whether any row was ever pinned: until then a batch asked to consume
  // pins has none to consume and may take the direct path.
  std::atomic<bool> ever_pinned_{false};
  // Called under the set's lock before a row is pinned (and, for a row
  // placed pinned, before its residency bit is published).
  void NotePinned() {
    if (!ever_pinned_.load(std::memory_order_relaxed)) ever_pinned_.store(true, std::memory_order_relaxed);
  }
  const uint64_t halving_ticks_;  // halve the sketch every this many ticks; 0 = never
  // Only with the reuse-distance rules: previous accesses of rows not
  // in the cache (recorded on refusal and eviction).
  std::unique_ptr<GhostHistory> ghost_;
  // Placement steps 2-4 (step 1, FreeWay, has no parameters).
  const CuckooRelocation relocation_;
  const VictimChoice victim_choice_;
  const Admission admission_;
  // admission_'s AdaptiveAdmission (which the insert path feeds back), or null.
  const AdaptiveAdmission* const adaptive_;
  // Slots never filled yet: decremented after a row takes a free way, so it
  // is never below the true count (rows are replaced, never erased); tells
  // relocation when a search is no longer worthwhile.
  std::atomic<uint64_t> empty_slots_;
  // A row took a free slot. Once so many slots are filled that nearly all of
  // the slab's 4 KiB pages are committed anyway (HugePagesAtEmpty), the index
  // and slab are promoted to huge pages in the background
  // (HugePagePromotion): probes then gain from far fewer TLB misses, for at
  // most ~10 % more resident memory.
  void SlotFilled() {
    if (empty_slots_.fetch_sub(1, std::memory_order_relaxed) - 1 == huge_pages_at_empty_) {
      huge_pages_.Start(MemoryRegions());
    }
  }
  // Every array a probe or an insert touches at random: index, slab, sketch
  // counters and ghost history (what CommitMemory commits and promotion maps
  // with huge pages).
  std::vector<std::span<uint8_t>> MemoryRegions() const;
  const uint64_t huge_pages_at_empty_;
  std::atomic<uint64_t> clock_{1};
  // Ticks between Maintain calls (a power of two, at most 4096 and at most
  // 1/64 of the capacity, so the ghost history's sweep -- whose epoch is a
  // fraction of the capacity -- never lags by more than a sliver of one).
  const uint64_t maintain_ticks_;
  const uint64_t refresh_sets_per_call_;  // sets whose stamps one Maintain call clamps
  std::unique_ptr<StatShard[]> shards_;
  // Last member: destroyed (its thread stopped) before the regions it works on.
  HugePagePromotion huge_pages_;
};


template <uint32_t kWays>
inline int SetAssociativeRowCache::FindWay(const SetView& s, uint64_t row_id) const {
  const uint64_t* keys = s.keys();
  const uint32_t match =
      set_associative_internal::MatchKeys<kWays>(layout_.ways, row_id, [keys](uint32_t w) { return keys[w]; }) &
      s.occupied();
  return match != 0 ? std::countr_zero(match) : -1;
}

// Most hits are in the first set: that path is always inlined into the lookup
// loops (GCC otherwise outlines it from LookupBatch), the rest (second set,
// miss) is a call.
// The second candidate set is found only for a row not in its first.
template <uint32_t kWays>
[[gnu::always_inline]] inline bool SetAssociativeRowCache::LookupHashed(uint64_t row_id, uint64_t hash,
                                                                        uint64_t first_set, int way_hint,
                                                                        uint32_t now, std::span<std::byte> dst,
                                                                        PinAction pin, LookupCounts* counts) {
  SetView first = ViewIn<kWays>(first_set);
  first.Lock();
  // The hint is usually right, and checking one way is cheaper than all.
  const bool hinted = way_hint >= 0 && (first.occupied() >> way_hint & 1u) && first.keys()[way_hint] == row_id;
  const int way = hinted ? way_hint : FindWay<kWays>(first, row_id);
  if (way < 0) {
    return LookupPastFirstSet(row_id, {first_set, hasher_.Second(hash, first_set)}, now, dst, pin, counts);
  }
  first.Unlock(/*changed=*/ServeHit<kWays>(first, first_set, way, now, dst, pin, counts));
  return true;
}

}  // namespace engram::cache
