// RowDestination: where a gather puts its rows when they go in groups (one
// layer of a step's [tokens][layers][slots][record] buffer), computed by
// RowPlacement with a multiply instead of a division, and the checks that
// refuse destinations whose rows would overlap or leave the address space.
#include "src/store/row_placement.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "src/store/gather_arguments.h"

namespace engram {
namespace {

std::byte* At(uintptr_t address) { return reinterpret_cast<std::byte*>(address); }

TEST(RowPlacement, GroupsPlaceEveryRowAsTheDivisionSays) {
  std::mt19937_64 rng(5);
  const std::vector<uint32_t> groups = {2, 3, 7, 12, 24, 100, 1000, 65537, UINT32_MAX - 1, UINT32_MAX};
  for (uint32_t g : groups) {
    const RowDestination d{At(4096), 264, g, 9 * size_t(g) * 264 + 8};
    const RowPlacement place(d);
    ASSERT_FALSE(place.flat()) << g;
    std::vector<uint32_t> positions = {0, 1, g - 1, g, g + 1, 2 * g - 1, UINT32_MAX - 1, UINT32_MAX};
    for (int i = 0; i < 2000; ++i) positions.push_back(static_cast<uint32_t>(rng()));
    for (int i = 0; i < 200; ++i) positions.push_back(static_cast<uint32_t>(rng() % (4ull * g)));
    for (uint32_t p : positions) {
      const size_t want = 4096 + size_t(p / g) * d.group_stride + size_t(p % g) * d.stride;
      ASSERT_EQ(place.At(p), At(want)) << "group_rows " << g << " position " << p;
    }
  }
}

TEST(RowPlacement, OneGroupAndGroupsThatFollowAtTheStrideAreFlat) {
  const RowPlacement one(RowDestination{At(64), 300});
  EXPECT_TRUE(one.flat());
  EXPECT_EQ(one.At(7), At(64 + 7 * 300));
  // A one-layer step: groups of 24 rows, 24 rows apart.
  const RowPlacement layer(RowDestination{At(64), 264, 24, 24 * 264});
  EXPECT_TRUE(layer.flat());
  EXPECT_EQ(layer.At(50), At(64 + 50 * 264));
  // Every row its own group: the group stride is the stride.
  const RowPlacement singles(RowDestination{At(64), 264, 1, 1000});
  EXPECT_TRUE(singles.flat());
  EXPECT_EQ(singles.At(3), At(64 + 3000));
}

GatherTarget Target(uint64_t rows = 100) { return GatherTarget{1, 264, rows, nullptr}; }

TEST(RowDestinationCheck, AStepsLayerIsAccepted) {
  std::vector<std::byte> out(4 * 2 * 24 * 264);
  std::vector<uint64_t> ids(4 * 24, 3);
  for (size_t layer : {0, 1}) {
    const RowDestination d{out.data() + layer * 24 * 264, 264, 24, 2 * 24 * 264};
    EXPECT_TRUE(CheckGatherArguments(Target(), 0, ids, d).ok());
  }
}

TEST(RowDestinationCheck, GroupsWhoseRowsWouldOverlapAreRefused) {
  std::vector<std::byte> out(1 << 20);
  std::vector<uint64_t> ids(48, 1);
  // Groups of 24 rows of 264 B take 6,336 B: one byte less apart overlaps.
  Status s = CheckGatherArguments(Target(), 0, ids, RowDestination{out.data(), 264, 24, 24 * 264 - 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("would overlap"), std::string::npos) << s.ToString();
  EXPECT_TRUE(CheckGatherArguments(Target(), 0, ids, RowDestination{out.data(), 264, 24, 24 * 264}).ok());
  // A stride so large that one group's extent wraps the address space.
  s = CheckGatherArguments(Target(), 0, ids, RowDestination{out.data(), SIZE_MAX / 2, 24, 1 << 20});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

TEST(RowDestinationCheck, GroupsPastTheAddressSpaceAndHugeGroupsAreRefused) {
  std::vector<uint64_t> ids(48, 1);
  const RowDestination far{At(UINTPTR_MAX - (1 << 20)), 264, 24, size_t(1) << 40};
  EXPECT_EQ(CheckGatherArguments(Target(), 0, ids, far).code(), StatusCode::kInvalidArgument);
  const RowDestination huge{At(4096), 264, size_t(UINT32_MAX) + 1, size_t(1) << 50};
  Status s = CheckGatherArguments(Target(), 0, ids, huge);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("rows per group"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace engram
