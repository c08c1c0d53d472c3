#include "storage/io/io_stats.h"

#include <bit>
#include <chrono>

namespace engram::io {

uint64_t MonotonicNanos() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

int IoStats::BucketFor(uint64_t latency_ns) {
  if (latency_ns < 2) return 0;
  const int b = std::bit_width(latency_ns) - 1;  // floor(log2)
  return b < kLatencyBuckets ? b : kLatencyBuckets - 1;
}

void IoStats::RecordRead(StatusCode code, uint64_t bytes, uint64_t latency_ns) {
  reads_.fetch_add(1, std::memory_order_relaxed);
  if (code == StatusCode::kOk) {
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
  } else if (code == StatusCode::kCancelled) {
    cancelled_.fetch_add(1, std::memory_order_relaxed);
  } else {
    errors_.fetch_add(1, std::memory_order_relaxed);
  }
  latency_sum_ns_.fetch_add(latency_ns, std::memory_order_relaxed);
  buckets_[BucketFor(latency_ns)].fetch_add(1, std::memory_order_relaxed);
}

IoStatsSnapshot IoStats::Snapshot() const {
  IoStatsSnapshot s;
  s.reads = reads_.load(std::memory_order_relaxed);
  s.bytes = bytes_.load(std::memory_order_relaxed);
  s.errors = errors_.load(std::memory_order_relaxed);
  s.cancelled = cancelled_.load(std::memory_order_relaxed);
  s.retries = retries_.load(std::memory_order_relaxed);
  s.short_reads = short_reads_.load(std::memory_order_relaxed);
  s.latency_sum_ns = latency_sum_ns_.load(std::memory_order_relaxed);
  for (int i = 0; i < kLatencyBuckets; ++i) s.latency_log2_ns[i] = buckets_[i].load(std::memory_order_relaxed);
  return s;
}

uint64_t IoStatsSnapshot::BucketUpperBoundNs(int i) {
  return i >= 63 ? UINT64_MAX : (uint64_t{1} << (i + 1)) - 1;
}

uint64_t IoStatsSnapshot::LatencyQuantileUpperBoundNs(double q) const {
  uint64_t total = 0;
  for (uint64_t c : latency_log2_ns) total += c;
  if (total == 0) return 0;
  if (q < 0) q = 0;
  if (q > 1) q = 1;
  // The smallest bucket whose cumulative count reaches ceil(q * total).
  uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(total));
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (int i = 0; i < kLatencyBuckets; ++i) {
    seen += latency_log2_ns[i];
    if (seen >= rank) return BucketUpperBoundNs(i);
  }
  return BucketUpperBoundNs(kLatencyBuckets - 1);
}

std::string IoStatsSnapshot::ToString() const {
  return "reads=" + std::to_string(reads) + " bytes=" + std::to_string(bytes) +
         " errors=" + std::to_string(errors) + " cancelled=" + std::to_string(cancelled) +
         " retries=" + std::to_string(retries) + " short_reads=" + std::to_string(short_reads) +
         " p50<=" + std::to_string(LatencyQuantileUpperBoundNs(0.5)) + "ns" +
         " p99<=" + std::to_string(LatencyQuantileUpperBoundNs(0.99)) + "ns";
}

IoStatsSnapshot& IoStatsSnapshot::operator+=(const IoStatsSnapshot& other) {
  reads += other.reads;
  bytes += other.bytes;
  errors += other.errors;
  cancelled += other.cancelled;
  retries += other.retries;
  short_reads += other.short_reads;
  latency_sum_ns += other.latency_sum_ns;
  for (int i = 0; i < kLatencyBuckets; ++i) latency_log2_ns[i] += other.latency_log2_ns[i];
  return *this;
}

}  // namespace engram::io
