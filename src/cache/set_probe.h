// Probing a set without its lock, shared by the cache's own batch lookup
// (set_associative_batch_lookup.cc) and the read-only reader of a shared
// cache (shared_row_cache_reader.cc): the key compare, fixed per set shape,
// and the prefetch of a row's payload lines.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "src/cache/set_layout.h"

namespace engram::cache {

namespace set_associative_internal {
// How far ahead of the row being served a batch lookup prepares the others
// (set_associative_batch_lookup.cc describes the stages): hash a row and
// prefetch its first set's index line kIndexAhead rows ahead, search that
// set and prefetch the payload kFirstSetAhead ahead, the second set
// kSecondSetAhead ahead; with direct placement, prefetch the payload
// kDirectAhead ahead. Far enough that a row's lines have landed when it is
// served even when every line comes from DRAM at a few hundred ns; half
// these distances left rows of a 65,536-row hashed gather 15-20 % slower and
// a 24-row direct gather of 2 M rows at 0.8 of a flat memcpy, against 0.95
// (bench/RESULTS.md).
constexpr size_t kIndexAhead = 16;
constexpr size_t kFirstSetAhead = 8;
constexpr size_t kSecondSetAhead = 4;
constexpr size_t kDirectAhead = 16;
constexpr size_t kLookupRing = 32;  // rows whose state a batch keeps: > kIndexAhead, a power of two
static_assert(kLookupRing > kIndexAhead && (kLookupRing & (kLookupRing - 1)) == 0);

// The distances a batch of n rows uses. A batch that fits in the ring (a
// decode step's 24 rows) runs each stage over all its rows before serving
// any -- group prefetching: every index line is requested before the first
// is searched, and every payload before the first is copied. Started with
// the distances above, a short batch waited for each of its first rows'
// lines in turn, with only a few others in flight; 24-row gathers of a hashed
// cache ran ~20 % faster this way (bench/RESULTS.md). A longer batch keeps
// the distances above, so its ring never wraps onto a row not yet served.
struct StageDistances {
  size_t index, first_set, second_set, direct;

  static constexpr StageDistances For(size_t n) {
    if (n <= kLookupRing) return {n, n, n, n};
    return {kIndexAhead, kFirstSetAhead, kSecondSetAhead, kDirectAhead};
  }
};

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
[[gnu::always_inline]] inline void PrefetchRange(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  const uintptr_t first = reinterpret_cast<uintptr_t>(c) & ~uintptr_t{63};
  const uintptr_t last = reinterpret_cast<uintptr_t>(c + bytes - 1) & ~uintptr_t{63};
  for (uintptr_t line = first; line <= last; line += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 3);
  }
}
}  // namespace set_associative_internal

}  // namespace engram::cache
