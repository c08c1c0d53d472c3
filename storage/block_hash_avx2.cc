// xxHash's own XXH3, inlined into this file and compiled with -mavx2 (see
// block_hash.h); called only when the CPU has AVX2.
#if defined(ENGRAM_BLOCK_HASH_AVX2)
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace engram {

uint64_t BlockHashAvx2(const void* data, size_t bytes, uint64_t seed) {
  return XXH3_64bits_withSeed(data, bytes, seed);
}

}  // namespace engram
#endif
