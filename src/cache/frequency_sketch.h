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
// read-modify-write: two racing increments of one counter may count once (and
// the conservative update rewrites the key's counters it does not raise, so
// a racing increment of one of those may be lost too).
// That keeps the hot path free of locked instructions; the estimate is
// approximate by design and exact when single-threaded (the emulator).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "src/cache/anonymous_memory.h"
#include "src/cache/set_hasher.h"

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

  // Where a key's counters are: computed from its hash once, so a caller that
  // prefetches the counters and later counts the key pays for it once.
  // Rows layout: the double-hashing pair. Blocked layout: a = the key's
  // block's first counter, b = the offset bits.
  struct Probe {
    uint64_t a, b;
  };
  // hash is the row's 64-bit hash (SetHasher::Hash); the sketch remixes it.
  Probe ProbeOf(uint64_t hash) const {
    // Kirsch-Mitzenmacher double hashing: row i uses a + i*b. Remixing with the
    // seed decorrelates the counters from the set index (hash % num_sets).
    const uint64_t a = Remix(hash ^ seed_);
    const uint64_t b = Remix(a) | 1;
    if (blocked_) {
      // The key's block, chosen once per operation from a's high bits; IndexIn
      // only adds the offsets.
      const uint64_t block = static_cast<uint64_t>((static_cast<unsigned __int128>(a) * blocks_) >> 64);
      // The block's first counter: 64 per block of 8-bit counters, 128 of 4-bit.
      return {(block * kBlockBytes) << (bits_ == 8 ? 0 : 1), b};
    }
    return {a, b};
  }
  void Increment(uint64_t hash) { Increment(ProbeOf(hash)); }
  void Increment(const Probe& p);
  // The default preset's sketch: blocked, 4-bit counters, depth 2,
  // conservative update. For it, IncrementDefaultShape is Increment with the
  // shape fixed and inlined (defined below), which a lookup loop checks once
  // per batch and calls per row: no call and no dispatch on the shape.
  bool HasDefaultShape() const { return blocked_ && bits_ == 4 && depth_ == 2 && conservative_; }
  [[gnu::always_inline]] void IncrementDefaultShape(const Probe& p);
  uint32_t Estimate(uint64_t hash) const;
  // Starts loading the key's counters (a hint; no effect on the counts).
  // Lets a caller overlap the sketch's cache miss with its own before it
  // takes a lock, which waits for every earlier load.
  // Always inlined: otherwise GCC 12 at -O2 may keep the call out of line
  // and then delete it as a call without effects, prefetch and all.
  [[gnu::always_inline]] void Prefetch(uint64_t hash) const { Prefetch(ProbeOf(hash)); }
  [[gnu::always_inline]] void Prefetch(const Probe& p) const {
    // A counter's byte: 8-bit counters one per byte, 4-bit two per byte.
    const unsigned shift = bits_ == 8 ? 0 : 1;
    if (blocked_) {
      // p.a is the first counter of the key's block: the block is one line.
      __builtin_prefetch(counters_.data() + (p.a >> shift));
      return;
    }
    for (uint32_t i = 0; i < depth_; ++i) __builtin_prefetch(counters_.data() + (IndexIn(p, i) >> shift));
  }
  // Halves every counter.
  void Halve();

  uint32_t max_count() const { return max_; }
  uint64_t halvings() const { return halvings_.load(std::memory_order_relaxed); }
  uint64_t memory_bytes() const { return bytes_; }

  // The counters' memory (for committing it or mapping it with huge pages;
  // never for reading counters).
  std::span<uint8_t> memory() const { return {counters_.data(), counters_.size()}; }

 private:
  static constexpr uint64_t kBlockBytes = 64;

  // Index of the key's counter in sketch row i, in [0, width_), and the
  // counter's read and saturating bump. Templates on the layout and counter
  // width (both fixed at construction; CountAt also on the depth), so that
  // Increment's loops, which run on every lookup, instantiate them without a
  // branch per counter; the plain forms below choose the instantiation at
  // run time.
  template <bool kBlocked, uint32_t kBits>
  uint64_t IndexAt(const Probe& p, uint32_t row) const {
    if constexpr (kBlocked) {
      // p.a is the block's first counter; offsets o + row * step (step odd, so
      // the depth <= 8 offsets are distinct modulo the power-of-two block size).
      constexpr uint64_t kPerBlock = kBlockBytes * (8 / kBits);
      return p.a + ((p.b + row * ((p.b >> 32) | 1)) & (kPerBlock - 1));
    } else {
      const uint64_t x = p.a + row * p.b;
      // Multiply-shift range reduction: uniform over any width, no division.
      return row * width_ + static_cast<uint64_t>((static_cast<unsigned __int128>(x) * width_) >> 64);
    }
  }
  template <uint32_t kBits>
  uint32_t GetAt(uint64_t counter) const {
    if constexpr (kBits == 8) {
      return Byte(counter).load(std::memory_order_relaxed);
    } else {
      const uint8_t byte = Byte(counter >> 1).load(std::memory_order_relaxed);
      return (counter & 1) ? (byte >> 4) : (byte & 0x0f);
    }
  }
  template <uint32_t kBits>
  void BumpAt(uint64_t counter) {
    if (GetAt<kBits>(counter) != (1u << kBits) - 1) AddAt<kBits>(counter, 1);
  }
  // Adds `add` (0 or 1) to a counter below its maximum, storing even an
  // unchanged value: branch-free for the conservative update; BumpAt checks
  // the maximum first.
  template <uint32_t kBits>
  void AddAt(uint64_t counter, uint32_t add) {
    if constexpr (kBits == 8) {
      std::atomic_ref<uint8_t> cell = Byte(counter);
      cell.store(static_cast<uint8_t>(cell.load(std::memory_order_relaxed) + add), std::memory_order_relaxed);
    } else {
      // Two of a key's counters may share a byte: the byte is read afresh.
      std::atomic_ref<uint8_t> cell = Byte(counter >> 1);
      const unsigned shift = (counter & 1) ? 4 : 0;
      cell.store(static_cast<uint8_t>(cell.load(std::memory_order_relaxed) + (add << shift)),
                 std::memory_order_relaxed);
    }
  }
  // The conservative update of counters i0 and i1 (4-bit, depth 2; defined below).
  [[gnu::always_inline]] void RaiseMinimumNibble(uint64_t i0, uint64_t i1);
  // kDepth: the sketch's depth fixed at compile time, or 0 for depth_.
  template <bool kBlocked, uint32_t kBits, uint32_t kDepth>
  void CountAt(const Probe& p);
  template <bool kBlocked, uint32_t kBits>
  void CountWithDepth(const Probe& p);
  uint64_t IndexIn(const Probe& p, uint32_t row) const {
    if (blocked_) return bits_ == 8 ? IndexAt<true, 8>(p, row) : IndexAt<true, 4>(p, row);
    return IndexAt<false, 8>(p, row);  // the rows layout's index does not depend on the width
  }
  uint32_t Get(uint64_t counter) const { return bits_ == 8 ? GetAt<8>(counter) : GetAt<4>(counter); }
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

// The conservative update of a depth-2 sketch of 4-bit counters: each of the
// key's two nibbles is read from its byte once, and each byte is written once
// with the raised nibble (both raised in one store when the two counters are
// the two halves of one byte). Branch-free but for that rare case and
// saturation. CountAt uses it for every depth-2 4-bit shape.
inline void FrequencySketch::RaiseMinimumNibble(uint64_t i0, uint64_t i1) {
  std::atomic_ref<uint8_t> c0 = Byte(i0 >> 1);
  std::atomic_ref<uint8_t> c1 = Byte(i1 >> 1);
  const uint32_t b0 = c0.load(std::memory_order_relaxed);
  const uint32_t b1 = c1.load(std::memory_order_relaxed);
  const uint32_t s0 = uint32_t(i0 & 1) * 4;
  const uint32_t s1 = uint32_t(i1 & 1) * 4;
  const uint32_t v0 = (b0 >> s0) & 0x0f;
  const uint32_t v1 = (b1 >> s1) & 0x0f;
  if ((v0 & v1) == 0x0f) return;  // both saturated
  // The counters at the minimum, as comparisons rather than a branch on
  // which is smaller: that is close to random, and a mispredicted branch per
  // increment cost more than the rest of it.
  const uint32_t add0 = uint32_t(v0 <= v1) << s0;
  const uint32_t add1 = uint32_t(v1 <= v0) << s1;
  if ((i0 >> 1) == (i1 >> 1)) {
    c0.store(static_cast<uint8_t>(b0 + add0 + add1), std::memory_order_relaxed);
    return;
  }
  c0.store(static_cast<uint8_t>(b0 + add0), std::memory_order_relaxed);
  c1.store(static_cast<uint8_t>(b1 + add1), std::memory_order_relaxed);
}

inline void FrequencySketch::IncrementDefaultShape(const Probe& p) {
  RaiseMinimumNibble(IndexAt<true, 4>(p, 0), IndexAt<true, 4>(p, 1));
}

template <bool kBlocked, uint32_t kBits, uint32_t kDepth>
inline void FrequencySketch::CountAt(const Probe& p) {
  const uint32_t depth = kDepth != 0 ? kDepth : depth_;
  if (!conservative_) {
    for (uint32_t i = 0; i < depth; ++i) BumpAt<kBits>(IndexAt<kBlocked, kBits>(p, i));
    return;
  }
  if constexpr (kBits == 4 && kDepth == 2) {
    return RaiseMinimumNibble(IndexAt<kBlocked, 4>(p, 0), IndexAt<kBlocked, 4>(p, 1));
  }
  // Zeroed only to spare GCC's maybe-uninitialized warning on the unrolled run-time depth.
  uint64_t idx[kDepth != 0 ? kDepth : 8] = {};  // depth_ <= 8
  uint32_t val[kDepth != 0 ? kDepth : 8] = {};
  uint32_t m = max_;
#pragma GCC unroll 8
  for (uint32_t i = 0; i < depth; ++i) {
    idx[i] = IndexAt<kBlocked, kBits>(p, i);
    val[i] = GetAt<kBits>(idx[i]);
    if (val[i] < m) m = val[i];
  }
  if (m == max_) return;
  // Which counters hold the minimum is close to random, so a branch per
  // counter would be mispredicted about once per increment; instead every
  // counter is rewritten, the ones at the minimum one higher (none can
  // overflow: m < max_). An 8-bit counter is its own byte, and a key's
  // counters are distinct, so the value read above is written back raised;
  // 4-bit counters may share a byte, which AddAt reads afresh.
#pragma GCC unroll 8
  for (uint32_t i = 0; i < depth; ++i) {
    if constexpr (kBits == 8) {
      Byte(idx[i]).store(static_cast<uint8_t>(val[i] + (val[i] == m ? 1u : 0u)), std::memory_order_relaxed);
    } else {
      AddAt<kBits>(idx[i], val[i] == m ? 1u : 0u);
    }
  }
}

}  // namespace engram::cache
