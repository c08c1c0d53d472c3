// Little-endian load/store helpers. The file formats here are little-endian
// regardless of the host, so all field access goes through these.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace engram {

inline uint64_t LoadLe(const std::byte* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
inline uint16_t LoadLe16(const std::byte* p) { return static_cast<uint16_t>(LoadLe(p, 2)); }
inline uint32_t LoadLe32(const std::byte* p) { return static_cast<uint32_t>(LoadLe(p, 4)); }
inline uint64_t LoadLe64(const std::byte* p) {
  if constexpr (std::endian::native == std::endian::little) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  return LoadLe(p, 8);
}

inline void StoreLe(std::byte* p, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) {
    p[i] = static_cast<std::byte>(v & 0xff);
    v >>= 8;
  }
}
inline void StoreLe32(std::byte* p, uint32_t v) { StoreLe(p, v, 4); }
inline void StoreLe64(std::byte* p, uint64_t v) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, 8);
    return;
  }
  StoreLe(p, v, 8);
}

}  // namespace engram
