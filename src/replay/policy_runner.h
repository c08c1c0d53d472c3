// Replays one trace under several cache policies, each on its own cache.
//
// A policy is "full-lru", "belady" or "belady-bypass" (the fully associative bounds in
// reference_policies.h) or anything RowCacheConfig::FromSpec accepts: a
// preset (legacy, ways8, ways16, two-choice, lru, default) with optional
// key=value overrides. RowCache policies run the real src/cache/ RowCache in
// index-only mode (row_bytes = 0), so emulated and served behaviour agree.
// Every job reads the same immutable trace; results do not depend on the
// number of threads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engram/status.h"
#include "src/replay/gather_trace.h"
#include "src/replay/replay_stats.h"
#include "src/replay/trace_index.h"

namespace engram::replay {

struct PolicyJob {
  std::string policy;
  // Slots. With budget_bytes instead, a RowCache policy gets what a real cache
  // of row_bytes rows fits in that budget after its index, metadata and sketch
  // (RowCache::CapacityForBudget), and the bounds get budget / row_bytes
  // slots (no overhead at all): capacity_rows is then that value.
  uint64_t capacity_rows = 0;
  uint64_t budget_bytes = 0;  // 0 = use capacity_rows
  uint32_t row_bytes = 264;
  // The table's rows, when the trace's row IDs are known to be below it: as in
  // a store, a RowCache with a slot for each of them places rows directly
  // (src/cache/set_hasher.h). Default: any row ID.
  uint64_t table_rows = ~uint64_t{0};
};

struct RunOptions {
  std::optional<uint64_t> sketch_bytes;  // overrides every RowCache policy's sketch size
  unsigned threads = 2;
};

bool IsReferencePolicy(std::string_view policy);  // full-lru, belady
// Fails if the policy name/spec is not understood (before any replay starts).
Status ValidatePolicy(std::string_view policy);

// Results in job order. index: the trace's TraceIndex if the caller already
// has one (it is built here when a reference policy needs it and none is given).
Result<std::vector<PolicyRun>> RunPolicies(std::span<const PolicyJob> jobs, const GatherTrace& trace,
                                           const RunOptions& options, const TraceIndex* index = nullptr);

}  // namespace engram::replay
