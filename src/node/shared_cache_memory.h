// SharedCacheMemory: the node service's row-cache memory, shared with its
// clients.
//
// One memfd holds every table's cache index and row slab; each region starts
// on a 2 MiB boundary, so that the service and every client map it with huge
// pages (MADV_COLLAPSE works on shared memory whatever
// /sys/kernel/mm/transparent_hugepage/shmem_enabled says, and a mapping at a
// 2 MiB-aligned address then faults whole huge pages in). The file is sized
// once, sparsely: only what the caches touch is memory. It lives in no file
// system (no /dev/shm size limit applies) and is charged to the service, the
// first to touch it; a client's mapping of the same pages adds nothing to
// the node's memory, and its PSS share is its fraction of the pages.
//
// Clients receive a read-only descriptor (a new open file description of the
// memfd, opened O_RDONLY) and map it PROT_READ: a client cannot write the
// caches, so a client that dies holds no lock and leaves no half-written row.
// Read-only holds even against a client that reopens its descriptor through
// /proc/self/fd: the file is 0640 (group members may not open it for
// writing), and once the caches are placed it is sealed (F_SEAL_SHRINK,
// F_SEAL_GROW, F_SEAL_FUTURE_WRITE), so no new writable mapping or write()
// of it succeeds for anyone, and it cannot shrink under a client's mapping.
// Only the service's own mapping, made before the seal, writes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engram/status.h"
#include "src/cache/anonymous_memory.h"

namespace engram::node {

inline constexpr uint64_t kHugePageBytes = uint64_t{2} << 20;

// A mapping of a memfd at a 2 MiB-aligned address, unmapped when destroyed.
class SharedMapping {
 public:
  SharedMapping() = default;
  ~SharedMapping();
  SharedMapping(SharedMapping&& other) noexcept;
  SharedMapping& operator=(SharedMapping&& other) noexcept;
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;

  // Maps bytes of fd at offset 0; writable or read-only. Fails if the file
  // is shorter than bytes (a mapping past its end would fault on access).
  static Result<SharedMapping> Map(int fd, uint64_t bytes, bool writable);

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

class SharedCacheMemory {
 public:
  ~SharedCacheMemory();

  // A memfd of `bytes` (rounded up to 2 MiB), mode 0640 and owned by group
  // `gid` when gid >= 0, mapped read-write.
  static Result<std::unique_ptr<SharedCacheMemory>> Create(uint64_t bytes, int gid);
  // Seals the file against writes other than through the existing mapping,
  // and against any change of size. Call once the regions are placed.
  Status Seal();

  // The next zero-filled, 2 MiB-aligned region of `bytes`, as the row
  // caches' region allocator (cache::CacheRegionAllocator) wants it.
  Result<cache::AnonymousMemory> Allocate(uint64_t bytes, const char* what);
  // Where p (inside the mapping) is in the file.
  uint64_t OffsetOf(const uint8_t* p) const { return static_cast<uint64_t>(p - mapping_.data()); }
  uint64_t size() const { return mapping_.size(); }
  uint64_t allocated() const { return next_; }
  // A new read-only descriptor of the memory, for a client (the caller
  // closes it once sent).
  Result<int> OpenReadOnly() const;

 private:
  SharedCacheMemory() = default;

  int fd_ = -1;
  SharedMapping mapping_;
  uint64_t next_ = 0;  // bump allocation: regions are made once, at open
};

}  // namespace engram::node
