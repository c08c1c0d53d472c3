// The driver behind `engram-bench node --clients N`: one engram-served and N
// client processes against N private stores, measured in the same run.
//
//   memory: the total PSS (/proc/PID/smaps_rollup) of the service and N
//           clients that have each gathered the same working set, against
//           N private-store processes with the same cache budget that have
//           gathered it too. Target: the node's total within 1.1x one
//           private store.
//   hits:   the per-row cost of an all-hit gather through a client against a
//           private store of the same cache, both in this process (the
//           service is another), alternated round by round. Target: within
//           1.3x.
//   misses: N client processes each missing its own never-read blocks at
//           the same time, against one private store running the union of
//           their gathers from N threads. Target: at least 0.9x the rows/s.
//
// The clients and the private stores of the memory and miss phases are this
// program re-executed (`engram-bench node-client`, bench/node_client_role.h):
// real processes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engram/status.h"

namespace engram::bench {

struct NodeBenchConfig {
  std::string file;     // an engram-gen table; on /dev/shm the CPU path is what is measured
  std::string served;   // engram-served; empty: beside this program
  std::string self;     // this program, re-executed as the client processes
  uint32_t clients = 4;
  std::vector<uint64_t> resident_rows{65536, 2000000};
  std::vector<uint32_t> rows_per_gather{24, 4096};
  uint64_t memory_cache_bytes = uint64_t{1} << 30;  // memory phase: each store's budget
  uint64_t hit_cache_bytes = 0;  // hit phase: the service's and the private store's; 0: sized as the hit bench
  uint64_t miss_rows_per_client = 16384;
  uint32_t miss_rows_per_gather = 4096;
  uint32_t miss_rounds = 3;
  double seconds = 1.0;  // hits: per side and per point, split over `rounds`
  uint32_t rounds = 9;
  uint64_t seed = 1;
};

struct NodeHitPoint {
  uint64_t resident_rows = 0;
  uint32_t rows_per_gather = 0;
  double client_ns_per_row = 0, private_ns_per_row = 0;
  std::vector<double> round_ratios;  // client ns/row over private ns/row, per round
  double ratio() const;              // their median
};

struct NodeBenchReport {
  uint32_t clients = 0;
  // Memory (KiB of PSS).
  uint64_t memory_rows = 0;
  uint64_t service_pss_kib = 0, clients_pss_kib = 0;    // clients: summed
  uint64_t private_pss_kib = 0, privates_pss_kib = 0;   // one (the mean), and all summed
  double node_over_one_private() const {
    return private_pss_kib ? double(service_pss_kib + clients_pss_kib) / double(private_pss_kib) : 0;
  }
  // What sharing saves: N private stores over the node that replaces them.
  double all_privates_over_node() const {
    const uint64_t node = service_pss_kib + clients_pss_kib;
    return node ? double(privates_pss_kib) / double(node) : 0;
  }
  // Hits.
  std::vector<NodeHitPoint> hits;
  // Misses: rows/s of every round, each side.
  uint64_t miss_rows = 0;
  std::vector<double> client_miss_rows_per_s, private_miss_rows_per_s;
  double miss_ratio() const;  // median of the per-round client/private ratios
};

using NodeBenchLog = std::function<void(const std::string&)>;

Result<NodeBenchReport> RunNodeBenchmark(const NodeBenchConfig& config, const NodeBenchLog& log);

}  // namespace engram::bench
