// GatherPlan: the distinct rows of a gather, in order of first appearance,
// and every later position of each, checked against a plain map; and the
// dedup table behind it (FirstAppearanceIndex) across resets.
#include "src/store/gather_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "src/store/first_appearance_index.h"

namespace engram {
namespace {

struct Expected {
  std::vector<uint64_t> distinct;
  std::vector<uint32_t> first_pos;
  std::vector<std::vector<uint32_t>> later;  // later[d]: the positions after the first, in order
};

Expected PlanByMap(const std::vector<uint64_t>& ids) {
  Expected e;
  std::map<uint64_t, size_t> index;
  for (uint32_t p = 0; p < ids.size(); ++p) {
    auto [it, added] = index.emplace(ids[p], e.distinct.size());
    if (added) {
      e.distinct.push_back(ids[p]);
      e.first_pos.push_back(p);
      e.later.emplace_back();
    } else {
      e.later[it->second].push_back(p);
    }
  }
  return e;
}

void ExpectPlanOf(const GatherPlan& plan, const std::vector<uint64_t>& ids) {
  const Expected e = PlanByMap(ids);
  ASSERT_EQ(plan.distinct, e.distinct);
  ASSERT_EQ(plan.first_pos, e.first_pos);
  EXPECT_EQ(plan.has_duplicates(), e.distinct.size() < ids.size());
  for (size_t d = 0; d < e.distinct.size(); ++d) {
    std::vector<uint32_t> later;
    plan.ForEachDuplicate(d, [&](uint32_t p) { later.push_back(p); });
    EXPECT_EQ(later, e.later[d]) << "distinct row " << d;
  }
}

TEST(GatherPlanTest, DistinctRowsKeepTheirOrderAndHaveNoLaterPositions) {
  GatherPlan plan;
  const std::vector<uint64_t> ids = {7, 3, 1'000'000'007, 0, 42};
  plan.Build(ids);
  ExpectPlanOf(plan, ids);
  EXPECT_FALSE(plan.has_duplicates());
}

TEST(GatherPlanTest, RepeatedRowsChainEveryLaterPositionInOrder) {
  GatherPlan plan;
  const std::vector<uint64_t> ids = {5, 9, 5, 5, 2, 9, 5, 2};
  plan.Build(ids);
  ExpectPlanOf(plan, ids);
  EXPECT_TRUE(plan.has_duplicates());
}

TEST(GatherPlanTest, AReusedPlanDescribesOnlyItsLatestGather) {
  // A recycled plan keeps its storage: a gather without repeats after one with
  // them must report none, and a shorter gather must not see the longer one's rows.
  GatherPlan plan;
  const std::vector<uint64_t> repeats = {1, 1, 1, 2, 2, 3, 1, 4, 4, 4};
  const std::vector<uint64_t> distinct = {10, 11, 12};
  const std::vector<uint64_t> repeats_again = {12, 10, 12};
  plan.Build(repeats);
  ExpectPlanOf(plan, repeats);
  plan.Build(distinct);
  ExpectPlanOf(plan, distinct);
  plan.Build(repeats_again);
  ExpectPlanOf(plan, repeats_again);
  plan.Build({});
  ExpectPlanOf(plan, {});
}

TEST(GatherPlanTest, RandomGathersMatchAMapAtEverySizeAndRepeatRate) {
  std::mt19937_64 rng(17);
  GatherPlan plan;
  for (size_t n : {1, 2, 24, 100, 4096}) {
    for (uint64_t universe : {uint64_t{2}, uint64_t{n}, uint64_t{1} << 40}) {
      std::vector<uint64_t> ids(n);
      for (uint64_t& id : ids) id = rng() % universe;
      plan.Build(ids);
      ExpectPlanOf(plan, ids);
    }
  }
}

TEST(GatherPlanTest, SmallerAndLargerGathersAfterALargeOneMatchAMap) {
  // The dedup table keeps its slots between gathers and tells the current
  // gather's apart by generation: rows of an earlier gather, in a table of
  // another size, must never be taken for this one's.
  std::mt19937_64 rng(29);
  GatherPlan plan;
  std::vector<uint64_t> previous;
  for (size_t n : {4096, 24, 3, 100, 4096, 1, 9000, 24}) {
    std::vector<uint64_t> ids(n);
    for (uint64_t& id : ids) {
      // Half the rows come from the gather before, half are new or repeats.
      id = !previous.empty() && rng() % 2 ? previous[rng() % previous.size()] : rng() % (2 * n + 1);
    }
    plan.Build(ids);
    ExpectPlanOf(plan, ids);
    previous = ids;
  }
}

TEST(FirstAppearanceIndexTest, EveryKeyIsNewAgainAfterReset) {
  FirstAppearanceIndex index;
  std::vector<uint64_t> keys(512);
  for (size_t round = 0; round < 3; ++round) {
    for (size_t max_keys : {size_t{512}, size_t{16}}) {
      index.Reset(max_keys);
      uint32_t count = 0;
      for (uint64_t k = 0; k < max_keys; ++k) {
        const FirstAppearanceIndex::Found f = index.Find(k * 1'000'003, keys.data(), count);
        ASSERT_TRUE(f.added) << "key " << k << " max_keys " << max_keys << " round " << round;
        ASSERT_EQ(f.index, k);
      }
      for (uint64_t k = 0; k < max_keys; ++k) {
        const FirstAppearanceIndex::Found f = index.Find(k * 1'000'003, keys.data(), count);
        ASSERT_FALSE(f.added);
        ASSERT_EQ(f.index, k);
      }
      EXPECT_EQ(count, max_keys);
    }
  }
}

}  // namespace
}  // namespace engram
