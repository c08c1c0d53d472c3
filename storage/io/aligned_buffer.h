// AlignedBuffer: heap memory aligned for O_DIRECT block reads.
//
// O_DIRECT requires the destination address, the file offset and the length
// to be multiples of the device's logical block size. Engram always uses
// 4 KiB (kBlockSize), which satisfies every NVMe/SATA logical block size in
// use today, so one constant serves all backends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "engram/status.h"

namespace engram::io {

// Alignment and granularity of every block read: offsets, lengths and
// destination addresses must all be multiples of this.
inline constexpr size_t kBlockSize = 4096;

inline bool IsAligned(uint64_t value, size_t alignment) { return value % alignment == 0; }
inline bool IsAligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}
inline uint64_t AlignUp(uint64_t value, size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// Owns `size` bytes aligned to `alignment` (a power of two, >= sizeof(void*)).
// Move-only. The memory is zero-filled so a buffer never leaks old heap bytes
// into a block that a failed read left untouched.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  static Result<AlignedBuffer> Allocate(size_t size, size_t alignment = kBlockSize);

  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<std::byte> span() { return {data_, size_}; }
  std::span<const std::byte> span() const { return {data_, size_}; }

 private:
  AlignedBuffer(std::byte* data, size_t size) : data_(data), size_(size) {}
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace engram::io
