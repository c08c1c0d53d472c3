// RowCache factories: size a SetAssociativeRowCache from a byte budget or a
// row count.
#include "src/cache/row_cache.h"

#include <algorithm>
#include <string>

#include "src/cache/set_associative_cache.h"

namespace engram {

namespace {

// Whole sets of a cache capped at max_rows: rounded down, so the slots never
// outnumber the rows, but at least one set.
uint64_t SetsForRows(const RowCacheConfig& config, uint64_t max_rows) {
  return std::max<uint64_t>(1, max_rows / config.ways);
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

Result<std::unique_ptr<RowCache>> RowCache::Create(const RowCacheConfig& config, uint64_t budget_bytes,
                                                   uint32_t row_bytes, uint64_t max_rows) {
  if (row_bytes == 0) {
    return Status::InvalidArgument(
        "row cache: a byte budget needs row_bytes > 0; for an index-only cache use CapacityForBudget with the real "
        "row size, then CreateWithCapacity(..., row_bytes = 0)");
  }
  ENGRAM_ASSIGN_OR_RETURN(uint64_t capacity, CapacityForBudget(config, budget_bytes, row_bytes, max_rows));
  ENGRAM_ASSIGN_OR_RETURN(auto cache, cache::SetAssociativeRowCache::Make(config, capacity / config.ways, row_bytes));
  return std::unique_ptr<RowCache>(std::move(cache));
}

Result<std::unique_ptr<RowCache>> RowCache::CreateWithCapacity(const RowCacheConfig& config, uint64_t capacity_rows,
                                                               uint32_t row_bytes) {
  ENGRAM_RETURN_IF_ERROR(config.Validate());
  if (capacity_rows == 0) return Status::InvalidArgument("row cache: capacity_rows must be at least 1");
  uint64_t sets = capacity_rows / config.ways + (capacity_rows % config.ways != 0);
  ENGRAM_ASSIGN_OR_RETURN(auto cache, cache::SetAssociativeRowCache::Make(config, sets, row_bytes));
  return std::unique_ptr<RowCache>(std::move(cache));
}

size_t RowCache::LookupBatch(std::span<const uint64_t> row_ids, std::span<std::byte* const> dsts, PinAction pin,
                             std::span<uint8_t> hit) {
  const size_t bytes = row_bytes();
  size_t hits = 0;
  for (size_t i = 0; i < row_ids.size(); ++i) {
    hit[i] = Lookup(row_ids[i], std::span<std::byte>(dsts[i], dsts[i] ? bytes : 0), pin) ? 1 : 0;
    hits += hit[i];
  }
  return hits;
}

}  // namespace engram
