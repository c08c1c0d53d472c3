// Whether a tool's output reached stdout: a full disk or a closed pipe must
// not look like success, so every tool ends with this check and fails
// (non-zero exit, "write to stdout failed") when it is false.
#pragma once

#include <cstdio>
#include <iostream>

namespace engram {

// Flushes std::cout and C's stdout; true when neither saw a write error.
inline bool StdoutWritten() {
  std::cout.flush();
  return std::cout.good() && std::fflush(stdout) == 0 && !std::ferror(stdout);
}

}  // namespace engram
