// The tools' exit status for a failure, one rule for all of them: 2 when
// the input is at fault (a bad argument, a missing or corrupt file, a
// request the build or kernel cannot serve), 1 when something went wrong at
// run time (an I/O error, a conflict with another running process, ...).
#pragma once

#include "engram/status.h"

namespace engram {

inline int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kCorruption:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnsupported:
      return 2;
    default:
      return 1;
  }
}

}  // namespace engram
