// SharedRowCacheReader: a cache written by its owner, read through a
// read-only mapping of the same memory (as a node client reads the node
// service's cache), and RowCache::RecordHits, the owner's side of it.
#include <gtest/gtest.h>

#include <gmock/gmock.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "src/cache/row_cache.h"
#include "src/cache/set_associative_cache.h"
#include "src/cache/shared_row_cache_reader.h"
#include "src/node/shared_cache_memory.h"

namespace engram {
namespace {

constexpr uint32_t kRowBytes = 64;

std::vector<std::byte> RowOf(uint64_t id) {
  std::vector<std::byte> row(kRowBytes);
  for (uint32_t i = 0; i < kRowBytes; ++i) row[i] = std::byte((id * 131 + i * 7) & 0xff);
  return row;
}

// Whether MADV_COLLAPSE turns a committed range of a shared memfd region
// into a huge page here (Linux >= 6.1 with transparent huge pages).
bool KernelCollapsesSharedMemory() {
  auto memory = node::SharedCacheMemory::Create(node::kHugePageBytes, -1);
  if (!memory.ok()) return false;
  auto region = (*memory)->Allocate(node::kHugePageBytes, "probe");
  if (!region.ok()) return false;
  region->data()[0] = 1;
  return ::madvise(region->data(), node::kHugePageBytes, 25 /* MADV_COLLAPSE */) == 0;
}

// A cache whose index and slab are in a memfd, and a read-only mapping of
// that memfd at another address for the reader.
struct SharedCache {
  std::unique_ptr<node::SharedCacheMemory> memory;
  std::unique_ptr<cache::SetAssociativeRowCache> cache;
  node::SharedMapping read_only;
  std::optional<cache::SharedRowCacheReader> reader;

  static SharedCache Make(const char* spec, uint64_t sets, uint64_t memory_bytes = 64u << 20,
                          uint64_t max_rows = RowCache::kNoRowLimit) {
    SharedCache s;
    auto memory = node::SharedCacheMemory::Create(memory_bytes, -1);
    EXPECT_TRUE(memory.ok()) << memory.status().ToString();
    s.memory = std::move(memory).value();
    auto config = RowCacheConfig::FromSpec(spec);
    EXPECT_TRUE(config.ok());
    node::SharedCacheMemory* m = s.memory.get();
    auto made = cache::SetAssociativeRowCache::Make(*config, sets, kRowBytes, max_rows,
                                                     [m](uint64_t bytes, const char* what) { return m->Allocate(bytes, what); });
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    s.cache = std::move(made).value();
    auto fd = s.memory->OpenReadOnly();
    EXPECT_TRUE(fd.ok());
    auto mapped = node::SharedMapping::Map(*fd, s.memory->size(), /*writable=*/false);
    ::close(*fd);
    EXPECT_TRUE(mapped.ok()) << mapped.status().ToString();
    s.read_only = std::move(mapped).value();
    auto g = s.cache->SharedGeometry();
    EXPECT_TRUE(g.has_value());
    auto reader = cache::SharedRowCacheReader::Attach(*g, s.read_only.data() + s.memory->OffsetOf(s.cache->index_data()),
                                                      s.read_only.data() + s.memory->OffsetOf(s.cache->slab_data()));
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    s.reader.emplace(std::move(reader).value());
    return s;
  }

  // Looks ids up through the reader: the hit mask, rows in out.
  std::vector<uint8_t> Read(const std::vector<uint64_t>& ids, std::vector<std::byte>* out) const {
    out->assign(ids.size() * kRowBytes, std::byte{0});
    std::vector<std::byte*> dsts;
    for (size_t i = 0; i < ids.size(); ++i) dsts.push_back(out->data() + i * kRowBytes);
    std::vector<uint8_t> hit(ids.size());
    reader->LookupBatch(ids, dsts, hit);
    return hit;
  }
};

TEST(SharedRowCacheReaderTest, ReadsExactlyTheRowsTheCacheHoldsThroughAReadOnlyMapping) {
  for (const char* spec : {"default", "legacy", "two-choice", "default,ways=16", "default,ways=3"}) {
    SCOPED_TRACE(spec);
    SharedCache s = SharedCache::Make(spec, 256);
    std::vector<uint64_t> inserted;
    for (uint64_t id = 0; id < 3000; id += 3) {
      auto row = RowOf(id);
      const InsertOutcome o = s.cache->Insert(id, row);
      if (o == InsertOutcome::kInserted || o == InsertOutcome::kInsertedEvicted) inserted.push_back(id);
    }
    std::vector<uint64_t> ids;
    for (uint64_t id = 0; id < 3000; ++id) ids.push_back(id);
    std::vector<std::byte> out;
    const std::vector<uint8_t> hit = s.Read(ids, &out);
    size_t hits = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      // Exactly the resident rows are hits, with their bytes.
      std::vector<std::byte> probe(kRowBytes);
      const bool resident = s.cache->Contains(ids[i]);
      EXPECT_EQ(hit[i] != 0, resident) << "row " << ids[i];
      if (hit[i]) {
        EXPECT_EQ(std::memcmp(out.data() + i * kRowBytes, RowOf(ids[i]).data(), kRowBytes), 0) << ids[i];
        ++hits;
      }
    }
    EXPECT_GT(hits, 100u);
    // The reader touched no statistic of the owner's.
    EXPECT_EQ(s.cache->Stats().lookups, 0u);
  }
}

// A cache with a slot for every row of its table places rows directly: after
// one pass the owner holds every row, whatever the policy, and a reader
// attached through the geometry finds each one.
TEST(SharedRowCacheReaderTest, ADirectlyPlacedCacheHoldsTheWholeTableForTheReader) {
  for (const char* spec : {"default", "legacy", "two-choice", "lru", "default,ways=3"}) {
    SCOPED_TRACE(spec);
    const uint32_t ways = RowCacheConfig::FromSpec(spec).value().ways;
    const uint64_t rows = 4000;
    SharedCache s = SharedCache::Make(spec, (rows + ways - 1) / ways, 64u << 20, rows);
    ASSERT_TRUE(s.cache->SharedGeometry()->direct_placement);
    std::vector<uint64_t> ids;
    for (uint64_t id = 0; id < rows; ++id) ids.push_back((id * 7919) % rows);  // not in order
    for (uint64_t id : ids) {
      auto row = RowOf(id);
      EXPECT_EQ(s.cache->Insert(id, row), InsertOutcome::kInserted) << id;
    }
    std::vector<std::byte> out;
    const std::vector<uint8_t> hit = s.Read(ids, &out);
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_TRUE(hit[i]) << "row " << ids[i];
      ASSERT_EQ(std::memcmp(out.data() + i * kRowBytes, RowOf(ids[i]).data(), kRowBytes), 0) << ids[i];
    }
    EXPECT_EQ(s.cache->Stats().evictions, 0u);
  }
}

TEST(SharedRowCacheReaderTest, PinnedRowsAreMissesForTheReader) {
  SharedCache s = SharedCache::Make("default", 64);
  auto a = RowOf(1), b = RowOf(2);
  ASSERT_EQ(s.cache->Insert(1, a), InsertOutcome::kInserted);
  ASSERT_EQ(s.cache->InsertPinned(2, b), InsertOutcome::kInserted);
  std::vector<std::byte> out;
  EXPECT_EQ(s.Read({1, 2}, &out), (std::vector<uint8_t>{1, 0}));
  ASSERT_TRUE(s.cache->Unpin(2));
  EXPECT_EQ(s.Read({1, 2}, &out), (std::vector<uint8_t>{1, 1}));
}

TEST(SharedRowCacheReaderTest, ReadersNeverSeeATornRowWhileWritersReplaceRows) {
  // A small cache and many rows: every insert evicts or relocates, so the
  // readers keep meeting sets a writer is changing.
  SharedCache s = SharedCache::Make("default,admission=always", 16);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> wrong{0}, hits{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      while (!stop.load(std::memory_order_relaxed)) {
        const uint64_t id = rng() % 400;
        auto row = RowOf(id);
        if (rng() % 8 == 0) {
          if (s.cache->InsertPinned(id, row) != InsertOutcome::kRefusedAllPinned) s.cache->Unpin(id);
        } else {
          s.cache->Insert(id, row);
        }
      }
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(100 + r);
      std::vector<uint64_t> ids(32);
      std::vector<std::byte> out;
      for (int round = 0; round < 20000; ++round) {
        for (auto& id : ids) id = rng() % 400;
        const std::vector<uint8_t> hit = s.Read(ids, &out);
        for (size_t i = 0; i < ids.size(); ++i) {
          if (!hit[i]) continue;
          ++hits;
          if (std::memcmp(out.data() + i * kRowBytes, RowOf(ids[i]).data(), kRowBytes) != 0) ++wrong;
        }
      }
    });
  }
  for (size_t t = 2; t < threads.size(); ++t) threads[t].join();
  stop.store(true);
  threads[0].join();
  threads[1].join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(hits.load(), 1000u);
}

TEST(SharedRowCacheReaderTest, RecordedHitsCountAndRaiseTheRowsValue) {
  SharedCache s = SharedCache::Make("default", 64);
  auto row = RowOf(5);
  ASSERT_EQ(s.cache->Insert(5, row), InsertOutcome::kInserted);
  const uint32_t before = s.cache->EstimateOf(5);
  std::vector<uint64_t> hits(6, 5);
  s.cache->RecordHits(hits);
  EXPECT_GT(s.cache->EstimateOf(5), before);
  const RowCacheStats st = s.cache->Stats();
  EXPECT_EQ(st.hits, 6u);
  EXPECT_EQ(st.lookups, 6u);
  // The recorded row is now the most valuable resident.
  auto other = RowOf(6);
  ASSERT_EQ(s.cache->Insert(6, other), InsertOutcome::kInserted);
  auto ranked = s.cache->ResidentRowsByValue();
  ASSERT_EQ(ranked.size(), 2u);
  EXPECT_EQ(ranked[0].row_id, 5u);
}

TEST(SharedRowCacheReaderTest, AttachRefusesAGeometryThatDoesNotCheckOutAndSaysWhy) {
  SharedCache s = SharedCache::Make("default", 64);
  const cache::SharedCacheGeometry g = *s.cache->SharedGeometry();
  const uint8_t* index = s.cache->index_data();
  const uint8_t* slab = s.cache->slab_data();
  // The status Attach gives a geometry changed by `change`.
  auto attach = [&](auto change) {
    cache::SharedCacheGeometry bad = g;
    change(bad);
    auto r = cache::SharedRowCacheReader::Attach(bad, index, slab);
    EXPECT_FALSE(r.ok());
    return r.ok() ? Status::OK() : r.status();
  };
  using ::testing::HasSubstr;
  auto says = [](const Status& st, const char* what) {
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_THAT(st.ToString(), HasSubstr(what));
  };
  says(attach([](auto& b) { b.magic ^= 1; }), "index layout is not this build's");
  says(attach([](auto& b) { b.ways = 33; }), "ways 33 is not in 1..32");
  says(attach([](auto& b) { b.ways = 0; }), "ways 0 is not in 1..32");
  says(attach([](auto& b) { b.num_sets = 0; }), "set count 0");
  says(attach([&](auto& b) { b.num_sets = g.num_sets * 1000; }), "index region is smaller than its sets");
  says(attach([&](auto& b) { b.index_bytes = g.index_bytes - 1; }), "index region is smaller than its sets");
  says(attach([&](auto& b) { b.row_bytes = g.row_bytes * 1000; }), "slab region is smaller than its rows");
  says(attach([&](auto& b) { b.slab_bytes = g.slab_bytes - 1; }), "slab region is smaller than its rows");
  says(attach([](auto& b) { b.row_bytes = 0; }), "row size 0");
  says(attach([](auto& b) { b.candidate_sets = 3; }), "candidate sets must be 1 or 2");
  says(attach([](auto& b) { b.direct_placement = 2; }), "direct placement must be 0 or 1");
  says(attach([](auto& b) {
         b.direct_placement = 1;
         b.candidate_sets = 2;
       }),
       "with one candidate set");
  says(attach([](auto& b) { b.reserved = 1; }), "a reserved field is set");
  // Sizes whose products would wrap around 2^64 are refused, not wrapped.
  says(attach([](auto& b) {
         b.num_sets = uint64_t{1} << 40;
         b.ways = 32;
         b.row_bytes = 1u << 20;
         b.index_bytes = ~uint64_t{0};
         b.slab_bytes = uint64_t{1} << 63;
       }),
       "slab region is smaller than its rows");
  auto no_slab = cache::SharedRowCacheReader::Attach(g, index, nullptr);
  ASSERT_FALSE(no_slab.ok());
  EXPECT_THAT(no_slab.status().ToString(), HasSubstr("no index or slab"));
  EXPECT_TRUE(cache::SharedRowCacheReader::Attach(g, index, slab).ok());
}

// A recorded hit stamps the row's way with its tick, in whichever candidate
// set the row is: with the victim chosen by age alone, the recorded rows
// then outlive the others.
TEST(SharedRowCacheReaderTest, RecordedHitsStampTheRowsWaySoTheyOutliveUnrecordedRows) {
  for (const char* spec : {"default,victim=lru,admission=always", "two-choice,victim=lru,admission=always"}) {
    SCOPED_TRACE(spec);
    SharedCache s = SharedCache::Make(spec, 64);
    uint64_t id = 0;
    while (s.cache->Stats().resident_rows < s.cache->capacity_rows() && id < 100000) {
      s.cache->Insert(id, RowOf(id));
      ++id;
    }
    std::vector<uint64_t> recorded, unrecorded;
    for (const RowCache::ResidentRow& r : s.cache->ResidentRowsByValue()) {
      (r.row_id % 2 == 0 ? recorded : unrecorded).push_back(r.row_id);
    }
    ASSERT_GT(recorded.size(), 50u);
    ASSERT_GT(unrecorded.size(), 50u);
    s.cache->AdvanceClockForTesting(100000);
    s.cache->RecordHits(recorded);
    // Every recorded row was stamped within the last recorded.size() ticks;
    // no other row was.
    size_t recorded_unstamped = 0, unrecorded_stamped = 0;
    for (const RowCache::ResidentRow& r : s.cache->ResidentRowsByValue()) {
      if (r.row_id % 2 == 0) {
        recorded_unstamped += r.age > recorded.size();
      } else {
        unrecorded_stamped += r.age < 100000;
      }
    }
    EXPECT_EQ(recorded_unstamped, 0u);
    EXPECT_EQ(unrecorded_stamped, 0u);
    // New rows (half as many as the unrecorded) evict the oldest residents of
    // their sets: nearly always unrecorded ones.
    const uint64_t arriving = unrecorded.size() / 2;
    for (uint64_t n = 0; n < arriving; ++n, ++id) s.cache->Insert(id, RowOf(id));
    size_t recorded_lost = 0, unrecorded_lost = 0;
    for (uint64_t r : recorded) recorded_lost += !s.cache->Contains(r);
    for (uint64_t r : unrecorded) unrecorded_lost += !s.cache->Contains(r);
    EXPECT_LE(recorded_lost, arriving / 10);
    EXPECT_GE(unrecorded_lost, arriving * 9 / 10);
  }
}

// The owner's huge-page commit (MADV_POPULATE_WRITE, then MADV_COLLAPSE) works
// on regions of the shared memfd, and the reader's read-only mapping still
// reads every row exactly afterwards.
TEST(SharedRowCacheReaderTest, CommittingSharedRegionsAsHugePagesKeepsEveryRowReadable) {
  // 16,384 sets: a 5.2 MiB slab, so whole huge pages to collapse.
  SharedCache s = SharedCache::Make("default", 16384, 16u << 20);
  // Committed at once, as a store does right after open, while rows arrive.
  s.cache->CommitMemory();
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < 20000; ++id) {
    s.cache->Insert(id, RowOf(id));
    ids.push_back(id);
  }
  s.cache->WaitForMemory();
  const cache::HugePagePromotion& p = s.cache->huge_pages_for_testing();
  auto g = *s.cache->SharedGeometry();
  // Populating works on shared memory wherever it works at all.
  uint8_t* probe = const_cast<uint8_t*>(s.cache->slab_data());
  if (::madvise(probe, 4096, 23 /* MADV_POPULATE_WRITE */) == 0) {
    EXPECT_GE(p.populated_bytes(), g.index_bytes + g.slab_bytes);
  }
  std::vector<std::byte> out;
  const std::vector<uint8_t> hit = s.Read(ids, &out);
  size_t hits = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(hit[i] != 0, s.cache->Contains(ids[i])) << ids[i];
    if (!hit[i]) continue;
    ++hits;
    ASSERT_EQ(std::memcmp(out.data() + i * kRowBytes, RowOf(ids[i]).data(), kRowBytes), 0) << ids[i];
  }
  EXPECT_GT(hits, 15000u);
  if (KernelCollapsesSharedMemory()) {
    EXPECT_GT(p.collapsed_ranges(), 0u);
  }
}

}  // namespace
}  // namespace engram
