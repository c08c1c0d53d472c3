// Probing a set without its lock, shared by the cache's own batch lookup
// (set_associative_batch_lookup.cc) and the read-only reader of a shared
// cache (shared_row_cache_reader.cc): the key compare, fixed per set shape,
// the prefetch of a set's index lines and of a row's payload lines, and the
// grouping of a batch's rows. The stages built from them: staged_set_probe.h.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "src/cache/row_copy.h"
#include "src/cache/set_layout.h"
#include "src/cache/set_storage.h"

namespace engram::cache {

namespace set_associative_internal {
// A batch lookup works through its rows in groups of kLookupGroup, and runs
// each of its stages over every row of a group before the next stage (group
// prefetching): hash every row and request its set's index line; then search
// each set and request each row's payload; then copy the rows out, in order.
// A row's lines are requested about a group's worth of work before they are
// read, with up to a group's lines in flight at once. Against a pipeline that
// prepared each row 4-16 rows ahead of the one served, 24-row gathers of a
// hashed cache ran ~25 % faster (a short pipeline waits on each of its first
// rows in turn) and 4096-row gathers ~10 % (bench/RESULTS.md). Groups of 32
// to 96 rows measured the same.
constexpr size_t kLookupGroup = 64;  // a power of two: a row's state is at index row % kLookupGroup
static_assert((kLookupGroup & (kLookupGroup - 1)) == 0);

// Runs stage(j) for j in [begin, end).
template <typename Stage>
[[gnu::always_inline]] inline void RunStage(size_t begin, size_t end, Stage& stage) {
  for (size_t j = begin; j < end; ++j) stage(j);
}

// Runs stages(j) for j in [0, n) group by group: every stage over every row of
// a group, in the order given, before the next group. Always inlined, with
// the stages (lambdas with always_inline call operators): GCC otherwise calls
// them out of line and reloads their captures on every row.
template <typename... Stages>
[[gnu::always_inline]] inline void RunInGroups(size_t n, Stages&... stages) {
  for (size_t begin = 0; begin < n; begin += kLookupGroup) {
    const size_t end = begin + kLookupGroup < n ? begin + kLookupGroup : n;
    (RunStage(begin, end, stages), ...);
  }
}

// The mask of ways w < ways whose key (key_at(w)) is row_id. The usual widths
// are fixed at compile time, so the compare unrolls into branch-free code.
template <uint32_t W, typename KeyAt>
inline uint32_t MatchFixed(uint32_t ways, uint64_t row_id, const KeyAt& key_at) {
  uint32_t match = 0;
#pragma GCC unroll 16
  for (uint32_t w = 0; w < (W != 0 ? W : ways); ++w) match |= uint32_t{key_at(w) == row_id} << w;
  return match;
}
template <uint32_t kWays, typename KeyAt>
inline uint32_t MatchKeys(uint32_t ways, uint64_t row_id, const KeyAt& key_at) {
  if constexpr (kWays != 0) return MatchFixed<kWays>(kWays, row_id, key_at);
  switch (ways) {
    case 4: return MatchFixed<4>(ways, row_id, key_at);
    case 5: return MatchFixed<5>(ways, row_id, key_at);
    case 8: return MatchFixed<8>(ways, row_id, key_at);
    case 16: return MatchFixed<16>(ways, row_id, key_at);
    default: return MatchFixed<0>(ways, row_id, key_at);
  }
}

// The way of set `s` that holds row_id, read without the set's lock (keys
// and occupied mask as relaxed loads), or -1: a hint, stale by the time it
// is used, which a locked or version-validated read must confirm.
template <uint32_t kWays>
[[gnu::always_inline]] inline int FindWayUnlocked(const SetView& s, uint32_t ways, uint64_t row_id) {
  const uint32_t match = MatchKeys<kWays>(ways, row_id, [&s](uint32_t w) { return s.KeyHint(w); }) & s.OccupiedHint();
  return match != 0 ? std::countr_zero(match) : -1;
}

// Prefetches every cache line of [p, p + bytes) for reading. Always inlined:
// GCC may drop a call to a small function whose only effect is a prefetch
// (docs/ARCHITECTURE.md).
// An Engram row (row_copy.h) spans five or six lines: those are requested
// without the loop's compare and branch per line.
[[gnu::always_inline]] inline void PrefetchRange(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  const uintptr_t first = reinterpret_cast<uintptr_t>(c) & ~uintptr_t{63};
  const uintptr_t last = reinterpret_cast<uintptr_t>(c + bytes - 1) & ~uintptr_t{63};
  if (bytes == kEngramRowBytes) {
    static_assert(kEngramRowBytes > 4 * 64 && kEngramRowBytes <= 5 * 64);
#pragma GCC unroll 5
    for (uintptr_t k = 0; k < 5; ++k) __builtin_prefetch(reinterpret_cast<const void*>(first + 64 * k), 0, 3);
    __builtin_prefetch(reinterpret_cast<const void*>(last), 0, 3);  // the sixth, or the fifth again
    return;
  }
  for (uintptr_t line = first; line <= last; line += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 3);
  }
}

// Prefetches the index lines of one set. With the shape fixed (kWays != 0)
// these are whole lines from the set's start, a constant number of them: the
// stride is a multiple of 64 and the index is page-aligned. Always inlined,
// as PrefetchRange.
template <uint32_t kWays>
[[gnu::always_inline]] inline void PrefetchSetLines(const SetStorage& storage, uint64_t set) {
  if constexpr (kWays != 0) {
    constexpr uint32_t kStride = SetLayout::For(kWays).stride;
    static_assert(kStride % 64 == 0);
    const uint8_t* base = storage.index + set * kStride;
    for (uint32_t off = 0; off < kStride; off += 64) __builtin_prefetch(base + off, 0, 3);
  } else {
    PrefetchRange(storage.index + set * storage.layout->stride, storage.layout->stride);
  }
}
}  // namespace set_associative_internal

}  // namespace engram::cache
