// Direct placement (src/cache/set_hasher.h): a cache with a slot for every
// row of its table holds all of it after one read, under every policy, its
// lookups keep no frequencies, row r lives in slot r, and a batch serves its
// hits from the residency bitmap (src/cache/residency_bitmap.h).
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "src/cache/cache_sizing.h"
#include "src/cache/row_cache.h"
#include "src/cache/set_associative_cache.h"

namespace engram {
namespace {

constexpr uint32_t kRowBytes = 16;
constexpr uint64_t kTableRows = 65536;

std::vector<std::byte> RowOf(uint64_t id, uint32_t row_bytes = kRowBytes) {
  std::vector<std::byte> row(row_bytes);
  for (uint32_t i = 0; i < row_bytes; ++i) row[i] = std::byte(uint8_t(id * 31 + i));
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

// The pointers LookupBatch wants for rows laid end to end in `out`.
std::vector<std::byte*> DestinationsIn(std::vector<std::byte>& out, size_t rows) {
  out.assign(rows * kRowBytes, std::byte{0});
  std::vector<std::byte*> dsts;
  for (size_t i = 0; i < rows; ++i) dsts.push_back(out.data() + i * kRowBytes);
  return dsts;
}

std::unique_ptr<cache::SetAssociativeRowCache> DirectCache(const char* spec = "default") {
  const RowCacheConfig config = RowCacheConfig::FromSpec(spec).value();
  auto made = cache::SetAssociativeRowCache::Make(config, cache::SetsForCapacity(config, kTableRows), kRowBytes,
                                                   kTableRows);
  EXPECT_TRUE(made.ok() && (*made)->hasher().direct());
  return made.ok() ? std::move(*made) : nullptr;
}

TEST(RowCacheDirectPlacement, EveryRowLivesInItsOwnSlotWhateverOrderRowsArriveIn) {
  for (const char* spec : {"default", "ways8", "two-choice", "default,ways=3"}) {
    SCOPED_TRACE(spec);
    auto cache = DirectCache(spec);
    ASSERT_NE(cache, nullptr);
    EXPECT_EQ(HitsOnTheSecondPass(*cache), kTableRows);
    const uint32_t ways = cache->config().ways;
    for (uint64_t set : {uint64_t{0}, uint64_t{1}, uint64_t{777}, kTableRows / ways - 1}) {
      std::vector<uint64_t> want;
      for (uint32_t w = 0; w < ways; ++w) want.push_back(set * ways + w);
      EXPECT_EQ(cache->ResidentsOf(set), want) << "set " << set;
    }
  }
}

TEST(RowCacheDirectPlacement, ARowIdWithoutASlotIsNeverPlacedAndAlwaysMisses) {
  auto cache = DirectCache();
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(HitsOnTheSecondPass(*cache), kTableRows);
  std::vector<std::byte> out(kRowBytes);
  for (uint64_t id : {cache->capacity_rows(), cache->capacity_rows() + 7, uint64_t{1} << 62}) {
    SCOPED_TRACE(id);
    EXPECT_FALSE(cache->Lookup(id, out));
    EXPECT_EQ(cache->Insert(id, RowOf(id)), InsertOutcome::kRefusedLostAdmission);
    EXPECT_EQ(cache->InsertPinned(id, RowOf(id)), InsertOutcome::kRefusedLostAdmission);
    EXPECT_FALSE(cache->InsertIntoFreeWay(id, RowOf(id), 0));
    std::vector<uint64_t> ids = {id};
    std::vector<std::byte> rows;
    std::vector<std::byte*> dsts = DestinationsIn(rows, 1);
    std::vector<uint8_t> hit(1, 2);
    EXPECT_EQ(cache->LookupBatch(ids, dsts, PinAction::kKeep, hit), 0u);
    EXPECT_EQ(hit[0], 0);
  }
  EXPECT_EQ(cache->Stats().evictions, 0u);
  EXPECT_EQ(HitsOnTheSecondPass(*cache), kTableRows) << "a row without a slot displaced one with a slot";
}

// Reuse-distance admission reads a history of rows seen but not cached. A
// directly placed row goes to its own slot or nowhere, so no admission test
// runs: the cache keeps no history to feed (inserts and Maintain skip it),
// and still holds the whole table and refuses a row ID without a slot.
TEST(RowCacheDirectPlacement, ADirectCacheKeepsNoReuseHistoryItsAdmissionWouldNeverRead) {
  for (const char* spec : {"default", "default,admission=adaptive"}) {
    SCOPED_TRACE(spec);
    const RowCacheConfig config = RowCacheConfig::FromSpec(spec).value();
    auto hashed = cache::SetAssociativeRowCache::Make(config, cache::SetsForCapacity(config, kTableRows), kRowBytes);
    ASSERT_TRUE(hashed.ok());
    EXPECT_TRUE((*hashed)->KeepsGhostHistory());
    auto direct = DirectCache(spec);
    ASSERT_NE(direct, nullptr);
    EXPECT_FALSE(direct->KeepsGhostHistory());
    EXPECT_EQ(HitsOnTheSecondPass(*direct), kTableRows);
    const uint64_t no_slot = direct->capacity_rows() + 3;
    EXPECT_EQ(direct->Insert(no_slot, RowOf(no_slot)), InsertOutcome::kRefusedLostAdmission);
    direct->AdvanceClockForTesting(uint64_t{1} << 22);  // Maintain runs, with nothing to sweep
    EXPECT_EQ(HitsOnTheSecondPass(*direct), kTableRows);
  }
}

// The index is made read-only once the table is in: a batch that stamped or
// locked a set would fault. Its hits read only the bitmap and the slab.
TEST(RowCacheDirectPlacement, BatchHitsWriteNothingInTheIndex) {
  const RowCacheConfig config = RowCacheConfig::FromSpec("default").value();
  uint8_t* index = nullptr;
  uint64_t index_bytes = 0;
  std::vector<std::pair<void*, size_t>> mappings;
  CacheRegionAllocator regions = [&](uint64_t bytes, const char* what) -> Result<cache::AnonymousMemory> {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return Status::ResourceExhausted(what);
    mappings.emplace_back(p, bytes);
    if (std::string(what) == "index") index = static_cast<uint8_t*>(p), index_bytes = bytes;
    return cache::AnonymousMemory::Unowned(static_cast<uint8_t*>(p), bytes);
  };
  {
    auto made = cache::SetAssociativeRowCache::Make(config, cache::SetsForCapacity(config, kTableRows), kRowBytes,
                                                     kTableRows, regions);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    cache::SetAssociativeRowCache& cache = **made;
    ASSERT_NE(index, nullptr);
    EXPECT_EQ(HitsOnTheSecondPass(cache), kTableRows);
    cache.WaitForMemory();
    // The clock's upkeep (Maintain) locks a slice of sets every so many
    // ticks, whatever the lookups: the batch runs between two upkeeps.
    const uint64_t every = cache.TicksBetweenUpkeepForTesting();
    cache.AdvanceClockForTesting(every - cache.ClockForTesting() % every + 1);
    ASSERT_EQ(mprotect(index, index_bytes, PROT_READ), 0);
    std::vector<uint64_t> ids(every - 2);
    std::mt19937_64 rng(9);
    for (uint64_t& id : ids) id = rng() % kTableRows;
    std::vector<std::byte> rows;
    std::vector<std::byte*> dsts = DestinationsIn(rows, ids.size());
    std::vector<uint8_t> hit(ids.size());
    EXPECT_EQ(cache.LookupBatch(ids, dsts, PinAction::kKeep, hit), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_EQ(std::vector<std::byte>(dsts[i], dsts[i] + kRowBytes), RowOf(ids[i])) << ids[i];
    }
    ASSERT_EQ(mprotect(index, index_bytes, PROT_READ | PROT_WRITE), 0);
  }
  for (auto [p, bytes] : mappings) munmap(p, bytes);
}

TEST(RowCacheDirectPlacement, ABatchAskedToConsumePinsStillConsumesThem) {
  auto cache = DirectCache();
  ASSERT_NE(cache, nullptr);
  ASSERT_EQ(cache->InsertPinned(5, RowOf(5)), InsertOutcome::kInserted);
  ASSERT_EQ(cache->Insert(6, RowOf(6)), InsertOutcome::kInserted);
  std::vector<uint64_t> ids = {5, 6};
  std::vector<std::byte> rows;
  std::vector<std::byte*> dsts = DestinationsIn(rows, ids.size());
  std::vector<uint8_t> hit(ids.size());
  EXPECT_EQ(cache->LookupBatch(ids, dsts, PinAction::kKeep, hit), 2u);
  EXPECT_TRUE(cache->IsPinned(5));
  EXPECT_EQ(cache->LookupBatch(ids, dsts, PinAction::kConsume, hit), 2u);
  EXPECT_FALSE(cache->IsPinned(5));
  EXPECT_EQ(std::vector<std::byte>(dsts[0], dsts[0] + kRowBytes), RowOf(5));
  EXPECT_EQ(cache->Stats().pinned_rows, 0u);
}

// Writers place rows while readers gather them in batches: a reader that
// sees a row's residency bit must see all of its bytes (run under TSan too).
// Rows of 4 KiB, so that a copy racing the row's write would show.
TEST(RowCacheDirectPlacement, BatchesGatheringWhileRowsArriveCopyOnlyWholeRows) {
  constexpr uint32_t kBigRow = 4096;
  constexpr uint64_t kRows = 8192;
  const RowCacheConfig config = RowCacheConfig::FromSpec("default").value();
  auto made = cache::SetAssociativeRowCache::Make(config, cache::SetsForCapacity(config, kRows), kBigRow, kRows);
  ASSERT_TRUE(made.ok() && (*made)->hasher().direct());
  cache::SetAssociativeRowCache* cache = made->get();
  constexpr int kWriters = 2, kReaders = 2;
  std::atomic<int> ready{0};
  std::atomic<bool> writers_done{false};
  std::atomic<uint64_t> wrong{0}, hits_while_writing{0};
  auto start_together = [&] {
    ready.fetch_add(1);
    while (ready.load() < kWriters + kReaders) std::this_thread::yield();
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::vector<uint64_t> order;
      for (uint64_t id = w; id < kRows; id += kWriters) order.push_back(id);
      std::shuffle(order.begin(), order.end(), std::mt19937_64(w));
      std::vector<std::byte> out(kBigRow);
      start_together();
      for (uint64_t id : order) {
        if (!cache->Lookup(id, out)) cache->Insert(id, RowOf(id, kBigRow));
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(100 + r);
      std::vector<uint64_t> ids(64);
      std::vector<std::byte> rows(ids.size() * kBigRow);
      std::vector<std::byte*> dsts;
      for (size_t i = 0; i < ids.size(); ++i) dsts.push_back(rows.data() + i * kBigRow);
      std::vector<uint8_t> hit(ids.size());
      start_together();
      while (!writers_done.load()) {
        for (uint64_t& id : ids) id = rng() % kRows;
        const size_t hits = cache->LookupBatch(ids, dsts, PinAction::kKeep, hit);
        if (!writers_done.load()) hits_while_writing += hits;
        for (size_t i = 0; i < ids.size(); ++i) {
          if (hit[i] && std::vector<std::byte>(dsts[i], dsts[i] + kBigRow) != RowOf(ids[i], kBigRow)) ++wrong;
        }
      }
    });
  }
  for (int w = 0; w < kWriters; ++w) threads[w].join();
  writers_done = true;
  for (size_t t = kWriters; t < threads.size(); ++t) threads[t].join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(hits_while_writing.load(), 0u) << "the readers never overlapped the writers: the test proves nothing";
  EXPECT_EQ(cache->Stats().evictions, 0u);
  std::vector<std::byte> out(kBigRow);
  for (uint64_t id = 0; id < kRows; ++id) {
    ASSERT_TRUE(cache->Lookup(id, out)) << id;
    ASSERT_EQ(out, RowOf(id, kBigRow)) << id;
  }
}

}  // namespace
}  // namespace engram
