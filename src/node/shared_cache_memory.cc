#include "src/node/shared_cache_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace engram::node {
namespace {

uint64_t RoundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

}  // namespace

SharedMapping::~SharedMapping() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

SharedMapping::SharedMapping(SharedMapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

SharedMapping& SharedMapping::operator=(SharedMapping&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Result<SharedMapping> SharedMapping::Map(int fd, uint64_t bytes, bool writable) {
  if (bytes == 0) return Status::InvalidArgument("shared cache memory: an empty mapping");
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno("shared cache memory: fstat", errno);
  if (static_cast<uint64_t>(st.st_size) < bytes) {
    return Status::InvalidArgument("shared cache memory: the file holds " + std::to_string(st.st_size) +
                                   " B, the service announced " + std::to_string(bytes) + " B");
  }
  // Reserve an address range one huge page larger, and map the file at its
  // first 2 MiB boundary, so that huge pages can back the mapping.
  void* reserve = ::mmap(nullptr, bytes + kHugePageBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                         -1, 0);
  if (reserve == MAP_FAILED) return Status::FromErrno("shared cache memory: reserve address space", errno);
  auto* start = reinterpret_cast<uint8_t*>(RoundUp(reinterpret_cast<uintptr_t>(reserve), kHugePageBytes));
  const int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
  void* mapped = ::mmap(start, bytes, prot, MAP_SHARED | MAP_FIXED, fd, 0);
  if (mapped == MAP_FAILED) {
    const int err = errno;
    ::munmap(reserve, bytes + kHugePageBytes);
    return Status::FromErrno("shared cache memory: map", err);
  }
  // Give back the reserve around the mapping.
  auto* r = static_cast<uint8_t*>(reserve);
  if (start > r) ::munmap(r, static_cast<size_t>(start - r));
  uint8_t* end = start + bytes;
  uint8_t* reserve_end = r + bytes + kHugePageBytes;
  if (reserve_end > end) ::munmap(end, static_cast<size_t>(reserve_end - end));
  SharedMapping m;
  m.data_ = start;
  m.size_ = bytes;
  return m;
}

SharedCacheMemory::~SharedCacheMemory() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<SharedCacheMemory>> SharedCacheMemory::Create(uint64_t bytes, int gid) {
  bytes = RoundUp(std::max<uint64_t>(bytes, 1), kHugePageBytes);
  std::unique_ptr<SharedCacheMemory> m(new SharedCacheMemory());
  m->fd_ = ::memfd_create("engram-served-cache", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (m->fd_ < 0) return Status::FromErrno("shared cache memory: memfd_create", errno);
  if (::fchmod(m->fd_, 0640) != 0) return Status::FromErrno("shared cache memory: chmod 0640", errno);
  if (gid >= 0 && ::fchown(m->fd_, static_cast<uid_t>(-1), static_cast<gid_t>(gid)) != 0) {
    return Status::FromErrno("shared cache memory: chown to group " + std::to_string(gid), errno);
  }
  if (::ftruncate(m->fd_, static_cast<off_t>(bytes)) != 0) {
    return Status::FromErrno("shared cache memory: size to " + std::to_string(bytes) + " B", errno);
  }
  ENGRAM_ASSIGN_OR_RETURN(m->mapping_, SharedMapping::Map(m->fd_, bytes, /*writable=*/true));
  return m;
}

Status SharedCacheMemory::Seal() {
  if (::fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE) != 0) {
    return Status::FromErrno("shared cache memory: seal against writes and resizing", errno);
  }
  return Status::OK();
}

Result<cache::AnonymousMemory> SharedCacheMemory::Allocate(uint64_t bytes, const char* what) {
  if (bytes == 0) return cache::AnonymousMemory();
  const uint64_t at = RoundUp(next_, kHugePageBytes);
  if (at > mapping_.size() || bytes > mapping_.size() - at) {
    return Status::ResourceExhausted(std::string("shared cache memory: no room for the ") + what + " (" +
                                     std::to_string(bytes) + " B at " + std::to_string(at) + " of " +
                                     std::to_string(mapping_.size()) + " B)");
  }
  next_ = at + bytes;
  return cache::AnonymousMemory::Unowned(mapping_.data() + at, bytes);
}

Result<int> SharedCacheMemory::OpenReadOnly() const {
  const std::string path = "/proc/self/fd/" + std::to_string(fd_);
  const int ro = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ro < 0) return Status::FromErrno("shared cache memory: reopen read-only (" + path + ")", errno);
  return ro;
}

}  // namespace engram::node
