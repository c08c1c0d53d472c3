// The fully associative bounds (full-lru, belady) against brute-force
// reference implementations written here, independently of src/replay/.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "src/replay/gather_trace.h"
#include "src/replay/reference_policies.h"
#include "src/replay/trace_files.h"
#include "src/replay/trace_index.h"

namespace engram::replay {
namespace {

struct Gather {
  std::vector<uint64_t> rows;  // distinct
};

// Brute force: residents in a vector, linear scans, the gather protocol
// spelled out (look up all, then insert every miss).
uint64_t BruteForceLruMisses(const std::vector<Gather>& gathers, size_t capacity) {
  std::vector<std::pair<uint64_t, uint64_t>> residents;  // (row, last touch)
  uint64_t clock = 0, misses = 0;
  for (const Gather& g : gathers) {
    std::vector<uint64_t> missed;
    for (uint64_t row : g.rows) {
      auto it = std::find_if(residents.begin(), residents.end(), [&](auto& r) { return r.first == row; });
      if (it != residents.end()) {
        it->second = ++clock;
      } else {
        ++misses;
        missed.push_back(row);
      }
    }
    for (uint64_t row : missed) {
      if (residents.size() == capacity) {
        auto oldest = std::min_element(residents.begin(), residents.end(),
                                       [](auto& a, auto& b) { return a.second < b.second; });
        residents.erase(oldest);
      }
      residents.emplace_back(row, ++clock);
    }
  }
  return misses;
}

// bypass: a missed row used no sooner than every resident is not admitted.
uint64_t BruteForceBeladyMisses(const std::vector<Gather>& gathers, size_t capacity, bool bypass = false) {
  std::vector<uint64_t> residents;
  uint64_t misses = 0;
  // When a row is next looked up after gather `g`: its position in the whole
  // lookup sequence (gather, then place within the gather).
  auto next_use = [&](size_t g, uint64_t row) -> size_t {
    size_t position = 0;
    for (size_t k = 0; k < gathers.size(); ++k) {
      for (uint64_t r : gathers[k].rows) {
        if (k > g && r == row) return position;
        ++position;
      }
    }
    return SIZE_MAX;
  };
  for (size_t g = 0; g < gathers.size(); ++g) {
    std::vector<uint64_t> missed;
    for (uint64_t row : gathers[g].rows) {
      if (std::count(residents.begin(), residents.end(), row) == 0) {
        ++misses;
        missed.push_back(row);
      }
    }
    for (uint64_t row : missed) {
      if (residents.size() == capacity) {
        size_t victim = 0, farthest = 0;
        for (size_t i = 0; i < residents.size(); ++i) {
          const size_t use = next_use(g, residents[i]);
          if (use >= farthest) farthest = use, victim = i;
        }
        if (bypass && next_use(g, row) >= farthest) continue;
        residents.erase(residents.begin() + victim);
      }
      residents.push_back(row);
    }
  }
  return misses;
}

std::vector<Gather> RandomGathers(std::mt19937_64& rng, size_t count, uint64_t universe, size_t max_size) {
  std::vector<Gather> gathers;
  for (size_t i = 0; i < count; ++i) {
    Gather g;
    const size_t n = 1 + rng() % max_size;
    while (g.rows.size() < std::min<size_t>(n, universe)) {
      // Skewed: half the draws come from a small hot set.
      uint64_t row = (rng() & 1) ? rng() % std::max<uint64_t>(1, universe / 8) : rng() % universe;
      row = row * 1000003 + 17;  // non-dense row IDs
      if (std::find(g.rows.begin(), g.rows.end(), row) == g.rows.end()) g.rows.push_back(row);
    }
    gathers.push_back(std::move(g));
  }
  return gathers;
}

GatherTrace ToTrace(const std::vector<Gather>& gathers, size_t requests) {
  GatherTrace t;
  for (size_t i = 0; i < gathers.size(); ++i) {
    t.AddGather(gathers[i].rows);
    if ((i + 1) * requests / gathers.size() != i * requests / gathers.size() || i + 1 == gathers.size())
      t.EndRequest(std::string("r").append(std::to_string(t.requests() + 1)));
  }
  return t;
}

// Calls check(gathers, trace, index, capacity) on 60 random skewed traces,
// each at five capacities from one row to the whole universe; stops at the
// first fatal failure.
template <typename Check>
void ForRandomTracesAndCapacities(uint64_t seed, Check check) {
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 60; ++round) {
    const uint64_t universe = 4 + rng() % 60;
    auto gathers = RandomGathers(rng, 20 + rng() % 80, universe, 1 + rng() % 10);
    const GatherTrace trace = ToTrace(gathers, 1 + rng() % 4);
    const TraceIndex index = TraceIndex::Build(trace);
    for (size_t capacity : {size_t(1), size_t(2), size_t(3), size_t(universe / 4 + 1), size_t(universe)}) {
      SCOPED_TRACE("round " + std::to_string(round) + " capacity " + std::to_string(capacity));
      check(gathers, trace, index, capacity);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(ReferencePoliciesTest, FullLruAndBeladyMatchBruteForceOnRandomGathers) {
  ForRandomTracesAndCapacities(7, [](const std::vector<Gather>& gathers, const GatherTrace& trace,
                                     const TraceIndex& index, size_t capacity) {
    const uint64_t lru_misses = SimulateFullLru(trace, index, capacity).Total().cache.misses;
    const uint64_t opt_misses = SimulateBelady(trace, index, capacity).Total().cache.misses;
    ASSERT_EQ(lru_misses, BruteForceLruMisses(gathers, capacity));
    ASSERT_EQ(opt_misses, BruteForceBeladyMisses(gathers, capacity));
    ASSERT_LE(opt_misses, lru_misses);
    ASSERT_GE(opt_misses, index.distinct_rows);
  });
}

TEST(ReferencePoliciesTest, BeladyWithBypassMatchesBruteForceAndNeverMissesMoreThanBelady) {
  ForRandomTracesAndCapacities(19, [](const std::vector<Gather>& gathers, const GatherTrace& trace,
                                      const TraceIndex& index, size_t capacity) {
    const RowCacheStats t = SimulateBeladyBypass(trace, index, capacity).Total().cache;
    ASSERT_EQ(t.misses, BruteForceBeladyMisses(gathers, capacity, /*bypass=*/true));
    ASSERT_LE(t.misses, SimulateBelady(trace, index, capacity).Total().cache.misses);
    ASSERT_EQ(t.misses, t.inserts + t.total_refusals());
  });
  // A row read every other lookup among rows read once: MIN must admit every
  // one-off row (and evict the recurring one); with bypass it keeps the row.
  std::vector<Gather> alternating;
  for (uint64_t i = 0; i < 1000; ++i) {
    alternating.push_back(Gather{{7}});
    alternating.push_back(Gather{{1000 + i}});
  }
  const GatherTrace trace = ToTrace(alternating, 1);
  const TraceIndex index = TraceIndex::Build(trace);
  EXPECT_EQ(SimulateBelady(trace, index, 1).Total().cache.misses, 2000u);
  EXPECT_EQ(SimulateBeladyBypass(trace, index, 1).Total().cache.misses, 1001u);
}

TEST(ReferencePoliciesTest, RowTraceFromFileMatchesBruteForce) {
  // `--rows` traces: one row per line, each line its own gather.
  std::mt19937_64 rng(11);
  std::vector<uint64_t> rows;
  for (int i = 0; i < 3000; ++i) rows.push_back((rng() & 3) ? rng() % 40 : 40 + rng() % 400);
  const std::string path = ::testing::TempDir() + "/reference-rows.txt";
  ASSERT_TRUE(WriteRowTrace(path, rows).ok());
  auto read = ReadRowTrace(path);
  std::remove(path.c_str());
  ASSERT_TRUE(read.ok());
  const GatherTrace trace = TraceFromRows(*read, "rows");
  const TraceIndex index = TraceIndex::Build(trace);
  std::vector<Gather> gathers;
  for (uint64_t r : rows) gathers.push_back(Gather{{r}});
  for (size_t capacity : {1, 16, 40, 100, 440}) {
    EXPECT_EQ(SimulateFullLru(trace, index, capacity).Total().cache.misses, BruteForceLruMisses(gathers, capacity));
    EXPECT_EQ(SimulateBelady(trace, index, capacity).Total().cache.misses, BruteForceBeladyMisses(gathers, capacity));
  }
}

TEST(ReferencePoliciesTest, CountersAreConsistentPerRequest) {
  std::mt19937_64 rng(3);
  auto gathers = RandomGathers(rng, 200, 100, 12);
  const GatherTrace trace = ToTrace(gathers, 3);
  const TraceIndex index = TraceIndex::Build(trace);
  for (const PolicyRun& run : {SimulateFullLru(trace, index, 20), SimulateBelady(trace, index, 20)}) {
    ASSERT_EQ(run.requests.size(), 3u);
    uint64_t gathers_seen = 0, inserts = 0, evictions = 0;
    for (const RequestStats& r : run.requests) {
      EXPECT_EQ(r.cache.hits + r.cache.misses, r.cache.lookups);
      EXPECT_EQ(r.cache.inserts, r.cache.misses);  // every miss admitted
      EXPECT_EQ(r.cache.total_refusals(), 0u);
      inserts += r.cache.inserts;
      evictions += r.cache.evictions;
      EXPECT_EQ(r.cache.resident_rows, inserts - evictions);
      EXPECT_EQ(r.cache.capacity_rows, 20u);
      EXPECT_LE(r.cache.resident_rows, 20u);
      gathers_seen += r.gathers;
    }
    EXPECT_EQ(gathers_seen, trace.gathers());
    EXPECT_EQ(run.Total().cache.lookups, trace.rows.size());
  }
}

TEST(ReferencePoliciesTest, EnoughCapacityLeavesOnlyCompulsoryMisses) {
  std::mt19937_64 rng(5);
  auto gathers = RandomGathers(rng, 100, 50, 8);
  const GatherTrace trace = ToTrace(gathers, 1);
  const TraceIndex index = TraceIndex::Build(trace);
  EXPECT_EQ(SimulateFullLru(trace, index, 1000).Total().cache.misses, index.distinct_rows);
  EXPECT_EQ(SimulateBelady(trace, index, index.distinct_rows).Total().cache.misses, index.distinct_rows);
  EXPECT_EQ(SimulateBelady(trace, index, 1000).Total().cache.evictions, 0u);
}

TEST(TraceIndexTest, NextUsePointsToTheNextLookupOfTheSameRow) {
  GatherTrace t;
  t.AddGather(std::vector<uint64_t>{10, 20});
  t.AddGather(std::vector<uint64_t>{20, 30});
  t.AddGather(std::vector<uint64_t>{10});
  t.EndRequest("r");
  const TraceIndex index = TraceIndex::Build(t);
  EXPECT_EQ(index.distinct_rows, 3u);
  EXPECT_EQ(index.dense, (std::vector<uint32_t>{0, 1, 1, 2, 0}));
  EXPECT_EQ(index.next_use, (std::vector<uint64_t>{4, 2, TraceIndex::kNever, TraceIndex::kNever, TraceIndex::kNever}));
}

}  // namespace
}  // namespace engram::replay
