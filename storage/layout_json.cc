// The Engram hash layout's JSON codec (layout-v41.json's layer objects): part
// of the storage layer because a table's metadata embeds its layer's layout.
#include "storage/layout_json.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

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

}  // namespace engram
