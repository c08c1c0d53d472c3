// AnonymousMemory: a zero-filled, page-aligned region from mmap.
//
// The cache index and row slab come from here rather than new[]: the kernel
// hands out zero pages lazily, so creating a 1.4M-row emulator index or a
// 1 GiB cache costs no memset, and untouched slots cost no RSS.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engram/status.h"

namespace engram::cache {

class AnonymousMemory {
 public:
  AnonymousMemory() = default;
  ~AnonymousMemory();
  AnonymousMemory(AnonymousMemory&& other) noexcept;
  AnonymousMemory& operator=(AnonymousMemory&& other) noexcept;
  AnonymousMemory(const AnonymousMemory&) = delete;
  AnonymousMemory& operator=(const AnonymousMemory&) = delete;

  // bytes may be 0 (an empty region, data() == nullptr). `what` names the
  // region in the error message.
  static Result<AnonymousMemory> Allocate(uint64_t bytes, const char* what);

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace engram::cache
