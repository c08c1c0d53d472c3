// The driver behind `engram-bench node --mixed`: whether one client of
// engram-served can hold up another, measured against the same workload on
// private stores in the same run.
//
//   fairness: client B (the latency client: a 256-row gather of never-read
//             rows every 20 ms, as a decoding rank) runs beside client A (the
//             bulk: 60,000-row all-miss gathers, 3 in flight, as a prefill)
//             for as long as A takes to gather its rows. Once as two clients of
//             one engram-served, once as two processes each with its own
//             private store of the same table. Targets: B's p99 at most 1.5x
//             and its slowest gather at most 2x the private pair's; A's rows/s
//             at least 0.9x the private A's.
//   stopped neighbour: A starts 3 such gathers and stops itself (SIGSTOP)
//             before it reads their answers; B then runs a fixed number of its
//             gathers at once, while the service reads A's rows and answers
//             them to a client that does not read. Against the same B workload
//             with A absent, on the same service. Target: B's slowest at most
//             2x. Meanwhile B's store is asked every 50 ms for the table's
//             counters (in both runs), to report when the service had read
//             A's rows. A is then continued, and every process ends and is
//             reaped.
//
// Every gather reads rows no process has read before (each workload its own
// block-aligned range of the table, drawn in a seeded order), so all are
// misses (unless decode_shares_bulk_rows): on a disk the reads reach the
// device (O_DIRECT); on /dev/shm they measure the CPU path. The caches are
// sized so that nothing is evicted.
// A and B are this program re-executed (`engram-bench node-client`,
// bench/node_client_role.h): real processes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engram/status.h"

namespace engram::bench {

struct NodeFairnessConfig {
  std::string file;    // an engram-gen table with room for every workload's never-read rows
  std::string served;  // engram-served; empty: beside this program
  std::string self;    // this program, re-executed as A and B
  // A, the bulk client.
  uint32_t bulk_rows_per_gather = 60000;
  uint32_t bulk_in_flight = 3;
  uint32_t bulk_gathers = 12;  // per side
  // B, the latency client.
  uint32_t decode_rows_per_gather = 256;
  double decode_interval_ms = 20;      // from one gather's start to the next's (at once if it took longer)
  uint32_t decode_max_gathers = 400;   // per side: B's row supply beside A
  uint32_t stopped_decode_gathers = 100;  // the stopped-neighbour phase, with A absent and beside A
  // B draws its fairness rows from A's range instead of its own: rows A has
  // in flight, has read or will read. In the service a row in flight for A
  // is then taken from A's read, and one A has read is a hit; in the private
  // pair each store reads its own. Not all misses: a variant, not the target.
  bool decode_shares_bulk_rows = false;
  uint64_t cache_bytes = 0;  // each store's; 0: sized so that nothing is evicted
  uint64_t seed = 1;

  uint64_t bulk_rows() const { return uint64_t{bulk_gathers} * bulk_rows_per_gather; }
  uint64_t decode_rows() const { return uint64_t{decode_max_gathers} * decode_rows_per_gather; }
  uint64_t held_rows() const { return uint64_t{bulk_in_flight} * bulk_rows_per_gather; }
  uint64_t stopped_decode_rows() const { return uint64_t{stopped_decode_gathers} * decode_rows_per_gather; }
};

// B's gathers of one run: latencies in the order they were made.
struct LatencySeries {
  std::vector<double> latencies_us;
  uint64_t hit_rows = 0;  // rows a gather found cached: 0 when every row was never read
  uint64_t failed = 0;    // gathers that returned an error
  bool ran_out = false;   // the row supply ended before A did (raise --decode-max-gathers)
  // Nearest-rank percentile (q in (0, 100]) and the slowest, in ms.
  double percentile_ms(double q) const;
  double max_ms() const;
};

struct BulkRun {
  uint64_t rows = 0;
  double seconds = 0;
  uint64_t hit_rows = 0, failed = 0;
  double rows_per_s() const { return seconds > 0 ? double(rows) / seconds : 0; }
};

struct FairnessPair {
  LatencySeries b;
  BulkRun a;
};

struct NodeFairnessReport {
  uint64_t table_rows = 0;
  uint64_t private_a_cache_bytes = 0, private_b_cache_bytes = 0, service_cache_bytes = 0;
  FairnessPair private_pair, service_pair;
  // service / private.
  double b_p50_ratio() const;
  double b_p99_ratio() const;
  double b_max_ratio() const;
  double a_rows_per_s_ratio() const;

  uint64_t stopped_cache_bytes = 0;
  LatencySeries alone, beside_stopped;
  uint64_t held_rows = 0;
  // A's gathers answered before it stopped (then their answers were read):
  // 0 when all of A's answers were left unread, as the phase means them to.
  uint64_t held_answered_before_stop = 0;
  // From A's stop until the service's counters showed A's rows read; < 0:
  // not while B ran.
  double held_reads_seconds = -1;
  std::string held_outcome;  // A's gathers once continued: "OK" or their error
  double stopped_max_ratio() const;  // beside a stopped A / A absent, slowest gather
};

using NodeFairnessLog = std::function<void(const std::string&)>;

Result<NodeFairnessReport> RunNodeFairnessBenchmark(const NodeFairnessConfig& config, const NodeFairnessLog& log);

}  // namespace engram::bench
