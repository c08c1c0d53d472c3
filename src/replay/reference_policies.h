// Fully associative bounds for the set-associative RowCache, replayed with the
// same gather protocol (look up every distinct row of a gather, then offer
// every miss):
//   full-lru  one LRU list over all capacity_rows slots, every miss admitted;
//   belady    the offline optimum MIN: every miss admitted, and when full the
//             resident whose next use is farthest in the future is evicted
//             (the reference the default policy's targets are measured against);
//   belady-bypass  MIN for a cache that may refuse rows, as the RowCache
//             policies may: a miss whose next use is no sooner than every
//             resident's is not admitted. Never more misses than belady.
#pragma once

#include <cstdint>

#include "src/replay/gather_trace.h"
#include "src/replay/replay_stats.h"
#include "src/replay/trace_index.h"

namespace engram::replay {

// capacity_rows must be >= 1.
PolicyRun SimulateFullLru(const GatherTrace& trace, const TraceIndex& index, uint64_t capacity_rows);
PolicyRun SimulateBelady(const GatherTrace& trace, const TraceIndex& index, uint64_t capacity_rows);
PolicyRun SimulateBeladyBypass(const GatherTrace& trace, const TraceIndex& index, uint64_t capacity_rows);

}  // namespace engram::replay
