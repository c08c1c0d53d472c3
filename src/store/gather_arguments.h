// The checks every gather's arguments pass before anything is looked up:
// the same for a private store and a node client, so both refuse the same
// mistakes with the same message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "engram/status.h"
#include "engram/store.h"

namespace engram {

// What the checks need to know of the table (table_count: tables in the
// store; the rest describe table `table` when it exists).
struct GatherTarget {
  size_t table_count = 0;
  uint32_t record_bytes = 0;
  uint64_t row_count = 0;
  const std::string* name = nullptr;
};

// OK, or why a gather of row_ids from `table` into `dst` is refused.
Status CheckGatherArguments(const GatherTarget& target, size_t table, std::span<const uint64_t> row_ids,
                            const RowDestination& dst);

}  // namespace engram
