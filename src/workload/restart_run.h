// The warm-start measurement (`engram-bench restart`): what a restart costs
// a store serving the report's workload, cold and warm (StoreOptions::
// hot_set_path).
//
//   1. A store with a hot set runs the workload twice. The second pass is the
//      reference ("before"): the hit rate, gather by gather, of a store that
//      was not restarted. Closing the store saves its hot set.
//   2. Cold: a fresh store (page cache dropped), no hot set, runs the pass.
//   3. Warm: a fresh store (page cache dropped) warming from the saved hot
//      set runs the pass at once, beside the warm-up (Open never waits).
//   4. Warm, waited: the same, but the first gather waits for the warm-up
//      (Store::WaitForWarmUp), whose time counts.
// Each run after the restart is compared with the reference on the same
// gathers: the hit rate of the first `first_gathers`, and the first gather
// at which the hit rate over the last `window` gathers reaches `reach` x
// the reference's over the same gathers (in gathers and in seconds since
// the store was opened).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engram/status.h"
#include "src/workload/report_workload.h"

namespace engram {

struct RestartRunOptions {
  std::string policy = "default";
  uint64_t budget_per_table = 0;
  std::string io_backend = "auto";
  std::string hot_set_path;  // required; a copy is kept beside it as PATH.saved
  size_t first_gathers = 1000;
  size_t window = 50;
  double reach = 0.95;
  bool drop_page_cache = true;
  // Milliseconds the runtime computes between gathers after the restart (a
  // forward step): the device idles then, as it mostly does in serving, and
  // a warm-up that yields to gathers reads. 0 = gathers back to back, the
  // warm-up's worst case.
  double compute_ms = 0;
};

struct RestartCurve {
  std::string name;
  std::vector<uint64_t> hits, lookups;  // per gather, summed over tables
  std::vector<double> seconds;          // per gather: since the store was opened, at its end
  double warm_up_seconds = 0;           // the wait for the warm-up (warm, waited)
  uint64_t warm_rows = 0, warm_skipped_rows = 0;

  double HitRate(size_t begin, size_t end) const;
};

struct RestartReport {
  RestartCurve before;
  std::vector<RestartCurve> after;  // cold, warm, warm (waited)
  size_t first_gathers = 0, window = 0;
  double reach = 0;

  // The first gather (1-based count) at which `c`'s windowed hit rate
  // reaches reach x the reference's; 0 if it never does.
  size_t GathersToReach(const RestartCurve& c) const;
  std::string Format() const;
};

Result<RestartReport> RunRestart(const ReportWorkload& workload, const RestartRunOptions& options);

}  // namespace engram
