// Policies replayed through the real RowCache: determinism (repeat runs and
// thread counts), counter invariants, the runner's bounds equal the direct
// simulators, and engram-replay's argument handling via RunReplay.
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/replay/gather_trace.h"
#include "src/replay/policy_runner.h"
#include "src/replay/reference_policies.h"
#include "src/replay/replay_command.h"
#include "src/replay/trace_files.h"

namespace engram::replay {
namespace {

const std::string kFixtures = ENGRAM_FIXTURE_DIR;
const std::vector<std::string> kPolicies = {"legacy", "ways8", "ways16", "two-choice", "lru",
                                            "default", "full-lru", "belady"};

// A Zipf-ish trace with re-reads: what makes the policies differ.
GatherTrace SyntheticTrace() {
  std::mt19937_64 rng(99);
  GatherTrace t;
  std::vector<uint64_t> gather;
  for (int request = 0; request < 3; ++request) {
    for (int g = 0; g < 40; ++g) {
      gather.clear();
      for (int i = 0; i < 300; ++i) {
        const uint64_t hot = rng() % 64, cold = rng() % 6000;
        gather.push_back(((rng() % 3) ? cold : hot) * 2654435761ull);
      }
      t.AddGather(gather);
    }
    t.EndRequest(std::string("r").append(std::to_string(request + 1)));
  }
  return t;
}

RunOptions Threads(unsigned n) {
  RunOptions o;
  o.threads = n;
  return o;
}

std::vector<PolicyJob> Jobs(uint64_t capacity) {
  std::vector<PolicyJob> jobs;
  for (const std::string& p : kPolicies) jobs.push_back({p, capacity});
  return jobs;
}

bool SameCounts(const RequestStats& a, const RequestStats& b) {
  return a.gathers == b.gathers && a.cache.lookups == b.cache.lookups && a.cache.hits == b.cache.hits &&
         a.cache.misses == b.cache.misses && a.cache.inserts == b.cache.inserts &&
         a.cache.evictions == b.cache.evictions && a.cache.total_refusals() == b.cache.total_refusals() &&
         a.cache.relocations == b.cache.relocations && a.cache.resident_rows == b.cache.resident_rows;
}

TEST(PolicyRunnerTest, ResultsAreDeterministicAcrossRepeatsAndThreadCounts) {
  const GatherTrace trace = SyntheticTrace();
  const auto jobs = Jobs(1500);
  auto one = RunPolicies(jobs, trace, Threads(1));
  auto two = RunPolicies(jobs, trace, Threads(2));
  auto again = RunPolicies(jobs, trace, Threads(2));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_TRUE(two.ok() && again.ok());
  ASSERT_EQ(one->size(), kPolicies.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    EXPECT_EQ((*one)[j].policy, kPolicies[j]);
    for (size_t r = 0; r < trace.requests(); ++r) {
      EXPECT_TRUE(SameCounts((*one)[j].requests[r], (*two)[j].requests[r])) << kPolicies[j] << " request " << r;
      EXPECT_TRUE(SameCounts((*two)[j].requests[r], (*again)[j].requests[r])) << kPolicies[j] << " request " << r;
    }
  }
}

TEST(PolicyRunnerTest, EveryMissIsInsertedOrRefusedAndBeladyIsTheLowest) {
  const GatherTrace trace = SyntheticTrace();
  auto runs = RunPolicies(Jobs(1500), trace, RunOptions{});
  ASSERT_TRUE(runs.ok());
  uint64_t belady = 0;
  for (const PolicyRun& run : *runs)
    if (run.policy == "belady") belady = run.Total().cache.misses;
  for (const PolicyRun& run : *runs) {
    for (const RequestStats& r : run.requests) {
      EXPECT_EQ(r.cache.hits + r.cache.misses, r.cache.lookups) << run.policy;
      EXPECT_EQ(r.cache.inserts + r.cache.total_refusals(), r.cache.misses) << run.policy;
      EXPECT_LE(r.cache.resident_rows, r.cache.capacity_rows) << run.policy;
    }
    EXPECT_EQ(run.Total().cache.lookups, trace.rows.size());
    EXPECT_GE(run.capacity_rows, 1500u) << run.policy;  // rounded up to whole sets at most
    EXPECT_EQ(run.requested_capacity_rows, 1500u);
    EXPECT_GE(run.Total().cache.misses, belady) << run.policy;
  }
}

TEST(PolicyRunnerTest, BoundsThroughTheRunnerEqualTheDirectSimulators) {
  const GatherTrace trace = SyntheticTrace();
  const TraceIndex index = TraceIndex::Build(trace);
  std::vector<PolicyJob> jobs = {{"full-lru", 800}, {"belady", 800}};
  auto runs = RunPolicies(jobs, trace, RunOptions{});
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ((*runs)[0].Total().cache.misses, SimulateFullLru(trace, index, 800).Total().cache.misses);
  EXPECT_EQ((*runs)[1].Total().cache.misses, SimulateBelady(trace, index, 800).Total().cache.misses);
}

TEST(PolicyRunnerTest, BadPoliciesAndCapacitiesAreErrors) {
  const GatherTrace trace = SyntheticTrace();
  std::vector<PolicyJob> unknown = {{"legacy", 100}, {"no-such-preset", 100}};
  auto r = RunPolicies(unknown, trace, RunOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-preset"), std::string::npos) << r.status().ToString();
  std::vector<PolicyJob> zero = {{"belady", 0}};
  EXPECT_FALSE(RunPolicies(zero, trace, RunOptions{}).ok());
  EXPECT_TRUE(ValidatePolicy("two-choice,ways=8").ok());
  EXPECT_FALSE(ValidatePolicy("ways=3000").ok());
}

TEST(PolicyRunnerTest, SketchBytesOverrideReachesEveryRowCachePolicy) {
  const GatherTrace trace = SyntheticTrace();
  std::vector<PolicyJob> jobs = {{"legacy", 1000}};
  RunOptions options;
  options.sketch_bytes = 4096;
  auto runs = RunPolicies(jobs, trace, options);
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  EXPECT_NE((*runs)[0].spec.find("4096"), std::string::npos) << (*runs)[0].spec;
}

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

TEST(ReplayCommandTest, RowTraceJsonHasOneLinePerPolicyAndRequest) {
  const std::string rows = TempPath("cmd-rows.txt");
  std::vector<uint64_t> ids;
  for (int i = 0; i < 500; ++i) ids.push_back((i * 7919) % 97);
  ASSERT_TRUE(WriteRowTrace(rows, ids).ok());
  ReplayArgs args;
  args.rows_path = rows;
  args.capacity_rows = 32;
  args.policies = {"legacy", "belady"};
  args.json = true;
  auto out = RunReplay(args);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::istringstream lines(*out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["request"], 1);
    EXPECT_EQ(j["gathers"], 500);
    EXPECT_EQ(j["lookups"], 500);
    EXPECT_EQ(j["hits"].get<uint64_t>() + j["misses"].get<uint64_t>(), 500u);
    for (const char* k : {"policy", "hit_rate", "inserts", "evictions", "refusals", "refusals_lost_admission",
                          "relocations", "resident_rows", "capacity_rows"})
      EXPECT_TRUE(j.contains(k)) << k;
    ++n;
  }
  EXPECT_EQ(n, 2);
  std::remove(rows.c_str());
}

TEST(ReplayCommandTest, ArgumentErrorsAreReported) {
  ReplayArgs both;
  both.rows_path = "x";
  both.requests = {"y"};
  both.capacity_rows = 10;
  EXPECT_FALSE(RunReplay(both).ok());
  ReplayArgs no_capacity;
  no_capacity.rows_path = "x";
  EXPECT_FALSE(RunReplay(no_capacity).ok());
  ReplayArgs no_layout;
  no_layout.requests = {kFixtures + "/traces/deepspeed/req2.u32"};
  no_layout.capacity_rows = 10;
  EXPECT_NE(RunReplay(no_layout).status().message().find("--layout"), std::string::npos);
  ReplayArgs plot_without_sweep;
  plot_without_sweep.rows_path = "x";
  plot_without_sweep.capacity_rows = 10;
  plot_without_sweep.csv_path = "a.csv";
  EXPECT_FALSE(RunReplay(plot_without_sweep).ok());
  ReplayArgs missing;
  missing.rows_path = "/nonexistent/rows.txt";
  missing.capacity_rows = 10;
  EXPECT_EQ(RunReplay(missing).status().code(), StatusCode::kNotFound);
}

TEST(ReplayCommandTest, ExportedRowsAreTheDeduplicatedLookups) {
  // 600 tokens of a real request in 3 chunks: exported rows = the lookups.
  std::vector<uint32_t> tokens = *ReadTokenFile(kFixtures + "/traces/deepspeed/req1.u32");
  tokens.resize(600);
  const std::string req = TempPath("cmd-req.u32"), out_rows = TempPath("cmd-export.txt");
  {
    std::ofstream f(req, std::ios::binary);
    f.write(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 4);
  }
  ReplayArgs args;
  args.layout_path = kFixtures + "/engram-hash/layout-v41.json";
  args.requests = {req + "@x3"};
  args.capacity_rows = 100000;
  args.policies = {"full-lru"};
  args.export_rows_path = out_rows;
  args.json = true;
  auto out = RunReplay(args);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto j = nlohmann::json::parse(out->substr(0, out->find('\n')));
  auto exported = ReadRowTrace(out_rows);
  ASSERT_TRUE(exported.ok());
  EXPECT_EQ(j["gathers"], 3);
  EXPECT_EQ(j["lookups"].get<uint64_t>(), exported->size());
  EXPECT_LE(exported->size(), 600u * 24);
  std::remove(req.c_str());
  std::remove(out_rows.c_str());
}

}  // namespace
}  // namespace engram::replay
