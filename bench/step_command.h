// The `engram-bench step` subcommand: options and report lines around the
// driver in bench/step_benchmark.h.
#pragma once

#include <CLI/CLI.hpp>

#include "bench/step_benchmark.h"

namespace engram::bench {

struct StepArgs {
  StepBenchConfig config;
  std::string fixtures = ENGRAM_FIXTURE_DIR;
  bool identity = false;
  bool json = false;
};

CLI::App* RegisterStepCommand(CLI::App& app, StepArgs& args);

// Exit codes: 0 measured and printed; 2 bad input; 1 a failure while
// measuring or printing.
int RunStepCommand(const StepArgs& args);

}  // namespace engram::bench
