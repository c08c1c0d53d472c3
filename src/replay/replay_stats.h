// What one policy did on one trace, per request.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engram/cache_stats.h"

namespace engram::replay {

struct RequestStats {
  uint64_t gathers = 0;
  // lookups..relocations: this request's share. resident_rows and
  // capacity_rows: the state at the end of the request.
  RowCacheStats cache;
};

struct PolicyRun {
  std::string policy;   // as named on the command line ("legacy", "belady", "ways=8,sets=2")
  std::string spec;     // canonical form (RowCacheConfig::ToSpec) or a description of a bound
  uint64_t requested_capacity_rows = 0;  // as asked; runs of one sweep point share it
  uint64_t capacity_rows = 0;            // actual (RowCache rounds up to whole sets)
  std::vector<RequestStats> requests;

  // Sums over requests; resident_rows from the last request.
  RequestStats Total() const;
};

// Turns cumulative counters, sampled at each request's end, into per-request
// deltas.
class RequestRecorder {
 public:
  void EndRequest(const RowCacheStats& cumulative, uint64_t gathers_in_request);
  std::vector<RequestStats> Take() { return std::move(requests_); }

 private:
  RowCacheStats last_;
  std::vector<RequestStats> requests_;
};

}  // namespace engram::replay
