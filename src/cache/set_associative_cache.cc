#include "src/cache/set_associative_cache.h"

#include <algorithm>
#include <bit>
#include <new>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

namespace engram::cache {
namespace {

constexpr uint64_t kMaxSets = uint64_t{1} << 40;
// Bound on the sets one relocation search may visit (and lock): bounded work
// and bounded lock holding per insert, whatever relocation_depth is.
constexpr int kMaxRelocationNodes = 64;

uint32_t FullMask(uint32_t ways) { return ways == 32 ? ~0u : (1u << ways) - 1; }

// Sketch of sketch_bytes == 0: one counter per slot in each sketch row.
uint64_t AutoSketchBytes(const RowCacheConfig& c, uint64_t capacity_rows) {
  uint64_t bits = capacity_rows * c.sketch_depth * c.counter_bits;
  uint64_t bytes = (bits + 7) / 8;
  return std::max<uint64_t>(64, (bytes + 63) & ~uint64_t{63});
}

// How long ago (in ticks) a stamp was written. A stamp from a racing thread
// may be a little ahead of `now`: that is age 0, not 4 billion. Stamps are
// 32-bit; Maintain() clamps every age to kMaxStampAge at least once per
// kStampRefreshTicks, so a true age never reaches 2^31 and reads as negative.
uint32_t AgeOf(uint32_t now, uint32_t stamp) {
  int32_t age = static_cast<int32_t>(now - stamp);
  return age < 0 ? 0 : static_cast<uint32_t>(age);
}

// Ages are exact up to kMaxStampAge and saturate there (any older row is
// "at least this old"); kMaxStampAge + kStampRefreshTicks + the ticks one
// Maintain call may lag stays far below 2^31.
constexpr uint32_t kMaxStampAge = 1u << 30;
constexpr uint64_t kStampRefreshTicks = uint64_t{1} << 29;

uint64_t MaintainTicks(uint64_t capacity_rows) {
  return std::bit_floor(std::clamp<uint64_t>(capacity_rows / 64, 1, 4096));
}

// config.stale_after x capacity, clamped to the ages stamps keep exactly
// (up to kMaxStampAge); 0 = off.
uint32_t StaleTicks(const RowCacheConfig& c, uint64_t capacity_rows) {
  if (c.stale_after <= 0.0) return 0;
  double t = std::ceil(c.stale_after * static_cast<double>(capacity_rows));
  return t >= double(kMaxStampAge) ? kMaxStampAge - 1 : std::max<uint32_t>(1, static_cast<uint32_t>(t));
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

// Ghost history: ghost_per_row bytes per slot, in whole 64-byte buckets.
uint64_t GhostBytes(const RowCacheConfig& c, uint64_t capacity_rows) {
  const uint64_t bytes = static_cast<uint64_t>(std::ceil(c.ghost_per_row * static_cast<double>(capacity_rows)));
  return std::max<uint64_t>(64, (bytes + 63) & ~uint64_t{63});
}

}  // namespace

CacheFootprint FootprintFor(const RowCacheConfig& config, uint64_t num_sets, uint32_t row_bytes) {
  SetLayout layout = SetLayout::For(config.ways);
  CacheFootprint f;
  f.num_sets = num_sets;
  f.index_bytes = num_sets * layout.stride;
  f.slab_bytes = num_sets * config.ways * uint64_t{row_bytes};
  f.sketch_bytes = config.sketch_bytes != 0 ? config.sketch_bytes : AutoSketchBytes(config, num_sets * config.ways);
  f.ghost_bytes = config.admission == AdmissionRule::kReuseDistance ? GhostBytes(config, num_sets * config.ways) : 0;
  f.fixed_bytes = kStatShards * sizeof(StatShard);
  return f;
}

uint64_t SetsForBudget(const RowCacheConfig& config, uint64_t budget_bytes, uint32_t row_bytes) {
  SetLayout layout = SetLayout::For(config.ways);
  const bool auto_sketch = config.sketch_bytes == 0;
  uint64_t per_set = layout.stride + config.ways * uint64_t{row_bytes};
  uint64_t fixed = kStatShards * sizeof(StatShard);
  if (auto_sketch) {
    per_set += (uint64_t{config.ways} * config.sketch_depth * config.counter_bits + 7) / 8;
    fixed += 64;  // the sketch's rounding up to whole 64-byte lines
  } else {
    fixed += config.sketch_bytes;
  }
  if (config.admission == AdmissionRule::kReuseDistance) {
    per_set += static_cast<uint64_t>(std::ceil(config.ghost_per_row * config.ways));
    fixed += 64;  // rounding up to whole buckets
  }
  if (budget_bytes <= fixed) return 0;
  uint64_t sets = std::min((budget_bytes - fixed) / per_set, kMaxSets);
  while (sets > 0 && FootprintFor(config, sets, row_bytes).total() > budget_bytes) --sets;
  // The estimate charges the sketch's and history's rounding to whole lines
  // up front, so it can fall a set short (a budget of exactly N sets'
  // footprint, as BudgetForRows gives, must give N sets).
  while (sets < kMaxSets && FootprintFor(config, sets + 1, row_bytes).total() <= budget_bytes) ++sets;
  return sets;
}

Result<std::unique_ptr<SetAssociativeRowCache>> SetAssociativeRowCache::Make(const RowCacheConfig& config,
                                                                             uint64_t num_sets, uint32_t row_bytes) {
  ENGRAM_RETURN_IF_ERROR(config.Validate());
  if (num_sets == 0 || num_sets > kMaxSets) {
    return Status::InvalidArgument("row cache: set count " + std::to_string(num_sets) + " must be in 1..2^40");
  }
  CacheFootprint footprint = FootprintFor(config, num_sets, row_bytes);
  ENGRAM_ASSIGN_OR_RETURN(AnonymousMemory index, AnonymousMemory::Allocate(footprint.index_bytes, "index"));
  ENGRAM_ASSIGN_OR_RETURN(AnonymousMemory slab, AnonymousMemory::Allocate(footprint.slab_bytes, "row slab"));
  // The sketch and the ghost history map their own anonymous memory in
  // their constructors, which throw std::bad_alloc when it cannot be
  // mapped: a budget the machine cannot back is a status here, not an
  // exception out of the library.
  try {
    return std::unique_ptr<SetAssociativeRowCache>(
        new SetAssociativeRowCache(config, num_sets, row_bytes, footprint, std::move(index), std::move(slab)));
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("row cache: cannot allocate the sketch (" +
                                     std::to_string(footprint.sketch_bytes) + " B) and ghost history (" +
                                     std::to_string(footprint.ghost_bytes) + " B)");
  }
}

SetAssociativeRowCache::SetAssociativeRowCache(const RowCacheConfig& config, uint64_t num_sets, uint32_t row_bytes,
                                               const CacheFootprint& footprint, AnonymousMemory index,
                                               AnonymousMemory slab)
    : config_(config),
      layout_(SetLayout::For(config.ways)),
      num_sets_(num_sets),
      row_bytes_(row_bytes),
      footprint_(footprint),
      hasher_(config.seed, num_sets, config.candidate_sets),
      index_(std::move(index)),
      slab_(std::move(slab)),
      // The cache halves the sketch itself, on its clock (see Tick64): the
      // sketch's own period would be one more shared counter per lookup.
      sketch_(footprint.sketch_bytes, config.sketch_depth, config.counter_bits, config.seed, config.conservative_update,
              config.sketch_blocked),
      halving_ticks_(HalvingPeriod(config, num_sets * config.ways)),
      stale_ticks_(StaleTicks(config, num_sets * config.ways)),
      relocation_min_empty_(std::max<uint64_t>(1, num_sets * config.ways / 1024)),
      empty_slots_(num_sets * config.ways),
      huge_pages_at_empty_(HugePagesAtEmpty(num_sets * config.ways,
                                            row_bytes != 0 ? row_bytes : double(layout_.stride) / config.ways)),
      maintain_ticks_(MaintainTicks(num_sets * config.ways)),
      // Every set once per kStampRefreshTicks, which hold
      // kStampRefreshTicks / maintain_ticks_ calls.
      refresh_sets_per_call_((num_sets + kStampRefreshTicks / maintain_ticks_ - 1) /
                             (kStampRefreshTicks / maintain_ticks_)),
      shards_(new StatShard[kStatShards]) {
  if (config.admission == AdmissionRule::kReuseDistance) {
    const uint64_t capacity = num_sets * config.ways;
    ghost_ = std::make_unique<GhostHistory>(footprint.ghost_bytes, config.ghost_epoch_bits,
                                            std::max<uint64_t>(1, capacity / config.ghost_epochs), config.seed);
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
      if (((s.occupied() >> w) & 1) && AgeOf(now, s.stamps()[w]) > kMaxStampAge) s.stamps()[w] = now - kMaxStampAge;
    }
    s.Unlock();
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

namespace {
template <uint32_t W>
inline int FindFixed(const uint64_t* keys, uint32_t occupied, uint64_t row_id) {
  uint32_t match = 0;
  for (uint32_t i = 0; i < W; ++i) match |= uint32_t{keys[i] == row_id} << i;
  match &= occupied;
  return match ? std::countr_zero(match) : -1;
}
}  // namespace

int SetAssociativeRowCache::FindWay(SetView& s, uint64_t row_id) const {
  const uint64_t* keys = s.keys();
  const uint32_t occupied = s.occupied();
  // Fixed widths let the compiler unroll the tag compare into branch-free code.
  switch (layout_.ways) {
    case 4: return FindFixed<4>(keys, occupied, row_id);
    case 5: return FindFixed<5>(keys, occupied, row_id);
    case 8: return FindFixed<8>(keys, occupied, row_id);
    case 16: return FindFixed<16>(keys, occupied, row_id);
    default:
      for (uint32_t i = 0; i < layout_.ways; ++i) {
        if (keys[i] == row_id && ((occupied >> i) & 1)) return static_cast<int>(i);
      }
      return -1;
  }
}

void SetAssociativeRowCache::LookupCounts::AddTo(StatShard& shard) const {
  if (hits != 0) shard.hits.fetch_add(hits, std::memory_order_relaxed);
  if (misses != 0) shard.misses.fetch_add(misses, std::memory_order_relaxed);
  if (pinned_delta != 0) shard.pinned_delta.fetch_add(pinned_delta, std::memory_order_relaxed);
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
  sketch_.Prefetch(hash);
  __builtin_prefetch(index_.data() + c.first * layout_.stride);
  if (c.second != c.first) __builtin_prefetch(index_.data() + c.second * layout_.stride);
  sketch_.Increment(hash);
  const uint32_t now = static_cast<uint32_t>(Tick64());
  LookupCounts counts;
  const bool found = LookupHashed(row_id, hash, now, dst, pin, &counts);
  counts.AddTo(Shard());
  return found;
}

bool SetAssociativeRowCache::LookupHashed(uint64_t row_id, uint64_t hash, uint32_t now, std::span<std::byte> dst,
                                          PinAction pin, LookupCounts* counts) {
  const CandidateSets c = hasher_.Candidates(hash);
  auto hit = [&](SetView& s, uint64_t set, int way) {
    if (row_bytes_ != 0 && !dst.empty()) {
      std::memcpy(dst.data(), Payload(set, way), std::min<size_t>(dst.size(), row_bytes_));
    }
    s.stamps()[way] = now;
    const uint32_t bit = 1u << way;
    if (pin == PinAction::kConsume && (s.pinned() & bit)) {
      s.set_pinned(s.pinned() & ~bit);
      --counts->pinned_delta;
    }
    ++counts->hits;
  };

  SetView first = View(c.first);
  first.Lock();
  int way = FindWay(first, row_id);
  if (way >= 0) {
    hit(first, c.first, way);
    first.Unlock();
    return true;
  }
  if (c.second == c.first) {
    first.Unlock();
    ++counts->misses;
    return false;
  }
  // Not in the first set. A relocation could be moving the row between its
  // two sets right now, so hold both (ascending order) for a definite answer.
  SetView second = View(c.second);
  if (c.second > c.first) {
    second.Lock();
  } else {
    first.Unlock();
    second.Lock();
    first.Lock();
    way = FindWay(first, row_id);
  }
  bool found = true;
  if (way >= 0) {
    hit(first, c.first, way);
  } else if ((way = FindWay(second, row_id)) >= 0) {
    hit(second, c.second, way);
  } else {
    found = false;
    ++counts->misses;
  }
  second.Unlock();
  first.Unlock();
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
  s.keys()[way] = row_id;
  s.stamps()[way] = stamp;
  s.set_occupied(s.occupied() | bit);
  s.set_pinned(pinned ? (s.pinned() | bit) : (s.pinned() & ~bit));
  if (row_bytes_ != 0) {
    uint8_t* dst = Payload(set, way);
    size_t n = std::min<size_t>(row.size(), row_bytes_);
    if (n != 0) std::memcpy(dst, row.data(), n);
    if (n < row_bytes_) std::memset(dst + n, 0, row_bytes_ - n);  // a short row never leaves stale bytes
  }
}

void SetAssociativeRowCache::MoveEntry(uint64_t from_set, uint32_t from_way, uint64_t to_set, uint32_t to_way) {
  SetView from = View(from_set);
  SetView to = View(to_set);
  to.keys()[to_way] = from.keys()[from_way];
  to.stamps()[to_way] = from.stamps()[from_way];
  to.set_occupied(to.occupied() | (1u << to_way));
  to.set_pinned(to.pinned() & ~(1u << to_way));  // pinned rows are never moved
  from.set_occupied(from.occupied() & ~(1u << from_way));
  if (row_bytes_ != 0) std::memcpy(Payload(to_set, to_way), Payload(from_set, from_way), row_bytes_);
}

bool SetAssociativeRowCache::Relocate(const LockedSets& l, uint64_t* set, uint32_t* way) {
  // Breadth-first search for the shortest chain of moves: a resident of a
  // candidate set moves to its other set, whose resident moves on, ... until
  // a set with a free way. Node i's row sits in way `way` of its parent's set.
  struct Node {
    uint64_t set;
    int parent;
    uint32_t way;
    uint32_t depth;
  };
  Node nodes[kMaxRelocationNodes];
  int n = 0;
  nodes[n++] = {l.sets.first, -1, 0, 0};
  nodes[n++] = {l.sets.second, -1, 0, 0};
  const int roots = n;
  const uint32_t full = FullMask(layout_.ways);
  auto visited = [&](uint64_t s) {
    for (int i = 0; i < n; ++i) {
      if (nodes[i].set == s) return true;
    }
    return false;
  };

  int found = -1;
  for (int i = 0; i < n && found < 0 && n < kMaxRelocationNodes; ++i) {
    if (nodes[i].depth >= config_.relocation_depth) break;  // BFS order: all later nodes are as deep
    SetView s = View(nodes[i].set);
    const uint32_t movable = s.occupied() & ~s.pinned();
    for (uint32_t w = 0; w < layout_.ways && n < kMaxRelocationNodes; ++w) {
      if (!((movable >> w) & 1)) continue;
      const uint64_t alt = hasher_.OtherSet(s.keys()[w], nodes[i].set);
      if (visited(alt)) continue;
      // Never wait for a lock out of order: a busy set is simply not explored.
      if (!View(alt).TryLock()) continue;
      nodes[n++] = {alt, i, w, nodes[i].depth + 1};
      if (View(alt).occupied() != full) {
        found = n - 1;
        break;
      }
    }
  }

  if (found >= 0) {
    uint64_t moves = 0;
    int child = found;
    uint32_t freed_way = 0;
    while (nodes[child].parent >= 0) {
      const Node& c = nodes[child];
      const uint32_t to_way = std::countr_zero(~View(c.set).occupied() & full);
      MoveEntry(nodes[c.parent].set, c.way, c.set, to_way);
      freed_way = c.way;
      child = c.parent;
      ++moves;
    }
    *set = nodes[child].set;
    *way = freed_way;
    Shard().relocations.fetch_add(moves, std::memory_order_relaxed);
  }
  for (int i = roots; i < n; ++i) View(nodes[i].set).Unlock();
  return found >= 0;
}

bool SetAssociativeRowCache::Admit(uint32_t candidate_estimate, uint32_t victim_estimate, uint64_t row_id,
                                   uint32_t now) const {
  switch (config_.admission) {
    case AdmissionRule::kAlways: return true;
    case AdmissionRule::kEstimateAtLeast:
      if (candidate_estimate >= victim_estimate) return true;
      break;
    case AdmissionRule::kEstimateGreater:
    case AdmissionRule::kReuseDistance:  // decided in Place(), never here
      if (candidate_estimate > victim_estimate) return true;
      break;
  }
  // Caffeine's hash-flooding defense: an attacker (or an unlucky workload)
  // cannot keep a warm row out forever by inflating a victim's estimate.
  if (config_.warm_admit_probability <= 0.0 || candidate_estimate < config_.warm_threshold) return false;
  if (config_.warm_admit_probability >= 1.0) return true;
  // Deterministic draw from (row, tick, seed): replayable, and no shared RNG state.
  uint64_t draw = Remix(row_id ^ Remix(uint64_t{now} ^ config_.seed ^ 0xa0761d6478bd642fULL));
  return static_cast<double>(draw >> 11) * 0x1.0p-53 < config_.warm_admit_probability;
}

SetAssociativeRowCache::Placement SetAssociativeRowCache::Place(const LockedSets& l, uint64_t row_id, uint64_t hash,
                                                                uint32_t now, PlaceMode mode,
                                                                uint64_t candidate_age) {
  const uint32_t full = FullMask(layout_.ways);
  const uint64_t candidates[2] = {l.sets.first, l.sets.second};
  const int count = l.two ? 2 : 1;

  // 1. A free way, in the emptier candidate set (the first on a tie).
  int best_free = 0;
  int best_set = -1;
  for (int i = 0; i < count; ++i) {
    int free_ways = std::popcount(~View(candidates[i]).occupied() & full);
    if (free_ways > best_free) {
      best_free = free_ways;
      best_set = i;
    }
  }
  if (best_set >= 0) {
    uint32_t way = std::countr_zero(~View(candidates[best_set]).occupied() & full);
    return {InsertOutcome::kInserted, candidates[best_set], way};
  }

  // 2. Cuckoo relocation makes a free way without evicting anyone -- while
  // enough ways are free anywhere for the search to find one. The search
  // visits up to 64 sets (each a cache miss, ~8 us in all); with under
  // 1/1024 of the slots free it mostly fails, and since slots only ever fill
  // (nothing is erased) the cache stays that full: every insert under
  // pressure would pay it for nothing. The last <= 0.1 % of the slots are
  // then filled only by rows whose own candidate set has the free way.
  if (config_.relocation_depth > 0 && l.two &&
      empty_slots_.load(std::memory_order_relaxed) >= relocation_min_empty_) {
    uint64_t set;
    uint32_t way;
    if (Relocate(l, &set, &way)) return {InsertOutcome::kInserted, set, way};
  }

  // 3. The victim among unpinned residents: a stale one (the oldest) if any,
  // else the lowest (estimate, last access), or the oldest.
  const bool by_estimate = config_.victim_order == VictimOrder::kLowestEstimateThenOldest;
  bool have_victim = false, victim_stale = false;
  uint64_t victim_set = 0;
  uint32_t victim_way = 0, victim_estimate = 0, victim_age = 0;
  for (int i = 0; i < count; ++i) {
    SetView s = View(candidates[i]);
    const uint32_t unpinned = s.occupied() & ~s.pinned();
    for (uint32_t w = 0; w < layout_.ways; ++w) {
      if (!((unpinned >> w) & 1)) continue;
      const uint32_t age = AgeOf(now, s.stamps()[w]);
      const bool stale = stale_ticks_ != 0 && age > stale_ticks_;
      if (victim_stale && !stale) continue;
      const uint32_t estimate = by_estimate && !stale ? sketch_.Estimate(hasher_.Hash(s.keys()[w])) : 0;
      bool better = !have_victim || (stale && !victim_stale) || estimate < victim_estimate ||
                    (estimate == victim_estimate && age > victim_age);
      if (better) {
        have_victim = true;
        victim_stale = stale;
        victim_set = candidates[i];
        victim_way = w;
        victim_estimate = estimate;
        victim_age = age;
      }
    }
  }
  if (!have_victim) return {InsertOutcome::kRefusedAllPinned, 0, 0};

  // 4. Admission (read-ahead rows bypass it; a stale victim always loses).
  // Reuse distance (LIRS's test) decides alone: a row whose previous access
  // is remembered and more recent than the victim's last access is expected
  // back sooner than the victim; one not remembered (first seen, or seen too
  // long ago) or older than the victim is refused. The sketch only orders
  // the victims: a count cannot tell a row about to be re-read from an old
  // popular one (bench/RESULTS.md, "Default policy").
  if (mode == PlaceMode::kAdmit && ghost_ && !victim_stale) {
    if (!(candidate_age < victim_age)) return {InsertOutcome::kRefusedLostAdmission, 0, 0};
    return {InsertOutcome::kInsertedEvicted, victim_set, victim_way};
  }
  if (mode == PlaceMode::kAdmit && config_.admission != AdmissionRule::kAlways && !victim_stale) {
    if (!by_estimate) victim_estimate = sketch_.Estimate(hasher_.Hash(View(victim_set).keys()[victim_way]));
    if (!Admit(sketch_.Estimate(hash), victim_estimate, row_id, now)) {
      return {InsertOutcome::kRefusedLostAdmission, 0, 0};
    }
  }
  return {InsertOutcome::kInsertedEvicted, victim_set, victim_way};
}

InsertOutcome SetAssociativeRowCache::Insert(uint64_t row_id, std::span<const std::byte> row) {
  const uint64_t hash = hasher_.Hash(row_id);
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
  const uint64_t candidate_age = ghost_ ? ghost_->Touch(hash, now64) : GhostHistory::kNever;
  Placement p = Place(l, row_id, hash, now, PlaceMode::kAdmit, candidate_age);
  uint64_t evicted_hash = 0, evicted_at = 0;
  if (p.outcome == InsertOutcome::kInsertedEvicted && ghost_) {
    SetView v = View(p.set);
    evicted_hash = hasher_.Hash(v.keys()[p.way]);
    evicted_at = now64 - std::min<uint64_t>(now64, AgeOf(now, v.stamps()[p.way]));
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
      s.set_pinned(s.pinned() | (1u << way));
      stats.pinned_delta.fetch_add(1, std::memory_order_relaxed);
    }
    UnlockCandidates(l);
    stats.pinned_inserts.fetch_add(1, std::memory_order_relaxed);
    return InsertOutcome::kAlreadyPresent;
  }
  Placement p = Place(l, row_id, hash, now, PlaceMode::kPinned);
  if (p.outcome == InsertOutcome::kRefusedAllPinned) {
    UnlockCandidates(l);
    stats.pinned_refusals.fetch_add(1, std::memory_order_relaxed);
    return p.outcome;
  }
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
