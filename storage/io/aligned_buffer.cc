#include "storage/io/aligned_buffer.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace engram::io {

Result<AlignedBuffer> AlignedBuffer::Allocate(size_t size, size_t alignment) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) {
    return Status::InvalidArgument("aligned buffer: alignment " + std::to_string(alignment) +
                                   " is not a power of two >= " + std::to_string(sizeof(void*)));
  }
  if (size == 0) return AlignedBuffer();
  // Round the allocation up so the tail of the last block is also ours
  // (refused if the rounding would wrap round to a small size).
  if (size > SIZE_MAX - (alignment - 1)) {
    return Status::ResourceExhausted("aligned buffer: cannot allocate " + std::to_string(size) + " bytes");
  }
  const size_t rounded = AlignUp(size, alignment);
  void* p = nullptr;
  if (int rc = posix_memalign(&p, alignment, rounded); rc != 0) {
    return Status::ResourceExhausted("aligned buffer: cannot allocate " + std::to_string(rounded) +
                                     " bytes aligned to " + std::to_string(alignment));
  }
  std::memset(p, 0, rounded);
  return AlignedBuffer(static_cast<std::byte*>(p), size);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

}  // namespace engram::io
