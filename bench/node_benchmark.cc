#include "bench/node_benchmark.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <random>
#include <thread>

#include "bench/hit_miss_benchmark.h"
#include "engram/store.h"
#include "src/common/child_process.h"

namespace engram::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
inline void ClobberMemory(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

// The first `count` rows of a seeded permutation of the table: the same set
// in every process that asks with the same seed.
std::vector<uint64_t> WorkingSet(uint64_t rows, uint64_t count, uint64_t seed) {
  std::vector<uint64_t> all(rows);
  std::iota(all.begin(), all.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(std::min(rows, count));
  return all;
}

Result<std::unique_ptr<Store>> OpenBenchStore(const std::string& file, const std::string& socket,
                                              uint64_t cache_bytes) {
  StoreOptions o;
  o.tables = {{file, "", 0}};
  o.node = socket;
  // A client's cache is the service's: only a private store sets one.
  if (socket.empty()) o.cache_bytes = cache_bytes;
  ENGRAM_ASSIGN_OR_RETURN(auto store, Store::Open(o));
  store->WaitForCacheMemory();
  return store;
}

// Gathers `rows` (sorted, in chunks) until a whole pass hits, at most 4 passes.
Result<uint64_t> Warm(Store& store, std::vector<uint64_t> rows) {
  std::sort(rows.begin(), rows.end());
  const uint32_t rec = store.record_bytes(0);
  constexpr size_t kChunk = 4096;
  std::vector<std::byte> buf(kChunk * rec);
  uint64_t hits = 0;
  for (int pass = 0; pass < 4 && hits < rows.size(); ++pass) {
    hits = 0;
    for (size_t b = 0; b < rows.size(); b += kChunk) {
      std::span<const uint64_t> chunk(rows.data() + b, std::min(kChunk, rows.size() - b));
      GatherResult r = store.Gather(0, chunk, buf.data(), rec);
      if (!r.status.ok()) return r.status.WithContext("node: warming gather");
      hits += r.hits;
    }
  }
  return hits;
}

// A started engram-served, ready.
Result<ChildProcess> StartService(const NodeBenchConfig& c, const std::string& socket, uint64_t cache_bytes) {
  ChildProcess service = ChildProcess::Start({c.served, "--socket", socket, "--table", c.file, "--cache-bytes",
                                              std::to_string(cache_bytes), "--log-level", "warn"});
  if (!service.WaitForLine("engram-served: ready", 120s)) {
    return Status::Unavailable("node: " + c.served + " did not start (is it built? --served)");
  }
  return service;
}

std::vector<std::string> RoleArgs(const NodeBenchConfig& c, const NodeClientRole& r) {
  return {c.self,
          "node-client",
          "--file",
          r.file,
          "--socket",
          r.socket,
          "--cache-bytes",
          std::to_string(r.cache_bytes),
          "--warm-rows",
          std::to_string(r.warm_rows),
          "--seed",
          std::to_string(r.seed),
          "--threads",
          std::to_string(r.threads),
          "--miss-first",
          std::to_string(r.miss_first),
          "--miss-count",
          std::to_string(r.miss_count),
          "--miss-stride",
          std::to_string(r.miss_stride),
          "--miss-rows-per-gather",
          std::to_string(r.miss_rows_per_gather)};
}

Status WaitReady(std::vector<ChildProcess>& procs) {
  for (ChildProcess& p : procs) {
    if (!p.WaitForLine("ready", 600s)) return Status::Internal("node: a client process did not get ready");
  }
  return Status::OK();
}

void EndAll(std::vector<ChildProcess>& procs) {
  for (ChildProcess& p : procs) p.WriteLine("exit");
  for (ChildProcess& p : procs) {
    if (!p.Wait(30s)) p.Kill(SIGKILL);
  }
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
  char tmpl[] = "/tmp/engram-bench-node-XXXXXX";
  if (!mkdtemp(tmpl)) return Status::FromErrno("node: temporary directory", errno);
  const std::string dir = tmpl;
  struct RemoveDir {
    std::string d;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  } remove_dir{dir};
  const std::string socket = dir + "/node.sock";
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
      for (uint32_t i = 0; i < c.clients; ++i) clients.push_back(ChildProcess::Start(RoleArgs(c, role)));
      ENGRAM_RETURN_IF_ERROR(WaitReady(clients));
      report.service_pss_kib = FootprintOf(service.pid()).pss_kib;
      for (ChildProcess& p : clients) report.clients_pss_kib += FootprintOf(p.pid()).pss_kib;
      EndAll(clients);
      service.Kill(SIGTERM);
      service.Wait(60s);
    }
    {
      std::vector<ChildProcess> privates;
      role.socket.clear();
      role.cache_bytes = c.memory_cache_bytes;
      for (uint32_t i = 0; i < c.clients; ++i) privates.push_back(ChildProcess::Start(RoleArgs(c, role)));
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
    service.Kill(SIGTERM);
    service.Wait(60s);
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
          clients.push_back(ChildProcess::Start(RoleArgs(c, role)));
        }
        ENGRAM_RETURN_IF_ERROR(WaitReady(clients));
        ENGRAM_ASSIGN_OR_RETURN(double rate, MissTogether(clients, report.miss_rows));
        report.client_miss_rows_per_s.push_back(rate);
        EndAll(clients);
        service.Kill(SIGTERM);
        service.Wait(60s);
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
        one.push_back(ChildProcess::Start(RoleArgs(c, role)));
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

int RunNodeClientRole(const NodeClientRole& r) {
  auto store = OpenBenchStore(r.file, r.socket, r.cache_bytes);
  if (!store.ok()) {
    std::fprintf(stderr, "engram-bench node-client: %s\n", store.status().ToString().c_str());
    return 2;
  }
  Store& s = **store;
  if (r.warm_rows != 0) {
    auto warmed = Warm(s, WorkingSet(s.row_count(0), r.warm_rows, r.seed));
    if (!warmed.ok()) {
      std::fprintf(stderr, "engram-bench node-client: %s\n", warmed.status().ToString().c_str());
      return 1;
    }
  }
  std::printf("ready\n");
  std::fflush(stdout);
  const uint32_t rec = s.record_bytes(0);
  for (std::string line; std::getline(std::cin, line);) {
    if (line == "exit") break;
    if (line != "miss") continue;
    std::atomic<uint64_t> missed{0};
    std::atomic<bool> failed{false};
    const auto t0 = Clock::now();
    std::vector<std::thread> threads;
    const uint64_t share = (r.miss_count + r.threads - 1) / r.threads;
    for (uint32_t t = 0; t < r.threads; ++t) {
      threads.emplace_back([&, t] {
        const uint64_t begin = t * share, end = std::min(r.miss_count, begin + share);
        std::vector<uint64_t> ids;
        std::vector<std::byte> dst(size_t{r.miss_rows_per_gather} * rec);
        for (uint64_t k = begin; k < end;) {
          ids.clear();
          for (; k < end && ids.size() < r.miss_rows_per_gather; ++k) ids.push_back(r.miss_first + k * r.miss_stride);
          GatherResult g = s.Gather(0, ids, dst.data(), rec);
          if (!g.status.ok()) failed = true;
          missed += g.misses;
        }
      });
    }
    for (auto& t : threads) t.join();
    std::printf("missed %llu %.6f%s\n", static_cast<unsigned long long>(missed.load()),
                Seconds(Clock::now() - t0), failed ? " failed" : "");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace engram::bench
