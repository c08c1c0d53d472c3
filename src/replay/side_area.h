// SideArea: a small fully associative FIFO beside a RowCache, for measuring
// what a third probe would buy (emulation only; the served cache has none).
//
// Policy "SPEC+side=F" (e.g. "default+side=0.05") replays the RowCache SPEC
// with (1 - F) of the capacity and gives the other F to this area, which
// holds rows the cache's admission refused, in arrival order (S3-FIFO's small
// queue). A lookup that misses the cache probes the area; a hit there counts
// as a hit, and the row is offered to the cache again (its admission, e.g.
// the reuse test, now sees the earlier read), leaving the area if admitted.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

#include "engram/status.h"

namespace engram::replay {

class SideArea {
 public:
  explicit SideArea(uint64_t capacity_rows) : capacity_(capacity_rows) {}

  bool Contains(uint64_t row) const { return live_.count(row) != 0; }
  // Adds a refused row, evicting the oldest when full.
  void Add(uint64_t row);
  void Remove(uint64_t row) { live_.erase(row); }  // its queue entry is skipped when it comes up

 private:
  struct Entry {
    uint64_t row;
    uint64_t seq;
  };
  uint64_t capacity_;
  uint64_t next_seq_ = 0;
  std::deque<Entry> fifo_;                         // arrival order; entries of removed rows are stale
  std::unordered_map<uint64_t, uint64_t> live_;    // row -> seq of its live entry
};

struct SideAreaPolicy {
  std::string cache_spec;  // the RowCache part
  double fraction = 0;     // of the capacity given to the area; 0 = none
};
// Splits "SPEC+side=F" (F in (0, 0.5]); a policy without "+side=" has fraction 0.
Result<SideAreaPolicy> ParseSideAreaPolicy(std::string_view policy);

}  // namespace engram::replay
