#include "src/store/read_buffer_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace engram {

Result<std::unique_ptr<ReadBufferPool>> ReadBufferPool::Create(size_t bytes, io::IoEngine& engine) {
  std::unique_ptr<ReadBufferPool> pool(new ReadBufferPool());
  pool->arena_chunks_ = bytes / kChunkBytes;
  if (pool->arena_chunks_ == 0) return pool;
  ENGRAM_ASSIGN_OR_RETURN(pool->arena_, io::AlignedBuffer::Allocate(pool->arena_chunks_ * kChunkBytes));
  pool->free_.reserve(pool->arena_chunks_);
  // Handed out in address order, low first, so a lightly loaded store keeps
  // touching the same few chunks (warm in the TLB and the CPU caches).
  for (size_t c = pool->arena_chunks_; c-- > 0;) pool->free_.push_back(pool->arena_.data() + c * kChunkBytes);
  Status s = engine.RegisterBuffer(pool->arena_.span());
  pool->registered_ = s.ok();
  if (!s.ok() && s.code() != StatusCode::kUnsupported) {
    spdlog::info("store: read buffers not registered with the I/O engine ({})", s.ToString());
  }
  return pool;
}

Result<ReadBufferPool::Lease> ReadBufferPool::Acquire(size_t blocks) {
  Lease lease;
  lease.pool_ = this;
  const size_t chunks = (blocks + kChunkBlocks - 1) / kChunkBlocks;
  lease.chunks_.reserve(chunks);
  {
    std::lock_guard lock(mu_);
    const size_t take = std::min(chunks, free_.size());
    lease.chunks_.assign(free_.end() - take, free_.end());
    free_.resize(free_.size() - take);
  }
  lease.arena_chunks_ = lease.chunks_.size();
  if (lease.arena_chunks_ < chunks) {
    // The arena is busy: the rest from the heap, in one piece.
    const size_t rest = chunks - lease.arena_chunks_;
    ENGRAM_ASSIGN_OR_RETURN(io::AlignedBuffer extra, io::AlignedBuffer::Allocate(rest * kChunkBytes));
    for (size_t c = 0; c < rest; ++c) lease.chunks_.push_back(extra.data() + c * kChunkBytes);
    lease.heap_.push_back(std::move(extra));
  }
  return lease;
}

void ReadBufferPool::Return(std::span<std::byte* const> chunks) {
  std::lock_guard lock(mu_);
  free_.insert(free_.end(), chunks.begin(), chunks.end());
}

ReadBufferPool::Lease::Lease(Lease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      chunks_(std::move(other.chunks_)),
      arena_chunks_(std::exchange(other.arena_chunks_, 0)),
      heap_(std::move(other.heap_)) {}

ReadBufferPool::Lease& ReadBufferPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = std::exchange(other.pool_, nullptr);
    chunks_ = std::move(other.chunks_);
    arena_chunks_ = std::exchange(other.arena_chunks_, 0);
    heap_ = std::move(other.heap_);
  }
  return *this;
}

void ReadBufferPool::Lease::Release() {
  if (pool_ != nullptr && arena_chunks_ > 0) {
    pool_->Return(std::span<std::byte* const>(chunks_.data(), arena_chunks_));
  }
  pool_ = nullptr;
  chunks_.clear();
  arena_chunks_ = 0;
  heap_.clear();
}

}  // namespace engram
