// FirstAppearanceIndex: dense indexes 0, 1, 2, ... for 64-bit keys in the
// order each first appears, through an open-addressing table. O(1) per key
// and no sort; the caller keeps the keys themselves (keys[i] is the key of
// index i). Used to deduplicate a gather's row IDs and to group its missed
// rows by block.
//
// A slot holds (generation << 32) | (index + 1); it is empty unless its
// generation is the current one, so emptying the table for the next gather
// is one increment, not a pass over the slots. That lets the table be sparse
// (load factor <= 1/4 up to 4096 keys, 1/2 above; at least 64 slots) at no
// clearing cost: a key then rarely finds its first slot taken, an outcome
// the branch predictor misses (at load factor 1/2, about one key in five of
// a 24-row gather). A Reset uses a prefix of the slots sized for its keys,
// so a small gather after a large one stays within a few lines.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace engram {

class FirstAppearanceIndex {
 public:
  // Empties the table for at most max_keys distinct keys.
  void Reset(size_t max_keys) {
    const size_t want = max_keys <= kSparseKeys ? 4 * max_keys : 2 * max_keys;
    const size_t slots = std::bit_ceil(std::max<size_t>(want, kMinSlots));
    shift_ = 64 - std::countr_zero(slots);
    mask_ = slots - 1;
    if (slots > slots_.size() || generation_ == UINT32_MAX) {
      // Generation 0 marks no slot: a fresh or wrapped table starts at 1.
      slots_.assign(std::max(slots, slots_.size()), 0);
      generation_ = 1;
    } else {
      ++generation_;
    }
  }

  struct Found {
    uint32_t index;
    bool added;  // key was new: written to keys[index]
  };

  // The table as a run of Finds uses it: its slots and shape copied into the
  // caller's locals. A loop that also stores through uint32_t arrays (as a
  // gather's plan does) would otherwise reload the shape from the index on
  // every key, since those stores might alias it.
  class Finder {
   public:
    // The index of `key` among keys[0, count) -- the keys seen since Reset, in
    // order -- or, if it is new, writes it to keys[count] and counts it. keys
    // has room for the max_keys of Reset, so nothing grows on the way.
    Found Find(uint64_t key, uint64_t* keys, uint32_t& count) const {
      for (size_t s = (key * 0x9E3779B97F4A7C15ull) >> shift_;; s = (s + 1) & mask_) {
        const uint64_t slot = slots_[s];
        if ((slot & kGenerationBits) != tag_) {
          slots_[s] = tag_ | (count + 1);
          keys[count] = key;
          return {count++, true};
        }
        const uint32_t index = static_cast<uint32_t>(slot) - 1;
        if (keys[index] == key) return {index, false};
      }
    }

   private:
    friend class FirstAppearanceIndex;
    Finder(uint64_t* slots, int shift, size_t mask, uint32_t generation)
        : slots_(slots), shift_(shift), mask_(mask), tag_(uint64_t{generation} << 32) {}
    uint64_t* slots_;
    int shift_;
    size_t mask_;
    uint64_t tag_;  // the current generation, where a slot holds it
  };
  // Valid until the next Reset.
  Finder finder() { return Finder(slots_.data(), shift_, mask_, generation_); }

  Found Find(uint64_t key, uint64_t* keys, uint32_t& count) { return finder().Find(key, keys, count); }

 private:
  static constexpr uint64_t kGenerationBits = ~uint64_t{UINT32_MAX};
  static constexpr size_t kMinSlots = 64;
  static constexpr size_t kSparseKeys = 4096;
  std::vector<uint64_t> slots_;
  int shift_ = 63;
  size_t mask_ = 1;
  uint32_t generation_ = 0;
};

}  // namespace engram
