// LogRateLimiter: keeps a repeated error from flooding the log.
//
// A corrupt table or a failing disk can fail every gather, thousands a
// second; one log line each buries everything else and costs more than the
// failure. The counters keep every event; the log needs only enough to tell
// an operator what happens and how often. So the first `burst` events of a
// kind are logged, then at most one per `interval`, and that line says how
// many were suppressed since the last one logged.
#pragma once

#include <chrono>
#include <cstdint>

#include "storage/mutex.h"

namespace engram {

class LogRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LogRateLimiter(uint32_t burst = 5, Clock::duration interval = std::chrono::seconds(10))
      : burst_(burst), interval_(interval) {}

  struct Decision {
    bool log = false;         // log this event
    uint64_t suppressed = 0;  // events not logged since the last logged one
  };

  // Called once per event; thread-safe (events are failures, not the hot path).
  Decision Admit(Clock::time_point now = Clock::now()) {
    MutexLock lock(&mu_);
    if (logged_ < burst_) {
      ++logged_;
      last_logged_ = now;
      return {true, 0};
    }
    if (now - last_logged_ >= interval_) {
      Decision d{true, suppressed_};
      suppressed_ = 0;
      last_logged_ = now;
      return d;
    }
    ++suppressed_;
    return {false, 0};
  }

 private:
  const uint32_t burst_;
  const Clock::duration interval_;
  Mutex mu_;
  uint32_t logged_ GUARDED_BY(mu_) = 0;
  uint64_t suppressed_ GUARDED_BY(mu_) = 0;
  Clock::time_point last_logged_ GUARDED_BY(mu_){};
};

}  // namespace engram
