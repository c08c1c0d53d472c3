// HugePagePromotion and the row cache's use of it: once most of the slab's
// 4 KiB pages are committed, the index and slab are collapsed into huge pages
// on a background thread, while lookups and inserts go on, and no row changes.
#include <sys/mman.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "src/cache/anonymous_memory.h"
#include "src/cache/huge_page_promotion.h"
#include "src/cache/set_associative_cache.h"
#include "src/cache/set_hasher.h"
#include "tests/testing/cache_rows.h"

namespace engram {
namespace {

constexpr uint32_t kRowBytes = 264;
constexpr uint64_t kHugePage = uint64_t{2} << 20;

#ifndef MADV_COLLAPSE
constexpr int MADV_COLLAPSE = 25;
#endif
#ifndef MADV_POPULATE_WRITE
constexpr int MADV_POPULATE_WRITE = 23;
#endif

// Whether this kernel commits pages on request (Linux >= 5.14).
bool KernelPopulates() {
  auto m = cache::AnonymousMemory::Allocate(4096, "probe");
  return m.ok() && ::madvise(m->data(), m->size(), MADV_POPULATE_WRITE) == 0;
}

// Pages of [p, p + bytes) resident in memory (mincore).
uint64_t ResidentPages(const uint8_t* p, uint64_t bytes) {
  std::vector<unsigned char> v((bytes + 4095) / 4096);
  if (::mincore(const_cast<uint8_t*>(p), bytes, v.data()) != 0) return 0;
  uint64_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

// Whether this kernel collapses a committed anonymous range into a huge page
// (Linux >= 6.1, transparent huge pages not disabled).
bool KernelCollapses() {
  auto m = cache::AnonymousMemory::Allocate(2 * kHugePage, "probe");
  if (!m.ok()) return false;
  const auto base = reinterpret_cast<uintptr_t>(m->data());
  auto* range = reinterpret_cast<uint8_t*>((base + kHugePage - 1) & ~(kHugePage - 1));
  range[0] = 1;
  return ::madvise(range, kHugePage, MADV_COLLAPSE) == 0;
}

std::vector<std::byte> RowOf(uint64_t id) { return testing::CacheRowOf(id, kRowBytes); }

TEST(HugePagePromotion, CollapsesCommittedRangesAndKeepsTheirBytes) {
  if (!KernelCollapses()) GTEST_SKIP() << "this kernel does not collapse ranges into huge pages (MADV_COLLAPSE)";
  auto m = cache::AnonymousMemory::Allocate(8 * kHugePage, "test region");
  ASSERT_TRUE(m.ok());
  for (uint64_t i = 0; i < m->size(); i += 4096 * 3) m->data()[i] = static_cast<uint8_t>(i / 4096);
  cache::HugePagePromotion p;
  p.Start({{m->data(), m->size()}});
  p.Start({});  // only the first call counts
  p.Wait();
  // Only whole, aligned huge pages inside the region: 7 or 8 of them.
  EXPECT_GE(p.collapsed_ranges(), 7u);
  EXPECT_LE(p.collapsed_ranges(), 8u);
  for (uint64_t i = 0; i < m->size(); i += 4096) {
    ASSERT_EQ(m->data()[i], i % (4096 * 3) == 0 ? static_cast<uint8_t>(i / 4096) : 0) << i;
  }
}

TEST(HugePagePromotion, PopulateCommitsEveryPageAndKeepsWrittenBytes) {
  if (!KernelPopulates()) GTEST_SKIP() << "this kernel does not populate on request (MADV_POPULATE_WRITE)";
  // Not a multiple of a huge page, and two regions: every byte of both counts.
  auto a = cache::AnonymousMemory::Allocate(5 * kHugePage + 3 * 4096, "region a");
  auto b = cache::AnonymousMemory::Allocate(kHugePage / 2, "region b");
  ASSERT_TRUE(a.ok() && b.ok());
  for (uint64_t i = 0; i < a->size(); i += 4096 * 7) a->data()[i] = static_cast<uint8_t>(1 + i / 4096);
  EXPECT_LT(ResidentPages(a->data(), a->size()), a->size() / 4096);
  cache::HugePagePromotion p;
  p.Start({{a->data(), a->size()}, {b->data(), b->size()}}, /*populate=*/true);
  p.Wait();
  EXPECT_EQ(p.populated_bytes(), a->size() + b->size());
  EXPECT_EQ(ResidentPages(a->data(), a->size()), a->size() / 4096);
  EXPECT_EQ(ResidentPages(b->data(), b->size()), b->size() / 4096);
  for (uint64_t i = 0; i < a->size(); i += 4096) {
    ASSERT_EQ(a->data()[i], i % (4096 * 7) == 0 ? static_cast<uint8_t>(1 + i / 4096) : 0) << i;
  }
}

// CommitMemory while rows go in and out: every row keeps its bytes, and the
// whole slab ends up committed.
TEST(HugePagePromotion, RowCacheCommitMemoryRacingInsertsKeepsEveryRow) {
  if (!KernelPopulates()) GTEST_SKIP() << "this kernel does not populate on request (MADV_POPULATE_WRITE)";
  auto config = RowCacheConfig::Preset("default");
  ASSERT_TRUE(config.ok());
  auto made = cache::SetAssociativeRowCache::Make(*config, 40000, kRowBytes);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  cache::SetAssociativeRowCache& c = **made;
  for (uint64_t id = 0; id < 1000; ++id) c.Insert(id, RowOf(id));
  c.CommitMemory();
  std::atomic<uint64_t> wrong{0};
  std::thread reader([&] {
    std::vector<std::byte> dst(kRowBytes);
    for (int pass = 0; pass < 20; ++pass) {
      for (uint64_t r = 0; r < 1000; ++r) {
        if (c.Lookup(r, dst) && dst != RowOf(r)) wrong.fetch_add(1);
      }
    }
  });
  for (uint64_t id = 1000; id < 20000; ++id) c.Insert(id, RowOf(id));
  reader.join();
  c.huge_pages_for_testing().Wait();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(c.huge_pages_for_testing().populated_bytes(), c.capacity_rows() * kRowBytes);
  std::vector<std::byte> dst(kRowBytes);
  for (uint64_t r = 0; r < 20000; ++r) {
    if (c.Lookup(r, dst)) {
      ASSERT_EQ(dst, RowOf(r)) << r;
    }
  }
}

TEST(HugePagePromotion, RegionsSmallerThanAHugePageAreLeftAlone) {
  auto m = cache::AnonymousMemory::Allocate(kHugePage / 2, "small region");
  ASSERT_TRUE(m.ok());
  cache::HugePagePromotion p;
  p.Start({{m->data(), m->size()}});
  p.Wait();
  EXPECT_EQ(p.collapsed_ranges(), 0u);
}

// A row cache of 264-B rows promotes once ~14 % of its slots are filled (by
// then ~90 % of the slab's 4 KiB pages are committed), not before; lookups
// racing the promotion still hit, with the right bytes.
TEST(HugePagePromotion, RowCachePromotesOnceMostPagesAreCommittedAndRowsSurvive) {
  const bool collapses = KernelCollapses();
  auto config = RowCacheConfig::Preset("default");
  ASSERT_TRUE(config.ok());
  auto made = cache::SetAssociativeRowCache::Make(*config, 40000, kRowBytes);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  cache::SetAssociativeRowCache& c = **made;
  const uint64_t capacity = c.capacity_rows();
  std::vector<uint64_t> kept;
  uint64_t id = 0;
  // 10 % filled: no promotion yet.
  while (c.Stats().resident_rows < capacity / 10) {
    c.Insert(id, RowOf(id));
    ++id;
  }
  c.huge_pages_for_testing().Wait();
  EXPECT_EQ(c.huge_pages_for_testing().collapsed_ranges(), 0u);

  // Readers look rows up while the fill crosses ~14 % and the promotion runs.
  const uint64_t readable = id;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      std::vector<std::byte> dst(kRowBytes);
      for (uint64_t r = t; !stop.load(std::memory_order_relaxed); r = (r + 7) % readable) {
        if (c.Lookup(r, dst) && dst != RowOf(r)) wrong.fetch_add(1);
      }
    });
  }
  while (c.Stats().resident_rows < capacity / 5) {
    c.Insert(id, RowOf(id));
    ++id;
  }
  c.huge_pages_for_testing().Wait();
  stop = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(wrong.load(), 0u);
  if (collapses) {
    EXPECT_GT(c.huge_pages_for_testing().collapsed_ranges(), 0u);
  }
  std::vector<std::byte> dst(kRowBytes);
  uint64_t hits = 0;
  for (uint64_t r = 0; r < id; ++r) {
    if (c.Lookup(r, dst)) {
      ++hits;
      ASSERT_EQ(dst, RowOf(r)) << r;
    }
  }
  EXPECT_GT(hits, capacity / 10);
}

}  // namespace
}  // namespace engram
