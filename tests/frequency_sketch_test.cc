// FrequencySketch: count-min estimates, saturation and halving.
#include "src/cache/frequency_sketch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "src/cache/set_hasher.h"

namespace engram::cache {
namespace {

uint64_t H(uint64_t key) { return SetHasher(0, 1, 1).Hash(key); }

TEST(FrequencySketch, CountsEachIncrement) {
  FrequencySketch s(1 << 20, 4, 8, 1);
  EXPECT_EQ(s.Estimate(H(42)), 0u);
  for (int i = 0; i < 7; ++i) s.Increment(H(42));
  EXPECT_EQ(s.Estimate(H(42)), 7u);
  EXPECT_EQ(s.Estimate(H(43)), 0u);
}

TEST(FrequencySketch, EightBitCountersSaturateAt255) {
  FrequencySketch s(4096, 4, 8, 1);
  for (int i = 0; i < 300; ++i) s.Increment(H(5));
  EXPECT_EQ(s.Estimate(H(5)), 255u);
  EXPECT_EQ(s.max_count(), 255u);
}

TEST(FrequencySketch, FourBitCountersSaturateAt15WithoutDisturbingNeighbours) {
  FrequencySketch s(1 << 16, 4, 4, 1);
  for (int i = 0; i < 40; ++i) s.Increment(H(5));
  EXPECT_EQ(s.Estimate(H(5)), 15u);
  // Every other key shares bytes (two nibbles each) with key 5's counters
  // somewhere; none may have been carried into.
  int nonzero = 0;
  for (uint64_t k = 100; k < 2100; ++k) nonzero += s.Estimate(H(k)) != 0;
  EXPECT_EQ(nonzero, 0);
}

TEST(FrequencySketch, NeverUnderestimatesAndIsExactWhenRoomy) {
  // 3,000 keys with skewed counts; min over 4 rows of 256K counters.
  FrequencySketch s(1 << 20, 4, 8, 9);
  std::unordered_map<uint64_t, uint32_t> truth;
  for (uint64_t k = 0; k < 3000; ++k) {
    uint32_t n = 1 + (k * 7919) % 50;
    for (uint32_t i = 0; i < n; ++i) s.Increment(H(k));
    truth[k] = n;
  }
  int exact = 0;
  for (auto& [k, n] : truth) {
    uint32_t e = s.Estimate(H(k));
    EXPECT_GE(e, n) << k;
    exact += e == n;
  }
  EXPECT_EQ(exact, 3000);
}

TEST(FrequencySketch, SmallSketchOverestimatesButNeverUnder) {
  FrequencySketch s(64, 2, 8, 3);  // 256 counters per row for 1,000 keys
  for (uint64_t k = 0; k < 1000; ++k) s.Increment(H(k));
  int over = 0;
  for (uint64_t k = 0; k < 1000; ++k) {
    EXPECT_GE(s.Estimate(H(k)), 1u);
    over += s.Estimate(H(k)) > 1;
  }
  EXPECT_GT(over, 0);  // collisions do show up: the test can see a broken min
}

TEST(FrequencySketch, ConservativeUpdateNeverUnderestimatesAndOvercountsLess) {
  // An overloaded sketch (4 x 1,024 counters for 20,000 keys): conservative
  // update keeps the count-min guarantee and over-counts less in total.
  FrequencySketch plain(4096, 4, 8, 5), cons(4096, 4, 8, 5, /*conservative=*/true);
  std::unordered_map<uint64_t, uint32_t> truth;
  for (uint64_t k = 0; k < 20000; ++k) {
    uint32_t n = 1 + (k * 31) % 3;
    for (uint32_t i = 0; i < n; ++i) {
      plain.Increment(H(k));
      cons.Increment(H(k));
    }
    truth[k] = n;
  }
  uint64_t err_plain = 0, err_cons = 0;
  for (auto& [k, n] : truth) {
    uint32_t p = plain.Estimate(H(k)), c = cons.Estimate(H(k));
    ASSERT_GE(c, std::min<uint32_t>(n, 255)) << k;
    EXPECT_LE(c, p) << k;
    err_plain += p - n;
    err_cons += c - n;
  }
  EXPECT_LT(err_cons, err_plain);
}

// Every counter of a sketch, summed (4-bit counters two to a byte).
uint64_t CounterSum(const FrequencySketch& s, uint32_t bits) {
  uint64_t sum = 0;
  for (uint8_t b : s.memory()) sum += bits == 8 ? b : (b & 0x0f) + (b >> 4);
  return sum;
}

TEST(FrequencySketch, ConservativeIncrementRaisesTheEstimateByOneInEveryLayoutWidthAndDepth) {
  // A crowded sketch, so keys share counters and a key's counters differ;
  // with 4-bit blocked counters and depth 8, two counters of one key often
  // share a byte, and both must be bumped when both hold the minimum. Each
  // increment raises the key's estimate by exactly one (until saturated)
  // and adds at most depth, at least one, to the sum of all counters.
  for (bool blocked : {false, true}) {
    for (uint32_t bits : {8u, 4u}) {
      for (uint32_t depth : {1u, 2u, 3u, 4u, 8u}) {
        FrequencySketch s(256, depth, bits, 7, /*conservative=*/true, blocked);
        for (uint64_t step = 0; step < 3000; ++step) {
          const uint64_t key = (step * 2654435761u) % 400;
          const uint32_t before = s.Estimate(H(key));
          const uint64_t sum_before = CounterSum(s, bits);
          s.Increment(H(key));
          const uint32_t expected = std::min(before + 1, s.max_count());
          ASSERT_EQ(s.Estimate(H(key)), expected)
              << (blocked ? "blocked " : "rows ") << bits << "-bit depth " << depth << " step " << step;
          const uint64_t added = CounterSum(s, bits) - sum_before;
          if (before < s.max_count()) {
            ASSERT_GE(added, 1u) << bits << "-bit depth " << depth;
            ASSERT_LE(added, depth) << bits << "-bit depth " << depth;
          } else {
            ASSERT_EQ(added, 0u) << bits << "-bit depth " << depth;
          }
        }
      }
    }
  }
}

TEST(FrequencySketch, DefaultShapeIncrementCountsExactlyAsIncrement) {
  // A small sketch (4 blocks), so keys share counters and some saturate:
  // every counter of the fast path's sketch must equal the general path's.
  // 1000 keys over 4 blocks of 128 nibbles: about 1 key in 128 has its two
  // counters in the two halves of one byte, so a few keys take that path.
  FrequencySketch general(256, 2, 4, 3, /*conservative=*/true, /*blocked=*/true);
  FrequencySketch fast(256, 2, 4, 3, /*conservative=*/true, /*blocked=*/true);
  ASSERT_TRUE(fast.HasDefaultShape());
  EXPECT_FALSE(FrequencySketch(256, 4, 4, 3, true, true).HasDefaultShape());
  EXPECT_FALSE(FrequencySketch(256, 2, 8, 3, true, true).HasDefaultShape());
  EXPECT_FALSE(FrequencySketch(256, 2, 4, 3, false, true).HasDefaultShape());
  EXPECT_FALSE(FrequencySketch(256, 2, 4, 3, true, false).HasDefaultShape());
  bool saturated = false;
  for (uint64_t i = 0; i < 200000; ++i) {
    const uint64_t h = H(i * 7919 % 1000);
    general.Increment(general.ProbeOf(h));
    fast.IncrementDefaultShape(fast.ProbeOf(h));
    if (i % 50000 == 49999) {
      for (uint64_t k = 0; k < 1000; ++k) ASSERT_EQ(fast.Estimate(H(k)), general.Estimate(H(k))) << k;
      saturated = saturated || fast.Estimate(H(1)) == fast.max_count();
      general.Halve();
      fast.Halve();
    }
  }
  for (uint64_t k = 0; k < 1000; ++k) ASSERT_EQ(fast.Estimate(H(k)), general.Estimate(H(k))) << k;
  EXPECT_TRUE(saturated) << "the run must reach saturated counters to test them";
}

TEST(FrequencySketch, FourBitDepthTwoConservativeUpdateMatchesAModelOfItsNibbles) {
  // One 64-byte block of 128 nibbles and 300 keys: keys share counters and
  // bytes, a few keys have both counters in one byte, and counters saturate.
  // The model raises a key's counters that hold its minimum, below 15, and
  // halves every counter; the sketch must hold exactly the model's nibbles
  // through both entry points.
  constexpr uint64_t kKeys = 300;
  auto nibble = [](const FrequencySketch& s, uint64_t c) {
    const uint8_t byte = s.memory()[c >> 1];
    return (c & 1) ? byte >> 4 : byte & 0x0f;
  };
  // Each key's two counters: the nibbles one increment in a fresh sketch raises.
  std::vector<std::pair<uint64_t, uint64_t>> counters(kKeys);
  size_t sharing_a_byte = 0;
  for (uint64_t k = 0; k < kKeys; ++k) {
    FrequencySketch alone(64, 2, 4, 3, /*conservative=*/true, /*blocked=*/true);
    alone.Increment(H(k));
    std::vector<uint64_t> raised;
    for (uint64_t c = 0; c < 128; ++c) {
      if (nibble(alone, c) != 0) raised.push_back(c);
    }
    ASSERT_EQ(raised.size(), 2u) << "key " << k;
    counters[k] = {raised[0], raised[1]};
    sharing_a_byte += (raised[0] >> 1) == (raised[1] >> 1);
  }
  ASSERT_GT(sharing_a_byte, 0u) << "some key must have both counters in one byte";

  FrequencySketch s(64, 2, 4, 3, /*conservative=*/true, /*blocked=*/true);
  ASSERT_TRUE(s.HasDefaultShape());
  std::vector<uint32_t> model(128, 0);
  bool saturated = false;
  for (uint64_t i = 0; i < 60000; ++i) {
    const uint64_t k = i * 7919 % kKeys;
    if (i % 2 == 0) {
      s.IncrementDefaultShape(s.ProbeOf(H(k)));
    } else {
      s.Increment(H(k));
    }
    const auto [a, b] = counters[k];
    const uint32_t m = std::min(model[a], model[b]);
    if (m < 15) {
      if (model[a] == m) ++model[a];
      if (model[b] == m) ++model[b];
    }
    if (i % 20000 == 19999) {
      for (uint64_t c = 0; c < 128; ++c) ASSERT_EQ(nibble(s, c), model[c]) << "counter " << c << " step " << i;
      saturated = saturated || std::count(model.begin(), model.end(), 15u) != 0;
      s.Halve();
      for (uint32_t& v : model) v >>= 1;
    }
  }
  for (uint64_t c = 0; c < 128; ++c) ASSERT_EQ(nibble(s, c), model[c]) << "counter " << c;
  EXPECT_TRUE(saturated) << "the run must reach saturated counters";
}

// (When to halve is the cache's decision, on its clock: RowCacheLegacy's
// halving test and the reference model pin that.)
TEST(FrequencySketch, HalveHalvesEveryCounter) {
  FrequencySketch s(1 << 16, 4, 8, 1);
  for (int i = 0; i < 19; ++i) s.Increment(H(1));
  s.Increment(H(2));
  EXPECT_EQ(s.Estimate(H(1)), 19u);
  EXPECT_EQ(s.halvings(), 0u);
  s.Halve();  // 19 -> 9, 1 -> 0
  EXPECT_EQ(s.halvings(), 1u);
  EXPECT_EQ(s.Estimate(H(1)), 9u);
  EXPECT_EQ(s.Estimate(H(2)), 0u);
}

TEST(FrequencySketch, HalvingFourBitCountersKeepsNibblesApart) {
  FrequencySketch s(1 << 16, 4, 4, 1);
  for (int i = 0; i < 15; ++i) s.Increment(H(1));
  for (int i = 0; i < 6; ++i) s.Increment(H(2));
  s.Halve();
  EXPECT_EQ(s.Estimate(H(1)), 7u);
  EXPECT_EQ(s.Estimate(H(2)), 3u);
}

TEST(FrequencySketch, SeedChangesWhichKeysCollide) {
  FrequencySketch a(64, 1, 8, 1), b(64, 1, 8, 2);
  for (uint64_t k = 0; k < 200; ++k) {
    a.Increment(H(k));
    b.Increment(H(k));
  }
  int differ = 0;
  for (uint64_t k = 0; k < 200; ++k) differ += a.Estimate(H(k)) != b.Estimate(H(k));
  EXPECT_GT(differ, 0);
}

TEST(FrequencySketch, BlockedLayoutNeverUnderestimatesAndStaysInOneBlock) {
  // 8 and 4-bit counters, depth 2 and 4: counts are never under, and exact
  // for few keys in a roomy sketch.
  for (uint32_t bits : {8u, 4u}) {
    for (uint32_t depth : {2u, 4u}) {
      FrequencySketch s(1 << 20, depth, bits, 9, /*conservative=*/false, /*blocked=*/true);
      int exact = 0;
      for (uint64_t k = 0; k < 2000; ++k) {
        const uint32_t n = 1 + (k * 7919) % std::min<uint32_t>(s.max_count(), 14);
        for (uint32_t i = 0; i < n; ++i) s.Increment(H(k));
      }
      for (uint64_t k = 0; k < 2000; ++k) {
        const uint32_t n = 1 + (k * 7919) % std::min<uint32_t>(s.max_count(), 14);
        const uint32_t e = s.Estimate(H(k));
        EXPECT_GE(e, n) << bits << "-bit depth " << depth << " key " << k;
        exact += e == n;
      }
      EXPECT_GE(exact, 1990) << bits << "-bit depth " << depth;
    }
  }
}

TEST(FrequencySketch, BlockedLayoutTakesTheMinimumOfDistinctCounters) {
  // 64 blocks of 64 counters for 600 keys counted once. With one counter per
  // key ~14 % of keys share it and over-count; the minimum of two distinct
  // counters of the block over-counts only when both are shared (~6 %). If
  // the two offsets coincided, depth 2 would be no better than depth 1.
  auto exact_count = [](uint32_t depth) {
    FrequencySketch s(4096, depth, 8, 3, false, true);
    for (uint64_t k = 0; k < 600; ++k) s.Increment(H(k));
    int exact = 0;
    for (uint64_t k = 0; k < 600; ++k) {
      EXPECT_GE(s.Estimate(H(k)), 1u);
      exact += s.Estimate(H(k)) == 1;
    }
    return exact;
  };
  EXPECT_GT(exact_count(2), exact_count(1) + 20);
  FrequencySketch one(64, 1, 8, 3, false, true);
  EXPECT_EQ(one.memory_bytes(), 64u);
  FrequencySketch rounded(100, 2, 8, 3, false, true);
  EXPECT_EQ(rounded.memory_bytes(), 64u);  // whole blocks only
}

}  // namespace
}  // namespace engram::cache
