// ReadBufferPool: the block buffers that gathers and read-ahead read into.
//
// A missed row needs its 4 KiB block read somewhere aligned for O_DIRECT.
// Allocating (and zeroing, and faulting in) a fresh buffer for every gather
// cost more CPU than the reads themselves on a fast device, and memory that
// is new every time cannot be registered with io_uring. So the store owns
// one arena, allocated once and registered with the I/O engine when it can
// be (fixed-buffer reads), cut into chunks of kChunkBlocks blocks. A batch
// of B blocks leases ceil(B / kChunkBlocks) chunks; when the arena is
// exhausted (many large gathers at once) the rest comes from the heap, so a
// gather never waits for another one's buffers.
//
// Old bytes in a reused chunk are never seen: a block is only read from
// after its read succeeded in full and its checksum matched.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "engram/status.h"
#include "storage/io/aligned_buffer.h"
#include "storage/io/io_engine.h"

namespace engram {

class ReadBufferPool {
 public:
  static constexpr size_t kChunkBlocks = 64;  // 256 KiB: one chunk covers a 24-row decode step's misses
  static constexpr size_t kChunkBytes = kChunkBlocks * io::kBlockSize;

  // An arena of `bytes` (rounded down to whole chunks; 0 = heap only),
  // registered with `engine` if the engine supports it (an optimization:
  // a refusal is logged and reads go unregistered).
  static Result<std::unique_ptr<ReadBufferPool>> Create(size_t bytes, io::IoEngine& engine);

  // Blocks leased for one batch; returns its arena chunks when destroyed.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&&) noexcept;
    Lease& operator=(Lease&&) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { Release(); }

    std::byte* Block(size_t b) const { return chunks_[b / kChunkBlocks] + (b % kChunkBlocks) * io::kBlockSize; }
    void Release();

   private:
    friend class ReadBufferPool;
    ReadBufferPool* pool_ = nullptr;
    std::vector<std::byte*> chunks_;
    size_t arena_chunks_ = 0;            // chunks_[0, arena_chunks_) are the arena's
    std::vector<io::AlignedBuffer> heap_;  // the rest, owned here
  };

  // Room for `blocks` blocks (> 0); ResourceExhausted if the heap fallback fails.
  Result<Lease> Acquire(size_t blocks);

  size_t arena_chunks() const { return arena_chunks_; }
  bool registered() const { return registered_; }

 private:
  ReadBufferPool() = default;
  void Return(std::span<std::byte* const> chunks);

  io::AlignedBuffer arena_;
  size_t arena_chunks_ = 0;
  bool registered_ = false;
  std::mutex mu_;
  std::vector<std::byte*> free_;  // guarded by mu_
};

}  // namespace engram
