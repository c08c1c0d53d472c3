#include "src/replay/cli_values.h"

#include <charconv>
#include <cmath>
#include <string>

namespace engram::replay {
namespace {

Result<double> ParseNumber(std::string_view text, std::string_view whole) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !(v >= 0) || !std::isfinite(v))
    return Status::InvalidArgument(std::string("'").append(whole).append("' is not a non-negative number"));
  return v;
}

}  // namespace

Result<uint64_t> ParseSize(std::string_view text) {
  std::string_view num = text;
  uint64_t unit = 1;
  auto strip = [&](std::string_view suffix, uint64_t u) {
    if (num.size() > suffix.size() && num.substr(num.size() - suffix.size()) == suffix) {
      num.remove_suffix(suffix.size());
      unit = u;
      return true;
    }
    return false;
  };
  strip("KiB", 1ull << 10) || strip("MiB", 1ull << 20) || strip("GiB", 1ull << 30) || strip("TiB", 1ull << 40) ||
      strip("K", 1ull << 10) || strip("M", 1ull << 20) || strip("G", 1ull << 30) || strip("T", 1ull << 40) ||
      strip("B", 1);
  auto v = ParseNumber(num, text);
  if (!v.ok()) return Status::InvalidArgument("size " + v.status().message() + " (e.g. 1G, 512MiB, 1073741824)");
  const double bytes = *v * static_cast<double>(unit);
  if (bytes >= 1.8e19) return Status::InvalidArgument("size '" + std::string(text) + "' is too large");
  return static_cast<uint64_t>(bytes);
}

Result<std::vector<uint64_t>> ParseSweep(std::string_view text, uint64_t base_capacity_rows) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(pos, comma - pos);
    bool multiple = false;
    if (!item.empty() && (item.back() == 'x' || item.back() == 'X')) {
      item.remove_suffix(1);
      multiple = true;
    }
    auto v = ParseNumber(item, text.substr(pos, comma - pos));
    if (!v.ok()) return Status::InvalidArgument("--sweep: " + v.status().message());
    if (*v < 1000) multiple = true;
    double rows = *v;
    if (multiple) {
      if (base_capacity_rows == 0)
        return Status::InvalidArgument("--sweep: '" + std::string(text.substr(pos, comma - pos)) +
                                       "' is a multiple of the capacity; give --capacity-rows or --cache-bytes");
      rows = *v * static_cast<double>(base_capacity_rows);
    }
    if (rows < 1) return Status::InvalidArgument("--sweep: '" + std::string(text.substr(pos, comma - pos)) +
                                                 "' gives a capacity below one row");
    // Converting a double at or beyond 2^64 to uint64_t is undefined.
    if (!(rows < 1.8e19)) return Status::InvalidArgument("--sweep: '" + std::string(text.substr(pos, comma - pos)) +
                                                       "' gives a capacity too large to count in rows");
    out.push_back(static_cast<uint64_t>(rows));
    pos = comma + 1;
  }
  return out;
}

}  // namespace engram::replay
