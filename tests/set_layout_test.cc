// SetLayout / SetView: how a set's index entry is laid out (set_layout.h).
#include "src/cache/set_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace engram::cache {
namespace {

TEST(SetLayout, FiveWaysFillExactlyOneCacheLine) {
  SetLayout l = SetLayout::For(5);
  EXPECT_TRUE(l.compact);
  EXPECT_EQ(l.stride, 64u);
  EXPECT_EQ(l.keys_offset + 8 * 5, 64u);  // no padding: 12.8 B of index per row
}

TEST(SetLayout, EveryWidthFitsItsStrideAndWideSetsKeep32BitMasks) {
  for (uint32_t ways = 1; ways <= 32; ++ways) {
    SetLayout l = SetLayout::For(ways);
    EXPECT_EQ(l.compact, ways <= 8) << ways;
    EXPECT_GE(l.stamps_offset, l.compact ? 4u : 12u) << ways;
    EXPECT_GE(l.keys_offset, l.stamps_offset + 4 * ways) << ways;
    EXPECT_EQ(l.keys_offset % 8, 0u) << ways;
    EXPECT_LE(l.keys_offset + 8 * ways, l.stride) << ways;
    EXPECT_EQ(l.stride % 8, 0u) << ways;
    EXPECT_LE(l.stride, 16 * ways + 16) << ways;
  }
  EXPECT_EQ(SetLayout::For(4).stride, 64u);
  EXPECT_EQ(SetLayout::For(8).stride, 128u);
  EXPECT_EQ(SetLayout::For(16).stride, 256u);
}

TEST(SetView, MasksBesideTheLockSurviveLockingAndUnlocking) {
  for (uint32_t ways : {5u, 8u, 16u, 32u}) {
    SetLayout l = SetLayout::For(ways);
    std::vector<uint64_t> storage(l.stride / 8, 0);
    SetView s(reinterpret_cast<uint8_t*>(storage.data()), l);
    const uint32_t full = ways == 32 ? ~0u : (1u << ways) - 1;
    s.Lock();
    s.set_occupied(full);
    s.set_pinned(full & 0x5555'5555u);
    EXPECT_FALSE(s.TryLock());
    s.Unlock();
    EXPECT_TRUE(s.TryLock());
    EXPECT_EQ(s.occupied(), full) << ways;
    EXPECT_EQ(s.pinned(), full & 0x5555'5555u) << ways;
    s.Unlock();
  }
}

TEST(SetView, AnUnlockedReadIsValidOnlyIfNoWriterHeldTheLockSinceItBegan) {
  for (uint32_t ways : {5u, 16u}) {
    SetLayout l = SetLayout::For(ways);
    std::vector<uint64_t> storage(l.stride / 8, 0);
    SetView s(reinterpret_cast<uint8_t*>(storage.data()), l);
    const uint32_t quiet = s.ReadBegin();
    EXPECT_EQ(quiet & 1, 0u) << ways;
    EXPECT_TRUE(s.ReadValid(quiet)) << ways;
    s.Lock();
    EXPECT_EQ(s.ReadBegin() & 1, 1u) << ways << ": a held lock must read as odd";
    EXPECT_FALSE(s.ReadValid(quiet)) << ways;
    s.Unlock();
    EXPECT_FALSE(s.ReadValid(quiet)) << ways << ": a lock taken and released in between must show";
    const uint32_t after = s.ReadBegin();
    EXPECT_EQ(after & 1, 0u) << ways;
    ASSERT_TRUE(s.TryLock());
    s.Unlock();
    EXPECT_FALSE(s.ReadValid(after)) << ways;
  }
}

TEST(SetView, AReleaseThatChangedNothingKeepsUnlockedReadsValid) {
  SetLayout l = SetLayout::For(5);
  std::vector<uint64_t> storage(l.stride / 8, 0);
  SetView s(reinterpret_cast<uint8_t*>(storage.data()), l);
  const uint32_t before = s.ReadBegin();
  s.Lock();
  s.set_stamp(2, 12345);  // stamps are not checked by readers
  s.Unlock(/*changed=*/false);
  EXPECT_TRUE(s.ReadValid(before));
  EXPECT_EQ(s.ReadBegin(), before);
  s.Lock();
  s.Unlock(/*changed=*/true);
  EXPECT_FALSE(s.ReadValid(before));
}

TEST(SetView, TheVersionWrapsRoundWithoutLookingHeldOrTouchingTheMasks) {
  for (uint32_t ways : {5u, 8u}) {
    SetLayout l = SetLayout::For(ways);
    std::vector<uint64_t> storage(l.stride / 8, 0);
    SetView s(reinterpret_cast<uint8_t*>(storage.data()), l);
    s.Lock();
    s.set_occupied(0xff >> (8 - ways));
    s.set_pinned(0x5);
    s.Unlock();
    for (int i = 0; i < (1 << 15) + 3; ++i) {
      s.Lock();
      s.Unlock();
      ASSERT_EQ(s.ReadBegin() & 1, 0u) << i;
    }
    EXPECT_EQ(s.occupied(), 0xffu >> (8 - ways)) << ways << ": a carry out of the version";
    EXPECT_EQ(s.pinned(), 0x5u) << ways;
    EXPECT_TRUE(s.TryLock());
    s.Unlock();
  }
}

TEST(SetView, LockExcludesConcurrentWritersOfTheMasks) {
  SetLayout l = SetLayout::For(5);
  std::vector<uint64_t> storage(l.stride / 8, 0);
  SetView s(reinterpret_cast<uint8_t*>(storage.data()), l);
  // Two threads each toggle their own bit 20,000 times under the lock; a lost
  // update would leave a bit in the wrong state or corrupt the stamps.
  auto work = [&](uint32_t bit) {
    for (int i = 0; i < 20000; ++i) {
      s.Lock();
      s.set_occupied(s.occupied() ^ (1u << bit));
      s.set_stamp(bit, s.stamp(bit) + 1);
      s.Unlock();
    }
  };
  std::thread a(work, 0), b(work, 3);
  a.join();
  b.join();
  EXPECT_EQ(s.occupied(), 0u);
  EXPECT_EQ(s.stamp(0), 20000u);
  EXPECT_EQ(s.stamp(3), 20000u);
}

}  // namespace
}  // namespace engram::cache
