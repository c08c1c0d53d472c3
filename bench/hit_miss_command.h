// The `engram-bench hit` and `engram-bench miss` subcommands: options and
// report lines around the drivers in bench/hit_miss_benchmark.h.
#pragma once

#include <CLI/CLI.hpp>

#include "bench/hit_miss_benchmark.h"

namespace engram::bench {

struct HitArgs {
  HitBenchConfig config;
  double cache_mib = 0;
  bool json = false;
};

struct MissArgs {
  MissBenchConfig config;
  double cache_mib = 64;
  bool json = false;
};

CLI::App* RegisterHitCommand(CLI::App& app, HitArgs& args);
CLI::App* RegisterMissCommand(CLI::App& app, MissArgs& args);

// Exit codes: 0 measured and printed; 2 bad input (missing or too-small
// table, a filesystem without O_DIRECT, a bad option), nothing measured;
// 1 a failure while measuring or printing.
int RunHitCommand(const HitArgs& args);
int RunMissCommand(const MissArgs& args);

}  // namespace engram::bench
