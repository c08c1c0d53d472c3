// Typed members of the JSON of stored formats (reference table metadata,
// rank manifests): each returns the member's value, or Corruption
// "<format>: <where> has no ..." naming the member, so every parser words
// its errors the same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engram/status.h"
#include "storage/reference_layout.h"

namespace engram {

// A JSON integer >= 0 (nlohmann stores small non-negative literals as unsigned
// or signed, depending on how the value was made).
inline bool IsU64(const nlohmann::json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

inline Result<uint64_t> U64Field(const nlohmann::json& obj, const char* key, const std::string& where,
                                 std::string_view format) {
  auto it = obj.find(key);
  if (it == obj.end() || !IsU64(*it)) {
    return Status::Corruption(std::string(format) + ": " + where + " has no non-negative integer \"" + key + "\"");
  }
  return it->get<uint64_t>();
}

// A member written by Hex64: "0x" and 16 lower-case hex digits.
inline Result<uint64_t> Hex64Field(const nlohmann::json& obj, const char* key, const std::string& where,
                                   std::string_view format) {
  auto it = obj.find(key);
  uint64_t v = 0;
  if (it == obj.end() || !it->is_string() || !ParseHex64(it->get<std::string>(), &v)) {
    return Status::Corruption(std::string(format) + ": " + where + " has no \"" + key +
                              "\" of the form \"0x\" and 16 hex digits");
  }
  return v;
}

}  // namespace engram
