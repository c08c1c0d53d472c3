// RowCache::LookupBatch and InsertBatch: the pipelined gather lookup and the
// pipelined insert of a gather's misses must be indistinguishable from one
// Lookup / Insert per row, in order (hits, outcomes, copied bytes, counters,
// sketch, residency, read-ahead pins), and stay exact while other threads
// insert, evict and gather.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <string_view>
#include <vector>

#include "src/common/sanitizers.h"
#include "src/cache/row_cache.h"
#include "src/cache/set_associative_cache.h"
#include "src/cache/set_hasher.h"
#include "tests/testing/cache_rows.h"
#include "tests/testing/set_associative_caches.h"

namespace engram {
namespace {

constexpr uint32_t kRowBytes = 264;

std::vector<std::byte> RowOf(uint64_t id) { return testing::CacheRowOf(id, kRowBytes); }

// One LookupBatch's arguments for `n` rows: the IDs, a destination per row in
// one buffer, and the hit flags.
struct BatchArgs {
  explicit BatchArgs(size_t n) : ids(n), buf(n * kRowBytes), dsts(n), hit(n) {
    for (size_t i = 0; i < n; ++i) dsts[i] = buf.data() + i * kRowBytes;
  }
  std::vector<uint64_t> ids;
  std::vector<std::byte> buf;
  std::vector<std::byte*> dsts;
  std::vector<uint8_t> hit;
};

class LookupBatchTest : public ::testing::TestWithParam<const char*> {};

// "direct:SPEC": SPEC's cache with direct placement (a slot for every row ID
// below its capacity; the test's IDs go to twice that, so half have none).
constexpr std::string_view kDirect = "direct:";
bool IsDirect(std::string_view param) { return param.substr(0, kDirect.size()) == kDirect; }
std::unique_ptr<cache::SetAssociativeRowCache> MakeForParam(std::string_view param, uint64_t sets,
                                                            uint32_t row_bytes) {
  if (!IsDirect(param)) return testing::MakeSetAssociativeCache(std::string(param).c_str(), sets, row_bytes);
  const RowCacheConfig config = RowCacheConfig::FromSpec(std::string(param.substr(kDirect.size()))).value();
  auto made = cache::SetAssociativeRowCache::Make(config, sets, row_bytes, sets * config.ways);
  EXPECT_TRUE(made.ok() && (*made)->hasher().direct());
  return std::move(made).value();
}

TEST_P(LookupBatchTest, EqualsOneLookupPerRowInOrder) {
  const bool direct = IsDirect(GetParam());
  for (uint32_t row_bytes : {kRowBytes, 0u}) {  // 0: the emulator's index-only cache
    auto sequential = MakeForParam(GetParam(), 64, row_bytes);
    auto batched = MakeForParam(GetParam(), 64, row_bytes);
    std::mt19937_64 rng(11);
    constexpr size_t kMaxRows = 300;
    std::vector<std::byte> a(kMaxRows * kRowBytes), b(kMaxRows * kRowBytes);
    for (int round = 0; round < 300; ++round) {
      // Gathers of 1..40 rows from a range ~2x the capacity: hits, misses,
      // duplicates within a batch, evictions between batches. Every tenth is
      // up to kMaxRows long: longer than a burst of sketch increments, and
      // across the clock's halvings and upkeep.
      const size_t n = 1 + rng() % (round % 10 == 9 ? kMaxRows : 40);
      std::vector<uint64_t> ids(n);
      for (auto& id : ids) id = rng() % (2 * sequential->capacity_rows());
      // Read-ahead pins, consumed by the lookups (with direct placement only
      // from round 150: batches before the first pin take the direct path).
      if (round % 7 == 0 && (!direct || round >= 150)) {
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
    testing::ExpectSameCacheStats(sequential->Stats(), batched->Stats());
    // The default preset's sketch was halved during the batches, so a count
    // applied on the wrong side of a halving would show below.
    if (std::string_view(GetParam()) == "default") {
      EXPECT_GT(batched->sketch().halvings(), 0u);
    }
    for (uint64_t id = 0; id < 2 * sequential->capacity_rows(); ++id) {
      ASSERT_EQ(sequential->EstimateOf(id), batched->EstimateOf(id)) << "sketch differs at row " << id;
      ASSERT_EQ(sequential->Contains(id), batched->Contains(id)) << "residency differs at row " << id;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, LookupBatchTest,
                         ::testing::Values("legacy", "ways8", "ways16", "two-choice", "default", "lru", "ways=1",
                                           "direct:default", "direct:ways8", "direct:ways=3"));

TEST(LookupBatch, EmptyBatchDoesNothing) {
  auto c = testing::MakeSetAssociativeCache("default", 8, kRowBytes);
  std::vector<uint64_t> ids;
  std::vector<std::byte*> dsts;
  std::vector<uint8_t> hit;
  EXPECT_EQ(c->LookupBatch(ids, dsts, PinAction::kConsume, hit), 0u);
  EXPECT_EQ(c->Stats().lookups, 0u);
}

// Threads gather in batches and insert each batch's misses in one batch, so
// rows keep being evicted and relocated under the lookups: a hit must always
// carry its own row's bytes (TSan checks the locking).
TEST(RowCacheBatches, ConcurrentLookupAndInsertBatchesCopyOnlyExactRows) {
  auto c = testing::MakeSetAssociativeCache("default", 256, kRowBytes);
  const uint64_t distinct = 3 * c->capacity_rows();
#if ENGRAM_UNDER_SANITIZER
  constexpr int kBatches = 300;
#else
  constexpr int kBatches = 2000;
#endif
  std::atomic<uint64_t> wrong{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      BatchArgs batch(64);
      auto& [ids, buf, dsts, hit] = batch;
      std::vector<uint64_t> misses;
      std::vector<std::vector<std::byte>> bytes;
      std::vector<const std::byte*> rows;
      std::vector<InsertOutcome> outcomes;
      for (int b = 0; b < kBatches; ++b) {
        for (auto& id : ids) id = rng() % distinct;
        hits += c->LookupBatch(ids, dsts, PinAction::kConsume, hit);
        misses.clear();
        bytes.clear();
        rows.clear();
        for (size_t i = 0; i < ids.size(); ++i) {
          if (hit[i]) {
            if (std::memcmp(dsts[i], RowOf(ids[i]).data(), kRowBytes) != 0) ++wrong;
          } else {
            misses.push_back(ids[i]);
            bytes.push_back(RowOf(ids[i]));
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
  EXPECT_GT(hits.load(), 0u);
  RowCacheStats s = c->Stats();
  EXPECT_EQ(s.hits + s.misses, s.lookups);
  EXPECT_EQ(s.misses, s.inserts + s.total_refusals());
}

TEST(LookupBatch, HitsTheHintsFoundAreServedWithoutTheLockUnlessAPinIsConsumed) {
  auto c = testing::MakeSetAssociativeCache("default", 64, kRowBytes);
  BatchArgs batch(40);
  auto& [ids, buf, dsts, hit] = batch;
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = 1000 + i;
    ASSERT_EQ(c->Insert(ids[i], RowOf(ids[i])), InsertOutcome::kInserted);
  }
  ASSERT_EQ(c->InsertPinned(5000, RowOf(5000)), InsertOutcome::kInserted);
  ASSERT_EQ(c->LookupBatch(ids, dsts, PinAction::kConsume, hit), ids.size());
  EXPECT_EQ(c->UnlockedHitsForTesting(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(std::memcmp(dsts[i], RowOf(ids[i]).data(), kRowBytes), 0) << i;

  // Consuming a read-ahead pin changes the set, so that hit takes the lock.
  ids.assign(1, 5000);
  ASSERT_EQ(c->LookupBatch(ids, {dsts.data(), 1}, PinAction::kConsume, {hit.data(), 1}), 1u);
  EXPECT_EQ(c->UnlockedHitsForTesting(), 40u);
  EXPECT_FALSE(c->IsPinned(5000));
  ASSERT_EQ(c->LookupBatch(ids, {dsts.data(), 1}, PinAction::kConsume, {hit.data(), 1}), 1u);
  EXPECT_EQ(c->UnlockedHitsForTesting(), 41u);
}

// The hits LookupBatch serves without a lock (an unlocked read, validated by
// the set's version) race writers replacing the very rows being copied: a
// one-set cache of 5 ways, where every insert evicts a row the readers hit.
TEST(RowCacheBatches, HitsServedWithoutTheLockAreNeverTornByWritersOfTheSameSet) {
  auto c = testing::MakeSetAssociativeCache("default,sets=1,relocate=0,admission=always", 1, kRowBytes);
  ASSERT_EQ(c->capacity_rows(), 5u);
#if ENGRAM_UNDER_SANITIZER
  constexpr int kRounds = 20'000;
#else
  constexpr int kRounds = 200'000;
#endif
  constexpr uint64_t kDistinct = 8;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> wrong{0}, hits{0};
  std::thread writer([&] {
    std::mt19937_64 rng(7);
    while (!stop.load(std::memory_order_relaxed)) {
      const uint64_t id = rng() % kDistinct;
      c->Insert(id, RowOf(id));
    }
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(200 + t);
      BatchArgs batch(4);
      auto& [ids, buf, dsts, hit] = batch;
      for (int r = 0; r < kRounds; ++r) {
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = (rng() % (kDistinct / ids.size())) * ids.size() + i;
        hits += c->LookupBatch(ids, dsts, PinAction::kKeep, hit);
        for (size_t i = 0; i < ids.size(); ++i) {
          if (hit[i] && std::memcmp(dsts[i], RowOf(ids[i]).data(), kRowBytes) != 0) ++wrong;
        }
      }
    });
  }
  for (auto& th : readers) th.join();
  stop = true;
  writer.join();
  EXPECT_EQ(wrong.load(), 0u) << "of " << hits.load() << " hits";
  EXPECT_GT(hits.load(), 0u);
}

class InsertBatchTest : public ::testing::TestWithParam<const char*> {};

TEST_P(InsertBatchTest, EqualsOneInsertPerRowInOrder) {
  for (uint32_t row_bytes : {kRowBytes, 0u}) {  // 0: the emulator's index-only cache
    auto sequential = MakeForParam(GetParam(), 64, row_bytes);
    auto batched = MakeForParam(GetParam(), 64, row_bytes);
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
    testing::ExpectSameCacheStats(sequential->Stats(), batched->Stats());
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
                         ::testing::Values("legacy", "ways8", "ways16", "two-choice", "default", "lru", "ways=1",
                                           "direct:default", "direct:ways8", "direct:ways=3"));

TEST(InsertBatch, EmptyBatchDoesNothing) {
  auto c = testing::MakeSetAssociativeCache("default", 8, kRowBytes);
  c->InsertBatch({}, {}, {});
  EXPECT_EQ(c->Stats().inserts, 0u);
  EXPECT_EQ(c->Stats().resident_rows, 0u);
}

}  // namespace
}  // namespace engram
