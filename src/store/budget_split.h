// How one cache budget is divided among a store's tables.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engram/status.h"

namespace engram {

// explicit_bytes[i] > 0 reserves that much for table i; the rest of `total`
// is shared among the other tables in proportion to weights[i] (table
// sizes). Fails if the explicit reservations exceed the total, or if a table
// would get nothing.
Result<std::vector<uint64_t>> SplitCacheBudget(uint64_t total, std::span<const uint64_t> explicit_bytes,
                                               std::span<const uint64_t> weights);

}  // namespace engram
