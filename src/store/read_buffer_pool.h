// ReadBufferPool: the block buffers that gathers and read-ahead read into.
//
// A missed row needs its 4 KiB block read somewhere aligned for O_DIRECT.
// Allocating (and zeroing, and faulting in) a fresh buffer for every gather
// cost more CPU than the reads themselves on a fast device, and memory that
// is new every time cannot be registered with io_uring. So the store keeps
// its block buffers: chunks of kChunkBlocks blocks, carved from slabs that
// are allocated when the chunks in use first need them (opening a store
// commits nothing) up to a cap, registered with the I/O engine when it can
// be (fixed-buffer reads), and never freed before the store. A batch of B
// blocks leases ceil(B / kChunkBlocks) chunks, or, for a gather with more
// blocks than early_blocks(), stream_chunks() chunks, which it reads through
// in turn. A gather that submits reads while it is still looking its rows up
// grows its lease a chunk at a time (Extend). Beyond the cap (many large
// gathers at once) the rest comes from the heap, so a gather never waits for
// another one's buffers; but a heap lease costs an allocation and a page fault
// per 4 KiB, more than the read, so the two limits keep gathers in the arena:
// eight gathers of early_blocks() fit in it, and a streaming gather's ring
// only covers the reads it can have in flight.
//
// Old bytes in a reused chunk are never seen: a block is only read from
// after its read succeeded in full and its checksum matched.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "engram/status.h"
#include "storage/io/aligned_buffer.h"
#include "storage/io/io_engine.h"
#include "storage/mutex.h"

namespace engram {

class ReadBufferPool {
 public:
  static constexpr size_t kChunkBlocks = 64;  // 256 KiB: one chunk covers a 24-row decode step's misses
  static constexpr size_t kChunkBytes = kChunkBlocks * io::kBlockSize;
  static constexpr size_t kSlabChunks = 8;  // 2 MiB per slab: at most 16 registrations for the default cap
  static constexpr size_t kSlabBytes = kSlabChunks * kChunkBytes;

  // Keeps at most `bytes` (rounded down to whole slabs; 0 = heap only) of
  // chunks, each slab registered with `engine` as it is made if the engine
  // supports it (an optimization: a refusal is logged once and reads go
  // unregistered). `reads_in_flight`: the most reads the engine runs at once
  // (its queue depth), which sizes stream_chunks().
  static Result<std::unique_ptr<ReadBufferPool>> Create(size_t bytes, size_t reads_in_flight, io::IoEngine& engine);

  // The most distinct rows (so at most as many blocks) of a gather that
  // reads while it is still looking its rows up, holding every block until
  // it ends: an eighth of the cap, in blocks. 0 when the cap is 0 (heap
  // only: every gather does).
  size_t early_blocks() const { return max_slabs_ * kSlabChunks / 8 * kChunkBlocks; }
  // Chunks a gather missing more blocks than early_blocks() streams its reads
  // through: twice the chunks the engine's reads in flight fill, so one chunk
  // is checked while the next ones are read, and at most half the cap (two
  // such gathers at once still read into the arena); 0 when the cap is 0.
  size_t stream_chunks() const {
    return max_slabs_ == 0 ? 0 : std::min(ring_chunks_, max_slabs_ * kSlabChunks / 2);
  }

  // Blocks leased for one batch; returns its arena chunks when destroyed.
  // A lease of fewer chunks than its batch has blocks for is a ring: block b
  // is in chunk (b / kChunkBlocks) mod the lease's chunks, and the batch
  // reads a chunk only once the one before it in that place is done with.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&&) noexcept;
    Lease& operator=(Lease&&) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { Release(); }

    std::byte* Block(size_t b) const {
      size_t c = b / kChunkBlocks;
      if (c >= chunks_.size()) c %= chunks_.size();  // a ring; no division on the usual path
      return chunks_[c] + (b % kChunkBlocks) * io::kBlockSize;
    }
    void Release();

   private:
    friend class ReadBufferPool;
    ReadBufferPool* pool_ = nullptr;
    std::vector<std::byte*> chunks_;       // in block order
    std::vector<std::byte*> arena_;        // those of chunks_ that go back to the arena
    std::vector<io::AlignedBuffer> heap_;  // the rest, owned here
  };

  // Room for `blocks` blocks (> 0); ResourceExhausted if the heap fallback fails.
  Result<Lease> Acquire(size_t blocks);
  // Grows `lease` (empty, or one of this pool's that is not a ring) to room
  // for `blocks` blocks; the blocks it had keep their place. On failure the
  // lease is as it was.
  Status Extend(Lease& lease, size_t blocks);

  // Chunks made so far (in use or free).
  size_t chunks_made() const;
  // Chunks leased from the heap so far, because the arena was at its cap.
  size_t heap_chunks_leased() const { return heap_chunks_.load(std::memory_order_relaxed); }

  // Testing: the next `n` calls of Extend (or Acquire) that must add chunks
  // succeed, every later one fails with ResourceExhausted, as if memory had
  // run out. A negative n turns that off.
  void FailGrowthAfterForTesting(int64_t n) { growths_before_failure_.store(n, std::memory_order_relaxed); }

 private:
  explicit ReadBufferPool(io::IoEngine& engine) : engine_(engine) {}
  void Return(std::span<std::byte* const> chunks);
  // Makes one more slab of free chunks if the cap allows; false if not.
  bool Grow();

  io::IoEngine& engine_;
  size_t max_slabs_ = 0;
  size_t ring_chunks_ = 0;  // 2 x ceil(reads in flight / kChunkBlocks)
  Mutex grow_mu_;                 // serializes Grow
  bool registration_refused_ GUARDED_BY(grow_mu_) = false;
  std::atomic<size_t> heap_chunks_{0};
  std::atomic<int64_t> growths_before_failure_{-1};  // FailGrowthAfterForTesting
  mutable Mutex mu_;
  std::vector<io::AlignedBuffer> slabs_ GUARDED_BY(mu_);
  std::vector<std::byte*> free_ GUARDED_BY(mu_);
};

}  // namespace engram
