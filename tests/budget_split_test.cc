// How a store's cache budget is sized (cache_bytes, or a share of
// MemAvailable) and divided among its tables (by size, reserved, capped).
#include "src/store/budget_split.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace engram {
namespace {

std::vector<uint64_t> Split(uint64_t total, std::vector<uint64_t> explicit_bytes, std::vector<uint64_t> weights,
                            std::vector<uint64_t> caps = {}) {
  auto r = SplitCacheBudget(total, explicit_bytes, weights, caps);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<uint64_t>{};
}

TEST(SplitCacheBudget, SharesByWeightAfterReservations) {
  EXPECT_EQ(Split(1000, {0, 0}, {3, 1}), (std::vector<uint64_t>{750, 250}));
  EXPECT_EQ(Split(1000, {100, 0}, {3, 1}), (std::vector<uint64_t>{100, 900}));
  EXPECT_FALSE(SplitCacheBudget(1000, std::vector<uint64_t>{600, 500}, std::vector<uint64_t>{1, 1}).ok());
}

TEST(SplitCacheBudget, NoTableGetsMoreThanItsCapAndTheRestGoesToTheOthers) {
  // Table 1's share (500) exceeds what it can use (100): table 0 gets the rest.
  EXPECT_EQ(Split(1000, {0, 0}, {1, 1}, {kNoBudgetCap, 100}), (std::vector<uint64_t>{900, 100}));
  // Capping table 2 raises table 1's share past its cap: settled in rounds.
  EXPECT_EQ(Split(900, {0, 0, 0}, {1, 1, 1}, {kNoBudgetCap, 250, 100}), (std::vector<uint64_t>{550, 250, 100}));
  // A reservation beyond the cap is returned to the shared tables.
  EXPECT_EQ(Split(1000, {0, 600}, {1, 1}, {kNoBudgetCap, 200}), (std::vector<uint64_t>{800, 200}));
  // Every table capped: the budget they cannot use stays unused.
  EXPECT_EQ(Split(1000, {0, 0}, {1, 1}, {300, 200}), (std::vector<uint64_t>{300, 200}));
  // Caps above the shares change nothing.
  EXPECT_EQ(Split(1000, {0, 0}, {3, 1}, {800, 300}), (std::vector<uint64_t>{750, 250}));
}

TEST(CacheBudget, MemAvailableIsParsedFromMeminfo) {
  const char* meminfo =
      "MemTotal:       24683520 kB\n"
      "MemFree:        21149732 kB\n"
      "MemAvailable:   22569480 kB\n"
      "Buffers:          123456 kB\n";
  auto m = ParseMemAvailable(meminfo);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, uint64_t{22569480} * 1024);
  EXPECT_EQ(ParseMemAvailable("MemTotal: 1 kB\nMemFree: 1 kB\n").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: lots kB\n").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: 12 MB\n").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: 99999999999999999999 kB\n").status().code(),
            StatusCode::kInvalidArgument);
  auto here = ReadMemAvailable();
  ASSERT_TRUE(here.ok()) << here.status().ToString();
  EXPECT_GT(*here, 0u);
}

TEST(CacheBudget, FractionOfMemAvailableIsCappedByCacheBytes) {
  const uint64_t gib = uint64_t{1} << 30;
  EXPECT_EQ(*EffectiveCacheBudget(gib, 0.0, 64 * gib), gib);              // unused
  EXPECT_EQ(*EffectiveCacheBudget(gib, 0.25, 2 * gib), gib / 2);          // the share is smaller
  EXPECT_EQ(*EffectiveCacheBudget(gib, 0.25, 64 * gib), gib);             // cache_bytes is the ceiling
  EXPECT_EQ(*EffectiveCacheBudget(~uint64_t{0}, 0.5, 64 * gib), 32 * gib);  // the share alone
  EXPECT_EQ(*EffectiveCacheBudget(gib, 1.0, gib / 4), gib / 4);
  for (double bad : {-0.1, 1.5, std::nan("")}) {
    EXPECT_EQ(EffectiveCacheBudget(gib, bad, 64 * gib).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace engram
