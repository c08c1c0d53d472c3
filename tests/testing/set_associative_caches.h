// Row cache test helpers: a SetAssociativeRowCache from a spec, and the
// comparison of two caches' statistics (for tests that run the same
// operations through two code paths that must agree).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "src/cache/row_cache.h"
#include "src/cache/set_associative_cache.h"

namespace engram::testing {

inline std::unique_ptr<cache::SetAssociativeRowCache> MakeSetAssociativeCache(const char* spec, uint64_t sets,
                                                                              uint32_t row_bytes) {
  auto config = RowCacheConfig::FromSpec(spec);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  auto made = cache::SetAssociativeRowCache::Make(*config, sets, row_bytes);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return std::move(made).value();
}

inline void ExpectSameCacheStats(const RowCacheStats& a, const RowCacheStats& b) {
  EXPECT_EQ(a.lookups, b.lookups);
  EXPECT_EQ(a.hits, b.hits);
  EXPECT_EQ(a.misses, b.misses);
  EXPECT_EQ(a.inserts, b.inserts);
  EXPECT_EQ(a.evictions, b.evictions);
  EXPECT_EQ(a.relocations, b.relocations);
  EXPECT_EQ(a.total_refusals(), b.total_refusals());
  EXPECT_EQ(a.resident_rows, b.resident_rows);
  EXPECT_EQ(a.pinned_rows, b.pinned_rows);
}

}  // namespace engram::testing
