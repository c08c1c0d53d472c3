// Dense row numbering and next-use distances of a trace: what the
// fully associative reference simulators (full-lru, belady) need. Built once
// per trace and shared by every capacity of a sweep.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "src/replay/gather_trace.h"

namespace engram::replay {

struct TraceIndex {
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

  std::vector<uint32_t> dense;     // per lookup: the row's number in [0, distinct_rows)
  std::vector<uint64_t> next_use;  // per lookup: index of the row's next lookup, or kNever
  uint32_t distinct_rows = 0;      // = compulsory misses of any cache

  static TraceIndex Build(const GatherTrace& trace);
};

}  // namespace engram::replay
