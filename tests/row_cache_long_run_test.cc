// The row cache's logical clock over long runs: ages and the ghost history's
// epochs are kept in few bits, and must not wrap so that a long-idle row
// looks young -- however long the cache runs, and however rarely it misses.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "src/cache/set_associative_cache.h"

namespace engram {
namespace {

using cache::SetAssociativeRowCache;

std::unique_ptr<SetAssociativeRowCache> Make(const std::string& spec, uint64_t num_sets) {
  auto config = RowCacheConfig::FromSpec(spec);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  auto cache = SetAssociativeRowCache::Make(*config, num_sets, /*row_bytes=*/0);
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  return std::move(*cache);
}

// The first n rows (from 1 up) whose only candidate set is `set`.
std::vector<uint64_t> RowsOfSet(const SetAssociativeRowCache& c, uint64_t set, size_t n) {
  std::vector<uint64_t> rows;
  for (uint64_t r = 1; rows.size() < n; ++r) {
    if (c.CandidateSetsOf(r).first == set) rows.push_back(r);
  }
  return rows;
}

// Stamps are 32-bit: a row idle for 2^31 ticks or more used to read as age 0
// (the youngest), so LRU evicted the row just used and kept the idle one.
TEST(RowCacheLongRun, RowIdleForMoreThanTwoToThe31TicksIsStillTheOldest) {
  // 65,536 sets: the clock upkeep runs every 4,096 ticks, as in a real cache.
  auto c = Make("lru", 65536);
  ASSERT_EQ(c->config().candidate_sets, 1u);
  const std::vector<uint64_t> r = RowsOfSet(*c, 7, 5);  // 4 ways, 5 rows
  for (int i = 0; i < 4; ++i) ASSERT_EQ(c->Insert(r[i], {}), InsertOutcome::kInserted);
  for (uint64_t idle : {uint64_t{1} << 20, (uint64_t{1} << 31) + 5, uint64_t{3} << 32}) {
    SCOPED_TRACE("idle ticks: " + std::to_string(idle));
    c->AdvanceClockForTesting(idle);
    // Rows 1..3 are used now; row 0 has been idle all along.
    for (int i = 1; i < 4; ++i) ASSERT_TRUE(c->Lookup(r[i], {}));
    ASSERT_EQ(c->Insert(r[4], {}), InsertOutcome::kInsertedEvicted);
    EXPECT_FALSE(c->Contains(r[0])) << "LRU kept the idle row";
    for (int i = 1; i < 5; ++i) EXPECT_TRUE(c->Contains(r[i])) << "LRU evicted a row just used: " << i;
    // Reset for the next round: row 4 out, row 0 back in as the idle one.
    c = Make("lru", 65536);
    for (int i = 0; i < 4; ++i) ASSERT_EQ(c->Insert(r[i], {}), InsertOutcome::kInserted);
  }
}

// The ghost history's epochs wrap after 2^epoch_bits epochs; a sweep forgets
// entries before that. It used to run on inserts only, so while the cache
// only hit, an entry several epochs old came back reading as recent, and the
// row it belonged to won admission as if it had just been seen.
TEST(RowCacheLongRun, RowSeenLongAgoIsForgottenEvenIfTheCacheOnlyHitSince) {
  const uint64_t kSets = 256;
  for (int epochs : {3, 8, 10, 13}) {
    SCOPED_TRACE("hit-only epochs: " + std::to_string(epochs));
    auto c = Make("default", kSets);
    const uint64_t epoch = c->capacity_rows() / c->config().ghost_epochs;  // ticks
    // Fill until a row is refused (its access is then in the history).
    uint64_t refused = 0;
    uint64_t hot = 0;
    for (uint64_t r = 1; refused == 0; ++r) {
      ASSERT_FALSE(c->Lookup(r, {}));
      InsertOutcome o = c->Insert(r, {});
      if (o == InsertOutcome::kInserted) hot = r;
      if (o == InsertOutcome::kRefusedLostAdmission) refused = r;
    }
    // Only hits, for `epochs` epochs.
    for (uint64_t t = 0; t < uint64_t(epochs) * epoch; ++t) ASSERT_TRUE(c->Lookup(hot, {}));
    ASSERT_FALSE(c->Lookup(refused, {}));
    const InsertOutcome again = c->Insert(refused, {});
    // Entries are trusted up to 3/4 of the 2^ghost_epoch_bits epoch range.
    const int trusted = (3 << c->config().ghost_epoch_bits) / 4;
    ASSERT_EQ(trusted, 6);
    if (epochs < trusted - 1) {
      // Recent enough to be remembered: it came back sooner than the idle
      // residents, so it is admitted (the control: the history works).
      EXPECT_EQ(again, InsertOutcome::kInsertedEvicted);
    } else {
      EXPECT_EQ(again, InsertOutcome::kRefusedLostAdmission) << "an entry wrapped and read as recent";
    }
  }
}

}  // namespace
}  // namespace engram
