// node_test_client: a client process of engram-served for the node tests
// (tests/node_service_test.cc), which start it with fork/exec and kill it.
//
//   node_test_client SOCKET MODE SEED TABLE...
//
// Opens a client store of the tables (generated with SEED), prints "ready"
// on stdout once its first gather is verified, then, by MODE:
//   gather-loop   gathers random rows of table 0 until killed, checking
//                 every row against the generator; exits 1 on a wrong row
//   hit-loop      the same over table 0's first 4,096 rows only: once they
//                 are cached, every gather is all hits (for counting what
//                 a hit costs, e.g. system calls with perf stat)
//   hold-pins     reads ahead 512 rows of table 0 and holds the pins
//   gather-for MS gathers for MS milliseconds, then prints "ok GATHERS
//                 ROWS" and exits 0 (1 on a wrong row or a failed gather)
//   bulk FIRST ROWS GATHERS
//                 a prefill: starts GATHERS gathers at once, of ROWS
//                 consecutive rows each from FIRST on, prints "started",
//                 then "done NS" (CLOCK_MONOTONIC) as each completes, checked,
//                 and exits 0
//   bulk-loop ROWS GATHERS
//                 keeps GATHERS gathers of ROWS random rows in flight until
//                 killed (a client that may be stopped with answers pending)
//   pin-range FIRST COUNT
//                 reads ahead rows [FIRST, FIRST + COUNT) of table 0, waits
//                 for them to land, prints "pinned" and holds them
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engram/store.h"
#include "src/tablegen/row_generator.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: node_test_client SOCKET gather-loop|hit-loop|hold-pins|gather-for MS|bulk FIRST ROWS GATHERS|"
               "bulk-loop ROWS GATHERS|pin-range FIRST COUNT SEED TABLE...\n");
  return 2;
}

uint64_t MonotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) return Usage();
  const std::string socket = argv[1];
  const std::string mode = argv[2];
  int arg = 3;
  long duration_ms = 0;
  uint64_t first = 0, count = 0, gathers_at_once = 0;
  if (mode == "gather-for") {
    duration_ms = std::strtol(argv[arg++], nullptr, 10);
    if (argc < 6) return Usage();
  }
  if (mode == "bulk") {
    if (argc < 8) return Usage();
    first = std::strtoull(argv[arg++], nullptr, 10);
    count = std::strtoull(argv[arg++], nullptr, 10);
    gathers_at_once = std::strtoull(argv[arg++], nullptr, 10);
  }
  if (mode == "bulk-loop") {
    if (argc < 7) return Usage();
    count = std::strtoull(argv[arg++], nullptr, 10);
    gathers_at_once = std::strtoull(argv[arg++], nullptr, 10);
  }
  if (mode == "pin-range") {
    if (argc < 7) return Usage();
    first = std::strtoull(argv[arg++], nullptr, 10);
    count = std::strtoull(argv[arg++], nullptr, 10);
  }
  const uint64_t seed = std::strtoull(argv[arg++], nullptr, 10);
  engram::StoreOptions options;
  options.node = socket;
  options.node_client_name = "test-" + std::to_string(::getpid());
  for (; arg < argc; ++arg) {
    engram::TableOptions t;
    t.path = argv[arg];
    options.tables.push_back(t);
  }
  auto opened = engram::Store::Open(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "node_test_client: %s\n", opened.status().ToString().c_str());
    return 3;
  }
  engram::Store& store = **opened;
  const uint32_t record = store.record_bytes(0);
  const uint64_t rows = mode == "hit-loop" ? std::min<uint64_t>(store.row_count(0), 4096) : store.row_count(0);
  std::mt19937_64 rng(::getpid());
  std::vector<uint64_t> ids(64);
  std::vector<std::byte> out(ids.size() * record), expected(record);
  uint64_t gathers = 0, checked = 0;
  auto gather_once = [&]() -> int {
    for (auto& id : ids) id = rng() % rows;
    engram::GatherResult r = store.Gather(0, ids, out.data(), record);
    if (!r.status.ok()) {
      std::fprintf(stderr, "node_test_client: gather failed: %s\n", r.status.ToString().c_str());
      return 1;
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      engram::GenerateRow(seed, ids[i], expected);
      if (std::memcmp(out.data() + i * record, expected.data(), record) != 0) {
        std::fprintf(stderr, "node_test_client: WRONG ROW %llu\n", static_cast<unsigned long long>(ids[i]));
        return 1;
      }
    }
    ++gathers;
    checked += ids.size();
    return 0;
  };
  // A row of table 0 as the generator made it.
  auto check_rows = [&](std::span<const uint64_t> rows, const std::vector<std::byte>& got) -> bool {
    for (size_t i = 0; i < rows.size(); ++i) {
      engram::GenerateRow(seed, rows[i], expected);
      if (std::memcmp(got.data() + i * record, expected.data(), record) != 0) {
        std::fprintf(stderr, "node_test_client: WRONG ROW %llu\n", static_cast<unsigned long long>(rows[i]));
        return false;
      }
    }
    return true;
  };
  if (mode == "bulk") {
    // No warm-up gather: every row of the bulk is a miss.
    std::vector<std::vector<uint64_t>> rows(gathers_at_once);
    std::vector<std::vector<std::byte>> outs(gathers_at_once);
    std::vector<engram::GatherTicket> tickets;
    for (uint64_t g = 0; g < gathers_at_once; ++g) {
      for (uint64_t i = 0; i < count; ++i) rows[g].push_back(first + g * count + i);
      outs[g].resize(count * record);
      tickets.push_back(store.StartGather(0, rows[g], outs[g].data(), record));
    }
    std::printf("started\n");
    std::fflush(stdout);
    for (uint64_t g = 0; g < gathers_at_once; ++g) {
      engram::GatherResult r = std::move(tickets[g]).Wait();
      const uint64_t at = MonotonicNs();
      if (!r.status.ok()) {
        std::fprintf(stderr, "node_test_client: bulk gather failed: %s\n", r.status.ToString().c_str());
        return 1;
      }
      if (!check_rows(rows[g], outs[g])) return 1;
      std::printf("done %llu\n", static_cast<unsigned long long>(at));
      std::fflush(stdout);
    }
    return 0;
  }
  if (mode == "bulk-loop") {
    struct InFlight {
      std::vector<uint64_t> rows;
      std::vector<std::byte> out;
      engram::GatherTicket ticket;
    };
    std::vector<InFlight> in_flight(gathers_at_once);
    auto start = [&](InFlight& f) {
      f.rows.resize(count);
      for (auto& id : f.rows) id = rng() % store.row_count(0);
      f.out.resize(count * record);
      f.ticket = store.StartGather(0, f.rows, f.out.data(), record);
    };
    for (auto& f : in_flight) start(f);
    std::printf("ready\n");
    std::fflush(stdout);
    for (size_t k = 0;; k = (k + 1) % in_flight.size()) {
      engram::GatherResult r = std::move(in_flight[k].ticket).Wait();
      if (!r.status.ok()) {
        std::fprintf(stderr, "node_test_client: gather failed: %s\n", r.status.ToString().c_str());
        return 1;
      }
      if (!check_rows(in_flight[k].rows, in_flight[k].out)) return 1;
      start(in_flight[k]);
    }
  }
  if (mode == "pin-range") {
    std::vector<uint64_t> pins;
    for (uint64_t i = 0; i < count; ++i) pins.push_back(first + i);
    if (auto s = store.ReadAhead(0, pins); !s.ok()) {
      std::fprintf(stderr, "node_test_client: read-ahead failed: %s\n", s.ToString().c_str());
      return 1;
    }
    store.WaitForReadAheads();
    std::printf("pinned\n");
    std::fflush(stdout);
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (gather_once() != 0) return 1;
  if (mode == "hold-pins") {
    std::vector<uint64_t> pins(512);
    for (auto& id : pins) id = rng() % rows;
    if (!store.ReadAhead(0, pins).ok()) return 1;
    store.WaitForReadAheads();
  }
  std::printf("ready\n");
  std::fflush(stdout);
  if (mode == "gather-loop" || mode == "hit-loop") {
    for (;;) {
      if (gather_once() != 0) return 1;
    }
  }
  if (mode == "hold-pins") {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (mode == "gather-for") {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(duration_ms);
    while (std::chrono::steady_clock::now() < end) {
      if (gather_once() != 0) return 1;
    }
    std::printf("ok %llu %llu\n", static_cast<unsigned long long>(gathers), static_cast<unsigned long long>(checked));
    return 0;
  }
  return Usage();
}
