// EngramHashLayout (include/engram/hasher.h): its validation, and reading it
// from layout-v41.json text or files (the JSON codec itself is
// storage/layout_json.cc). The layout is part of the table format -- a table
// embeds its layer's layout (storage/embedded_hash_layout.h) -- so its rules
// live in the storage layer, where the hasher (src/ngram) can use them too.
#include <limits>
#include <string>

#include "engram/hasher.h"
#include "storage/bounded_json.h"
#include "storage/embedded_hash_layout.h"
#include "storage/file_util.h"
#include "storage/input_files.h"
#include "storage/layout_json.h"
#include "storage/prime.h"

namespace engram {

using nlohmann::json;

Status EngramHashLayout::Validate() const {
  auto err = [](const std::string& m) { return Status::InvalidArgument("layout: " + m); };
  if (orders.empty()) return err("orders is empty");
  for (size_t i = 0; i < orders.size(); ++i) {
    if (orders[i] == 0) return err("orders[" + std::to_string(i) + "] is 0; orders start at 1");
    if (i > 0 && orders[i] <= orders[i - 1]) return err("orders must be strictly ascending");
  }
  if (heads == 0) return err("heads is 0");
  if (multipliers.size() < max_order())
    return err("multipliers has " + std::to_string(multipliers.size()) + " values; order " +
               std::to_string(max_order()) + " needs " + std::to_string(max_order()));
  auto check_shape = [&](const std::vector<std::vector<uint64_t>>& m, const char* name) -> Status {
    if (m.size() != orders.size())
      return err(std::string(name) + " has " + std::to_string(m.size()) + " rows, expected one per order (" +
                 std::to_string(orders.size()) + ")");
    for (size_t i = 0; i < m.size(); ++i) {
      if (m[i].size() != heads)
        return err(std::string(name) + "[" + std::to_string(i) + "] has " + std::to_string(m[i].size()) +
                   " values, expected heads = " + std::to_string(heads));
    }
    return Status::OK();
  };
  ENGRAM_RETURN_IF_ERROR(check_shape(primes, "primes"));
  ENGRAM_RETURN_IF_ERROR(check_shape(offsets, "offsets"));
  // Offsets are the exclusive prefix sum of the primes in (order, head) order;
  // anything else would make two heads share rows or leave holes.
  unsigned __int128 sum = 0;
  for (size_t i = 0; i < orders.size(); ++i) {
    for (uint32_t h = 0; h < heads; ++h) {
      // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive)
      // on the same string built with operator+ from a literal.
      std::string at = "[";
      at += std::to_string(i);
      at += "][";
      at += std::to_string(h);
      at += "]";
      const uint64_t p = primes[i][h];
      // Below 2^63 so that floor_mod of an int64 is in range and sums fit.
      if (p < 2 || p >= (uint64_t(1) << 63) || !IsPrime(p))
        return err("primes" + at + " = " + std::to_string(p) + " is not a prime below 2^63");
      if (offsets[i][h] != sum)
        return err("offsets" + at + " = " + std::to_string(offsets[i][h]) + ", expected " +
                   std::to_string(static_cast<uint64_t>(sum)) + " (exclusive prefix sum of primes)");
      sum += p;
      if (sum > std::numeric_limits<uint64_t>::max()) return err("sum of primes overflows uint64");
    }
  }
  if (total_rows != sum)
    return err("total_rows = " + std::to_string(total_rows) + ", expected the sum of primes " +
               std::to_string(static_cast<uint64_t>(sum)));
  return Status::OK();
}

Result<EngramHashLayout> EngramHashLayout::FromJson(std::string_view json_text, uint32_t layer_index) {
  // Bounded nesting: a deep document would overflow the stack when copied
  // (ParseBoundedJson also turns a number too large for a double --
  // out_of_range.406, found by tests/fuzz/hash_layout_fuzzer -- into an error).
  auto j = ParseBoundedJson(json_text);
  if (!j.ok()) return Status::InvalidArgument("layout: " + j.status().message());
  return LayoutFromJson(*j, layer_index);
}

Result<EngramHashLayout> EngramHashLayout::FromFile(const std::string& path, uint32_t layer_index) {
  ENGRAM_ASSIGN_OR_RETURN(std::string text, fileutil::ReadRegularFile(path, kMaxLayoutFileBytes, "layout file",
                                                [&](int fd) { RecordInputFile(fd, path, "a hash layout file"); }));
  auto r = FromJson(text, layer_index);
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

std::string EngramHashLayout::ToJson() const { return LayoutToJson(*this).dump(); }

}  // namespace engram
