#include "src/cache/set_associative_cache.h"

#include <algorithm>
#include <bit>
#include <new>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "src/cache/free_way.h"
#include "src/cache/logical_clock.h"

namespace engram::cache {
namespace {

uint64_t MaintainTicks(uint64_t capacity_rows) {
  return std::bit_floor(std::clamp<uint64_t>(capacity_rows / 64, 1, 4096));
}

// The empty-slot count at which the index and slab go to huge pages: when a
// fraction f of the slots is filled, rows scattered by hash have committed
// 1 - (1 - f)^k of the 4 KiB pages holding k slots each; at 90 % (f = 14 %
// for 264-B rows) huge pages add at most ~10 % resident memory. Never later
// than half full (large rows, a page or more each).
uint64_t HugePagesAtEmpty(uint64_t capacity_rows, double bytes_per_slot) {
  const double slots_per_page = std::max(1.0, 4096.0 / bytes_per_slot);
  const double fill = std::min(0.5, 1.0 - std::pow(0.1, 1.0 / slots_per_page));
  return capacity_rows - static_cast<uint64_t>(std::ceil(fill * static_cast<double>(capacity_rows)));
}

// The sketch's halving period in ticks (operations): the absolute one, or
// the one tied to the capacity (at least kMinHalvingTicks, so a tiny cache
// does not halve its sketch on every operation); 0 = never.
uint64_t HalvingPeriod(const RowCacheConfig& c, uint64_t capacity_rows) {
  if (c.halving_per_capacity <= 0.0) return c.halving_period;
  return std::max<uint64_t>(RowCacheConfig::kMinHalvingTicks,
                            static_cast<uint64_t>(std::ceil(c.halving_per_capacity * double(capacity_rows))));
}

}  // namespace

Result<std::unique_ptr<SetAssociativeRowCache>> SetAssociativeRowCache::Make(const RowCacheConfig& config,
                                                                             uint64_t num_sets, uint32_t row_bytes,
                                                                             uint64_t max_rows,
                                                                             const CacheRegionAllocator& regions) {
  ENGRAM_RETURN_IF_ERROR(config.Validate());
  if (num_sets == 0 || num_sets > kMaxSets) {
    return Status::InvalidArgument("row cache: set count " + std::to_string(num_sets) + " must be in 1..2^40");
  }
  CacheFootprint footprint = FootprintFor(config, num_sets, row_bytes);
  auto allocate = regions ? regions : CacheRegionAllocator(&AnonymousMemory::Allocate);
  ENGRAM_ASSIGN_OR_RETURN(AnonymousMemory index, allocate(footprint.index_bytes, "index"));
  ENGRAM_ASSIGN_OR_RETURN(AnonymousMemory slab, allocate(footprint.slab_bytes, "row slab"));
  // The sketch and the ghost history map their own anonymous memory in
  // their constructors, which throw std::bad_alloc when it cannot be
  // mapped: a budget the machine cannot back is a status here, not an
  // exception out of the library.
  try {
    return std::unique_ptr<SetAssociativeRowCache>(
        new SetAssociativeRowCache(config, num_sets, row_bytes, max_rows <= num_sets * config.ways, footprint,
                                   std::move(index), std::move(slab)));
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("row cache: cannot allocate the sketch (" +
                                     std::to_string(footprint.sketch_bytes) + " B) and ghost history (" +
                                     std::to_string(footprint.ghost_bytes) + " B)");
  }
}

SetAssociativeRowCache::SetAssociativeRowCache(const RowCacheConfig& config, uint64_t num_sets, uint32_t row_bytes,
                                               bool direct, const CacheFootprint& footprint, AnonymousMemory index,
                                               AnonymousMemory slab)
    : config_(config),
      layout_(SetLayout::For(config.ways)),
      num_sets_(num_sets),
      row_bytes_(row_bytes),
      footprint_(footprint),
      hasher_(config.seed, num_sets, config.candidate_sets, direct ? config.ways : 0),
      index_(std::move(index)),
      slab_(std::move(slab)),
      // The cache halves the sketch itself, on its clock (see Tick64): the
      // sketch's own period would be one more shared counter per lookup.
      sketch_(footprint.sketch_bytes, config.sketch_depth, config.counter_bits, config.seed, config.conservative_update,
              config.sketch_blocked),
      residency_(direct ? ResidencyBitmap(num_sets * config.ways) : ResidencyBitmap()),
      // Direct placement keeps no frequencies (CountsFrequency): nothing to halve.
      halving_ticks_(direct ? 0 : HalvingPeriod(config, num_sets * config.ways)),
      relocation_(config.relocation_depth, num_sets * config.ways),
      victim_choice_(config, num_sets * config.ways),
      admission_(AdmissionFor(config, num_sets * config.ways)),
      // A directly placed row goes to its own slot or nowhere (Place): no
      // admission test ever runs, so neither the adaptive rule's bookkeeping
      // nor (below) the ghost history it reads is kept.
      adaptive_(direct ? nullptr : std::get_if<AdaptiveAdmission>(&admission_)),
      empty_slots_(num_sets * config.ways),
      huge_pages_at_empty_(HugePagesAtEmpty(num_sets * config.ways,
                                            row_bytes != 0 ? row_bytes : double(layout_.stride) / config.ways)),
      maintain_ticks_(MaintainTicks(num_sets * config.ways)),
      // Every set once per kStampRefreshTicks, which hold
      // kStampRefreshTicks / maintain_ticks_ calls.
      refresh_sets_per_call_((num_sets + kStampRefreshTicks / maintain_ticks_ - 1) /
                             (kStampRefreshTicks / maintain_ticks_)),
      shards_(new StatShard[kStatShards]) {
  if (UsesGhostHistory(config.admission) && !direct) {
    const uint64_t capacity = num_sets * config.ways;
    // The adaptive rule marks refused rows in the history: one fingerprint bit.
    ghost_ = std::make_unique<GhostHistory>(footprint.ghost_bytes, config.ghost_epoch_bits,
                                            std::max<uint64_t>(1, capacity / config.ghost_epochs), config.seed,
                                            /*flag_bits=*/adaptive_ != nullptr ? 1 : 0);
  }
}

void SetAssociativeRowCache::Maintain(uint64_t now64) {
  // The slice is a function of the tick alone, so two Maintain calls running
  // at once (threads whose ticks crossed consecutive boundaries) clamp
  // different sets and need no shared cursor.
  const uint64_t call = now64 / maintain_ticks_;
  const uint32_t now = static_cast<uint32_t>(now64);
  for (uint64_t i = 0; i < refresh_sets_per_call_; ++i) {
    const uint64_t set = (call * refresh_sets_per_call_ + i) % num_sets_;
    SetView s = View(set);
    s.Lock();
    for (uint32_t w = 0; w < layout_.ways; ++w) {
      // A compare-exchange: an unlocked hit may stamp the way meanwhile, and its
      // fresh stamp must not be clamped back to an old one.
      const uint32_t stamp = s.stamp(w);
      if (((s.occupied() >> w) & 1) && AgeOf(now, stamp) > kMaxStampAge) s.ReplaceStamp(w, stamp, now - kMaxStampAge);
    }
    s.Unlock(/*changed=*/false);
  }
  if (ghost_) ghost_->Sweep(now64, GhostHistory::kSweepAllDue);
}

void SetAssociativeRowCache::AdvanceClockForTesting(uint64_t ticks) {
  const uint64_t from = clock_.load(std::memory_order_relaxed);
  const uint64_t end = from + ticks;
  auto next_multiple = [](uint64_t t, uint64_t period) { return (t + period - 1) / period * period; };
  for (uint64_t t = next_multiple(from, maintain_ticks_); t < end; t += maintain_ticks_) Maintain(t);
  if (halving_ticks_ != 0) {
    for (uint64_t t = next_multiple(from, halving_ticks_); t < end; t += halving_ticks_) sketch_.Halve();
  }
  clock_.store(end, std::memory_order_relaxed);
}

StatShard& SetAssociativeRowCache::Shard() const {
  static std::atomic<uint32_t> next_thread{0};
  thread_local const uint32_t mine = next_thread.fetch_add(1, std::memory_order_relaxed) % kStatShards;
  return shards_[mine];
}

std::optional<SharedCacheGeometry> SetAssociativeRowCache::SharedGeometry() const {
  if (row_bytes_ == 0) return std::nullopt;  // an index-only (emulator) cache has no rows to share
  SharedCacheGeometry g;
  g.ways = layout_.ways;
  g.num_sets = num_sets_;
  g.seed = config_.seed;
  g.candidate_sets = hasher_.two_candidates() ? 2 : 1;
  g.direct_placement = hasher_.direct() ? 1 : 0;
  g.row_bytes = row_bytes_;
  g.index_bytes = index_.size();
  g.slab_bytes = slab_.size();
  return g;
}

void SetAssociativeRowCache::LookupCounts::AddTo(StatShard& shard) const {
  if (hits != 0) shard.hits.fetch_add(hits, std::memory_order_relaxed);
  if (misses != 0) shard.misses.fetch_add(misses, std::memory_order_relaxed);
  if (pinned_delta != 0) shard.pinned_delta.fetch_add(pinned_delta, std::memory_order_relaxed);
  if (unlocked_hits != 0) shard.unlocked_hits.fetch_add(unlocked_hits, std::memory_order_relaxed);
}

bool SetAssociativeRowCache::Lookup(uint64_t row_id, std::span<std::byte> dst, PinAction pin) {
  // Request every line this lookup needs before anything waits on one: the
  // sketch's counters, the first set's index line and, with two candidate
  // sets, the second's (probed when the row is not in the first). Counting
  // waits for the sketch line, and the clock's fetch_add and the set lock
  // (locked instructions) wait for every earlier load; with the prefetches
  // issued first, the index lines arrive during that wait, not after it.
  const uint64_t hash = hasher_.Hash(row_id);
  const CandidateSets c = hasher_.Candidates(hash);
  const bool count_frequency = CountsFrequency();
  if (count_frequency) sketch_.Prefetch(hash);
  __builtin_prefetch(index_.data() + c.first * layout_.stride);
  if (c.second != c.first) __builtin_prefetch(index_.data() + c.second * layout_.stride);
  if (count_frequency) sketch_.Increment(hash);
  const uint32_t now = static_cast<uint32_t>(Tick64());
  LookupCounts counts;
  const bool found = LookupHashed(row_id, hash, c.first, -1, now, dst, pin, &counts);
  counts.AddTo(Shard());
  return found;
}

bool SetAssociativeRowCache::LookupPastFirstSet(uint64_t row_id, const CandidateSets& c, uint32_t now,
                                                std::span<std::byte> dst, PinAction pin, LookupCounts* counts) {
  SetView first = View(c.first);
  if (c.second == c.first) {
    first.Unlock(/*changed=*/false);
    ++counts->misses;
    return false;
  }
  // Not in the first set. A relocation could be moving the row between its
  // two sets right now, so hold both (ascending order) for a definite answer.
  int way = -1;
  SetView second = View(c.second);
  if (c.second > c.first) {
    second.Lock();
  } else {
    first.Unlock(/*changed=*/false);
    second.Lock();
    first.Lock();
    way = FindWay(first, row_id);
  }
  bool found = true;
  bool changed = false;  // a read-ahead pin consumed
  if (way >= 0) {
    changed = ServeHit(first, c.first, way, now, dst, pin, counts);
  } else if ((way = FindWay(second, row_id)) >= 0) {
    changed = ServeHit(second, c.second, way, now, dst, pin, counts);
  } else {
    found = false;
    ++counts->misses;
  }
  second.Unlock(changed);
  first.Unlock(changed);
  return found;
}

SetAssociativeRowCache::LockedSets SetAssociativeRowCache::LockCandidates(uint64_t hash) {
  LockedSets l{hasher_.Candidates(hash), false};
  l.two = l.sets.first != l.sets.second;
  if (!l.two) {
    View(l.sets.first).Lock();
  } else {
    View(std::min(l.sets.first, l.sets.second)).Lock();
    View(std::max(l.sets.first, l.sets.second)).Lock();
  }
  return l;
}

void SetAssociativeRowCache::UnlockCandidates(const LockedSets& l) {
  View(l.sets.first).Unlock();
  if (l.two) View(l.sets.second).Unlock();
}

bool SetAssociativeRowCache::FindLocked(const LockedSets& l, uint64_t row_id, uint64_t* set, int* way) {
  SetView first = View(l.sets.first);
  if ((*way = FindWay(first, row_id)) >= 0) {
    *set = l.sets.first;
    return true;
  }
  if (!l.two) return false;
  SetView second = View(l.sets.second);
  if ((*way = FindWay(second, row_id)) >= 0) {
    *set = l.sets.second;
    return true;
  }
  return false;
}

void SetAssociativeRowCache::WriteEntry(uint64_t set, uint32_t way, uint64_t row_id, uint32_t stamp,
                                        std::span<const std::byte> row, bool pinned) {
  SetView s = View(set);
  const uint32_t bit = 1u << way;
  s.set_key(way, row_id);
  s.set_stamp(way, stamp);
  s.set_occupied(s.occupied() | bit);
  s.set_pinned(pinned ? (s.pinned() | bit) : (s.pinned() & ~bit));
  if (row_bytes_ != 0) {
    uint8_t* dst = Payload(set, way);
    size_t n = std::min<size_t>(row.size(), row_bytes_);
    if (n != 0) std::memcpy(dst, row.data(), n);
    if (n < row_bytes_) std::memset(dst + n, 0, row_bytes_ - n);  // a short row never leaves stale bytes
  }
  // Last: a batch that sees the bit copies the row without the lock.
  if (hasher_.direct()) residency_.Set(set * layout_.ways + way);
}

bool SetAssociativeRowCache::FindFreeWay(const LockedSets& l, uint64_t row_id, uint64_t* set, uint32_t* way) const {
  if (hasher_.direct()) {
    if (!hasher_.DirectWay(row_id, way) || (View(l.sets.first).occupied() >> *way & 1u)) return false;
    *set = l.sets.first;
    return true;
  }
  const uint64_t candidates[2] = {l.sets.first, l.sets.second};
  return FreeWay::Find(Storage(), candidates, l.two ? 2 : 1, set, way);
}

SetAssociativeRowCache::Placement SetAssociativeRowCache::Place(const LockedSets& l, uint64_t row_id, uint64_t hash,
                                                                uint32_t now, PlaceMode mode,
                                                                uint64_t candidate_age) {
  const SetStorage storage = Storage();
  const uint64_t candidates[2] = {l.sets.first, l.sets.second};
  const int count = l.two ? 2 : 1;
  uint64_t set;
  uint32_t way;
  if (FindFreeWay(l, row_id, &set, &way)) return {InsertOutcome::kInserted, set, way};
  // Direct placement: a row's own slot is free (it is not resident), so only
  // a row ID beyond the slots gets here, and it is never placed.
  if (hasher_.direct()) return {InsertOutcome::kRefusedLostAdmission, 0, 0};

  uint64_t moves;
  if (relocation_.Worthwhile(l.two, empty_slots_.load(std::memory_order_relaxed)) &&
      relocation_.FreeWay(storage, hasher_, l.sets, &set, &way, &moves)) {
    Shard().relocations.fetch_add(moves, std::memory_order_relaxed);
    return {InsertOutcome::kInserted, set, way};
  }

  if (mode == PlaceMode::kAdmit &&
      RefusesEveryFreshVictim(admission_, AdmissionCandidate{row_id, hash, now, candidate_age})) {
    // Refused unless a victim is stale (any row displaces a stale one): the
    // sets tell, and the candidates' sketch lines need not be read.
    const VictimChoice::Presence present = victim_choice_.Scan(storage, candidates, count, now);
    if (!present.any) return {InsertOutcome::kRefusedAllPinned, 0, 0};
    if (!present.stale) return {InsertOutcome::kRefusedLostAdmission, 0, 0};
  }
  const Victim victim = victim_choice_.Choose(storage, candidates, count, now, sketch_, hasher_);
  if (!victim.found) return {InsertOutcome::kRefusedAllPinned, 0, 0};

  if (mode == PlaceMode::kAdmit &&
      !Admits(admission_, AdmissionCandidate{row_id, hash, now, candidate_age}, victim, sketch_, hasher_)) {
    return {InsertOutcome::kRefusedLostAdmission, 0, 0};
  }
  return {InsertOutcome::kInsertedEvicted, victim.set, victim.way};
}

std::vector<std::span<uint8_t>> SetAssociativeRowCache::MemoryRegions() const {
  std::vector<std::span<uint8_t>> r = {{index_.data(), index_.size()}, {slab_.data(), slab_.size()}};
  if (CountsFrequency()) r.push_back(sketch_.memory());
  if (hasher_.direct()) r.push_back(residency_.memory());
  if (ghost_) r.push_back(ghost_->memory());
  return r;
}

InsertOutcome SetAssociativeRowCache::Insert(uint64_t row_id, std::span<const std::byte> row) {
  return InsertHashed(row_id, hasher_.Hash(row_id), row);
}

InsertOutcome SetAssociativeRowCache::InsertHashed(uint64_t row_id, uint64_t hash, std::span<const std::byte> row) {
  const uint64_t now64 = Tick64();
  const uint32_t now = static_cast<uint32_t>(now64);
  // The history's bucket load overlaps the candidate sets' (the two are
  // independent cache misses on this path).
  if (ghost_) ghost_->Prefetch(hash);
  StatShard& stats = Shard();
  LockedSets l = LockCandidates(hash);
  uint64_t set;
  int way;
  if (FindLocked(l, row_id, &set, &way)) {
    UnlockCandidates(l);
    stats.inserts.fetch_add(1, std::memory_order_relaxed);  // see RefusalReason: keeps misses == inserts + refusals
    return InsertOutcome::kAlreadyPresent;
  }
  // The row's previous access, and this one recorded (the history is
  // lock-free; it is touched under the set locks only because its line is
  // due by now).
  bool was_refused = false;
  const uint64_t candidate_age = ghost_ ? ghost_->Touch(hash, now64, &was_refused) : GhostHistory::kNever;
  if (adaptive_ != nullptr) adaptive_->OnReturn(candidate_age, was_refused);
  Placement p = Place(l, row_id, hash, now, PlaceMode::kAdmit, candidate_age);
  uint64_t evicted_hash = 0, evicted_at = 0;
  if (p.outcome == InsertOutcome::kInsertedEvicted && ghost_) {
    SetView v = View(p.set);
    evicted_hash = hasher_.Hash(v.keys()[p.way]);
    evicted_at = now64 - std::min<uint64_t>(now64, AgeOf(now, v.stamp(p.way)));
    ghost_->Prefetch(evicted_hash);  // loads while the row is copied in
  }
  if (p.outcome == InsertOutcome::kInserted || p.outcome == InsertOutcome::kInsertedEvicted) {
    WriteEntry(p.set, p.way, row_id, now, row, /*pinned=*/false);
  }
  UnlockCandidates(l);
  if (ghost_) {
    // The evicted row leaves the index; its last access goes to the history.
    if (p.outcome == InsertOutcome::kInsertedEvicted) ghost_->Record(evicted_hash, evicted_at, now64);
    ghost_->Sweep(now64);
  }
  if (adaptive_ != nullptr) {
    if (p.outcome == InsertOutcome::kRefusedLostAdmission) {
      ghost_->MarkFlag(hash, now64);
      adaptive_->OnRefused();
    } else if (p.outcome == InsertOutcome::kInsertedEvicted) {
      adaptive_->OnEvicted();
    }
  }
  switch (p.outcome) {
    case InsertOutcome::kInserted:
      stats.inserts.fetch_add(1, std::memory_order_relaxed);
      stats.resident_delta.fetch_add(1, std::memory_order_relaxed);
      SlotFilled();
      break;
    case InsertOutcome::kInsertedEvicted:
      stats.inserts.fetch_add(1, std::memory_order_relaxed);
      stats.evictions.fetch_add(1, std::memory_order_relaxed);
      break;
    case InsertOutcome::kRefusedLostAdmission:
      stats.refusals[int(RefusalReason::kLostAdmission)].fetch_add(1, std::memory_order_relaxed);
      break;
    case InsertOutcome::kRefusedAllPinned:
      stats.refusals[int(RefusalReason::kAllPinned)].fetch_add(1, std::memory_order_relaxed);
      break;
    case InsertOutcome::kAlreadyPresent: break;
  }
  return p.outcome;
}

InsertOutcome SetAssociativeRowCache::InsertPinned(uint64_t row_id, std::span<const std::byte> row) {
  const uint64_t hash = hasher_.Hash(row_id);
  const uint32_t now = static_cast<uint32_t>(Tick64());
  StatShard& stats = Shard();
  LockedSets l = LockCandidates(hash);
  uint64_t set;
  int way;
  if (FindLocked(l, row_id, &set, &way)) {
    SetView s = View(set);
    if (!(s.pinned() & (1u << way))) {
      NotePinned();
      s.set_pinned(s.pinned() | (1u << way));
      stats.pinned_delta.fetch_add(1, std::memory_order_relaxed);
    }
    UnlockCandidates(l);
    stats.pinned_inserts.fetch_add(1, std::memory_order_relaxed);
    return InsertOutcome::kAlreadyPresent;
  }
  Placement p = Place(l, row_id, hash, now, PlaceMode::kPinned);
  // (kRefusedLostAdmission: with direct placement, a row ID with no slot.)
  if (p.outcome == InsertOutcome::kRefusedAllPinned || p.outcome == InsertOutcome::kRefusedLostAdmission) {
    UnlockCandidates(l);
    stats.pinned_refusals.fetch_add(1, std::memory_order_relaxed);
    return p.outcome;
  }
  NotePinned();  // before WriteEntry publishes the row's residency bit
  WriteEntry(p.set, p.way, row_id, now, row, /*pinned=*/true);
  UnlockCandidates(l);
  stats.pinned_inserts.fetch_add(1, std::memory_order_relaxed);
  stats.pinned_delta.fetch_add(1, std::memory_order_relaxed);
  if (p.outcome == InsertOutcome::kInsertedEvicted) {
    stats.evictions.fetch_add(1, std::memory_order_relaxed);
  } else {
    stats.resident_delta.fetch_add(1, std::memory_order_relaxed);
    SlotFilled();
  }
  return p.outcome;
}

bool SetAssociativeRowCache::Unpin(uint64_t row_id) {
  LockedSets l = LockCandidates(hasher_.Hash(row_id));
  uint64_t set;
  int way;
  bool unpinned = false;
  if (FindLocked(l, row_id, &set, &way)) {
    SetView s = View(set);
    if (s.pinned() & (1u << way)) {
      s.set_pinned(s.pinned() & ~(1u << way));
      unpinned = true;
    }
  }
  UnlockCandidates(l);
  if (unpinned) Shard().pinned_delta.fetch_sub(1, std::memory_order_relaxed);
  return unpinned;
}

bool SetAssociativeRowCache::Contains(uint64_t row_id) {
  LockedSets l = LockCandidates(hasher_.Hash(row_id));
  uint64_t set;
  int way;
  bool found = FindLocked(l, row_id, &set, &way);
  UnlockCandidates(l);
  return found;
}

bool SetAssociativeRowCache::IsPinned(uint64_t row_id) {
  LockedSets l = LockCandidates(hasher_.Hash(row_id));
  uint64_t set;
  int way;
  bool pinned = FindLocked(l, row_id, &set, &way) && (View(set).pinned() & (1u << way));
  UnlockCandidates(l);
  return pinned;
}

std::vector<uint64_t> SetAssociativeRowCache::ResidentsOf(uint64_t set) {
  std::vector<uint64_t> rows;
  SetView s = View(set);
  s.Lock();
  for (uint32_t w = 0; w < layout_.ways; ++w) {
    if ((s.occupied() >> w) & 1) rows.push_back(s.keys()[w]);
  }
  s.Unlock();
  return rows;
}

uint64_t SetAssociativeRowCache::UnlockedHitsForTesting() const {
  uint64_t n = 0;
  for (int i = 0; i < kStatShards; ++i) n += shards_[i].unlocked_hits.load(std::memory_order_relaxed);
  return n;
}

RowCacheStats SetAssociativeRowCache::Stats() const {
  RowCacheStats st;
  int64_t pinned = 0, resident = 0;
  for (int i = 0; i < kStatShards; ++i) {
    const StatShard& s = shards_[i];
    auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    st.hits += get(s.hits);
    st.misses += get(s.misses);
    st.inserts += get(s.inserts);
    st.evictions += get(s.evictions);
    st.relocations += get(s.relocations);
    for (int r = 0; r < int(RefusalReason::kCount); ++r) st.refusals[r] += get(s.refusals[r]);
    st.pinned_inserts += get(s.pinned_inserts);
    st.pinned_refusals += get(s.pinned_refusals);
    pinned += s.pinned_delta.load(std::memory_order_relaxed);
    resident += s.resident_delta.load(std::memory_order_relaxed);
  }
  st.lookups = st.hits + st.misses;
  // Shards are read one by one, so under concurrent updates a sum may be
  // transiently negative; clamp instead of wrapping.
  st.pinned_rows = pinned > 0 ? uint64_t(pinned) : 0;
  st.resident_rows = resident > 0 ? uint64_t(resident) : 0;
  st.capacity_rows = capacity_rows();
  st.memory_bytes = memory_bytes();
  st.overhead_bytes = st.memory_bytes - st.capacity_rows * row_bytes_;
  return st;
}

}  // namespace engram::cache

namespace engram::cache {

std::vector<RowCache::ResidentRow> SetAssociativeRowCache::ResidentRowsByValue() {
  std::vector<ResidentRow> rows;
  const uint32_t now = static_cast<uint32_t>(clock_.load(std::memory_order_relaxed));
  for (uint64_t set = 0; set < num_sets_; ++set) {
    SetView s = View(set);
    s.Lock();
    for (uint32_t w = 0; w < layout_.ways; ++w) {
      if (((s.occupied() >> w) & 1) == 0) continue;
      const uint64_t id = s.keys()[w];
      rows.push_back({id, sketch_.Estimate(hasher_.Hash(id)), AgeOf(now, s.stamp(w))});
    }
    s.Unlock(/*changed=*/false);
  }
  std::sort(rows.begin(), rows.end(), [](const ResidentRow& a, const ResidentRow& b) {
    if (a.estimate != b.estimate) return a.estimate > b.estimate;
    if (a.age != b.age) return a.age < b.age;
    return a.row_id < b.row_id;
  });
  return rows;
}

bool SetAssociativeRowCache::InsertIntoFreeWay(uint64_t row_id, std::span<const std::byte> row, uint32_t estimate) {
  const uint64_t hash = hasher_.Hash(row_id);
  const uint32_t now = static_cast<uint32_t>(Tick64());
  LockedSets l = LockCandidates(hash);
  uint64_t set;
  int found_way;
  if (FindLocked(l, row_id, &set, &found_way)) {
    UnlockCandidates(l);
    return false;
  }
  uint32_t way;
  const bool placed = FindFreeWay(l, row_id, &set, &way);
  if (placed) WriteEntry(set, way, row_id, now, row, /*pinned=*/false);
  UnlockCandidates(l);
  if (!placed) return false;
  // The sketch is lock-free; credited after the sets are released.
  for (uint32_t i = 0, n = std::min(estimate, sketch_.max_count()); i < n; ++i) sketch_.Increment(hash);
  Shard().resident_delta.fetch_add(1, std::memory_order_relaxed);
  SlotFilled();
  return true;
}

}  // namespace engram::cache
