// RowCache::LookupBatch: the pipelined gather lookup must be indistinguishable
// from one Lookup per row, in order (hits, copied bytes, counters, sketch,
// read-ahead pins), and stay exact while other threads insert and evict.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "src/cache/row_cache.h"
#include "src/cache/set_associative_cache.h"
#include "src/cache/set_hasher.h"
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

void ExpectSameStats(const RowCacheStats& a, const RowCacheStats& b) {
  EXPECT_EQ(a.lookups, b.lookups);
  EXPECT_EQ(a.hits, b.hits);
  EXPECT_EQ(a.misses, b.misses);
  EXPECT_EQ(a.inserts, b.inserts);
  EXPECT_EQ(a.evictions, b.evictions);
  EXPECT_EQ(a.relocations, b.relocations);
  EXPECT_EQ(a.total_refusals(), b.total_refusals());
  EXPECT_EQ(a.resident_rows, b.resident_rows);
  EXPECT_EQ(a.pinned_rows, b.pinned_rows);
}

class LookupBatchTest : public ::testing::TestWithParam<const char*> {};

TEST_P(LookupBatchTest, EqualsOneLookupPerRowInOrder) {
  for (uint32_t row_bytes : {kRowBytes, 0u}) {  // 0: the emulator's index-only cache
    auto sequential = Make(GetParam(), 64, row_bytes);
    auto batched = Make(GetParam(), 64, row_bytes);
    std::mt19937_64 rng(11);
    std::vector<std::byte> a(40 * kRowBytes), b(40 * kRowBytes);
    for (int round = 0; round < 300; ++round) {
      // Gathers of 1..40 rows from a range ~2x the capacity: hits, misses,
      // duplicates within a batch, evictions between batches.
      const size_t n = 1 + rng() % 40;
      std::vector<uint64_t> ids(n);
      for (auto& id : ids) id = rng() % (2 * sequential->capacity_rows());
      if (round % 7 == 0) {  // read-ahead pins, consumed by the lookups
        for (int k = 0; k < 3; ++k) {
          auto row = RowOf(ids[k % n]);
          sequential->InsertPinned(ids[k % n], row_bytes ? std::span<const std::byte>(row) : std::span<const std::byte>());
          batched->InsertPinned(ids[k % n], row_bytes ? std::span<const std::byte>(row) : std::span<const std::byte>());
        }
      }
      std::vector<uint8_t> want(n), got(n);
      std::vector<std::byte*> dsts(n);
      size_t want_hits = 0;
      for (size_t i = 0; i < n; ++i) {
        want[i] = sequential->Lookup(ids[i], std::span<std::byte>(a.data() + i * kRowBytes, row_bytes));
        want_hits += want[i];
        dsts[i] = row_bytes ? b.data() + i * kRowBytes : nullptr;
      }
      ASSERT_EQ(batched->LookupBatch(ids, dsts, PinAction::kConsume, got), want_hits) << "round " << round;
      ASSERT_EQ(got, want) << "round " << round;
      for (size_t i = 0; i < n; ++i) {
        if (!got[i]) {
          auto row = RowOf(ids[i]);
          sequential->Insert(ids[i], row_bytes ? std::span<const std::byte>(row) : std::span<const std::byte>());
          batched->Insert(ids[i], row_bytes ? std::span<const std::byte>(row) : std::span<const std::byte>());
        } else if (row_bytes) {
          ASSERT_EQ(std::memcmp(b.data() + i * kRowBytes, RowOf(ids[i]).data(), kRowBytes), 0) << ids[i];
          ASSERT_EQ(std::memcmp(a.data() + i * kRowBytes, b.data() + i * kRowBytes, kRowBytes), 0);
        }
      }
    }
    ExpectSameStats(sequential->Stats(), batched->Stats());
    for (uint64_t id = 0; id < 2 * sequential->capacity_rows(); ++id) {
      ASSERT_EQ(sequential->EstimateOf(id), batched->EstimateOf(id)) << "sketch differs at row " << id;
      ASSERT_EQ(sequential->Contains(id), batched->Contains(id)) << "residency differs at row " << id;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, LookupBatchTest,
                         ::testing::Values("legacy", "ways8", "two-choice", "default", "lru", "ways=1"));

TEST(LookupBatch, EmptyBatchDoesNothing) {
  auto c = Make("default", 8, kRowBytes);
  std::vector<uint64_t> ids;
  std::vector<std::byte*> dsts;
  std::vector<uint8_t> hit;
  EXPECT_EQ(c->LookupBatch(ids, dsts, PinAction::kConsume, hit), 0u);
  EXPECT_EQ(c->Stats().lookups, 0u);
}

// Writers keep evicting and relocating while readers gather in batches: a hit
// must always carry its own row's bytes (TSan checks the locking).
TEST(LookupBatch, ConcurrentBatchesWithEvictionsCopyOnlyExactRows) {
  auto c = Make("default", 256, kRowBytes);
  const uint64_t distinct = 3 * c->capacity_rows();
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  constexpr int kBatches = 300;
#else
  constexpr int kBatches = 2000;
#endif
  std::atomic<uint64_t> wrong{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      std::vector<uint64_t> ids(64);
      std::vector<std::byte> buf(ids.size() * kRowBytes);
      std::vector<std::byte*> dsts(ids.size());
      for (size_t i = 0; i < ids.size(); ++i) dsts[i] = buf.data() + i * kRowBytes;
      std::vector<uint8_t> hit(ids.size());
      for (int b = 0; b < kBatches; ++b) {
        for (auto& id : ids) id = rng() % distinct;
        hits += c->LookupBatch(ids, dsts, PinAction::kConsume, hit);
        for (size_t i = 0; i < ids.size(); ++i) {
          if (hit[i]) {
            if (std::memcmp(dsts[i], RowOf(ids[i]).data(), kRowBytes) != 0) ++wrong;
          } else {
            c->Insert(ids[i], RowOf(ids[i]));
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(hits.load(), 0u);
  RowCacheStats s = c->Stats();
  EXPECT_EQ(s.hits + s.misses, s.lookups);
  EXPECT_EQ(s.misses, s.inserts + s.total_refusals());
}

}  // namespace
}  // namespace engram
