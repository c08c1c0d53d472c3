// The `engram-bench inplace` subcommand: options and report lines around
// the driver in bench/in_place_benchmark.h.
#pragma once

#include <CLI/CLI.hpp>

#include "bench/in_place_benchmark.h"

namespace engram::bench {

struct InPlaceArgs {
  InPlaceBenchConfig config;
  double cache_mib = 1;
  bool json = false;
};

CLI::App* RegisterInPlaceCommand(CLI::App& app, InPlaceArgs& args);
// 0 measured and printed; 2 bad input; 1 a failure while measuring.
int RunInPlaceCommand(const InPlaceArgs& args);

}  // namespace engram::bench
