#include "src/workload/report_workload.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "src/cache/cache_config.h"
#include "src/cache/row_cache.h"
#include "src/ngram/scaled_layout.h"
#include "src/tablegen/table_generator.h"
#include "storage/file_util.h"
#include "storage/table_file.h"

namespace engram {
namespace {

// Reuses an existing table only if it is valid and was generated with the
// same rows, record size, seed and layout; otherwise (re)writes it.
Status EnsureTable(const std::string& path, const EngramHashLayout& layout, uint32_t record_bytes, uint64_t seed,
                   const std::function<void(const std::string&)>& log) {
  const nlohmann::json layout_json = nlohmann::json::parse(layout.ToJson());
  // Closed before it is written over: a process never replaces a table it
  // has open (storage/input_files.h).
  if (auto existing = TableFile::Open(path); existing.ok() && (*existing)->row_count() == layout.total_rows &&
                                             (*existing)->record_bytes() == record_bytes) {
    // The metadata of a file at this path may come from anything: compare
    // without typed access (value()/get() throw type_error on another shape).
    static constexpr std::string_view kCompared[] = {"generator", "hash_layout"};
    const auto members = (*existing)->MetadataMembers(kCompared);
    const nlohmann::json m = members.ok() ? *members : nlohmann::json::object();
    const auto hash_layout = m.find("hash_layout");
    if (GeneratorSeed(m) == seed && hash_layout != m.end() && *hash_layout == layout_json) {
      if (log) {
        char line[512];
        std::snprintf(line, sizeof line, "%s: reusing (%.2f GB)", path.c_str(),
                      double((*existing)->file_bytes()) / 1e9);
        log(line);
      }
      return Status::OK();
    }
  }
  GenerateTableOptions g;
  g.rows = layout.total_rows;
  g.record_bytes = record_bytes;
  g.seed = seed;
  g.metadata = {{"dtype", "float8_e4m3fn+ue8m0"},
                {"shape", {layout.total_rows, 256}},
                {"scale_shape", {layout.total_rows, 8}},
                {"source", "synthetic rows, V4.1 hash layout scaled"},
                {"hash_layout", layout_json}};
  const bool tty = isatty(2);
  auto t0 = std::chrono::steady_clock::now();
  ENGRAM_RETURN_IF_ERROR(GenerateTable(path, g, [&](uint64_t done, uint64_t total) {
    if (tty) std::fprintf(stderr, "\r  %s: %5.1f%%", path.c_str(), 100.0 * double(done) / double(total));
  }));
  if (tty) std::fprintf(stderr, "\n");
  if (log) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char line[512];
    std::snprintf(line, sizeof line, "%s: generated %.2f GB in %.1f s", path.c_str(),
                  double(layout.total_rows) * record_bytes / 1e9, s);
    log(line);
  }
  return Status::OK();
}

}  // namespace

Result<std::vector<replay::RequestSpec>> ReportRequests(const std::string& dir) {
  std::vector<replay::RequestSpec> out;
  for (const char* s : {"req1.u32@x12", "req2.u32", "req3.u32@x16", "req4.u32", "req5.u32"}) {
    ENGRAM_ASSIGN_OR_RETURN(replay::RequestSpec r, replay::RequestSpec::Parse(dir + "/" + s));
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> ReportRequestNames() {
  return {"A", "A, new start", "B", "B, new start", "A, third read"};
}

Result<ReportWorkload> PrepareReportWorkload(const ReportWorkloadOptions& options,
                                             const std::function<void(const std::string&)>& log) {
  if (options.layers.empty()) return Status::InvalidArgument("workload: no layers (tables) given");
  if (options.requests.empty()) return Status::InvalidArgument("workload: no requests given");
  if (options.record_bytes < 8 || options.record_bytes > 4096) {
    return Status::InvalidArgument("workload: record size must be 8..4096 bytes");
  }
  ReportWorkload w;
  w.record_bytes = options.record_bytes;
  std::shared_ptr<const TokenMap> token_map;
  if (!options.token_map_path.empty()) {
    ENGRAM_ASSIGN_OR_RETURN(TokenMap m, TokenMap::FromFile(options.token_map_path));
    token_map = std::make_shared<const TokenMap>(std::move(m));
  }
  for (uint32_t layer : options.layers) {
    ENGRAM_ASSIGN_OR_RETURN(EngramHashLayout full, EngramHashLayout::FromFile(options.layout_path, layer));
    ENGRAM_ASSIGN_OR_RETURN(EngramHashLayout scaled, ScaleLayout(full, options.rows_per_table));
    ENGRAM_ASSIGN_OR_RETURN(NgramHasher hasher, NgramHasher::Create(scaled, token_map));
    ENGRAM_ASSIGN_OR_RETURN(replay::GatherTrace trace, replay::BuildTraceFromRequests(hasher, options.requests));
    for (size_t i = 0; i < trace.request_names.size() && i < options.request_names.size(); ++i) {
      trace.request_names[i] = options.request_names[i];
    }
    std::vector<uint64_t> all(trace.rows);
    std::sort(all.begin(), all.end());
    w.distinct_rows_max =
        std::max<uint64_t>(w.distinct_rows_max, std::unique(all.begin(), all.end()) - all.begin());
    w.traces.push_back(std::move(trace));
    w.layouts.push_back(std::move(scaled));
  }
  std::error_code ec;
  std::filesystem::create_directories(options.work_dir, ec);
  if (ec) return Status::IOError("cannot create " + options.work_dir + ": " + ec.message());
  for (size_t t = 0; t < w.layouts.size(); ++t) {
    w.table_paths.push_back(options.work_dir + "/layer" + std::to_string(w.layouts[t].layer_id) + ".engram");
    ENGRAM_RETURN_IF_ERROR(
        EnsureTable(w.table_paths.back(), w.layouts[t], options.record_bytes, options.seed + t, log));
  }
  return w;
}

Result<uint64_t> BudgetForCapacity(const std::string& policy, uint64_t capacity_rows, uint32_t record_bytes) {
  ENGRAM_ASSIGN_OR_RETURN(RowCacheConfig config, RowCacheConfig::FromSpec(policy));
  if (capacity_rows == 0) return Status::InvalidArgument("capacity must be at least one row");
  // Capacity grows with the budget; bisect for the smallest budget that fits.
  uint64_t lo = 1, hi = capacity_rows * (uint64_t(record_bytes) + 400) + (64u << 20);
  if (auto top = RowCache::CapacityForBudget(config, hi, record_bytes); !top.ok() || *top < capacity_rows) {
    return Status::InvalidArgument("policy '" + policy + "' cannot hold " + std::to_string(capacity_rows) + " rows");
  }
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    auto cap = RowCache::CapacityForBudget(config, mid, record_bytes);
    if (cap.ok() && *cap >= capacity_rows) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

StoreOptions WorkloadStoreOptions(const ReportWorkload& workload, const std::string& policy,
                                  uint64_t budget_per_table, const std::string& io_backend) {
  StoreOptions o;
  for (const auto& p : workload.table_paths) o.tables.push_back({p, "", budget_per_table});
  o.cache_bytes = budget_per_table * workload.table_paths.size();
  o.cache_policy = policy;
  o.io_backend = io_backend;
  return o;
}

Result<std::vector<PolicyRequests>> RunPolicies(const ReportWorkload& workload, const PolicyRunOptions& options,
                                                std::unique_ptr<Store>* last_store) {
  if (options.policies.empty()) return Status::InvalidArgument("workload: no policies given");
  std::vector<PolicyRequests> runs;
  std::unique_ptr<Store> store;
  for (const std::string& policy : options.policies) {
    if (options.metrics) options.metrics->Follow(nullptr);
    store.reset();  // one store at a time: its cache budget is the whole budget
    if (options.drop_page_cache) {
      for (const auto& p : workload.table_paths) fileutil::DropFromPageCache(p);
    }
    ENGRAM_ASSIGN_OR_RETURN(store, Store::Open(WorkloadStoreOptions(workload, policy, options.budget_per_table,
                                                                     options.io_backend)));
    if (options.metrics) options.metrics->Follow(store.get());
    if (options.on_start) options.on_start(policy, *store);
    auto result = RunTracesThroughStore(*store, workload.traces, options.progress);
    if (!result.ok()) {
      if (options.metrics) options.metrics->Follow(nullptr);
      return result.status().WithContext("policy " + policy);
    }
    runs.push_back({policy, std::move(result).value()});
  }
  if (last_store) {
    *last_store = std::move(store);
  } else if (options.metrics) {
    options.metrics->Follow(nullptr);
  }
  return runs;
}

Result<std::unique_ptr<WorkloadMetricsServer>> WorkloadMetricsServer::Start(std::string_view listen) {
  ENGRAM_ASSIGN_OR_RETURN(HttpEndpointOptions opts, ParseListenAddress(listen));
  std::unique_ptr<WorkloadMetricsServer> server(new WorkloadMetricsServer());
  WorkloadMetricsServer* self = server.get();
  auto endpoint = MetricsHttpEndpoint::Start(opts, [self] {
    std::lock_guard lock(self->mu_);
    return self->current_ ? self->current_->MetricsText() : std::string();
  });
  if (!endpoint.ok()) return endpoint.status();
  server->endpoint_ = std::move(endpoint).value();
  return server;
}

void WorkloadMetricsServer::Follow(const Store* store) {
  std::lock_guard lock(mu_);
  current_ = store;
}

std::string WorkloadMetricsServer::url() const {
  std::string host = endpoint_->address();
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(endpoint_->port()) + "/metrics";
}

}  // namespace engram
