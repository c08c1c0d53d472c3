// The lookups a cache sees, grouped into gathers and requests.
//
// One gather = one prefill chunk (or one line of a row trace): its distinct
// row IDs are looked up once each, in first-occurrence order, then every miss
// is offered for insertion. Dedup happens here, once, so that every policy
// replays exactly the same lookup sequence.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engram/hasher.h"
#include "engram/status.h"
#include "src/replay/request_spec.h"

namespace engram::replay {

struct GatherTrace {
  std::vector<uint64_t> rows;          // deduplicated lookups, in replay order
  std::vector<uint64_t> gather_end;    // rows[gather_end[g-1] .. gather_end[g]) is gather g
  std::vector<uint64_t> request_end;   // gathers [request_end[r-1] .. request_end[r]) are request r
  std::vector<std::string> request_names;

  size_t gathers() const { return gather_end.size(); }
  size_t requests() const { return request_end.size(); }
  uint64_t gather_begin(size_t g) const { return g ? gather_end[g - 1] : 0; }
  uint64_t request_begin(size_t r) const { return r ? request_end[r - 1] : 0; }

  // Appends one gather: its distinct IDs in first-occurrence order.
  void AddGather(std::span<const uint64_t> row_ids);
  // Closes the current request (the gathers added since the last call).
  void EndRequest(std::string name);
};

// Hashes each request chunk by chunk (each chunk with the request's earlier
// tokens as history, so n-grams spanning chunks are exact) and adds one gather
// per chunk and one request per entry.
Result<GatherTrace> BuildTraceFromTokens(const NgramHasher& hasher, std::span<const std::vector<uint32_t>> requests,
                                         std::span<const SplitSpec> splits, std::span<const std::string> names);
// Reads the token files and builds the trace.
Result<GatherTrace> BuildTraceFromRequests(const NgramHasher& hasher, std::span<const RequestSpec> requests);
// A plain row trace: each row ID its own gather, all in one request.
GatherTrace TraceFromRows(std::span<const uint64_t> rows, std::string name);

}  // namespace engram::replay
