// Test helpers: safetensors files assembled byte by byte (length prefix +
// hand-written JSON + data), independent of any writer in this repository,
// with position-dependent contents so every row can be checked.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace engram::testing {

inline std::string Le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A whole safetensors file: the 8-byte JSON length, the JSON, the data.
inline std::string Safetensors(const std::string& header_json, const std::string& data) {
  return Le64(header_json.size()) + header_json + data;
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Distinct, position-dependent bytes for tensor `tag`, row r, byte c.
inline char Byte(int tag, uint64_t r, uint64_t c) { return static_cast<char>((tag * 101 + r * 31 + c * 7 + 1) & 0xff); }

inline std::string Rows(int tag, uint64_t first_row, uint64_t rows, uint64_t row_bytes) {
  std::string s;
  s.reserve(rows * row_bytes);
  for (uint64_t r = first_row; r < first_row + rows; ++r)
    for (uint64_t c = 0; c < row_bytes; ++c) s += Byte(tag, r, c);
  return s;
}

// One member of the header JSON: "name":{"dtype":..,"shape":..,"data_offsets":[begin,end]}.
inline std::string TensorJson(const std::string& name, const std::string& dtype, const std::string& shape,
                              uint64_t begin, uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

// A V4.1-style shard: weight[rows, weight_row] (weight_dtype, 1-byte) then,
// when scale_dtype is not empty, 8 bytes a row of scale (scale_dtype), with a 4-byte U8
// tensor between them and `extra` members (other tensors) in the header.
// Rows hold Rows(1, ...) / Rows(2, ...) numbered from first_row.
inline std::string EngramShard(uint64_t first_row, uint64_t rows, const std::string& weight_dtype = "F8_E4M3",
                               const std::string& scale_dtype = "F8_E8M0", uint64_t weight_row = 256,
                               const std::string& extra = "") {
  const std::string other = "xyzw";
  const std::string w = Rows(1, first_row, rows, weight_row);
  const std::string s = scale_dtype.empty() ? "" : Rows(2, first_row, rows, 8);
  std::string json = "{\"__metadata__\":{\"format\":\"pt\"}," +
                     TensorJson("engram.weight", weight_dtype,
                                "[" + std::to_string(rows) + "," + std::to_string(weight_row) + "]", 0, w.size()) +
                     "," + TensorJson("other", "U8", "[4]", w.size(), w.size() + 4);
  if (!scale_dtype.empty()) {
    // 8 bytes a row whatever the dtype: [rows, 8] of a byte type, [rows, 2] of F32.
    const int cols = scale_dtype == "F32" ? 2 : (scale_dtype == "BF16" || scale_dtype == "F16") ? 4 : 8;
    json += "," + TensorJson("engram.scale", scale_dtype, "[" + std::to_string(rows) + "," + std::to_string(cols) + "]",
                             w.size() + 4, w.size() + 4 + s.size());
  }
  json += extra + "}   ";  // trailing spaces: allowed padding
  return Safetensors(json, w + other + s);
}

}  // namespace engram::testing
