#include "src/cache/anonymous_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <new>
#include <string>
#include <utility>

namespace engram::cache {

AnonymousMemory::~AnonymousMemory() {
  if (data_ != nullptr && owned_) munmap(data_, size_);
}

AnonymousMemory::AnonymousMemory(AnonymousMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owned_(std::exchange(other.owned_, true)) {}

AnonymousMemory& AnonymousMemory::operator=(AnonymousMemory&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr && owned_) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owned_ = std::exchange(other.owned_, true);
  }
  return *this;
}

AnonymousMemory AnonymousMemory::Unowned(uint8_t* data, uint64_t size) {
  AnonymousMemory m;
  m.data_ = data;
  m.size_ = size;
  m.owned_ = false;
  return m;
}

Result<AnonymousMemory> AnonymousMemory::Allocate(uint64_t bytes, const char* what) {
  AnonymousMemory m;
  if (bytes == 0) return m;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return Status::FromErrno("row cache: allocate " + std::to_string(bytes) + " bytes for the " + what, errno);
  }
  m.data_ = static_cast<uint8_t*>(p);
  m.size_ = bytes;
  return m;
}

AnonymousMemory AnonymousMemory::AllocateOrThrow(uint64_t bytes, const char* what) {
  Result<AnonymousMemory> m = Allocate(bytes, what);
  if (!m.ok()) throw std::bad_alloc();
  return std::move(m).value();
}

}  // namespace engram::cache
