#include "src/common/progress_meter.h"

#include <unistd.h>

#include <cstdio>

namespace engram {

ProgressMeter::ProgressMeter(std::string label, uint64_t total_bytes, bool force)
    : label_(std::move(label)), total_(total_bytes), enabled_(force || ::isatty(STDERR_FILENO)) {
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

void ProgressMeter::Update(uint64_t done_bytes) {
  done_ = done_bytes;
  if (!enabled_ || finished_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  Draw(done_bytes, false);
}

void ProgressMeter::Finish() {
  if (finished_) return;
  finished_ = true;
  if (enabled_) Draw(done_, true);
}

void ProgressMeter::Draw(uint64_t done, bool final) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  constexpr int kWidth = 30;
  int filled = static_cast<int>(frac * kWidth);
  char bar[kWidth + 1];
  for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
  bar[kWidth] = '\0';
  double mib = static_cast<double>(done) / (1 << 20);
  std::fprintf(stderr, "\r%s [%s] %5.1f%% %.0f/%.0f MiB %.0f MB/s%s", label_.c_str(), bar, frac * 100, mib,
               static_cast<double>(total_) / (1 << 20), secs > 0 ? static_cast<double>(done) / 1e6 / secs : 0.0,
               final ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace engram
