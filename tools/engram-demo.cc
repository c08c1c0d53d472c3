// engram-demo: the row-cache report, reproduced on this machine (README
// command 1).
//
// Generates two V4.1-shaped tables (264-B records, the V4.1 hash of layers 1
// and 14 scaled down to --rows-per-table), hashes the report's five requests
// (real documentation tokens shipped as a fixture), and runs them through the
// real store, once per policy, at the budget that puts the cache under the
// report's 1 GiB pressure (distinct rows = 78 % of the slots). Prints the
// report's table side by side, serves /metrics while it runs and writes a
// chart of per-request hit rates.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "engram/hasher.h"
#include "engram/store.h"
#include "src/cache/row_cache.h"
#include "src/engram/scaled_layout.h"
#include "src/metrics/http_endpoint.h"
#include "src/replay/gather_trace.h"
#include "src/workload/report_table.h"
#include "src/workload/store_workload.h"
#include "storage/table_file.h"
#include "storage/table_generator.h"

namespace {

using namespace engram;

int Fail(const Status& s) {
  std::fprintf(stderr, "engram-demo: %s\n", s.ToString().c_str());
  return 1;
}

// Reuses an existing table only if it is valid and was generated with the
// same rows, seed and layout; otherwise writes it.
Status EnsureTable(const std::string& path, const EngramHashLayout& layout, uint64_t seed) {
  auto existing = TableFile::Open(path);
  if (existing.ok() && (*existing)->row_count() == layout.total_rows && (*existing)->record_bytes() == 264) {
    const auto& m = (*existing)->metadata();
    if (m.contains("generator") && m["generator"].value("seed", uint64_t(0)) == seed &&
        m.contains("hash_layout") && m["hash_layout"].dump() == nlohmann::json::parse(layout.ToJson()).dump()) {
      std::printf("  %s: reusing (%.2f GB)\n", path.c_str(), double((*existing)->file_bytes()) / 1e9);
      return Status::OK();
    }
  }
  GenerateTableOptions g;
  g.rows = layout.total_rows;
  g.record_bytes = 264;
  g.seed = seed;
  g.metadata = {{"dtype", "float8_e4m3fn+ue8m0"},
                {"shape", {layout.total_rows, 256}},
                {"scale_shape", {layout.total_rows, 8}},
                {"source", "engram-demo synthetic (V4.1 layout scaled)"},
                {"hash_layout", nlohmann::json::parse(layout.ToJson())}};
  auto t0 = std::chrono::steady_clock::now();
  ENGRAM_RETURN_IF_ERROR(GenerateTable(path, g, [&](uint64_t done, uint64_t total) {
    if (isatty(2)) std::fprintf(stderr, "\r  %s: %5.1f%%", path.c_str(), 100.0 * double(done) / double(total));
  }));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (isatty(2)) std::fprintf(stderr, "\n");
  std::printf("  %s: generated %.2f GB in %.1f s\n", path.c_str(), double(layout.total_rows) * 264 / 1e9, s);
  return Status::OK();
}

// The smallest budget whose `policy` cache holds at least capacity_rows rows.
Result<uint64_t> BudgetForCapacity(const std::string& policy, uint64_t capacity_rows) {
  ENGRAM_ASSIGN_OR_RETURN(RowCacheConfig config, RowCacheConfig::FromSpec(policy));
  uint64_t lo = 1, hi = capacity_rows * 400 + (64u << 20);
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    auto cap = RowCache::CapacityForBudget(config, mid, 264);
    if (cap.ok() && *cap >= capacity_rows) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Reproduce the row-cache report on this machine: legacy vs default policy through the real store."};
  std::string work_dir = "out/demo";
  std::string fixtures = ENGRAM_FIXTURE_DIR;
  uint64_t rows_per_table = 4'000'000;
  std::vector<std::string> policies{"legacy", "default"};
  double pressure = 0.78;
  std::string listen = "127.0.0.1:9464";
  double linger = 0;
  std::string backend = "auto";
  bool json = false;
  bool identity = false;
  app.add_option("--work-dir", work_dir, "where tables, CSV and chart go")->capture_default_str();
  app.add_option("--fixtures", fixtures, "folder with engram-hash/ and traces/deepspeed/")->capture_default_str();
  app.add_option("--rows-per-table", rows_per_table, "table size (the V4.1 layout is scaled to it)")
      ->capture_default_str()->check(CLI::Range(uint64_t(100000), uint64_t(1) << 34));
  app.add_option("--policy", policies, "cache policies to compare (specs)")->capture_default_str();
  app.add_option("--pressure", pressure, "distinct rows / cache slots of the legacy cache (report: 0.78)")
      ->capture_default_str()->check(CLI::Range(0.05, 4.0));
  app.add_option("--metrics-listen", listen, "serve /metrics here while running ('' = off)")->capture_default_str();
  app.add_option("--linger", linger, "keep serving /metrics this many seconds after the run")->capture_default_str();
  app.add_option("--io-backend", backend, "auto, io_uring, pread or mmap")->capture_default_str();
  app.add_flag("--identity", identity, "hash raw token IDs (as the report's emulation) instead of the token map");
  app.add_flag("--json", json, "also print one JSON object per (policy, request)");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);

  std::error_code ec;
  std::filesystem::create_directories(work_dir, ec);
  if (ec) return Fail(Status::IOError("cannot create " + work_dir + ": " + ec.message()));

  // 1. Layout and tokens.
  std::printf("Engram Store demo: the row-cache report's five requests through the real store\n");
  std::vector<EngramHashLayout> layouts;
  for (uint32_t layer = 0; layer < 2; ++layer) {
    auto v41 = EngramHashLayout::FromFile(fixtures + "/engram-hash/layout-v41.json", layer);
    if (!v41.ok()) return Fail(v41.status());
    auto scaled = ScaleLayout(*v41, rows_per_table);
    if (!scaled.ok()) return Fail(scaled.status());
    layouts.push_back(*scaled);
  }
  std::shared_ptr<const TokenMap> token_map;
  if (!identity) {
    auto m = TokenMap::FromFile(fixtures + "/engram-hash/token-map.u32");
    if (!m.ok()) return Fail(m.status());
    token_map = std::make_shared<const TokenMap>(std::move(m).value());
  }
  const std::string traces = fixtures + "/traces/deepspeed/";
  std::vector<replay::RequestSpec> requests;
  const char* specs[] = {"req1.u32@x12", "req2.u32", "req3.u32@x16", "req4.u32", "req5.u32"};
  const char* names[] = {"A", "A, new start", "B", "B, new start", "A, third read"};
  for (const char* s : specs) {
    auto r = replay::RequestSpec::Parse(traces + s);
    if (!r.ok()) return Fail(r.status());
    requests.push_back(*r);
  }
  std::vector<replay::GatherTrace> gather_traces;
  uint64_t distinct_max = 0;
  for (const auto& layout : layouts) {
    auto hasher = NgramHasher::Create(layout, token_map);
    if (!hasher.ok()) return Fail(hasher.status());
    auto tr = replay::BuildTraceFromRequests(*hasher, requests);
    if (!tr.ok()) return Fail(tr.status());
    for (size_t i = 0; i < tr->request_names.size() && i < 5; ++i) tr->request_names[i] = names[i];
    std::vector<uint64_t> all(tr->rows);
    std::sort(all.begin(), all.end());
    distinct_max = std::max<uint64_t>(distinct_max, std::unique(all.begin(), all.end()) - all.begin());
    gather_traces.push_back(std::move(tr).value());
  }

  // 2. Tables.
  std::printf("\n1. Tables (V4.1 layout of layers 1 and 14, scaled to %llu rows each; 264-B records)\n",
              (unsigned long long)layouts[0].total_rows);
  std::vector<std::string> paths;
  for (size_t t = 0; t < layouts.size(); ++t) {
    paths.push_back(work_dir + "/layer" + std::to_string(layouts[t].layer_id) + ".engram");
    if (Status s = EnsureTable(paths.back(), layouts[t], 1000 + t); !s.ok()) return Fail(s);
  }

  // 3. Budget: the report's 1 GiB pressure.
  const uint64_t capacity = uint64_t(double(distinct_max) / pressure);
  auto budget = BudgetForCapacity("legacy", capacity);
  if (!budget.ok()) return Fail(budget.status());
  std::printf("\n2. Cache budget: %llu distinct rows per table; %llu slots per table at %.0f %% fill -> "
              "%.1f MiB per table, %.1f MiB in all (the report's 1 GiB, scaled)\n",
              (unsigned long long)distinct_max, (unsigned long long)capacity, pressure * 100,
              double(*budget) / 1048576.0, 2 * double(*budget) / 1048576.0);

  // 4. The metrics endpoint follows whichever store is running.
  std::mutex current_mu;
  Store* current = nullptr;
  std::unique_ptr<MetricsHttpEndpoint> endpoint;
  if (!listen.empty()) {
    auto opts = ParseListenAddress(listen);
    if (!opts.ok()) return Fail(opts.status());
    auto e = MetricsHttpEndpoint::Start(*opts, [&] {
      std::lock_guard lock(current_mu);
      return current ? current->MetricsText() : std::string();
    });
    if (!e.ok()) return Fail(e.status().WithContext("--metrics-listen (use another port or '')"));
    endpoint = std::move(e).value();
    std::printf("   metrics: http://%s:%u/metrics\n", endpoint->address().c_str(), endpoint->port());
  }

  // 5. Run every policy through a fresh store, tables dropped from page cache.
  std::vector<PolicyRequests> runs;
  std::unique_ptr<Store> store;  // the running one; the last stays for --linger
  for (const std::string& policy : policies) {
    StoreOptions o;
    for (const auto& p : paths) o.tables.push_back({p, "", *budget});
    o.cache_bytes = *budget * paths.size();
    o.cache_policy = policy;
    o.io_backend = backend;
    for (const auto& p : paths) {
      FILE* f = std::fopen(p.c_str(), "r");
      if (f) {
        posix_fadvise(fileno(f), 0, 0, POSIX_FADV_DONTNEED);
        std::fclose(f);
      }
    }
    {
      std::lock_guard lock(current_mu);
      current = nullptr;
    }
    store.reset();
    auto opened = Store::Open(o);
    if (!opened.ok()) return Fail(opened.status());
    store = std::move(opened).value();
    {
      std::lock_guard lock(current_mu);
      current = store.get();
    }
    std::printf("\n3. Running policy '%s' (%s)\n", policy.c_str(), store->io_description().c_str());
    auto result = RunTracesThroughStore(*store, gather_traces, [&](const WorkloadProgress& p) {
      if (isatty(2)) {
        std::fprintf(stderr, "\r   request %zu/%zu, gather %zu/%zu   ", p.request + 1, p.requests, p.gather + 1,
                     p.gathers);
      }
    });
    if (isatty(2)) std::fprintf(stderr, "\n");
    if (!result.ok()) return Fail(result.status());
    runs.push_back({policy, std::move(result).value()});
  }

  std::printf("\n4. Results (two tables: counts and readiness wait summed over both; time = wall time of the request)\n\n%s",
              FormatReportTable(runs).c_str());
  if (json) std::printf("\n%s", FormatReportJsonLines(runs).c_str());
  const std::string csv = work_dir + "/hit-rates.csv", png = work_dir + "/hit-rates.png";
  Status chart = WriteHitRateChart(runs, csv, png, "Row-cache hit rate per request (engram-demo)");
  if (chart.ok()) std::printf("\nchart: %s (data: %s)\n", png.c_str(), csv.c_str());
  else std::printf("\nchart: %s\n", chart.ToString().c_str());
  if (endpoint && linger > 0) {
    std::printf("serving %s:%u/metrics for %.0f more seconds\n", endpoint->address().c_str(), endpoint->port(), linger);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(linger));
  }
  endpoint.reset();  // before the store it reads
  store.reset();
  return 0;
}
