#include "storage/tensor_info.h"

namespace engram {

std::string ShapeToString(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::optional<uint64_t> TensorDataBytes(uint32_t element_bytes, const std::vector<uint64_t>& shape) {
  uint64_t row = element_bytes;
  for (size_t i = 1; i < shape.size(); ++i) {
    if (__builtin_mul_overflow(row, shape[i], &row)) return std::nullopt;
  }
  uint64_t total = row;
  if (!shape.empty() && __builtin_mul_overflow(row, shape[0], &total)) return std::nullopt;
  return total;
}

}  // namespace engram
