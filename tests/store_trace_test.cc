// The store's gather trace (StoreOptions::trace_path): it never overwrites a
// file the store reads, never truncates an existing file while the store
// runs, and a trace that cannot be written is reported (log and metrics),
// never silently lost.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engram/store.h"
#include "src/metrics/http_endpoint.h"
#include "storage/reference_writer.h"
#include "storage/table_converter.h"
#include "tests/testing/captured_log.h"
#include "tests/testing/safetensors_file.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

constexpr uint32_t kRecord = 264;
constexpr uint64_t kRows = 8192;
constexpr uint64_t kSeed = 7;

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}


// The value of a sample line "NAME VALUE" in a metrics text, or -1.
double Sample(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

class StoreTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    table_ = dir_.File("layer1.engram");
    ASSERT_TRUE(testing::WriteGeneratedTable(table_, kRows, kRecord, kSeed).ok());
    table_bytes_ = FileBytes(table_);
    ASSERT_FALSE(table_bytes_.empty());
  }

  StoreOptions Options(const std::string& trace_path) const {
    StoreOptions o;
    o.tables.push_back({table_, "", 0});
    o.cache_bytes = 1u << 20;
    o.io_backend = "pread";
    o.trace_path = trace_path;
    return o;
  }

  // Open with this trace path fails with InvalidArgument naming `why`, and
  // the table is byte for byte what it was.
  void ExpectRefused(const std::string& trace_path, const std::string& why) {
    auto store = Store::Open(Options(trace_path));
    ASSERT_FALSE(store.ok()) << "trace_path " << trace_path << " was accepted";
    EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument) << store.status().ToString();
    EXPECT_NE(store.status().message().find(why), std::string::npos) << store.status().ToString();
    EXPECT_EQ(FileBytes(table_), table_bytes_) << "the table was changed";
  }

  testing::TempDir dir_;
  std::string table_;
  std::string table_bytes_;
};

TEST_F(StoreTraceTest, TracePathThatIsTheTableIsRefusedAndTheTableKeepsItsBytes) {
  ExpectRefused(table_, "is the same file as " + table_);
  // Still a table that opens and serves rows.
  auto store = Store::Open(Options(""));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::vector<std::byte> row(kRecord);
  ASSERT_TRUE((*store)->Gather(0, std::vector<uint64_t>{5}, row.data(), kRecord).status.ok());
  EXPECT_EQ(row, testing::ExpectedRow(kSeed, 5, kRecord));
}

TEST_F(StoreTraceTest, TracePathThatIsAHardLinkToTheTableIsRefused) {
  const std::string link = dir_.File("other-name.txt");
  ASSERT_EQ(::link(table_.c_str(), link.c_str()), 0);
  ExpectRefused(link, "is the same file as " + table_);
}

TEST_F(StoreTraceTest, TracePathThatIsASymlinkToTheTableIsRefused) {
  const std::string link = dir_.File("trace.txt");
  ASSERT_EQ(::symlink(table_.c_str(), link.c_str()), 0);
  ExpectRefused(link, "is the same file as " + table_);
}

TEST_F(StoreTraceTest, TracePathThatIsAShardOfAReferenceTableIsRefused) {
  const std::string shard = dir_.File("model-00001.safetensors");
  testing::WriteFile(shard, testing::EngramShard(0, 300));
  const std::string shard_bytes = FileBytes(shard);
  auto spec = SafetensorsConvertSpec({shard}, "engram.weight", "engram.scale");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ConvertOptions co;
  co.writer.sync = false;
  const std::string reference = dir_.File("ref.engram");
  ASSERT_TRUE(WriteReferenceTable(*spec, reference, co).ok());
  StoreOptions o = Options(shard);
  o.tables = {{reference, "", 0}};
  auto store = Store::Open(o);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument) << store.status().ToString();
  EXPECT_NE(store.status().message().find("is the same file as " + shard), std::string::npos)
      << store.status().ToString();
  EXPECT_EQ(FileBytes(shard), shard_bytes);
}

TEST_F(StoreTraceTest, TracePathThatIsADirectoryIsRefused) {
  ExpectRefused(dir_.path(), "neither a regular file nor a character device");
}

TEST_F(StoreTraceTest, ExistingFileIsReplacedOnlyByTheCompleteTraceAtClose) {
  const std::string trace = dir_.File("trace.txt");
  testing::WriteFile(trace, "an earlier trace\n");
  {
    auto store = Store::Open(Options(trace));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    std::vector<std::byte> dst(2 * kRecord);
    ASSERT_TRUE((*store)->Gather(0, std::vector<uint64_t>{4, 2}, dst.data(), kRecord).status.ok());
    // Not truncated while the store runs.
    EXPECT_EQ(FileBytes(trace), "an earlier trace\n");
  }
  EXPECT_EQ(FileBytes(trace), "0 4 2\n");
  // No temporary is left beside it.
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

TEST_F(StoreTraceTest, StoreThatFailsToOpenLeavesAnExistingTraceAsItWas) {
  const std::string trace = dir_.File("trace.txt");
  testing::WriteFile(trace, "an earlier trace\n");
  // The metrics port is taken: Open fails after the trace was opened.
  auto taken = MetricsHttpEndpoint::Start(HttpEndpointOptions{.port = 0}, [] { return std::string(); });
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  StoreOptions o = Options(trace);
  o.metrics_listen = "127.0.0.1:" + std::to_string((*taken)->port());
  auto store = Store::Open(o);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(FileBytes(trace), "an earlier trace\n");
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

TEST_F(StoreTraceTest, TraceWriteErrorsOnDevFullAreLoggedAndCounted) {
  struct stat st {};
  if (::stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode)) GTEST_SKIP() << "no /dev/full";
  testing::CapturedLog log;
  {
    auto store = Store::Open(Options("/dev/full"));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    // 4096 row IDs a gather make a line of ~20 KiB: the trace's buffer is
    // written out (and fails) within a few gathers.
    std::vector<uint64_t> ids(4096);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = i;
    std::vector<std::byte> dst(ids.size() * kRecord);
    for (int i = 0; i < 8; ++i) {
      ASSERT_TRUE((*store)->Gather(0, ids, dst.data(), kRecord).status.ok()) << "a trace error failed a gather";
    }
    const std::string metrics = (*store)->MetricsText();
    EXPECT_GT(Sample(metrics, "engram_store_trace_gathers_total{outcome=\"lost\"}"), 0) << metrics;
    EXPECT_EQ(Sample(metrics, "engram_store_trace_gathers_total{outcome=\"written\"}"), 0) << metrics;
    const std::string during = log.text();
    EXPECT_NE(during.find("/dev/full"), std::string::npos) << during;
    EXPECT_NE(during.find("No space left on device"), std::string::npos) << during;
  }
  // Shutdown says the trace was not saved.
  const std::string after = log.text();
  EXPECT_NE(after.find("the gather trace was not saved"), std::string::npos) << after;
}

TEST_F(StoreTraceTest, TraceToDevNullIsWrittenWithoutErrors) {
  testing::CapturedLog log;
  {
    auto store = Store::Open(Options("/dev/null"));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    std::vector<std::byte> dst(kRecord);
    ASSERT_TRUE((*store)->Gather(0, std::vector<uint64_t>{1}, dst.data(), kRecord).status.ok());
  }
  EXPECT_EQ(log.text().find("gather trace"), std::string::npos) << log.text();
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null was replaced";
}

}  // namespace
}  // namespace engram
