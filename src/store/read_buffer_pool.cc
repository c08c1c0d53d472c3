#include "src/store/read_buffer_pool.h"

#include <algorithm>
#include <utility>

#include "storage/log.h"

namespace engram {

Result<std::unique_ptr<ReadBufferPool>> ReadBufferPool::Create(size_t bytes, size_t reads_in_flight,
                                                               io::IoEngine& engine) {
  std::unique_ptr<ReadBufferPool> pool(new ReadBufferPool(engine));
  pool->max_slabs_ = bytes / kSlabBytes;
  pool->ring_chunks_ = 2 * std::max<size_t>(1, (reads_in_flight + kChunkBlocks - 1) / kChunkBlocks);
  {
    MutexLock lock(&pool->mu_);  // nobody else has the pool yet; the lock satisfies the analysis
    pool->slabs_.reserve(pool->max_slabs_);
  }
  return pool;
}

size_t ReadBufferPool::chunks_made() const {
  MutexLock lock(&mu_);
  return slabs_.size() * kSlabChunks;
}

bool ReadBufferPool::Grow() {
  // One grower at a time, and never under mu_: registering goes through the
  // engine's ring thread, which may itself be returning a lease (a batch's
  // last reference can drop there), and Return must never wait for the ring.
  MutexLock grow(&grow_mu_);
  {
    MutexLock lock(&mu_);
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
        log::Info("store: read buffers not registered with the I/O engine ({})", s.ToString());
      }
    }
  }
  MutexLock lock(&mu_);
  // Pushed high first so chunks go out low first: a lightly loaded store keeps
  // touching the same few (warm in the TLB and the CPU caches).
  for (size_t c = kSlabChunks; c-- > 0;) free_.push_back(slab->data() + c * kChunkBytes);
  slabs_.push_back(std::move(slab).value());
  return true;
}

Result<ReadBufferPool::Lease> ReadBufferPool::Acquire(size_t blocks) {
  Lease lease;
  ENGRAM_RETURN_IF_ERROR(Extend(lease, blocks));
  return lease;
}

Status ReadBufferPool::Extend(Lease& lease, size_t blocks) {
  lease.pool_ = this;
  const size_t chunks = (blocks + kChunkBlocks - 1) / kChunkBlocks;
  if (chunks <= lease.chunks_.size()) return Status::OK();
  if (growths_before_failure_.load(std::memory_order_relaxed) >= 0 &&
      growths_before_failure_.fetch_sub(1, std::memory_order_relaxed) <= 0) {
    return Status::ResourceExhausted("read buffers: injected failure (testing)");
  }
  const size_t had = lease.chunks_.size();
  for (;;) {
    {
      MutexLock lock(&mu_);
      const size_t take = std::min(chunks - lease.chunks_.size(), free_.size());
      lease.chunks_.insert(lease.chunks_.end(), free_.end() - take, free_.end());
      free_.resize(free_.size() - take);
    }
    if (lease.chunks_.size() == chunks || !Grow()) break;
  }
  lease.arena_.insert(lease.arena_.end(), lease.chunks_.begin() + had, lease.chunks_.end());
  if (lease.chunks_.size() < chunks) {
    // At the cap: the rest from the heap, in one piece per Extend (a gather
    // that extends chunk by chunk gets one allocation per chunk).
    const size_t rest = chunks - lease.chunks_.size();
    Result<io::AlignedBuffer> extra = io::AlignedBuffer::Allocate(rest * kChunkBytes);
    if (!extra.ok()) {
      // Back to what it was: the arena chunks just taken are returned.
      Return(std::span<std::byte* const>(lease.chunks_.data() + had, lease.chunks_.size() - had));
      lease.arena_.resize(lease.arena_.size() - (lease.chunks_.size() - had));
      lease.chunks_.resize(had);
      return extra.status();
    }
    for (size_t c = 0; c < rest; ++c) lease.chunks_.push_back(extra->data() + c * kChunkBytes);
    lease.heap_.push_back(std::move(extra).value());
    heap_chunks_.fetch_add(rest, std::memory_order_relaxed);
  }
  return Status::OK();
}

void ReadBufferPool::Return(std::span<std::byte* const> chunks) {
  MutexLock lock(&mu_);
  free_.insert(free_.end(), chunks.begin(), chunks.end());
}

ReadBufferPool::Lease::Lease(Lease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      chunks_(std::move(other.chunks_)),
      arena_(std::move(other.arena_)),
      heap_(std::move(other.heap_)) {}

ReadBufferPool::Lease& ReadBufferPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = std::exchange(other.pool_, nullptr);
    chunks_ = std::move(other.chunks_);
    arena_ = std::move(other.arena_);
    heap_ = std::move(other.heap_);
  }
  return *this;
}

void ReadBufferPool::Lease::Release() {
  if (pool_ != nullptr && !arena_.empty()) pool_->Return(arena_);
  pool_ = nullptr;
  chunks_.clear();
  arena_.clear();
  heap_.clear();
}

}  // namespace engram
