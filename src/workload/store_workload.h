// Runs gather traces (from engram-replay's trace builder) through a real
// Store and reports per request what the row-cache report's table reports:
// hit rate, evictions, refusals, wall time and the readiness wait split into
// cache and disk. Used by the main demo and `engram-bench gather`, and by the
// test that checks the emulator and the store count the same.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engram/store.h"
#include "src/replay/gather_trace.h"

namespace engram {

struct RequestRunStats {
  std::string name;
  uint64_t gathers = 0;
  uint64_t rows = 0;     // row IDs asked for, duplicates included, summed over tables
  uint64_t lookups = 0;  // distinct rows per gather, summed (hits + misses)
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t inserts = 0;
  uint64_t refusals = 0;
  uint64_t evictions = 0;
  uint64_t relocations = 0;
  uint64_t blocks_read = 0;
  uint64_t missed_bytes = 0;  // misses x record bytes: what the reads had to deliver
  uint64_t wait_ns = 0;
  uint64_t cache_ns = 0;
  uint64_t disk_ns = 0;
  double wall_seconds = 0;
  uint64_t resident_rows = 0;  // after the request, summed over tables
  uint64_t capacity_rows = 0;

  double hit_rate() const { return lookups ? double(hits) / double(lookups) : 0.0; }
  // Rows delivered per second of the request's wall time.
  double rows_per_second() const { return wall_seconds > 0 ? double(rows) / wall_seconds : 0.0; }
  // Bytes read from disk per byte of missed row (4 KiB blocks; rows of one
  // block coalesced into one read). 0 when nothing was missed.
  double read_amplification() const {
    return missed_bytes ? double(blocks_read) * 4096.0 / double(missed_bytes) : 0.0;
  }
};

struct WorkloadProgress {
  size_t request = 0, requests = 0, gather = 0, gathers = 0;
};

// traces[t] is replayed on store table t; every trace must have the same
// request and gather structure (one trace per Engram layer of the same
// tokens). Gather g of every table is started at once, then all are waited
// for, as a runtime does for one prefill chunk. Counts are summed over tables.
// Fails on the first failed gather.
Result<std::vector<RequestRunStats>> RunTracesThroughStore(
    Store& store, std::span<const replay::GatherTrace> traces,
    const std::function<void(const WorkloadProgress&)>& progress = {});

}  // namespace engram
