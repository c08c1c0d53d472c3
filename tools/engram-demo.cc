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

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "engram/store.h"
#include "src/common/cli_checks.h"
#include "src/common/logging.h"
#include "src/common/stdout_written.h"
#include "src/workload/report_workload.h"
#include "storage/temp_file_cleanup.h"

namespace {

using namespace engram;

int Fail(const Status& s) {
  std::fprintf(stderr, "engram-demo: %s\n", s.ToString().c_str());
  return 1;
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
  std::string log_level;
  bool json = false;
  bool identity = false;
  app.add_option("--work-dir", work_dir, "where tables, CSV and chart go")->capture_default_str();
  app.add_option("--fixtures", fixtures, "folder with engram-hash/ and traces/deepspeed/")->capture_default_str();
  app.add_option("--rows-per-table", rows_per_table, "table size (the V4.1 layout is scaled to it)")
      ->capture_default_str()->check(CLI::Range(uint64_t(100000), uint64_t(1) << 34));
  app.add_option("--policy", policies, "cache policies to compare (specs)")->capture_default_str();
  app.add_option("--pressure", pressure, "distinct rows / cache slots of the legacy cache (report: 0.78)")
      ->capture_default_str()->check(FiniteRange(0.05, 4.0));
  app.add_option("--metrics-listen", listen, "serve /metrics here while running ('' = off)")->capture_default_str();
  app.add_option("--linger", linger, "keep serving /metrics this many seconds after the run")
      ->capture_default_str()->check(FiniteRange(0.0, 86400.0));
  app.add_option("--io-backend", backend, "auto, io_uring, pread or mmap")->capture_default_str();
  AddLogLevelOption(app, log_level);
  app.add_flag("--identity", identity, "hash raw token IDs (as the report's emulation) instead of the token map");
  app.add_flag("--json", json, "also print one JSON object per (policy, request)");
  CLI11_PARSE(app, argc, argv);
  // A table being written sits under a temporary name until it is complete;
  // Ctrl-C and SIGTERM must not leave it behind.
  engram::RemoveTempFilesOnTerminationSignals();
  if (Status s = ConfigureLogging(log_level, "warn"); !s.ok()) return Fail(s);

  // 1. Layout, tokens and tables.
  std::printf("Engram Store demo: the row-cache report's five requests through the real store\n");
  ReportWorkloadOptions wo;
  wo.work_dir = work_dir;
  wo.layout_path = fixtures + "/engram-hash/layout-v41.json";
  wo.layers = {0, 1};
  if (!identity) wo.token_map_path = fixtures + "/engram-hash/token-map.u32";
  wo.rows_per_table = rows_per_table;
  auto requests = ReportRequests(fixtures + "/traces/deepspeed");
  if (!requests.ok()) return Fail(requests.status());
  wo.requests = *requests;
  wo.request_names = ReportRequestNames();
  std::printf("\n1. Tables (V4.1 layout of layers 1 and 14, scaled to about %llu rows each; 264-B records)\n",
              (unsigned long long)rows_per_table);
  auto workload = PrepareReportWorkload(wo, [](const std::string& line) { std::printf("  %s\n", line.c_str()); });
  if (!workload.ok()) return Fail(workload.status());

  // 2. Budget: the report's 1 GiB pressure.
  const uint64_t capacity = uint64_t(double(workload->distinct_rows_max) / pressure);
  auto budget = BudgetForCapacity("legacy", capacity, workload->record_bytes);
  if (!budget.ok()) return Fail(budget.status());
  const size_t tables = workload->table_paths.size();
  std::printf("\n2. Cache budget: %llu distinct rows per table; %llu slots per table at %.0f %% fill -> "
              "%.1f MiB per table, %.1f MiB in all (the report's 1 GiB, scaled)\n",
              (unsigned long long)workload->distinct_rows_max, (unsigned long long)capacity, pressure * 100,
              double(*budget) / 1048576.0, double(tables) * double(*budget) / 1048576.0);

  // 3. The metrics endpoint follows whichever store is running.
  std::unique_ptr<WorkloadMetricsServer> metrics;
  if (!listen.empty()) {
    auto m = WorkloadMetricsServer::Start(listen);
    if (!m.ok()) return Fail(m.status().WithContext("--metrics-listen (use another port or '')"));
    metrics = std::move(m).value();
    std::printf("   metrics: %s\n", metrics->url().c_str());
  }

  // 4. Run every policy through a fresh store, tables dropped from page cache.
  PolicyRunOptions run;
  run.policies = policies;
  run.budget_per_table = *budget;
  run.io_backend = backend;
  run.metrics = metrics.get();
  run.on_start = [](const std::string& policy, const Store& store) {
    std::printf("\n3. Running policy '%s' (%s)\n", policy.c_str(), store.io_description().c_str());
    std::fflush(stdout);
  };
  run.progress = [](const WorkloadProgress& p) {
    if (isatty(2)) {
      std::fprintf(stderr, "\r   request %zu/%zu, gather %zu/%zu   ", p.request + 1, p.requests, p.gather + 1,
                   p.gathers);
      if (p.request + 1 == p.requests && p.gather + 1 == p.gathers) std::fprintf(stderr, "\n");
    }
  };
  std::unique_ptr<Store> store;  // the last one stays for --linger
  auto ran = RunPolicies(*workload, run, &store);
  if (!ran.ok()) return Fail(ran.status());
  const std::vector<PolicyRequests>& runs = *ran;

  std::printf("\n4. Results (%zu tables: counts and readiness wait summed over them; time = wall time of the request, rows/s = rows delivered / time)\n\n%s",
              tables, FormatReportTable(runs).c_str());
  if (json) std::printf("\n%s", FormatReportJsonLines(runs).c_str());
  const std::string csv = work_dir + "/hit-rates.csv", png = work_dir + "/hit-rates.png";
  // A missing gnuplot only costs the picture (the CSV is written): a warning.
  // A CSV or chart that could not be written is a failed run.
  Status chart = WriteHitRateChart(runs, csv, png, "Row-cache hit rate per request (engram-demo)");
  if (chart.ok()) {
    std::printf("\nchart: %s (data: %s)\n", png.c_str(), csv.c_str());
  } else if (chart.code() == StatusCode::kUnsupported) {
    std::printf("\nchart: none (%s)\n", chart.message().c_str());
    std::fprintf(stderr, "engram-demo: warning: %s\n", chart.message().c_str());
  } else {
    return Fail(chart.WithContext("chart"));
  }
  if (!StdoutWritten()) return Fail(Status::IOError("write to stdout failed"));
  if (metrics && linger > 0) {
    std::printf("serving %s for %.0f more seconds\n", metrics->url().c_str(), linger);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(linger));
  }
  metrics.reset();  // before the store it reads
  store.reset();
  if (!StdoutWritten()) return Fail(Status::IOError("write to stdout failed"));
  return 0;
}
