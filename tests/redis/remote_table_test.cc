// Tables in a Redis Cluster, end to end against a real cluster (3 masters,
// 3 replicas): loaded (storage/redis/remote_table_loader.h, and
// engram-convert --to), opened by a store like a file, every row of a
// 200,000-row table exactly the local file's, a load cut off and resumed, a
// second load that writes nothing, damaged and missing blocks that fail only
// their rows, a cluster that is not there, and gathers from four threads
// while a master is killed and its replica takes over.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "engram/store.h"
#include "src/common/child_process.h"
#include "storage/redis/remote_table.h"
#include "storage/redis/remote_table_keys.h"
#include "storage/redis/remote_table_loader.h"
#include "tests/redis/redis_test_support.h"
#include "tests/testing/temp_table.h"

namespace engram::testing {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kRecord = 264;
constexpr uint64_t kSeed = 21;
constexpr uint64_t kSmallRows = 3000;
constexpr uint64_t kBigRows = 200000;
constexpr uint32_t kRowsPerBlock = 15;

std::string Tool(const std::string& name) { return std::string(ENGRAM_TOOLS_DIR) + "/" + name; }

class RemoteTableTest : public SharedRedisCluster {
 protected:
  static void SetUpTestSuite() {
    StartCluster();
    dir_ = std::make_unique<TempDir>();
    small_ = dir_->File("small.engram");
    big_ = dir_->File("big.engram");
    ASSERT_TRUE(WriteGeneratedTable(small_, kSmallRows, kRecord, kSeed).ok());
    ASSERT_TRUE(WriteGeneratedTable(big_, kBigRows, kRecord, kSeed).ok());
  }
  static void TearDownTestSuite() {
    SharedRedisCluster::TearDownTestSuite();
    dir_.reset();
  }

  // Loads `file` as NAME; the load's result.
  static Result<redis::LoadResult> Load(const std::string& file, const std::string& name) {
    ENGRAM_ASSIGN_OR_RETURN(redis::RedisUrl url, redis::ParseRedisUrl(cluster().Url(name)));
    ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<redis::BlockSource> source, redis::OpenFileBlockSource(file));
    return redis::LoadTable(url, *source, {});
  }

  static std::unique_ptr<Store> Open(const std::string& path, uint64_t cache_bytes = 256 << 10) {
    StoreOptions o;
    o.tables.push_back({path, "", 0});
    o.cache_bytes = cache_bytes;
    o.commit_cache_memory = false;
    auto s = Store::Open(o);
    EXPECT_TRUE(s.ok()) << "open " << path << ": " << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // The block key of `block` of the table NAME loaded from `file`.
  static std::string BlockKey(const std::string& file, const std::string& name, uint64_t block) {
    auto t = TableFile::Open(file);
    return redis::RemoteTableKeys(name, (*t)->fingerprint()).Block(block);
  }
  static uint16_t MasterOfKey(const std::string& key) { return *cluster().MasterOfSlot(redis::KeySlot(key)); }

  static std::vector<uint64_t> RowsOfBlocks(std::initializer_list<uint64_t> blocks) {
    std::vector<uint64_t> rows;
    for (uint64_t b : blocks) {
      for (uint64_t r = b * kRowsPerBlock; r < (b + 1) * kRowsPerBlock; ++r) rows.push_back(r);
    }
    return rows;
  }

  static inline std::unique_ptr<TempDir> dir_;
  static inline std::string small_, big_;
};

TEST_F(RemoteTableTest, ALoadedTableOpensByItsUrlAndServesItsRowsCachedLikeAFilesRows) {
  auto loaded = Load(small_, "small");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_FALSE(loaded->already_loaded);
  EXPECT_EQ(loaded->resumed_at, 0u);
  auto store = Open(cluster().Url("small"), 64 << 20);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->table_name(0), "small");
  EXPECT_EQ(store->row_count(0), kSmallRows);
  std::vector<uint64_t> ids(kSmallRows);
  for (uint64_t r = 0; r < kSmallRows; ++r) ids[r] = (r * 7919) % kSmallRows;
  std::vector<std::byte> dst(ids.size() * kRecord);
  GatherResult miss = store->Gather(0, ids, dst.data(), kRecord);
  ASSERT_TRUE(miss.status.ok()) << miss.status.ToString();
  EXPECT_EQ(miss.misses, kSmallRows);
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(std::memcmp(dst.data() + i * kRecord, ExpectedRow(kSeed, ids[i], kRecord).data(), kRecord), 0) << ids[i];
  }
  GatherResult hit = store->Gather(0, std::span(ids).first(24), dst.data(), kRecord);
  ASSERT_TRUE(hit.status.ok());
  EXPECT_EQ(hit.hits, 24u);
  const TableStats s = store->Stats(0);
  EXPECT_EQ(s.path, cluster().Url("small"));
  EXPECT_GT(s.readiness_wait_remote_nanoseconds, 0u);
  EXPECT_EQ(s.readiness_wait_disk_nanoseconds, 0u);
  EXPECT_EQ(s.io_reads, (kSmallRows + kRowsPerBlock - 1) / kRowsPerBlock);
  const std::string metrics = store->MetricsText();
  EXPECT_NE(metrics.find("engram_readiness_wait_remote_seconds_total{table=\"small\"}"), std::string::npos);
  for (int m = 0; m < 3; ++m) {
    const std::string series = "engram_remote_requests_total{table=\"small\",node=\"127.0.0.1:" +
                               std::to_string(cluster().ports()[m]) + "\"}";
    EXPECT_NE(metrics.find(series), std::string::npos) << series;
  }
}

TEST_F(RemoteTableTest, EveryRowOfA200000RowTableIsTheLocalFilesRow) {
  auto loaded = Load(big_, "big");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto remote = Open(cluster().Url("big"));
  auto local = Open(big_);
  ASSERT_TRUE(remote && local);
  constexpr size_t kBatch = 4096;
  std::vector<uint64_t> ids(kBatch);
  std::vector<std::byte> a(kBatch * kRecord), b(kBatch * kRecord);
  for (uint64_t first = 0; first < kBigRows; first += kBatch) {
    const size_t n = std::min<uint64_t>(kBatch, kBigRows - first);
    for (size_t i = 0; i < n; ++i) ids[i] = first + i;
    GatherResult ra = remote->Gather(0, std::span(ids).first(n), a.data(), kRecord);
    GatherResult rb = local->Gather(0, std::span(ids).first(n), b.data(), kRecord);
    ASSERT_TRUE(ra.status.ok() && rb.status.ok()) << ra.status.ToString() << rb.status.ToString();
    ASSERT_EQ(std::memcmp(a.data(), b.data(), n * kRecord), 0) << "rows " << first << "..";
  }
  EXPECT_EQ(remote->Stats(0).failed_rows, 0u);
}

TEST_F(RemoteTableTest, ASecondLoadOfTheSameTableWritesNothing) {
  ASSERT_TRUE(Load(small_, "again").ok());
  const std::string key = BlockKey(small_, "again", 5);
  ASSERT_TRUE(cluster().Command(MasterOfKey(key), {"DEL", key}).ok());
  auto second = Load(small_, "again");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->already_loaded);
  // Nothing was written: the deleted block is still missing.
  auto got = cluster().Command(MasterOfKey(key), {"EXISTS", key});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)->integer, 0);
}

TEST_F(RemoteTableTest, ALoadCutOffByKillNeverOpensAndTheNextLoadResumesIt) {
  const std::string url = cluster().Url("resume");
  const std::string progress_key = "engram:resume:" + redis::FingerprintHex((*TableFile::Open(big_))->fingerprint()) + ":loaded";
  ChildProcess load = ChildProcess::Start({Tool("engram-convert"), "--table", big_, "--to", url, "--window-blocks", "8"});
  ASSERT_GT(load.pid(), 0);
  uint64_t stored = 0;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (stored < 1000 && std::chrono::steady_clock::now() < deadline) {
    auto got = cluster().Command(MasterOfKey(progress_key), {"GET", progress_key});
    if (got.ok() && (*got)->type == REDIS_REPLY_STRING) stored = std::stoull(std::string((*got)->str, (*got)->len));
    std::this_thread::sleep_for(1ms);
  }
  load.Kill(SIGKILL);
  ASSERT_TRUE(load.Wait(10s));
  ASSERT_GE(stored, 1000u);
  ASSERT_LT(stored, (kBigRows + kRowsPerBlock - 1) / kRowsPerBlock) << "the load finished before it was killed";
  // Half loaded: no descriptor, so it does not open.
  auto half = redis::OpenRemoteTable(url);
  ASSERT_FALSE(half.ok());
  EXPECT_EQ(half.status().code(), StatusCode::kNotFound) << half.status().ToString();

  ChildProcess again = ChildProcess::Start({Tool("engram-convert"), "--table", big_, "--to", url}, /*merge_stderr=*/true);
  auto said = again.WaitForLineContaining("engram-convert: loaded", 120s);
  ASSERT_TRUE(said.has_value());
  EXPECT_NE(said->find("resumed a cut-off load at block"), std::string::npos) << *said;
  auto st = again.Wait(30s);
  ASSERT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0);

  auto store = Open(url);
  ASSERT_NE(store, nullptr);
  std::vector<uint64_t> ids(kBigRows);
  for (uint64_t r = 0; r < kBigRows; ++r) ids[r] = r;
  std::vector<std::byte> dst(kBigRows * kRecord);
  GatherResult r = store->Gather(0, ids, dst.data(), kRecord);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  for (uint64_t row = 0; row < kBigRows; row += 997) {
    ASSERT_EQ(std::memcmp(dst.data() + row * kRecord, ExpectedRow(kSeed, row, kRecord).data(), kRecord), 0) << row;
  }
}

TEST_F(RemoteTableTest, DamagedAndMissingBlocksFailOnlyTheirRowsAndAreNeverCached) {
  ASSERT_TRUE(Load(small_, "faults").ok());
  // Block 3: one byte flipped (fails its checksum); block 6: cut short;
  // block 9: deleted.
  const std::string corrupt = BlockKey(small_, "faults", 3), shrunk = BlockKey(small_, "faults", 6),
                    gone = BlockKey(small_, "faults", 9);
  auto value = cluster().Command(MasterOfKey(corrupt), {"GET", corrupt});
  ASSERT_TRUE(value.ok());
  std::string flipped((*value)->str, (*value)->len);
  flipped[100] ^= 0x01;
  ASSERT_TRUE(cluster().Command(MasterOfKey(corrupt), {"SET", corrupt, flipped}).ok());
  ASSERT_TRUE(cluster().Command(MasterOfKey(shrunk), {"SET", shrunk, std::string(100, 'x')}).ok());
  ASSERT_TRUE(cluster().Command(MasterOfKey(gone), {"DEL", gone}).ok());

  auto store = Open(cluster().Url("faults"), 64 << 20);
  ASSERT_NE(store, nullptr);
  struct Case {
    uint64_t bad_block;
    StatusCode code;
  };
  for (const Case& c : {Case{3, StatusCode::kCorruption}, Case{6, StatusCode::kCorruption}, Case{9, StatusCode::kNotFound}}) {
    const std::vector<uint64_t> ids = RowsOfBlocks({c.bad_block - 1, c.bad_block, c.bad_block + 1});
    std::vector<std::byte> dst(ids.size() * kRecord);
    for (int attempt = 0; attempt < 2; ++attempt) {  // the second finds nothing of the bad block cached
      GatherResult r = store->Gather(0, ids, dst.data(), kRecord);
      EXPECT_EQ(r.status.code(), c.code) << r.status.ToString();
      ASSERT_EQ(r.failed_positions.size(), kRowsPerBlock) << "block " << c.bad_block;
      for (size_t i = 0; i < ids.size(); ++i) {
        const bool in_bad_block = ids[i] / kRowsPerBlock == c.bad_block;
        EXPECT_EQ(r.RowWritten(i), !in_bad_block) << ids[i];
        if (!in_bad_block) {
          ASSERT_EQ(std::memcmp(dst.data() + i * kRecord, ExpectedRow(kSeed, ids[i], kRecord).data(), kRecord), 0);
        }
      }
      if (attempt == 1) {
        EXPECT_EQ(r.misses, kRowsPerBlock) << "only the bad block's rows miss again";
      }
    }
  }
  const TableStats s = store->Stats(0);
  EXPECT_EQ(s.checksum_failures, 2u);  // block 3, twice
  EXPECT_EQ(s.io_errors, 4u);          // blocks 6 and 9, twice each
  EXPECT_EQ(s.failed_rows, 6 * kRowsPerBlock);
}

TEST_F(RemoteTableTest, ReadAheadFetchesRowsFromTheCluster) {
  ASSERT_TRUE(Load(small_, "ahead").ok());
  auto store = Open(cluster().Url("ahead"), 64 << 20);
  ASSERT_NE(store, nullptr);
  std::vector<uint64_t> ids = {1, 500, 1999, 2999};
  ASSERT_TRUE(store->ReadAhead(0, ids).ok());
  store->WaitForReadAheads();
  std::vector<std::byte> dst(ids.size() * kRecord);
  GatherResult r = store->Gather(0, ids, dst.data(), kRecord);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.hits, ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(std::memcmp(dst.data() + i * kRecord, ExpectedRow(kSeed, ids[i], kRecord).data(), kRecord), 0);
  }
}

TEST_F(RemoteTableTest, ATableNeverLoadedIsNotFoundAndAnUnreachableClusterNamesTheNodesTried) {
  StoreOptions o;
  o.tables.push_back({cluster().Url("never-loaded"), "", 0});
  auto s = Store::Open(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound) << s.status().ToString();
  EXPECT_NE(s.status().message().find("engram-convert --to"), std::string::npos) << s.status().ToString();

  // Ports nothing listens on: bound, then released.
  std::vector<uint16_t> ports;
  const int fd1 = ::socket(AF_INET, SOCK_STREAM, 0), fd2 = ::socket(AF_INET, SOCK_STREAM, 0);
  for (int fd : {fd1, fd2}) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    ports.push_back(ntohs(a.sin_port));
  }
  ::close(fd1);
  ::close(fd2);
  const std::string a = "127.0.0.1:" + std::to_string(ports[0]), b = "127.0.0.1:" + std::to_string(ports[1]);
  StoreOptions unreachable;
  unreachable.tables.push_back({"redis://" + a + "," + b + "/t", "", 0});
  auto u = Store::Open(unreachable);
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), StatusCode::kUnavailable) << u.status().ToString();
  EXPECT_NE(u.status().message().find(a), std::string::npos) << u.status().ToString();
  EXPECT_NE(u.status().message().find(b), std::string::npos) << u.status().ToString();
}

TEST_F(RemoteTableTest, EngramServedServesAClusterTableToItsClientsThroughOneReader) {
  ASSERT_TRUE(Load(small_, "served").ok());
  const std::string socket = dir_->File("served.sock");
  ChildProcess service = ChildProcess::Start(
      {Tool("engram-served"), "--socket", socket, "--table", cluster().Url("served"), "--cache-bytes", "8MiB"},
      /*merge_stderr=*/true);
  ASSERT_TRUE(service.WaitForLine("engram-served: ready", 30s)) << "engram-served did not start";
  std::vector<std::unique_ptr<Store>> clients;
  for (int c = 0; c < 2; ++c) {
    StoreOptions o;
    o.node = socket;
    o.tables.push_back({cluster().Url("served"), "", 0});
    auto client = Store::Open(o);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    clients.push_back(std::move(client).value());
  }
  std::vector<uint64_t> ids;
  for (uint64_t r = 0; r < kSmallRows; r += 7) ids.push_back(r);
  std::vector<std::byte> dst(ids.size() * kRecord);
  for (auto& client : clients) {
    GatherResult r = client->Gather(0, ids, dst.data(), kRecord);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_EQ(std::memcmp(dst.data() + i * kRecord, ExpectedRow(kSeed, ids[i], kRecord).data(), kRecord), 0);
    }
  }
  // The second client's rows came from the service's cache: its rows were
  // fetched from the cluster once, for both.
  const TableStats s = clients[1]->Stats(0);
  std::set<uint64_t> blocks;
  for (uint64_t id : ids) blocks.insert(id / kRowsPerBlock);
  EXPECT_EQ(s.io_reads, blocks.size());
  EXPECT_EQ(s.path, cluster().Url("served"));
  service.Kill(SIGTERM);
  EXPECT_TRUE(service.Wait(30s));
}

// Last: it kills a master.
TEST_F(RemoteTableTest, GathersFromFourThreadsSurviveAKilledMasterWithoutReopening) {
  ASSERT_TRUE(Load(small_, "failover").ok());
  ASSERT_TRUE(cluster().WaitForReplicas().ok());
  auto store = Open(cluster().Url("failover"), 32 << 10);  // a small cache: most gathers miss
  ASSERT_NE(store, nullptr);
  const std::string key0 = BlockKey(small_, "failover", 0);
  const uint16_t victim = MasterOfKey(key0);
  std::atomic<bool> stop{false}, killed{false};
  std::atomic<uint64_t> wrong{0}, failed{0}, not_unavailable{0}, ok_after{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<uint64_t> ids(24);
      std::vector<std::byte> dst(ids.size() * kRecord);
      while (!stop.load()) {
        for (uint64_t& id : ids) id = rng() % kSmallRows;
        ids[0] = rng() % kRowsPerBlock;  // a row of block 0: on the victim's slots
        GatherResult r = store->Gather(0, ids, dst.data(), kRecord);
        if (!r.status.ok()) {
          ++failed;
          if (r.status.code() != StatusCode::kUnavailable) ++not_unavailable;
        } else if (killed.load()) {
          ++ok_after;
        }
        for (size_t i = 0; i < ids.size(); ++i) {
          if (r.RowWritten(i) &&
              std::memcmp(dst.data() + i * kRecord, ExpectedRow(kSeed, ids[i], kRecord).data(), kRecord) != 0) {
            ++wrong;
          }
        }
      }
    });
  }
  std::this_thread::sleep_for(200ms);
  ASSERT_TRUE(cluster().Kill(victim).ok());
  killed = true;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (ok_after.load() < 40 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(failed.load(), 0u);
  EXPECT_EQ(not_unavailable.load(), 0u);
  EXPECT_GE(ok_after.load(), 40u) << "gathers did not succeed again after the replica took over";
}

}  // namespace
}  // namespace engram::testing
