#include "storage/io/mmap_engine.h"

#include <sys/mman.h>

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
      maps_(new std::atomic<const std::byte*>[options.max_open_files]) {
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

Status MmapEngine::ReadOne(const OpenedFile& file, const BlockRead& read) {
  const std::byte* base = maps_[read.file].load(std::memory_order_acquire);
  if (base == nullptr) return Status::Internal("mmap '" + file.path + "': file is not mapped");
  // Validation guarantees offset < size; copy what exists, zero the tail.
  const uint64_t n = std::min<uint64_t>(read.length, file.size - read.offset);
  std::memcpy(read.dst, base + read.offset, n);
  if (n < read.length) std::memset(read.dst + n, 0, read.length - n);
  return Status::OK();
}

}  // namespace engram::io
