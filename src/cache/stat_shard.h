// StatShard: one thread's share of a row cache's statistics.
//
// Statistics are sharded by thread: a relaxed add to a line other threads
// rarely touch, summed by Stats(). Quiescent sums are exact.
#pragma once

#include <atomic>
#include <cstdint>

#include "engram/cache_stats.h"

namespace engram::cache {

struct alignas(64) StatShard {
  std::atomic<uint64_t> hits{0}, misses{0}, inserts{0}, evictions{0}, relocations{0};
  std::atomic<uint64_t> refusals[static_cast<int>(RefusalReason::kCount)] = {};
  std::atomic<uint64_t> pinned_inserts{0}, pinned_refusals{0};
  std::atomic<int64_t> pinned_delta{0}, resident_delta{0};
  std::atomic<uint64_t> unlocked_hits{0};  // not in RowCacheStats: for tests
};
constexpr int kStatShards = 16;

}  // namespace engram::cache
