// RowCache factories: a SetAssociativeRowCache sized from a byte budget or a
// row count (the sizing itself is in cache_sizing.cc).
#include "src/cache/row_cache.h"

#include <algorithm>
#include <string>

#include "src/cache/cache_sizing.h"
#include "src/cache/set_associative_cache.h"

namespace engram {

Result<std::unique_ptr<RowCache>> RowCache::Create(const RowCacheConfig& config, uint64_t budget_bytes,
                                                   uint32_t row_bytes, uint64_t max_rows,
                                                   const CacheRegionAllocator& regions) {
  if (row_bytes == 0) {
    return Status::InvalidArgument(
        "row cache: a byte budget needs row_bytes > 0; for an index-only cache use CapacityForBudget with the real "
        "row size, then CreateWithCapacity(..., row_bytes = 0)");
  }
  ENGRAM_ASSIGN_OR_RETURN(uint64_t capacity, CapacityForBudget(config, budget_bytes, row_bytes, max_rows));
  ENGRAM_ASSIGN_OR_RETURN(auto cache,
                          cache::SetAssociativeRowCache::Make(config, capacity / config.ways, row_bytes, max_rows,
                                                              regions));
  return std::unique_ptr<RowCache>(std::move(cache));
}

Result<std::unique_ptr<RowCache>> RowCache::CreateWithCapacity(const RowCacheConfig& config, uint64_t capacity_rows,
                                                               uint32_t row_bytes, uint64_t max_rows) {
  ENGRAM_RETURN_IF_ERROR(config.Validate());
  if (capacity_rows == 0) return Status::InvalidArgument("row cache: capacity_rows must be at least 1");
  ENGRAM_ASSIGN_OR_RETURN(auto cache,
                          cache::SetAssociativeRowCache::Make(config, cache::SetsForCapacity(config, capacity_rows), row_bytes,
                                                                        max_rows));
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

void RowCache::InsertBatch(std::span<const uint64_t> row_ids, std::span<const std::byte* const> rows,
                           std::span<InsertOutcome> outcomes) {
  const size_t bytes = row_bytes();
  for (size_t i = 0; i < row_ids.size(); ++i) {
    const std::byte* row = rows.empty() ? nullptr : rows[i];
    outcomes[i] = Insert(row_ids[i], std::span<const std::byte>(row, row ? bytes : 0));
  }
}

}  // namespace engram
