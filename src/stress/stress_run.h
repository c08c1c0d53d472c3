// RunStress: one engram-stress run. A concurrent stress test of the real
// Store under injected I/O faults, proving the store's promise: every row it
// serves is byte-exact, or the gather fails with a clear status; faults
// never poison the cache; the store keeps serving other rows.
//
// It generates a small synthetic table (row r = GenerateRow(seed, r), see
// src/tablegen/row_generator.h) in a temporary directory (or uses the config's
// table), opens a Store with a small cache (so evictions and relocations
// never stop) over an I/O engine wrapped in io::FaultInjectionEngine, and runs
// StressWorker threads. At the end a sweep gathers sample rows until they
// succeed, and the store's counters are checked against the injected fault
// counts:
//   store checksum_failures == injected bit flips (every flipped block is caught)
//   store io_errors         == injected EIO (EAGAIN / short reads are absorbed)
//   cache misses == cache inserts + refusals + store failed_rows (rows of a
//                   failed block are never offered to the cache)
//   store gathers / failed_gathers == what the threads saw
//   no row is left pinned, and read-ahead rows == used + wasted
// With config.truncate a second store also runs RunTruncation.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "engram/status.h"
#include "src/stress/stress_config.h"

namespace engram::stress {

struct StressOutcome {
  nlohmann::json report;  // every count and check, as engram-stress prints it
  bool ok = false;        // every check held
  uint64_t gathers = 0, rows_verified = 0, wrong_rows = 0, faults_injected = 0;
};

// A run that could not start (no table, a store that does not open) is an
// error; a run that found a wrong row or a broken invariant is an outcome
// with ok == false.
Result<StressOutcome> RunStress(const StressConfig& config, const std::string& work_dir);

}  // namespace engram::stress
