// RowCache under concurrent lookups, inserts, evictions, relocations and
// read-ahead pins. Every row's content is a function of its ID, so a copied
// row that mixes two rows (a torn read) or belongs to another ID is caught.
// Run under TSan too (ENGRAM_SANITIZE=thread).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "src/common/sanitizers.h"
#include "src/cache/row_cache.h"
#include "src/cache/set_associative_cache.h"
#include "src/cache/set_hasher.h"

namespace engram {
namespace {

constexpr uint32_t kRowBytes = 264;

void FillRow(uint64_t id, std::byte* out) {
  uint64_t x = cache::Remix(id + 1);
  for (uint32_t i = 0; i < kRowBytes; i += 8) {
    x = cache::Remix(x + i);
    std::memcpy(out + i, &x, 8);
  }
}

struct ConcurrencyCase {
  const char* spec;
  uint64_t num_sets;
  // Distinct rows per slot: well above 1 keeps sets evicting; near 1 keeps
  // free slots around, which is when relocation has somewhere to move rows.
  double rows_per_slot;
};

void PrintTo(const ConcurrencyCase& c, std::ostream* os) { *os << "'" << c.spec << "' over " << c.num_sets << " sets"; }

class RowCacheConcurrencyTest : public ::testing::TestWithParam<ConcurrencyCase> {};

TEST_P(RowCacheConcurrencyTest, EveryCopiedRowIsExactAndTheCountsAddUp) {
  auto config = RowCacheConfig::FromSpec(GetParam().spec);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto made = cache::SetAssociativeRowCache::Make(*config, GetParam().num_sets, kRowBytes);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  cache::SetAssociativeRowCache& c = **made;

  constexpr int kThreads = 4;
#if ENGRAM_UNDER_SANITIZER
  constexpr int kOpsPerThread = 6000;  // sanitizers run ~10x slower; races still interleave
#else
  constexpr int kOpsPerThread = 20000;
#endif
  const uint64_t distinct = uint64_t(double(c.capacity_rows()) * GetParam().rows_per_slot);
  std::atomic<uint64_t> torn{0}, checked{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1234 + t);
      std::uniform_real_distribution<double> u(0.0, 1.0);
      auto draw = [&] { return uint64_t(u(rng) * u(rng) * double(distinct)); };  // skewed
      std::vector<std::byte> buf(kRowBytes), want(kRowBytes), row(kRowBytes);
      std::vector<uint64_t> my_pins;
      for (int op = 0; op < kOpsPerThread; ++op) {
        double kind = u(rng);
        if (kind < 0.05) {
          uint64_t id = draw();
          FillRow(id, row.data());
          if (c.InsertPinned(id, row) != InsertOutcome::kRefusedAllPinned) my_pins.push_back(id);
          if (my_pins.size() > 4) {
            c.Unpin(my_pins.front());  // may already be consumed by another thread: fine
            my_pins.erase(my_pins.begin());
          }
          continue;
        }
        uint64_t id = (kind < 0.15 && !my_pins.empty()) ? my_pins.back() : draw();
        std::memset(buf.data(), 0xee, kRowBytes);
        if (c.Lookup(id, buf, kind < 0.5 ? PinAction::kConsume : PinAction::kKeep)) {
          FillRow(id, want.data());
          checked.fetch_add(1, std::memory_order_relaxed);
          if (buf != want) torn.fetch_add(1, std::memory_order_relaxed);
        } else {
          FillRow(id, row.data());
          c.Insert(id, row);
        }
      }
      for (uint64_t id : my_pins) c.Unpin(id);
    });
  }
  for (auto& th : threads) th.join();

  EXPECT_EQ(torn.load(), 0u) << "of " << checked.load() << " hits";
  EXPECT_GT(checked.load(), uint64_t(kThreads) * kOpsPerThread / 10);
  RowCacheStats s = c.Stats();
  EXPECT_EQ(s.lookups, s.hits + s.misses);
  EXPECT_EQ(s.misses, s.inserts + s.total_refusals());
  if (GetParam().rows_per_slot > 2) {
    EXPECT_GT(s.evictions, 50u);
  }
  if (config->relocation_depth > 0 && GetParam().rows_per_slot <= 1) {
    // Relocations did run concurrently with the lookups. How many depends on
    // timing (a busy set is skipped, and the clock upkeep also locks sets):
    // exactly 50 was seen under TSan, so only "some" is asserted.
    EXPECT_GT(s.relocations, 10u);
  }

  // The counters agree with what is actually in the sets, and every resident
  // holds its own bytes.
  uint64_t resident = 0, pinned = 0;
  std::vector<std::byte> buf(kRowBytes), want(kRowBytes);
  for (uint64_t set = 0; set < c.num_sets(); ++set) {
    for (uint64_t id : c.ResidentsOf(set)) {
      ++resident;
      pinned += c.IsPinned(id);
      ASSERT_TRUE(c.Lookup(id, buf, PinAction::kKeep)) << id;
      FillRow(id, want.data());
      ASSERT_EQ(buf, want) << id;
    }
  }
  EXPECT_EQ(s.resident_rows, resident);
  EXPECT_EQ(s.pinned_rows, pinned);
  EXPECT_LE(resident, c.capacity_rows());
}

// A relocation moves a resident row from one of its candidate sets to the
// other; a lookup running meanwhile must still find it (Lookup holds both
// sets before it calls a row missing). Hot rows are looked up while other
// threads fill the cache with new rows, which makes relocations move
// residents around. Nobody re-inserts a hot row, so one that missed and is
// still resident at the end was missed while resident. (A lookup that gave
// up after looking in each set under its own lock fails this test.)
TEST(RowCacheRelocationRace, ResidentRowIsNeverMissedWhileRelocationsMoveIt) {
  auto config = RowCacheConfig::FromSpec("default");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  // The window is narrow (a relocation landing between the two looks), so
  // the fill is repeated on fresh caches.
  uint64_t relocations = 0;
  for (int round = 0; round < 40; ++round) {
    auto made = cache::SetAssociativeRowCache::Make(*config, 2048, kRowBytes);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    cache::SetAssociativeRowCache& c = **made;
    const uint64_t capacity = c.capacity_rows();
    const uint64_t hot = capacity / 4;
    std::vector<std::byte> row(kRowBytes);
    for (uint64_t id = 0; id < hot; ++id) {
      FillRow(id, row.data());
      ASSERT_EQ(c.Insert(id, row), InsertOutcome::kInserted) << id;
    }

    constexpr int kReaders = 2, kWriters = 2;
    std::atomic<bool> writing{true};
    std::vector<std::vector<uint64_t>> missed(kReaders);
    std::vector<std::thread> threads;
    for (int t = 0; t < kWriters; ++t) {
      threads.emplace_back([&, t] {
        std::vector<std::byte> r(kRowBytes);
        // New rows up to ~95% of the slots: the later inserts find both
        // candidate sets full and relocate.
        for (uint64_t id = hot + t; id < capacity * 95 / 100; id += kWriters) {
          FillRow(id, r.data());
          c.Insert(id, r);
        }
      });
    }
    for (int t = 0; t < kReaders; ++t) {
      threads.emplace_back([&, t] {
        std::vector<std::byte> buf(kRowBytes);
        for (int pass = 0; writing.load(std::memory_order_relaxed) || pass < 2; ++pass) {
          for (uint64_t id = t; id < hot; id += kReaders) {
            if (!c.Lookup(id, buf, PinAction::kKeep)) missed[t].push_back(id);
          }
        }
      });
    }
    for (int t = 0; t < kWriters; ++t) threads[t].join();
    writing.store(false);
    for (size_t t = kWriters; t < threads.size(); ++t) threads[t].join();

    relocations += c.Stats().relocations;
    for (const auto& ids : missed) {
      for (uint64_t id : ids) ASSERT_FALSE(c.Contains(id)) << "row " << id << " was missed while resident";
    }
  }
  ASSERT_GT(relocations, 0u) << "the fills never relocated: the test proves nothing";
}

INSTANTIATE_TEST_SUITE_P(Policies, RowCacheConcurrencyTest,
                         ::testing::Values(ConcurrencyCase{"legacy", 64, 3.0}, ConcurrencyCase{"default", 64, 3.0},
                                           ConcurrencyCase{"default", 256, 1.0},
                                           ConcurrencyCase{"default,admission=adaptive", 64, 3.0},
                                           ConcurrencyCase{"two-choice,ways=1,relocate=4", 2003, 1.0},
                                           ConcurrencyCase{"ways16,admission=always,victim=oldest", 8, 3.0}));

}  // namespace
}  // namespace engram
