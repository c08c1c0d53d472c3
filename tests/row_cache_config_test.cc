// RowCacheConfig: validation, presets and the spec string.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "engram/cache_policy.h"
#include "src/cache/cache_config.h"
#include "src/cache/row_cache.h"

namespace engram {
namespace {

RowCacheConfig Valid() { return RowCacheConfig::Preset("legacy").value(); }

void ExpectInvalid(const RowCacheConfig& c, const std::string& names) {
  Status s = c.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << names;
  EXPECT_NE(s.message().find(names), std::string::npos) << s.ToString();
}

TEST(RowCacheConfig, EveryPresetIsValid) {
  for (const char* name : {"legacy", "ways8", "ways16", "two-choice", "lru", "default"}) {
    auto c = RowCacheConfig::Preset(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().ToString();
    EXPECT_EQ(c->name, name);
    EXPECT_TRUE(c->Validate().ok()) << name << ": " << c->Validate().ToString();
  }
}

TEST(RowCacheConfig, LegacyPresetIsTheReportedCache) {
  RowCacheConfig c = Valid();
  EXPECT_EQ(c.ways, 4u);
  EXPECT_EQ(c.candidate_sets, 1u);
  EXPECT_EQ(c.relocation_depth, 0u);
  EXPECT_EQ(c.admission, AdmissionRule::kEstimateAtLeast);
  EXPECT_EQ(c.victim_order, VictimOrder::kLowestEstimateThenOldest);
  EXPECT_EQ(c.sketch_bytes, 1u << 20);
  EXPECT_EQ(c.sketch_depth, 4u);
  EXPECT_EQ(c.counter_bits, 8u);
  EXPECT_EQ(c.halving_period, 0u);
  EXPECT_EQ(c.warm_admit_probability, 0.0);
}

TEST(RowCacheConfig, PresetsDifferFromLegacyOnlyWhereNamed) {
  RowCacheConfig legacy = Valid();
  auto without_name = [](RowCacheConfig c) {
    c.name = "";
    return c;
  };
  RowCacheConfig two = RowCacheConfig::Preset("two-choice").value();
  EXPECT_EQ(two.candidate_sets, 2u);
  EXPECT_EQ(two.relocation_depth, 0u);
  two.candidate_sets = 1;
  EXPECT_EQ(without_name(two), without_name(legacy));

  RowCacheConfig lru = RowCacheConfig::Preset("lru").value();
  EXPECT_EQ(lru.admission, AdmissionRule::kAlways);
  EXPECT_EQ(lru.victim_order, VictimOrder::kOldest);

  EXPECT_EQ(RowCacheConfig::Preset("ways8")->ways, 8u);
  EXPECT_EQ(RowCacheConfig::Preset("ways16")->ways, 16u);
  RowCacheConfig def = RowCacheConfig::Preset("default").value();
  EXPECT_EQ(def.candidate_sets, 2u);
  EXPECT_GT(def.relocation_depth, 0u);
}

TEST(RowCacheConfig, UnknownPresetIsAnErrorListingTheKnownOnes) {
  auto c = RowCacheConfig::Preset("legacyy");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("two-choice"), std::string::npos);
}

TEST(RowCacheConfig, ValidateRejectsEachBadField) {
  RowCacheConfig c = Valid();
  c.ways = 0;
  ExpectInvalid(c, "ways=0");
  c.ways = 33;
  ExpectInvalid(c, "ways=33");
  c = Valid();
  c.candidate_sets = 3;
  ExpectInvalid(c, "sets=3");
  c = Valid();
  c.relocation_depth = 2;  // with one candidate set
  ExpectInvalid(c, "relocate=2");
  c.candidate_sets = 2;
  c.relocation_depth = 9;
  ExpectInvalid(c, "relocate=9");
  c = Valid();
  c.counter_bits = 16;
  ExpectInvalid(c, "counter_bits=16");
  c = Valid();
  c.counter_bits = 4;
  c.warm_threshold = 16;  // above a 4-bit counter's 15
  ExpectInvalid(c, "warm_threshold=16");
  c = Valid();
  c.sketch_depth = 0;
  ExpectInvalid(c, "sketch_depth=0");
  c.sketch_depth = 9;
  ExpectInvalid(c, "sketch_depth=9");
  c = Valid();
  c.sketch_bytes = 10;
  ExpectInvalid(c, "sketch_bytes=10");
  c = Valid();
  c.warm_admit_probability = 1.5;
  ExpectInvalid(c, "warm_p");
  c.warm_admit_probability = std::nan("");
  ExpectInvalid(c, "warm_p");
  c = Valid();
  c.admission = static_cast<AdmissionRule>(7);
  ExpectInvalid(c, "admission");
  c = Valid();
  c.victim_order = static_cast<VictimOrder>(7);
  ExpectInvalid(c, "victim");
}

TEST(RowCacheConfig, FactoriesRejectABadConfigInsteadOfCrashing) {
  RowCacheConfig c = Valid();
  c.ways = 0;
  EXPECT_FALSE(RowCache::CreateWithCapacity(c, 100, 8).ok());
  EXPECT_FALSE(RowCache::Create(c, 1 << 20, 8).ok());
  EXPECT_FALSE(RowCache::CapacityForBudget(c, 1 << 20, 8).ok());
  EXPECT_FALSE(RowCache::CreateWithCapacity(Valid(), 0, 8).ok());
  auto tiny = RowCache::Create(Valid(), 1000, 264);  // less than the 1 MiB sketch
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("budget"), std::string::npos);
  EXPECT_FALSE(RowCache::Create(Valid(), 1 << 30, 0).ok());  // byte budget needs a row size
}

TEST(RowCacheSpec, PresetNameAlone) {
  auto c = RowCacheConfig::FromSpec("two-choice");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, RowCacheConfig::Preset("two-choice").value());
}

TEST(RowCacheSpec, PresetWithOverridesBecomesCustom) {
  auto c = RowCacheConfig::FromSpec("two-choice, ways=8,relocate=3");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name, "custom");
  EXPECT_EQ(c->ways, 8u);
  EXPECT_EQ(c->candidate_sets, 2u);
  EXPECT_EQ(c->relocation_depth, 3u);
}

TEST(RowCacheSpec, OverridesThatChangeNothingKeepThePresetName) {
  auto c = RowCacheConfig::FromSpec("legacy,ways=4");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->name, "legacy");
}

TEST(RowCacheSpec, OverridesAloneApplyOnTopOfDefault) {
  auto c = RowCacheConfig::FromSpec("ways=8,admission=always,victim=oldest,sets=2,relocate=4,"
                                    "sketch_bytes=1048576,halving=0,seed=7");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  RowCacheConfig want = RowCacheConfig::Preset("default").value();
  want.name = "custom";
  want.ways = 8;
  want.admission = AdmissionRule::kAlways;
  want.victim_order = VictimOrder::kOldest;
  want.candidate_sets = 2;
  want.relocation_depth = 4;
  want.sketch_bytes = 1048576;
  want.halving_period = 0;
  want.seed = 7;
  EXPECT_EQ(*c, want);
}

TEST(CachePolicy, CanonicalFormIsWhatTheSpecParsesToAndABadSpecIsAnError) {
  for (const char* spec : {"default", "legacy", "two-choice,ways=8", "ways=8,admission=always"}) {
    auto canonical = CanonicalCachePolicy(spec);
    ASSERT_TRUE(canonical.ok()) << spec << ": " << canonical.status().ToString();
    EXPECT_EQ(*canonical, RowCacheConfig::FromSpec(spec)->ToSpec()) << spec;
    EXPECT_EQ(RowCacheConfig::FromSpec(*canonical).value(), RowCacheConfig::FromSpec(spec).value()) << spec;
  }
  EXPECT_EQ(CanonicalCachePolicy("legacy")->rfind("legacy,", 0), 0u);
  auto bad = CanonicalCachePolicy("ways=99");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().ToString().find("ways=99"), std::string::npos) << bad.status().ToString();
}

TEST(RowCacheSpec, RoundTripsEveryPresetAndACustomConfig) {
  for (const char* name : {"legacy", "ways8", "ways16", "two-choice", "lru", "default"}) {
    RowCacheConfig c = RowCacheConfig::Preset(name).value();
    auto back = RowCacheConfig::FromSpec(c.ToSpec());
    ASSERT_TRUE(back.ok()) << c.ToSpec() << ": " << back.status().ToString();
    EXPECT_EQ(*back, c) << c.ToSpec();
  }
  RowCacheConfig c = Valid();
  c.name = "custom";
  c.ways = 13;
  c.candidate_sets = 2;
  c.relocation_depth = 5;
  c.admission = AdmissionRule::kEstimateGreater;
  c.warm_admit_probability = 0.1;  // not exactly representable: shortest form must round-trip
  c.warm_threshold = 3;
  c.victim_order = VictimOrder::kOldest;
  c.sketch_bytes = 4096;
  c.sketch_depth = 2;
  c.counter_bits = 4;
  c.halving_period = 12345;
  c.stale_after = 0.3;  // not exactly representable either
  c.conservative_update = true;
  c.admission = AdmissionRule::kReuseDistance;
  c.ghost_per_row = 0.3;  // not exactly representable
  c.ghost_epoch_bits = 5;
  c.ghost_epochs = 7;
  c.seed = 0xfedcba9876543210ULL;
  auto back = RowCacheConfig::FromSpec(c.ToSpec());
  ASSERT_TRUE(back.ok()) << c.ToSpec() << ": " << back.status().ToString();
  EXPECT_EQ(*back, c) << c.ToSpec();
  EXPECT_EQ(back->ToSpec(), c.ToSpec());
}

TEST(RowCacheSpec, ErrorsNameTheOffendingItem) {
  struct Case {
    const char* spec;
    const char* mentions;
  } cases[] = {
      {"", "empty"},
      {"nosuch", "nosuch"},
      {"legacy,ways", "'ways'"},
      {"legacy,colour=red", "colour"},
      {"ways=abc", "ways='abc'"},
      {"ways=-1", "ways='-1'"},
      {"ways=99999999999", "ways="},
      {"admission=sometimes", "sometimes"},
      {"victim=random", "random"},
      {"warm_p=x", "warm_p='x'"},
      {"ways=40", "ways=40"},          // parses, fails validation
      {"legacy,relocate=2", "relocate=2"},  // relocation needs two sets
      {"stale=-1", "stale=-1"},
      {"stale=nan", "stale="},
      {"stale=2000", "stale=2000"},
      {"halving_x=-0.5", "halving_x="},
      {"halving_x=2,halving=100", "exclusive"},
      {"halving_x=1e-300", "halving_x="},  // would halve the sketch on every operation
      {"halving_x=0.001", "halving_x="},
      {"halving_x=1025", "halving_x="},
      {"halving=1", "halving=1"},
      {"halving=63", "halving=63"},
      {"update=sometimes", "sometimes"},
      {"sketch_layout=diagonal", "diagonal"},
      {"ghost_x=0", "ghost_x="},
      {"ghost_x=nan", "ghost_x="},
      {"ghost_x=-1", "ghost_x="},
      {"ghost_bits=1", "ghost_bits=1"},
      {"ghost_bits=9", "ghost_bits=9"},
      {"ghost_epochs=0", "ghost_epochs=0"},
      {"ghost_epochs=x", "ghost_epochs='x'"},
  };
  for (const Case& k : cases) {
    auto c = RowCacheConfig::FromSpec(k.spec);
    ASSERT_FALSE(c.ok()) << k.spec;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << k.spec;
    EXPECT_NE(c.status().message().find(k.mentions), std::string::npos)
        << k.spec << " -> " << c.status().ToString();
  }
}

TEST(RowCacheSpec, DefaultPolicyKnobsParseAndRoundTrip) {
  auto c = RowCacheConfig::FromSpec("two-choice,stale=2.5,halving_x=10,update=conservative");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->stale_after, 2.5);
  EXPECT_EQ(c->halving_per_capacity, 10.0);
  EXPECT_TRUE(c->conservative_update);
  EXPECT_EQ(c->name, "custom");
  auto back = RowCacheConfig::FromSpec(c->ToSpec());
  ASSERT_TRUE(back.ok()) << c->ToSpec();
  EXPECT_EQ(back->ToSpec(), c->ToSpec());
  EXPECT_NE(c->ToSpec().find("stale=2.5"), std::string::npos) << c->ToSpec();
}

TEST(RowCacheConfig, DefaultPresetIsTheReuseDistancePolicy) {
  RowCacheConfig d = RowCacheConfig::Preset("default").value();
  EXPECT_EQ(d.candidate_sets, 2u);
  EXPECT_EQ(d.relocation_depth, 2u);
  EXPECT_EQ(d.admission, AdmissionRule::kReuseDistance);
  EXPECT_EQ(d.ghost_per_row, 2.0);  // 2 B of history per cached row (one 16-bit entry)
  EXPECT_EQ(d.ghost_epoch_bits, 3u);
  EXPECT_EQ(d.ghost_epochs, 3u);
  EXPECT_EQ(d.victim_order, VictimOrder::kLowestEstimateThenOldest);
  EXPECT_EQ(d.ways, 5u);  // one 64-byte line per set
  EXPECT_EQ(d.sketch_depth, 2u);
  EXPECT_EQ(d.counter_bits, 4u);  // two 4-bit counters: 1 B of sketch per cached row
  EXPECT_EQ(d.sketch_bytes, 0u);  // sized from the capacity
  EXPECT_EQ(d.stale_after, 16.0);
  EXPECT_EQ(d.halving_period, 0u);
  EXPECT_EQ(d.halving_per_capacity, 4.0);
  EXPECT_TRUE(d.conservative_update);
}

TEST(RowCacheSpec, RefusalReasonNames) {
  EXPECT_STREQ(RefusalReasonName(RefusalReason::kLostAdmission), "lost_admission");
  EXPECT_STREQ(RefusalReasonName(RefusalReason::kAllPinned), "all_pinned");
}

}  // namespace
}  // namespace engram
