// engram-bench: performance measurements of Engram Store components.
//
// Subcommands, one section each below (add a new one as a Register*Command
// function plus one line in main; put its driver in the library, like
// src/iobench/read_benchmark.h, so this file stays a thin CLI):
//   read    random 4 KiB block reads through the I/O backends
//   gather  the row-cache report's five-request workload through a real store
//           on generated tables: per request hit rate, evictions, refusals,
//           wall time, rows/s and readiness wait split into cache and disk
//   restart the hit rate after a restart, cold against warm (hot set)
//   hit     gathers of resident rows vs a flat memcpy gather (hit_ratio)
//   miss    all-miss gathers on a fresh store vs raw reads and fio
//           (miss_ratio_raw, miss_ratio_fio, latency at QD 1); both in
//           bench/hit_miss_command.h
//   step    a runtime's step through the step path vs its rows' own cost
//           (bench/step_command.h)
//   ranks   missed-row reads per tensor-parallel rank on the report's
//           requests, strided against contiguous slot assignment
//           (src/replay/rank_balance.h)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/hit_miss_command.h"
#include "bench/node_command.h"
#include "bench/step_command.h"
#include "bench/in_place_command.h"
#include "bench/remote_command.h"
#include "engram/store.h"
#include "src/common/cli_checks.h"
#include "src/common/logging.h"
#include "src/common/stdout_written.h"
#include "src/iobench/read_benchmark.h"
#include "src/replay/rank_balance.h"
#include "src/workload/report_workload.h"
#include "src/workload/restart_run.h"
#include "storage/table_file.h"

namespace {

// ============================================================================
// read: raw block reads
// ============================================================================

struct ReadArgs {
  std::string file;
  uint64_t create_mib = 0;
  std::vector<std::string> backends{"io_uring", "pread"};
  std::vector<uint32_t> depths{1, 4, 16, 32, 64, 128, 256};
  std::vector<uint32_t> threads{1, 2, 4};
  std::string mode = "auto";
  std::string cache = "cold";
  double seconds = 2;
  bool json = false;
  bool no_register_buffers = false;
  uint64_t seed = 1;
  uint32_t row_bytes = 0;  // 0: the table's record size, or 264 for a plain file
  uint32_t rings = 1;      // io_uring rings sharing the depth
};

// 0 once everything printed has reached stdout, else 1 with a message: a full
// disk or a closed pipe must not look like success.
int Flushed(const char* command) {
  if (engram::StdoutWritten()) return 0;
  std::fprintf(stderr, "engram-bench %s: write to stdout failed\n", command);
  return 1;
}

// Writes `mib` MiB of non-repeating bytes to `path` (if it does not exist).
bool CreateFileIfMissing(const std::string& path, uint64_t mib) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return true;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror(("engram-bench: create " + path).c_str());
    return false;
  }
  std::vector<uint64_t> chunk((1 << 20) / sizeof(uint64_t));
  uint64_t x = 88172645463325252ull;
  for (uint64_t m = 0; m < mib; ++m) {
    for (uint64_t& v : chunk) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      v = x;
    }
    if (::write(fd, chunk.data(), 1 << 20) != (1 << 20)) {
      std::perror(("engram-bench: write " + path).c_str());
      ::close(fd);
      return false;
    }
  }
  ::fsync(fd);
  ::close(fd);
  return true;
}

int RunRead(const ReadArgs& a) {
  using namespace engram::io;
  if (a.create_mib > 0 && !CreateFileIfMissing(a.file, a.create_mib)) return 1;
  struct Point {
    IoBackend backend;
    ReadBenchMode mode;
    bool cold;
    uint32_t depth;
    uint32_t threads;
  };
  std::vector<Point> points;
  std::vector<bool> caches;
  if (a.cache == "cold" || a.cache == "both") caches.push_back(true);
  if (a.cache == "warm" || a.cache == "both") caches.push_back(false);
  if (caches.empty()) {
    std::cerr << "engram-bench read: --cache must be cold, warm or both\n";
    return 2;
  }
  for (const std::string& name : a.backends) {
    auto backend = ParseIoBackend(name);
    if (!backend.ok() || *backend == IoBackend::kAuto) {
      std::cerr << "engram-bench read: bad backend '" << name << "' (io_uring|pread|mmap)\n";
      return 2;
    }
    ReadBenchMode mode;
    if (a.mode == "sync") {
      mode = ReadBenchMode::kSync;
    } else if (a.mode == "async") {
      mode = ReadBenchMode::kAsync;
    } else if (a.mode == "auto") {
      // io_uring's strength is depth from one thread; pread/mmap get their
      // parallelism from threads, as fio's psync does.
      mode = *backend == IoBackend::kIoUring ? ReadBenchMode::kAsync : ReadBenchMode::kSync;
    } else {
      std::cerr << "engram-bench read: --mode must be auto, sync or async\n";
      return 2;
    }
    for (bool cold : caches) {
      if (mode == ReadBenchMode::kAsync) {
        for (uint32_t d : a.depths) points.push_back({*backend, mode, cold, d, a.threads.front()});
      } else {
        for (uint32_t t : a.threads) points.push_back({*backend, mode, cold, 1, t});
      }
    }
  }

  // Each random read fetches one 4 KiB block for one row: the amplification a
  // gather pays on a miss whose block holds no other wanted row.
  uint32_t row_bytes = a.row_bytes;
  if (row_bytes == 0) {
    auto t = engram::TableFile::Open(a.file);
    row_bytes = t.ok() ? (*t)->record_bytes() : 264;
  }
  const double amplification = 4096.0 / double(row_bytes);
  uint64_t failed_reads = 0, all_reads = 0;
  nlohmann::json out = nlohmann::json::array();
  std::ostringstream table;
  char line[256];
  std::snprintf(line, sizeof line, "%-9s %-5s %-5s %5s %4s %11s %9s %9s %9s %9s %9s %6s\n", "backend", "mode",
                "cache", "qd", "thr", "iops", "MiB/s", "p50_us", "p90_us", "p99_us", "p99.9_us", "ampl");
  table << line;
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    const char* mode_name = p.mode == ReadBenchMode::kAsync ? "async" : "sync";
    std::fprintf(stderr, "\r[%zu/%zu] %s %s %s qd=%u threads=%u ...          ", i + 1, points.size(),
                 IoBackendName(p.backend), mode_name, p.cold ? "cold" : "warm", p.depth, p.threads);
    std::fflush(stderr);
    ReadBenchConfig config;
    config.path = a.file;
    config.backend = p.backend;
    config.mode = p.mode;
    config.cold = p.cold;
    config.queue_depth = p.depth;
    config.threads = p.threads;
    config.rings = a.rings;
    config.seconds = a.seconds;
    config.seed = a.seed;
    config.register_buffers = !a.no_register_buffers;
    auto r = RunReadBenchmark(config);
    if (!r.ok()) {
      std::fprintf(stderr, "\n");
      std::cerr << "engram-bench read: " << r.status().ToString() << "\n";
      return 1;
    }
    std::snprintf(line, sizeof line, "%-9s %-5s %-5s %5u %4u %11.0f %9.1f %9.1f %9.1f %9.1f %9.1f %6.1f\n",
                  IoBackendName(p.backend), mode_name, p.cold ? "cold" : "warm", p.depth, p.threads, r->iops,
                  r->mb_per_s, r->p50_us, r->p90_us, r->p99_us, r->p999_us, amplification);
    table << line;
    out.push_back({{"backend", IoBackendName(p.backend)}, {"mode", mode_name}, {"cache", p.cold ? "cold" : "warm"},
                   {"queue_depth", p.depth}, {"threads", p.threads}, {"engine", r->engine}, {"reads", r->reads},
                   {"errors", r->errors}, {"seconds", r->seconds}, {"iops", r->iops}, {"mib_per_s", r->mb_per_s},
                   {"p50_us", r->p50_us}, {"p90_us", r->p90_us}, {"p99_us", r->p99_us}, {"p999_us", r->p999_us},
                   {"row_bytes", row_bytes}, {"read_amplification", amplification}});
    if (r->errors > 0) std::cerr << "\nengram-bench read: " << r->errors << " reads failed\n";
    failed_reads += r->errors;
    all_reads += r->reads;  // failed ones included
  }
  std::fprintf(stderr, "\r%80s\r", "");
  if (a.json) {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << table.str();
  }
  const int flushed = Flushed("read");
  // Figures measured over failing reads are not a measurement: the report is
  // printed (it shows the errors per point) but the run fails.
  if (failed_reads > 0) {
    std::cerr << "engram-bench read: " << failed_reads << " of " << all_reads
              << " reads failed; the figures above are not valid\n";
    return 1;
  }
  return flushed;
}

CLI::App* RegisterReadCommand(CLI::App& app, ReadArgs& a) {
  CLI::App* cmd = app.add_subcommand("read", "Random 4 KiB block reads from a file through the I/O backends");
  cmd->add_option("--file", a.file, "File to read (use --create-mib to create it)")->required();
  cmd->add_option("--create-mib", a.create_mib, "Create the file with this many MiB if it does not exist");
  cmd->add_option("--backends", a.backends, "Backends to measure: io_uring, pread, mmap")->delimiter(',');
  cmd->add_option("--depths", a.depths, "Queue depths (async mode)")->delimiter(',');
  cmd->add_option("--threads", a.threads, "Thread counts (sync mode; first one sizes the async worker pool)")
      ->delimiter(',');
  cmd->add_option("--rings", a.rings, "io_uring rings sharing each depth (at most the depth)")
      ->check(CLI::Range(uint32_t{1}, uint32_t{64}))
      ->capture_default_str();
  cmd->add_option("--mode", a.mode, "auto (io_uring async, others sync), sync or async");
  cmd->add_option("--cache", a.cache, "cold (O_DIRECT, cache dropped), warm (buffered, prewarmed) or both");
  cmd->add_option("--seconds", a.seconds, "Duration of each point")->check(engram::FiniteRange(0.001, 86400.0));
  cmd->add_option("--seed", a.seed, "Random offset seed");
  cmd->add_flag("--json", a.json, "Print JSON instead of a table");
  cmd->add_option("--row-bytes", a.row_bytes,
                  "Row size for the read amplification figure (default: the table's record size, or 264)")
      ->check(CLI::Range(1, 4096));
  cmd->add_flag("--no-register-buffers", a.no_register_buffers, "Do not register the destination arena (io_uring)");
  return cmd;
}

// ============================================================================
// gather: the report's workload through a real store
// ============================================================================

// Where the report's workload comes from, for the subcommands that replay it
// (gather, ranks): the hash layout, the token map and the requests, each
// defaulting to the shipped fixtures.
struct WorkloadSourceArgs {
  std::string fixtures = ENGRAM_FIXTURE_DIR;
  std::string traces;     // folder with req1..req5.u32; default: the shipped deepspeed fixture
  std::vector<std::string> requests;  // FILE[@SPLIT], replaces the five requests
  std::string layout;     // default: fixtures/engram-hash/layout-v41.json
  std::string token_map;  // default: fixtures/engram-hash/token-map.u32
  bool identity = false;
};

struct WorkloadSource {
  std::string layout_path;
  std::string token_map_path;  // "" = raw token IDs
  std::vector<engram::replay::RequestSpec> requests;
  bool report_requests = false;  // the five requests of the report (else the --request files)
};

void AddWorkloadSourceOptions(CLI::App* cmd, WorkloadSourceArgs& a) {
  cmd->add_option("--fixtures", a.fixtures, "Folder with engram-hash/ and traces/")->capture_default_str();
  auto* traces = cmd->add_option("--traces", a.traces,
                                 "Folder with req1.u32..req5.u32 (default: fixtures/traces/deepspeed)");
  cmd->add_option("--request", a.requests, "FILE[@SPLIT] token file (uint32 LE), repeatable; replaces the five requests")
      ->excludes(traces);
  cmd->add_option("--layout", a.layout, "Hash layout JSON (default: fixtures/engram-hash/layout-v41.json)");
  auto* map = cmd->add_option("--token-map", a.token_map, "Token map (default: fixtures/engram-hash/token-map.u32)");
  cmd->add_flag("--identity", a.identity, "Hash raw token IDs instead of the token map")->excludes(map);
}

engram::Result<WorkloadSource> ResolveWorkloadSource(const WorkloadSourceArgs& a) {
  WorkloadSource w;
  w.layout_path = a.layout.empty() ? a.fixtures + "/engram-hash/layout-v41.json" : a.layout;
  if (!a.identity) w.token_map_path = a.token_map.empty() ? a.fixtures + "/engram-hash/token-map.u32" : a.token_map;
  w.report_requests = a.requests.empty();
  if (w.report_requests) {
    ENGRAM_ASSIGN_OR_RETURN(w.requests, engram::ReportRequests(a.traces.empty() ? a.fixtures + "/traces/deepspeed"
                                                                                : a.traces));
  }
  for (const auto& spec : a.requests) {
    ENGRAM_ASSIGN_OR_RETURN(engram::replay::RequestSpec r, engram::replay::RequestSpec::Parse(spec));
    w.requests.push_back(std::move(r));
  }
  return w;
}

struct GatherArgs {
  WorkloadSourceArgs source;
  uint32_t tables = 1;
  uint64_t rows_per_table = 4'000'000;
  std::string work_dir = "out/bench-gather";
  std::vector<std::string> policies{"default"};
  double pressure = 0.78;
  uint64_t capacity_rows = 0;
  double budget_mib = 0;
  std::string backend = "auto";
  bool warm = false;
  std::string listen;
  double linger = 0;
  bool json = false;
};

// The workload and the per-table budget the gather and restart commands run:
// the report's requests (each cut into chunks of chunk_tokens when nonzero)
// or --request files, on generated tables.
engram::Result<engram::ReportWorkload> PrepareWorkload(const GatherArgs& a, uint64_t chunk_tokens, uint64_t* budget) {
  using namespace engram;
  ENGRAM_ASSIGN_OR_RETURN(WorkloadSource source, ResolveWorkloadSource(a.source));
  ReportWorkloadOptions wo;
  wo.work_dir = a.work_dir;
  wo.layout_path = source.layout_path;
  wo.token_map_path = source.token_map_path;
  wo.layers.clear();
  for (uint32_t t = 0; t < a.tables; ++t) wo.layers.push_back(t);
  wo.rows_per_table = a.rows_per_table;
  wo.requests = source.requests;
  if (source.report_requests) wo.request_names = ReportRequestNames();
  if (chunk_tokens != 0) {
    for (auto& r : wo.requests) r.split = {replay::SplitSpec::Kind::kChunkTokens, chunk_tokens};
  }
  auto log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  ENGRAM_ASSIGN_OR_RETURN(ReportWorkload workload, PrepareReportWorkload(wo, log));

  // Budget: explicit bytes, or the bytes at which the legacy cache has the
  // requested number of slots (by default: distinct rows / pressure, the
  // report's 1 GiB fill). Every policy gets the same bytes.
  *budget = uint64_t(a.budget_mib * 1048576.0);
  uint64_t capacity = a.capacity_rows ? a.capacity_rows : uint64_t(double(workload.distinct_rows_max) / a.pressure);
  if (*budget == 0) {
    ENGRAM_ASSIGN_OR_RETURN(*budget, BudgetForCapacity("legacy", capacity, workload.record_bytes));
  }
  std::fprintf(stderr, "%zu table(s) of %llu rows; %llu distinct rows per table; budget %.2f MiB per table\n",
               workload.table_paths.size(), (unsigned long long)workload.layouts[0].total_rows,
               (unsigned long long)workload.distinct_rows_max, double(*budget) / 1048576.0);
  return workload;
}

int RunGather(const GatherArgs& a) {
  using namespace engram;
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "engram-bench gather: %s\n", s.ToString().c_str());
    return 1;
  };
  uint64_t budget = 0;
  auto workload = PrepareWorkload(a, 0, &budget);
  if (!workload.ok()) return fail(workload.status());

  std::unique_ptr<WorkloadMetricsServer> metrics;
  if (!a.listen.empty()) {
    auto m = WorkloadMetricsServer::Start(a.listen);
    if (!m.ok()) return fail(m.status().WithContext("--metrics-listen"));
    metrics = std::move(m).value();
    std::fprintf(stderr, "metrics: %s\n", metrics->url().c_str());
  }
  PolicyRunOptions run;
  run.policies = a.policies;
  run.budget_per_table = budget;
  run.io_backend = a.backend;
  run.drop_page_cache = !a.warm;
  run.metrics = metrics.get();
  run.on_start = [](const std::string& policy, const Store& store) {
    std::fprintf(stderr, "policy %s: %s\n", policy.c_str(), store.io_description().c_str());
  };
  // A live progress line on a terminal; one line per finished request in a log.
  const bool tty = isatty(2);
  run.progress = [tty, last_request = size_t(-1)](const WorkloadProgress& p) mutable {
    if (tty) {
      std::fprintf(stderr, "\r  request %zu/%zu, gather %zu/%zu   ", p.request + 1, p.requests, p.gather + 1,
                   p.gathers);
      if (p.request + 1 == p.requests && p.gather + 1 == p.gathers) std::fprintf(stderr, "\n");
    } else if (p.request != last_request) {
      std::fprintf(stderr, "  request %zu/%zu started\n", p.request + 1, p.requests);
      last_request = p.request;
    }
  };
  std::unique_ptr<Store> store;
  auto runs = RunPolicies(*workload, run, &store);
  if (!runs.ok()) return fail(runs.status());
  if (a.json) {
    std::printf("%s", FormatReportJsonLines(*runs).c_str());
  } else {
    std::printf("%s", FormatReportTable(*runs).c_str());
  }
  if (Flushed("gather") != 0) return 1;
  if (metrics && a.linger > 0) {
    std::fprintf(stderr, "serving %s for %.0f more seconds\n", metrics->url().c_str(), a.linger);
    std::this_thread::sleep_for(std::chrono::duration<double>(a.linger));
  }
  metrics.reset();  // before the store it reads
  return 0;
}

// The options that choose the workload, its tables and their cache (gather
// and restart).
void AddWorkloadOptions(CLI::App* cmd, GatherArgs& a) {
  AddWorkloadSourceOptions(cmd, a.source);
  cmd->add_option("--tables", a.tables, "Tables: layers 0..N-1 of the layout (at most its layer count; V4.1 has 2)")
      ->capture_default_str()->check(CLI::Range(1, 16));
  cmd->add_option("--rows-per-table", a.rows_per_table, "Table size (the layout is scaled to it)")
      ->capture_default_str()->check(CLI::Range(uint64_t(100000), uint64_t(1) << 34));
  cmd->add_option("--work-dir", a.work_dir, "Where the generated tables go (reused when identical)")
      ->capture_default_str();
  cmd->add_option("--policy", a.policies, "Cache policies (specs), each run through a fresh store")
      ->capture_default_str();
  // At least one byte (a smaller value would round to 0 = "not given"), at
  // most 1 PiB (the byte count must fit 64 bits).
  auto* budget = cmd->add_option("--budget-mib", a.budget_mib, "Cache bytes per table, in MiB")
                     ->check(engram::FiniteRange(1.0 / 1048576.0, double(uint64_t(1) << 30)));
  auto* capacity = cmd->add_option("--capacity-rows", a.capacity_rows,
                                   "Budget = the bytes at which the legacy cache has this many slots per table")
                       ->check(CLI::Range(uint64_t(1), std::numeric_limits<uint64_t>::max()))
                       ->excludes(budget);
  cmd->add_option("--pressure", a.pressure, "Default budget: distinct rows / legacy slots (the report: 0.78)")
      ->capture_default_str()->check(engram::FiniteRange(0.01, 16.0))->excludes(budget)->excludes(capacity);
  cmd->add_option("--io-backend", a.backend, "auto, io_uring, pread or mmap")->capture_default_str();
  cmd->add_flag("--warm", a.warm, "Keep the tables in page cache (default: dropped before each store opens)");
}

CLI::App* RegisterGatherCommand(CLI::App& app, GatherArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "gather", "The row-cache report's five requests through a real store on generated V4.1-shaped tables");
  AddWorkloadOptions(cmd, a);
  auto* listen = cmd->add_option("--metrics-listen", a.listen, "Serve /metrics at HOST:PORT while running");
  cmd->add_option("--linger", a.linger, "Keep serving /metrics this many seconds after the run")
      ->check(engram::FiniteRange(0.0, 86400.0))
      ->needs(listen);
  cmd->add_flag("--json", a.json, "One JSON object per (policy, request) instead of the table");
  return cmd;
}

// ============================================================================
// ranks: per-rank missed rows, strided against contiguous slots
// ============================================================================

struct RanksArgs {
  WorkloadSourceArgs source;
  uint32_t tables = 2;
  uint64_t rows_per_table = 0;
  std::vector<uint32_t> ranks{2, 4};
  std::string policy = "default";
  double pressure = 0.78;
  uint64_t capacity_rows = 0;
  bool json = false;
};

int RunRanks(const RanksArgs& a) {
  using namespace engram;
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "engram-bench ranks: %s\n", s.ToString().c_str());
    return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ? 2 : 1;
  };
  auto source = ResolveWorkloadSource(a.source);
  if (!source.ok()) return fail(source.status());
  replay::RankBalanceOptions o;
  o.layout_path = source->layout_path;
  o.token_map_path = source->token_map_path;
  o.layers.clear();
  for (uint32_t t = 0; t < a.tables; ++t) o.layers.push_back(t);
  o.rows_per_table = a.rows_per_table;
  o.requests = source->requests;
  o.rank_counts = a.ranks;
  o.policy = a.policy;
  o.pressure = a.pressure;
  if (a.capacity_rows) o.capacity_rows = a.capacity_rows;
  auto report = replay::RunRankBalance(o);
  if (!report.ok()) return fail(report.status());
  std::printf("%s", (a.json ? replay::FormatRankBalanceJsonLines(*report) : replay::FormatRankBalanceTable(*report))
                        .c_str());
  return Flushed("ranks");
}

CLI::App* RegisterRanksCommand(CLI::App& app, RanksArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "ranks", "Missed-row reads per tensor-parallel rank on the report's requests: strided vs contiguous slots");
  AddWorkloadSourceOptions(cmd, a.source);
  cmd->add_option("--tables", a.tables, "Layers 0..N-1 of the layout, each rank holding the same slots of each")
      ->capture_default_str()->check(CLI::Range(1, 16));
  cmd->add_option("--rows-per-table", a.rows_per_table,
                  "Scale the layout to this many rows per table, as engram-demo does (default: the layout's primes)")
      ->check(CLI::Range(uint64_t(1000), uint64_t(1) << 34));
  cmd->add_option("--ranks", a.ranks, "Rank counts (1..slots per token), each split strided and contiguous")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--policy", a.policy, "Cache policy (spec) of every rank's cache")->capture_default_str();
  auto* capacity = cmd->add_option("--capacity-rows", a.capacity_rows,
                                   "Unsharded cache rows per layer (default: distinct rows / pressure)")
                       ->check(CLI::Range(uint64_t(1), std::numeric_limits<uint64_t>::max()));
  cmd->add_option("--pressure", a.pressure, "Distinct rows / unsharded cache rows (the report: 0.78)")
      ->capture_default_str()->check(engram::FiniteRange(0.01, 16.0))->excludes(capacity);
  cmd->add_flag("--json", a.json, "One JSON object per (split, rank) instead of the table");
  return cmd;
}

// ============================================================================
// restart: the warm start (hot set) against a cold restart
// ============================================================================

struct RestartArgs : GatherArgs {
  std::string hot_set;
  uint64_t chunk_tokens = 64;
  size_t first_gathers = 1000;
  size_t window = 50;
  double compute_ms = 0;
};

int RunRestartCommand(RestartArgs& a) {
  using namespace engram;
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "engram-bench restart: %s\n", s.ToString().c_str());
    return 1;
  };
  uint64_t budget = 0;
  auto workload = PrepareWorkload(a, a.chunk_tokens, &budget);
  if (!workload.ok()) return fail(workload.status());
  RestartRunOptions o;
  o.policy = a.policies.front();
  o.budget_per_table = budget;
  o.io_backend = a.backend;
  o.hot_set_path = a.hot_set.empty() ? a.work_dir + "/restart.hotset" : a.hot_set;
  o.first_gathers = a.first_gathers;
  o.window = a.window;
  o.compute_ms = a.compute_ms;
  o.drop_page_cache = !a.warm;
  std::fprintf(stderr, "%zu gathers per pass (%llu-token chunks); policy %s; hot set %s\n",
               workload->traces[0].gathers(), (unsigned long long)a.chunk_tokens, o.policy.c_str(),
               o.hot_set_path.c_str());
  auto report = RunRestart(*workload, o);
  if (!report.ok()) return fail(report.status());
  std::printf("%s", report->Format().c_str());
  return Flushed("restart");
}

CLI::App* RegisterRestartCommand(CLI::App& app, RestartArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "restart", "Hit rate after a restart, cold against warm (StoreOptions::hot_set_path), on the report's workload");
  AddWorkloadOptions(cmd, a);
  cmd->add_option("--hot-set", a.hot_set, "Hot-set file (default: WORK_DIR/restart.hotset)");
  cmd->add_option("--chunk-tokens", a.chunk_tokens, "Tokens per gather (the requests are cut into such chunks)")
      ->capture_default_str()->check(CLI::Range(uint64_t(1), uint64_t(1) << 20));
  cmd->add_option("--first-gathers", a.first_gathers, "Gathers after the restart whose hit rate is compared")
      ->capture_default_str()->check(CLI::Range(size_t(1), size_t(1) << 30));
  cmd->add_option("--window", a.window, "Gathers in the moving hit rate that must reach 95 % of the reference")
      ->capture_default_str()->check(CLI::Range(size_t(1), size_t(1) << 20));
  cmd->add_option("--compute-ms", a.compute_ms,
                  "Milliseconds of compute between gathers after the restart (a forward step; 0 = back to back)")
      ->capture_default_str()->check(engram::FiniteRange(0.0, 10000.0));
  return cmd;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"engram-bench: Engram Store performance measurements"};
  app.require_subcommand(1);
  app.fallthrough();  // --log-level may follow the subcommand
  ReadArgs read_args;
  CLI::App* read = RegisterReadCommand(app, read_args);
  GatherArgs gather_args;
  CLI::App* gather = RegisterGatherCommand(app, gather_args);
  RestartArgs restart_args;
  CLI::App* restart = RegisterRestartCommand(app, restart_args);
  engram::bench::HitArgs hit_args;
  CLI::App* hit = engram::bench::RegisterHitCommand(app, hit_args);
  engram::bench::MissArgs miss_args;
  CLI::App* miss = engram::bench::RegisterMissCommand(app, miss_args);
  engram::bench::InPlaceArgs in_place_args;
  CLI::App* in_place = engram::bench::RegisterInPlaceCommand(app, in_place_args);
  RanksArgs ranks_args;
  CLI::App* ranks = RegisterRanksCommand(app, ranks_args);
  engram::bench::NodeArgs node_args;
  CLI::App* node = engram::bench::RegisterNodeCommand(app, node_args);
  engram::bench::NodeClientRole node_client_role;
  CLI::App* node_client = engram::bench::RegisterNodeClientCommand(app, node_client_role);
  engram::bench::RemoteArgs remote_args;
  CLI::App* remote = engram::bench::RegisterRemoteCommand(app, remote_args);
  engram::bench::StepArgs step_args;
  CLI::App* step = engram::bench::RegisterStepCommand(app, step_args);
  std::string log_level;
  engram::AddLogLevelOption(app, log_level);
  // A usage error (a bad value such as a depth of 0, a missing option) is
  // exit 2, as for the other bad input; --help is still 0.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (engram::Status s = engram::ConfigureLogging(log_level, "warn"); !s.ok()) {
    std::fprintf(stderr, "engram-bench: %s\n", s.ToString().c_str());
    return 2;
  }
  if (*read) return RunRead(read_args);
  if (*gather) return RunGather(gather_args);
  if (*restart) return RunRestartCommand(restart_args);
  if (*hit) return engram::bench::RunHitCommand(hit_args);
  if (*miss) return engram::bench::RunMissCommand(miss_args);
  if (*in_place) return engram::bench::RunInPlaceCommand(in_place_args);
  if (*ranks) return RunRanks(ranks_args);
  if (*node) return engram::bench::RunNodeCommand(node_args);
  if (*remote) return engram::bench::RunRemoteCommand(remote_args);
  if (*step) return engram::bench::RunStepCommand(step_args);
  if (*node_client) return engram::bench::RunNodeClientRole(node_client_role);
  return 2;
}
