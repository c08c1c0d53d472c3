// StagedSetProbe: finds where a batch's rows are in a set-associative cache
// before any of them is served, in stages over groups of rows, each stage
// requesting the lines the next one reads (set_probe.h, RunInGroups):
//
//   prepare:         hash the row, prefetch its first set's index line
//   find_in_first:   look for it in the first set; found: prefetch its
//                    payload; not found: prefetch the second set's index line
//   find_in_second:  not in the first set: look in the second and prefetch
//                    its payload
//
// and then the caller's own last stage over the group, which reads each
// row's findings (hash, sets, ways). The cache's batch lookup serves rows
// there, its RecordHits stamps them, and a shared cache's reader copies
// them out: each with its own locking, counting and validation, none of
// which the probe does.
//
// The second set's line is fetched only for the rows not in the first set:
// the loop is bound by how many lines are in flight at once, and a row found
// in its first set then costs one index line, not two.
//
// The findings are hints: keys and masks are read without the set's lock
// (FindWayUnlocked), because a locked instruction would wait for the earlier
// rows' copies to drain from the store buffer. A stale hint costs a useless
// prefetch; the last stage must confirm a way (under the lock, or by a read
// the set's version validates) before it trusts it. The probe writes nothing
// to the cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "src/cache/set_hasher.h"
#include "src/cache/set_probe.h"
#include "src/cache/set_storage.h"

namespace engram::cache {

namespace set_associative_internal {

// kWays: the set shape the lookup is compiled for (4, 5, 8, or 0 for any:
// see SetAssociativeRowCache::LayoutFor). Lives on the caller's stack for one
// batch; everything it needs is inlined into the caller.
template <uint32_t kWays>
class StagedSetProbe {
 public:
  // storage: the cache's sets and payloads, addressed with kWays's layout.
  // prefetch_payloads: whether the payload of a row found is requested (a
  // lookup that copies rows out) or only its index line (one that stamps).
  StagedSetProbe(const SetHasher& hasher, const SetStorage& storage, std::span<const uint64_t> row_ids,
                 bool prefetch_payloads)
      : hasher_(hasher),
        storage_(storage),
        row_ids_(row_ids),
        two_(hasher.two_candidates()),
        prefetch_payloads_(prefetch_payloads && storage.row_bytes != 0) {}

  StagedSetProbe(const StagedSetProbe&) = delete;
  StagedSetProbe& operator=(const StagedSetProbe&) = delete;

  // Runs the probe's stages and then last(i) over every row, group by group:
  // last(i) runs after the probe's stages over row i's group, and reads row
  // i's findings with the accessors below. `last` is a lambda whose call
  // operator is declared __attribute__((always_inline)) (see RunInGroups).
  template <typename LastStage>
  [[gnu::always_inline]] void Run(LastStage& last) {
    // Lambdas, always inlined, and not member functions passed by pointer:
    // RunInGroups takes its stages as callables, and only these GCC inlines
    // with their prefetches (docs/ARCHITECTURE.md).
    auto prepare = [this](size_t j) __attribute__((always_inline)) { Prepare(j); };
    auto find_in_first = [this](size_t j) __attribute__((always_inline)) { FindInFirst(j); };
    auto find_in_second = [this](size_t j) __attribute__((always_inline)) { FindInSecond(j); };
    RunInGroups(row_ids_.size(), prepare, find_in_first, find_in_second, last);
  }

  // Row i's findings, valid in the last stage over its group.
  uint64_t hash(size_t i) const { return hashes_[i % kLookupGroup]; }
  uint64_t first_set(size_t i) const { return first_sets_[i % kLookupGroup]; }
  // The way of the first set the row was seen in, or -1.
  int first_way(size_t i) const { return first_ways_[i % kLookupGroup]; }
  // Not seen in its first set, and searched in its second.
  bool in_second(size_t i) const { return in_second_[i % kLookupGroup]; }
  // Where the row was seen (its second set if in_second(i), else its first),
  // and the way there, or -1 when it was seen in neither.
  uint64_t hinted_set(size_t i) const { return in_second(i) ? second_sets_[i % kLookupGroup] : first_set(i); }
  int hinted_way(size_t i) const { return in_second(i) ? second_ways_[i % kLookupGroup] : first_way(i); }

 private:
  [[gnu::always_inline]] void Prepare(size_t j) {
    const uint64_t h = hasher_.Hash(row_ids_[j]);
    hashes_[j % kLookupGroup] = h;
    first_sets_[j % kLookupGroup] = hasher_.First(h);
    PrefetchSetLines<kWays>(storage_, first_sets_[j % kLookupGroup]);
  }
  [[gnu::always_inline]] void FindInFirst(size_t j) {
    const uint64_t first = first_sets_[j % kLookupGroup];
    const int way = FindWayUnlocked<kWays>(storage_.View(first), storage_.layout->ways, row_ids_[j]);
    first_ways_[j % kLookupGroup] = way;
    in_second_[j % kLookupGroup] = way < 0 && two_;
    if (way >= 0) {
      if (prefetch_payloads_) PrefetchRange(storage_.Payload(first, uint32_t(way)), storage_.row_bytes);
    } else if (in_second_[j % kLookupGroup]) {
      second_sets_[j % kLookupGroup] = hasher_.Second(hashes_[j % kLookupGroup], first);
      PrefetchSetLines<kWays>(storage_, second_sets_[j % kLookupGroup]);
    }
  }
  [[gnu::always_inline]] void FindInSecond(size_t j) {
    if (!in_second_[j % kLookupGroup]) return;
    const uint64_t second = second_sets_[j % kLookupGroup];
    const int way = FindWayUnlocked<kWays>(storage_.View(second), storage_.layout->ways, row_ids_[j]);
    second_ways_[j % kLookupGroup] = way;
    if (way >= 0 && prefetch_payloads_) PrefetchRange(storage_.Payload(second, uint32_t(way)), storage_.row_bytes);
  }

  const SetHasher& hasher_;
  const SetStorage storage_;
  const std::span<const uint64_t> row_ids_;
  const bool two_;
  const bool prefetch_payloads_;
  // Per row of the group being probed (index: row % kLookupGroup).
  uint64_t hashes_[kLookupGroup];
  uint64_t first_sets_[kLookupGroup];
  uint64_t second_sets_[kLookupGroup];  // set only when in_second_
  int first_ways_[kLookupGroup];
  int second_ways_[kLookupGroup];  // set only when in_second_
  bool in_second_[kLookupGroup];
};

}  // namespace set_associative_internal

}  // namespace engram::cache
