// engram-replay's emulator and the real store run the same cache code: the
// same trace through both gives identical counts, request by request.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>

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

// Three requests shaped like the report's (A, B, A again), hashed with the
// V4.1 layout scaled to `rows_per_table` rows per table.
struct ReportTrace {
  std::unique_ptr<EngramHashLayout> layout;
  replay::GatherTrace trace;
  std::vector<std::string> names{"A", "B", "A again"};
};

ReportTrace MakeReportTrace(uint64_t rows_per_table) {
  ReportTrace t;
  auto v41 = EngramHashLayout::FromFile(std::string(ENGRAM_FIXTURE_DIR) + "/engram-hash/layout-v41.json", 0);
  EXPECT_TRUE(v41.ok()) << v41.status().ToString();
  auto layout = ScaleLayout(*v41, rows_per_table);
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  t.layout = std::make_unique<EngramHashLayout>(std::move(layout).value());
  auto hasher = NgramHasher::Create(*t.layout);
  EXPECT_TRUE(hasher.ok());
  const std::string dir = std::string(ENGRAM_FIXTURE_DIR) + "/traces/deepspeed/";
  std::vector<std::vector<uint32_t>> requests{ReadTokens(dir + "req1.u32", 3000), ReadTokens(dir + "req3.u32", 5000),
                                              ReadTokens(dir + "req5.u32", 3000)};
  std::vector<replay::SplitSpec> splits(3);
  splits[0].kind = replay::SplitSpec::Kind::kEqualChunks;
  splits[0].value = 3;
  splits[1].value = 1024;
  splits[2].value = 1024;
  auto trace = replay::BuildTraceFromTokens(*hasher, requests, splits, t.names);
  EXPECT_TRUE(trace.ok()) << trace.status().ToString();
  t.trace = std::move(trace).value();
  return t;
}

// Serves the trace from a store over `table` with `budget` bytes of cache and
// replays it through the emulator with `job`: the counts must be identical,
// request by request. Returns the store's.
std::vector<RequestRunStats> ServedAndEmulatedAgree(const ReportTrace& t, const std::string& table, uint64_t budget,
                                                    replay::PolicyJob job) {
  StoreOptions o;
  o.tables.push_back({table, "", 0});
  o.cache_bytes = budget;
  o.cache_policy = job.policy;
  o.io_backend = "pread";
  o.direct_io = false;  // counting, not I/O, is under test: let the page cache serve
  auto store = Store::Open(o);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return {};
  auto served = RunTracesThroughStore(**store, std::span<const replay::GatherTrace>(&t.trace, 1));
  EXPECT_TRUE(served.ok()) << served.status().ToString();
  if (!served.ok()) return {};

  auto emulated = replay::RunPolicies(std::span<const replay::PolicyJob>(&job, 1), t.trace, {});
  EXPECT_TRUE(emulated.ok()) << emulated.status().ToString();
  if (!emulated.ok()) return {};
  const replay::PolicyRun& run = (*emulated)[0];
  EXPECT_EQ(run.capacity_rows, (*store)->Stats(0).cache.capacity_rows);
  EXPECT_EQ(run.requests.size(), served->size());
  for (size_t r = 0; r < std::min(served->size(), run.requests.size()); ++r) {
    SCOPED_TRACE(t.names[r]);
    const RowCacheStats& e = run.requests[r].cache;
    const RequestRunStats& s = (*served)[r];
    EXPECT_EQ(e.lookups, s.lookups);
    EXPECT_EQ(e.hits, s.hits);
    EXPECT_EQ(e.misses, s.misses);
    EXPECT_EQ(e.inserts, s.inserts);
    EXPECT_EQ(e.total_refusals(), s.refusals);
    EXPECT_EQ(e.evictions, s.evictions);
    EXPECT_EQ(e.resident_rows, s.resident_rows);
  }
  return std::move(served).value();
}

TEST(ReplayStoreAgreement, EmulatorAndStoreCountIdenticallyPerRequest) {
  const ReportTrace t = MakeReportTrace(300000);
  testing::TempDir dir_;
  const std::string table = dir_.File("scaled.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(table, t.layout->total_rows, 264, 5).ok());

  for (const char* policy : {"legacy", "two-choice", "default", "lru"}) {
    SCOPED_TRACE(policy);
    // A budget well below the trace's distinct rows, so evictions and
    // refusals happen.
    const uint64_t budget = 20u << 20;
    auto capacity = RowCache::CapacityForBudget(RowCacheConfig::FromSpec(policy).value(), budget, 264,
                                                t.layout->total_rows);
    ASSERT_TRUE(capacity.ok());
    replay::PolicyJob job;
    job.policy = policy;
    job.capacity_rows = *capacity;
    uint64_t evictions = 0;
    for (const RequestRunStats& s : ServedAndEmulatedAgree(t, table, budget, job)) evictions += s.evictions;
    EXPECT_GT(evictions, 0u);  // the budget really was under pressure
  }
}

// A budget that covers the table: the store's cache places rows directly, and
// so does the emulator's when told the table's rows. Nothing is evicted or
// refused, and the request that repeats the first is served from memory.
TEST(ReplayStoreAgreement, BudgetCoveringTheTableAgreesAndMissesOnlyFirstReads) {
  const ReportTrace t = MakeReportTrace(2000);
  testing::TempDir dir_;
  const std::string table = dir_.File("small.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(table, t.layout->total_rows, 264, 5).ok());

  for (const char* policy : {"legacy", "two-choice", "default", "lru"}) {
    SCOPED_TRACE(policy);
    auto budget = RowCache::BudgetForRows(RowCacheConfig::FromSpec(policy).value(), t.layout->total_rows, 264);
    ASSERT_TRUE(budget.ok());
    replay::PolicyJob job;
    job.policy = policy;
    job.budget_bytes = *budget;
    job.capacity_rows = *budget / 264;  // what the bounds would get; the RowCache policy fits the budget
    job.row_bytes = 264;
    job.table_rows = t.layout->total_rows;
    const std::vector<RequestRunStats> served = ServedAndEmulatedAgree(t, table, *budget, job);
    ASSERT_EQ(served.size(), 3u);
    for (const RequestRunStats& s : served) {
      EXPECT_EQ(s.evictions, 0u);
      EXPECT_EQ(s.refusals, 0u);
      EXPECT_EQ(s.inserts, s.misses);  // every row read is kept
    }
    EXPECT_EQ(served[2].misses, 0u);  // "A again": every row of A is still there
    EXPECT_GT(served[0].misses, 0u);
  }
}

}  // namespace
}  // namespace engram
