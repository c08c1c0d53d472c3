#include "src/store/store_metrics.h"

#include <algorithm>
#include <vector>

namespace engram {

namespace {
constexpr double kNs = 1e-9;
}

MetricsSnapshot BuildStoreMetrics(const std::vector<TableStats>& tables, const io::IoStatsSnapshot& io,
                                  const std::string& backend) {
  MetricsSnapshot m;
#ifndef ENGRAM_VERSION
#define ENGRAM_VERSION "unknown"
#endif
  m.AddGauge("engram_build_info", "Engram Store build; the value is always 1.",
             {{"version", ENGRAM_VERSION}, {"io_backend", backend}}, 1);
  for (const TableStats& t : tables) {
    const MetricLabels l{{"table", t.name}};
    for (const CacheStatInfo& stat : kCacheStats) {
      switch (stat.kind) {
        case CacheStatKind::kCounter:
          m.AddCounter(stat.metric, stat.help, l, double(t.cache.*stat.value));
          break;
        case CacheStatKind::kGauge:
          m.AddGauge(stat.metric, stat.help, l, double(t.cache.*stat.value));
          break;
        case CacheStatKind::kByReason:
          for (const RefusalReasonInfo& reason : kRefusalReasons) {
            MetricLabels by_reason = l;
            by_reason.push_back({"reason", reason.name});
            m.AddCounter(stat.metric, stat.help, by_reason,
                         double((t.cache.*stat.by_reason)[static_cast<int>(reason.reason)]));
          }
          break;
      }
    }
    m.AddGauge("engram_row_cache_budget_bytes", "The table's share of the store's cache budget.", l,
               double(t.cache_budget_bytes));

    for (const TableCounterInfo& counter : kTableCounters) {
      const double value = double(t.*counter.member);
      m.AddCounter(counter.metric, counter.help, l, counter.unit == ENGRAM_UNIT_NANOSECONDS ? value * kNs : value);
    }
  }
  std::vector<double> bounds;
  std::vector<uint64_t> counts;
  int last = 0;
  for (int i = 0; i < io::kLatencyBuckets; ++i) {
    if (io.latency_log2_ns[i]) last = i;
  }
  // Buckets from 1 us up to the largest observed, so the exposition stays short.
  uint64_t below = 0;
  for (int i = 0; i <= std::max(last, 10); ++i) {
    if (i < 9) {  // < 1 us: folded into the first exported bucket
      below += io.latency_log2_ns[i];
      continue;
    }
    bounds.push_back(double(io::IoStatsSnapshot::BucketUpperBoundNs(i) + 1) * kNs);
    counts.push_back(io.latency_log2_ns[i] + below);
    below = 0;
  }
  m.AddHistogram("engram_io_read_latency_seconds", "Latency of block reads.", {{"io_backend", backend}}, bounds,
                 counts, double(io.latency_sum_ns) * kNs, io.reads);
  return m;
}

void AddRemoteTableMetrics(MetricsSnapshot& m, const std::string& table, const std::vector<redis::ClusterNodeStats>& nodes) {
  for (const redis::ClusterNodeStats& n : nodes) {
    const MetricLabels l{{"table", table}, {"node", n.node}};
    m.AddCounter("engram_remote_requests_total",
                 "Commands sent to a Redis Cluster node for the table (answered or failed).", l, double(n.requests));
    MetricLabels sent = l, received = l;
    sent.push_back({"direction", "sent"});
    received.push_back({"direction", "received"});
    m.AddCounter("engram_remote_bytes_total", "Bytes written to and read from a Redis Cluster node.", sent,
                 double(n.bytes_sent));
    m.AddCounter("engram_remote_bytes_total", "", received, double(n.bytes_received));
    MetricLabels moved = l, ask = l;
    moved.push_back({"kind", "moved"});
    ask.push_back({"kind", "ask"});
    m.AddCounter("engram_remote_redirects_total", "MOVED and ASK redirects a Redis Cluster node answered.", moved,
                 double(n.moved));
    m.AddCounter("engram_remote_redirects_total", "", ask, double(n.asks));
    m.AddCounter("engram_remote_errors_total",
                 "Commands that failed on a Redis Cluster node (error replies, lost connections, timeouts).", l,
                 double(n.errors));
    m.AddCounter("engram_remote_request_seconds_total",
                 "Summed time from submission to reply of the answered commands (divide by "
                 "engram_remote_answered_total for the mean).",
                 l, double(n.latency_sum_ns) * 1e-9);
    m.AddCounter("engram_remote_answered_total", "Commands a Redis Cluster node answered.", l, double(n.answered));
  }
}

}  // namespace engram
