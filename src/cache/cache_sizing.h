// Cache sizing: what a set-associative row cache of given dimensions charges
// to its memory budget, and how many sets a budget buys.
//
// Charged: the index (SetLayout::stride per set), the row slab, the
// frequency sketch (fixed, or two counters' worth per slot when
// sketch_bytes == 0), the ghost history (UsesGhostHistory rules only)
// and the statistics shards. RowCache::CapacityForBudget and BudgetForRows
// (row_cache.h) are defined here too.
#pragma once

#include <cstdint>

#include "src/cache/cache_config.h"

namespace engram::cache {

constexpr uint64_t kMaxSets = uint64_t{1} << 40;

// Bytes a cache of these dimensions charges to its budget (index, slab,
// sketch, counters), and the sketch size it uses.
struct CacheFootprint {
  uint64_t num_sets = 0;
  uint64_t index_bytes = 0;
  uint64_t slab_bytes = 0;
  uint64_t sketch_bytes = 0;
  uint64_t ghost_bytes = 0;  // ghost history (UsesGhostHistory rules only)
  uint64_t fixed_bytes = 0;  // statistics shards
  uint64_t total() const { return index_bytes + slab_bytes + sketch_bytes + ghost_bytes + fixed_bytes; }
};
CacheFootprint FootprintFor(const RowCacheConfig& config, uint64_t num_sets, uint32_t row_bytes);
// The most sets whose footprint fits budget_bytes (0 if not even one).
uint64_t SetsForBudget(const RowCacheConfig& config, uint64_t budget_bytes, uint32_t row_bytes);
// The fewest whole sets holding capacity_rows slots.
inline uint64_t SetsForCapacity(const RowCacheConfig& config, uint64_t capacity_rows) {
  return capacity_rows / config.ways + (capacity_rows % config.ways != 0);
}

}  // namespace engram::cache
