#include "storage/io/mmap_engine.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace engram::io {

Result<std::unique_ptr<IoEngine>> MmapEngine::Create(const IoOptions& options) {
  std::unique_ptr<MmapEngine> engine(new MmapEngine(options));
  engine->StartWorkers();
  return std::unique_ptr<IoEngine>(std::move(engine));
}

MmapEngine::MmapEngine(const IoOptions& options)
    : WorkerPoolEngine(options, /*want_direct_io=*/false),
      maps_(new std::atomic<const std::byte*>[options.max_open_files]),
      self_(::getpid()) {
  for (uint32_t i = 0; i < options.max_open_files; ++i) maps_[i].store(nullptr, std::memory_order_relaxed);
}

MmapEngine::~MmapEngine() {
  Shutdown();
  for (uint32_t i = 0; i < options_.max_open_files; ++i) {
    if (const OpenedFile* f = files_.Get(i)) OnFileClosing(i, *f);
  }
}

std::string MmapEngine::Describe() const {
  return "mmap(threads=" + std::to_string(options_.threads) + ", MADV_RANDOM)";
}

Status MmapEngine::OnFileOpened(FileId id, const OpenedFile& file) {
  if (file.size == 0) return Status::OK();
  void* p = ::mmap(nullptr, file.size, PROT_READ, MAP_SHARED, file.fd, 0);
  if (p == MAP_FAILED) return Status::FromErrno("mmap '" + file.path + "'", errno);
  // Table reads are random: read-ahead around each fault would only evict useful pages.
  (void)::madvise(p, file.size, MADV_RANDOM);
  maps_[id].store(static_cast<const std::byte*>(p), std::memory_order_release);
  return Status::OK();
}

void MmapEngine::OnFileClosing(FileId id, const OpenedFile& file) {
  const std::byte* p = maps_[id].exchange(nullptr, std::memory_order_acq_rel);
  if (p != nullptr) ::munmap(const_cast<std::byte*>(p), file.size);
}

// Why not memcpy from the mapping: touching a page of a MAP_SHARED mapping
// past the file's current end (the file was truncated while open), or one the
// kernel cannot read (EIO), raises SIGBUS, which kills the process. Checking
// the size with fstat first would still race with a concurrent truncate, and
// catching SIGBUS needs a process-wide handler that an embedding runtime may
// own. So the copy goes through process_vm_readv on our own address space: the
// kernel faults the same mapping in (same page cache, same MADV_RANDOM), but a
// page it cannot provide fails the call with EFAULT instead of signalling.
// That costs one syscall per block, the price of never crashing. Where
// process_vm_readv is unavailable (seccomp, a kernel built without it) the
// block is pread from the file descriptor, which is just as safe.
Status MmapEngine::ReadOne(const OpenedFile& file, const BlockRead& read) {
  const std::byte* base = maps_[read.file].load(std::memory_order_acquire);
  if (base == nullptr) return Status::Internal("mmap '" + file.path + "': file is not mapped");
  // Validation guarantees offset < size; copy what exists, zero the tail.
  const uint64_t n = std::min<uint64_t>(read.length, file.size - read.offset);
  uint64_t done = 0;
  while (done < n) {
    const uint64_t offset = read.offset + done;
    ssize_t got = -1;
    int err = 0;
    if (!use_pread_.load(std::memory_order_relaxed)) {
      iovec local{read.dst + done, static_cast<size_t>(n - done)};
      iovec remote{const_cast<std::byte*>(base + offset), static_cast<size_t>(n - done)};
      got = ::process_vm_readv(self_, &local, 1, &remote, 1, 0);
      if (got < 0) err = errno;
      if (got < 0 && (err == ENOSYS || err == EPERM)) {
        use_pread_.store(true, std::memory_order_relaxed);
        continue;
      }
    } else {
      got = ::pread(file.fd, read.dst + done, static_cast<size_t>(n - done), static_cast<off_t>(offset));
      if (got < 0) err = errno;
    }
    if (got < 0 && (err == EINTR || err == EAGAIN)) continue;
    if (got == 0 || (got < 0 && err == EFAULT)) {
      // The page is gone from the file (truncated) or the kernel could not read it.
      const std::string where = "mmap '" + file.path + "' offset " + std::to_string(offset);
      struct stat st {};
      if (::fstat(file.fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= file.size) {
        return Status::IOError(where + ": the kernel could not read the mapped page (I/O error)");
      }
      return Status::IOError(where + ": unexpected end of file (file size was " + std::to_string(file.size) +
                             " at open; was it truncated?)");
    }
    if (got < 0) return Status::FromErrno("mmap '" + file.path + "' offset " + std::to_string(offset), err);
    done += static_cast<uint64_t>(got);
  }
  if (n < read.length) std::memset(read.dst + n, 0, read.length - n);
  return Status::OK();
}

}  // namespace engram::io
