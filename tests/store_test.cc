// The store against real table files on the real disk, through every I/O
// backend: byte-exact rows, readiness accounting, read-ahead, bad input and
// corrupt blocks.
#include "engram/store.h"
#include "engram/asio.h"

#include <sys/mman.h>

#include <gtest/gtest.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <future>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <chrono>
#include <thread>

#include "src/common/resident_memory.h"
#include "tests/testing/gated_engine.h"
#include "src/store/budget_split.h"
#include "src/store/store_impl.h"
#include "storage/file_util.h"
#include "storage/io/io_engine.h"
#include "storage/table_file.h"
#include "tests/io_test_util.h"
#include "tests/testing/captured_log.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

using testing::TempDir;

constexpr uint32_t kRecord = 264;
constexpr uint64_t kRows = 30000;  // ~2000 blocks, 8 MB
constexpr uint64_t kSeed = 42;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("layer1.engram");
    ASSERT_TRUE(testing::WriteGeneratedTable(path_, kRows, kRecord, kSeed).ok());
    fileutil::DropFromPageCache(path_);
  }

  StoreOptions Options(const std::string& backend = "auto", uint64_t cache_bytes = 4u << 20) {
    StoreOptions o;
    o.tables.push_back({path_, "", 0});
    o.cache_bytes = cache_bytes;
    o.io_backend = backend;
    o.cache_policy = "default";
    return o;
  }

  // A store whose io_uring setup fails, as where rings are blocked.
  static Result<std::unique_ptr<Store>> OpenWithFailingRingSetup(const StoreOptions& o) {
    return OpenStoreWithEngineFactory(o, [](io::IoOptions io) {
      io.fail_ring_setup_for_testing = true;
      return io::CreateIoEngine(io);
    });
  }

  // A store whose engine is a real one (as `o` asks) inside a test's
  // Wrapper, made as Wrapper(real engine, args...); *wrapper points at it
  // (the store owns it).
  template <typename Wrapper, typename... Args>
  static Result<std::unique_ptr<Store>> OpenWithWrappedEngine(const StoreOptions& o, Wrapper** wrapper,
                                                              Args... args) {
    return OpenStoreWithEngineFactory(o, [=](const io::IoOptions& io) -> Result<std::unique_ptr<io::IoEngine>> {
      ENGRAM_ASSIGN_OR_RETURN(auto inner, io::CreateIoEngine(io));
      auto w = std::make_unique<Wrapper>(std::move(inner), args...);
      *wrapper = w.get();
      return std::unique_ptr<io::IoEngine>(std::move(w));
    });
  }

  // pread, io_uring (where the kernel lets a ring be set up) and mmap.
  static std::vector<std::string> AvailableBackends() {
    std::vector<std::string> b{"pread", "mmap"};
    if (io::testing::IoUringAvailable()) b.insert(b.begin() + 1, "io_uring");
    return b;
  }

  static std::vector<uint64_t> RandomRows(size_t n, uint64_t seed, uint64_t limit = kRows) {
    std::mt19937_64 rng(seed);
    std::vector<uint64_t> ids(n);
    for (auto& id : ids) id = rng() % limit;
    return ids;
  }

  // Every row of dst equals the generator's bytes.
  static void ExpectRowsExact(std::span<const uint64_t> ids, const std::vector<std::byte>& dst, size_t stride) {
    for (size_t i = 0; i < ids.size(); ++i) {
      auto want = testing::ExpectedRow(kSeed, ids[i], kRecord);
      ASSERT_EQ(std::memcmp(dst.data() + i * stride, want.data(), kRecord), 0) << "row " << ids[i] << " at " << i;
    }
  }

  // How many rows of dst differ from the generator's bytes: for gathering
  // threads, which count instead of stopping the test.
  static int WrongRows(std::span<const uint64_t> ids, const std::vector<std::byte>& dst) {
    int wrong = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      wrong += std::memcmp(dst.data() + i * kRecord, testing::ExpectedRow(kSeed, ids[i], kRecord).data(), kRecord) != 0;
    }
    return wrong;
  }

  // Gathers rows_for(t, round) on `threads` threads, `rounds` gathers each,
  // and returns how many rows came back wrong, plus one per failed gather.
  // With wait_on_other_thread each ticket is waited on by another thread.
  template <typename RowsFor>
  static int BadRowsFromThreads(Store& store, int threads, int rounds, RowsFor rows_for,
                                bool wait_on_other_thread = false) {
    std::atomic<int> bad{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        for (int round = 0; round < rounds; ++round) {
          const std::vector<uint64_t> ids = rows_for(t, round);
          std::vector<std::byte> dst(ids.size() * kRecord);
          GatherResult r;
          if (wait_on_other_thread) {
            GatherTicket ticket = store.StartGather(0, ids, dst.data(), kRecord);
            r = std::async(std::launch::async, [&] { return ticket.Wait(); }).get();
          } else {
            r = store.Gather(0, ids, dst.data(), kRecord);
          }
          if (!r.status.ok()) ++bad;
          bad += WrongRows(ids, dst);
        }
      });
    }
    for (auto& w : workers) w.join();
    return bad.load();
  }

  TempDir dir_;
  std::string path_;
};

TEST_F(StoreTest, EveryBackendServesByteExactRowsFromColdFile) {
  for (const std::string& backend : AvailableBackends()) {
    SCOPED_TRACE(backend);
    fileutil::DropFromPageCache(path_);
    auto store = Store::Open(Options(backend));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto ids = RandomRows(5000, 7);
    ids.push_back(ids[0]);  // duplicates are served too
    ids.push_back(kRows - 1);
    std::vector<std::byte> dst(ids.size() * kRecord);
    GatherResult r = (*store)->Gather(0, ids, dst.data(), kRecord);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    ExpectRowsExact(ids, dst, kRecord);
    EXPECT_EQ(r.hits + r.misses, r.distinct_rows);
    EXPECT_GT(r.misses, 0u);
    EXPECT_EQ(r.bytes_read, r.blocks_read * 4096);
    // Second time: served from the cache, still exact, with a wider stride.
    std::vector<std::byte> dst2(ids.size() * 300);
    GatherResult r2 = (*store)->Gather(0, ids, dst2.data(), 300);
    ASSERT_TRUE(r2.status.ok());
    EXPECT_GT(r2.hits, r.hits);
    ExpectRowsExact(ids, dst2, 300);
  }
}

TEST_F(StoreTest, MissedRowsOfOneBlockAreReadOnce) {
  auto store = Store::Open(Options("pread"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const uint64_t per_block = 4088 / kRecord;  // 15 rows per 4 KiB block
  std::vector<uint64_t> ids;
  for (uint64_t r = 0; r < per_block * 3; ++r) ids.push_back(r);
  std::vector<std::byte> dst(ids.size() * kRecord);
  GatherResult r = (*store)->Gather(0, ids, dst.data(), kRecord);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.misses, per_block * 3);
  EXPECT_EQ(r.blocks_read, 3u);
  ExpectRowsExact(ids, dst, kRecord);
}

TEST_F(StoreTest, FallsBackToPreadWhenRingSetupFailsWithIdenticalRows) {
  ENGRAM_SKIP_WITHOUT_IO_URING();
  auto fallback = OpenWithFailingRingSetup(Options("auto"));
  ASSERT_TRUE(fallback.ok()) << fallback.status().ToString();
  EXPECT_NE((*fallback)->io_description().find("pread"), std::string::npos) << (*fallback)->io_description();
  auto ring = Store::Open(Options("io_uring"));
  ASSERT_TRUE(ring.ok());
  auto ids = RandomRows(3000, 11);
  std::vector<std::byte> a(ids.size() * kRecord), b(ids.size() * kRecord);
  GatherResult ra = (*fallback)->Gather(0, ids, a.data(), kRecord);
  GatherResult rb = (*ring)->Gather(0, ids, b.data(), kRecord);
  ASSERT_TRUE(ra.status.ok());
  ASSERT_TRUE(rb.status.ok());
  EXPECT_EQ(a, b);
  EXPECT_EQ(ra.misses, rb.misses);
  EXPECT_EQ(ra.hits, rb.hits);
  // io_uring alone does not fall back: it fails with a clear error.
  EXPECT_FALSE(OpenWithFailingRingSetup(Options("io_uring")).ok());
}

TEST_F(StoreTest, ConcurrentGathersFromSeveralThreadsAreByteExact) {
  // A small cache so evictions and refusals happen all the time.
  auto store = Store::Open(Options("auto", 3u << 20));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(BadRowsFromThreads(**store, 4, 20, [](int t, int round) { return RandomRows(400, 1000 * t + round, 15000); }),
            0);
  TableStats s = (*store)->Stats(0);
  EXPECT_EQ(s.gathers, 80u);
  EXPECT_GT(s.cache.evictions + s.cache.total_refusals(), 0u);
  EXPECT_EQ(s.cache.misses, s.cache.inserts + s.cache.total_refusals());
}

TEST_F(StoreTest, SeveralIoUringRingsServeConcurrentGathersByteExact) {
  ENGRAM_SKIP_WITHOUT_IO_URING();
  StoreOptions o = Options("io_uring", 3u << 20);
  o.io_rings = 3;
  o.queue_depth = 16;
  // Read buffers for 512 blocks: the 2,000-row gathers stream through them,
  // so their chunks of 64 blocks land on every ring while others are read.
  o.read_buffer_bytes = 2u << 20;
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(BadRowsFromThreads(**store, 3, 8,
                               [](int t, int round) { return RandomRows(t == 0 ? 2000 : 300, 500 * t + round); }),
            0);
  TableStats s = (*store)->Stats(0);
  EXPECT_EQ(s.gathers, 24u);
  EXPECT_EQ(s.cache.misses, s.cache.inserts + s.cache.total_refusals());
}

TEST_F(StoreTest, IoRingsOutsideOneToQueueDepthAreRefusedAtOpen) {
  for (uint32_t rings : {0u, 129u}) {
    StoreOptions o = Options("io_uring");
    o.io_rings = rings;
    auto store = Store::Open(o);
    ASSERT_FALSE(store.ok()) << rings;
    EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(store.status().message().find("rings"), std::string::npos) << store.status().ToString();
  }
}

TEST_F(StoreTest, TicketsHeldAcrossLaterGathersOrWaitedOnAnotherThreadKeepTheirOwnRowsAndCounts) {
  // A thread reuses its last gather's state once nobody holds it. A ticket
  // still held -- waited after later gathers on its thread, or handed to
  // another thread -- must keep its own state: its rows, counts and reads.
  auto store = Store::Open(Options("auto", 8u << 20));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  for (int round = 0; round < 40; ++round) {
    auto held_ids = RandomRows(300, 3 * round, 15000);
    auto next_ids = RandomRows(24, 3 * round + 1, 15000);
    auto handed_ids = RandomRows(100, 3 * round + 2, 15000);
    std::vector<std::byte> held(held_ids.size() * kRecord), next(next_ids.size() * kRecord),
        handed(handed_ids.size() * kRecord);
    GatherTicket held_ticket = (*store)->StartGather(0, held_ids, held.data(), kRecord);
    const GatherResult next_result = (*store)->Gather(0, next_ids, next.data(), kRecord);
    GatherTicket handed_ticket = (*store)->StartGather(0, handed_ids, handed.data(), kRecord);
    GatherResult handed_result;
    std::thread other([&] { handed_result = handed_ticket.Wait(); });
    // This thread gathers again while the other thread waits.
    const GatherResult again = (*store)->Gather(0, next_ids, next.data(), kRecord);
    const GatherResult held_result = held_ticket.Wait();
    other.join();
    for (const GatherResult* r : std::initializer_list<const GatherResult*>{&held_result, &next_result, &handed_result, &again}) {
      ASSERT_TRUE(r->status.ok()) << r->status.ToString();
      EXPECT_EQ(r->hits + r->misses, r->distinct_rows);
    }
    EXPECT_EQ(held_result.rows, held_ids.size());
    EXPECT_EQ(next_result.rows, next_ids.size());
    EXPECT_EQ(handed_result.rows, handed_ids.size());
    EXPECT_EQ(again.rows, next_ids.size());
    ExpectRowsExact(held_ids, held, kRecord);
    ExpectRowsExact(next_ids, next, kRecord);
    ExpectRowsExact(handed_ids, handed, kRecord);
  }
  EXPECT_EQ((*store)->Stats(0).gathers, 160u);
}

TEST_F(StoreTest, AThreadsReusedStateReportsOnlyItsOwnGatherBetweenHitsAndMisses) {
  // One thread's gathers reuse one state: a hit-only gather finishes without
  // the hand-off's lock, and the next gather empties only what the last one
  // used. A gather after one with misses (or a refused one) must report no
  // reads, failures or disk time of that one, and the other way round.
  auto store = Store::Open(Options("auto", 8u << 20));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  uint64_t gathers = 0;
  for (int round = 0; round < 20; ++round) {
    auto cold = RandomRows(200, 100 + round, kRows);
    cold.push_back(cold[0]);  // a repeat: the plan chains it
    std::vector<std::byte> dst(cold.size() * kRecord);
    const GatherResult missed = (*store)->Gather(0, cold, dst.data(), kRecord);
    ASSERT_TRUE(missed.status.ok()) << missed.status.ToString();
    ExpectRowsExact(cold, dst, kRecord);
    const GatherResult hit = (*store)->Gather(0, cold, dst.data(), kRecord);
    ASSERT_TRUE(hit.status.ok()) << hit.status.ToString();
    ExpectRowsExact(cold, dst, kRecord);
    EXPECT_EQ(hit.misses, 0u) << "round " << round;
    EXPECT_EQ(hit.hits, hit.distinct_rows);
    EXPECT_EQ(hit.blocks_read, 0u);
    EXPECT_EQ(hit.bytes_read, 0u);
    EXPECT_EQ(hit.disk_nanoseconds, 0u);
    EXPECT_TRUE(hit.failed_positions.empty());
    const std::vector<uint64_t> past_end = {1, kRows};
    const GatherResult refused = (*store)->Gather(0, past_end, dst.data(), kRecord);
    EXPECT_EQ(refused.status.code(), StatusCode::kOutOfRange);
    const GatherResult hit_again = (*store)->Gather(0, cold, dst.data(), kRecord);
    ASSERT_TRUE(hit_again.status.ok()) << hit_again.status.ToString();
    EXPECT_EQ(hit_again.hits, hit.hits);
    EXPECT_EQ(hit_again.rows, cold.size());
    ExpectRowsExact(cold, dst, kRecord);
    gathers += 4;
  }
  const TableStats s = (*store)->Stats(0);
  EXPECT_EQ(s.gathers, gathers);
  EXPECT_EQ(s.failed_gathers, 20u);
}

TEST_F(StoreTest, ReadinessWaitSplitsIntoCacheAndDiskAndCountersAddUp) {
  auto store = Store::Open(Options("auto"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  uint64_t sum_wait = 0, sum_cache = 0, sum_disk = 0;
  for (int g = 0; g < 6; ++g) {
    auto ids = RandomRows(2000, g % 3);  // repeats: some gathers are mostly hits
    std::vector<std::byte> dst(ids.size() * kRecord);
    GatherResult r = (*store)->Gather(0, ids, dst.data(), kRecord);
    ASSERT_TRUE(r.status.ok());
    EXPECT_LE(r.cache_nanoseconds + r.disk_nanoseconds, r.wait_nanoseconds);
    EXPECT_GT(r.cache_nanoseconds, 0u);
    if (r.misses > 0) {
      EXPECT_GT(r.disk_nanoseconds, 0u);
    } else {
      EXPECT_EQ(r.disk_nanoseconds, 0u);
    }
    sum_wait += r.wait_nanoseconds;
    sum_cache += r.cache_nanoseconds;
    sum_disk += r.disk_nanoseconds;
  }
  TableStats s = (*store)->Stats(0);
  EXPECT_EQ(s.readiness_wait_nanoseconds, sum_wait);
  EXPECT_EQ(s.readiness_wait_cache_nanoseconds, sum_cache);
  EXPECT_EQ(s.readiness_wait_disk_nanoseconds, sum_disk);
}

TEST_F(StoreTest, RowPastTheEndFailsTheGatherWithOutOfRange) {
  auto store = Store::Open(Options());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::vector<uint64_t> ids{1, 2, kRows};
  std::vector<std::byte> dst(ids.size() * kRecord);
  GatherResult r = (*store)->Gather(0, ids, dst.data(), kRecord);
  EXPECT_EQ(r.status.code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.status.message().find(std::to_string(kRows)), std::string::npos) << r.status.message();
  EXPECT_EQ((*store)->Stats(0).cache.lookups, 0u);  // rejected before touching the cache
  EXPECT_EQ((*store)->Gather(0, ids, dst.data(), kRecord - 1).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Gather(5, ids, dst.data(), kRecord).status.code(), StatusCode::kInvalidArgument);
}

// Flips one byte of the record of row 3 of block `block` on disk; returns that row.
uint64_t CorruptRowOfBlock(const std::string& path, uint64_t block) {
  auto table = TableFile::Open(path);
  EXPECT_TRUE(table.ok());
  if (!table.ok()) return 0;
  const uint64_t bad_row = (*table)->rows_per_block() * block + 3;
  const uint64_t off = (*table)->geometry().RowFileOffset(bad_row) + 5;
  table->reset();
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(off);
    char c;
    f.read(&c, 1);
    c ^= 0x40;
    f.seekp(off);
    f.write(&c, 1);
  }
  fileutil::DropFromPageCache(path);
  return bad_row;
}

TEST_F(StoreTest, CorruptBlockFailsOnlyItsRowsAndTellsWhichPositions) {
  const uint64_t bad_row = CorruptRowOfBlock(path_, 10);
  for (const std::string& backend : AvailableBackends()) {
    SCOPED_TRACE(backend);
    auto store = Store::Open(Options(backend));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    (*store)->Gather(0, std::vector<uint64_t>{5}, std::vector<std::byte>(kRecord).data(), kRecord);  // 5 is a hit
    // bad_row - 1 shares the corrupt block; bad_row is asked for twice.
    std::vector<uint64_t> ids{5, bad_row, 700, bad_row - 1, 12000, bad_row};
    std::vector<std::byte> dst(ids.size() * kRecord);
    GatherResult r = (*store)->Gather(0, ids, dst.data(), kRecord);
    EXPECT_EQ(r.status.code(), StatusCode::kCorruption) << r.status.ToString();
    EXPECT_EQ(r.failed_positions, (std::vector<size_t>{1, 3, 5}));
    for (size_t i = 0; i < ids.size(); ++i) {
      const bool bad = ids[i] == bad_row || ids[i] == bad_row - 1;
      EXPECT_EQ(r.RowWritten(i), !bad) << "position " << i;
      if (bad) continue;
      auto want = testing::ExpectedRow(kSeed, ids[i], kRecord);
      EXPECT_EQ(std::memcmp(dst.data() + i * kRecord, want.data(), kRecord), 0) << "position " << i;
    }
    // A bad argument writes nothing: no position is valid.
    GatherResult bad_arg = (*store)->Gather(0, ids, dst.data(), kRecord - 1);
    EXPECT_FALSE(bad_arg.RowWritten(0));
    EXPECT_TRUE(bad_arg.failed_positions.empty());
  }
}

TEST_F(StoreTest, RepeatedBlockFailuresAreCountedEveryTimeButLoggedWithARateLimit) {
  const uint64_t bad_row = CorruptRowOfBlock(path_, 10);
  auto store = Store::Open(Options("pread"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  std::vector<uint64_t> ids{bad_row};
  std::vector<std::byte> dst(kRecord);
  for (int i = 0; i < 2000; ++i) {
    EXPECT_EQ((*store)->Gather(0, ids, dst.data(), kRecord).status.code(), StatusCode::kCorruption);
  }
  spdlog::set_default_logger(previous);
  const std::string text = log.str();
  EXPECT_EQ((*store)->Stats(0).checksum_failures, 2000u);
  const size_t lines = std::count(text.begin(), text.end(), '\n');
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 6u) << text.substr(0, 2000);
  EXPECT_NE(text.find("block 10"), std::string::npos) << text.substr(0, 2000);
}

TEST_F(StoreTest, CorruptBlockFailsGatherCachesNothingFromItAndOthersStillWork) {
  const uint64_t bad_row = CorruptRowOfBlock(path_, 10);
  for (const std::string& backend : AvailableBackends()) {
    SCOPED_TRACE(backend);
    auto store = Store::Open(Options(backend));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    const uint64_t same_block_row = bad_row - 1;
    std::vector<uint64_t> ids{5, bad_row, 700};
    std::vector<std::byte> dst(ids.size() * kRecord);
    GatherResult r = (*store)->Gather(0, ids, dst.data(), kRecord);
    EXPECT_EQ(r.status.code(), StatusCode::kCorruption) << r.status.ToString();
    EXPECT_NE(r.status.message().find("block 10"), std::string::npos) << r.status.message();
    TableStats s = (*store)->Stats(0);
    EXPECT_EQ(s.checksum_failures, 1u);
    EXPECT_EQ(s.failed_gathers, 1u);
    EXPECT_EQ(s.failed_rows, 1u);
    // Nothing of block 10 is cached: asking again reads (and fails) again.
    std::vector<uint64_t> again{same_block_row};
    GatherResult r2 = (*store)->Gather(0, again, dst.data(), kRecord);
    EXPECT_EQ(r2.status.code(), StatusCode::kCorruption);
    EXPECT_EQ(r2.hits, 0u);
    // Rows of other blocks are served, exact (5 and 700 were cached by the first gather).
    std::vector<uint64_t> good{5, 700, 9000};
    GatherResult r3 = (*store)->Gather(0, good, dst.data(), kRecord);
    ASSERT_TRUE(r3.status.ok()) << r3.status.ToString();
    EXPECT_EQ(r3.hits, 2u);
    ExpectRowsExact(good, dst, kRecord);
  }
}

// One row of each of the table's first `blocks` blocks, a different row in
// each, plus a second row of block 0 and a repeat of the first.
std::vector<uint64_t> OneRowPerBlock(uint64_t blocks) {
  const uint64_t per_block = 4088 / kRecord;
  std::vector<uint64_t> ids;
  for (uint64_t b = 0; b < blocks; ++b) ids.push_back(b * per_block + b % per_block);
  ids.push_back(1);
  ids.push_back(ids[0]);
  return ids;
}

// One slab of read buffers: a gather that misses more than 256 blocks streams
// its reads through 4 chunks (twice the chunks of the 128 reads in flight).
constexpr size_t kSmallReadBuffers = ReadBufferPool::kSlabBytes;

size_t HeapChunksLeased(Store& store) { return static_cast<StoreImpl&>(store).read_buffers().heap_chunks_leased(); }
constexpr uint64_t kStreamedBlocks = 1900;  // 30 chunks

TEST_F(StoreTest, GatherMissingMoreBlocksThanTheReadBuffersHoldIsByteExactInEveryForm) {
  const auto ids = OneRowPerBlock(kStreamedBlocks);
  for (const std::string& backend : AvailableBackends()) {
    SCOPED_TRACE(backend);
    for (bool callback : {false, true}) {
      SCOPED_TRACE(callback ? "callback" : "wait");
      fileutil::DropFromPageCache(path_);
      StoreOptions o = Options(backend);
      o.read_buffer_bytes = kSmallReadBuffers;
      auto store = Store::Open(o);
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      std::vector<std::byte> dst(ids.size() * kRecord);
      GatherResult r;
      if (callback) {
        std::promise<GatherResult> done;
        (*store)->StartGather(0, ids, dst.data(), kRecord, [&done](GatherResult g) { done.set_value(std::move(g)); });
        r = done.get_future().get();
      } else {
        r = (*store)->Gather(0, ids, dst.data(), kRecord);
      }
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      EXPECT_EQ(r.misses, kStreamedBlocks + 1);
      EXPECT_EQ(r.blocks_read, kStreamedBlocks);
      EXPECT_EQ(r.inserts + r.refusals, r.misses);
      ExpectRowsExact(ids, dst, kRecord);
      EXPECT_EQ(HeapChunksLeased(**store), 0u);  // read through the pool's chunks, nothing from the heap
      // What was cached is the rows themselves, not what a reused buffer held later.
      std::vector<std::byte> again(ids.size() * kRecord);
      GatherResult r2 = (*store)->Gather(0, ids, again.data(), kRecord);
      ASSERT_TRUE(r2.status.ok()) << r2.status.ToString();
      EXPECT_EQ(r2.hits, r.inserts);
      ExpectRowsExact(ids, again, kRecord);
    }
  }
}

TEST_F(StoreTest, StreamedGathersMakeTheCachesDecisionsOfGathersWithRoomForEveryBlock) {
  // A cache of ~1,000 rows against gathers of 1,900: admission and eviction
  // decide, and they depend on the order rows are offered in.
  std::vector<std::vector<GatherResult>> results(2);
  std::vector<TableStats> stats;
  for (size_t bytes : {kSmallReadBuffers, size_t{64} << 20}) {
    StoreOptions o = Options("io_uring", 512u << 10);
    if (!io::testing::IoUringAvailable()) o.io_backend = "pread";
    o.read_buffer_bytes = bytes;
    auto store = Store::Open(o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto& out = results[bytes == kSmallReadBuffers ? 0 : 1];
    for (uint64_t seed : {1, 2, 1, 3}) {
      auto ids = OneRowPerBlock(kStreamedBlocks);
      std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed));
      std::vector<std::byte> dst(ids.size() * kRecord);
      out.push_back((*store)->Gather(0, ids, dst.data(), kRecord));
      ASSERT_TRUE(out.back().status.ok()) << out.back().status.ToString();
      ExpectRowsExact(ids, dst, kRecord);
    }
    stats.push_back((*store)->Stats(0));
  }
  for (size_t g = 0; g < results[0].size(); ++g) {
    SCOPED_TRACE("gather " + std::to_string(g));
    EXPECT_EQ(results[0][g].hits, results[1][g].hits);
    EXPECT_EQ(results[0][g].inserts, results[1][g].inserts);
    EXPECT_EQ(results[0][g].refusals, results[1][g].refusals);
  }
  EXPECT_GT(results[0][2].hits, 0u);
  EXPECT_GT(results[0][2].refusals + stats[0].cache.evictions, 0u);  // the cache did have to decide
  EXPECT_EQ(stats[0].cache.evictions, stats[1].cache.evictions);
  EXPECT_EQ(stats[0].cache.resident_rows, stats[1].cache.resident_rows);
}

// Thread t's gather in round `round`: one row of each of kStreamedBlocks
// blocks, in an order of its own.
std::vector<uint64_t> ShuffledStreamedBlocks(int t, int round) {
  auto ids = OneRowPerBlock(kStreamedBlocks);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(10 * t + round));
  return ids;
}

TEST_F(StoreTest, ConcurrentStreamedGathersWaitedOnOtherThreadsAreByteExact) {
  // Four threads stream at once through one slab (two of them through the
  // heap, the arena being taken), each waiting on a ticket another thread
  // started, beside a small cache that evicts and refuses all the time.
  StoreOptions o = Options("auto", 1u << 20);
  o.read_buffer_bytes = kSmallReadBuffers;
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(BadRowsFromThreads(**store, 4, 3, ShuffledStreamedBlocks, /*wait_on_other_thread=*/true), 0);
  TableStats s = (*store)->Stats(0);
  EXPECT_EQ(s.gathers, 12u);
  EXPECT_EQ(s.cache.misses, s.cache.inserts + s.cache.total_refusals());
}

TEST_F(StoreTest, LargeGathersAtOnceStreamThroughTheArenaAndTakeNothingFromTheHeap) {
  // Four slabs (32 chunks): each gather of 1,900 blocks streams through a
  // ring of 4 chunks (twice the 128 reads in flight), so four at once need 16
  // chunks of the arena. A ring of half the arena each would send the gathers
  // beyond the second to the heap.
  StoreOptions o = Options("auto", 1u << 20);
  o.read_buffer_bytes = 4 * kSmallReadBuffers;
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(BadRowsFromThreads(**store, 4, 3, ShuffledStreamedBlocks), 0);
  EXPECT_EQ(HeapChunksLeased(**store), 0u);
  EXPECT_EQ((*store)->Stats(0).gathers, 12u);
}

TEST_F(StoreTest, StreamedGatherWithCorruptBlocksFailsOnlyTheirRowsAndCachesNothingOfThem) {
  // Block 10 is read into the first chunk's buffer; block 1500 into a buffer
  // that earlier chunks used.
  const uint64_t bad_early = CorruptRowOfBlock(path_, 10);
  const uint64_t bad_late = CorruptRowOfBlock(path_, 1500);
  for (const std::string& backend : AvailableBackends()) {
    SCOPED_TRACE(backend);
    StoreOptions o = Options(backend);
    o.read_buffer_bytes = kSmallReadBuffers;
    auto store = Store::Open(o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto ids = OneRowPerBlock(kStreamedBlocks);
    ids[10] = bad_early;
    ids[1500] = bad_late;
    std::vector<std::byte> dst(ids.size() * kRecord);
    GatherResult r = (*store)->Gather(0, ids, dst.data(), kRecord);
    EXPECT_EQ(r.status.code(), StatusCode::kCorruption) << r.status.ToString();
    EXPECT_EQ(r.failed_positions, (std::vector<size_t>{10, 1500}));
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i == 10 || i == 1500) continue;
      auto want = testing::ExpectedRow(kSeed, ids[i], kRecord);
      ASSERT_EQ(std::memcmp(dst.data() + i * kRecord, want.data(), kRecord), 0) << "position " << i;
    }
    EXPECT_EQ((*store)->Stats(0).checksum_failures, 2u);
    std::vector<uint64_t> bad{bad_early, bad_late};
    GatherResult r2 = (*store)->Gather(0, bad, dst.data(), kRecord);
    EXPECT_EQ(r2.status.code(), StatusCode::kCorruption);
    EXPECT_EQ(r2.hits, 0u);
  }
}

TEST_F(StoreTest, OpenRejectsTruncatedAndMissingTablesWithClearErrors) {
  EXPECT_EQ(Store::Open(StoreOptions{}).status().code(), StatusCode::kInvalidArgument);
  StoreOptions missing = Options();
  missing.tables[0].path = dir_.File("nope.engram");
  EXPECT_EQ(Store::Open(missing).status().code(), StatusCode::kNotFound);
  std::filesystem::resize_file(path_, std::filesystem::file_size(path_) - 100);
  auto truncated = Store::Open(Options());
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), StatusCode::kCorruption) << truncated.status().ToString();
  StoreOptions bad_policy = Options();
  bad_policy.cache_policy = "ways=0";
  EXPECT_FALSE(Store::Open(bad_policy).ok());
  StoreOptions bad_backend = Options();
  bad_backend.io_backend = "floppy";
  EXPECT_FALSE(Store::Open(bad_backend).ok());
  StoreOptions no_completion_threads = Options();
  no_completion_threads.completion_threads = 0;
  auto none = Store::Open(no_completion_threads);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("completion_threads"), std::string::npos) << none.status().ToString();
}

TEST_F(StoreTest, ReadAheadRowsAreHitsAndCountedUsedOrWasted) {
  auto store = Store::Open(Options("auto"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::vector<uint64_t> ahead{100, 200, 300, 400};
  ASSERT_TRUE((*store)->ReadAhead(0, ahead).ok());
  (*store)->WaitForReadAheads();
  TableStats s = (*store)->Stats(0);
  EXPECT_EQ(s.read_ahead_rows, 4u);
  EXPECT_EQ(s.cache.pinned_rows, 4u);
  std::vector<uint64_t> ids{100, 200, 5};
  std::vector<std::byte> dst(ids.size() * kRecord);
  GatherResult r = (*store)->Gather(0, ids, dst.data(), kRecord);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.hits, 2u);
  EXPECT_EQ(r.read_ahead_used, 2u);
  ExpectRowsExact(ids, dst, kRecord);
  (*store)->ReleaseReadAhead(0, ahead);
  s = (*store)->Stats(0);
  EXPECT_EQ(s.read_ahead_used_rows, 2u);
  EXPECT_EQ(s.read_ahead_wasted_rows, 2u);
  EXPECT_EQ(s.cache.pinned_rows, 0u);
  EXPECT_FALSE((*store)->ReadAhead(0, std::vector<uint64_t>{kRows + 1}).ok());
}

TEST_F(StoreTest, ReleaseRightAfterReadAheadLeavesNoPinBehind) {
  auto store = Store::Open(Options("auto"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  for (int round = 0; round < 20; ++round) {
    // Released before the reads can have landed (page cache dropped): the
    // release must not miss the pins that land afterwards.
    auto ahead = RandomRows(64, 100 + round);
    ASSERT_TRUE((*store)->ReadAhead(0, ahead).ok());
    (*store)->ReleaseReadAhead(0, ahead);
    ASSERT_EQ((*store)->Stats(0).cache.pinned_rows, 0u) << "round " << round;
  }
  TableStats s = (*store)->Stats(0);
  EXPECT_EQ(s.read_ahead_wasted_rows, s.read_ahead_rows);
}

TEST_F(StoreTest, PinsAndTheReadAheadSetAgreeUnderConcurrentReadAheadGatherAndRelease) {
  // ReadAheads, gathers and releases of the same rows race. However they
  // interleave, a row is pinned exactly while the store lists it as read
  // ahead: after the last read-ahead lands and everything is released, no
  // pin may remain (a pin the store forgot would hold its slot for good).
  auto store = Store::Open(Options("auto"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const auto rows = RandomRows(48, 5);
  std::atomic<bool> stop{false};
  std::thread read_aheader([&] {
    for (int i = 0; i < 400; ++i) ASSERT_TRUE((*store)->ReadAhead(0, rows).ok());
    stop = true;
  });
  std::thread releaser([&] {
    while (!stop) {
      (*store)->ReleaseReadAhead(0, std::span<const uint64_t>(rows).first(8));
      std::this_thread::yield();
    }
  });
  std::vector<std::byte> dst(rows.size() * kRecord);
  while (!stop) {
    GatherResult r = (*store)->Gather(0, rows, dst.data(), kRecord);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  }
  read_aheader.join();
  releaser.join();
  ExpectRowsExact(rows, dst, kRecord);
  (*store)->WaitForReadAheads();
  (*store)->ReleaseReadAhead(0, rows);
  TableStats s = (*store)->Stats(0);
  EXPECT_EQ(s.cache.pinned_rows, 0u);
  EXPECT_EQ(s.read_ahead_rows, s.read_ahead_used_rows + s.read_ahead_wasted_rows);
}

// A gather into groups (one layer of a step's [tokens][layers][slots][record]
// buffer) writes each row where a flat gather placed by hand would, and
// nothing between the groups: misses and hits, repeats within the gather,
// in every form of the gather and on every backend.
TEST_F(StoreTest, AGatherIntoGroupsPutsEachRowAtItsGroupAndSlot) {
  constexpr size_t kSlots = 24, kLayers = 3, kTokens = 9;
  for (const std::string backend : {"pread", "io_uring"}) {
    if (backend == "io_uring" && !io::testing::IoUringAvailable()) continue;
    SCOPED_TRACE(backend);
    auto store = Store::Open(Options(backend));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    std::vector<uint64_t> ids = RandomRows(kTokens * kSlots, 77);
    ids[30] = ids[5];  // a repeat, in another group
    const size_t group_stride = kLayers * kSlots * kRecord;
    for (int form = 0; form < 3; ++form) {
      for (size_t layer = 0; layer < kLayers; ++layer) {
        SCOPED_TRACE(::testing::Message() << "form " << form << " layer " << layer);
        std::vector<std::byte> out(kTokens * group_stride, std::byte{0x5a});
        const RowDestination d{out.data() + layer * kSlots * kRecord, kRecord, kSlots, group_stride};
        GatherResult r;
        if (form == 0) {
          r = (*store)->Gather(0, ids, d);
        } else if (form == 1) {
          r = (*store)->StartGather(0, ids, d).Wait();
        } else {
          std::promise<GatherResult> done;
          (*store)->StartGather(0, ids, d, [&](GatherResult g) { done.set_value(std::move(g)); });
          r = done.get_future().get();
        }
        ASSERT_TRUE(r.status.ok()) << r.status.ToString();
        for (size_t t = 0; t < kTokens; ++t) {
          for (size_t l = 0; l < kLayers; ++l) {
            for (size_t s = 0; s < kSlots; ++s) {
              const std::byte* row = out.data() + t * group_stride + (l * kSlots + s) * kRecord;
              if (l != layer) {
                ASSERT_EQ(std::count(row, row + kRecord, std::byte{0x5a}), kRecord) << "written outside the layer";
                continue;
              }
              const auto want = testing::ExpectedRow(kSeed, ids[t * kSlots + s], kRecord);
              ASSERT_EQ(std::memcmp(row, want.data(), kRecord), 0) << "token " << t << " slot " << s;
            }
          }
        }
      }
    }
  }
}

using testing::GatedEngine;

// Holds every batch back from the real engine it wraps until Shutdown, which
// shuts that engine down first and then hands it the held batches: the real
// engine ends their reads with its own shutdown status, as it does for reads
// still queued when a store closes in the middle of gathers.
class ReadsHeldUntilShutdownEngine final : public io::IoEngine {
 public:
  explicit ReadsHeldUntilShutdownEngine(std::unique_ptr<io::IoEngine> inner) : inner_(std::move(inner)) {}
  ~ReadsHeldUntilShutdownEngine() override { Shutdown(); }

  io::IoBackend backend() const override { return inner_->backend(); }
  std::string Describe() const override { return "held(" + inner_->Describe() + ")"; }
  Result<io::FileId> OpenFile(const std::string& path) override { return inner_->OpenFile(path); }
  Status CloseFile(io::FileId file) override { return inner_->CloseFile(file); }
  Result<uint64_t> FileSize(io::FileId file) const override { return inner_->FileSize(file); }
  io::IoStatsSnapshot Stats() const override { return inner_->Stats(); }
  void SubmitBatch(std::span<io::BlockRead> reads, io::IoCallback done) override {
    std::lock_guard lock(mu_);
    held_.emplace_back(reads, std::move(done));
  }
  void Shutdown() override {
    inner_->Shutdown();
    std::vector<std::pair<std::span<io::BlockRead>, io::IoCallback>> held;
    {
      std::lock_guard lock(mu_);
      held.swap(held_);
    }
    for (auto& [reads, done] : held) inner_->SubmitBatch(reads, std::move(done));
  }
  size_t held_batches() {
    std::lock_guard lock(mu_);
    return held_.size();
  }

 private:
  std::unique_ptr<io::IoEngine> inner_;
  std::mutex mu_;
  std::vector<std::pair<std::span<io::BlockRead>, io::IoCallback>> held_;
};

TEST_F(StoreTest, ClosingWithReadsInFlightEndsTheirGathersCancelledAndLogsOneLineNotAnErrorPerBlock) {
  for (const std::string backend : {"pread", "io_uring"}) {
    if (backend == "io_uring" && !io::testing::IoUringAvailable()) continue;
    SCOPED_TRACE(backend);
    ReadsHeldUntilShutdownEngine* engine = nullptr;
    auto store = OpenWithWrappedEngine(Options(backend), &engine);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_EQ((*store)->io_description().find("held(" + backend), 0u) << (*store)->io_description();
    // 40 rows of 40 distinct blocks: 40 block reads, none of which will run.
    auto table = TableFile::Open(path_);
    ASSERT_TRUE(table.ok());
    std::vector<uint64_t> rows;
    for (uint64_t b = 0; b < 40; ++b) rows.push_back(b * 3 * (*table)->rows_per_block() + 1);
    std::vector<std::byte> dst(rows.size() * kRecord);
    GatherTicket ticket = (*store)->StartGather(0, rows, dst.data(), kRecord);
    ASSERT_GE(engine->held_batches(), 1u);

    testing::CapturedLog log;
    store->reset();  // the engine cancels the 40 reads; the gather ends
    GatherResult r = ticket.Wait();
    const std::string text = log.text();

    EXPECT_EQ(r.status.code(), StatusCode::kCancelled) << r.status.ToString();
    EXPECT_EQ(r.failed_positions.size(), rows.size());
    EXPECT_EQ(r.inserts, 0u);
    EXPECT_EQ(text.find("[error]"), std::string::npos) << text;
    EXPECT_NE(text.find("[info] store: closing cancelled 40 block reads in flight"), std::string::npos) << text;
  }
}

// A store over the fixture's table (0) and a second generated table (1)
// whose read completions gate_ holds until gate_->Open().
class GatedStoreTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    const std::string other = dir_.File("other.engram");
    ASSERT_TRUE(testing::WriteGeneratedTable(other, kRows, kRecord, 7).ok());
    StoreOptions o = Options("pread", 16u << 20);
    o.tables.push_back({other, "", 0});
    // Every gather here reads while it looks up: up to 2,048 blocks (an
    // eighth of the buffers), over the 1,100 missed rows of the largest.
    o.read_buffer_bytes = 64u << 20;
    auto store = OpenWithWrappedEngine(o, &gate_, other);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_NE(gate_, nullptr);
    store_ = std::move(*store);
  }

  // The rows of table 1 (generated with seed 7), packed in dst.
  static void ExpectOtherTableRows(std::span<const uint64_t> ids, const std::vector<std::byte>& dst) {
    for (size_t i = 0; i < ids.size(); ++i) {
      auto want = testing::ExpectedRow(7, ids[i], kRecord);
      ASSERT_EQ(std::memcmp(dst.data() + i * kRecord, want.data(), kRecord), 0) << "row " << ids[i] << " at " << i;
    }
  }

  // Starts a gather of table 1's `rows`, opens the gate, waits, and checks
  // that it succeeded with every row's bytes.
  GatherResult GatherOtherTableThroughTheGate(std::span<const uint64_t> rows) {
    std::vector<std::byte> dst(rows.size() * kRecord);
    GatherTicket ticket = store_->StartGather(1, rows, dst.data(), kRecord);
    gate_->Open();
    GatherResult r = ticket.Wait();
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    ExpectOtherTableRows(rows, dst);
    return r;
  }

  // Polls until at least n completions are held (or ~10 s); returns how many.
  size_t WaitUntilHeld(size_t n) {
    for (int i = 0; i < 2000 && gate_->held() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return gate_->held();
  }

  std::unique_ptr<Store> store_;
  GatedEngine* gate_ = nullptr;  // owned by store_
};

// Rows offered to table t's cache so far: kept or refused.
uint64_t RowsOffered(Store& store, size_t t) {
  const RowCacheStats c = store.Stats(t).cache;
  return c.inserts + c.total_refusals();
}

TEST_F(GatedStoreTest, AGatherFillsTheCacheWithItsFirstBlocksRowsWhileLaterBlocksAreStillBeingRead) {
  // 100 rows from 100 distinct blocks: more than one engine batch of reads.
  std::vector<uint64_t> rows;
  for (uint64_t i = 0; i < 100; ++i) rows.push_back(i * 15);
  std::vector<std::byte> dst(rows.size() * kRecord);
  auto gather = std::async(std::launch::async, [&] { return store_->Gather(1, rows, dst.data(), kRecord); });
  ASSERT_GE(WaitUntilHeld(2), 2u);
  gate_->RunOldestHeld();  // the batch holding the gather's first rows
  uint64_t offered = 0;
  for (int i = 0; i < 2000 && (offered = RowsOffered(*store_, 1)) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(offered, 0u) << "the first batch's rows waited for the last batch";
  EXPECT_LT(offered, rows.size());
  EXPECT_EQ(gather.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  gate_->Open();
  GatherResult r = gather.get();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.misses, rows.size());
  EXPECT_EQ(r.inserts + r.refusals, rows.size());
  EXPECT_EQ(RowsOffered(*store_, 1), rows.size());
}

TEST_F(GatedStoreTest, AGatherSubmitsItsFirstReadsBeforeItLooksUpItsLastRows) {
  // 1,000 rows from 1,000 distinct blocks, every one a miss. The engine sees
  // how many of them the cache had looked up when each batch was submitted.
  std::vector<uint64_t> rows;
  for (uint64_t i = 0; i < 1000; ++i) rows.push_back(i * 15 + i % 15);
  std::vector<uint64_t> looked_up_at_submit;
  std::vector<size_t> batch_reads;
  gate_->on_submit = [&](size_t reads) {
    looked_up_at_submit.push_back(store_->Stats(1).cache.lookups);
    batch_reads.push_back(reads);
  };
  GatherResult r = GatherOtherTableThroughTheGate(rows);
  EXPECT_EQ(r.misses, rows.size());
  EXPECT_EQ(r.blocks_read, rows.size());
  ASSERT_FALSE(looked_up_at_submit.empty());
  EXPECT_LT(looked_up_at_submit.front(), rows.size() / 4) << "the first read waited for most of the lookups";
  EXPECT_TRUE(std::is_sorted(looked_up_at_submit.begin(), looked_up_at_submit.end()));
  // Every block is read exactly once, in chunks of the read buffers' size.
  EXPECT_EQ(std::accumulate(batch_reads.begin(), batch_reads.end(), size_t{0}), rows.size());
  for (size_t i = 0; i + 1 < batch_reads.size(); ++i) EXPECT_EQ(batch_reads[i], 64u) << "batch " << i;
  EXPECT_EQ(RowsOffered(*store_, 1), rows.size());
}

TEST_F(GatedStoreTest, RowsOfABlockWhoseReadWasSubmittedJoinThatRead) {
  // Rows 0..799 of 800 blocks, then one more row of each of the first 100
  // blocks at the end of the gather: by then those blocks' reads are out, so
  // the late rows must come from the same reads, not from reads of their own.
  std::vector<uint64_t> rows;
  for (uint64_t i = 0; i < 800; ++i) rows.push_back(i * 15);
  for (uint64_t i = 0; i < 100; ++i) rows.push_back(i * 15 + 7);
  size_t submitted_before_the_late_rows = 0;
  gate_->on_submit = [&](size_t) { submitted_before_the_late_rows += store_->Stats(1).cache.lookups < 800; };
  GatherResult r = GatherOtherTableThroughTheGate(rows);
  // The first 100 blocks' reads (two batches) went out before the late rows
  // were looked up.
  EXPECT_GE(submitted_before_the_late_rows, 2u);
  EXPECT_EQ(r.misses, rows.size());
  EXPECT_EQ(r.blocks_read, 800u);
  EXPECT_EQ(r.bytes_read, 800u * 4096);
  EXPECT_EQ(RowsOffered(*store_, 1), rows.size());
}

TEST_F(GatedStoreTest, NoReadBufferPartWayFailsOnlyTheRowsOfBlocksNotReadAndCachesTheRest) {
  // 1,000 blocks, and late rows: 50 more rows of blocks read early, 50 of
  // blocks never read, and every tenth row asked for twice.
  std::vector<uint64_t> rows;
  for (uint64_t i = 0; i < 1000; ++i) rows.push_back(i * 15);
  for (uint64_t i = 0; i < 50; ++i) rows.push_back(i * 15 + 3);
  for (uint64_t i = 900; i < 950; ++i) rows.push_back(i * 15 + 3);
  for (uint64_t i = 0; i < 1000; i += 10) rows.push_back(i * 15);
  // Two chunks (128 blocks) get buffers; the third Extend fails.
  static_cast<StoreImpl&>(*store_).read_buffers().FailGrowthAfterForTesting(2);
  gate_->Open();
  std::vector<std::byte> dst(rows.size() * kRecord);
  // A ticket's gather submits chunks while it still looks rows up.
  GatherResult r = store_->StartGather(1, rows, dst.data(), kRecord).Wait();
  static_cast<StoreImpl&>(*store_).read_buffers().FailGrowthAfterForTesting(-1);
  EXPECT_EQ(r.status.code(), StatusCode::kResourceExhausted) << r.status.ToString();
  EXPECT_EQ(r.blocks_read, 128u);
  EXPECT_EQ(r.misses, 1100u);
  std::vector<size_t> want_failed;
  std::set<uint64_t> read_rows;
  for (size_t p = 0; p < rows.size(); ++p) {
    if (rows[p] / 15 < 128) {
      read_rows.insert(rows[p]);
      auto want = testing::ExpectedRow(7, rows[p], kRecord);
      EXPECT_EQ(std::memcmp(dst.data() + p * kRecord, want.data(), kRecord), 0) << "row " << rows[p];
    } else {
      want_failed.push_back(p);
    }
  }
  EXPECT_EQ(r.failed_positions, want_failed);
  EXPECT_EQ(store_->Stats(1).failed_rows, 1100u - read_rows.size());
  EXPECT_EQ(store_->Stats(1).failed_gathers, 1u);
  EXPECT_EQ(RowsOffered(*store_, 1), read_rows.size());  // nothing from a block not read
  // The read rows were cached; the others were not.
  GatherResult again = store_->Gather(1, rows, dst.data(), kRecord);
  ASSERT_TRUE(again.status.ok()) << again.status.ToString();
  EXPECT_EQ(again.hits, read_rows.size());
  ExpectOtherTableRows(rows, dst);
}

TEST_F(GatedStoreTest, ReadsLandingWhileTheGatherIsStillLookingUpAreFinishedExactlyOnceInEveryForm) {
  // Every batch lands on the submitting thread right after it is submitted,
  // while Start is still looking rows up; Start then hands the disk phase on.
  gate_->after_submit = [&] {
    ASSERT_GE(WaitUntilHeld(1), 1u);
    gate_->RunOldestHeld();
  };
  auto rows_from = [](uint64_t first_block) {
    std::vector<uint64_t> rows;
    for (uint64_t i = 0; i < 500; ++i) rows.push_back((first_block + i) * 15 + i % 15);
    return rows;
  };
  // Wait form.
  const std::vector<uint64_t> waited = rows_from(0);
  std::vector<std::byte> dst(waited.size() * kRecord);
  GatherResult r = store_->StartGather(1, waited, dst.data(), kRecord).Wait();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.misses, waited.size());
  ExpectOtherTableRows(waited, dst);
  // Callback form: called exactly once.
  const std::vector<uint64_t> called = rows_from(500);
  std::atomic<int> calls{0};
  std::promise<GatherResult> result;
  store_->StartGather(1, called, dst.data(), kRecord, [&](GatherResult g) {
    if (calls.fetch_add(1) == 0) result.set_value(std::move(g));
  });
  std::future<GatherResult> future = result.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "the callback never ran";
  GatherResult c = future.get();
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  ExpectOtherTableRows(called, dst);
  // A ticket dropped unwaited: the pool finishes it, and the state is reused.
  const std::vector<uint64_t> dropped = rows_from(1000);
  { GatherTicket ticket = store_->StartGather(1, dropped, dst.data(), kRecord); }
  // The pool offers the dropped gather's rows, then counts the gather: wait
  // for both, as nothing else tells when a dropped ticket is finished.
  const uint64_t offered = waited.size() + called.size() + dropped.size();
  const uint64_t started = 3;  // waited, called, dropped
  for (int i = 0; i < 2000 && (RowsOffered(*store_, 1) < offered || store_->Stats(1).gathers < started); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(RowsOffered(*store_, 1), offered);
  GatherResult again = store_->Gather(1, dropped, dst.data(), kRecord);
  ASSERT_TRUE(again.status.ok()) << again.status.ToString();
  ExpectOtherTableRows(dropped, dst);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(store_->Stats(1).gathers, 4u);
}

TEST_F(GatedStoreTest, ReleasingOneTablesReadAheadDoesNotWaitForAnotherTables) {
  // Table 1's read-ahead is held in flight; table 0's lands.
  std::vector<uint64_t> held_rows{10, 20, 30}, ahead{100, 200, 300, 400};
  ASSERT_TRUE(store_->ReadAhead(1, held_rows).ok());
  ASSERT_TRUE(store_->ReadAhead(0, ahead).ok());
  ASSERT_EQ(WaitUntilHeld(1), 1u);

  // Releasing table 0's rows returns although table 1's read is still held
  // (it used to wait for every table's read-ahead: here, forever).
  auto release = std::async(std::launch::async, [&] { store_->ReleaseReadAhead(0, ahead); });
  ASSERT_EQ(release.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "ReleaseReadAhead(0) waited for table 1's read-ahead";
  release.get();
  TableStats s0 = store_->Stats(0);
  EXPECT_EQ(s0.cache.pinned_rows, 0u);
  EXPECT_EQ(s0.read_ahead_wasted_rows, s0.read_ahead_rows);
  EXPECT_EQ(store_->Stats(1).read_ahead_rows, 0u);  // not landed yet

  // Table 1's release still waits for its own read, so no pin lands after it.
  auto release1 = std::async(std::launch::async, [&] { store_->ReleaseReadAhead(1, held_rows); });
  EXPECT_EQ(release1.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  gate_->Open();
  release1.get();
  TableStats s1 = store_->Stats(1);
  EXPECT_EQ(s1.read_ahead_rows, 3u);
  EXPECT_EQ(s1.read_ahead_wasted_rows, 3u);
  EXPECT_EQ(s1.cache.pinned_rows, 0u);
}

TEST_F(GatedStoreTest, ReleasingReadAheadDoesNotWaitForReadAheadIssuedAfterTheCall) {
  std::vector<uint64_t> first{10, 20, 30}, later{40, 50};
  ASSERT_TRUE(store_->ReadAhead(1, first).ok());
  ASSERT_EQ(WaitUntilHeld(1), 1u);
  // The release waits for the read-ahead issued before it...
  auto release = std::async(std::launch::async, [&] { store_->ReleaseReadAhead(1, first); });
  ASSERT_EQ(release.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  // ...not for one issued while it waits (another thread's, say): a steady
  // stream of read-ahead used to keep it waiting for as long as it lasted.
  ASSERT_TRUE(store_->ReadAhead(1, later).ok());
  ASSERT_EQ(WaitUntilHeld(2), 2u);
  gate_->RunOldestHeld();
  const bool returned = release.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  gate_->Open();  // lets the later read land whatever happened above
  ASSERT_TRUE(returned) << "ReleaseReadAhead waited for read-ahead issued after it";
  release.get();
  store_->WaitForReadAheads();
  TableStats s = store_->Stats(1);
  EXPECT_EQ(s.read_ahead_rows, 5u);
  EXPECT_EQ(s.read_ahead_wasted_rows, 3u);
  EXPECT_EQ(s.cache.pinned_rows, 2u);  // the later rows, still pinned for a gather
  store_->ReleaseReadAhead(1, later);
  EXPECT_EQ(store_->Stats(1).cache.pinned_rows, 0u);
}

TEST_F(GatedStoreTest, ReadAheadLandingAfterItsGatherLeavesNoPinAndCountsAsWasted) {
  // The README's pattern with no wait in between: the gather reads the rows
  // itself while the read-ahead is still in flight, then the read-ahead lands.
  std::vector<uint64_t> rows{11, 22, 33, 4000, 4001, 9000};
  ASSERT_TRUE(store_->ReadAhead(1, rows).ok());
  ASSERT_EQ(WaitUntilHeld(1), 1u);
  std::vector<std::byte> dst(rows.size() * kRecord);
  GatherTicket gather = store_->StartGather(1, rows, dst.data(), kRecord);
  ASSERT_EQ(WaitUntilHeld(2), 2u);
  gate_->Open();  // the read-ahead lands first, then the gather's own reads
  GatherResult r = gather.Wait();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  store_->WaitForReadAheads();
  TableStats s = store_->Stats(1);
  EXPECT_EQ(s.cache.pinned_rows, 0u) << "a read-ahead its gather no longer needs pinned rows for good";
  EXPECT_EQ(s.read_ahead_rows, rows.size());
  EXPECT_EQ(s.read_ahead_wasted_rows, rows.size());
  EXPECT_EQ(s.read_ahead_used_rows, 0u);
}

TEST_F(GatedStoreTest, ReadAheadIssuedAfterAGatherStartedStillPinsForTheNextGather) {
  std::vector<uint64_t> rows{11, 22, 33};
  std::vector<std::byte> dst(rows.size() * kRecord);
  GatherTicket gather = store_->StartGather(1, rows, dst.data(), kRecord);
  ASSERT_EQ(WaitUntilHeld(1), 1u);
  ASSERT_TRUE(store_->ReadAhead(1, rows).ok());  // meant for a later gather
  ASSERT_EQ(WaitUntilHeld(2), 2u);
  gate_->Open();
  ASSERT_TRUE(gather.Wait().status.ok());
  store_->WaitForReadAheads();
  EXPECT_EQ(store_->Stats(1).cache.pinned_rows, rows.size());
  GatherResult again = store_->Gather(1, rows, dst.data(), kRecord);
  ASSERT_TRUE(again.status.ok());
  EXPECT_EQ(again.read_ahead_used, rows.size());
  TableStats s = store_->Stats(1);
  EXPECT_EQ(s.cache.pinned_rows, 0u);
  EXPECT_EQ(s.read_ahead_rows, s.read_ahead_used_rows + s.read_ahead_wasted_rows);
}

TEST_F(StoreTest, ReadAheadRacingItsGatherFromAnotherThreadLeavesNoPins) {
  // 4 MiB cache (~15k slots); 2,000 rounds of 64 rows used to pin nearly all
  // of it and starve a hot set gathered afterwards.
  for (const std::string& backend : AvailableBackends()) {
    SCOPED_TRACE(backend);
    auto store = Store::Open(Options(backend));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    std::vector<std::vector<uint64_t>> rounds;
    for (int i = 0; i < 2000; ++i) rounds.push_back(RandomRows(64, 1000 + i));
    std::atomic<int> issued{0};
    std::thread ahead([&] {
      for (int i = 0; i < 2000; ++i) {
        ASSERT_TRUE((*store)->ReadAhead(0, rounds[i]).ok());
        issued.store(i + 1, std::memory_order_release);
      }
    });
    std::vector<std::byte> dst(64 * kRecord);
    for (int i = 0; i < 2000; ++i) {
      while (issued.load(std::memory_order_acquire) <= i) std::this_thread::yield();
      GatherResult r = (*store)->Gather(0, rounds[i], dst.data(), kRecord);  // no wait for the read-ahead
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    }
    ahead.join();
    (*store)->WaitForReadAheads();
    TableStats s = (*store)->Stats(0);
    EXPECT_EQ(s.cache.pinned_rows, 0u);
    EXPECT_EQ(s.read_ahead_rows, s.read_ahead_used_rows + s.read_ahead_wasted_rows);
    // A hot set that fits hits again once it has been read.
    auto hot = RandomRows(500, 99);
    std::vector<std::byte> hot_dst(hot.size() * kRecord);
    uint64_t hits = 0, distinct = 0;
    for (int i = 0; i < 20; ++i) {
      GatherResult r = (*store)->Gather(0, hot, hot_dst.data(), kRecord);
      ASSERT_TRUE(r.status.ok());
      if (i > 0) hits += r.hits, distinct += r.distinct_rows;
    }
    EXPECT_GT(double(hits) / double(distinct), 0.9);
  }
}

// Passes everything through; remembers the threads the inner engine runs
// completion callbacks on.
// A real engine that records which threads its completion callbacks ran on,
// how many batches were submitted to it, and which threads ran read streams
// (IoEngine::RunReadStream) on their own rings.
class EngineThreadRecorder final : public io::IoEngine {
 public:
  explicit EngineThreadRecorder(std::unique_ptr<io::IoEngine> inner) : inner_(std::move(inner)) {}
  ~EngineThreadRecorder() override { Shutdown(); }
  io::IoBackend backend() const override { return inner_->backend(); }
  std::string Describe() const override { return inner_->Describe(); }
  Result<io::FileId> OpenFile(const std::string& path) override { return inner_->OpenFile(path); }
  Status CloseFile(io::FileId file) override { return inner_->CloseFile(file); }
  Result<uint64_t> FileSize(io::FileId file) const override { return inner_->FileSize(file); }
  io::IoStatsSnapshot Stats() const override { return inner_->Stats(); }
  void Shutdown() override { inner_->Shutdown(); }
  bool RunReadStream(io::ReadStream& stream) override {
    const bool ran = inner_->RunReadStream(stream);
    std::lock_guard lock(mu_);
    if (ran) stream_threads_.push_back(std::this_thread::get_id());
    return ran;
  }
  void SubmitBatch(std::span<io::BlockRead> reads, io::IoCallback done) override {
    {
      std::lock_guard lock(mu_);
      ++batches_;
    }
    inner_->SubmitBatch(reads, [this, done = std::move(done)] {
      {
        std::lock_guard lock(mu_);
        threads_.push_back(std::this_thread::get_id());
      }
      done();
    });
  }
  bool IsCompletionThread(std::thread::id id) {
    std::lock_guard lock(mu_);
    return std::find(threads_.begin(), threads_.end(), id) != threads_.end();
  }
  size_t batches() {
    std::lock_guard lock(mu_);
    return batches_;
  }
  std::vector<std::thread::id> stream_threads() {
    std::lock_guard lock(mu_);
    return stream_threads_;
  }

 private:
  std::unique_ptr<io::IoEngine> inner_;
  std::mutex mu_;
  std::vector<std::thread::id> threads_;
  size_t batches_ = 0;
  std::vector<std::thread::id> stream_threads_;
};

TEST_F(StoreTest, EngineCompletionThreadOnlyHandsLandedBlocksOff) {
  // The engine's contract: completion callbacks hand results off and return
  // (they delay every other completion of the engine, and io_uring has one
  // completion thread). Verifying blocks, copying rows and filling the cache
  // therefore run elsewhere: the callback form's handler, called at the end
  // of that work, must not be on an engine completion thread.
  for (const std::string backend : {"auto", "pread"}) {
    EngineThreadRecorder* recorder = nullptr;
    auto store = OpenWithWrappedEngine(Options(backend), &recorder);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto ids = RandomRows(400, 11);
    std::vector<std::byte> dst(ids.size() * kRecord);
    std::promise<std::pair<GatherResult, std::thread::id>> got;
    (*store)->StartGather(0, ids, dst.data(), kRecord, [&](GatherResult r) {
      got.set_value({std::move(r), std::this_thread::get_id()});
    });
    auto [result, handler_thread] = got.get_future().get();
    ASSERT_TRUE(result.status.ok()) << result.status.ToString();
    EXPECT_GT(result.misses, 0u);
    ExpectRowsExact(ids, dst, kRecord);
    EXPECT_FALSE(recorder->IsCompletionThread(handler_thread)) << backend;

    // Tickets: the waiter or the pool does the work; rows and counts as ever.
    std::vector<std::byte> dst2(ids.size() * kRecord);
    auto more = RandomRows(300, 12);
    std::vector<std::byte> dst3(more.size() * kRecord);
    GatherTicket waited_late = (*store)->StartGather(0, more, dst3.data(), kRecord);
    GatherResult again = (*store)->Gather(0, ids, dst2.data(), kRecord);
    ASSERT_TRUE(again.status.ok());
    EXPECT_EQ(again.hits + again.misses, again.distinct_rows);
    ExpectRowsExact(ids, dst2, kRecord);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the pool take it, mostly
    GatherResult late = waited_late.Wait();
    ASSERT_TRUE(late.status.ok());
    ExpectRowsExact(more, dst3, kRecord);
  }
}

TEST_F(StoreTest, GatherReadsItsMissesOnTheCallersOwnRingWhileATicketReadsThroughTheEngine) {
  // Gather() waits at once, so on io_uring its thread submits and reaps the
  // misses itself: no batch goes to the engine, small or streamed. A ticket
  // may be waited on later or elsewhere, so its reads go through the engine.
  ENGRAM_SKIP_WITHOUT_IO_URING();
  EngineThreadRecorder* recorder = nullptr;
  StoreOptions o = Options("io_uring");
  o.read_buffer_bytes = kSmallReadBuffers;
  auto store = OpenWithWrappedEngine(o, &recorder);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const size_t batches_at_open = recorder->batches();
  const auto small = RandomRows(24, 3);
  const auto streamed = OneRowPerBlock(kStreamedBlocks);
  for (const auto* ids : {&small, &streamed}) {
    std::vector<std::byte> dst(ids->size() * kRecord);
    GatherResult r = (*store)->Gather(0, *ids, dst.data(), kRecord);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_GT(r.misses, 0u);
    EXPECT_EQ(r.inserts + r.refusals, r.misses);
    ExpectRowsExact(*ids, dst, kRecord);
  }
  EXPECT_EQ(recorder->batches(), batches_at_open);
  EXPECT_EQ(recorder->stream_threads(), std::vector<std::thread::id>(2, std::this_thread::get_id()));

  const auto later = RandomRows(300, 4);
  std::vector<std::byte> dst(later.size() * kRecord);
  GatherResult r = (*store)->StartGather(0, later, dst.data(), kRecord).Wait();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_GT(r.misses, 0u);
  ExpectRowsExact(later, dst, kRecord);
  EXPECT_GT(recorder->batches(), batches_at_open);
  EXPECT_EQ(recorder->stream_threads().size(), 2u);
}

TEST_F(StoreTest, GatherReadOnItsOwnThreadWithBuffersForOnlyItsFirstChunksFailsOnlyTheOtherRows) {
  // 200 blocks (four chunks, read without streaming): the read buffers run
  // out after two chunks. On io_uring the caller reads those two on its own
  // ring; on pread the engine reads them. Either way only the rows of the
  // blocks without a buffer fail, and the rows read are cached.
  std::vector<std::string> backends{"pread"};
  if (io::testing::IoUringAvailable()) backends.push_back("io_uring");
  for (const std::string& backend : backends) {
    SCOPED_TRACE(backend);
    fileutil::DropFromPageCache(path_);
    auto store = Store::Open(Options(backend));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    const auto ids = OneRowPerBlock(200);
    auto& buffers = static_cast<StoreImpl&>(**store).read_buffers();
    buffers.FailGrowthAfterForTesting(2);
    std::vector<std::byte> dst(ids.size() * kRecord);
    GatherResult r = (*store)->Gather(0, ids, dst.data(), kRecord);
    buffers.FailGrowthAfterForTesting(-1);
    EXPECT_EQ(r.status.code(), StatusCode::kResourceExhausted) << r.status.ToString();
    EXPECT_EQ(r.blocks_read, 128u);
    const uint64_t per_block = 4088 / kRecord;
    std::vector<size_t> want_failed;
    std::set<uint64_t> read_rows;
    for (size_t p = 0; p < ids.size(); ++p) {
      if (ids[p] / per_block >= 128) {
        want_failed.push_back(p);
        continue;
      }
      read_rows.insert(ids[p]);
      auto want = testing::ExpectedRow(kSeed, ids[p], kRecord);
      EXPECT_EQ(std::memcmp(dst.data() + p * kRecord, want.data(), kRecord), 0) << "row " << ids[p];
    }
    EXPECT_EQ(r.failed_positions, want_failed);
    EXPECT_EQ(r.inserts + r.refusals, read_rows.size());  // nothing from a block not read
    GatherResult again = (*store)->Gather(0, ids, dst.data(), kRecord);
    ASSERT_TRUE(again.status.ok()) << again.status.ToString();
    EXPECT_EQ(again.hits, r.inserts);
    ExpectRowsExact(ids, dst, kRecord);
  }
}

TEST_F(StoreTest, AsyncGatherKeepsItsExecutorBusyAndDestroysTheHandlerThere) {
  // No work guard of our own: run() must not return before the handler ran
  // (the gather is outstanding work on the handler's executor), and the
  // handler -- with what it owns -- is destroyed on the executor's thread,
  // never on a store thread (where dropping the last reference to, say, the
  // Store itself would tear the store down from inside its own pool).
  boost::asio::io_context ctx;
  auto store = Store::Open(Options("auto"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  struct DestroyRecorder {
    explicit DestroyRecorder(std::thread::id* w) : where(w) {}
    ~DestroyRecorder() { *where = std::this_thread::get_id(); }
    std::thread::id* where;
  };
  for (int round = 0; round < 5; ++round) {
    auto ids = RandomRows(3000, 100 + round);  // cold rows: the gather completes later, on the disk's time
    std::vector<std::byte> dst(ids.size() * kRecord);
    std::thread::id destroyed_on;
    bool called = false;
    auto owned = std::make_shared<DestroyRecorder>(&destroyed_on);
    AsyncGather(**store, 0, ids, dst.data(), kRecord,
                          boost::asio::bind_executor(ctx, [&called, owned = std::move(owned)](GatherResult r) {
                            EXPECT_TRUE(r.status.ok());
                            called = true;
                          }));
    ctx.restart();
    ctx.run();
    ASSERT_TRUE(called) << "io_context::run() returned before the gather's handler ran (round " << round << ")";
    EXPECT_EQ(destroyed_on, std::this_thread::get_id()) << "round " << round;
    ExpectRowsExact(ids, dst, kRecord);
  }
}

TEST_F(StoreTest, AsyncGatherRunsHandlerOnCallersExecutor) {
  // The io_context is declared first so it is destroyed last: the store's
  // completion thread may still be inside post() (signalling the context's
  // condition variable) after the handler ran here, so the context must
  // outlive the store. TSan caught the reverse order.
  boost::asio::io_context ctx;
  auto store = Store::Open(Options("auto"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto ids = RandomRows(500, 3);
  std::vector<std::byte> dst(ids.size() * kRecord);
  std::thread::id handler_thread;
  GatherResult got;
  auto work = boost::asio::make_work_guard(ctx);  // keeps run() going until the handler
  AsyncGather(**store, 0, ids, dst.data(), kRecord,
                        boost::asio::bind_executor(ctx, [&](GatherResult r) {
                          handler_thread = std::this_thread::get_id();
                          got = std::move(r);
                          work.reset();
                        }));
  ctx.run();  // returns once the handler ran here
  EXPECT_EQ(handler_thread, std::this_thread::get_id());
  ASSERT_TRUE(got.status.ok());
  ExpectRowsExact(ids, dst, kRecord);
  // use_future
  std::future<GatherResult> f = AsyncGather(**store, 0, ids, dst.data(), kRecord, boost::asio::use_future);
  GatherResult r2 = f.get();
  ASSERT_TRUE(r2.status.ok());
  EXPECT_EQ(r2.hits, r2.distinct_rows);
}

TEST_F(StoreTest, TwoTablesShareTheBudgetProportionallyOrExplicitly) {
  std::string small = dir_.File("small.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(small, kRows / 3, kRecord, 9).ok());
  // 4 MiB: below what either table could use (caches are capped at the rows).
  StoreOptions o = Options("pread", 4u << 20);
  o.tables.push_back({small, "", 0});
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_EQ((*store)->table_count(), 2u);
  EXPECT_EQ(*(*store)->FindTable("small"), 1u);
  uint64_t a = (*store)->Stats(0).cache_budget_bytes, b = (*store)->Stats(1).cache_budget_bytes;
  EXPECT_EQ(a + b, 4u << 20);
  EXPECT_NEAR(double(a) / double(b), 3.0, 0.05);
  o.tables[1].cache_bytes = 1u << 20;
  auto explicit_store = Store::Open(o);
  ASSERT_TRUE(explicit_store.ok()) << explicit_store.status().ToString();
  EXPECT_EQ((*explicit_store)->Stats(1).cache_budget_bytes, 1u << 20);
  EXPECT_EQ((*explicit_store)->Stats(0).cache_budget_bytes, 3u << 20);
  o.tables[1].cache_bytes = 5u << 20;
  EXPECT_FALSE(Store::Open(o).ok());
}

TEST_F(StoreTest, TraceCaptureRecordsEveryGather) {
  StoreOptions o = Options();
  o.trace_path = dir_.File("trace.txt");
  {
    auto store = Store::Open(o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    std::vector<uint64_t> ids{3, 1, 3};
    std::vector<std::byte> dst(ids.size() * kRecord);
    ASSERT_TRUE((*store)->Gather(0, ids, dst.data(), kRecord).status.ok());
    ASSERT_TRUE((*store)->Gather(0, std::vector<uint64_t>{9}, dst.data(), kRecord).status.ok());
  }
  std::ifstream f(o.trace_path);
  std::string l1, l2;
  std::getline(f, l1);
  std::getline(f, l2);
  EXPECT_EQ(l1, "0 3 1 3");
  EXPECT_EQ(l2, "0 9");
}

TEST_F(StoreTest, MetricsMoveAsGathersRun) {
  auto store = Store::Open(Options());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::string before = (*store)->MetricsText();
  EXPECT_NE(before.find("engram_row_cache_hits_total{table=\"layer1\"} 0"), std::string::npos) << before;
  auto ids = RandomRows(100, 5);
  std::vector<std::byte> dst(ids.size() * kRecord);
  ASSERT_TRUE((*store)->Gather(0, ids, dst.data(), kRecord).status.ok());
  ASSERT_TRUE((*store)->Gather(0, ids, dst.data(), kRecord).status.ok());
  std::string after = (*store)->MetricsText();
  EXPECT_EQ(after.find("engram_row_cache_hits_total{table=\"layer1\"} 0\n"), std::string::npos);
  EXPECT_NE(after.find("engram_row_cache_refusals_total{table=\"layer1\",reason=\"lost_admission\"}"),
            std::string::npos);
  EXPECT_NE(after.find("engram_gathers_total{table=\"layer1\"} 2"), std::string::npos);
}

// One table, pread, a given cache budget: the stores whose memory the tests
// below measure.
StoreOptions OneTableOptions(const std::string& path, uint64_t cache_bytes, bool commit_cache_memory) {
  StoreOptions o;
  o.tables.push_back({path, "", 0});
  o.cache_bytes = cache_bytes;
  o.io_backend = "pread";
  o.commit_cache_memory = commit_cache_memory;
  return o;
}

// A small table's cache never has more slots than the table has rows, and
// opening a store with a large budget commits almost none of it (with
// commit_cache_memory off, memory is committed as rows arrive). 1-byte
// records make a 1 GiB budget worth tens of millions of slots (and their
// sketch and ghost history), so a cache sized from the budget alone, or one
// that touches its arrays at open, shows here.
TEST_F(StoreTest, SmallTableCacheIsCappedAtItsRowsAndOpeningCommitsAlmostNothing) {
  const std::string tiny = dir_.File("tiny.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(tiny, 1000, 1, 3).ok());
  const StoreOptions o = OneTableOptions(tiny, uint64_t{1} << 30, /*commit_cache_memory=*/false);
  const uint64_t before = testing::ResidentBytes();
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const uint64_t after = testing::ResidentBytes();
  const TableStats s = (*store)->Stats(0);
  EXPECT_LE(s.cache.capacity_rows, 1000u);
  EXPECT_GE(s.cache.capacity_rows, 500u);  // capped, not starved
  EXPECT_LE(s.cache.memory_bytes, s.cache_budget_bytes);
  // Every row fits and is then served from the cache.
  std::vector<uint64_t> ids(1000);
  for (uint64_t i = 0; i < ids.size(); ++i) ids[i] = i;
  std::vector<std::byte> dst(ids.size());
  ASSERT_TRUE((*store)->Gather(0, ids, dst.data(), 1).status.ok());
  for (uint64_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(dst[i], testing::ExpectedRow(3, i, 1)[0]) << i;
  }
  if (testing::kUnderSanitizer) GTEST_SKIP() << "RSS is not comparable under sanitizers; capacity checked above";
  ASSERT_GT(before, 0u) << "/proc/self/statm unreadable";
  EXPECT_LT(after - std::min(after, before), uint64_t{16} << 20)
      << "opening a store with a 1 GiB budget on a 1,000-row table grew RSS from " << before << " to " << after;
}

// With commit_cache_memory (the default) the cache's memory is committed by
// a background thread after open, without a single row inserted: RSS grows
// by about the cache's memory within seconds, and the store serves meanwhile.
bool KernelPopulatesOnRequest() {
  void* probe = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED) return false;
  const bool populates = ::madvise(probe, 4096, 23 /* MADV_POPULATE_WRITE */) == 0;
  ::munmap(probe, 4096);
  return populates;
}

TEST_F(StoreTest, CommitCacheMemoryCommitsTheWholeCacheInTheBackground) {
  if (testing::kUnderSanitizer) GTEST_SKIP() << "RSS is not comparable under sanitizers";
  if (!KernelPopulatesOnRequest()) GTEST_SKIP() << "this kernel does not populate on request (MADV_POPULATE_WRITE)";
  const std::string path = dir_.File("commit.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(path, 200000, kRecord, 4).ok());
  const StoreOptions o = OneTableOptions(path, uint64_t{48} << 20, /*commit_cache_memory=*/true);
  const uint64_t before = testing::ResidentBytes();
  ASSERT_GT(before, 0u) << "/proc/self/statm unreadable";
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const uint64_t cache_memory = (*store)->Stats(0).cache.memory_bytes;
  ASSERT_GT(cache_memory, uint64_t{32} << 20);
  std::vector<uint64_t> ids = {1, 2, 3};
  std::vector<std::byte> dst(ids.size() * kRecord);
  ASSERT_TRUE((*store)->Gather(0, ids, dst.data(), kRecord).status.ok());
  uint64_t grown = 0;
  for (int i = 0; i < 200 && grown < cache_memory * 9 / 10; ++i) {
    grown = testing::ResidentBytes() - std::min(testing::ResidentBytes(), before);
    if (grown < cache_memory * 9 / 10) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(grown, cache_memory * 9 / 10) << "cache memory " << cache_memory << " B, RSS grew by " << grown << " B";
}

// WaitForCacheMemory returns once that background commit is done: the RSS
// has grown by the cache's memory when it returns, with no polling. Without
// commit_cache_memory there is nothing to wait for, and it returns at once.
TEST_F(StoreTest, WaitForCacheMemoryReturnsOnceTheCacheIsCommitted) {
  const std::string path = dir_.File("wait.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(path, 200000, kRecord, 4).ok());
  for (const bool commit : {false, true}) {
    const StoreOptions o = OneTableOptions(path, uint64_t{48} << 20, commit);
    const uint64_t before = testing::ResidentBytes();
    auto store = Store::Open(o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    (*store)->WaitForCacheMemory();
    const uint64_t grown = testing::ResidentBytes() - std::min(testing::ResidentBytes(), before);
    const uint64_t cache_memory = (*store)->Stats(0).cache.memory_bytes;
    // The store serves after the wait as before it.
    std::vector<uint64_t> ids = {5, 6, 7};
    std::vector<std::byte> dst(ids.size() * kRecord);
    ASSERT_TRUE((*store)->Gather(0, ids, dst.data(), kRecord).status.ok());
    EXPECT_EQ(std::memcmp(dst.data(), testing::ExpectedRow(4, 5, kRecord).data(), kRecord), 0);
    if (testing::kUnderSanitizer || !KernelPopulatesOnRequest()) continue;  // RSS says nothing then
    if (commit) {
      EXPECT_GE(grown, cache_memory * 9 / 10) << "cache memory " << cache_memory << " B, RSS grew by " << grown << " B";
    } else {
      EXPECT_LT(grown, cache_memory / 4) << "nothing was to be committed, yet RSS grew by " << grown << " B";
    }
  }
}

// The budget a capped table cannot use goes to the tables that can: with
// 1-byte records a table needs ~17x its size in cache (index, sketch, ghost
// history per row), a 264-byte table ~1.06x, so a split by size alone would
// give the small 264-byte table more than it can hold.
TEST_F(StoreTest, BudgetASmallTableCannotUseGoesToTheOthers) {
  const std::string bytes = dir_.File("bytes.engram"), tiny = dir_.File("tiny.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(bytes, 100000, 1, 5).ok());
  ASSERT_TRUE(testing::WriteGeneratedTable(tiny, 1000, kRecord, 3).ok());
  StoreOptions o;
  o.tables = {{bytes, "", 0}, {tiny, "", 0}};
  o.cache_bytes = 1u << 20;
  o.io_backend = "pread";
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const TableStats big = (*store)->Stats(0), small = (*store)->Stats(1);
  EXPECT_LE(small.cache.capacity_rows, 1000u);
  EXPECT_GE(small.cache.capacity_rows, 900u);
  EXPECT_LT(small.cache_budget_bytes, 1000u * (kRecord + 32));
  EXPECT_EQ(big.cache_budget_bytes + small.cache_budget_bytes, 1u << 20);
  EXPECT_GT(big.cache_budget_bytes, 700u << 10);  // a split by size alone gives it 282 KiB
  EXPECT_LT(big.cache.capacity_rows, 100000u);   // still under pressure: it uses all it gets
  // An explicit reservation beyond what the table can use is returned too.
  o.tables[1].cache_bytes = 512u << 10;
  auto reserved = Store::Open(o);
  ASSERT_TRUE(reserved.ok()) << reserved.status().ToString();
  EXPECT_EQ((*reserved)->Stats(1).cache_budget_bytes, small.cache_budget_bytes);
  EXPECT_EQ((*reserved)->Stats(0).cache_budget_bytes, big.cache_budget_bytes);
}

// cache_memory_fraction sizes the budget from MemAvailable at open, with
// cache_bytes as the ceiling; a fraction outside [0, 1] is refused.
TEST_F(StoreTest, CacheMemoryFractionSizesTheBudgetFromMemAvailable) {
  auto available = ReadMemAvailable();
  ASSERT_TRUE(available.ok()) << available.status().ToString();
  StoreOptions o = Options("pread", uint64_t{1} << 30);
  o.cache_memory_fraction = double(2u << 20) / double(*available);  // ~2 MiB, below layer1's need
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const uint64_t budget = (*store)->Stats(0).cache_budget_bytes;
  EXPECT_GT(budget, 1u << 20);  // MemAvailable moves a little between the two reads
  EXPECT_LT(budget, 4u << 20);
  EXPECT_LE((*store)->Stats(0).cache.memory_bytes, budget);
  o.cache_memory_fraction = 1.0;
  o.cache_bytes = 3u << 20;  // the ceiling
  auto capped = Store::Open(o);
  ASSERT_TRUE(capped.ok()) << capped.status().ToString();
  EXPECT_EQ((*capped)->Stats(0).cache_budget_bytes, 3u << 20);
  o.cache_memory_fraction = 1.5;
  EXPECT_EQ(Store::Open(o).status().code(), StatusCode::kInvalidArgument);
}

// A table truncated under an open store fails its gathers with a clean IOError
// on every backend (mmap included: no SIGBUS), and the store keeps serving the
// other tables.
TEST_F(StoreTest, TableTruncatedWhileOpenFailsItsGathersAndOtherTablesStillWork) {
  const std::string other = dir_.File("other.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(other, kRows, kRecord, kSeed).ok());
  // io_uring last: where a ring cannot be set up the test skips from there.
  for (const char* backend : {"pread", "mmap", "io_uring"}) {
    SCOPED_TRACE(backend);
    const std::string victim = dir_.File(std::string("victim-") + backend + ".engram");
    ASSERT_TRUE(testing::WriteGeneratedTable(victim, kRows, kRecord, kSeed).ok());
    StoreOptions o = Options(backend);
    o.tables = {{victim, "", 0}, {other, "", 0}};
    auto store = Store::Open(o);
    if (!store.ok() && std::string(backend) == "io_uring") {
      GTEST_SKIP() << "io_uring ring cannot be set up here: " << store.status().ToString();
    }
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    // Keep the first quarter (page-aligned, so the rest of the mapping is past EOF).
    std::filesystem::resize_file(victim, (std::filesystem::file_size(victim) / 4) & ~uint64_t{4095});
    fileutil::DropFromPageCache(victim);
    const std::vector<uint64_t> tail{kRows - 1, kRows - 2000, kRows / 2};
    std::vector<std::byte> dst(tail.size() * kRecord);
    GatherResult bad = (*store)->Gather(0, tail, dst.data(), kRecord);
    ASSERT_FALSE(bad.status.ok());
    EXPECT_EQ(bad.status.code(), StatusCode::kIOError) << bad.status.ToString();
    EXPECT_NE(bad.status.message().find("truncated"), std::string::npos) << bad.status.ToString();
    auto ids = RandomRows(2000, 3);
    std::vector<std::byte> good(ids.size() * kRecord);
    GatherResult r = (*store)->Gather(1, ids, good.data(), kRecord);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    ExpectRowsExact(ids, good, kRecord);
  }
}

}  // namespace
}  // namespace engram
