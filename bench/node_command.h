// The `engram-bench node` subcommand (and its hidden client-process role,
// `engram-bench node-client`): options and report lines around the driver
// in bench/node_benchmark.h.
#pragma once

#include <CLI/CLI.hpp>

#include "bench/node_benchmark.h"

namespace engram::bench {

struct NodeArgs {
  NodeBenchConfig config;
  double memory_cache_mib = 1024;
  bool json = false;
};
CLI::App* RegisterNodeCommand(CLI::App& app, NodeArgs& a);
int RunNodeCommand(const NodeArgs& a);

CLI::App* RegisterNodeClientCommand(CLI::App& app, NodeClientRole& role);

}  // namespace engram::bench
