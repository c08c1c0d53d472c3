// RowCacheConfig: every knob of the row cache's placement and admission.
//
// The cache is set-associative: a row may live only in the ways of its
// candidate set(s), chosen by a hash of its row ID. Everything the report in
// docs/ calls out is a knob here. The public face is the spec string that
// parses into this struct (StoreOptions::cache_policy; the grammar is in
// include/engram/cache_policy.h); the statistics are public in
// include/engram/cache_stats.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engram/cache_stats.h"
#include "engram/status.h"

namespace engram {

// Whether a missed row may replace the chosen victim of a full candidate set.
enum class AdmissionRule : uint8_t {
  kAlways,             // every insert replaces the victim (no admission filter)
  kEstimateAtLeast,    // admit if estimate(row) >= estimate(victim)  (the reported cache)
  kEstimateGreater,    // admit if estimate(row) >  estimate(victim)  (TinyLFU)
  // Admit if the row's previous access is more recent than the victim's last
  // access: the row came back sooner than the victim has been idle (LIRS's
  // test of reuse distance against recency). A row seen for the first time,
  // or too long ago to be remembered, is refused. Previous accesses of rows
  // not in the cache are kept in a ghost history (ghost_* below); the sketch
  // then only orders the victims.
  kReuseDistance,
  // kReuseDistance, except that a row failing the test is still admitted
  // with a probability the cache adapts online from regret: it rises while
  // refused rows come back sooner than the victims are idle, and falls while
  // evicted rows come back (src/cache/adaptive_admission.h).
  kAdaptiveReuse,
};

// Whether the rule reads the ghost history (ghost_* below).
inline bool UsesGhostHistory(AdmissionRule rule) {
  return rule == AdmissionRule::kReuseDistance || rule == AdmissionRule::kAdaptiveReuse;
}

// How the victim is chosen among the residents of the candidate set(s).
enum class VictimOrder : uint8_t {
  kLowestEstimateThenOldest,  // min (usage estimate, last access)  (the reported cache)
  kOldest,                    // min last access: LRU within the set(s)
};

struct RowCacheConfig {
  // Named preset this config came from ("legacy", "two-choice", ...), or "custom".
  std::string name = "custom";

  uint32_t ways = 4;             // slots per set, 1..32
  uint32_t candidate_sets = 1;   // 1 or 2 sets a row may live in
  // With 2 candidate sets: before evicting, try to move a resident of a full
  // candidate set to its other (non-full) set, cuckoo-style, up to this many
  // hops. 0 disables relocation.
  uint32_t relocation_depth = 0;

  AdmissionRule admission = AdmissionRule::kEstimateAtLeast;
  // Caffeine-style defense against hash flooding: a candidate that loses
  // admission but whose estimate is >= warm_threshold is admitted anyway with
  // probability warm_admit_probability. 0 disables.
  double warm_admit_probability = 0.0;
  uint32_t warm_threshold = 6;
  VictimOrder victim_order = VictimOrder::kLowestEstimateThenOldest;
  // Recency guard: a resident not accessed for more than
  // stale_after * capacity_rows ticks (one tick per Lookup/Insert) is stale:
  // it is evicted before any fresh resident of the candidate sets (oldest
  // first) and loses admission to any candidate, whatever the sketch says.
  // Old popularity then cannot hold the cache against a newer working set
  // that is re-read soon. 0 disables (the reported cache). Ages are kept
  // exactly up to 2^30 ticks, so a longer period acts as 2^30 ticks.
  double stale_after = 0.0;

  // Count-min frequency sketch. Every lookup (hits and misses) increments it.
  uint64_t sketch_bytes = 1u << 20;  // bytes of counters; 0 = size from capacity
  uint32_t sketch_depth = 4;         // counters read per estimate (rows of the sketch), 1..8
  uint32_t counter_bits = 8;         // 4 or 8; counters saturate
  // Conservative update: an increment bumps only the counters at the key's
  // current minimum (spec "update=conservative"; "update=all" = plain).
  bool conservative_update = false;
  // Blocked layout (spec "sketch_layout=blocked"; "rows" = one array per
  // sketch row, as the reported cache): a row's sketch_depth counters share
  // one 64-byte block, so a lookup touches one sketch cache line, not depth.
  bool sketch_blocked = false;
  // Halve every counter every this many operations (ticks of the cache's
  // clock: lookups and inserts); 0 = never.
  // The reported trace saw no halving, so "legacy" uses 0 (never); presets
  // meant to run for a long time age their counters (see Preset()).
  // Each halving walks the whole sketch, so a nonzero period is at least
  // kMinHalvingTicks operations.
  uint64_t halving_period = 0;
  static constexpr uint64_t kMinHalvingTicks = 64;
  // Alternatively a halving period tied to the cache size: halve
  // every max(kMinHalvingTicks, ceil(halving_per_capacity * capacity_rows))
  // operations. 0 = off, else in [kMinHalvingPerCapacity, 1024]; exclusive
  // with halving_period.
  double halving_per_capacity = 0.0;
  static constexpr double kMinHalvingPerCapacity = 0.01;

  // Ghost history for the reuse-distance rules (UsesGhostHistory): when recently seen
  // rows that are not cached were last accessed (src/cache/ghost_history.h).
  // Rows are remembered while the table has room and for at most
  // (3/4 x 2^ghost_epoch_bits) epochs.
  double ghost_per_row = 1.0;       // bytes of history per cached row (16-bit entries)
  uint32_t ghost_epoch_bits = 3;    // bits of an entry that hold its access epoch, 2..8
  uint32_t ghost_epochs = 4;        // epochs per capacity_rows ticks, 1..1024

  uint64_t seed = 0;  // hash seed for set choice and sketch

  bool operator==(const RowCacheConfig&) const = default;

  // Check every field; a bad configuration is an error, never a crash.
  Status Validate() const;

  // Presets: "legacy" (the reported 4-way cache), "ways8", "ways16",
  // "two-choice" (two candidate sets of 4 ways), "lru" (4-way LRU, no
  // admission), "default" (Engram Store's default policy).
  static Result<RowCacheConfig> Preset(std::string_view name);
  // A preset name, optionally followed by overrides, or overrides alone on top
  // of "default": "legacy", "two-choice,ways=8", "ways=8,admission=always,
  // victim=oldest,sets=2,relocate=4,sketch_bytes=1048576,halving=0,seed=7".
  static Result<RowCacheConfig> FromSpec(std::string_view spec);
  // The canonical key=value form (round-trips through FromSpec).
  std::string ToSpec() const;
};

}  // namespace engram
