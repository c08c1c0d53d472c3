// Exact floor modulo of an int64 bit pattern by a fixed divisor, without a
// hardware 64-bit division.
//
// The hash takes mix % prime for every (position, order, head): 24 divisions
// per token. A 64-bit `div` costs tens of cycles; the Granlund-Montgomery
// "division by invariant integers using multiplication" (Figure 4.1, the form
// libdivide calls the add-indicator branch) turns it into one 64x64->128
// multiply, an add and shifts, exact for every uint64 numerator and every
// divisor >= 2. The int64 reference takes a FLOOR modulo (Python / torch
// remainder), so a negative mix s = u - 2^64 is corrected with
// (u mod p - 2^64 mod p) mod p.
#pragma once

#include <cstdint>

namespace engram {

struct FloorModulus {
  uint64_t divisor = 0;
  uint64_t magic = 0;    // floor(2^64 * (2^l - d) / d) + 1, l = ceil(log2 d)
  uint32_t shift = 0;    // l - 1
  uint64_t wrap_mod = 0; // 2^64 mod d
};

// divisor must be >= 2.
inline FloorModulus MakeFloorModulus(uint64_t divisor) {
  FloorModulus m;
  m.divisor = divisor;
  const uint32_t l = 64 - static_cast<uint32_t>(__builtin_clzll(divisor - 1));  // ceil(log2 d), d >= 2
  const unsigned __int128 two_l = static_cast<unsigned __int128>(1) << l;
  m.magic = static_cast<uint64_t>(((two_l - divisor) << 64) / divisor) + 1;
  m.shift = l - 1;
  m.wrap_mod = static_cast<uint64_t>((static_cast<unsigned __int128>(1) << 64) % divisor);
  return m;
}

// u mod d for any uint64 u.
inline uint64_t UnsignedMod(const FloorModulus& m, uint64_t u) {
  const uint64_t t1 = static_cast<uint64_t>((static_cast<unsigned __int128>(m.magic) * u) >> 64);
  const uint64_t q = (t1 + ((u - t1) >> 1)) >> m.shift;
  return u - q * m.divisor;
}

// floor_mod(int64(bits), d), in [0, d).
inline uint64_t FloorMod(const FloorModulus& m, uint64_t bits) {
  const uint64_t r = UnsignedMod(m, bits);
  if (static_cast<int64_t>(bits) >= 0) return r;
  return r >= m.wrap_mod ? r - m.wrap_mod : r + (m.divisor - m.wrap_mod);
}

}  // namespace engram
