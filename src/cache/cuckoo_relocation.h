// CuckooRelocation: the second step of placement -- make a free way in a full
// candidate set by moving residents to their other candidate sets, evicting
// no one (config.relocation_depth > 0, two candidate sets).
//
// A breadth-first search finds the shortest chain of moves: a resident of a
// candidate set moves to its other set, whose resident moves on, ... until a
// set with a free way, at most relocation_depth moves and kMaxNodes sets
// visited (bounded work and lock holding per insert). Sets beyond the two
// locked candidates are taken with TryLock and skipped when busy, so no
// thread waits for a lock out of order. Pinned rows never move.
//
// Worthwhile: the search visits up to 64 sets (each a cache miss, ~8 us in
// all); with under 1/1024 of the slots free it mostly fails, and since slots
// only ever fill (nothing is erased) the cache stays that full: every insert
// under pressure would pay for it for nothing. The last <= 0.1 % of the slots
// are then filled only by rows whose own candidate set has the free way.
#pragma once

#include <algorithm>
#include <cstdint>

#include "src/cache/set_hasher.h"
#include "src/cache/set_storage.h"

namespace engram::cache {

class CuckooRelocation {
 public:
  static constexpr int kMaxNodes = 64;

  CuckooRelocation(uint32_t depth, uint64_t capacity_rows)
      : depth_(depth), min_empty_(std::max<uint64_t>(1, capacity_rows / 1024)) {}

  // Whether a search is worth its cost for a row with two candidate sets,
  // with about empty_slots slots never filled yet.
  bool Worthwhile(bool two_candidates, uint64_t empty_slots) const {
    return depth_ > 0 && two_candidates && empty_slots >= min_empty_;
  }

  // Frees a way in one of the two locked candidate sets; on success *set and
  // *way name it and *moves counts the residents moved.
  bool FreeWay(const SetStorage& storage, const SetHasher& hasher, const CandidateSets& candidates, uint64_t* set,
               uint32_t* way, uint64_t* moves) const;

 private:
  const uint32_t depth_;
  const uint64_t min_empty_;
};

}  // namespace engram::cache
