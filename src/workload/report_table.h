// The row-cache report's table, for several policies side by side, and a
// chart of per-request hit rates (CSV + PNG through gnuplot).
#pragma once

#include <string>
#include <vector>

#include "engram/status.h"
#include "src/workload/store_workload.h"

namespace engram {

struct PolicyRequests {
  std::string policy;
  std::vector<RequestRunStats> requests;
};

// One row per request: hit rate, evictions, refusals, time, rows/s and readiness wait
// (cache / disk) for each policy.
std::string FormatReportTable(const std::vector<PolicyRequests>& runs);

// One JSON object per (policy, request).
std::string FormatReportJsonLines(const std::vector<PolicyRequests>& runs);

// Writes the hit rates as CSV and, if gnuplot is installed, a PNG bar chart.
// Unsupported if gnuplot is missing (the CSV is still written: a warning for
// the caller); IOError if the CSV or the chart could not be written.
Status WriteHitRateChart(const std::vector<PolicyRequests>& runs, const std::string& csv_path,
                         const std::string& png_path, const std::string& title);

}  // namespace engram
