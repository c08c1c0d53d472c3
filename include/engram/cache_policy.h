// The row cache's policy, as StoreOptions::cache_policy spells it.
//
// The cache is set-associative: a row may live only in the ways of its
// candidate set(s), chosen by a hash of its row ID. A policy says how many
// sets and ways, what to evict from a full set, and whether a missed row may
// replace that victim at all (admission). Every refusal is counted by reason
// (engram/cache_stats.h).
//
// Grammar: a preset name, optionally followed by key=value overrides, or
// overrides alone on top of "default"; items are separated by commas:
//
//   "default"   "legacy"   "two-choice,ways=8"   "ways=8,admission=always"
//
// Presets: legacy (the reported 4-way cache: TinyLFU-style admission by a
// count-min sketch, victim by lowest estimate), ways8, ways16 (legacy with
// more ways), two-choice (legacy with two candidate sets), lru (4-way LRU,
// no admission), default (Engram Store's: two 5-way candidate sets with
// cuckoo relocation, admission by reuse distance; docs/cache-policy.md).
//
// Keys (a bad key or value is an InvalidArgument naming it, never a crash).
// "Operations" are the cache's lookups and inserts; "a capacity of
// operations" is as many operations as the cache holds rows.
//   ways            slots per set, 1..32
//   sets            candidate sets a row may live in, 1 or 2
//   relocate        with sets=2: cuckoo hops tried before evicting, 0..8
//   admission       always | ge (estimate >= victim's) | gt (>) |
//                   reuse (the row came back sooner than the victim has been
//                   idle) | adaptive (reuse, with a refused row still admitted
//                   at a probability adapted online from regret)
//   warm_p          probability in [0, 1] of admitting a row that lost
//                   admission but whose estimate is >= warm_threshold
//   warm_threshold  sketch estimate for warm_p, at most the counter maximum
//   stale           residents idle for more than this many capacities of
//                   operations are evicted first and lose admission; 0 = off, <= 1024
//   victim          estimate (lowest estimate, then oldest) | oldest (LRU)
//   sketch_bytes    bytes of frequency-sketch counters; 0 = sized from the capacity
//   sketch_depth    counters read per estimate, 1..8
//   sketch_layout   rows (one array per sketch row) | blocked (one cache line per row)
//   counter_bits    4 or 8
//   update          all | conservative (bump only the counters at the minimum)
//   halving         halve every counter every this many operations; 0 = never, else >= 64
//   halving_x       or every this many capacities of operations; 0 = off, else 0.01..1024
//   ghost_x         bytes of reuse history per cached row (reuse, adaptive), (0, 1024]
//   ghost_bits      bits of a history entry's epoch, 2..8
//   ghost_epochs    history epochs per capacity of operations, 1..1024
//   seed            hash seed for set choice and sketch
#pragma once

#include <string>
#include <string_view>

#include "engram/status.h"

namespace engram {

// Checks a policy spec and returns it in canonical form: every key spelled
// out, preceded by the preset's name while the spec still is that preset
// (what a store opened with it runs; for logs and reproducible runs).
Result<std::string> CanonicalCachePolicy(std::string_view spec);

}  // namespace engram
