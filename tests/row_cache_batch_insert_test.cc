// RowCache::InsertBatch: the pipelined insert of a gather's misses must be
// indistinguishable from one Insert per row, in order (outcomes, counters,
// sketch, residency, bytes), and stay exact while other threads gather.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "src/cache/row_cache.h"
#include "src/cache/set_associative_cache.h"
#include "tests/testing/cache_rows.h"

namespace engram {
namespace {

constexpr uint32_t kRowBytes = 264;

std::vector<std::byte> RowOf(uint64_t id) { return testing::CacheRowOf(id, kRowBytes); }

std::unique_ptr<cache::SetAssociativeRowCache> Make(const char* spec, uint64_t sets, uint32_t row_bytes) {
  auto config = RowCacheConfig::FromSpec(spec);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  auto made = cache::SetAssociativeRowCache::Make(*config, sets, row_bytes);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return std::move(made).value();
}

class InsertBatchTest : public ::testing::TestWithParam<const char*> {};

TEST_P(InsertBatchTest, EqualsOneInsertPerRowInOrder) {
  for (uint32_t row_bytes : {kRowBytes, 0u}) {  // 0: the emulator's index-only cache
    auto sequential = Make(GetParam(), 64, row_bytes);
    auto batched = Make(GetParam(), 64, row_bytes);
    std::mt19937_64 rng(12);
    for (int round = 0; round < 300; ++round) {
      // Gathers of 1..40 rows from a range ~3x the capacity: the misses of
      // each are inserted, with evictions, refusals and relocations.
      const size_t n = 1 + rng() % 40;
      std::vector<uint64_t> misses;
      for (size_t i = 0; i < n; ++i) {
        const uint64_t id = rng() % (3 * sequential->capacity_rows());
        const bool a = sequential->Lookup(id, {});
        ASSERT_EQ(batched->Lookup(id, {}), a);
        if (!a) misses.push_back(id);
      }
      if (round % 5 == 0 && !misses.empty()) misses.push_back(misses.front());  // a row offered twice
      std::vector<std::vector<std::byte>> bytes;
      std::vector<const std::byte*> rows;
      for (uint64_t id : misses) bytes.push_back(RowOf(id));
      for (auto& b : bytes) rows.push_back(b.data());
      std::vector<InsertOutcome> want(misses.size()), got(misses.size());
      for (size_t m = 0; m < misses.size(); ++m) {
        want[m] = sequential->Insert(misses[m], row_bytes ? std::span<const std::byte>(bytes[m])
                                                          : std::span<const std::byte>());
      }
      batched->InsertBatch(misses, row_bytes ? std::span<const std::byte* const>(rows)
                                             : std::span<const std::byte* const>(),
                           got);
      ASSERT_EQ(got, want) << "round " << round;
    }
    const RowCacheStats a = sequential->Stats(), b = batched->Stats();
    EXPECT_EQ(a.hits, b.hits);
    EXPECT_EQ(a.misses, b.misses);
    EXPECT_EQ(a.inserts, b.inserts);
    EXPECT_EQ(a.evictions, b.evictions);
    EXPECT_EQ(a.relocations, b.relocations);
    EXPECT_EQ(a.total_refusals(), b.total_refusals());
    EXPECT_EQ(a.resident_rows, b.resident_rows);
    std::vector<std::byte> y(kRowBytes);
    for (uint64_t id = 0; id < 3 * sequential->capacity_rows(); ++id) {
      ASSERT_EQ(sequential->EstimateOf(id), batched->EstimateOf(id)) << "sketch differs at row " << id;
      ASSERT_EQ(sequential->Contains(id), batched->Contains(id)) << "residency differs at row " << id;
    }
    // Last, since a lookup counts in the sketch: every resident row has its bytes.
    for (uint64_t id = 0; row_bytes && id < 3 * sequential->capacity_rows(); ++id) {
      if (batched->Contains(id)) {
        ASSERT_TRUE(batched->Lookup(id, y));
        ASSERT_EQ(y, RowOf(id)) << id;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, InsertBatchTest,
                         ::testing::Values("legacy", "ways8", "two-choice", "default", "lru", "ways=1"));

TEST(InsertBatch, EmptyBatchDoesNothing) {
  auto c = Make("default", 8, kRowBytes);
  c->InsertBatch({}, {}, {});
  EXPECT_EQ(c->Stats().inserts, 0u);
  EXPECT_EQ(c->Stats().resident_rows, 0u);
}

// Threads insert their misses in batches while others gather the same rows:
// a hit always carries its own row's bytes (TSan checks the locking).
TEST(InsertBatch, ConcurrentBatchesAndLookupsCopyOnlyExactRows) {
  auto c = Make("default", 256, kRowBytes);
  const uint64_t distinct = 3 * c->capacity_rows();
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  constexpr int kBatches = 300;
#else
  constexpr int kBatches = 2000;
#endif
  std::atomic<uint64_t> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(200 + t);
      std::vector<std::byte> dst(kRowBytes);
      std::vector<uint64_t> misses;
      std::vector<std::vector<std::byte>> bytes;
      std::vector<const std::byte*> rows;
      std::vector<InsertOutcome> outcomes;
      for (int b = 0; b < kBatches; ++b) {
        misses.clear();
        bytes.clear();
        rows.clear();
        for (int i = 0; i < 32; ++i) {
          const uint64_t id = rng() % distinct;
          if (c->Lookup(id, dst)) {
            if (dst != RowOf(id)) ++wrong;
          } else {
            misses.push_back(id);
            bytes.push_back(RowOf(id));
          }
        }
        for (auto& r : bytes) rows.push_back(r.data());
        outcomes.resize(misses.size());
        c->InsertBatch(misses, rows, outcomes);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(c->Stats().hits, 0u);
}

}  // namespace
}  // namespace engram
