// The `engram-bench node` subcommand (and its hidden client-process role,
// `engram-bench node-client`): options and report lines around the drivers
// in bench/node_benchmark.h and, with --mixed, bench/node_fairness_benchmark.h.
#pragma once

#include <CLI/CLI.hpp>

#include "bench/node_benchmark.h"
#include "bench/node_client_role.h"
#include "bench/node_fairness_benchmark.h"

namespace engram::bench {

struct NodeArgs {
  NodeBenchConfig config;
  double memory_cache_mib = 1024;
  bool json = false;
  // --mixed: the fairness benchmark instead of the memory, hit and miss phases.
  bool mixed = false;
  NodeFairnessConfig mixed_config;
  double mixed_cache_mib = 0;
  std::string csv;   // B's latencies, one line per gather and side
  std::string plot;  // their CDFs, drawn by gnuplot
  std::string plot_title;
};
CLI::App* RegisterNodeCommand(CLI::App& app, NodeArgs& a);
int RunNodeCommand(const NodeArgs& a);

CLI::App* RegisterNodeClientCommand(CLI::App& app, NodeClientRole& role);

}  // namespace engram::bench
