// How one cache budget is divided among a store's tables, and how large that
// budget is when it is given relative to the host's available memory.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "engram/status.h"

namespace engram {

inline constexpr uint64_t kNoBudgetCap = std::numeric_limits<uint64_t>::max();

// explicit_bytes[i] > 0 reserves that much for table i; the rest of `total`
// is shared among the other tables in proportion to weights[i] (table
// sizes). caps[i] is the most table i can use (a cache of all its rows; empty
// span or kNoBudgetCap = no limit): no table gets more than its cap, and
// what a capped table (shared or reserved) cannot use is shared among the
// uncapped ones, again by weight. Fails if the explicit reservations exceed
// the total, or if a table would get nothing.
Result<std::vector<uint64_t>> SplitCacheBudget(uint64_t total, std::span<const uint64_t> explicit_bytes,
                                               std::span<const uint64_t> weights,
                                               std::span<const uint64_t> caps = {});

// MemAvailable from the text of /proc/meminfo, in bytes.
Result<uint64_t> ParseMemAvailable(std::string_view meminfo);
// MemAvailable of this host now (reads /proc/meminfo).
Result<uint64_t> ReadMemAvailable();

// The store's cache budget (StoreOptions): cache_bytes if memory_fraction is
// 0, else the smaller of cache_bytes and memory_fraction x mem_available.
// memory_fraction must be in [0, 1].
Result<uint64_t> EffectiveCacheBudget(uint64_t cache_bytes, double memory_fraction, uint64_t mem_available);

}  // namespace engram
