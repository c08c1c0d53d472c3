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
    const RowCacheStats& c = t.cache;
    m.AddCounter("engram_row_cache_lookups_total", "Row-cache lookups (each distinct row once per gather).", l,
                 double(c.lookups));
    m.AddCounter("engram_row_cache_hits_total", "Row-cache lookups that found the row.", l, double(c.hits));
    m.AddCounter("engram_row_cache_misses_total", "Row-cache lookups that did not find the row.", l,
                 double(c.misses));
    m.AddCounter("engram_row_cache_inserts_total", "Missed rows the cache kept.", l, double(c.inserts));
    m.AddCounter("engram_row_cache_evictions_total", "Resident rows removed to make room.", l, double(c.evictions));
    for (int r = 0; r < int(RefusalReason::kCount); ++r) {
      MetricLabels lr = l;
      lr.push_back({"reason", RefusalReasonName(RefusalReason(r))});
      m.AddCounter("engram_row_cache_refusals_total", "Missed rows the cache refused to keep, by reason.", lr,
                   double(c.refusals[r]));
    }
    m.AddCounter("engram_row_cache_relocations_total", "Residents moved to their other candidate set.", l,
                 double(c.relocations));
    m.AddGauge("engram_row_cache_capacity_rows", "Rows the table's cache can hold.", l, double(c.capacity_rows));
    m.AddGauge("engram_row_cache_resident_rows", "Rows in the table's cache.", l, double(c.resident_rows));
    m.AddGauge("engram_row_cache_pinned_rows", "Read-ahead rows pinned in the table's cache.", l,
               double(c.pinned_rows));
    m.AddGauge("engram_row_cache_memory_bytes", "Memory charged to the table's cache budget.", l,
               double(c.memory_bytes));
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

}  // namespace engram
