// CopyRow: copies one cached row out, as the batch lookups serve it.
//
// Why not a plain memcpy: a row's size is known only at run time, so
// std::memcpy is a call into the C library, whose size dispatch costs ~50
// instructions before it moves a byte -- about a sixth of a hashed hit's
// instructions. An Engram row (256 fp8 bytes and 8 scale bytes) is copied
// instead with a run of fixed 16-byte moves, which the compiler expands
// inline (and a fixed 264-byte memcpy would not do: GCC turns it into
// `rep movsq`, which is slower to start than the call). Other sizes take
// memcpy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace engram::cache {

inline constexpr size_t kEngramRowBytes = 264;

[[gnu::always_inline]] inline void CopyRow(void* dst, const void* src, size_t bytes) {
  if (bytes == kEngramRowBytes) {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
#pragma GCC unroll 16
    for (size_t i = 0; i < 256; i += 16) std::memcpy(d + i, s + i, 16);
    std::memcpy(d + 256, s + 256, 8);
    return;
  }
  std::memcpy(dst, src, bytes);
}

}  // namespace engram::cache
