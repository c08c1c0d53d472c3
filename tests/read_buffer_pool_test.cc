#include "src/store/read_buffer_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <thread>

#include "storage/io/io_engine.h"

namespace engram {
namespace {

constexpr size_t kReadsInFlight = 128;  // the store's default queue depth: two chunks of reads

// The pool only asks the engine to register its arena.
std::unique_ptr<io::IoEngine> PreadEngine() {
  io::IoOptions o;
  o.backend = io::IoBackend::kPread;
  auto e = io::CreateIoEngine(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return std::move(e).value();
}

TEST(ReadBufferPool, LeasesAreAlignedDisjointAndReturnedForReuse) {
  auto engine = PreadEngine();
  auto pool = ReadBufferPool::Create(ReadBufferPool::kSlabBytes, kReadsInFlight, *engine);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ((*pool)->chunks_made(), 0u);  // nothing is allocated before it is needed
  auto a = (*pool)->Acquire(ReadBufferPool::kChunkBlocks + 1);  // two chunks
  auto b = (*pool)->Acquire(3);
  ASSERT_TRUE(a.ok() && b.ok());
  std::set<std::byte*> blocks;
  for (size_t i = 0; i < ReadBufferPool::kChunkBlocks + 1; ++i) blocks.insert(a->Block(i));
  for (size_t i = 0; i < 3; ++i) blocks.insert(b->Block(i));
  EXPECT_EQ(blocks.size(), ReadBufferPool::kChunkBlocks + 4);
  for (std::byte* p : blocks) EXPECT_TRUE(io::IsAligned(p, io::kBlockSize));
  std::byte* first = b->Block(0);
  b->Release();
  auto c = (*pool)->Acquire(1);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->Block(0), first);  // the chunk came back and is reused
}

TEST(ReadBufferPool, ABusyArenaFallsBackToTheHeapInsteadOfWaiting) {
  auto engine = PreadEngine();
  auto pool = ReadBufferPool::Create(ReadBufferPool::kSlabBytes, kReadsInFlight, *engine);
  ASSERT_TRUE(pool.ok());
  auto held = (*pool)->Acquire(ReadBufferPool::kSlabChunks * ReadBufferPool::kChunkBlocks - 1);
  auto more = (*pool)->Acquire(3 * ReadBufferPool::kChunkBlocks);
  ASSERT_TRUE(more.ok());
  EXPECT_EQ((*pool)->chunks_made(), ReadBufferPool::kSlabChunks);  // the cap holds
  for (size_t i = 0; i < 3 * ReadBufferPool::kChunkBlocks; ++i) std::memset(more->Block(i), 1, io::kBlockSize);
  auto none = ReadBufferPool::Create(0, kReadsInFlight, *engine);  // heap only
  ASSERT_TRUE(none.ok());
  auto heap = (*none)->Acquire(5);
  ASSERT_TRUE(heap.ok());
  std::memset(heap->Block(4), 2, io::kBlockSize);
}

TEST(ReadBufferPool, AnExtendedLeaseKeepsItsBlocksInPlaceAndReturnsArenaAndHeapChunksApart) {
  auto engine = PreadEngine();
  auto pool = ReadBufferPool::Create(ReadBufferPool::kSlabBytes, kReadsInFlight, *engine);  // one slab: kSlabChunks chunks
  ASSERT_TRUE(pool.ok());
  ReadBufferPool::Lease lease;
  ASSERT_TRUE((*pool)->Extend(lease, 1).ok());
  std::byte* first = lease.Block(0);
  // Grown a chunk at a time past the cap: the last chunks come from the heap.
  const size_t chunks = ReadBufferPool::kSlabChunks + 2;
  for (size_t c = 1; c <= chunks; ++c) ASSERT_TRUE((*pool)->Extend(lease, c * ReadBufferPool::kChunkBlocks).ok());
  EXPECT_EQ(lease.Block(0), first);
  EXPECT_EQ((*pool)->chunks_made(), ReadBufferPool::kSlabChunks);
  EXPECT_EQ((*pool)->heap_chunks_leased(), 2u);
  std::set<std::byte*> blocks;
  for (size_t b = 0; b < chunks * ReadBufferPool::kChunkBlocks; ++b) {
    blocks.insert(lease.Block(b));
    std::memset(lease.Block(b), 3, io::kBlockSize);  // every block is writable memory
  }
  EXPECT_EQ(blocks.size(), chunks * ReadBufferPool::kChunkBlocks);
  std::byte* last = lease.Block(chunks * ReadBufferPool::kChunkBlocks - 1);
  ASSERT_TRUE((*pool)->Extend(lease, 5).ok());  // asking for less changes nothing
  EXPECT_EQ(lease.Block(chunks * ReadBufferPool::kChunkBlocks - 1), last);
  EXPECT_EQ((*pool)->heap_chunks_leased(), 2u);
  lease.Release();
  // The arena chunks came back, the heap ones did not: the same lease again
  // takes the slab's chunks and two more from the heap.
  auto again = (*pool)->Acquire(chunks * ReadBufferPool::kChunkBlocks);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*pool)->heap_chunks_leased(), 4u);
  EXPECT_EQ((*pool)->chunks_made(), ReadBufferPool::kSlabChunks);
}

TEST(ReadBufferPool, StreamingRingsCoverTwiceTheReadsInFlightAtMostHalfTheCap) {
  auto engine = PreadEngine();
  // 32 chunks: two rings of twice the two chunks 128 reads fill.
  auto pool = ReadBufferPool::Create(4 * ReadBufferPool::kSlabBytes, kReadsInFlight, *engine);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ((*pool)->stream_chunks(), 4u);
  auto one_read = ReadBufferPool::Create(4 * ReadBufferPool::kSlabBytes, 1, *engine);
  ASSERT_TRUE(one_read.ok());
  EXPECT_EQ((*one_read)->stream_chunks(), 2u);
  auto deep = ReadBufferPool::Create(ReadBufferPool::kSlabBytes, 4096, *engine);  // 8 chunks
  ASSERT_TRUE(deep.ok());
  EXPECT_EQ((*deep)->stream_chunks(), ReadBufferPool::kSlabChunks / 2);
  auto none = ReadBufferPool::Create(0, kReadsInFlight, *engine);  // heap only: nothing to stream through
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)->stream_chunks(), 0u);
}

TEST(ReadBufferPool, EightGathersOfEarlyBlocksFitInTheArena) {
  auto engine = PreadEngine();
  auto pool = ReadBufferPool::Create(4 * ReadBufferPool::kSlabBytes, kReadsInFlight, *engine);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ((*pool)->early_blocks(), 4 * ReadBufferPool::kChunkBlocks);
  std::vector<ReadBufferPool::Lease> leases;
  for (int g = 0; g < 8; ++g) {
    auto lease = (*pool)->Acquire((*pool)->early_blocks());
    ASSERT_TRUE(lease.ok());
    leases.push_back(std::move(lease).value());
  }
  EXPECT_EQ((*pool)->heap_chunks_leased(), 0u);
  auto none = ReadBufferPool::Create(0, kReadsInFlight, *engine);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)->early_blocks(), 0u);
}

TEST(ReadBufferPool, ALeaseOfFewerChunksThanBlocksIsARing) {
  auto engine = PreadEngine();
  auto pool = ReadBufferPool::Create(ReadBufferPool::kSlabBytes, kReadsInFlight, *engine);
  ASSERT_TRUE(pool.ok());
  auto ring = (*pool)->Acquire(2 * ReadBufferPool::kChunkBlocks);
  ASSERT_TRUE(ring.ok());
  EXPECT_EQ(ring->Block(2 * ReadBufferPool::kChunkBlocks), ring->Block(0));
  EXPECT_EQ(ring->Block(3 * ReadBufferPool::kChunkBlocks + 5), ring->Block(ReadBufferPool::kChunkBlocks + 5));
  EXPECT_NE(ring->Block(ReadBufferPool::kChunkBlocks), ring->Block(0));
}

TEST(ReadBufferPool, ConcurrentLeasesNeverShareABlock) {
  auto engine = PreadEngine();
  auto pool = ReadBufferPool::Create(2 * ReadBufferPool::kSlabBytes, kReadsInFlight, *engine);
  ASSERT_TRUE(pool.ok());
  std::vector<std::thread> threads;
  std::atomic<int> clashes{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        auto lease = (*pool)->Acquire(1 + (i * 37 + t) % 150);
        ASSERT_TRUE(lease.ok());
        std::byte* p = lease->Block(0);
        std::memset(p, t + 1, io::kBlockSize);
        std::this_thread::yield();
        for (size_t j = 0; j < io::kBlockSize; ++j) {
          if (p[j] != std::byte(t + 1)) {
            ++clashes;
            break;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(clashes.load(), 0);
}

}  // namespace
}  // namespace engram
