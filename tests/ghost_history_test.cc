// GhostHistory: the tagged, epoch-stamped memory of recently seen rows that
// reuse-distance admission consults for rows not in the cache.
#include "src/cache/ghost_history.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "src/cache/set_hasher.h"

namespace engram::cache {
namespace {

uint64_t H(uint64_t row) { return Remix(row * 0x9e3779b97f4a7c15ULL + 12345); }

TEST(GhostHistory, UnknownRowIsNever) {
  GhostHistory g(64 * 1024, 3, 100, 1);
  EXPECT_EQ(g.AgeOf(H(1), 5000), GhostHistory::kNever);
}

TEST(GhostHistory, ReportsAgeInWholeEpochs) {
  GhostHistory g(64 * 1024, 3, /*granularity=*/100, 1);
  g.Record(H(7), 1000, 1000);  // epoch 10
  EXPECT_EQ(g.AgeOf(H(7), 1000), 0u);
  EXPECT_EQ(g.AgeOf(H(7), 1099), 0u);
  EXPECT_EQ(g.AgeOf(H(7), 1100), 100u);
  EXPECT_EQ(g.AgeOf(H(7), 1550), 500u);
  // A later record of the same row replaces the age.
  g.Record(H(7), 1550, 1550);
  EXPECT_EQ(g.AgeOf(H(7), 1560), 0u);
  // An older access does not make a newer record older.
  g.Record(H(7), 1000, 1560);
  EXPECT_EQ(g.AgeOf(H(7), 1560), 0u);
}

TEST(GhostHistory, TouchReturnsThePreviousAccessAndRecordsThisOne) {
  GhostHistory g(64 * 1024, 3, 100, 1);
  EXPECT_EQ(g.Touch(H(5), 1000), GhostHistory::kNever);  // first seen
  EXPECT_EQ(g.Touch(H(5), 1250), 200u);                  // epochs 10 -> 12
  EXPECT_EQ(g.AgeOf(H(5), 1250), 0u);
  EXPECT_EQ(g.Touch(H(5), 1950), GhostHistory::kNever);  // 7 epochs: forgotten
  EXPECT_EQ(g.AgeOf(H(5), 1950), 0u);                    // ... and seen again now
}

TEST(GhostHistory, ForgetsRowsOlderThanTheTrustedAge) {
  GhostHistory g(64 * 1024, 3, 100, 1);
  ASSERT_EQ(g.max_age_epochs(), 6u);  // 8 epoch values, a quarter of them for the sweep
  g.Record(H(3), 0, 0);
  EXPECT_EQ(g.AgeOf(H(3), 599), 500u);
  EXPECT_EQ(g.AgeOf(H(3), 600), GhostHistory::kNever);
  // Recording an access already that old is a no-op.
  g.Record(H(4), 0, 700);
  EXPECT_EQ(g.AgeOf(H(4), 700), GhostHistory::kNever);
}

// Without the sweep, an entry's epoch wraps after 2^bits epochs and an old
// row would read as just seen. With Sweep called as the clock advances (the
// cache calls it on every insert), it reads as never.
TEST(GhostHistory, SweepForgetsEntriesBeforeTheirEpochWraps) {
  const uint64_t gran = 10;
  GhostHistory swept(64 * 64, 3, gran, 1), unswept(64 * 64, 3, gran, 1);
  swept.Record(H(9), 5, 5);
  unswept.Record(H(9), 5, 5);
  const uint64_t wrapped = 5 + 8 * gran;  // same epoch value, 8 epochs later
  for (uint64_t t = 6; t <= wrapped; ++t) swept.Sweep(t);
  EXPECT_EQ(swept.AgeOf(H(9), wrapped), GhostHistory::kNever);
  EXPECT_EQ(unswept.AgeOf(H(9), wrapped), 0u) << "control: the wrap is real";
}

TEST(GhostHistory, FullBucketKeepsTheMostRecentRows) {
  // One bucket of 32 entries, epochs of 10 ticks. Rows 0..7 are seen in
  // epoch 0, rows 8..39 in epochs 1..4: the last 8 push out the first 8.
  GhostHistory g(64, 3, /*granularity=*/10, 1);
  for (uint64_t r = 0; r < 8; ++r) g.Record(H(r), r, r);
  for (uint64_t r = 8; r < 40; ++r) g.Record(H(r), 10 + (r - 8), 10 + (r - 8));
  int remembered_old = 0, remembered_new = 0;
  for (uint64_t r = 0; r < 8; ++r) remembered_old += g.AgeOf(H(r), 45) != GhostHistory::kNever;
  for (uint64_t r = 8; r < 40; ++r) remembered_new += g.AgeOf(H(r), 45) != GhostHistory::kNever;
  EXPECT_EQ(remembered_new, 32);
  EXPECT_EQ(remembered_old, 0);
  EXPECT_EQ(g.AgeOf(H(39), 45), 0u);   // tick 41: epoch 4, as now
  EXPECT_EQ(g.AgeOf(H(8), 45), 30u);   // tick 10: epoch 1
}

TEST(GhostHistory, OldAccessDoesNotPushOutRowsSeenSince) {
  GhostHistory g(64, 6, 1, 1);
  for (uint64_t r = 0; r < 32; ++r) g.Record(H(r), 100 + r, 100 + r);
  // An evicted row last used before all of them (41 epochs ago: recent
  // enough to be recorded if there were room).
  g.Record(H(1000), 99, 140);
  EXPECT_EQ(g.AgeOf(H(1000), 140), GhostHistory::kNever);
  for (uint64_t r = 0; r < 32; ++r) EXPECT_NE(g.AgeOf(H(r), 140), GhostHistory::kNever) << r;
}

TEST(GhostHistory, RowsNeverRecordedRarelyMatch) {
  // Half-full table: 16,384 entries, 8,192 rows recorded; 100,000 others asked.
  GhostHistory g(32 * 1024, 3, 1'000'000, 7);
  for (uint64_t r = 0; r < 8192; ++r) g.Record(H(r), 10, 10);
  int remembered = 0;
  for (uint64_t r = 0; r < 8192; ++r) remembered += g.AgeOf(H(r), 10) != GhostHistory::kNever;
  EXPECT_GT(remembered, 8192 * 99 / 100);  // buckets overflow only by chance
  int false_matches = 0;
  for (uint64_t r = 1'000'000; r < 1'100'000; ++r) false_matches += g.AgeOf(H(r), 10) != GhostHistory::kNever;
  // ~16 occupied entries per bucket / 2^13 fingerprints = 0.2 %.
  EXPECT_LT(false_matches, 500);
}

TEST(GhostHistory, ConcurrentRecordsAndLookupsStayInRange) {
  GhostHistory g(4096, 3, 64, 3);
  std::atomic<uint64_t> clock{1};
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < 50'000; ++i) {
        const uint64_t now = clock.fetch_add(1);
        const uint64_t row = (i * 7 + t) % 3000;
        const uint64_t age = (i % 2) ? g.Touch(H(row), now) : g.AgeOf(H(row), now);
        if (age != GhostHistory::kNever && age > uint64_t{g.max_age_epochs()} * 64) bad = true;
        if (i % 3 == 0) g.Record(H(row + 5000), now > 100 ? now - 100 : 0, now);
        g.Sweep(now);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(bad.load());
}

TEST(GhostHistory, MarkReadsBackOnTheNextAccessWhichClearsIt) {
  GhostHistory g(64 * 1024, 3, 100, 1, /*flag_bits=*/1);
  bool flagged = true;
  EXPECT_EQ(g.Touch(H(3), 1000, &flagged), GhostHistory::kNever);
  EXPECT_FALSE(flagged);
  g.MarkFlag(H(3), 1000);
  EXPECT_EQ(g.Touch(H(3), 1200, &flagged), 200u);
  EXPECT_TRUE(flagged);
  EXPECT_EQ(g.Touch(H(3), 1300, &flagged), 100u);
  EXPECT_FALSE(flagged);
  // Marking a row the table does not remember records nothing.
  g.MarkFlag(H(4), 1300);
  EXPECT_EQ(g.AgeOf(H(4), 1300), GhostHistory::kNever);
}

TEST(GhostHistory, WithoutAFlagBitMarksAreIgnored) {
  GhostHistory g(64 * 1024, 3, 100, 1);
  bool flagged = true;
  g.Touch(H(3), 1000, &flagged);
  g.MarkFlag(H(3), 1000);
  EXPECT_EQ(g.Touch(H(3), 1200, &flagged), 200u);
  EXPECT_FALSE(flagged);
}

TEST(GhostHistory, FlaggedRowsStillMatchTheirOwnEntryOnly) {
  GhostHistory g(64 * 1024, 3, 100, 1, /*flag_bits=*/1);
  for (uint64_t r = 0; r < 200; ++r) g.Touch(H(r), 1000);
  for (uint64_t r = 0; r < 200; r += 2) g.MarkFlag(H(r), 1000);
  int flagged_even = 0, flagged_odd = 0;
  for (uint64_t r = 0; r < 200; ++r) {
    bool flagged = false;
    EXPECT_EQ(g.Touch(H(r), 1100, &flagged), 100u) << r;
    (r % 2 ? flagged_odd : flagged_even) += flagged;
  }
  EXPECT_EQ(flagged_even, 100);
  EXPECT_EQ(flagged_odd, 0);
}

}  // namespace
}  // namespace engram::cache
