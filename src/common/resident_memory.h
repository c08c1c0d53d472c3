// How much memory this process really holds (RSS): tests pin with it that an
// operation commits at most a small multiple of its input, and benchmarks
// (bench/store_open_bench.cc) report it.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <functional>

#include "src/common/sanitizers.h"

namespace engram::testing {

// Sanitizers change what RSS means (shadow memory, quarantined frees,
// redzones on every allocation): tests skip RSS bounds under them.
inline constexpr bool kUnderSanitizer = ENGRAM_UNDER_SANITIZER;

// Resident set size of this process in bytes (/proc/self/statm), 0 if unknown.
inline uint64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// Runs `work` in a child process and returns whether it succeeded. Building
// large test inputs there leaves no freed heap behind in this process, which
// a later allocation would reuse without raising RSS (hiding what it costs).
inline bool RunInChild(const std::function<bool()>& work) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) _exit(work() ? 0 : 1);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace engram::testing
