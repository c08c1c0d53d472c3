// The `engram-bench remote` subcommand: a table in a local Redis Cluster
// (3 masters + 3 replicas, started here: src/common/local_redis_cluster.h)
// against redis-benchmark on the same cluster and against the same table as
// a local file, in one run; then a master killed under four gathering
// threads. bench/RESULTS.md, "Tables in a Redis Cluster".
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace engram::bench {

struct RemoteArgs {
  std::string dir;              // the table file (and the chart's data)
  uint64_t rows = 200000;
  uint32_t queue_depth = 128;   // the store's, so the client's pipeline depth per master
  uint32_t repeats = 5;         // rounds of each rate measurement (median and spread)
  uint32_t large_gathers = 40;  // 4096-row gathers per round
  uint32_t small_gathers = 2000;  // 24-row gathers for the latency figures
  uint64_t benchmark_requests = 2000000;  // redis-benchmark GETs per round (at least)
  double failover_seconds = 1.0;  // gathering before the kill
  std::string chart;            // PNG to draw (and its .dat beside it); empty: none
};

CLI::App* RegisterRemoteCommand(CLI::App& app, RemoteArgs& args);
// 0 measured and printed; 2 bad input; 1 a failure while measuring.
int RunRemoteCommand(const RemoteArgs& args);

}  // namespace engram::bench
