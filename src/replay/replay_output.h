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
// compulsory misses) and a belady run of the same requested capacity, also
// the avoidable-miss ratio (misses - distinct) / (belady misses - distinct).
std::string FormatTable(std::span<const PolicyRun> runs, const GatherTrace& trace,
                        std::optional<uint64_t> distinct_rows);

// Miss-ratio curve: a header "capacity_rows,<policy>,..." and one line per
// requested capacity with each policy's misses / lookups.
std::string FormatSweepCsv(std::span<const PolicyRun> runs);

// Plots FormatSweepCsv output (csv_path) into a PNG with gnuplot.
Status PlotSweep(const std::string& csv_path, const std::string& png_path, size_t policies, const std::string& title);

}  // namespace engram::replay
