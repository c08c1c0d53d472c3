// AnonymousMemory: a zero-filled, page-aligned region from mmap.
//
// Every array of the row cache (index, row slab, frequency sketch, ghost
// history) comes from here rather than new[]: the kernel hands out zero
// pages lazily, so creating a 1.4M-row emulator index or a 1 GiB cache costs
// no memset, and memory is committed as rows arrive (or all at once by
// RowCache::CommitMemory, which a store calls in the background). Structures that need zero-initialised counters rely on
// fresh anonymous pages being zero; they access the bytes through
// std::atomic_ref, never by constructing atomics over them (which would
// touch every page).
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
  // For constructors, which cannot return a Status: throws std::bad_alloc
  // when the region cannot be mapped (SetAssociativeRowCache::Make turns
  // that into ResourceExhausted).
  static AnonymousMemory AllocateOrThrow(uint64_t bytes, const char* what);
  // A region of a mapping someone else owns and unmaps (the node service's
  // shared cache memory, src/node/shared_cache_memory.h): zero-filled like
  // fresh anonymous memory, and not unmapped here.
  static AnonymousMemory Unowned(uint8_t* data, uint64_t size);

  // Huge pages are not asked for at allocation: a huge page is committed
  // whole on first touch, so rows scattered by hash over a fresh region would
  // commit all of it after a few thousand inserts. The row cache promotes its
  // arrays once they are mostly committed anyway (HugePagePromotion).

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool owned_ = true;
};

}  // namespace engram::cache
