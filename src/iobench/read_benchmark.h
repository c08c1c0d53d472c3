// Raw block-read benchmark driver behind `engram-bench read`: random 4 KiB
// block reads from one file through one IoEngine, at a given queue depth and
// thread count, for a fixed duration. Lives in the library (not in the bench
// tool) so every engram-bench subcommand can share it and so it is compiled
// and warned about like the engine it measures.
#pragma once

#include <cstdint>
#include <string>

#include "engram/status.h"
#include "storage/io/io_engine.h"

namespace engram::io {

enum class ReadBenchMode : uint8_t {
  // `threads` threads each call ReadBlocks() on one block in a loop (what
  // fio's psync engine does with numjobs=threads).
  kSync,
  // `queue_depth` independent read chains, each submitting its next read from
  // the previous one's completion callback (what fio's io_uring engine does
  // with iodepth=queue_depth); `threads` sizes the pread/mmap worker pool.
  kAsync,
};

struct ReadBenchConfig {
  std::string path;
  IoBackend backend = IoBackend::kIoUring;
  ReadBenchMode mode = ReadBenchMode::kAsync;
  uint32_t queue_depth = 1;
  uint32_t threads = 1;
  uint32_t rings = 1;  // io_uring rings sharing queue_depth (IoOptions::rings)
  bool cold = true;               // O_DIRECT and the file dropped from the page cache; else buffered + prewarmed
  bool register_buffers = true;   // io_uring fixed buffers for the destination arena
  double seconds = 3;
  uint64_t seed = 1;
};

struct ReadBenchResult {
  std::string engine;  // IoEngine::Describe()
  uint64_t reads = 0;
  uint64_t errors = 0;
  double seconds = 0;
  double iops = 0;
  double mb_per_s = 0;  // MiB/s
  double p50_us = 0, p90_us = 0, p99_us = 0, p999_us = 0;
};

Result<ReadBenchResult> RunReadBenchmark(const ReadBenchConfig& config);

}  // namespace engram::io
