#include "bench/node_benchmark.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>

#include "bench/hit_miss_benchmark.h"
#include "bench/node_client_role.h"
#include "engram/store.h"
#include "src/common/child_process.h"

namespace engram::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
inline void ClobberMemory(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

// A started engram-served, ready.
Result<ChildProcess> StartService(const NodeBenchConfig& c, const std::string& socket, uint64_t cache_bytes) {
  return StartNodeService(c.served, c.file, socket, cache_bytes);
}

// Tells every process to miss, waits for all; rows/s over the wall time.
Result<double> MissTogether(std::vector<ChildProcess>& procs, uint64_t rows) {
  const auto t0 = Clock::now();
  for (ChildProcess& p : procs) p.WriteLine("miss");
  for (ChildProcess& p : procs) {
    auto line = p.WaitForLine("missed", 600s);
    if (!line) return Status::Internal("node: a process did not finish its misses");
    if (line->find("failed") != std::string::npos) return Status::Internal("node: " + *line);
  }
  return double(rows) / Seconds(Clock::now() - t0);
}

}  // namespace

double NodeHitPoint::ratio() const { return MedianOf(round_ratios); }

double NodeBenchReport::miss_ratio() const {
  std::vector<double> r;
  for (size_t i = 0; i < client_miss_rows_per_s.size() && i < private_miss_rows_per_s.size(); ++i) {
    r.push_back(client_miss_rows_per_s[i] / private_miss_rows_per_s[i]);
  }
  return MedianOf(r);
}

Result<NodeBenchReport> RunNodeBenchmark(const NodeBenchConfig& cfg, const NodeBenchLog& log) {
  NodeBenchConfig c = cfg;
  ENGRAM_ASSIGN_OR_RETURN(TableShape shape, CheckBenchTable(c.file));
  ENGRAM_RETURN_IF_ERROR(CheckDirectIo(c.file));
  if (c.clients == 0) return Status::InvalidArgument("node: --clients must be >= 1");
  if (c.self.empty()) c.self = std::filesystem::read_symlink("/proc/self/exe").string();
  if (c.served.empty()) c.served = (std::filesystem::path(c.self).parent_path() / "engram-served").string();
  ENGRAM_ASSIGN_OR_RETURN(BenchTempDir dir, BenchTempDir::Make("engram-bench-node"));
  const std::string socket = dir.path() + "/node.sock";
  const uint32_t rec = shape.record_bytes;
  NodeBenchReport report;
  report.clients = c.clients;

  // 1. Memory.
  {
    report.memory_rows = std::min<uint64_t>(shape.rows, c.memory_cache_bytes / 2 / rec);
    if (log) log("node: memory: " + std::to_string(c.clients) + " clients and " + std::to_string(c.clients) +
                 " private stores gathering " + std::to_string(report.memory_rows) + " rows each");
    NodeClientRole role;
    role.file = c.file;
    role.warm_rows = report.memory_rows;
    role.seed = c.seed;
    {
      ENGRAM_ASSIGN_OR_RETURN(ChildProcess service, StartService(c, socket, c.memory_cache_bytes));
      std::vector<ChildProcess> clients;
      role.socket = socket;
      for (uint32_t i = 0; i < c.clients; ++i) clients.push_back(ChildProcess::Start(NodeClientArgs(c.self, role)));
      ENGRAM_RETURN_IF_ERROR(WaitReady(clients));
      report.service_pss_kib = FootprintOf(service.pid()).pss_kib;
      for (ChildProcess& p : clients) report.clients_pss_kib += FootprintOf(p.pid()).pss_kib;
      EndAll(clients);
      StopNodeService(service);
    }
    {
      std::vector<ChildProcess> privates;
      role.socket.clear();
      role.cache_bytes = c.memory_cache_bytes;
      for (uint32_t i = 0; i < c.clients; ++i) privates.push_back(ChildProcess::Start(NodeClientArgs(c.self, role)));
      ENGRAM_RETURN_IF_ERROR(WaitReady(privates));
      for (ChildProcess& p : privates) report.privates_pss_kib += FootprintOf(p.pid()).pss_kib;
      report.private_pss_kib = report.privates_pss_kib / c.clients;
      EndAll(privates);
    }
  }

  // 2. Hits: a client and a private store in this process.
  {
    uint64_t max_resident = 0;
    for (uint64_t r : c.resident_rows) max_resident = std::max(max_resident, std::min(r, shape.rows));
    const uint64_t cache_bytes =
        c.hit_cache_bytes ? c.hit_cache_bytes : std::max<uint64_t>(64ull << 20, 4 * max_resident * rec);
    ENGRAM_ASSIGN_OR_RETURN(ChildProcess service, StartService(c, socket, cache_bytes));
    ENGRAM_ASSIGN_OR_RETURN(auto client, OpenBenchStore(c.file, socket, 0));
    client->WaitForCacheMemory();
    ENGRAM_ASSIGN_OR_RETURN(auto priv, OpenBenchStore(c.file, "", cache_bytes));
    const std::vector<uint64_t> all = WorkingSet(shape.rows, max_resident, c.seed);
    for (uint64_t resident : c.resident_rows) {
      resident = std::min(resident, shape.rows);
      std::vector<uint64_t> ids(all.begin(), all.begin() + resident);
      for (Store* s : {client.get(), priv.get()}) {
        ENGRAM_ASSIGN_OR_RETURN(uint64_t hits, Warm(*s, ids));
        if (hits < resident) {
          return Status::ResourceExhausted("node: only " + std::to_string(hits) + " of " + std::to_string(resident) +
                                           " rows stayed resident in the " +
                                           (s == client.get() ? "client's service" : "private store") + " of " +
                                           std::to_string(cache_bytes >> 20) + " MiB (--cache-bytes)");
        }
      }
      std::mt19937_64 rng(c.seed + resident);
      std::shuffle(ids.begin(), ids.end(), rng);
      for (uint32_t n : c.rows_per_gather) {
        const size_t windows = std::max<size_t>(1, ids.size() / n);
        std::vector<std::byte> dst(size_t{n} * rec);
        NodeHitPoint p;
        p.resident_rows = resident;
        p.rows_per_gather = n;
        uint64_t rows[2] = {0, 0};
        double secs[2] = {0, 0};
        size_t cursor = 0;
        Status failed;
        auto run = [&](Store& s, double budget, int side) {
          uint64_t done = 0;
          const auto t0 = Clock::now();
          const auto end = t0 + std::chrono::duration<double>(budget);
          for (uint64_t g = 0;; ++g) {
            if ((g & 15) == 0 && Clock::now() >= end) break;
            std::span<const uint64_t> w(ids.data() + (cursor++ % windows) * n, std::min<size_t>(n, ids.size()));
            GatherResult r = s.Gather(0, w, dst.data(), rec);
            if (!r.status.ok() && failed.ok()) failed = r.status;
            if (r.hits != r.distinct_rows && failed.ok()) failed = Status::Internal("node: a hit gather missed");
            ClobberMemory(dst.data());
            done += w.size();
          }
          const double t = Seconds(Clock::now() - t0);
          rows[side] += done;
          secs[side] += t;
          return t * 1e9 / double(done);
        };
        const double slice = c.seconds / c.rounds;
        for (uint32_t round = 0; round < c.rounds; ++round) {
          const double client_ns = run(*client, slice, 0);
          const double private_ns = run(*priv, slice, 1);
          p.round_ratios.push_back(client_ns / private_ns);
        }
        if (!failed.ok()) return failed;
        p.client_ns_per_row = secs[0] * 1e9 / double(rows[0]);
        p.private_ns_per_row = secs[1] * 1e9 / double(rows[1]);
        if (log) {
          log("node: hit resident=" + std::to_string(resident) + " N=" + std::to_string(n) + ": client " +
              std::to_string(p.client_ns_per_row) + " ns/row, private " + std::to_string(p.private_ns_per_row) +
              " ns/row");
        }
        report.hits.push_back(std::move(p));
      }
    }
    client.reset();
    StopNodeService(service);
  }

  // 3. Misses: every row its own never-read block, clients' sets disjoint.
  {
    const uint64_t stride = shape.rows_per_block;
    uint64_t per_client = c.miss_rows_per_client;
    if (per_client * c.clients * stride > shape.rows) per_client = shape.rows / stride / c.clients;
    if (per_client == 0) return Status::InvalidArgument("node: the table is too small for the miss phase");
    report.miss_rows = per_client * c.clients;
    const uint64_t cache_bytes = std::max<uint64_t>(64ull << 20, 2 * report.miss_rows * rec);
    for (uint32_t round = 0; round < c.miss_rounds; ++round) {
      {
        ENGRAM_ASSIGN_OR_RETURN(ChildProcess service, StartService(c, socket, cache_bytes));
        std::vector<ChildProcess> clients;
        for (uint32_t i = 0; i < c.clients; ++i) {
          NodeClientRole role;
          role.file = c.file;
          role.socket = socket;
          role.miss_first = uint64_t{i} * per_client * stride;
          role.miss_count = per_client;
          role.miss_stride = stride;
          role.miss_rows_per_gather = c.miss_rows_per_gather;
          clients.push_back(ChildProcess::Start(NodeClientArgs(c.self, role)));
        }
        ENGRAM_RETURN_IF_ERROR(WaitReady(clients));
        ENGRAM_ASSIGN_OR_RETURN(double rate, MissTogether(clients, report.miss_rows));
        report.client_miss_rows_per_s.push_back(rate);
        EndAll(clients);
        StopNodeService(service);
      }
      {
        NodeClientRole role;
        role.file = c.file;
        role.cache_bytes = cache_bytes;
        role.threads = c.clients;
        role.miss_count = report.miss_rows;
        role.miss_stride = stride;
        role.miss_rows_per_gather = c.miss_rows_per_gather;
        std::vector<ChildProcess> one;
        one.push_back(ChildProcess::Start(NodeClientArgs(c.self, role)));
        ENGRAM_RETURN_IF_ERROR(WaitReady(one));
        ENGRAM_ASSIGN_OR_RETURN(double rate, MissTogether(one, report.miss_rows));
        report.private_miss_rows_per_s.push_back(rate);
        EndAll(one);
      }
      if (log) {
        log("node: miss round " + std::to_string(round + 1) + ": clients " +
            std::to_string(report.client_miss_rows_per_s.back()) + " rows/s, private " +
            std::to_string(report.private_miss_rows_per_s.back()) + " rows/s");
      }
    }
  }
  return report;
}

}  // namespace engram::bench
