// FirstAppearanceIndex: dense indexes 0, 1, 2, ... for 64-bit keys in the
// order each first appears, through an open-addressing table (slots hold
// index + 1, 0 = empty; load factor <= 1/2). O(1) per key and no sort; the
// caller keeps the keys themselves (keys[i] is the key of index i). Used to
// deduplicate a gather's row IDs and to group its missed rows by block.
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
    const size_t slots = std::bit_ceil(std::max<size_t>(2 * max_keys, 2));
    shift_ = 64 - std::countr_zero(slots);
    mask_ = slots - 1;
    slots_.assign(slots, 0);
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
        const uint32_t slot = slots_[s];
        if (slot == 0) {
          slots_[s] = count + 1;
          keys[count] = key;
          return {count++, true};
        }
        if (keys[slot - 1] == key) return {slot - 1, false};
      }
    }

   private:
    friend class FirstAppearanceIndex;
    Finder(uint32_t* slots, int shift, size_t mask) : slots_(slots), shift_(shift), mask_(mask) {}
    uint32_t* slots_;
    int shift_;
    size_t mask_;
  };
  // Valid until the next Reset.
  Finder finder() { return Finder(slots_.data(), shift_, mask_); }

  Found Find(uint64_t key, uint64_t* keys, uint32_t& count) { return finder().Find(key, keys, count); }

 private:
  std::vector<uint32_t> slots_;
  int shift_ = 63;
  size_t mask_ = 1;
};

}  // namespace engram
