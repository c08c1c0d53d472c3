// BlockHash: XXH3-64 with a seed, the function behind every block and unit
// checksum (FORMAT.md), equal bit for bit to libxxhash's
// XXH3_64bits_withSeed.
//
// Why not call libxxhash directly: Debian builds it for baseline x86-64
// (SSE2), where a 4 KiB block takes ~270 ns; the same xxHash code built
// with AVX2 takes ~130 ns, and a missed row's block is hashed on every
// read. On x86-64 the AVX2 build (block_hash_avx2.cc, the only file compiled
// with -mavx2) is used when the CPU has AVX2; elsewhere, and on other
// architectures (arm64's libxxhash uses NEON already), the library is.
#pragma once

#include <cstddef>
#include <cstdint>

namespace engram {

uint64_t BlockHash(const void* data, size_t bytes, uint64_t seed);

// Whether BlockHash uses the AVX2 build on this machine.
bool BlockHashUsesAvx2();

}  // namespace engram
