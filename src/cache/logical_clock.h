// The row cache's logical clock: 32-bit access stamps read as ages.
//
// Every Lookup, Insert and InsertPinned takes one tick of a 64-bit counter; a
// way keeps the low 32 bits of its last access's tick. Ages are exact up to
// kMaxStampAge and saturate there: the cache's upkeep clamps every stamp to
// at most that age once per kStampRefreshTicks, so a true age never reaches
// 2^31 and never reads as negative (young).
#pragma once

#include <cstdint>

namespace engram::cache {

constexpr uint32_t kMaxStampAge = 1u << 30;
// kMaxStampAge + kStampRefreshTicks + the ticks one upkeep call may lag stays
// far below 2^31.
constexpr uint64_t kStampRefreshTicks = uint64_t{1} << 29;

// How long ago (in ticks) a stamp was written. A stamp from a racing thread
// may be a little ahead of `now`: that is age 0, not 4 billion.
inline uint32_t AgeOf(uint32_t now, uint32_t stamp) {
  int32_t age = static_cast<int32_t>(now - stamp);
  return age < 0 ? 0 : static_cast<uint32_t>(age);
}

}  // namespace engram::cache
