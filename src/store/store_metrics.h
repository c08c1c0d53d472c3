// The store's metrics in Prometheus form: every figure of the row-cache
// report is a metric (refusals by reason included), per table (label
// `table`), in base units.
#pragma once

#include <string>
#include <vector>

#include "engram/store.h"
#include "src/metrics/metrics_snapshot.h"
#include "storage/redis/cluster_client.h"
#include "storage/io/io_stats.h"

namespace engram {

// The series of a table in a Redis Cluster, per cluster node (labels table,
// node): requests, bytes each way, redirects by kind, errors, and the
// requests' summed latency (with the answered count, a mean).
void AddRemoteTableMetrics(MetricsSnapshot& m, const std::string& table, const std::vector<redis::ClusterNodeStats>& nodes);

MetricsSnapshot BuildStoreMetrics(const std::vector<TableStats>& tables, const io::IoStatsSnapshot& io,
                                  const std::string& backend);

}  // namespace engram
