// The store's metrics in Prometheus form: every figure of the row-cache
// report is a metric (refusals by reason included), per table (label
// `table`), in base units.
#pragma once

#include <string>
#include <vector>

#include "engram/store.h"
#include "src/metrics/metrics_snapshot.h"
#include "storage/io/io_stats.h"

namespace engram {

MetricsSnapshot BuildStoreMetrics(const std::vector<TableStats>& tables, const io::IoStatsSnapshot& io,
                                  const std::string& backend);

}  // namespace engram
