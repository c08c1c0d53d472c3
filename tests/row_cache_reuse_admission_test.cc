// Reuse-distance admission (AdmissionRule::kReuseDistance, the default's
// rule): a missed row replaces the victim only if its previous access is
// more recent than the victim's last access.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "src/cache/set_associative_cache.h"

namespace engram {
namespace {

using cache::SetAssociativeRowCache;

constexpr uint32_t kRowBytes = 16;

std::vector<std::byte> RowFor(uint64_t id) { return std::vector<std::byte>(kRowBytes, std::byte(id & 0xff)); }

// One set of 4 ways (so the victim is always in it) and a ghost history
// with one-tick epochs: every age is exact.
std::unique_ptr<SetAssociativeRowCache> MakeOneSet() {
  auto config = RowCacheConfig::FromSpec("default,ways=4,sets=1,relocate=0,ghost_epochs=1024,ghost_bits=8,stale=0");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  auto c = SetAssociativeRowCache::Make(*config, 1, kRowBytes);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(*c);
}

InsertOutcome Miss(SetAssociativeRowCache& c, uint64_t id) {
  std::vector<std::byte> buf(kRowBytes);
  EXPECT_FALSE(c.Lookup(id, buf)) << id;
  return c.Insert(id, RowFor(id));
}

void Hit(SetAssociativeRowCache& c, uint64_t id) {
  std::vector<std::byte> buf(kRowBytes);
  EXPECT_TRUE(c.Lookup(id, buf)) << id;
  EXPECT_EQ(buf, RowFor(id));
}

TEST(ReuseAdmission, FirstSeenRowIsRefusedByAFullSet) {
  auto c = MakeOneSet();
  for (uint64_t id = 1; id <= 4; ++id) EXPECT_EQ(Miss(*c, id), InsertOutcome::kInserted);
  EXPECT_EQ(Miss(*c, 100), InsertOutcome::kRefusedLostAdmission);
  EXPECT_EQ(c->Stats().refusals[int(RefusalReason::kLostAdmission)], 1u);
  for (uint64_t id = 1; id <= 4; ++id) Hit(*c, id);
}

// A first-seen row is refused whichever fresh victim it meets, so the cache
// decides without choosing one; these pin the two cases where it still must
// look: a stale resident (any row displaces it) and a set of pinned rows.
TEST(ReuseAdmission, FirstSeenRowDisplacesAStaleResident) {
  // stale=4: a resident idle for more than 4 cache-fulls (16 ticks) is stale.
  auto config = RowCacheConfig::FromSpec("default,ways=4,sets=1,relocate=0,ghost_epochs=1024,ghost_bits=8,stale=4");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto made = SetAssociativeRowCache::Make(*config, 1, kRowBytes);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  SetAssociativeRowCache& c = **made;
  for (uint64_t id = 1; id <= 4; ++id) EXPECT_EQ(Miss(c, id), InsertOutcome::kInserted);
  EXPECT_EQ(Miss(c, 100), InsertOutcome::kRefusedLostAdmission);  // every resident is fresh
  for (int round = 0; round < 4; ++round) {
    for (uint64_t id = 2; id <= 4; ++id) Hit(c, id);  // row 1 idles past the guard
  }
  EXPECT_EQ(Miss(c, 200), InsertOutcome::kInsertedEvicted);
  Hit(c, 200);
  EXPECT_FALSE(c.Contains(1));
}

TEST(ReuseAdmission, FirstSeenRowMeetingOnlyPinnedRowsIsRefusedAsAllPinned) {
  auto c = MakeOneSet();
  for (uint64_t id = 1; id <= 4; ++id) EXPECT_EQ(c->InsertPinned(id, RowFor(id)), InsertOutcome::kInserted);
  EXPECT_EQ(Miss(*c, 100), InsertOutcome::kRefusedAllPinned);
  EXPECT_EQ(c->Stats().refusals[int(RefusalReason::kAllPinned)], 1u);
}

TEST(ReuseAdmission, RowBackSoonerThanTheVictimIdlesIsAdmitted) {
  auto c = MakeOneSet();
  for (uint64_t id = 1; id <= 4; ++id) Miss(*c, id);
  for (uint64_t id = 2; id <= 4; ++id) Hit(*c, id);  // row 1 is now the idlest
  EXPECT_EQ(Miss(*c, 100), InsertOutcome::kRefusedLostAdmission);
  // Row 100 comes back 2 ticks after its first miss; row 1 has been idle for
  // longer: 100 replaces it.
  EXPECT_EQ(Miss(*c, 100), InsertOutcome::kInsertedEvicted);
  Hit(*c, 100);
  EXPECT_FALSE(c->Contains(1));
}

TEST(ReuseAdmission, RowBackLaterThanTheVictimIdlesIsRefused) {
  auto c = MakeOneSet();
  for (uint64_t id = 1; id <= 4; ++id) Miss(*c, id);
  EXPECT_EQ(Miss(*c, 100), InsertOutcome::kRefusedLostAdmission);
  // Every resident is used after row 100's miss: whichever is the victim was
  // touched more recently than row 100 was, so row 100 stays out.
  for (uint64_t id = 1; id <= 4; ++id) Hit(*c, id);
  EXPECT_EQ(Miss(*c, 100), InsertOutcome::kRefusedLostAdmission);
  for (uint64_t id = 1; id <= 4; ++id) EXPECT_TRUE(c->Contains(id));
}

TEST(ReuseAdmission, EvictedRowKeepsItsLastAccessInTheHistory) {
  auto c = MakeOneSet();
  for (uint64_t id = 1; id <= 4; ++id) Miss(*c, id);
  for (uint64_t id = 2; id <= 4; ++id) Hit(*c, id);
  Miss(*c, 100);
  ASSERT_EQ(Miss(*c, 100), InsertOutcome::kInsertedEvicted);  // evicts row 1
  ASSERT_FALSE(c->Contains(1));
  // Row 1's last access (its insert) is older than every resident's: it is
  // refused, not treated as first seen and not as just seen.
  for (uint64_t id : {2, 3, 4, 100}) Hit(*c, id);
  EXPECT_EQ(Miss(*c, 1), InsertOutcome::kRefusedLostAdmission);
  // Its miss just now was recorded; after the residents idle a while it
  // comes back sooner than the idlest of them and is admitted.
  for (int i = 0; i < 3; ++i) Hit(*c, 100);
  EXPECT_EQ(Miss(*c, 1), InsertOutcome::kInsertedEvicted);
}

TEST(ReuseAdmission, ReadAheadBypassesTheHistory) {
  auto c = MakeOneSet();
  for (uint64_t id = 1; id <= 4; ++id) Miss(*c, id);
  // A pinned (read-ahead) row is placed whatever the history says.
  EXPECT_EQ(c->InsertPinned(200, RowFor(200)), InsertOutcome::kInsertedEvicted);
  EXPECT_TRUE(c->IsPinned(200));
}

TEST(ReuseAdmission, HistoryIsChargedToTheBudget) {
  RowCacheConfig reuse = RowCacheConfig::Preset("default").value();
  RowCacheConfig gt = reuse;
  gt.admission = AdmissionRule::kEstimateGreater;
  const auto with = cache::FootprintFor(reuse, 100'000, 264);
  const auto without = cache::FootprintFor(gt, 100'000, 264);
  EXPECT_EQ(with.ghost_bytes, 1'000'000u);  // 2 B per slot (500,000 slots), whole 64-byte buckets
  EXPECT_EQ(without.ghost_bytes, 0u);
  EXPECT_EQ(with.total() - without.total(), with.ghost_bytes);
  const uint64_t budget = uint64_t{64} << 20;
  const uint64_t sets = cache::SetsForBudget(reuse, budget, 264);
  EXPECT_LE(cache::FootprintFor(reuse, sets, 264).total(), budget);
  EXPECT_GT(cache::FootprintFor(reuse, sets + 1, 264).total(), budget);
}

}  // namespace
}  // namespace engram
