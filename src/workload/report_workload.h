// The row-cache report's workload on generated, V4.1-shaped tables: what the
// main demo (engram-demo) and `engram-bench gather` share, so both measure
// the same thing the same way.
//
// Preparing a workload = scale the V4.1 hash layout of a few layers down to a
// table size this machine can hold, hash the requests' tokens into one gather
// trace per table, and make sure a generated table file exists for each layer
// (reused when its metadata says it was generated with the same layout and
// seed, so repeated runs do not rewrite gigabytes).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engram/hasher.h"
#include "engram/options.h"
#include "engram/status.h"
#include "engram/store.h"
#include "src/metrics/http_endpoint.h"
#include "src/replay/gather_trace.h"
#include "src/replay/request_spec.h"
#include "src/workload/report_table.h"
#include "src/workload/store_workload.h"

namespace engram {

struct ReportWorkloadOptions {
  std::string work_dir;                 // generated tables go here
  std::string layout_path;              // EngramHashLayout JSON (e.g. layout-v41.json)
  std::vector<uint32_t> layers{0, 1};   // layer indices in the layout: one table each
  std::string token_map_path;           // "" = hash raw token IDs (identity map)
  uint64_t rows_per_table = 4'000'000;  // the layout is scaled to this size
  uint32_t record_bytes = 264;          // V4.1: 256 fp8 bytes + 8 scale bytes
  std::vector<replay::RequestSpec> requests;
  std::vector<std::string> request_names;  // optional; file names otherwise
  uint64_t seed = 1000;                    // table t is generated with seed + t
};

struct ReportWorkload {
  std::vector<EngramHashLayout> layouts;     // scaled, one per table
  std::vector<replay::GatherTrace> traces;   // one per table, same gather structure
  std::vector<std::string> table_paths;
  uint64_t distinct_rows_max = 0;            // most distinct rows any one table sees
  uint32_t record_bytes = 264;
};

// The report's five requests from a folder holding req1.u32 .. req5.u32:
// request 1 in 12 chunks, request 3 in 16, the others in 4096-token chunks.
Result<std::vector<replay::RequestSpec>> ReportRequests(const std::string& dir);
// "A", "A, new start", "B", "B, new start", "A, third read".
std::vector<std::string> ReportRequestNames();

// log(line) reports what is generated or reused (may be empty).
Result<ReportWorkload> PrepareReportWorkload(const ReportWorkloadOptions& options,
                                             const std::function<void(const std::string&)>& log = {});

// The smallest per-table byte budget whose `policy` cache holds at least
// capacity_rows rows of record_bytes.
Result<uint64_t> BudgetForCapacity(const std::string& policy, uint64_t capacity_rows, uint32_t record_bytes);

// StoreOptions for the workload's tables with `budget_per_table` bytes each.
StoreOptions WorkloadStoreOptions(const ReportWorkload& workload, const std::string& policy,
                                  uint64_t budget_per_table, const std::string& io_backend);

class WorkloadMetricsServer;

struct PolicyRunOptions {
  std::vector<std::string> policies;
  uint64_t budget_per_table = 0;  // the same bytes for every policy: a fair comparison
  std::string io_backend = "auto";
  bool drop_page_cache = true;    // cold start for every policy, as a fresh server
  WorkloadMetricsServer* metrics = nullptr;  // follows each policy's store if set
  std::function<void(const std::string& policy, const Store& store)> on_start;
  std::function<void(const WorkloadProgress&)> progress;
};

// Runs the workload once per policy, each through a fresh store. The last
// store stays open in *last_store (if given), e.g. for serving metrics after
// the run.
Result<std::vector<PolicyRequests>> RunPolicies(const ReportWorkload& workload, const PolicyRunOptions& options,
                                                std::unique_ptr<Store>* last_store = nullptr);

// A /metrics endpoint that serves whichever store is current: tools run one
// store per policy, one after the other, and the endpoint outlives them.
class WorkloadMetricsServer {
 public:
  // spec: "HOST:PORT" (see ParseListenAddress).
  static Result<std::unique_ptr<WorkloadMetricsServer>> Start(std::string_view listen);
  // Serves `store` from now on (nullptr: an empty exposition). The store must
  // stay alive until it is replaced or the server is destroyed.
  void Follow(const Store* store);
  std::string url() const;

 private:
  WorkloadMetricsServer() = default;
  mutable std::mutex mu_;
  const Store* current_ = nullptr;
  std::unique_ptr<MetricsHttpEndpoint> endpoint_;
};

}  // namespace engram
