// Driver behind `engram-bench inplace`: an in-place (reference) table against
// the table converted from the same safetensors shards, measured in the same
// run on the same device.
//
// It writes `shards` V4.1-shaped shards (F8_E4M3 weight [rows, 256] and
// F8_E8M0 scale [rows, 8], random bytes, a BF16 tensor between them, an
// unaligned JSON header) into a directory, converts them both ways, then
// measures per table kind:
//   - the time and bytes of the conversion (the in-place one only reads);
//   - the open time of a store (the reference loads its checksums and, with
//     scales held in memory, reads every scale);
//   - the miss path: gathers of random rows on a store whose cache is far
//     smaller than the table, so nearly every row is a miss; rows/s, reads
//     per miss and read amplification (bytes read / record bytes).
// In-place is measured with its scales held in memory and with them read
// with each row; the three kinds take turns in ~20 ms slices so a busy host
// slows them alike. Ratios are in-place over converted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/hit_miss_benchmark.h"
#include "engram/status.h"

namespace engram::bench {

struct InPlaceBenchConfig {
  std::string dir;  // where the shards and both tables are written (kept for reuse)
  uint64_t rows = 1u << 20;
  uint32_t shards = 4;
  uint32_t rows_per_gather = 24;
  std::string io_backend = "auto";
  uint64_t cache_bytes = 1u << 20;
  double seconds = 2;   // per kind, in turns of ~20 ms
  uint32_t opens = 5;   // store opens timed per kind (median)
  uint64_t seed = 1;
};

struct InPlaceKind {
  std::string name;  // "converted", "in_place_scales_held", "in_place_scales_read"
  double open_ms = 0;
  uint64_t rows = 0, misses = 0, io_reads = 0, io_bytes = 0;
  double seconds = 0;
  double rows_per_s() const { return seconds > 0 ? double(rows) / seconds : 0; }
  double reads_per_miss() const { return misses ? double(io_reads) / double(misses) : 0; }
  double read_amplification(uint32_t record_bytes) const {
    return misses ? double(io_bytes) / (double(misses) * record_bytes) : 0;
  }
};

struct InPlaceBenchReport {
  std::string io_description;
  uint64_t shard_bytes = 0, converted_bytes = 0, reference_bytes = 0;
  double convert_seconds = 0, reference_seconds = 0;
  uint32_t record_bytes = 0;
  std::vector<InPlaceKind> kinds;  // converted first
};

Result<InPlaceBenchReport> RunInPlaceBenchmark(const InPlaceBenchConfig& config, const ProgressLog& log = {});

}  // namespace engram::bench
