// ResidencyBitmap: one bit per slot of a directly placed cache, set once the
// slot's row is in place.
//
// Why: with direct placement (set_hasher.h) row r can only ever be in slot r,
// and no other row is ever put there, so once r is in place its payload never
// changes again. A hit then needs neither the set's index line nor its lock
// nor a seqlock check: test bit r and copy slot r. For a 2 M-row table the
// index is ~26 MB, a DRAM miss per hit on top of the payload's; the bitmap is
// 250 KB and stays in the CPU's caches.
//
// The writer sets bit r with release order after the row's bytes are written
// (under the set's lock); a reader that sees the bit with acquire order sees
// the whole row. Bits are never cleared: a directly placed row is never
// evicted, relocated or rewritten.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include "src/cache/anonymous_memory.h"

namespace engram::cache {

class ResidencyBitmap {
 public:
  ResidencyBitmap() = default;  // no slots: every Test() is false
  // Throws std::bad_alloc when the memory cannot be mapped (as the sketch does).
  explicit ResidencyBitmap(uint64_t slots)
      : slots_(slots), words_(AnonymousMemory::AllocateOrThrow(Bytes(slots), "residency bitmap")) {}

  bool Test(uint64_t slot) const {
    return slot < slots_ && (Word(slot).load(std::memory_order_acquire) >> (slot % 64) & 1) != 0;
  }
  void Set(uint64_t slot) { Word(slot).fetch_or(uint64_t{1} << (slot % 64), std::memory_order_release); }

  uint64_t slots() const { return slots_; }
  std::span<uint8_t> memory() const { return {words_.data(), words_.size()}; }

  // Whole 64-byte lines of bits.
  static uint64_t Bytes(uint64_t slots) { return (slots + 511) / 512 * 64; }

 private:
  std::atomic_ref<uint64_t> Word(uint64_t slot) const {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(words_.data() + slot / 64 * 8));
  }

  uint64_t slots_ = 0;
  AnonymousMemory words_;
};

}  // namespace engram::cache
