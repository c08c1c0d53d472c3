// IoStats: per-engine counters and a log2 latency histogram.
//
// Every engine owns one IoStats and records each finished read in it. The
// histogram uses power-of-two nanosecond buckets so an exporter can turn it
// into a Prometheus histogram (le = 2^(i+1) ns) without re-bucketing, and so
// recording is one relaxed atomic increment (no lock on the I/O path).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "engram/status.h"

namespace engram::io {

// Bucket i counts reads whose latency was in [2^i, 2^(i+1)) ns; bucket 0 also
// holds 0 ns. 2^48 ns is about 78 hours, more than any read takes.
inline constexpr int kLatencyBuckets = 48;

struct IoStatsSnapshot {
  uint64_t reads = 0;          // reads finished (any outcome)
  uint64_t bytes = 0;          // bytes delivered by successful reads
  uint64_t errors = 0;         // reads that finished with an error other than kCancelled
  uint64_t cancelled = 0;      // reads that finished with kCancelled (shutdown)
  uint64_t retries = 0;        // resubmissions after EAGAIN / EINTR
  uint64_t short_reads = 0;    // partial transfers whose remainder was resubmitted
  uint64_t latency_sum_ns = 0;
  std::array<uint64_t, kLatencyBuckets> latency_log2_ns{};

  // Adds another engine's counts (an engine made of several, e.g. rings).
  IoStatsSnapshot& operator+=(const IoStatsSnapshot& other);
  // Upper bound (in ns) of the bucket holding quantile q in [0,1]; 0 if no reads.
  uint64_t LatencyQuantileUpperBoundNs(double q) const;
  // Inclusive upper bound of bucket i in ns: 2^(i+1) - 1.
  static uint64_t BucketUpperBoundNs(int i);
  std::string ToString() const;
};

class IoStats {
 public:
  static int BucketFor(uint64_t latency_ns);

  // One finished read: `bytes` counts only when the status is OK.
  void RecordRead(StatusCode code, uint64_t bytes, uint64_t latency_ns);
  void RecordRetry() { retries_.fetch_add(1, std::memory_order_relaxed); }
  void RecordShortRead() { short_reads_.fetch_add(1, std::memory_order_relaxed); }
  IoStatsSnapshot Snapshot() const;

 private:
  std::atomic<uint64_t> reads_{0}, bytes_{0}, errors_{0}, cancelled_{0}, retries_{0}, short_reads_{0};
  std::atomic<uint64_t> latency_sum_ns_{0};
  std::array<std::atomic<uint64_t>, kLatencyBuckets> buckets_{};
};

// Monotonic clock in nanoseconds, the time base of every latency above.
uint64_t MonotonicNanos();

}  // namespace engram::io
