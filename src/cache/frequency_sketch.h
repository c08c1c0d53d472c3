// FrequencySketch: a count-min sketch of row access counts (TinyLFU-style).
//
// depth rows of saturating 4- or 8-bit counters; a key's estimate is the
// minimum of its counter in each row. Blocked layout (Caffeine's): a key's
// depth counters all lie in one 64-byte block chosen by its hash, at
// distinct offsets, so an increment or estimate touches one cache line
// instead of depth lines. Every Increment() bumps all depth
// counters (plain count-min, as the reported cache does), or with
// conservative update only those at the minimum. Halve() halves every
// counter so old popularity fades; the owner decides when (the row cache does
// it on its own clock, so lookups share no counter here).
//
// Thread safety: counters are relaxed atomics updated with load + store, not
// read-modify-write: two racing increments of one counter may count once.
// That keeps the hot path free of locked instructions; the estimate is
// approximate by design and exact when single-threaded (the emulator).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "src/cache/anonymous_memory.h"

namespace engram::cache {

class FrequencySketch {
 public:
  // bytes of counters (>= 64), depth 1..8, counter_bits 4 or 8.
  // conservative: bump only the key's counters that hold its current minimum
  // (conservative update): same memory, far less over-estimation when many
  // keys share counters.
  // blocked: a key's counters share one 64-byte block (bytes is then rounded
  // down to whole blocks, at least one).
  // The counters are anonymous memory (zero pages until first written), so
  // a large sketch costs no RSS until rows are counted; throws
  // std::bad_alloc if the region cannot be mapped.
  FrequencySketch(uint64_t bytes, uint32_t depth, uint32_t counter_bits, uint64_t seed,
                  bool conservative = false, bool blocked = false);

  // hash is the row's 64-bit hash (SetHasher::Hash); the sketch remixes it.
  void Increment(uint64_t hash);
  uint32_t Estimate(uint64_t hash) const;
  // Starts loading the key's counters (a hint; no effect on the counts).
  // Lets a caller overlap the sketch's cache miss with its own before it
  // takes a lock, which waits for every earlier load.
  void Prefetch(uint64_t hash) const;
  // Halves every counter.
  void Halve();

  uint32_t max_count() const { return max_; }
  uint64_t halvings() const { return halvings_.load(std::memory_order_relaxed); }
  uint64_t memory_bytes() const { return bytes_; }

  // The counters' memory (for committing it or mapping it with huge pages;
  // never for reading counters).
  std::span<uint8_t> memory() const { return {counters_.data(), counters_.size()}; }

 private:
  // Index of the key's counter in sketch row i, in [0, width_).
  // Rows layout: the double-hashing pair. Blocked layout: a = the key's
  // block's first counter, b = the offset bits.
  struct Probe {
    uint64_t a, b;
  };
  Probe ProbeOf(uint64_t hash) const;
  uint64_t IndexIn(const Probe& p, uint32_t row) const;
  uint32_t Get(uint64_t counter) const;
  void Bump(uint64_t counter);
  std::atomic_ref<uint8_t> Byte(uint64_t i) const { return std::atomic_ref<uint8_t>(counters_.data()[i]); }

  uint64_t bytes_;
  uint32_t depth_;
  uint32_t bits_;
  uint32_t max_;
  uint64_t width_;  // counters per sketch row (rows layout)
  bool blocked_;
  uint64_t blocks_;  // 64-byte blocks (blocked layout)
  uint64_t seed_;
  bool conservative_;
  AnonymousMemory counters_;  // bytes_ counter bytes, accessed through Byte()
  std::atomic<uint64_t> halvings_{0};
};

}  // namespace engram::cache
