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
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engram/store.h"
#include "src/tablegen/row_generator.h"

namespace {

int Usage() {
  std::fprintf(stderr, "usage: node_test_client SOCKET gather-loop|hit-loop|hold-pins|gather-for MS SEED TABLE...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) return Usage();
  const std::string socket = argv[1];
  const std::string mode = argv[2];
  int arg = 3;
  long duration_ms = 0;
  if (mode == "gather-for") {
    duration_ms = std::strtol(argv[arg++], nullptr, 10);
    if (argc < 6) return Usage();
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
