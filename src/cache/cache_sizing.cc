#include "src/cache/cache_sizing.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "src/cache/row_cache.h"
#include "src/cache/set_layout.h"
#include "src/cache/stat_shard.h"

namespace engram {
namespace cache {
namespace {

// Sketch of sketch_bytes == 0: one counter per slot in each sketch row.
uint64_t AutoSketchBytes(const RowCacheConfig& c, uint64_t capacity_rows) {
  uint64_t bits = capacity_rows * c.sketch_depth * c.counter_bits;
  uint64_t bytes = (bits + 7) / 8;
  return std::max<uint64_t>(64, (bytes + 63) & ~uint64_t{63});
}

// Ghost history: ghost_per_row bytes per slot, in whole 64-byte buckets.
uint64_t GhostBytes(const RowCacheConfig& c, uint64_t capacity_rows) {
  const uint64_t bytes = static_cast<uint64_t>(std::ceil(c.ghost_per_row * static_cast<double>(capacity_rows)));
  return std::max<uint64_t>(64, (bytes + 63) & ~uint64_t{63});
}

}  // namespace

CacheFootprint FootprintFor(const RowCacheConfig& config, uint64_t num_sets, uint32_t row_bytes) {
  SetLayout layout = SetLayout::For(config.ways);
  CacheFootprint f;
  f.num_sets = num_sets;
  f.index_bytes = num_sets * layout.stride;
  f.slab_bytes = num_sets * config.ways * uint64_t{row_bytes};
  f.sketch_bytes = config.sketch_bytes != 0 ? config.sketch_bytes : AutoSketchBytes(config, num_sets * config.ways);
  f.ghost_bytes = UsesGhostHistory(config.admission) ? GhostBytes(config, num_sets * config.ways) : 0;
  f.fixed_bytes = kStatShards * sizeof(StatShard);
  return f;
}

uint64_t SetsForBudget(const RowCacheConfig& config, uint64_t budget_bytes, uint32_t row_bytes) {
  SetLayout layout = SetLayout::For(config.ways);
  const bool auto_sketch = config.sketch_bytes == 0;
  uint64_t per_set = layout.stride + config.ways * uint64_t{row_bytes};
  uint64_t fixed = kStatShards * sizeof(StatShard);
  if (auto_sketch) {
    per_set += (uint64_t{config.ways} * config.sketch_depth * config.counter_bits + 7) / 8;
    fixed += 64;  // the sketch's rounding up to whole 64-byte lines
  } else {
    fixed += config.sketch_bytes;
  }
  if (UsesGhostHistory(config.admission)) {
    per_set += static_cast<uint64_t>(std::ceil(config.ghost_per_row * config.ways));
    fixed += 64;  // rounding up to whole buckets
  }
  if (budget_bytes <= fixed) return 0;
  uint64_t sets = std::min((budget_bytes - fixed) / per_set, kMaxSets);
  while (sets > 0 && FootprintFor(config, sets, row_bytes).total() > budget_bytes) --sets;
  // The estimate charges the sketch's and history's rounding to whole lines
  // up front, so it can fall a set short (a budget of exactly N sets'
  // footprint, as BudgetForRows gives, must give N sets).
  while (sets < kMaxSets && FootprintFor(config, sets + 1, row_bytes).total() <= budget_bytes) ++sets;
  return sets;
}

}  // namespace cache

namespace {

// Whole sets of a cache capped at max_rows: rounded up, so every row can have
// a slot (direct placement, set_hasher.h), and at least one set.
uint64_t SetsForRows(const RowCacheConfig& config, uint64_t max_rows) {
  return std::max<uint64_t>(1, cache::SetsForCapacity(config, max_rows));
}

}  // namespace

Result<uint64_t> RowCache::CapacityForBudget(const RowCacheConfig& config, uint64_t budget_bytes,
                                             uint32_t row_bytes, uint64_t max_rows) {
  ENGRAM_RETURN_IF_ERROR(config.Validate());
  uint64_t sets = cache::SetsForBudget(config, budget_bytes, row_bytes);
  if (sets == 0) {
    cache::CacheFootprint one = cache::FootprintFor(config, 1, row_bytes);
    return Status::InvalidArgument("row cache budget of " + std::to_string(budget_bytes) +
                                   " bytes is below the " + std::to_string(one.total()) + " bytes of one " +
                                   std::to_string(config.ways) + "-way set of " + std::to_string(row_bytes) +
                                   "-byte rows plus the sketch");
  }
  return std::min(sets, SetsForRows(config, max_rows)) * config.ways;
}

Result<uint64_t> RowCache::BudgetForRows(const RowCacheConfig& config, uint64_t max_rows, uint32_t row_bytes) {
  ENGRAM_RETURN_IF_ERROR(config.Validate());
  return cache::FootprintFor(config, SetsForRows(config, max_rows), row_bytes).total();
}

}  // namespace engram
