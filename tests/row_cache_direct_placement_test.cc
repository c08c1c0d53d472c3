// Direct placement (src/cache/set_hasher.h): a cache with a slot for every
// row of its table holds all of it after one read, under every policy, and
// its lookups keep no frequencies.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "src/cache/row_cache.h"
#include "src/cache/set_associative_cache.h"

namespace engram {
namespace {

constexpr uint32_t kRowBytes = 16;
constexpr uint64_t kTableRows = 65536;

std::vector<std::byte> RowOf(uint64_t id) {
  std::vector<std::byte> row(kRowBytes);
  for (uint32_t i = 0; i < kRowBytes; ++i) row[i] = std::byte(uint8_t(id * 31 + i));
  return row;
}

// Reads every row of the table once (in random order: misses, then inserts),
// then counts how many a second pass finds.
uint64_t HitsOnTheSecondPass(RowCache& cache) {
  std::vector<uint64_t> order(kTableRows);
  for (uint64_t i = 0; i < kTableRows; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(3));
  std::vector<std::byte> out(kRowBytes);
  for (uint64_t id : order) {
    if (!cache.Lookup(id, out)) cache.Insert(id, RowOf(id));
  }
  uint64_t hits = 0;
  for (uint64_t id : order) {
    if (cache.Lookup(id, out)) {
      ++hits;
      EXPECT_EQ(out, RowOf(id)) << id;
    }
  }
  return hits;
}

TEST(RowCacheDirectPlacement, ABudgetThatCoversTheTableHoldsEveryRowAfterOnePass) {
  for (const char* spec : {"default", "legacy", "two-choice", "lru", "ways8", "default,ways=3"}) {
    SCOPED_TRACE(spec);
    const RowCacheConfig config = RowCacheConfig::FromSpec(spec).value();
    auto budget = RowCache::BudgetForRows(config, kTableRows, kRowBytes);
    ASSERT_TRUE(budget.ok());
    // Even a budget far beyond the table: the cache is capped at the table.
    for (uint64_t b : {*budget, *budget * 4}) {
      auto cache = RowCache::Create(config, b, kRowBytes, kTableRows);
      ASSERT_TRUE(cache.ok()) << cache.status().ToString();
      EXPECT_GE((*cache)->capacity_rows(), kTableRows);
      EXPECT_LT((*cache)->capacity_rows(), kTableRows + config.ways);
      EXPECT_EQ(HitsOnTheSecondPass(**cache), kTableRows);
      EXPECT_EQ((*cache)->Stats().evictions, 0u);
      EXPECT_EQ((*cache)->Stats().total_refusals(), 0u);
    }
    // The same slots with hashed placement (row IDs not known to be below
    // the table's rows) leave some rows out: what direct placement is for.
    auto hashed = RowCache::CreateWithCapacity(config, kTableRows, kRowBytes);
    ASSERT_TRUE(hashed.ok());
    EXPECT_LT(HitsOnTheSecondPass(**hashed), kTableRows);
  }
}

TEST(RowCacheDirectPlacement, LookupsKeepNoFrequenciesOnlyWhenPlacementIsDirect) {
  const RowCacheConfig config = RowCacheConfig::FromSpec("default").value();
  const uint64_t sets = kTableRows / config.ways + 1;
  auto direct = cache::SetAssociativeRowCache::Make(config, sets, kRowBytes, kTableRows);
  auto hashed = cache::SetAssociativeRowCache::Make(config, sets, kRowBytes);
  ASSERT_TRUE(direct.ok() && hashed.ok());
  ASSERT_TRUE((*direct)->hasher().direct());
  ASSERT_FALSE((*hashed)->hasher().direct());
  std::vector<std::byte> out(kRowBytes);
  for (auto* cache : {direct->get(), hashed->get()}) {
    cache->Insert(42, RowOf(42));
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(cache->Lookup(42, out));
    std::vector<uint64_t> ids(8, 42);
    std::vector<std::byte> rows(ids.size() * kRowBytes);
    std::vector<std::byte*> dsts;
    for (size_t i = 0; i < ids.size(); ++i) dsts.push_back(rows.data() + i * kRowBytes);
    std::vector<uint8_t> hit(ids.size());
    EXPECT_EQ(cache->LookupBatch(ids, dsts, PinAction::kConsume, hit), ids.size());
  }
  EXPECT_EQ((*direct)->EstimateOf(42), 0u);
  EXPECT_GT((*hashed)->EstimateOf(42), 0u);
}

}  // namespace
}  // namespace engram
