// BlockHash (storage/block_hash.h) is libxxhash's XXH3_64bits_withSeed, bit
// for bit, whichever build of it runs on this machine.
#include "storage/block_hash.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <random>
#include <vector>

namespace engram {
namespace {

TEST(BlockHash, EqualsLibxxhashForEveryLengthClassAndSeed) {
  std::mt19937_64 rng(42);
  std::vector<unsigned char> buf(20000);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  // XXH3's length classes: 0, 1-3, 4-8, 9-16, 17-128, 129-240, and long
  // inputs (whole stripes, partial stripes, several blocks of 1 KiB).
  for (size_t len : {0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1000, 1024, 4088, 4096, 10007, 20000}) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{0x9e3779b97f4a7c15}, ~uint64_t{0}}) {
      for (size_t offset : {size_t{0}, size_t{3}}) {  // unaligned too
        if (offset + len > buf.size()) continue;
        EXPECT_EQ(BlockHash(buf.data() + offset, len, seed), XXH3_64bits_withSeed(buf.data() + offset, len, seed))
            << "len " << len << " seed " << seed << " offset " << offset;
      }
    }
  }
}

TEST(BlockHash, UsesTheAvx2BuildWhereTheCpuHasAvx2) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "this CPU has no AVX2";
  EXPECT_TRUE(BlockHashUsesAvx2());
#else
  GTEST_SKIP() << "AVX2 is x86-64 only; the library is used";
#endif
}

}  // namespace
}  // namespace engram
