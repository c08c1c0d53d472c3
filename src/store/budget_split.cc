#include "src/store/budget_split.h"

#include <string>

namespace engram {

Result<std::vector<uint64_t>> SplitCacheBudget(uint64_t total, std::span<const uint64_t> explicit_bytes,
                                               std::span<const uint64_t> weights) {
  if (explicit_bytes.size() != weights.size()) return Status::InvalidArgument("budget split: size mismatch");
  std::vector<uint64_t> out(weights.size(), 0);
  uint64_t reserved = 0;
  long double weight_sum = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (explicit_bytes[i] > 0) {
      reserved += explicit_bytes[i];
      if (reserved < explicit_bytes[i] || reserved > total) {
        return Status::InvalidArgument("per-table cache budgets add up to more than the store's cache_bytes (" +
                                       std::to_string(total) + ")");
      }
      out[i] = explicit_bytes[i];
    } else {
      weight_sum += static_cast<long double>(weights[i]);
    }
  }
  const uint64_t rest = total - reserved;
  uint64_t given = 0;
  size_t last_shared = SIZE_MAX;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (explicit_bytes[i] > 0) continue;
    if (weight_sum <= 0) return Status::InvalidArgument("budget split: tables without size");
    out[i] = static_cast<uint64_t>(static_cast<long double>(rest) * weights[i] / weight_sum);
    given += out[i];
    last_shared = i;
  }
  if (last_shared != SIZE_MAX) out[last_shared] += rest - given;  // rounding remainder
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0) return Status::InvalidArgument("table " + std::to_string(i) + " gets no cache budget");
  }
  return out;
}

}  // namespace engram
