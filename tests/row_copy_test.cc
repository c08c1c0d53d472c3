// CopyRow: every byte of the row and none past it, at the Engram row size it
// copies inline and at the sizes it leaves to memcpy, from and to addresses
// of every alignment.
#include "src/cache/row_copy.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace engram::cache {
namespace {

TEST(RowCopyTest, CopiesExactlyTheRowAtEveryAlignmentAndTouchesNothingAround) {
  constexpr size_t kGuard = 64;
  constexpr uint8_t kFill = 0xA5;
  for (size_t bytes : {size_t{1}, size_t{8}, size_t{255}, size_t{256}, kEngramRowBytes, kEngramRowBytes + 1,
                       size_t{520}}) {
    for (size_t src_offset = 0; src_offset < 16; src_offset += 3) {
      for (size_t dst_offset = 0; dst_offset < 16; dst_offset += 5) {
        std::vector<uint8_t> src(bytes + 32);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + bytes);
        std::vector<uint8_t> dst(kGuard + 16 + bytes + kGuard, kFill);
        uint8_t* to = dst.data() + kGuard + dst_offset;
        CopyRow(to, src.data() + src_offset, bytes);
        for (size_t i = 0; i < bytes; ++i) {
          ASSERT_EQ(to[i], src[src_offset + i]) << "byte " << i << " of " << bytes;
        }
        for (uint8_t* p = dst.data(); p < to; ++p) ASSERT_EQ(*p, kFill) << "before the row, " << bytes << " B";
        for (uint8_t* p = to + bytes; p < dst.data() + dst.size(); ++p) {
          ASSERT_EQ(*p, kFill) << "after the row, " << bytes << " B";
        }
      }
    }
  }
}

}  // namespace
}  // namespace engram::cache
