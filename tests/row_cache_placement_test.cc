// The placement steps of SetAssociativeRowCache, each on its own: the free
// way, the victim choice and the admission rules, on sets laid out by hand.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "src/cache/cache_config.h"
#include "src/cache/admission.h"
#include "src/cache/free_way.h"
#include "src/cache/frequency_sketch.h"
#include "src/cache/set_hasher.h"
#include "src/cache/set_storage.h"
#include "src/cache/victim_choice.h"

namespace engram::cache {
namespace {

class RowCachePlacement : public ::testing::Test {
 protected:
  static constexpr uint32_t kWays = 5;
  RowCachePlacement()
      : layout_(SetLayout::For(kWays)),
        index_(2 * layout_.stride, 0),
        storage_{index_.data(), nullptr, &layout_, 0},
        hasher_(7, 2, 2),
        sketch_(4096, 2, 8, 7, /*conservative=*/true, /*blocked=*/true) {}

  // Puts row in (set, way), last accessed at tick `stamp`.
  void Put(uint64_t set, uint32_t way, uint64_t row, uint32_t stamp) {
    SetView v = storage_.View(set);
    v.set_key(way, row);
    v.set_stamp(way, stamp);
    v.set_occupied(v.occupied() | (1u << way));
  }
  void Fill(uint64_t set, uint64_t first_row, uint32_t stamp) {
    for (uint32_t w = 0; w < kWays; ++w) Put(set, w, first_row + w, stamp);
  }
  void Read(uint64_t row, int times) {
    for (int i = 0; i < times; ++i) sketch_.Increment(hasher_.Hash(row));
  }

  SetLayout layout_;
  std::vector<uint8_t> index_;
  SetStorage storage_;
  SetHasher hasher_;
  FrequencySketch sketch_;
  const uint64_t sets_[2] = {0, 1};
};

TEST_F(RowCachePlacement, FreeWayIsTheLowestOfTheEmptierSetAndNoneWhenBothAreFull) {
  Put(0, 0, 100, 1);
  Put(1, 0, 200, 1);
  Put(1, 1, 201, 1);
  uint64_t set = 9;
  uint32_t way = 9;
  ASSERT_TRUE(FreeWay::Find(storage_, sets_, 2, &set, &way));
  EXPECT_EQ(set, 0u);
  EXPECT_EQ(way, 1u);
  Put(0, 1, 101, 1);  // a tie (3 free each): the first set
  ASSERT_TRUE(FreeWay::Find(storage_, sets_, 2, &set, &way));
  EXPECT_EQ(set, 0u);
  EXPECT_EQ(way, 2u);
  Fill(0, 100, 1);
  Fill(1, 200, 1);
  EXPECT_FALSE(FreeWay::Find(storage_, sets_, 2, &set, &way));
}

TEST_F(RowCachePlacement, VictimIsTheLowestEstimateThenTheOldestAndNeverPinned) {
  Fill(0, 100, 50);
  Fill(1, 200, 50);
  // Every resident read 3 times but 201 and 204 (never), and 201 is older.
  for (uint64_t r : {100, 101, 102, 103, 104, 200, 202, 203}) Read(r, 3);
  const FrequencySketch& sketch = sketch_;
  storage_.View(1).set_stamp(1, 40);
  RowCacheConfig config;
  config.victim_order = VictimOrder::kLowestEstimateThenOldest;
  const VictimChoice by_estimate(config, 10);
  Victim v = by_estimate.Choose(storage_, sets_, 2, 60, sketch, hasher_);
  ASSERT_TRUE(v.found);
  EXPECT_EQ(v.row_id, 201u);
  EXPECT_EQ(v.age, 20u);
  EXPECT_TRUE(v.estimated);
  SetView s = storage_.View(1);
  s.set_pinned(1u << 1);  // 201 pinned: 204 is next
  v = by_estimate.Choose(storage_, sets_, 2, 60, sketch, hasher_);
  EXPECT_EQ(v.row_id, 204u);

  config.victim_order = VictimOrder::kOldest;
  storage_.View(0).set_stamp(3, 10);  // 103: the oldest unpinned
  v = VictimChoice(config, 10).Choose(storage_, sets_, 2, 60, sketch, hasher_);
  EXPECT_EQ(v.row_id, 103u);
  EXPECT_FALSE(v.estimated);

  s.set_pinned(0x1f);
  storage_.View(0).set_pinned(0x1f);
  EXPECT_FALSE(by_estimate.Choose(storage_, sets_, 2, 60, sketch, hasher_).found);
}

TEST_F(RowCachePlacement, StaleResidentIsTheVictimWhateverItsEstimateAndAlwaysLosesAdmission) {
  Fill(0, 100, 1000);
  Fill(1, 200, 1000);
  Put(1, 3, 203, 100);  // idle for 900 ticks; stale beyond 1 x 10 rows of capacity
  for (int i = 0; i < 50; ++i) Read(203, 1);
  RowCacheConfig config;
  config.stale_after = 1.0;
  const Victim v = VictimChoice(config, 10).Choose(storage_, sets_, 2, 1000, sketch_, hasher_);
  ASSERT_TRUE(v.found);
  EXPECT_EQ(v.row_id, 203u);
  EXPECT_TRUE(v.stale);
  const AdmissionCandidate first_seen{999, hasher_.Hash(999), 1000, GhostHistory::kNever};
  for (AdmissionRule rule : {AdmissionRule::kEstimateGreater, AdmissionRule::kReuseDistance}) {
    config.admission = rule;
    EXPECT_TRUE(Admits(AdmissionFor(config), first_seen, v, sketch_, hasher_)) << int(rule);
  }
}

TEST_F(RowCachePlacement, ReuseDistanceAdmitsOnlyRowsBackSoonerThanTheVictimHasBeenIdle) {
  RowCacheConfig config;
  config.admission = AdmissionRule::kReuseDistance;
  const Admission rule = AdmissionFor(config);
  Victim victim;
  victim.found = true;
  victim.age = 500;
  auto candidate = [&](uint64_t previous_access_age) {
    return AdmissionCandidate{42, hasher_.Hash(42), 1000, previous_access_age};
  };
  EXPECT_TRUE(Admits(rule, candidate(499), victim, sketch_, hasher_));
  EXPECT_FALSE(Admits(rule, candidate(500), victim, sketch_, hasher_));
  EXPECT_FALSE(Admits(rule, candidate(GhostHistory::kNever), victim, sketch_, hasher_));
}

TEST_F(RowCachePlacement, FrequencyAdmissionComparesEstimatesAtLeastOrGreater) {
  Read(42, 2);
  Read(7, 2);
  Victim victim;
  victim.found = true;
  victim.row_id = 7;  // not estimated by the victim order: admission reads it
  const AdmissionCandidate row{42, hasher_.Hash(42), 1000, GhostHistory::kNever};
  RowCacheConfig config;
  config.admission = AdmissionRule::kEstimateAtLeast;
  EXPECT_TRUE(Admits(AdmissionFor(config), row, victim, sketch_, hasher_));
  config.admission = AdmissionRule::kEstimateGreater;
  EXPECT_FALSE(Admits(AdmissionFor(config), row, victim, sketch_, hasher_));
  config.warm_admit_probability = 1.0;  // warm rows (estimate >= threshold) get in anyway
  config.warm_threshold = 2;
  EXPECT_TRUE(Admits(AdmissionFor(config), row, victim, sketch_, hasher_));
  Read(7, 3);  // the victim now outranks the row: only "always" admits it
  config.warm_admit_probability = 0.0;
  EXPECT_FALSE(Admits(AdmissionFor(config), row, victim, sketch_, hasher_));
  config.admission = AdmissionRule::kAlways;
  EXPECT_TRUE(Admits(AdmissionFor(config), row, victim, sketch_, hasher_));
}

}  // namespace
}  // namespace engram::cache
