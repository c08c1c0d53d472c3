// CLI11 checks shared by the tools (only the tools include this header: the
// library does not depend on CLI11).
#pragma once

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

namespace engram {

// CLI::Range(lo, hi) for a floating-point option, refusing NaN too.
// CLI::Range only tests `v < lo || v > hi`, which is false for NaN, so it lets
// "nan" through -- and a NaN then hangs a timed loop or is converted to an
// integer (undefined behaviour).
inline CLI::Validator FiniteRange(double lo, double hi) {
  char range[96];
  std::snprintf(range, sizeof range, "[%g - %g]", lo, hi);
  const std::string desc = range;
  return CLI::Validator(
      [lo, hi, desc](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || !(v >= lo && v <= hi)) {
          return "Value " + text + " not in range " + desc;
        }
        return std::string();
      },
      "FLOAT in " + desc);
}

}  // namespace engram
