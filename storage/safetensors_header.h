// Parser for the safetensors header: 8-byte little-endian length N, then N
// bytes of JSON mapping tensor names to {dtype, shape, data_offsets}, with an
// optional "__metadata__" string map. Tensor data follows at 8 + N.
//
// Pure functions over bytes (fuzzable): every length, offset and shape is
// checked, with overflow checks, against the file size; errors are
// Corruption/Unsupported Statuses naming the tensor and field, never a crash.
//
// Memory: the header is streamed, one tensor entry at a time, never parsed
// into a whole JSON document (which costs over ten times the text: a 55 MB
// header of a large checkpoint took 637 MB). Asked for named tensors, the
// parser keeps only those and 24 bytes per other tensor (for the overlap
// check), so memory stays a small multiple of the header's size.
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
  // In data_offsets order: every tensor, or only the named ones when the
  // parser was given names.
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
  uint64_t tensor_count = 0;  // tensors in the header, kept or not
  // The first kSomeNames tensor names in header order, for messages that
  // say what a file has.
  static constexpr size_t kSomeNames = 8;
  std::vector<std::string> some_names;

  const TensorInfo* Find(const std::string& name) const;
};

// Element size of a safetensors dtype, or 0 for an unknown or sub-byte dtype.
uint32_t SafetensorsDtypeBytes(const std::string& dtype);

// Reads N from the first 8 bytes and checks 8 + N <= file_size and the size bound.
Result<uint64_t> SafetensorsHeaderLength(std::span<const std::byte> first8, uint64_t file_size);

// Parses a header. `prefix` holds at least the first 8 + N bytes of the file.
// Every entry is checked; with `names` given, only those tensors are kept in
// `tensors` (a name that appears twice is Corruption), otherwise all are.
// A dtype this build does not know is Unsupported only for a kept tensor:
// real shards hold attention and expert weights of other dtypes next to the
// table's tensors, and those are ignored (only their data_offsets are checked).
Result<SafetensorsHeader> ParseSafetensorsHeader(std::span<const std::byte> prefix, uint64_t file_size,
                                                 std::span<const std::string> names = {});

// Opens `path` and parses its header (reads only the header bytes).
Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path, std::span<const std::string> names = {});

}  // namespace engram
