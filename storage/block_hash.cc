#include "storage/block_hash.h"

#include <xxhash.h>

namespace engram {

#if defined(ENGRAM_BLOCK_HASH_AVX2)
uint64_t BlockHashAvx2(const void* data, size_t bytes, uint64_t seed);  // block_hash_avx2.cc

bool BlockHashUsesAvx2() {
  static const bool avx2 = [] {
    __builtin_cpu_init();  // may run before main (static initializers)
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return avx2;
}

uint64_t BlockHash(const void* data, size_t bytes, uint64_t seed) {
  return BlockHashUsesAvx2() ? BlockHashAvx2(data, bytes, seed) : XXH3_64bits_withSeed(data, bytes, seed);
}
#else
bool BlockHashUsesAvx2() { return false; }

uint64_t BlockHash(const void* data, size_t bytes, uint64_t seed) { return XXH3_64bits_withSeed(data, bytes, seed); }
#endif

}  // namespace engram
