// Warm start (StoreOptions::hot_set_path): the rows a store held come back
// after a restart, byte-exact; a hot set that does not fit is ignored with
// one warning and never yields a wrong row; a store killed while saving
// leaves a hot set that loads; gathers stay exact while warming runs.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engram/hasher.h"
#include "engram/store.h"
#include "src/store/hot_set.h"
#include "storage/layout_json.h"
#include "storage/rank_converter.h"
#include "tests/testing/captured_log.h"
#include "tests/testing/safetensors_file.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

constexpr uint32_t kRecord = 264;
constexpr uint64_t kRows = 8192;
constexpr uint64_t kSeed = 11;
constexpr uint64_t kCacheBytes = 1u << 20;  // ~3,000 rows of 8,192

std::vector<uint64_t> RandomRows(size_t n, uint64_t seed, uint64_t rows = kRows) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> ids(n);
  for (auto& id : ids) id = rng() % rows;
  return ids;
}

// Gathers `ids` and checks every row byte for byte against the generator.
GatherResult GatherExact(Store& store, const std::vector<uint64_t>& ids, uint64_t seed = kSeed) {
  std::vector<std::byte> buf(ids.size() * kRecord);
  GatherResult r = store.Gather(0, ids, buf.data(), kRecord);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto want = testing::ExpectedRow(seed, ids[i], kRecord);
    if (std::memcmp(buf.data() + i * kRecord, want.data(), kRecord) != 0) {
      ADD_FAILURE() << "row " << ids[i] << " at position " << i << " differs";
      break;
    }
  }
  return r;
}

// Warnings about the hot set in a captured log.
size_t HotSetWarnings(const std::string& log) {
  size_t n = 0;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find("[warning]") != std::string::npos && line.find("hot set") != std::string::npos) ++n;
  }
  return n;
}

// Opens a store, waits for its warm-up, gathers 300 random rows exactly and
// closes it; returns the rows it warmed.
uint64_t WarmUpAndGather(const StoreOptions& options, uint64_t seed) {
  auto store = Store::Open(options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return 0;
  (*store)->WaitForWarmUp();
  const uint64_t warmed = (*store)->Stats(0).warm_rows;
  GatherExact(**store, RandomRows(300, seed));
  return warmed;
}

// The stores of these tests: one small table, a cache of a third of it, pread.
StoreOptions WarmStartOptions(const std::string& table, const std::string& hot_set, double interval_seconds = 0) {
  StoreOptions o;
  o.tables = {TableOptions{table, "", 0}};
  o.hot_set_path = hot_set;
  o.hot_set_interval_seconds = interval_seconds;
  o.cache_bytes = kCacheBytes;
  o.io_backend = "pread";
  return o;
}

class WarmStartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    table_ = dir_.File("layer1.engram");
    ASSERT_TRUE(testing::WriteGeneratedTable(table_, kRows, kRecord, kSeed).ok());
    hot_set_ = dir_.File("hot.set");
  }

  StoreOptions Options() const { return WarmStartOptions(table_, hot_set_); }

  // Runs a store over `ids` and closes it (saving the hot set); returns the
  // rows it held at close.
  uint64_t RunAndClose(const std::vector<uint64_t>& ids) {
    auto store = Store::Open(Options());
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    GatherExact(**store, ids);
    return (*store)->Stats(0).cache.resident_rows;
  }

  testing::TempDir dir_;
  std::string table_;
  std::string hot_set_;
};

TEST_F(WarmStartTest, RowsResidentAtCloseAreByteExactHitsAfterReopenAndWarmUp) {
  const std::vector<uint64_t> ids = RandomRows(1500, 1);
  const uint64_t resident = RunAndClose(ids);
  ASSERT_GT(resident, 500u);
  ASSERT_TRUE(std::filesystem::exists(hot_set_));

  testing::CapturedLog log;
  auto store = Store::Open(Options());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  (*store)->WaitForWarmUp();
  TableStats s = (*store)->Stats(0);
  EXPECT_EQ(s.warm_rows, resident);
  EXPECT_EQ(s.warm_skipped_rows, 0u);
  EXPECT_EQ(s.cache.resident_rows, resident);
  EXPECT_EQ(s.cache.lookups, 0u) << "warming counts no lookup";
  GatherResult r = GatherExact(**store, ids);
  EXPECT_EQ(r.hits, resident) << "every row held at close is a hit";
  EXPECT_EQ(r.hits + r.misses, r.distinct_rows);
  EXPECT_EQ(HotSetWarnings(log.text()), 0u) << log.text();
  EXPECT_NE((*store)->MetricsText().find("engram_warm_rows_total{table=\"layer1\"} " + std::to_string(resident)),
            std::string::npos);
}

TEST_F(WarmStartTest, MissingHotSetIsAColdStartWithoutWarning) {
  testing::CapturedLog log;
  EXPECT_EQ(WarmUpAndGather(Options(), 2), 0u);
  EXPECT_EQ(HotSetWarnings(log.text()), 0u) << log.text();
  EXPECT_NE(log.text().find("no hot set"), std::string::npos) << log.text();
  EXPECT_TRUE(std::filesystem::exists(hot_set_)) << "the close saved one";
}

// Reopens with `options` over a hot set that does not fit: exactly one
// warning naming `why`, nothing warmed, and gathers exact.
void ExpectIgnoredWithOneWarning(const StoreOptions& options, const std::string& why, uint64_t seed = kSeed,
                                 uint64_t rows = kRows) {
  testing::CapturedLog log;
  auto store = Store::Open(options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  (*store)->WaitForWarmUp();
  EXPECT_EQ((*store)->Stats(0).warm_rows, 0u);
  EXPECT_EQ((*store)->Stats(0).cache.resident_rows, 0u);
  GatherExact(**store, RandomRows(1000, 3, rows), seed);
  const std::string text = log.text();
  EXPECT_EQ(HotSetWarnings(text), 1u) << text;
  EXPECT_NE(text.find(why), std::string::npos) << "expected '" << why << "' in:\n" << text;
}

TEST_F(WarmStartTest, HotSetOfAnotherTableIsIgnoredWithOneWarning) {
  RunAndClose(RandomRows(1500, 1));
  const std::string other = dir_.File("other.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(other, kRows, kRecord, kSeed + 1).ok());
  StoreOptions o = Options();
  o.tables = {{other, "", 0}};
  ExpectIgnoredWithOneWarning(o, "no entry for its fingerprint", kSeed + 1);
}

TEST_F(WarmStartTest, HotSetOfAnotherPolicyIsIgnoredWithOneWarning) {
  RunAndClose(RandomRows(1500, 1));
  StoreOptions o = Options();
  o.cache_policy = "default,admission=always";
  ExpectIgnoredWithOneWarning(o, "saved under policy");
}

TEST_F(WarmStartTest, HotSetOfAnotherCapacityIsIgnoredWithOneWarning) {
  RunAndClose(RandomRows(1500, 1));
  StoreOptions o = Options();
  o.cache_bytes = 2 * kCacheBytes;
  ExpectIgnoredWithOneWarning(o, "saved from a cache of");
}

TEST_F(WarmStartTest, TruncatedHotSetIsIgnoredWithOneWarning) {
  RunAndClose(RandomRows(1500, 1));
  std::filesystem::resize_file(hot_set_, std::filesystem::file_size(hot_set_) / 2);
  ExpectIgnoredWithOneWarning(Options(), "checksum mismatch");
}

TEST_F(WarmStartTest, CorruptHotSetIsIgnoredWithOneWarning) {
  RunAndClose(RandomRows(1500, 1));
  std::fstream f(hot_set_, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(200);
  f.put('\x5a');
  f.close();
  ExpectIgnoredWithOneWarning(Options(), "checksum mismatch");
}

TEST_F(WarmStartTest, HotSetThatIsNotAHotSetIsIgnoredWithOneWarning) {
  std::ofstream(hot_set_) << "{\"not\": \"a hot set\"}";
  ExpectIgnoredWithOneWarning(Options(), "bad magic");
}

TEST_F(WarmStartTest, HotSetPathThatIsTheTableIsRefusedAndTheTableKeepsItsBytes) {
  const auto size = std::filesystem::file_size(table_);
  const std::string link = dir_.File("link.set"), hard_link = dir_.File("hard-link.set");
  std::filesystem::create_symlink(table_, link);
  std::filesystem::create_hard_link(table_, hard_link);
  for (const std::string& path : {table_, link, hard_link}) {
    StoreOptions o = Options();
    o.hot_set_path = path;
    auto store = Store::Open(o);
    ASSERT_FALSE(store.ok()) << path;
    EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(store.status().message().find("hot_set_path"), std::string::npos) << store.status().ToString();
  }
  EXPECT_EQ(std::filesystem::file_size(table_), size);
  GatherExact(**Store::Open(WarmStartOptions(table_, "")), RandomRows(100, 9));
}

// ---- the hot set's path: never a file the process reads, only a regular file ----

// A manifest of the test table split over two ranks, beside it.
std::string WriteRankManifest(const testing::TempDir& dir, const std::string& table) {
  EngramHashLayout layout;
  layout.layer_id = 1;
  layout.orders = {2};
  layout.heads = 2;
  layout.multipliers = {3, 5};
  layout.primes = {{4093, 4099}};  // 8,192 rows: the table's
  layout.offsets = {{0, 4093}};
  layout.total_rows = kRows;
  RankConvertOptions o;
  o.ranks = 2;
  o.convert.hash_layout = LayoutToJson(layout);
  o.convert.writer.sync = false;
  const std::string manifest = dir.File("l1.json");
  auto m = ConvertTableToRanks(table, manifest, o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return manifest;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void ExpectRefusedAtOpen(const StoreOptions& o, const std::string& needle) {
  auto store = Store::Open(o);
  ASSERT_FALSE(store.ok()) << "opened with hot_set_path " << o.hot_set_path;
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument) << store.status().ToString();
  EXPECT_NE(store.status().message().find(needle), std::string::npos)
      << "'" << needle << "' not in: " << store.status().ToString();
}

TEST_F(WarmStartTest, HotSetPathThatIsTheRankManifestIsRefusedAndTheManifestKeepsItsBytes) {
  const std::string manifest = WriteRankManifest(dir_, table_);
  const std::string bytes = ReadBytes(manifest);
  std::filesystem::create_symlink(manifest, dir_.File("symlink.set"));
  std::filesystem::create_hard_link(manifest, dir_.File("hardlink.set"));
  StoreOptions o = Options();
  o.tables = {TableOptions{"", "", 0}};
  o.tables[0].manifest = manifest;
  o.rank = 0;
  for (const std::string& path : {manifest, dir_.File("symlink.set"), dir_.File("hardlink.set")}) {
    o.hot_set_path = path;
    ExpectRefusedAtOpen(o, "hot_set_path " + path + " is the same file as " + manifest +
                               " (the rank manifest of table 'l1', which this process reads)");
  }
  // Nor the trace.
  o.hot_set_path = "";
  o.trace_path = manifest;
  ExpectRefusedAtOpen(o, "trace_path " + manifest + " is the same file as " + manifest);
  EXPECT_EQ(ReadBytes(manifest), bytes);
  o.trace_path = "";
  o.hot_set_path = hot_set_;
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
}

TEST_F(WarmStartTest, HotSetPathThatIsALayoutOrTokenMapThisProcessReadIsRefused) {
  const std::string layout_file = std::string(ENGRAM_FIXTURE_DIR) + "/engram-hash/layout-v41.json";
  const std::string layout = dir_.File("layout.json");
  std::filesystem::copy_file(layout_file, layout);
  ASSERT_TRUE(EngramHashLayout::FromFile(layout, 0).ok());
  const std::string map = dir_.File("token-map.u32");
  testing::WriteFile(map, std::string("\x05\x00\x00\x00\x07\x00\x00\x00", 8));
  ASSERT_TRUE(TokenMap::FromFile(map).ok());
  std::filesystem::create_hard_link(map, dir_.File("map-link.set"));
  const std::pair<std::string, std::string> cases[] = {
      {layout, "(a hash layout file, which this process reads)"},
      {map, "(a token map, which this process reads)"},
      {dir_.File("map-link.set"), "is the same file as " + map},
  };
  for (const auto& [path, needle] : cases) {
    StoreOptions o = Options();
    o.hot_set_path = path;
    ExpectRefusedAtOpen(o, needle);
  }
  EXPECT_EQ(ReadBytes(layout), ReadBytes(layout_file));
  EXPECT_EQ(std::filesystem::file_size(map), 8u);
}

TEST_F(WarmStartTest, ATokenMapReadFromTheHotSetPathAfterOpenIsNotReplacedAtClose) {
  const std::string map = hot_set_;
  testing::WriteFile(map, std::string("\x05\x00\x00\x00", 4));
  testing::CapturedLog log;
  {
    auto store = Store::Open(Options());  // the file is no hot set: ignored with a warning
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(TokenMap::FromFile(map).ok());
    GatherExact(**store, RandomRows(100, 1));
  }
  EXPECT_EQ(ReadBytes(map), std::string("\x05\x00\x00\x00", 4)) << "the save replaced the token map";
  EXPECT_NE(log.text().find("the hot set was not saved"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("(a token map, which this process reads)"), std::string::npos) << log.text();
}

TEST_F(WarmStartTest, HotSetPathThatIsNotARegularFileIsRefusedAtOpenAndNeverReplaced) {
  const std::string fifo = dir_.File("fifo.set"), dir = dir_.File("dir.set"), null = dir_.File("null.set");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_directory(dir);
  std::filesystem::create_symlink("/dev/null", null);
  const std::pair<std::string, std::string> cases[] = {
      {fifo, "hot_set_path " + fifo + " is a FIFO, not a regular file"},
      {dir, "is a directory, not a regular file"},
      {null, "is a character device, not a regular file"},
  };
  for (const auto& [path, needle] : cases) {
    StoreOptions o = Options();
    o.hot_set_path = path;
    ExpectRefusedAtOpen(o, needle);
  }
  // One that appears while the store runs is not replaced at close either.
  const std::string later = dir_.File("later.set");
  testing::CapturedLog log;
  {
    StoreOptions o = Options();
    o.hot_set_path = later;
    auto store = Store::Open(o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    GatherExact(**store, RandomRows(100, 1));
    ASSERT_EQ(::mkfifo(later.c_str(), 0600), 0);
  }
  EXPECT_NE(log.text().find("is a FIFO, not a regular file"), std::string::npos) << log.text();
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_TRUE(std::filesystem::is_fifo(later));
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_TRUE(std::filesystem::is_symlink(null));
  EXPECT_TRUE(std::filesystem::is_character_file(null));
}

TEST_F(WarmStartTest, ATemporaryFileAKilledSaveLeftIsRemovedAtTheNextOpenAndALiveOneKept) {
  const std::string dead = dir_.File(".hot.set.tmp-Dead00"), live = dir_.File(".hot.set.tmp-Live00");
  testing::WriteFile(dead, "half a hot set");
  testing::WriteFile(live, "a save in progress");
  const int live_fd = ::open(live.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(live_fd, 0);
  ASSERT_EQ(::flock(live_fd, LOCK_EX), 0);
  {
    auto store = Store::Open(Options());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_FALSE(std::filesystem::exists(dead)) << "not removed at open";
    EXPECT_TRUE(std::filesystem::exists(live)) << "a live writer's file was removed";
  }
  ::close(live_fd);
}

TEST_F(WarmStartTest, HotSetOfALargerCacheIsIgnoredNamingTheCapacity) {
  // Saved from a cache holding the whole table: larger than a hot set of the
  // third-of-the-table cache below can be.
  {
    StoreOptions big = Options();
    big.cache_bytes = 8 * kCacheBytes;
    auto store = Store::Open(big);
    ASSERT_TRUE(store.ok());
    std::vector<uint64_t> all(kRows);
    std::iota(all.begin(), all.end(), 0);
    GatherExact(**store, all);
  }
  // More than a hot set of that cache can hold: reported as the capacity
  // that differs, not as a size limit.
  ASSERT_GT(std::filesystem::file_size(hot_set_), 8000u * 12);
  ExpectIgnoredWithOneWarning(Options(), "saved from a cache of");
}

TEST_F(WarmStartTest, EveryTruncationOfAHotSetIsRefusedAsCorrupt) {
  HotSetTable t{0x1234, 100, kRecord, "default", 64, {{5, 3}, {7, 1}, {99, 0}}};
  const std::string bytes = EncodeHotSet({t, t});
  ASSERT_TRUE(DecodeHotSet(bytes).ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = DecodeHotSet(bytes.substr(0, n));
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << "prefix of " << n << " B";
  }
}

TEST_F(WarmStartTest, RowOutOfRangeWithAValidChecksumIsRefusedAsCorrupt) {
  HotSetTable t{0x1234, 100, kRecord, "default", 64, {{5, 3}, {100, 1}}};
  auto r = DecodeHotSet(EncodeHotSet({t}));
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("out of range"), std::string::npos) << r.status().ToString();
}

TEST_F(WarmStartTest, GathersStayExactWhileWarmingRuns) {
  RunAndClose(RandomRows(20000, 1));  // fills the cache
  for (int round = 0; round < 3; ++round) {
    auto store = Store::Open(Options());
    ASSERT_TRUE(store.ok());
    // Gathers from two threads start at once, beside the warm-up.
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        for (int g = 0; g < 10; ++g) GatherExact(**store, RandomRows(256, 100 * round + 10 * t + g));
      });
    }
    for (auto& th : threads) th.join();
    (*store)->WaitForWarmUp();
    TableStats s = (*store)->Stats(0);
    EXPECT_LE(s.cache.resident_rows, s.cache.capacity_rows);
    EXPECT_GT(s.warm_rows + s.warm_skipped_rows, 0u);
    GatherExact(**store, RandomRows(2000, 7 + round));
  }
}

TEST_F(WarmStartTest, PeriodicSavesReplaceTheHotSetWhileTheStoreRuns) {
  StoreOptions o = Options();
  o.hot_set_interval_seconds = 0.01;
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok());
  GatherExact(**store, RandomRows(500, 4));
  // A save after the gather lists its rows; wait for one (no close).
  for (int i = 0; i < 500; ++i) {
    auto saved = ReadHotSetFile(hot_set_, 1 << 20);
    if (saved.ok() && !(*saved)[0].rows.empty()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL() << "no periodic save within 5 s";
}

// ---- kill -9 while saving ----

// The child: a store saving its hot set every 100 µs while gathers
// change what it holds, until it is killed. Runs only when the parent test
// starts this binary with ENGRAM_HOT_SET_CHILD set.
TEST(WarmStartChild, SavesHotSetsUntilKilled) {
  const char* dir = std::getenv("ENGRAM_HOT_SET_CHILD");
  if (dir == nullptr) GTEST_SKIP() << "started by WarmStartTest.KillDuringSaveLeavesAHotSetThatLoads";
  auto store =
      Store::Open(WarmStartOptions(std::string(dir) + "/layer1.engram", std::string(dir) + "/hot.set", 0.0001));
  ASSERT_TRUE(store.ok());
  std::vector<std::byte> buf(512 * kRecord);
  for (uint64_t g = 0;; ++g) {
    const auto ids = RandomRows(512, g);
    (*store)->Gather(0, ids, buf.data(), kRecord);
    if (g == 20) std::ofstream(std::string(dir) + "/ready");
  }
}

// Files in `dir` whose names start with `prefix`.
int TempFilesOf(const std::string& dir, const std::string& prefix) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.path().filename().string().starts_with(prefix);
  return n;
}

TEST_F(WarmStartTest, KillDuringSaveLeavesAHotSetThatLoads) {
  const std::string ready = dir_.File("ready");
  int interrupted = 0;
  for (int delay_ms : {1, 3, 5, 7, 12, 16, 20, 26, 31, 45}) {
    std::filesystem::remove(ready);
    // Everything the child needs is built before fork: after it, only
    // async-signal-safe calls until exec.
    const std::string child_env = "ENGRAM_HOT_SET_CHILD=" + dir_.path();
    std::vector<char*> env;
    for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
    env.push_back(const_cast<char*>(child_env.c_str()));
    env.push_back(nullptr);
    const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    ASSERT_GE(null, 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      dup2(null, 1);
      dup2(null, 2);
      const char* argv[] = {"warm_start_test", "--gtest_filter=WarmStartChild.SavesHotSetsUntilKilled", nullptr};
      execve("/proc/self/exe", const_cast<char* const*>(argv), env.data());
      _exit(127);
    }
    close(null);
    // Saves run back to back once the child has gathered for a while.
    for (int i = 0; i < 1000 && !std::filesystem::exists(ready); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(std::filesystem::exists(ready)) << "the child never got going";
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;

    auto saved = ReadHotSetFile(hot_set_, 1 << 24);
    ASSERT_TRUE(saved.ok()) << "after a kill " << delay_ms << " ms in: " << saved.status().ToString();
    ASSERT_EQ(saved->size(), 1u);
    EXPECT_FALSE((*saved)[0].rows.empty());
    interrupted += TempFilesOf(dir_.path(), ".hot.set.tmp-");
    // It loads: a store warms from it without a warning, and removes the
    // temporary file a kill mid-save left.
    testing::CapturedLog log;
    EXPECT_GT(WarmUpAndGather(Options(), 5), 0u);
    EXPECT_EQ(HotSetWarnings(log.text()), 0u) << log.text();
    EXPECT_EQ(TempFilesOf(dir_.path(), ".hot.set.tmp-"), 0) << "after a kill " << delay_ms << " ms in";
  }
  // How many kills landed mid-save: reported, not asserted, as it depends on
  // timing (ATemporaryFileAKilledSaveLeftIsRemovedAtTheNextOpenAndALiveOneKept
  // pins the removal).
  RecordProperty("kills_during_a_save", interrupted);
}

}  // namespace
}  // namespace engram
