// MmapEngine: copies blocks out of a read-only MAP_SHARED mapping of each
// file (MADV_RANDOM, so the kernel does not read ahead around every fault).
//
// When NOT to use it:
//  - On unified-memory hosts (GB10 / DGX Spark, Grace-Hopper, APUs) the page
//    cache that backs the mapping competes with GPU memory for the same DRAM;
//    use io_uring or pread with O_DIRECT and let the row cache hold hot rows.
//  - Page faults block the calling thread (no queue depth: one outstanding
//    read per thread), so cold random reads are much slower than io_uring.
//  - Blocks are copied out with process_vm_readv (one syscall per block, see
//    ReadOne) rather than memcpy, so that a file truncated while open, or an
//    I/O error while faulting the mapping, fails the read with IOError
//    instead of killing the process with SIGBUS.
// Good for: warm, page-cache-resident tables on hosts with spare RAM, and as
// a baseline in benchmarks.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>

#include "storage/io/worker_pool_engine.h"

namespace engram::io {

class MmapEngine final : public WorkerPoolEngine {
 public:
  static Result<std::unique_ptr<IoEngine>> Create(const IoOptions& options);
  ~MmapEngine() override;

  IoBackend backend() const override { return IoBackend::kMmap; }
  std::string Describe() const override;

 protected:
  Status ReadOne(const OpenedFile& file, const BlockRead& read) override;
  Status OnFileOpened(FileId id, const OpenedFile& file) override;
  void OnFileClosing(FileId id, const OpenedFile& file) override;

 private:
  explicit MmapEngine(const IoOptions& options);
  // Mapping of each open FileId (nullptr for empty files).
  std::unique_ptr<std::atomic<const std::byte*>[]> maps_;
  const pid_t self_;
  // Set once process_vm_readv turns out to be unavailable (seccomp, ENOSYS).
  std::atomic<bool> use_pread_{false};
};

}  // namespace engram::io
