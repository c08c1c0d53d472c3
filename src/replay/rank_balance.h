// How evenly tensor-parallel ranks share the disk reads of a workload.
//
// Each rank of R holds some of a layer's slots (order index * heads + head)
// and hashes, caches and reads only those: its own rank table with its own
// cache. Per rank and layer this replays the rank's lookups (the requests
// hashed with a rank hasher, NgramHasher::Create(layout, map, slots))
// through the same src/cache code the store uses, with a cache of the
// unsharded run's capacity times the rank's share of the layer's rows, so
// the ranks together hold as many rows as the one unsharded cache. The
// missed rows are the rank's disk reads; max/mean over the ranks is the
// imbalance a step waits for (the slowest rank sets the pace).
//
// Two assignments: strided (slot s to rank s % R, what engram-convert
// --ranks writes) and contiguous (rank r holds a block of consecutive slots,
// i.e. consecutive heads of the same order).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engram/status.h"
#include "src/replay/request_spec.h"

namespace engram::replay {

enum class SlotAssignment { kStrided, kContiguous };
const char* SlotAssignmentName(SlotAssignment a);  // "strided", "contiguous"

// The slots rank `rank` of `ranks` holds. Contiguous: blocks in slot order,
// the first slot_count % ranks ranks one slot larger (as the strided sizes).
Result<std::vector<uint32_t>> AssignedSlots(SlotAssignment assignment, uint32_t slot_count, uint32_t ranks,
                                            uint32_t rank);

struct RankBalanceOptions {
  std::string layout_path;
  std::vector<uint32_t> layers{0, 1};  // layer indexes in the layout; a rank holds the same slots of each
  uint64_t rows_per_table = 0;         // 0 = the layout's own primes; else scaled to this (ScaleLayout), as the demo
  std::string token_map_path;          // "" = raw token IDs
  std::vector<RequestSpec> requests;
  std::vector<uint32_t> rank_counts{2, 4};
  std::string policy = "default";
  // The unsharded cache of a layer holds distinct rows / pressure rows (the
  // report's matched capacity: its five requests filled 78 % of its cache),
  // or capacity_rows when given.
  double pressure = 0.78;
  std::optional<uint64_t> capacity_rows;
};

struct RankMisses {
  uint32_t rank = 0;
  std::vector<uint32_t> slots;
  uint64_t table_rows = 0;     // summed over layers: the rank's rows on disk
  uint64_t capacity_rows = 0;  // summed over layers: the rank's cache
  uint64_t lookups = 0;
  uint64_t misses = 0;  // missed rows = rows read from disk
};

struct RankSplit {
  uint32_t ranks = 1;
  SlotAssignment assignment = SlotAssignment::kStrided;
  std::vector<RankMisses> per_rank;

  uint64_t total_misses() const;
  double max_over_mean() const;  // 1.0 = perfectly even
};

struct RankBalanceReport {
  std::string policy;
  size_t requests = 0;
  std::vector<uint32_t> layers;
  std::vector<uint64_t> unsharded_capacity_rows;  // per layer
  RankSplit unsharded;                            // one rank holding every slot
  std::vector<RankSplit> splits;                  // per rank count: strided, then contiguous
};

Result<RankBalanceReport> RunRankBalance(const RankBalanceOptions& options);

// A readable table: one line per split with every rank's missed rows and max/mean.
std::string FormatRankBalanceTable(const RankBalanceReport& report);
// One JSON object per (split, rank): ranks, assignment, rank, slots,
// table_rows, capacity_rows, lookups, misses, max_over_mean (of its split).
std::string FormatRankBalanceJsonLines(const RankBalanceReport& report);

}  // namespace engram::replay
