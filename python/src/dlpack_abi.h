// The DLPack C ABI (https://github.com/dmlc/dlpack, include/dlpack/dlpack.h,
// versions 0.5-0.8, which torch and numpy exchange through __dlpack__): the
// few structs a consumer reads. Debian ships no dlpack header; these layouts
// are frozen by the standard.
#pragma once

#include <cstdint>

namespace engram::python {

struct DLDevice {
  int32_t device_type;  // 1 = kDLCPU, 3 = kDLCUDAHost (pinned host memory)
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;  // 0 = int, 1 = uint, 2 = float, 4 = bfloat, 6 = bool
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null = compact row-major
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

constexpr int32_t kDLCPU = 1;
constexpr int32_t kDLCUDAHost = 3;
constexpr uint8_t kDLInt = 0;
constexpr uint8_t kDLUInt = 1;
constexpr uint8_t kDLFloat = 2;
constexpr uint8_t kDLBool = 6;

}  // namespace engram::python
