// engram-replay's outputs: JSON lines, the readable table, the sweep CSV and
// its gnuplot plot.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "engram/status.h"
#include "src/replay/gather_trace.h"
#include "src/replay/replay_stats.h"

namespace engram::replay {

// One JSON object per (policy, request), one per line: policy, spec, request
// (1-based), name, gathers, lookups, hits, misses, hit_rate, inserts,
// evictions, refusals, refusals_<reason>, relocations, resident_rows,
// capacity_rows.
std::string FormatJsonLines(std::span<const PolicyRun> runs, const GatherTrace& trace);

// Hit rate per request and policy, then total misses, evictions, refusals,
// relocations and slots filled at the end. With distinct_rows (the
// compulsory misses) and a belady run of the same capacity among runs, also
// the avoidable-miss ratio (misses - distinct) / (belady misses - distinct).
std::string FormatTable(std::span<const PolicyRun> runs, const GatherTrace& trace,
                        std::optional<uint64_t> distinct_rows);

// Miss-ratio curve: a header "capacity_rows,<policy>,..." and one line per
// capacity with each policy's misses / lookups. runs are grouped by
// capacity_rows as requested (the runs of one sweep point share a requested
// capacity; RowCache may round its actual capacity up to whole sets, so the
// requested value is passed separately, one per run).
std::string FormatSweepCsv(std::span<const PolicyRun> runs, std::span<const uint64_t> requested_capacity);

// Plots FormatSweepCsv output (csv_path) into a PNG with gnuplot.
Status PlotSweep(const std::string& csv_path, const std::string& png_path, size_t policies, const std::string& title);

}  // namespace engram::replay
