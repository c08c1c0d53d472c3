// Parser for the safetensors header: 8-byte little-endian length N, then N
// bytes of JSON mapping tensor names to {dtype, shape, data_offsets}, with an
// optional "__metadata__" string map. Tensor data follows at 8 + N.
//
// Pure functions over bytes (fuzzable): every length, offset and shape is
// checked, with overflow checks, against the file size; errors are
// Corruption/Unsupported Statuses naming the tensor and field, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engram/status.h"
#include "storage/tensor_info.h"

namespace engram {

// Same bound as the reference implementation: larger headers are rejected
// before anything is allocated for them.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100ull << 20;

struct SafetensorsHeader {
  uint64_t header_bytes = 0;  // N
  uint64_t data_start = 0;    // 8 + N
  std::vector<TensorInfo> tensors;  // in data_offsets order
  std::map<std::string, std::string> metadata;  // "__metadata__"

  const TensorInfo* Find(const std::string& name) const;
};

// Element size of a safetensors dtype, or 0 for an unknown or sub-byte dtype.
uint32_t SafetensorsDtypeBytes(const std::string& dtype);

// Reads N from the first 8 bytes and checks 8 + N <= file_size and the size bound.
Result<uint64_t> SafetensorsHeaderLength(std::span<const std::byte> first8, uint64_t file_size);

// Parses a header. `prefix` holds at least the first 8 + N bytes of the file.
Result<SafetensorsHeader> ParseSafetensorsHeader(std::span<const std::byte> prefix, uint64_t file_size);

// Opens `path` and parses its header (reads only the header bytes).
Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path);

}  // namespace engram
