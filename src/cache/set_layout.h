// SetLayout: where a set's index entries live, and the per-set spin lock.
//
// Index and payload are separate regions. The index is an array of sets of
// `stride` bytes, each:
//
//   [0, 4)     lock word (atomic via std::atomic_ref; 0 = free, 1 = held)
//   [4, 8)     occupied mask (bit w: way w holds a row)
//   [8, 12)    pinned mask   (bit w: way w holds a pinned read-ahead row)
//   [12, ...)  stamps: uint32 last-access tick per way
//   [keys, ..) keys: uint64 row ID per way (8-aligned)
//
// With 4 ways that is 60 bytes padded to one 64-byte cache line (16 B per
// row), so a lookup takes the lock, probes the tags and stamps the hit in a
// single line; 8, 16 and 32 ways are 2, 4 and 8 lines, still 16 B per row.
// The lock lives in the set it guards: the finest possible striping, and no
// extra cache line per operation. Row payloads are in a slab addressed by
// (set * ways + way), so the index stays dense regardless of row size.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace engram::cache {

struct SetLayout {
  uint32_t ways = 0;
  uint32_t keys_offset = 0;
  uint32_t stride = 0;

  static constexpr uint32_t kStampsOffset = 12;

  static SetLayout For(uint32_t ways) {
    SetLayout l;
    l.ways = ways;
    l.keys_offset = (kStampsOffset + 4 * ways + 7) & ~7u;
    uint32_t raw = l.keys_offset + 8 * ways;
    // Pad to whole cache lines when that costs at most 16 B per row (4+ ways);
    // otherwise (1-3 ways) pack to 8 bytes and accept straddling lines.
    uint32_t lines = (raw + 63) & ~63u;
    l.stride = lines <= 16 * ways ? lines : (raw + 7) & ~7u;
    return l;
  }
};

// A view of one set in the index. Fields other than the lock are plain
// memory guarded by the lock.
class SetView {
 public:
  SetView(uint8_t* base, const SetLayout& layout) : base_(base), keys_offset_(layout.keys_offset) {}

  uint32_t& occupied() { return *reinterpret_cast<uint32_t*>(base_ + 4); }
  uint32_t& pinned() { return *reinterpret_cast<uint32_t*>(base_ + 8); }
  uint32_t* stamps() { return reinterpret_cast<uint32_t*>(base_ + SetLayout::kStampsOffset); }
  uint64_t* keys() { return reinterpret_cast<uint64_t*>(base_ + keys_offset_); }

  void Lock() {
    std::atomic_ref<uint32_t> word(LockWord());
    if (word.exchange(1, std::memory_order_acquire) == 0) return;
    for (int spins = 0;;) {
      // Test before test-and-set: spin on a shared copy of the line.
      while (word.load(std::memory_order_relaxed) != 0) {
        if (++spins < 128) {
          Pause();
        } else {
          std::this_thread::yield();  // the holder may be descheduled
        }
      }
      if (word.exchange(1, std::memory_order_acquire) == 0) return;
    }
  }
  bool TryLock() {
    std::atomic_ref<uint32_t> word(LockWord());
    return word.load(std::memory_order_relaxed) == 0 && word.exchange(1, std::memory_order_acquire) == 0;
  }
  void Unlock() { std::atomic_ref<uint32_t>(LockWord()).store(0, std::memory_order_release); }

  uint8_t* base() const { return base_; }

 private:
  uint32_t& LockWord() { return *reinterpret_cast<uint32_t*>(base_); }
  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  uint8_t* base_;
  uint32_t keys_offset_;
};

}  // namespace engram::cache
