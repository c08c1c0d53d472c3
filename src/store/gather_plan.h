// GatherPlan: the distinct row IDs of one gather and where each one goes.
//
// A prefill chunk asks for ~48 rows per token and most n-gram rows repeat
// within the chunk, so each distinct row is looked up (and counted, as hit or
// miss) once, and copied to every position that asked for it. Built with an
// open-addressing hash table rather than a sort: O(n) and no reordering of the
// caller's IDs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace engram {

struct GatherPlan {
  static constexpr uint32_t kNone = UINT32_MAX;

  std::vector<uint64_t> distinct;   // distinct row IDs, in order of first appearance
  std::vector<uint32_t> first_pos;  // first_pos[d]: first position of distinct[d]
  // next_pos[p]: the next position after p holding the same row, or kNone.
  // Built only when some row repeats (has_duplicates): most gathers' rows
  // are distinct, and then the chains would be n stores of kNone.
  std::vector<uint32_t> next_pos;

  void Build(std::span<const uint64_t> row_ids);

  // Some row is asked for at more than one position.
  bool has_duplicates() const { return duplicates_; }

  // Calls fn(pos) for every later position of distinct row d (not the first).
  template <typename Fn>
  void ForEachDuplicate(size_t d, Fn&& fn) const {
    if (!duplicates_) return;
    for (uint32_t p = next_pos[first_pos[d]]; p != kNone; p = next_pos[p]) fn(p);
  }

  // The rows of the largest gather planned so far (what the plan's storage holds).
  size_t capacity() const { return distinct.capacity(); }

 private:
  bool duplicates_ = false;
};

}  // namespace engram
