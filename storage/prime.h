// Primality of 64-bit integers (layout validation: every hash modulus must be
// a prime, as the reference layout's prime search guarantees).
#pragma once

#include <cstdint>

namespace engram {

// Deterministic for every uint64 (Miller-Rabin with the first 12 prime bases).
bool IsPrime(uint64_t n);

}  // namespace engram
