// TensorInfo: where one dense, C-ordered, little-endian tensor lives in a
// file, as described by a safetensors or .npy header.
//
// Converters treat a tensor as `rows()` rows of `row_bytes()` bytes each:
// dimension 0 is the row index, the remaining dimensions are one row.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace engram {

struct TensorInfo {
  std::string name;            // tensor name (safetensors) or file name (.npy)
  std::string dtype;           // safetensors spelling: "F8_E4M3", "BF16", "F32", ... (npy: mapped, or "V<n>")
  uint32_t element_bytes = 0;  // bytes per element
  std::vector<uint64_t> shape;
  uint64_t data_offset = 0;    // absolute offset of the first byte in the file
  uint64_t data_bytes = 0;     // product(shape) * element_bytes (validated)

  // A 0-d tensor is one row of one element.
  uint64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  // Validated by the parsers (TensorDataBytes) not to overflow.
  uint64_t row_bytes() const {
    uint64_t b = element_bytes;
    for (size_t i = 1; i < shape.size(); ++i) b *= shape[i];
    return b;
  }
};

// "[384006168, 256]"
std::string ShapeToString(const std::vector<uint64_t>& shape);

// product(shape) * element_bytes, or nullopt if it -- or the bytes of one row,
// element_bytes * product(shape[1:]) -- overflows 64 bits. The row is checked
// on its own because a zero-row tensor has a total of 0 whatever its row
// size: [0, 257, 2^56] must not pass with a row size that wrapped around.
std::optional<uint64_t> TensorDataBytes(uint32_t element_bytes, const std::vector<uint64_t>& shape);

}  // namespace engram
