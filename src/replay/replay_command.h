// engram-replay as a library call: the tool's main only parses flags into
// ReplayArgs, so everything it does is testable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engram/status.h"

namespace engram::replay {

struct ReplayArgs {
  std::string layout_path;                // required with requests
  uint32_t layer = 0;
  std::string token_map_path;             // empty = identity
  std::vector<std::string> requests;      // "FILE[@SPLIT]", in order
  std::string rows_path;                  // plain row-ID trace instead of requests
  std::optional<uint64_t> capacity_rows;
  std::optional<std::string> cache_bytes; // "1G", "512MiB", ... divided by row_bytes
  uint32_t row_bytes = 264;
  std::optional<std::string> sketch_bytes;
  // The report's policies and both fully associative bounds.
  std::vector<std::string> policies = {"legacy", "ways8", "ways16", "two-choice", "lru", "full-lru", "belady", "default"};
  bool json = false;
  std::string export_rows_path;
  std::string sweep;                      // capacities; see ParseSweep
  std::string csv_path;
  std::string plot_path;
  unsigned threads = 2;
};

// Runs the replay and returns what goes to stdout (table or JSON lines);
// files (exported rows, CSV, PNG) are written as asked.
Result<std::string> RunReplay(const ReplayArgs& args);

}  // namespace engram::replay
