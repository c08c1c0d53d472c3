#include "src/workload/store_workload.h"

#include <algorithm>
#include <chrono>

namespace engram {

Result<std::vector<RequestRunStats>> RunTracesThroughStore(
    Store& store, std::span<const replay::GatherTrace> traces,
    const std::function<void(const WorkloadProgress&)>& progress) {
  if (traces.empty()) return Status::InvalidArgument("workload: no traces");
  if (traces.size() > store.table_count()) {
    return Status::InvalidArgument("workload: " + std::to_string(traces.size()) + " traces for " +
                                   std::to_string(store.table_count()) + " tables");
  }
  const replay::GatherTrace& first = traces[0];
  for (const auto& t : traces) {
    if (t.request_end != first.request_end) {
      return Status::InvalidArgument("workload: traces differ in request/gather structure");
    }
  }
  uint32_t max_record = 0;
  for (size_t t = 0; t < traces.size(); ++t) max_record = std::max(max_record, store.record_bytes(t));

  std::vector<RequestRunStats> out;
  std::vector<std::vector<std::byte>> buffers(traces.size());
  std::vector<GatherTicket> tickets(traces.size());
  for (size_t r = 0; r < first.requests(); ++r) {
    RequestRunStats rs;
    rs.name = first.request_names.size() > r ? first.request_names[r] : "request " + std::to_string(r + 1);
    std::vector<TableStats> before;
    for (size_t t = 0; t < traces.size(); ++t) before.push_back(store.Stats(t));
    auto t0 = std::chrono::steady_clock::now();
    for (uint64_t g = first.request_begin(r); g < first.request_end[r]; ++g) {
      for (size_t t = 0; t < traces.size(); ++t) {
        const auto& tr = traces[t];
        std::span<const uint64_t> ids(tr.rows.data() + tr.gather_begin(g), tr.gather_end[g] - tr.gather_begin(g));
        buffers[t].resize(ids.size() * max_record);
        tickets[t] = store.StartGather(t, ids, buffers[t].data(), max_record);
      }
      Status failed;
      for (size_t t = 0; t < traces.size(); ++t) {
        GatherResult res = tickets[t].Wait();
        if (!res.status.ok() && failed.ok()) failed = res.status;
        rs.rows += res.rows;
        rs.lookups += res.distinct_rows;
        rs.hits += res.hits;
        rs.misses += res.misses;
        rs.inserts += res.inserts;
        rs.refusals += res.refusals;
        rs.blocks_read += res.blocks_read;
        rs.missed_bytes += uint64_t(res.misses) * store.record_bytes(t);
        rs.wait_ns += res.wait_nanoseconds;
        rs.cache_ns += res.cache_nanoseconds;
        rs.disk_ns += res.disk_nanoseconds;
      }
      if (!failed.ok()) return failed.WithContext(rs.name + ", gather " + std::to_string(g));
      ++rs.gathers;
      if (progress) progress({r, first.requests(), g, first.gathers()});
    }
    rs.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t t = 0; t < traces.size(); ++t) {
      TableStats after = store.Stats(t);
      rs.evictions += after.cache.evictions - before[t].cache.evictions;
      rs.relocations += after.cache.relocations - before[t].cache.relocations;
      rs.resident_rows += after.cache.resident_rows;
      rs.capacity_rows += after.cache.capacity_rows;
    }
    out.push_back(std::move(rs));
  }
  return out;
}

}  // namespace engram
