#include "src/store/read_buffer_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace engram {

Result<std::unique_ptr<ReadBufferPool>> ReadBufferPool::Create(size_t bytes, io::IoEngine& engine) {
  std::unique_ptr<ReadBufferPool> pool(new ReadBufferPool(engine));
  pool->max_slabs_ = bytes / kSlabBytes;
  pool->slabs_.reserve(pool->max_slabs_);
  return pool;
}

size_t ReadBufferPool::chunks_made() const {
  std::lock_guard lock(mu_);
  return slabs_.size() * kSlabChunks;
}

bool ReadBufferPool::Grow() {
  // One grower at a time, and never under mu_: registering goes through the
  // engine's ring thread, which may itself be returning a lease (a batch's
  // last reference can drop there), and Return must never wait for the ring.
  std::lock_guard grow(grow_mu_);
  {
    std::lock_guard lock(mu_);
    if (!free_.empty()) return true;  // another thread grew, or a lease came back
    if (slabs_.size() >= max_slabs_) return false;
  }
  auto slab = io::AlignedBuffer::Allocate(kSlabBytes);
  if (!slab.ok()) return false;  // the heap fallback will report it
  if (!registration_refused_) {
    Status s = engine_.RegisterBuffer(slab->span());
    if (!s.ok()) {
      registration_refused_ = true;  // stop asking: the next slab would be refused too
      if (s.code() != StatusCode::kUnsupported) {
        spdlog::info("store: read buffers not registered with the I/O engine ({})", s.ToString());
      }
    }
  }
  std::lock_guard lock(mu_);
  // Pushed high first so chunks go out low first: a lightly loaded store keeps
  // touching the same few (warm in the TLB and the CPU caches).
  for (size_t c = kSlabChunks; c-- > 0;) free_.push_back(slab->data() + c * kChunkBytes);
  slabs_.push_back(std::move(slab).value());
  return true;
}

Result<ReadBufferPool::Lease> ReadBufferPool::Acquire(size_t blocks) {
  Lease lease;
  lease.pool_ = this;
  const size_t chunks = (blocks + kChunkBlocks - 1) / kChunkBlocks;
  lease.chunks_.reserve(chunks);
  for (;;) {
    {
      std::lock_guard lock(mu_);
      const size_t take = std::min(chunks - lease.chunks_.size(), free_.size());
      lease.chunks_.insert(lease.chunks_.end(), free_.end() - take, free_.end());
      free_.resize(free_.size() - take);
    }
    if (lease.chunks_.size() == chunks || !Grow()) break;
  }
  lease.arena_chunks_ = lease.chunks_.size();
  if (lease.arena_chunks_ < chunks) {
    // At the cap: the rest from the heap, in one piece.
    const size_t rest = chunks - lease.arena_chunks_;
    ENGRAM_ASSIGN_OR_RETURN(io::AlignedBuffer extra, io::AlignedBuffer::Allocate(rest * kChunkBytes));
    for (size_t c = 0; c < rest; ++c) lease.chunks_.push_back(extra.data() + c * kChunkBytes);
    lease.heap_.push_back(std::move(extra));
    heap_chunks_.fetch_add(rest, std::memory_order_relaxed);
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
