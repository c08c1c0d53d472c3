// Store::Open cost: wall time to open a store and the resident memory the
// open commits, on a small table with a large cache budget (the C API's
// default 1 GiB) and on a table with a large metadata section.
//
//   BM_OpenSmallTable/<record_bytes>   a 1,000-row table, 1 GiB budget;
//                                      counters capacity_rows, rss_growth_mib
//   BM_OpenLargeMetadata               a 100-row table with ~27 MB of
//                                      metadata (300,000 small objects), 4 MiB
//                                      budget; counter rss_growth_mib
//
// rss_growth_mib is what one open (with the store still open) adds to the
// process's RSS, from /proc/self/statm, measured on the first iteration.
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "engram/store.h"
#include "src/common/resident_memory.h"
#include "src/tablegen/table_generator.h"
#include "storage/table_writer.h"

using engram::testing::ResidentBytes;

namespace {

std::string TempPath(const std::string& name) {
  const char* base = std::getenv("TMPDIR");
  return std::string(base && *base ? base : "/tmp") + "/engram-open-bench-" + std::to_string(getpid()) + "-" + name;
}

void Open(benchmark::State& state, const std::string& path, uint64_t cache_bytes) {
  engram::StoreOptions o;
  o.tables.push_back({path, "", 0});
  o.cache_bytes = cache_bytes;
  o.io_backend = "pread";
  bool first = true;
  for (auto _ : state) {
    const uint64_t before = ResidentBytes();
    auto store = engram::Store::Open(o);
    if (!store.ok()) {
      state.SkipWithError(store.status().ToString().c_str());
      break;
    }
    if (first) {
      state.counters["rss_growth_mib"] = double(ResidentBytes() - before) / double(1 << 20);
      state.counters["capacity_rows"] = double((*store)->Stats(0).cache.capacity_rows);
      first = false;
    }
  }
}

void BM_OpenSmallTable(benchmark::State& state) {
  const std::string path = TempPath("small.engram");
  engram::GenerateTableOptions g;
  g.rows = 1000;
  g.record_bytes = static_cast<uint32_t>(state.range(0));
  g.seed = 1;
  g.sync = false;
  if (auto s = engram::GenerateTable(path, g); !s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  Open(state, path, uint64_t{1} << 30);
  std::filesystem::remove(path);
}
BENCHMARK(BM_OpenSmallTable)->Arg(1)->Arg(264)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_OpenLargeMetadata(benchmark::State& state) {
  const std::string path = TempPath("meta.engram");
  // Written by a child process: the JSON tree that writes it must leave no
  // freed heap here for the open to reuse unseen (that would hide its cost).
  const pid_t child = fork();
  if (child == 0) {
    nlohmann::json shards = nlohmann::json::array();
    for (uint64_t i = 0; i < 300000; ++i) {
      shards.push_back({{"name", "model.layers." + std::to_string(i) + ".engram.weight"},
                        {"shape", {1024, 264}},
                        {"offsets", {i * 1000, i * 1000 + 999}}});
    }
    engram::TableWriterOptions opt;
    opt.record_bytes = 264;
    opt.sync = false;
    opt.metadata = {{"source", {{"shards", std::move(shards)}}}};
    auto w = engram::TableWriter::Create(path, std::move(opt));
    std::vector<std::byte> rows(100 * 264, std::byte{1});
    _exit(w.ok() && (*w)->AppendRecords(rows).ok() && (*w)->Finish().ok() ? 0 : 1);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    state.SkipWithError("cannot write the table");
    return;
  }
  Open(state, path, 4u << 20);
  std::filesystem::remove(path);
}
BENCHMARK(BM_OpenLargeMetadata)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
