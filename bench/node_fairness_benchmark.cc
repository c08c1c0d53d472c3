#include "bench/node_fairness_benchmark.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench/hit_miss_benchmark.h"
#include "bench/node_client_role.h"
#include "src/common/child_process.h"

namespace engram::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// The longest any one step of a workload may take before the run is given
// up: generous, since a client stalled for seconds is what may be measured.
constexpr auto kStepTimeout = 600s;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Consecutive block-aligned ranges of the table, one per workload: no two
// workloads read the same block, and no row is read twice.
class RowRanges {
 public:
  explicit RowRanges(uint32_t rows_per_block) : rows_per_block_(rows_per_block) {}
  struct Range {
    uint64_t first = 0, count = 0;
  };
  Range Take(uint64_t rows) {
    Range r{next_, rows};
    next_ += (rows + rows_per_block_ - 1) / rows_per_block_ * rows_per_block_;
    return r;
  }
  uint64_t used() const { return next_; }

 private:
  uint32_t rows_per_block_;
  uint64_t next_ = 0;
};

struct Ranges {
  RowRanges::Range private_a, private_b, service_a, service_b, alone_b, held_a, beside_b;
};

Ranges PlanRanges(const NodeFairnessConfig& c, RowRanges& r) {
  Ranges p;
  p.private_a = r.Take(c.bulk_rows());
  p.private_b = r.Take(c.decode_rows());
  p.service_a = r.Take(c.bulk_rows());
  p.service_b = r.Take(c.decode_rows());
  p.alone_b = r.Take(c.stopped_decode_rows());
  p.held_a = r.Take(c.held_rows());
  p.beside_b = r.Take(c.stopped_decode_rows());
  return p;
}

// Room for every row a store will read, twice over: inserts never evict.
uint64_t NoEvictionBytes(uint64_t rows, uint32_t record_bytes) {
  return std::max<uint64_t>(64ull << 20, 2 * rows * record_bytes);
}

std::string Command(const std::string& verb, std::initializer_list<uint64_t> args) {
  std::string s = verb;
  for (uint64_t a : args) s.append(" ").append(std::to_string(a));
  return s;
}

Result<std::string> Expect(ChildProcess& p, const std::string& prefix, const std::string& what) {
  auto line = p.WaitForLine(prefix, kStepTimeout);
  if (!line) return Status::Internal("node --mixed: " + what + " did not answer (\"" + prefix + "\")");
  return *line;
}

// "bulk ROWS SECONDS HIT_ROWS FAILED"
Result<BulkRun> ParseBulk(const std::string& line) {
  std::istringstream in(line.substr(4));
  BulkRun a;
  if (!(in >> a.rows >> a.seconds >> a.hit_rows >> a.failed)) {
    return Status::Internal("node --mixed: A's answer is malformed: " + line);
  }
  return a;
}

// "decoded GATHERS HIT_ROWS FAILED RAN_OUT LATENCIES_US"
Result<LatencySeries> ParseDecoded(const std::string& line) {
  std::istringstream in(line.substr(7));
  LatencySeries s;
  uint64_t gathers = 0;
  int ran_out = 0;
  std::string list;
  if (!(in >> gathers >> s.hit_rows >> s.failed >> ran_out >> list)) {
    return Status::Internal("node --mixed: B's answer is malformed: " + line.substr(0, 200));
  }
  s.ran_out = ran_out != 0;
  if (list != "-") {
    std::istringstream values(list);
    for (std::string v; std::getline(values, v, ',');) s.latencies_us.push_back(std::strtod(v.c_str(), nullptr));
  }
  if (s.latencies_us.size() != gathers) return Status::Internal("node --mixed: B listed another number of latencies");
  return s;
}

// The state letter of /proc/PID/stat ('T' once stopped), or 0.
char ProcessState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : 0;
}

// The table's rows requested so far, as B's store reports the service's.
Result<uint64_t> RowsRequested(ChildProcess& b) {
  b.WriteLine("stats");
  ENGRAM_ASSIGN_OR_RETURN(std::string line, Expect(b, "stats ", "B's stats"));
  return std::strtoull(line.c_str() + 6, nullptr, 10);
}

std::string DecodeCommand(const NodeFairnessConfig& c, RowRanges::Range r, uint64_t max_gathers, uint64_t seed) {
  return Command("decode", {r.first, r.count, c.decode_rows_per_gather,
                            static_cast<uint64_t>(std::llround(c.decode_interval_ms * 1000)), max_gathers, seed});
}

// One fairness pair: A's bulk and B's gathers started together, B stopped
// once A is done. `socket` empty: two private stores.
Result<FairnessPair> RunPair(const NodeFairnessConfig& c, const std::string& socket, uint64_t a_cache,
                             uint64_t b_cache, RowRanges::Range a_rows, RowRanges::Range b_rows, uint64_t seed) {
  NodeClientRole role;
  role.file = c.file;
  role.socket = socket;
  std::vector<ChildProcess> procs;
  role.cache_bytes = a_cache;
  procs.push_back(ChildProcess::Start(NodeClientArgs(c.self, role)));
  role.cache_bytes = b_cache;
  procs.push_back(ChildProcess::Start(NodeClientArgs(c.self, role)));
  ENGRAM_RETURN_IF_ERROR(WaitReady(procs));
  ChildProcess& a = procs[0];
  ChildProcess& b = procs[1];
  b.WriteLine(DecodeCommand(c, b_rows, c.decode_max_gathers, seed + 1));
  a.WriteLine(Command("bulk", {a_rows.first, a_rows.count, c.bulk_rows_per_gather, c.bulk_in_flight,
                               c.bulk_gathers, seed}));
  FairnessPair pair;
  ENGRAM_ASSIGN_OR_RETURN(std::string bulk, Expect(a, "bulk ", "A"));
  b.WriteLine("stop");
  ENGRAM_ASSIGN_OR_RETURN(std::string decoded, Expect(b, "decoded ", "B"));
  ENGRAM_ASSIGN_OR_RETURN(pair.a, ParseBulk(bulk));
  ENGRAM_ASSIGN_OR_RETURN(pair.b, ParseDecoded(decoded));
  EndAll(procs);
  return pair;
}

// B's run of `command`, with B's store asked for the table's rows requested
// every 50 ms meanwhile; the first time the count reaches `target` is
// `reached_seconds` after `t0` (< 0: not while B ran).
struct WatchedDecode {
  LatencySeries series;
  double reached_seconds = -1;
};
Result<WatchedDecode> DecodeWatching(ChildProcess& b, const std::string& command, uint64_t target,
                                     Clock::time_point t0) {
  WatchedDecode w;
  b.WriteLine(command);
  const auto deadline = Clock::now() + kStepTimeout;
  bool asked = false, decoded = false;
  auto next_ask = Clock::now();
  while (!decoded || asked) {
    if (!decoded && !asked && Clock::now() >= next_ask) {
      b.WriteLine("stats");
      asked = true;
      next_ask = Clock::now() + 50ms;
    }
    auto line = b.WaitForLine("", 5ms);
    if (!line) {
      if (Clock::now() > deadline || b.Wait(0ms)) return Status::Internal("node --mixed: B did not answer");
      continue;
    }
    if (line->rfind("stats ", 0) == 0) {
      asked = false;
      const uint64_t requested = std::strtoull(line->c_str() + 6, nullptr, 10);
      if (requested >= target && w.reached_seconds < 0) w.reached_seconds = Seconds(Clock::now() - t0);
    } else if (line->rfind("decoded ", 0) == 0) {
      ENGRAM_ASSIGN_OR_RETURN(w.series, ParseDecoded(*line));
      decoded = true;
    }
  }
  return w;
}

// The stopped-neighbour phase, on one service: B alone, then B beside A
// stopped with its answers unread.
Status RunStopped(const NodeFairnessConfig& c, const std::string& socket, const Ranges& ranges,
                  NodeFairnessReport& report, const NodeFairnessLog& log) {
  ENGRAM_ASSIGN_OR_RETURN(ChildProcess service,
                          StartNodeService(c.served, c.file, socket, report.stopped_cache_bytes));
  NodeClientRole role;
  role.file = c.file;
  role.socket = socket;
  // [0] B, [1] A (started once B's alone run is done).
  std::vector<ChildProcess> procs;
  procs.push_back(ChildProcess::Start(NodeClientArgs(c.self, role)));
  ENGRAM_RETURN_IF_ERROR(WaitReady(procs));
  {
    ENGRAM_ASSIGN_OR_RETURN(
        WatchedDecode alone,
        DecodeWatching(procs[0], DecodeCommand(c, ranges.alone_b, c.stopped_decode_gathers, c.seed + 11),
                       UINT64_MAX, Clock::now()));
    report.alone = std::move(alone.series);
  }
  if (log) log("node --mixed: stopped neighbour: B alone done; A starts its gathers and stops");

  procs.push_back(ChildProcess::Start(NodeClientArgs(c.self, role)));
  if (!procs[1].WaitForLine("ready", kStepTimeout)) return Status::Internal("node --mixed: A did not get ready");
  ChildProcess& b = procs[0];
  ChildProcess& a = procs[1];
  ENGRAM_ASSIGN_OR_RETURN(const uint64_t before, RowsRequested(b));
  report.held_rows = c.held_rows();
  a.WriteLine(Command("hold", {ranges.held_a.first, ranges.held_a.count, c.bulk_rows_per_gather, c.bulk_in_flight,
                               c.seed + 12}));
  {
    ENGRAM_ASSIGN_OR_RETURN(std::string holding, Expect(a, "holding ", "A"));
    report.held_answered_before_stop = std::strtoull(holding.c_str() + 8, nullptr, 10);
  }
  const auto stopped_by = Clock::now() + 10s;
  while (ProcessState(a.pid()) != 'T') {
    if (Clock::now() > stopped_by) return Status::Internal("node --mixed: A did not stop itself");
    std::this_thread::sleep_for(1ms);
  }
  const auto t_stopped = Clock::now();
  {
    ENGRAM_ASSIGN_OR_RETURN(
        WatchedDecode beside,
        DecodeWatching(b, DecodeCommand(c, ranges.beside_b, c.stopped_decode_gathers, c.seed + 13),
                       before + report.held_rows, t_stopped));
    report.beside_stopped = std::move(beside.series);
    report.held_reads_seconds = beside.reached_seconds;
  }
  if (log) log("node --mixed: stopped neighbour: B done beside the stopped A; A continues");
  a.Kill(SIGCONT);
  {
    ENGRAM_ASSIGN_OR_RETURN(std::string held, Expect(a, "held ", "A (continued)"));
    std::istringstream in(held.substr(5));
    uint64_t rows = 0, misses = 0;
    in >> rows >> misses >> std::ws;
    std::getline(in, report.held_outcome);
  }
  EndAll(procs);
  StopNodeService(service);
  return Status::OK();
}

double Ratio(double num, double den) { return den > 0 ? num / den : 0; }

}  // namespace

double LatencySeries::percentile_ms(double q) const {
  if (latencies_us.empty()) return 0;
  std::vector<double> v = latencies_us;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q / 100.0 * double(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1] / 1000.0;
}

double LatencySeries::max_ms() const {
  return latencies_us.empty() ? 0 : *std::max_element(latencies_us.begin(), latencies_us.end()) / 1000.0;
}

double NodeFairnessReport::b_p50_ratio() const {
  return Ratio(service_pair.b.percentile_ms(50), private_pair.b.percentile_ms(50));
}
double NodeFairnessReport::b_p99_ratio() const {
  return Ratio(service_pair.b.percentile_ms(99), private_pair.b.percentile_ms(99));
}
double NodeFairnessReport::b_max_ratio() const { return Ratio(service_pair.b.max_ms(), private_pair.b.max_ms()); }
double NodeFairnessReport::a_rows_per_s_ratio() const {
  return Ratio(service_pair.a.rows_per_s(), private_pair.a.rows_per_s());
}
double NodeFairnessReport::stopped_max_ratio() const { return Ratio(beside_stopped.max_ms(), alone.max_ms()); }

Result<NodeFairnessReport> RunNodeFairnessBenchmark(const NodeFairnessConfig& cfg, const NodeFairnessLog& log) {
  NodeFairnessConfig c = cfg;
  ENGRAM_ASSIGN_OR_RETURN(TableShape shape, CheckBenchTable(c.file));
  ENGRAM_RETURN_IF_ERROR(CheckDirectIo(c.file));
  if (c.bulk_rows_per_gather == 0 || c.bulk_in_flight == 0 || c.bulk_gathers == 0 || c.decode_rows_per_gather == 0 ||
      c.decode_max_gathers == 0 || c.stopped_decode_gathers == 0) {
    return Status::InvalidArgument("node --mixed: every gather count and size must be >= 1");
  }
  if (!(c.decode_interval_ms >= 0)) return Status::InvalidArgument("node --mixed: the interval must be >= 0");
  RowRanges rows(shape.rows_per_block);
  const Ranges ranges = PlanRanges(c, rows);
  if (rows.used() > shape.rows) {
    return Status::InvalidArgument(
        "node --mixed: the workloads need " + std::to_string(rows.used()) + " never-read rows and " + c.file +
        " has " + std::to_string(shape.rows) +
        " (make a larger table with engram-gen, or lower --bulk-gathers, --bulk-rows-per-gather, "
        "--decode-max-gathers)");
  }
  if (c.self.empty()) c.self = std::filesystem::read_symlink("/proc/self/exe").string();
  if (c.served.empty()) c.served = (std::filesystem::path(c.self).parent_path() / "engram-served").string();
  ENGRAM_ASSIGN_OR_RETURN(BenchTempDir dir, BenchTempDir::Make("engram-bench-mixed"));
  const std::string socket = dir.path() + "/node.sock";
  const uint32_t rec = shape.record_bytes;

  NodeFairnessReport report;
  report.table_rows = shape.rows;
  report.private_a_cache_bytes = c.cache_bytes ? c.cache_bytes : NoEvictionBytes(c.bulk_rows(), rec);
  report.private_b_cache_bytes = c.cache_bytes ? c.cache_bytes : NoEvictionBytes(c.decode_rows(), rec);
  report.service_cache_bytes = c.cache_bytes ? c.cache_bytes : NoEvictionBytes(c.bulk_rows() + c.decode_rows(), rec);
  report.stopped_cache_bytes =
      c.cache_bytes ? c.cache_bytes : NoEvictionBytes(c.held_rows() + 2 * c.stopped_decode_rows(), rec);

  if (log) log("node --mixed: fairness: two private stores");
  ENGRAM_ASSIGN_OR_RETURN(report.private_pair,
                          RunPair(c, "", report.private_a_cache_bytes, report.private_b_cache_bytes, ranges.private_a,
                                  c.decode_shares_bulk_rows ? ranges.private_a : ranges.private_b, c.seed));
  if (log) log("node --mixed: fairness: two clients of one engram-served");
  {
    ENGRAM_ASSIGN_OR_RETURN(ChildProcess service,
                            StartNodeService(c.served, c.file, socket, report.service_cache_bytes));
    ENGRAM_ASSIGN_OR_RETURN(report.service_pair,
                            RunPair(c, socket, 0, 0, ranges.service_a,
                                    c.decode_shares_bulk_rows ? ranges.service_a : ranges.service_b, c.seed + 5));
    StopNodeService(service);
  }
  if (log) log("node --mixed: stopped neighbour");
  ENGRAM_RETURN_IF_ERROR(RunStopped(c, socket, ranges, report, log));
  return report;
}

}  // namespace engram::bench
