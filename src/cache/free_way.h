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
    uint32_t free[2];
    for (int i = 0; i < count; ++i) free[i] = ~storage.View(sets[i]).occupied() & storage.FullMask();
    int chosen;
    if (!Choose(free, count, &chosen, way)) return false;
    *set = sets[chosen];
    return true;
  }
  // The rule itself, over each candidate set's mask of free ways: the emptier
  // set (the first on a tie) as *set_index, its lowest free way as *way.
  // (InsertBatch applies it to unlocked masks to guess an insert's slot.)
  static bool Choose(const uint32_t* free, int count, int* set_index, uint32_t* way) {
    int best_free = 0;
    int best_set = -1;
    for (int i = 0; i < count; ++i) {
      const int free_ways = std::popcount(free[i]);
      if (free_ways > best_free) {
        best_free = free_ways;
        best_set = i;
      }
    }
    if (best_set < 0) return false;
    *set_index = best_set;
    *way = std::countr_zero(free[best_set]);
    return true;
  }
};

}  // namespace engram::cache
