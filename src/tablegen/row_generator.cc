#include "src/tablegen/row_generator.h"

#include <xxhash.h>

#include <cstring>

#include "storage/byte_order.h"

namespace engram {

void GenerateRow(uint64_t seed, uint64_t row, std::span<std::byte> out) {
  std::byte key[8];
  StoreLe64(key, row);
  uint64_t state = XXH3_64bits_withSeed(key, sizeof key, seed);
  size_t i = 0;
  const size_t n = out.size();
  while (i < n) {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    if (n - i >= 8) {
      StoreLe64(out.data() + i, z);
      i += 8;
    } else {
      StoreLe(out.data() + i, z, static_cast<int>(n - i));
      i = n;
    }
  }
}

void GenerateRows(uint64_t seed, uint64_t first_row, uint64_t count, uint32_t record_bytes,
                  std::span<std::byte> out) {
  for (uint64_t k = 0; k < count; ++k) {
    GenerateRow(seed, first_row + k, out.subspan(k * record_bytes, record_bytes));
  }
}

}  // namespace engram
