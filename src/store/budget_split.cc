#include "src/store/budget_split.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

namespace engram {

Result<std::vector<uint64_t>> SplitCacheBudget(uint64_t total, std::span<const uint64_t> explicit_bytes,
                                               std::span<const uint64_t> weights, std::span<const uint64_t> caps) {
  if (explicit_bytes.size() != weights.size() || (!caps.empty() && caps.size() != weights.size())) {
    return Status::InvalidArgument("budget split: size mismatch");
  }
  const size_t n = weights.size();
  auto cap = [&](size_t i) { return caps.empty() ? kNoBudgetCap : caps[i]; };
  std::vector<uint64_t> out(n, 0);
  std::vector<bool> settled(n, false);  // budget final: reserved, or capped
  uint64_t reserved = 0;
  for (size_t i = 0; i < n; ++i) {
    if (explicit_bytes[i] == 0) continue;
    reserved += explicit_bytes[i];
    if (reserved < explicit_bytes[i] || reserved > total) {
      return Status::InvalidArgument("per-table cache budgets add up to more than the store's cache budget (" +
                                     std::to_string(total) + " bytes)");
    }
    // A reservation beyond what the table can use goes back to the others.
    out[i] = std::min(explicit_bytes[i], cap(i));
    settled[i] = true;
  }
  uint64_t rest = total;
  for (size_t i = 0; i < n; ++i) rest -= settled[i] ? out[i] : 0;
  // Water filling: share the rest by weight; a table whose share exceeds its
  // cap gets the cap and leaves the race, and the rest is shared again. Each
  // round settles at least one table or ends, so at most n rounds.
  for (;;) {
    long double weight_sum = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!settled[i]) weight_sum += static_cast<long double>(weights[i]);
    }
    if (weight_sum <= 0) break;
    // Every table whose share of this round reaches its cap is settled at
    // the cap together; that only raises the others' shares next round.
    std::vector<size_t> capped;
    for (size_t i = 0; i < n; ++i) {
      if (settled[i]) continue;
      const long double share = static_cast<long double>(rest) * weights[i] / weight_sum;
      if (share >= static_cast<long double>(cap(i))) capped.push_back(i);
    }
    if (capped.empty()) break;
    for (size_t i : capped) {
      out[i] = std::min(cap(i), rest);  // min: long double rounding must not wrap rest
      settled[i] = true;
      rest -= out[i];
    }
  }
  uint64_t given = 0;
  size_t last_shared = SIZE_MAX;
  long double weight_sum = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!settled[i]) weight_sum += static_cast<long double>(weights[i]);
  }
  for (size_t i = 0; i < n; ++i) {
    if (settled[i]) continue;
    if (weight_sum <= 0) return Status::InvalidArgument("budget split: tables without size");
    out[i] = static_cast<uint64_t>(static_cast<long double>(rest) * weights[i] / weight_sum);
    given += out[i];
    last_shared = i;
  }
  if (last_shared != SIZE_MAX) out[last_shared] += rest - given;  // rounding remainder
  for (size_t i = 0; i < n; ++i) {
    if (out[i] == 0) return Status::InvalidArgument("table " + std::to_string(i) + " gets no cache budget");
  }
  return out;
}

Result<uint64_t> ParseMemAvailable(std::string_view meminfo) {
  // Lines are "Name:   <value> kB".
  constexpr std::string_view kKey = "MemAvailable:";
  size_t at = 0;
  while (at < meminfo.size()) {
    const size_t end = std::min(meminfo.find('\n', at), meminfo.size());
    std::string_view line = meminfo.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    uint64_t kib = 0;
    const auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), kib);
    std::string_view unit(p, static_cast<size_t>(line.data() + line.size() - p));
    while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    while (!unit.empty() && (unit.back() == ' ' || unit.back() == '\r')) unit.remove_suffix(1);
    if (ec != std::errc() || p == line.data() || unit != "kB" || kib > (UINT64_MAX >> 10)) {
      return Status::InvalidArgument("meminfo: cannot read the MemAvailable line '" + std::string(kKey) +
                                     std::string(line) + "'");
    }
    return kib << 10;
  }
  return Status::NotFound("meminfo: no MemAvailable line (Linux before 3.14?)");
}

Result<uint64_t> ReadMemAvailable() {
  std::ifstream in("/proc/meminfo");
  if (!in) return Status::FromErrno("cannot read /proc/meminfo", errno);
  std::ostringstream text;
  text << in.rdbuf();
  return ParseMemAvailable(text.str());
}

Result<uint64_t> EffectiveCacheBudget(uint64_t cache_bytes, double memory_fraction, uint64_t mem_available) {
  if (!(memory_fraction >= 0.0 && memory_fraction <= 1.0)) {  // also refuses NaN
    return Status::InvalidArgument("cache_memory_fraction must be in [0, 1] (0 = unused), got " +
                                   std::to_string(memory_fraction));
  }
  if (memory_fraction == 0.0) return cache_bytes;
  const long double share = std::floor(static_cast<long double>(mem_available) * memory_fraction);
  return std::min<uint64_t>(cache_bytes, static_cast<uint64_t>(share));
}

}  // namespace engram
