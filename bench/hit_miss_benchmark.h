// Drivers behind `engram-bench hit` and `engram-bench miss`: what a gather
// costs through the public engram::Store API, next to what the hardware costs
// for the same work, measured in the same run.
//
//   hit:  gathers of N rows that are all resident in the row cache, against a
//         flat memcpy gather of the same row IDs from a flat array of the
//         table into the same destination layout.
//   miss: gathers of N rows, each from a block the store has never read, on a
//         fresh store (O_DIRECT, so neither the row cache nor the page cache
//         helps), against raw 4 KiB reads through the I/O engine and against
//         fio's io_uring with registered files and buffers and batched
//         submission, at the same depth on the same file.
//
// CPU time (getrusage RUSAGE_SELF, every thread of the process: the caller,
// the store's completion pool and the I/O engine's threads) is reported per
// row next to wall time, so the figures can be compared across machines.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engram/status.h"

namespace engram::bench {

// Bad input (a missing, unreadable or too-small table; a filesystem that
// refuses O_DIRECT when misses must reach the device) is reported by these
// checks before anything runs, so the CLI can tell it apart from a failure
// while measuring.
struct TableShape {
  uint64_t rows = 0;
  uint64_t blocks = 0;
  uint32_t record_bytes = 0;
  uint32_t rows_per_block = 0;
  uint64_t file_bytes = 0;
};
Result<TableShape> CheckBenchTable(const std::string& path);
// Unsupported when the file's filesystem refuses O_DIRECT: the store would
// fall back to buffered reads and "misses" would be page-cache copies.
Status CheckDirectIo(const std::string& path);

using ProgressLog = std::function<void(const std::string&)>;

struct HitBenchConfig {
  std::string file;
  std::vector<uint32_t> rows_per_gather{24, 4096};
  // Distinct rows made resident and cycled through, so both sides touch the
  // same spread of memory (a few MiB more than the last-level cache by
  // default) instead of the same 24 rows in L1.
  uint64_t resident_rows = 65536;
  uint64_t cache_bytes = 0;  // 0: sized from resident_rows with room to spare
  std::string cache_policy = "default";
  std::string io_backend = "auto";
  double seconds = 2;  // per side and per N, split over `rounds`
  uint32_t rounds = 15; // store and memcpy alternate this many times
  uint64_t seed = 1;
};

// The median of `values` (0 if empty).
double MedianOf(std::vector<double> values);

struct HitBenchPoint {
  uint32_t rows_per_gather = 0;
  uint64_t resident_rows = 0;
  uint64_t store_rows = 0, memcpy_rows = 0;
  double store_seconds = 0, memcpy_seconds = 0;
  double store_cpu_seconds = 0, memcpy_cpu_seconds = 0;
  // Store rows/s over memcpy rows/s of each round: the store's slice and the
  // memcpy slice right after it, so both see the same host conditions.
  std::vector<double> round_ratios;
  double store_rows_per_s() const { return store_seconds > 0 ? double(store_rows) / store_seconds : 0; }
  double memcpy_rows_per_s() const { return memcpy_seconds > 0 ? double(memcpy_rows) / memcpy_seconds : 0; }
  double store_ns_per_row() const { return store_rows ? store_seconds * 1e9 / double(store_rows) : 0; }
  double memcpy_ns_per_row() const { return memcpy_rows ? memcpy_seconds * 1e9 / double(memcpy_rows) : 0; }
  double store_cpu_ns_per_row() const { return store_rows ? store_cpu_seconds * 1e9 / double(store_rows) : 0; }
  double memcpy_cpu_ns_per_row() const { return memcpy_rows ? memcpy_cpu_seconds * 1e9 / double(memcpy_rows) : 0; }
  // Store rows/s over memcpy rows/s: 1.0 means a hit costs what a copy costs.
  // The median of the rounds' paired ratios: on a shared host the memory
  // latency both sides pay drifts from second to second, and pairing each
  // store slice with the memcpy slice after it cancels most of that drift.
  double hit_ratio() const;
  // The same over the whole run's totals (drift included).
  double total_ratio() const { return memcpy_rows_per_s() > 0 ? store_rows_per_s() / memcpy_rows_per_s() : 0; }
};

struct HitBenchReport {
  std::string io_description;
  uint64_t cache_bytes = 0;
  std::vector<HitBenchPoint> points;
};

Result<HitBenchReport> RunHitBenchmark(const HitBenchConfig& config, const ProgressLog& log = {});

struct MissBenchConfig {
  std::string file;
  std::vector<uint32_t> rows_per_gather{24, 4096};
  // The store's reads in flight (StoreOptions::queue_depth). A gather of N
  // rows from N blocks has min(N, queue_depth) reads in flight, and the raw
  // engine and fio are run at that depth.
  uint32_t queue_depth = 128;
  std::string io_backend = "io_uring";  // io_uring or pread (raw reads use the same)
  // io_uring rings of the store (StoreOptions::io_rings) and of the raw engine,
  // at most the depth; fio stays one job with one ring.
  uint32_t io_rings = 1;
  uint64_t cache_bytes = 64ull << 20;
  double seconds = 2;          // per measurement (store, raw, fio) and per N, split over `rounds`
  uint32_t rounds = 3;         // store, raw engine and fio alternate this many times per N
  // Gathers the store has in flight at once, each from its own thread (a
  // runtime gathering several layers at once); the raw engine and fio then
  // run at min(rows per gather x this, queue_depth). The latency gather is
  // always alone.
  uint32_t gathers_in_flight = 1;
  uint32_t latency_rows = 24;  // the all-miss gather whose latency is reported
  std::string fio = "fio";     // "" = do not run fio
  uint64_t seed = 1;
};

struct Percentiles {
  double p50_us = 0, p90_us = 0, p99_us = 0, p999_us = 0;
};

struct MissBenchPoint {
  uint32_t rows_per_gather = 0;
  uint32_t gathers_in_flight = 1;
  uint32_t depth = 0;
  uint64_t gathers = 0, rows = 0;
  uint32_t fresh_stores = 0;  // stores opened: one per pass over every block
  double store_seconds = 0, store_cpu_seconds = 0;
  double raw_iops = 0;
  // The raw engine's process CPU (its ring thread and io_uring workers) and
  // reads over the rounds: the same engine as the store's, without the store.
  double raw_cpu_seconds = 0;
  uint64_t raw_reads = 0;
  double fio_iops = 0;  // 0 when fio did not run (see fio_note)
  // fio's CPU (its whole process, start-up included) and reads over the rounds.
  double fio_cpu_seconds = 0;
  uint64_t fio_ios = 0;
  std::string fio_note;
  // fio reading batches of `depth`, each after the last finished (the shape
  // of one gather at a time); 0 unless one gather is in flight and its rows
  // fit the queue depth. fio waits for a whole batch in one io_uring_enter,
  // which can cost more than reaping each read as it lands: a reference for
  // the shape, not its bound.
  double fio_batch_iops = 0;
  // The raw engine reading batches of `depth` on this thread's ring, each
  // reaped read by read and waited for whole before the next (the shape of
  // one gather at a time, with no cache, verification or copy); the rate
  // counts only the time inside the batches. The bound of one gather at a
  // time on this device; 0 unless, as for fio's batches, one gather is in
  // flight and its rows fit the queue depth.
  double raw_batch_rows_per_s = 0;
  // Store rows/s over raw (fio) IOPS of each round: the store's slice and the
  // raw and fio slices right after it, so all three see the same host.
  std::vector<double> round_ratios_raw, round_ratios_fio, round_ratios_fio_batch, round_ratios_raw_batch;
  double store_rows_per_s() const { return store_seconds > 0 ? double(rows) / store_seconds : 0; }
  double store_ns_per_row() const { return rows ? store_seconds * 1e9 / double(rows) : 0; }
  double store_cpu_ns_per_row() const { return rows ? store_cpu_seconds * 1e9 / double(rows) : 0; }
  double raw_cpu_ns_per_read() const { return raw_reads ? raw_cpu_seconds * 1e9 / double(raw_reads) : 0; }
  double fio_cpu_ns_per_read() const { return fio_ios ? fio_cpu_seconds * 1e9 / double(fio_ios) : 0; }
  // The medians of the rounds' paired ratios (a shared host's I/O and CPU
  // capacity drifts between seconds; pairing cancels most of that drift).
  double miss_ratio_raw() const { return MedianOf(round_ratios_raw); }
  double miss_ratio_fio() const { return MedianOf(round_ratios_fio); }
  double miss_ratio_fio_batch() const { return MedianOf(round_ratios_fio_batch); }
  double miss_ratio_raw_batch() const { return MedianOf(round_ratios_raw_batch); }
  // The same over the whole run's totals (drift included); raw_iops and
  // fio_iops are the rounds' means.
  double total_ratio_raw() const { return raw_iops > 0 ? store_rows_per_s() / raw_iops : 0; }
  double total_ratio_fio() const { return fio_iops > 0 ? store_rows_per_s() / fio_iops : 0; }
};

struct MissLatency {
  uint32_t rows_per_gather = 0;
  uint64_t gathers = 0;
  Percentiles gather;            // one all-miss gather, start to Wait() return
  Percentiles raw_read;          // one 4 KiB read through the engine at QD 1
  // rows_per_gather 4 KiB reads of distinct random blocks handed to the
  // engine as one batch, until the last lands: what the device allows a
  // gather of that many misses, with no cache, verification or copy.
  Percentiles raw_batch;
  Percentiles fio_read;          // one 4 KiB read through fio at QD 1 (zeros if fio did not run)
  // (percentile, microseconds) for a latency CDF.
  std::vector<std::pair<double, double>> gather_cdf, fio_read_cdf;
  std::string fio_note;
};

struct MissBenchReport {
  std::string io_description;
  std::string fio_version;  // empty when fio did not run
  std::vector<MissBenchPoint> points;
  MissLatency latency;
};

Result<MissBenchReport> RunMissBenchmark(const MissBenchConfig& config, const ProgressLog& log = {});

}  // namespace engram::bench
