#include "src/ngram/scaled_layout.h"

#include "storage/prime.h"

namespace engram {

Result<EngramHashLayout> ScaleLayout(const EngramHashLayout& layout, uint64_t target_rows) {
  const uint64_t columns = layout.rows_per_token();
  if (columns == 0) return Status::InvalidArgument("scale layout: layout has no columns");
  if (target_rows < columns * 16) {
    return Status::InvalidArgument("scale layout: " + std::to_string(target_rows) + " rows is too small for " +
                                   std::to_string(columns) + " heads");
  }
  constexpr uint64_t kPrimeLimit = uint64_t(1) << 63;
  EngramHashLayout out = layout;
  uint64_t candidate = target_rows / columns;
  uint64_t offset = 0;
  for (size_t o = 0; o < out.primes.size(); ++o) {
    for (size_t h = 0; h < out.primes[o].size(); ++h) {
      // Hash moduli are primes below 2^63 (Validate); searching past that
      // would wrap the candidate around to 2 for a target near 2^64.
      while (candidate < kPrimeLimit && !IsPrime(candidate)) ++candidate;
      if (candidate >= kPrimeLimit) {
        return Status::InvalidArgument("scale layout: " + std::to_string(target_rows) + " rows needs primes above 2^63");
      }
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
