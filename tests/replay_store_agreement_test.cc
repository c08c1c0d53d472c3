// engram-replay's emulator and the real store run the same cache code: the
// same trace through both gives identical counts, request by request.
#include <gtest/gtest.h>

#include <fstream>

#include "engram/hasher.h"
#include "engram/store.h"
#include "src/cache/row_cache.h"
#include "src/ngram/scaled_layout.h"
#include "src/replay/gather_trace.h"
#include "src/replay/policy_runner.h"
#include "src/workload/store_workload.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

std::vector<uint32_t> ReadTokens(const std::string& path, size_t max_tokens) {
  std::ifstream f(path, std::ios::binary);
  std::vector<uint32_t> t(max_tokens);
  f.read(reinterpret_cast<char*>(t.data()), std::streamsize(t.size() * 4));
  t.resize(size_t(f.gcount()) / 4);
  return t;
}

TEST(ReplayStoreAgreement, EmulatorAndStoreCountIdenticallyPerRequest) {
  auto v41 = EngramHashLayout::FromFile(std::string(ENGRAM_FIXTURE_DIR) + "/engram-hash/layout-v41.json", 0);
  ASSERT_TRUE(v41.ok()) << v41.status().ToString();
  auto layout = ScaleLayout(*v41, 300000);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  auto hasher = NgramHasher::Create(*layout);
  ASSERT_TRUE(hasher.ok());

  // Three requests shaped like the report's: A, B, A again.
  const std::string dir = std::string(ENGRAM_FIXTURE_DIR) + "/traces/deepspeed/";
  std::vector<std::vector<uint32_t>> requests{ReadTokens(dir + "req1.u32", 3000), ReadTokens(dir + "req3.u32", 5000),
                                              ReadTokens(dir + "req5.u32", 3000)};
  std::vector<replay::SplitSpec> splits(3);
  splits[0].kind = replay::SplitSpec::Kind::kEqualChunks;
  splits[0].value = 3;
  splits[1].value = 1024;
  splits[2].value = 1024;
  std::vector<std::string> names{"A", "B", "A again"};
  auto trace = replay::BuildTraceFromTokens(*hasher, requests, splits, names);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();

  testing::TempDir dir_;
  const std::string table = dir_.File("scaled.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(table, layout->total_rows, 264, 5).ok());

  for (const char* policy : {"legacy", "two-choice", "default", "lru"}) {
    SCOPED_TRACE(policy);
    // A budget well below the trace's distinct rows, so evictions and
    // refusals happen.
    const uint64_t budget = 20u << 20;
    StoreOptions o;
    o.tables.push_back({table, "", 0});
    o.cache_bytes = budget;
    o.cache_policy = policy;
    o.io_backend = "pread";
    o.direct_io = false;  // counting, not I/O, is under test: let the page cache serve
    auto store = Store::Open(o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto served = RunTracesThroughStore(**store, std::span<const replay::GatherTrace>(&*trace, 1));
    ASSERT_TRUE(served.ok()) << served.status().ToString();

    replay::PolicyJob job;
    job.policy = policy;
    job.capacity_rows = (*store)->Stats(0).cache.capacity_rows;
    auto emulated = replay::RunPolicies(std::span<const replay::PolicyJob>(&job, 1), *trace, {});
    ASSERT_TRUE(emulated.ok()) << emulated.status().ToString();
    const replay::PolicyRun& run = (*emulated)[0];
    EXPECT_EQ(run.capacity_rows, (*store)->Stats(0).cache.capacity_rows);
    ASSERT_EQ(run.requests.size(), served->size());
    uint64_t evictions = 0;
    for (size_t r = 0; r < served->size(); ++r) {
      SCOPED_TRACE(names[r]);
      const RowCacheStats& e = run.requests[r].cache;
      const RequestRunStats& s = (*served)[r];
      EXPECT_EQ(e.lookups, s.lookups);
      EXPECT_EQ(e.hits, s.hits);
      EXPECT_EQ(e.misses, s.misses);
      EXPECT_EQ(e.inserts, s.inserts);
      EXPECT_EQ(e.total_refusals(), s.refusals);
      EXPECT_EQ(e.evictions, s.evictions);
      EXPECT_EQ(e.resident_rows, s.resident_rows);
      evictions += s.evictions;
    }
    EXPECT_GT(evictions, 0u);  // the budget really was under pressure
  }
}

}  // namespace
}  // namespace engram
