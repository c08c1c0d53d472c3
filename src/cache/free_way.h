// FreeWay: the first step of placement -- a slot no one holds.
//
// The free way is in the emptier candidate set (the first on a tie), and is
// its lowest free way; with every candidate set full there is none.
#pragma once

#include <bit>
#include <cstdint>

#include "src/cache/set_storage.h"

namespace engram::cache {

struct FreeWay {
  // sets: the row's `count` (1 or 2) candidate sets, locked.
  static bool Find(const SetStorage& storage, const uint64_t* sets, int count, uint64_t* set, uint32_t* way) {
    const uint32_t full = storage.FullMask();
    int best_free = 0;
    int best_set = -1;
    for (int i = 0; i < count; ++i) {
      int free_ways = std::popcount(~storage.View(sets[i]).occupied() & full);
      if (free_ways > best_free) {
        best_free = free_ways;
        best_set = i;
      }
    }
    if (best_set < 0) return false;
    *set = sets[best_set];
    *way = std::countr_zero(~storage.View(sets[best_set]).occupied() & full);
    return true;
  }
};

}  // namespace engram::cache
