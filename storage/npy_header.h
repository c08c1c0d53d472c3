// Parser for NumPy .npy headers (format versions 1.0, 2.0 and 3.0).
//
//   "\x93NUMPY" major minor  header_len (u16 LE for v1, u32 LE for v2/v3)
//   header: a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
//   data: C-ordered array bytes
//
// Only what a table converter can use is accepted: little-endian (or
// single-byte) numeric / raw-byte dtypes in C order. Fortran order, big-endian
// and object/structured dtypes get a clear Unsupported error. Pure functions
// over bytes (fuzzable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "engram/status.h"
#include "storage/tensor_info.h"

namespace engram {

inline constexpr uint64_t kNpyMaxHeaderBytes = 1u << 20;

// Total header size (magic + length field + dict) from the first 12 bytes,
// checked against file_size.
Result<uint64_t> NpyHeaderLength(std::span<const std::byte> prefix, uint64_t file_size);

// Parses the header in `prefix` (which holds at least NpyHeaderLength bytes).
// The returned tensor's name is empty; data_offset is the header size.
// The file must be exactly header + data bytes long.
Result<TensorInfo> ParseNpyHeader(std::span<const std::byte> prefix, uint64_t file_size);

// Opens `path` and parses its header; the tensor is named after the file.
Result<TensorInfo> ReadNpyHeader(const std::string& path);

}  // namespace engram
