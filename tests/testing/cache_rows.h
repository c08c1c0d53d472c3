// Distinct, reproducible row contents for row cache tests: RowOf(id) is a
// pseudo-random function of id, so a row served for the wrong ID, or torn
// between two rows, never compares equal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "src/cache/set_hasher.h"

namespace engram::testing {

inline std::vector<std::byte> CacheRowOf(uint64_t id, uint32_t row_bytes) {
  std::vector<std::byte> r(row_bytes);
  uint64_t x = cache::Remix(id * 7 + 3);
  for (uint32_t i = 0; i + 8 <= row_bytes; i += 8) {
    x = cache::Remix(x + i);
    std::memcpy(r.data() + i, &x, 8);
  }
  return r;
}

}  // namespace engram::testing
