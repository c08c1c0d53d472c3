// ProgressMeter: a one-line progress bar on stderr for long tool runs
// (conversion, generation, verification). Redraws at most ~10 times a second.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace engram {

class ProgressMeter {
 public:
  // Enabled when `force` or when stderr is a terminal.
  ProgressMeter(std::string label, uint64_t total_bytes, bool force);
  ~ProgressMeter() { Finish(); }

  void Update(uint64_t done_bytes);
  // Draws the final state and ends the line (once).
  void Finish();


 private:
  void Draw(uint64_t done, bool final);

  std::string label_;
  uint64_t total_;
  uint64_t done_ = 0;
  bool enabled_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace engram
