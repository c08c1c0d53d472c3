// The workload shared by engram-demo and `engram-bench gather`: budgets that
// give exactly the asked capacity, tables generated once and reused, and a
// metrics server that follows whichever store is running.
#include "src/workload/report_workload.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "src/cache/cache_config.h"
#include "src/cache/row_cache.h"
#include "tests/testing/http_client.h"
#include "storage/table_writer.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

using testing::TempDir;

TEST(BudgetForCapacity, ReturnsTheSmallestBudgetThatHoldsTheRows) {
  for (const char* policy : {"legacy", "default", "lru"}) {
    auto config = RowCacheConfig::FromSpec(policy);
    ASSERT_TRUE(config.ok());
    auto budget = BudgetForCapacity(policy, 100000, 264);
    ASSERT_TRUE(budget.ok()) << budget.status().ToString();
    auto cap = RowCache::CapacityForBudget(*config, *budget, 264);
    ASSERT_TRUE(cap.ok());
    EXPECT_GE(*cap, 100000u) << policy;
    auto below = RowCache::CapacityForBudget(*config, *budget - 1, 264);
    EXPECT_TRUE(!below.ok() || *below < 100000u) << policy;
  }
  EXPECT_FALSE(BudgetForCapacity("ways=0", 1000, 264).ok());
  EXPECT_FALSE(BudgetForCapacity("legacy", 0, 264).ok());
}

// Token file of n little-endian uint32 token IDs.
std::string WriteTokens(const TempDir& dir, const std::string& name, uint32_t n, uint32_t salt) {
  std::vector<uint32_t> t(n);
  for (uint32_t i = 0; i < n; ++i) t[i] = 3 + (i * 2654435761u + salt) % 120000;
  std::string path = dir.File(name);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(t.data()), t.size() * 4);
  return path;
}

ReportWorkloadOptions SmallWorkload(const TempDir& dir) {
  ReportWorkloadOptions o;
  o.work_dir = dir.File("work");
  o.layout_path = std::string(ENGRAM_FIXTURE_DIR) + "/engram-hash/layout-v41.json";
  o.layers = {0, 1};
  o.rows_per_table = 100000;
  std::string a = WriteTokens(dir, "a.u32", 600, 1);
  o.requests = {*replay::RequestSpec::Parse(a + "@x3"), *replay::RequestSpec::Parse(a)};
  o.request_names = {"A", "A again"};
  return o;
}

TEST(PrepareReportWorkload, GeneratesOneTablePerLayerAndReusesThem) {
  TempDir dir;
  ReportWorkloadOptions o = SmallWorkload(dir);
  std::vector<std::string> log;
  auto w = PrepareReportWorkload(o, [&](const std::string& l) { log.push_back(l); });
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->table_paths.size(), 2u);
  ASSERT_EQ(w->traces.size(), 2u);
  EXPECT_EQ(w->traces[0].requests(), 2u);
  EXPECT_EQ(w->traces[0].gathers(), 4u);
  EXPECT_EQ(w->traces[0].request_names[1], "A again");
  EXPECT_GT(w->distinct_rows_max, 0u);
  EXPECT_NE(w->layouts[0].layer_id, w->layouts[1].layer_id);
  for (const auto& p : w->table_paths) EXPECT_TRUE(std::filesystem::exists(p)) << p;
  auto mtime = std::filesystem::last_write_time(w->table_paths[0]);

  log.clear();
  auto again = PrepareReportWorkload(o, [&](const std::string& l) { log.push_back(l); });
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(log.size(), 2u);
  EXPECT_NE(log[0].find("reusing"), std::string::npos) << log[0];
  EXPECT_EQ(std::filesystem::last_write_time(w->table_paths[0]), mtime);

  o.seed = 77;  // different content: must be regenerated, never served stale
  log.clear();
  ASSERT_TRUE(PrepareReportWorkload(o, [&](const std::string& l) { log.push_back(l); }).ok());
  EXPECT_NE(log[0].find("generated"), std::string::npos) << log[0];
}

// A table at the workload's path whose metadata has "generator" of another
// shape (not an object, or a seed that is not a number) was written by
// something else: it is regenerated, never a nlohmann::json type_error.
TEST(PrepareReportWorkload, RegeneratesATableWhoseGeneratorMetadataHasAnotherShape) {
  TempDir dir;
  ReportWorkloadOptions o = SmallWorkload(dir);
  auto w = PrepareReportWorkload(o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const std::string path = w->table_paths[0];
  const uint64_t rows = w->layouts[0].total_rows;
  for (nlohmann::json generator : {nlohmann::json("hand-made"), nlohmann::json::array({1, 2}),
                                   nlohmann::json{{"seed", "1000"}}, nlohmann::json{{"seed", nullptr}}}) {
    TableWriterOptions wo;
    wo.record_bytes = o.record_bytes;
    wo.metadata = {{"generator", generator}, {"hash_layout", nlohmann::json::parse(w->layouts[0].ToJson())}};
    wo.sync = false;
    auto writer = TableWriter::Create(path, wo);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    std::vector<std::byte> record(o.record_bytes);
    for (uint64_t r = 0; r < rows; ++r) ASSERT_TRUE((*writer)->Append(record).ok());
    ASSERT_TRUE((*writer)->Finish().ok());

    std::vector<std::string> log;
    auto again = PrepareReportWorkload(o, [&](const std::string& l) { log.push_back(l); });
    ASSERT_TRUE(again.ok()) << generator.dump() << ": " << again.status().ToString();
    ASSERT_FALSE(log.empty());
    EXPECT_NE(log[0].find("generated"), std::string::npos) << generator.dump() << ": " << log[0];
  }
}

TEST(PrepareReportWorkload, RejectsBadInputsWithClearErrors) {
  TempDir dir;
  ReportWorkloadOptions o = SmallWorkload(dir);
  o.layers = {};
  EXPECT_EQ(PrepareReportWorkload(o).status().code(), StatusCode::kInvalidArgument);
  o = SmallWorkload(dir);
  o.layout_path = dir.File("missing.json");
  EXPECT_FALSE(PrepareReportWorkload(o).ok());
  o = SmallWorkload(dir);
  o.layers = {99};
  EXPECT_FALSE(PrepareReportWorkload(o).ok());
  o = SmallWorkload(dir);
  o.requests = {*replay::RequestSpec::Parse(dir.File("nope.u32"))};
  EXPECT_FALSE(PrepareReportWorkload(o).ok());
}

TEST(RunPolicies, EachPolicyRunsOnAFreshStoreAndMetricsFollowTheRunningOne) {
  TempDir dir;
  auto w = PrepareReportWorkload(SmallWorkload(dir));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  auto server = WorkloadMetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string url = (*server)->url();
  const uint16_t port = uint16_t(std::stoi(url.substr(url.rfind(':') + 1)));
  std::string empty = testing::Get(port, "/metrics");
  EXPECT_NE(empty.find("200 OK"), std::string::npos) << empty;
  EXPECT_EQ(empty.find("engram_gathers_total"), std::string::npos);

  PolicyRunOptions run;
  run.policies = {"legacy", "default"};
  run.budget_per_table = 16u << 20;
  run.io_backend = "pread";
  run.metrics = server->get();
  std::vector<std::string> started;
  std::string scraped_during_run;
  run.on_start = [&](const std::string& policy, const Store&) { started.push_back(policy); };
  run.progress = [&](const WorkloadProgress& p) {
    if (started.size() == 2 && p.request == 1) scraped_during_run = testing::Get(port, "/metrics");
  };
  std::unique_ptr<Store> last;
  auto runs = RunPolicies(*w, run, &last);
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  EXPECT_EQ(started, (std::vector<std::string>{"legacy", "default"}));
  ASSERT_EQ(runs->size(), 2u);
  for (const auto& p : *runs) {
    ASSERT_EQ(p.requests.size(), 2u);
    // A fresh store per policy: the first request starts cold.
    EXPECT_EQ(p.requests[0].hits + p.requests[0].misses, p.requests[0].lookups);
    EXPECT_GT(p.requests[0].misses, 0u) << p.policy;
    if (p.policy == "default") {
      EXPECT_EQ(p.requests[1].misses, 0u) << "default: a re-read with room for everything";
    }
    EXPECT_GT(p.requests[1].hits, p.requests[1].misses) << p.policy;
  }
  ASSERT_NE(last, nullptr);
  EXPECT_NE(scraped_during_run.find("engram_gathers_total{table=\"layer1\"}"), std::string::npos)
      << scraped_during_run;
  std::string after = testing::Get(port, "/metrics");
  EXPECT_NE(after.find("engram_gathers_total{table=\"layer14\"} 4"), std::string::npos) << after;
  (*server)->Follow(nullptr);

  run.policies = {"not-a-policy"};
  EXPECT_FALSE(RunPolicies(*w, run).ok());
}

}  // namespace
}  // namespace engram
