// Observations: what the stress threads see, summed into the run's report.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace engram::stress {

// Everything the worker threads observe; summed into the report.
struct Observations {
  std::atomic<uint64_t> gathers{0}, ok_gathers{0}, failed_gathers{0};
  std::atomic<uint64_t> failed_io{0}, failed_checksum{0}, failed_unexpected{0};
  std::atomic<uint64_t> bad_id_gathers{0}, bad_id_accepted{0}, bad_id_wrong_code{0};
  std::atomic<uint64_t> overlapped_gathers{0};
  std::atomic<uint64_t> rows_requested{0}, rows_verified{0}, wrong_rows{0}, canary_violations{0};
  std::atomic<uint64_t> result_inconsistencies{0};
  std::atomic<uint64_t> hits{0}, misses{0};
  std::atomic<uint64_t> read_aheads{0}, read_ahead_rows{0}, read_ahead_errors{0}, releases{0};
  std::atomic<uint64_t> sweep_rows{0}, sweep_retries{0}, sweep_unservable{0};
  std::atomic<uint64_t> racing_read_aheads{0}, racing_gathers{0};
  std::string first_problem;  // guarded by mu
  std::mutex mu;

  // Rows one thread read ahead and another gathers next, with no wait for
  // the read-ahead to land (guarded by race_mu).
  std::mutex race_mu;
  std::deque<std::vector<uint64_t>> racing;

  void Problem(const std::string& what) {
    std::lock_guard lock(mu);
    if (first_problem.empty()) first_problem = what;
  }
};

void Inc(std::atomic<uint64_t>& a, uint64_t v = 1) { a.fetch_add(v, std::memory_order_relaxed); }
uint64_t Get(const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); }

}  // namespace engram::stress
