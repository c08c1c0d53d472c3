// FaultInjector: seeded, reproducible decisions about which I/O to break.
//
// Shared by FaultInjectionEngine (faults visible at the engine API: EIO,
// flipped bits, delayed and reordered completions) and by the backends it
// wraps (faults the backend must absorb: EAGAIN and short reads, which must be
// retried transparently, plus ring setup and buffer/file registration
// failures, which must fall back). Every injected fault is counted by kind so
// a stress test can compare the counters with what it observed.
//
// Decisions are a pure function of (seed, kind, file, offset, n) where n is
// how many times that (kind, file, offset) was asked before. So a seed
// reproduces the same faults for the same sequence of reads regardless of
// thread timing, except that concurrent reads of the same block may swap
// their outcomes.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "storage/io/io_engine.h"
#include "storage/mutex.h"

namespace engram::io {

enum class FaultKind : uint8_t {
  kEio,                  // the read fails with IOError
  kShortRead,            // the backend sees a partial transfer and must resubmit the rest
  kEagain,               // the backend sees -EAGAIN and must retry
  kBitFlip,              // one bit of the returned data is flipped (checksums must catch it)
  kDelay,                // the batch completion is delayed by FaultOptions::delay
  kReorder,              // the batch completion is held back so later batches overtake it
  kRingSetupFailure,     // io_uring setup fails (kAuto must fall back to pread)
  kRegistrationFailure,  // buffer/file registration fails with ENOMEM (plain reads must work)
  kCount,
};
inline constexpr int kFaultKindCount = static_cast<int>(FaultKind::kCount);
const char* FaultKindName(FaultKind kind);

struct FaultOptions {
  uint64_t seed = 1;
  // Per-read probabilities in [0, 1] (kDelay/kReorder: per batch).
  double eio_rate = 0;
  double short_read_rate = 0;
  double eagain_rate = 0;
  double bitflip_rate = 0;
  double delay_rate = 0;
  double reorder_rate = 0;
  std::chrono::microseconds delay{500};
  std::chrono::microseconds reorder_hold{2000};
  bool fail_ring_setup = false;
  bool fail_registration = false;
};

class FaultInjector {
 public:
  explicit FaultInjector(FaultOptions options) : options_(options) {}

  const FaultOptions& options() const { return options_; }

  // If a `kind` fault should hit this (file, offset) now, counts it and
  // returns 64 random bits to parameterize it (which bit to flip, how short).
  std::optional<uint64_t> Decide(FaultKind kind, FileId file, uint64_t offset);
  // Whole-engine faults; count when they fire.
  bool FailRingSetup();
  bool FailRegistration();

  uint64_t count(FaultKind kind) const {
    return counts_[static_cast<int>(kind)].load(std::memory_order_relaxed);
  }
  std::string CountsToString() const;

 private:
  double RateOf(FaultKind kind) const;
  void Count(FaultKind kind) { counts_[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed); }

  const FaultOptions options_;
  Mutex mu_;
  std::unordered_map<uint64_t, uint32_t> occurrences_ GUARDED_BY(mu_);  // key hash -> times asked
  std::array<std::atomic<uint64_t>, kFaultKindCount> counts_{};
};

}  // namespace engram::io
