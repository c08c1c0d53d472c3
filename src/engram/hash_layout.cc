// Parsing and validation of the Engram hash layout (layout-v41.json format).
#include <charconv>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "engram/hasher.h"
#include "src/common/bounded_json.h"
#include "src/engram/layout_json.h"
#include "src/engram/prime.h"

namespace engram {
namespace {

using nlohmann::json;

Status FieldError(const std::string& where, const std::string& what) {
  return Status::InvalidArgument("layout " + where + ": " + what);
}

Result<const json*> Member(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) return FieldError(where, std::string("missing field '") + key + "'");
  return &*it;
}

Result<uint64_t> AsUint(const json& v, const std::string& where) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    int64_t x = v.get<int64_t>();
    if (x >= 0) return static_cast<uint64_t>(x);
    return FieldError(where, "must not be negative, got " + std::to_string(x));
  }
  return FieldError(where, "must be a non-negative integer, got " + v.dump());
}

Result<uint64_t> UintField(const json& obj, const char* key, const std::string& where) {
  ENGRAM_ASSIGN_OR_RETURN(const json* v, Member(obj, key, where));
  return AsUint(*v, where + "." + key);
}

Result<uint32_t> Uint32Field(const json& obj, const char* key, const std::string& where) {
  ENGRAM_ASSIGN_OR_RETURN(uint64_t v, UintField(obj, key, where));
  if (v > std::numeric_limits<uint32_t>::max()) return FieldError(where + "." + key, "does not fit in 32 bits");
  return static_cast<uint32_t>(v);
}

// Multipliers are written as decimal strings (JSON readers in other languages
// lose int64 precision on large numbers); integers are accepted too.
Result<int64_t> AsInt64(const json& v, const std::string& where) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      return FieldError(where, "does not fit in int64");
    return v.get<int64_t>();
  }
  if (!v.is_string()) return FieldError(where, "must be a decimal string or an integer, got " + v.dump());
  const std::string& s = v.get_ref<const std::string&>();
  int64_t x = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x, 10);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    return FieldError(where, "'" + s + "' is not a decimal int64");
  return x;
}

Result<std::vector<std::vector<uint64_t>>> Matrix(const json& obj, const char* key, const std::string& where) {
  ENGRAM_ASSIGN_OR_RETURN(const json* v, Member(obj, key, where));
  const std::string at = where + "." + key;
  if (!v->is_array()) return FieldError(at, "must be an array of arrays");
  std::vector<std::vector<uint64_t>> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& row = (*v)[i];
    const std::string ri = at + "[" + std::to_string(i) + "]";
    if (!row.is_array()) return FieldError(ri, "must be an array");
    std::vector<uint64_t> values;
    for (size_t j = 0; j < row.size(); ++j) {
      ENGRAM_ASSIGN_OR_RETURN(uint64_t x, AsUint(row[j], ri + "[" + std::to_string(j) + "]"));
      values.push_back(x);
    }
    out.push_back(std::move(values));
  }
  return out;
}

Result<EngramHashLayout> LayerFromJson(const json& j, const std::string& where) {
  if (!j.is_object()) return FieldError(where, "must be an object");
  EngramHashLayout layout;
  ENGRAM_ASSIGN_OR_RETURN(layout.layer_id, Uint32Field(j, "layer_id", where));
  ENGRAM_ASSIGN_OR_RETURN(layout.heads, Uint32Field(j, "heads", where));
  ENGRAM_ASSIGN_OR_RETURN(layout.pad_id, Uint32Field(j, "pad_id", where));
  ENGRAM_ASSIGN_OR_RETURN(layout.total_rows, UintField(j, "total_rows", where));

  ENGRAM_ASSIGN_OR_RETURN(const json* orders, Member(j, "orders", where));
  if (!orders->is_array()) return FieldError(where + ".orders", "must be an array");
  for (size_t i = 0; i < orders->size(); ++i) {
    const std::string at = where + ".orders[" + std::to_string(i) + "]";
    ENGRAM_ASSIGN_OR_RETURN(uint64_t n, AsUint((*orders)[i], at));
    if (n > 64) return FieldError(at, "order " + std::to_string(n) + " is larger than 64");
    layout.orders.push_back(static_cast<uint32_t>(n));
  }

  ENGRAM_ASSIGN_OR_RETURN(const json* mults, Member(j, "multipliers", where));
  if (!mults->is_array()) return FieldError(where + ".multipliers", "must be an array");
  for (size_t i = 0; i < mults->size(); ++i) {
    ENGRAM_ASSIGN_OR_RETURN(int64_t m, AsInt64((*mults)[i], where + ".multipliers[" + std::to_string(i) + "]"));
    layout.multipliers.push_back(m);
  }
  ENGRAM_ASSIGN_OR_RETURN(layout.primes, Matrix(j, "primes", where));
  ENGRAM_ASSIGN_OR_RETURN(layout.offsets, Matrix(j, "offsets", where));

  Status st = layout.Validate();
  if (!st.ok()) return st.WithContext(where);
  return layout;
}

}  // namespace

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
      const std::string at = "[" + std::to_string(i) + "][" + std::to_string(h) + "]";
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

Result<EngramHashLayout> LayoutFromJson(const json& j, uint32_t layer_index) {
  if (!j.is_object()) return Status::InvalidArgument("layout: JSON must be an object");
  auto layers = j.find("layers");
  if (layers != j.end()) {
    if (!layers->is_array()) return FieldError("layers", "must be an array");
    if (layer_index >= layers->size())
      return Status::InvalidArgument("layout: layer index " + std::to_string(layer_index) + " out of range (" +
                                     std::to_string(layers->size()) + " layers)");
    return LayerFromJson((*layers)[layer_index], "layers[" + std::to_string(layer_index) + "]");
  }
  // No "layers": a single layer object, as a table's metadata embeds it.
  if (layer_index != 0)
    return Status::InvalidArgument("layout: a single-layer object has only layer index 0, got " +
                                   std::to_string(layer_index));
  return LayerFromJson(j, "layer");
}

json LayoutToJson(const EngramHashLayout& layout) {
  json j;
  j["layer_id"] = layout.layer_id;
  j["orders"] = layout.orders;
  j["heads"] = layout.heads;
  j["pad_id"] = layout.pad_id;
  json mults = json::array();
  for (int64_t m : layout.multipliers) mults.push_back(std::to_string(m));
  j["multipliers"] = mults;
  j["primes"] = layout.primes;
  j["offsets"] = layout.offsets;
  j["total_rows"] = layout.total_rows;
  return j;
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
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("layout file " + path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::IOError("layout file " + path + ": read failed");
  auto r = FromJson(ss.str(), layer_index);
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

std::string EngramHashLayout::ToJson() const { return LayoutToJson(*this).dump(); }

}  // namespace engram
