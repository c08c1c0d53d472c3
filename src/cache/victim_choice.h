// VictimChoice: the third step of placement -- with no free way to be had,
// the resident that would make room.
//
// Only unpinned residents of the candidate sets are candidates. Order
// (config.victim_order): the lowest (sketch estimate, then oldest last
// access), or the oldest alone (LRU within the sets).
// Recency guard (config.stale_after > 0): a resident untouched for more than
// stale_after x capacity ticks is stale; the oldest stale resident is chosen
// before any fresh one, whatever the sketch says (and admission never
// refuses to replace it).
#pragma once

#include <cstdint>

#include "src/cache/cache_config.h"
#include "src/cache/frequency_sketch.h"
#include "src/cache/set_hasher.h"
#include "src/cache/set_storage.h"

namespace engram::cache {

struct Victim {
  bool found = false;     // false: every candidate slot is pinned
  bool stale = false;
  uint64_t set = 0;
  uint32_t way = 0;
  uint64_t row_id = 0;
  uint32_t age = 0;       // ticks since its last access
  // Its sketch estimate, when the order read it (estimated); else 0.
  bool estimated = false;
  uint32_t estimate = 0;
};

class VictimChoice {
 public:
  VictimChoice(const RowCacheConfig& config, uint64_t capacity_rows);

  // sets: the row's `count` (1 or 2) candidate sets, locked; now: the
  // operation's tick.
  Victim Choose(const SetStorage& storage, const uint64_t* sets, int count, uint32_t now,
                const FrequencySketch& sketch, const SetHasher& hasher) const;

  // Whether Choose would find a victim, and whether that victim would be
  // stale, from the sets alone (no sketch reads): enough when the admission
  // rule refuses the row against any fresh victim.
  struct Presence {
    bool any = false;    // an unpinned resident
    bool stale = false;  // an unpinned stale resident
  };
  Presence Scan(const SetStorage& storage, const uint64_t* sets, int count, uint32_t now) const;

 private:
  const bool by_estimate_;
  // Age beyond which a resident is stale; 0 = no recency guard.
  const uint32_t stale_ticks_;
};

}  // namespace engram::cache
