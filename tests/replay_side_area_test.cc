// The side area that engram-replay's "SPEC+side=F" policies put beside a
// RowCache: a FIFO of refused rows, parsed from the policy name, replayed
// with counts that still add up.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "src/replay/gather_trace.h"
#include "src/replay/policy_runner.h"
#include "src/replay/side_area.h"

namespace engram::replay {
namespace {

TEST(ReplaySideArea, KeepsTheNewestRowsAndSkipsRemovedOnes) {
  SideArea area(3);
  for (uint64_t r = 1; r <= 5; ++r) area.Add(r);
  EXPECT_FALSE(area.Contains(1));
  EXPECT_FALSE(area.Contains(2));
  for (uint64_t r : {3, 4, 5}) EXPECT_TRUE(area.Contains(r)) << r;
  area.Remove(4);
  area.Add(6);  // 3, 5, 6: the removed row's place is free
  for (uint64_t r : {3, 5, 6}) EXPECT_TRUE(area.Contains(r)) << r;
  area.Add(7);  // the oldest live row goes
  EXPECT_FALSE(area.Contains(3));
  area.Add(8);  // 4's stale entry frees nothing, so 5 goes
  EXPECT_FALSE(area.Contains(5));
  for (uint64_t r : {6, 7, 8}) EXPECT_TRUE(area.Contains(r)) << r;
}

TEST(ReplaySideArea, ARowAddedAgainAfterRemovalIsNotEvictedByItsOldEntry) {
  SideArea area(2);
  area.Add(1);
  area.Remove(1);
  area.Add(2);
  area.Add(1);
  area.Add(3);  // 1's first entry is stale: 2 is the oldest live row
  EXPECT_TRUE(area.Contains(1));
  EXPECT_FALSE(area.Contains(2));
  EXPECT_TRUE(area.Contains(3));
}

TEST(ReplaySideArea, PolicyNamesSplitIntoTheCacheSpecAndTheFraction) {
  auto p = ParseSideAreaPolicy("default,ways=8+side=0.05");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->cache_spec, "default,ways=8");
  EXPECT_DOUBLE_EQ(p->fraction, 0.05);
  auto plain = ParseSideAreaPolicy("legacy");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->cache_spec, "legacy");
  EXPECT_EQ(plain->fraction, 0.0);
  for (const char* bad : {"default+side=0", "default+side=0.6", "default+side=x", "default+side="}) {
    EXPECT_FALSE(ParseSideAreaPolicy(bad).ok()) << bad;
    EXPECT_FALSE(ValidatePolicy(bad).ok()) << bad;
  }
}

TEST(ReplaySideArea, ReReadsOfRefusedRowsHitTheAreaAndCountsAddUp) {
  // One hot row set that fills the cache, then first-seen rows each read
  // twice in a row: the default refuses them (first seen), the area holds
  // them, so their second read hits only with the area.
  GatherTrace trace;
  std::vector<uint64_t> gather;
  auto read = [&](uint64_t row) {
    gather.assign(1, row);
    trace.AddGather(gather);
  };
  for (int pass = 0; pass < 3; ++pass) {
    for (uint64_t r = 0; r < 1000; ++r) read(r);
  }
  trace.EndRequest("hot");
  for (uint64_t r = 100000; r < 102000; ++r) {
    read(r);
    read(r);
  }
  trace.EndRequest("once-used pairs");
  std::vector<PolicyJob> jobs = {{"default", 1000}, {"default+side=0.1", 1000}};
  auto runs = RunPolicies(jobs, trace, RunOptions{});
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  const RequestStats without = (*runs)[0].requests[1], with = (*runs)[1].requests[1];
  EXPECT_EQ(with.cache.hits + with.cache.misses, with.cache.lookups);
  EXPECT_EQ(with.cache.lookups, 4000u);
  EXPECT_GE(with.cache.hits, without.cache.hits + 1900) << "second reads served by the area";
  EXPECT_GE((*runs)[1].capacity_rows, 1000u);
  EXPECT_LE((*runs)[1].capacity_rows, 1005u);
}

}  // namespace
}  // namespace engram::replay
