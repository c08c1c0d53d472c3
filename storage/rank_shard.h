// Rank tables: a layer's table split over tensor-parallel ranks by slot
// (FORMAT.md "Rank tables and manifests").
//
// A layer's hash layout has orders.size() * heads slots (24 for V4.1),
// slot = order index * heads + head; slot s owns the full table's rows
// [offsets[o][h], offsets[o][h] + primes[o][h]). A rank table holds the rows
// of some slots, packed in ascending slot order, and says which in its
// metadata member "rank_shard":
//
//   {"ranks": R, "rank": r, "slots": [...], "assignment": "strided",
//    "manifest_id": "0x...", "source_rows": N}
//
// beside the full layer's "hash_layout" (checked against source_rows, the
// unsharded table's rows, not against the rank table's own row count).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engram/hasher.h"
#include "engram/status.h"

namespace engram {

// The most ranks a layer is split over: one slot per rank for V4.1.
inline constexpr uint32_t kMaxRanks = 24;
inline constexpr char kStridedAssignment[] = "strided";

// The slots rank `rank` of `ranks` holds under the strided assignment: s
// with s % ranks == rank, ascending. Every order's heads are spread over the
// ranks, so each rank gets a like share of the hot low-order rows. The one
// definition of the rule; callers check 1 <= ranks <= slot_count and
// rank < ranks first (otherwise the list is empty).
inline std::vector<uint32_t> StridedSlots(uint32_t slot_count, uint32_t ranks, uint32_t rank) {
  std::vector<uint32_t> slots;
  if (ranks == 0 || rank >= ranks) return slots;
  for (uint32_t s = rank; s < slot_count; s += ranks) slots.push_back(s);
  return slots;
}

// A slot's rows in the unsharded table.
struct SlotRows {
  uint32_t slot = 0;
  uint64_t first_row = 0;
  uint64_t rows = 0;  // the slot's prime
};

// The full-table row ranges of `slots` (each < layout.rows_per_token()), in
// the order given: a rank table's rows are these ranges concatenated.
std::vector<SlotRows> SlotRowRanges(const EngramHashLayout& layout, const std::vector<uint32_t>& slots);

struct RankShard {
  uint32_t ranks = 0;
  uint32_t rank = 0;
  std::vector<uint32_t> slots;  // ascending
  uint64_t manifest_id = 0;
  uint64_t source_rows = 0;  // rows of the unsharded table
};

// The metadata member "rank_shard" for `shard`.
nlohmann::json RankShardJson(const RankShard& shard);

// Parses a table's "rank_shard" member and checks it against the table's
// embedded "hash_layout" (required: a rank table names its rows by the full
// layer's layout) and its row count: ranks in 1..min(kMaxRanks, slot count),
// rank < ranks, assignment "strided", slots exactly StridedSlots(...),
// hash_layout valid for source_rows, and row_count the sum of the slots'
// primes. InvalidArgument names the field.
Result<RankShard> ParseRankShard(const nlohmann::json& shard, const nlohmann::json* hash_layout, uint64_t row_count);

}  // namespace engram
