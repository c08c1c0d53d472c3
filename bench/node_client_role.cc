#include "bench/node_client_role.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

namespace engram::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Lines from the job threads and from the command loop never interleave.
std::mutex print_mu;
void PrintLine(const std::string& line) {
  std::lock_guard lock(print_mu);
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

// The rows of [first, first + count) in a seeded order, the first `take`
// of them: a command draws its gathers from the front, so none of its rows
// repeats.
std::vector<uint64_t> Permuted(uint64_t first, uint64_t count, uint64_t seed, uint64_t take) {
  std::vector<uint64_t> rows(count);
  std::iota(rows.begin(), rows.end(), first);
  std::mt19937_64 rng(seed);
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.resize(std::min(take, count));
  return rows;
}

// "missed ROWS SECONDS[ failed]": the miss phase of `engram-bench node`.
void Miss(Store& s, const NodeClientRole& r) {
  const uint32_t rec = s.record_bytes(0);
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
  char line[128];
  std::snprintf(line, sizeof(line), "missed %llu %.6f%s", static_cast<unsigned long long>(missed.load()),
                Seconds(Clock::now() - t0), failed ? " failed" : "");
  PrintLine(line);
}

// "bulk ROWS SECONDS HIT_ROWS FAILED": gathers taken in turn by in_flight
// threads, so that many are in flight until the last ones.
void Bulk(Store& s, uint64_t first, uint64_t count, uint32_t rows_per_gather, uint32_t in_flight, uint64_t gathers,
          uint64_t seed) {
  const uint32_t rec = s.record_bytes(0);
  gathers = std::min<uint64_t>(gathers, count / rows_per_gather);
  const std::vector<uint64_t> rows = Permuted(first, count, seed, gathers * rows_per_gather);
  std::atomic<uint64_t> next{0}, done_rows{0}, hit_rows{0}, failed{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < in_flight; ++t) {
    threads.emplace_back([&] {
      std::vector<std::byte> dst(size_t{rows_per_gather} * rec);
      for (uint64_t g; (g = next.fetch_add(1)) < gathers;) {
        std::span<const uint64_t> ids(rows.data() + g * rows_per_gather, rows_per_gather);
        GatherResult r = s.Gather(0, ids, dst.data(), rec);
        if (!r.status.ok()) ++failed;
        hit_rows += r.hits;
        done_rows += ids.size();
      }
    });
  }
  for (auto& t : threads) t.join();
  char line[160];
  std::snprintf(line, sizeof(line), "bulk %llu %.6f %llu %llu", static_cast<unsigned long long>(done_rows.load()),
                Seconds(Clock::now() - t0), static_cast<unsigned long long>(hit_rows.load()),
                static_cast<unsigned long long>(failed.load()));
  PrintLine(line);
}

// The latency client's loop; prints "decoded ..." when it ends.
void Decode(Store& s, uint64_t first, uint64_t count, uint32_t rows_per_gather, uint64_t interval_us,
            uint64_t max_gathers, uint64_t seed, const std::atomic<bool>& stop) {
  const uint32_t rec = s.record_bytes(0);
  const uint64_t supply = count / rows_per_gather;
  const uint64_t gathers = std::min(max_gathers == 0 ? supply : max_gathers, supply);
  const std::vector<uint64_t> rows = Permuted(first, count, seed, gathers * rows_per_gather);
  std::vector<std::byte> dst(size_t{rows_per_gather} * rec);
  std::vector<double> latencies_us;
  uint64_t hit_rows = 0, failed = 0;
  auto next_start = Clock::now();
  uint64_t g = 0;
  for (; g < gathers && !stop.load(std::memory_order_acquire); ++g) {
    std::this_thread::sleep_until(next_start);
    const auto t0 = Clock::now();
    next_start = t0 + std::chrono::microseconds(interval_us);
    std::span<const uint64_t> ids(rows.data() + g * rows_per_gather, rows_per_gather);
    GatherResult r = s.Gather(0, ids, dst.data(), rec);
    latencies_us.push_back(Seconds(Clock::now() - t0) * 1e6);
    if (!r.status.ok()) ++failed;
    hit_rows += r.hits;
  }
  // Ran out: the supply ended the loop, not the count asked for or a stop.
  const bool ran_out = g == supply && (max_gathers == 0 || max_gathers > supply) && !stop.load();
  std::ostringstream line;
  line << "decoded " << latencies_us.size() << ' ' << hit_rows << ' ' << failed << ' ' << (ran_out ? 1 : 0) << ' ';
  char v[32];
  for (size_t i = 0; i < latencies_us.size(); ++i) {
    std::snprintf(v, sizeof(v), "%s%.1f", i ? "," : "", latencies_us[i]);
    line << v;
  }
  if (latencies_us.empty()) line << '-';
  PrintLine(line.str());
}

// "holding ANSWERED", then stopped; once continued, "held ROWS MISSES
// OK|STATUS". ANSWERED: the gathers whose answers had come before the stop
// (0 when every answer was left unread).
void Hold(Store& s, uint64_t first, uint64_t count, uint32_t rows_per_gather, uint32_t in_flight, uint64_t seed) {
  const uint32_t rec = s.record_bytes(0);
  in_flight = static_cast<uint32_t>(std::min<uint64_t>(in_flight, count / rows_per_gather));
  const std::vector<uint64_t> rows = Permuted(first, count, seed, uint64_t{in_flight} * rows_per_gather);
  std::vector<std::vector<std::byte>> dst(in_flight, std::vector<std::byte>(size_t{rows_per_gather} * rec));
  std::vector<GatherResult> results(in_flight);
  std::atomic<uint32_t> answered{0};
  // One waiting thread per gather, so that an answer that comes before the
  // stop is seen as it comes.
  std::vector<std::thread> waiters;
  for (uint32_t i = 0; i < in_flight; ++i) {
    GatherTicket t = s.StartGather(0, std::span(rows.data() + size_t{i} * rows_per_gather, rows_per_gather),
                                   dst[i].data(), rec);
    waiters.emplace_back([&results, &answered, i, t = std::move(t)]() mutable {
      results[i] = t.Wait();
      answered.fetch_add(1);
    });
  }
  PrintLine("holding " + std::to_string(answered.load()));
  // Every thread of this process stops here, the one that reads the
  // service's answers included: the answers stay unread until SIGCONT.
  ::raise(SIGSTOP);
  for (std::thread& w : waiters) w.join();
  uint64_t done = 0, misses = 0;
  Status first_failure;
  for (const GatherResult& r : results) {
    done += r.rows;
    misses += r.misses;
    if (!r.status.ok() && first_failure.ok()) first_failure = r.status;
  }
  PrintLine("held " + std::to_string(done) + " " + std::to_string(misses) + " " +
            (first_failure.ok() ? std::string("OK") : first_failure.ToString()));
}

}  // namespace

std::vector<std::string> NodeClientArgs(const std::string& self, const NodeClientRole& r) {
  return {self,
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

Result<ChildProcess> StartNodeService(const std::string& served, const std::string& file, const std::string& socket,
                                      uint64_t cache_bytes) {
  ChildProcess service = ChildProcess::Start({served, "--socket", socket, "--table", file, "--cache-bytes",
                                              std::to_string(cache_bytes), "--log-level", "warn"});
  if (!service.WaitForLine("engram-served: ready", 120s)) {
    return Status::Unavailable("node: " + served + " did not start (is it built? --served)");
  }
  return service;
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
    if (!p.Wait(30s)) {
      p.Kill(SIGKILL);
      p.Wait(30s);
    }
  }
}

void StopNodeService(ChildProcess& service) {
  service.Kill(SIGTERM);
  if (!service.Wait(60s)) {
    service.Kill(SIGKILL);
    service.Wait(30s);
  }
}

Result<BenchTempDir> BenchTempDir::Make(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  if (!::mkdtemp(tmpl.data())) return Status::FromErrno("node: temporary directory", errno);
  return BenchTempDir(tmpl);
}

BenchTempDir::~BenchTempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
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

std::vector<uint64_t> WorkingSet(uint64_t rows, uint64_t count, uint64_t seed) {
  return Permuted(0, rows, seed, count);
}

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
  PrintLine("ready");
  std::atomic<bool> stop_decode{false};
  std::thread decode;
  auto end_decode = [&] {
    stop_decode = true;
    if (decode.joinable()) decode.join();
    stop_decode = false;
  };
  const uint64_t rows = s.row_count(0);
  // A command's rows must lie in the table: a bad range is a driver's bug,
  // said on stderr and answered with an "error" line rather than a crash.
  auto in_table = [&](uint64_t first, uint64_t count) { return first <= rows && count <= rows - first; };
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    uint64_t first = 0, count = 0, per = 0, a = 0, b = 0, seed = 0;
    if (cmd == "exit") break;
    if (cmd == "miss") {
      Miss(s, r);
    } else if (cmd == "stats") {
      PrintLine("stats " + std::to_string(s.Stats(0).rows_requested));
    } else if (cmd == "stop") {
      end_decode();
    } else if (cmd == "bulk" && in >> first >> count >> per >> a >> b >> seed && per > 0 && a > 0 &&
               in_table(first, count)) {
      Bulk(s, first, count, static_cast<uint32_t>(per), static_cast<uint32_t>(a), b, seed);
    } else if (cmd == "decode" && in >> first >> count >> per >> a >> b >> seed && per > 0 &&
               in_table(first, count)) {
      end_decode();
      decode = std::thread([&s, &stop_decode, first, count, per, a, b, seed] {
        Decode(s, first, count, static_cast<uint32_t>(per), a, b, seed, stop_decode);
      });
    } else if (cmd == "hold" && in >> first >> count >> per >> a >> seed && per > 0 && a > 0 &&
               in_table(first, count)) {
      Hold(s, first, count, static_cast<uint32_t>(per), static_cast<uint32_t>(a), seed);
    } else {
      std::fprintf(stderr, "engram-bench node-client: bad command '%s'\n", line.c_str());
      PrintLine("error " + line);
    }
  }
  end_decode();
  return 0;
}

}  // namespace engram::bench
