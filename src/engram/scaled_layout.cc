#include "src/engram/scaled_layout.h"

#include "src/engram/prime.h"

namespace engram {

Result<EngramHashLayout> ScaleLayout(const EngramHashLayout& layout, uint64_t target_rows) {
  const uint64_t columns = layout.rows_per_token();
  if (columns == 0) return Status::InvalidArgument("scale layout: layout has no columns");
  if (target_rows < columns * 16) {
    return Status::InvalidArgument("scale layout: " + std::to_string(target_rows) + " rows is too small for " +
                                   std::to_string(columns) + " heads");
  }
  EngramHashLayout out = layout;
  uint64_t candidate = target_rows / columns;
  uint64_t offset = 0;
  for (size_t o = 0; o < out.primes.size(); ++o) {
    for (size_t h = 0; h < out.primes[o].size(); ++h) {
      while (!IsPrime(candidate)) ++candidate;
      out.primes[o][h] = candidate;
      out.offsets[o][h] = offset;
      offset += candidate;
      ++candidate;
    }
  }
  out.total_rows = offset;
  ENGRAM_RETURN_IF_ERROR(out.Validate());
  return out;
}

}  // namespace engram
