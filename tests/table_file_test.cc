// TableWriter -> file -> TableFile: round trips, corruption on disk, atomic
// writes. Tables are small (a few hundred KiB) to keep the suite fast.
#include "storage/table_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "engram/store.h"
#include "src/common/resident_memory.h"
#include "src/tablegen/row_generator.h"
#include "storage/byte_order.h"
#include "storage/table_writer.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

using testing::TempDir;

std::vector<std::byte> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

void WriteAll(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Writes `rows` generated rows, appending in uneven batches (1, 7, 100, ...)
// so batch boundaries fall everywhere relative to block boundaries.
Status WriteTable(const std::string& path, uint64_t rows, uint32_t record_bytes, uint64_t seed,
                  TableWriterOptions opt = {}) {
  opt.record_bytes = record_bytes;
  opt.sync = false;
  if (opt.metadata.empty()) opt.metadata = {{"seed", seed}};
  ENGRAM_ASSIGN_OR_RETURN(auto w, TableWriter::Create(path, opt));
  const uint64_t batches[] = {1, 7, 100, 3, 1000};
  uint64_t r = 0;
  for (size_t i = 0; r < rows; ++i) {
    uint64_t n = std::min(batches[i % 5], rows - r);
    std::vector<std::byte> buf(n * record_bytes);
    GenerateRows(seed, r, n, record_bytes, buf);
    ENGRAM_RETURN_IF_ERROR(w->AppendRecords(buf));
    r += n;
  }
  return w->Finish();
}

void ExpectAllRowsMatch(const TableFile& t, uint64_t seed) {
  std::vector<std::byte> got(t.record_bytes()), want(t.record_bytes());
  for (uint64_t r = 0; r < t.row_count(); ++r) {
    ASSERT_TRUE(t.ReadRow(r, got).ok()) << "row " << r;
    GenerateRow(seed, r, want);
    ASSERT_EQ(got, want) << "row " << r;
  }
}

class TableFileTest : public ::testing::Test {
 protected:
  TempDir dir_;
  std::string path_ = dir_.File("t.engram");
};

TEST_F(TableFileTest, RoundTripsEveryRowForSeveralRecordSizes) {
  for (uint32_t rb : {1u, 8u, 264u, 512u, 1000u, 4088u}) {
    SCOPED_TRACE("record_bytes " + std::to_string(rb));
    uint64_t rows = rb == 1 ? 9000 : 301;  // never a whole number of blocks
    ASSERT_TRUE(WriteTable(path_, rows, rb, rb * 3).ok());
    auto t = TableFile::Open(path_);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ((*t)->row_count(), rows);
    EXPECT_EQ((*t)->record_bytes(), rb);
    EXPECT_EQ((*t)->rows_per_block(), RowsPerBlock(rb));
    ExpectAllRowsMatch(**t, rb * 3);
    EXPECT_TRUE((*t)->VerifyAll().ok());
  }
}

TEST_F(TableFileTest, SmallWriteBufferGivesTheSameFile) {
  TableWriterOptions big, small;
  big.checksum_salt = small.checksum_salt = 77;
  small.buffer_bytes = 1;  // one block at a time
  ASSERT_TRUE(WriteTable(path_, 500, 264, 1, big).ok());
  std::string other = dir_.File("small.engram");
  ASSERT_TRUE(WriteTable(other, 500, 264, 1, small).ok());
  EXPECT_EQ(ReadAll(path_), ReadAll(other));
}

TEST_F(TableFileTest, BlocksAreAlignedAndZeroPadded) {
  ASSERT_TRUE(WriteTable(path_, 31, 264, 5).ok());
  auto t = TableFile::Open(path_);
  ASSERT_TRUE(t.ok());
  std::vector<std::byte> bytes = ReadAll(path_);
  ASSERT_EQ(bytes.size() % 4096, 0u);
  // Block 2 holds one row (30 = 2 * 15); the rest of its record area is zero.
  uint64_t off = (*t)->BlockOffset(2);
  for (size_t i = 264; i < kBlockRecordArea; ++i) ASSERT_EQ(bytes[off + i], std::byte{0}) << i;
  std::vector<std::byte> block(bytes.begin() + off, bytes.begin() + off + 4096);
  EXPECT_TRUE((*t)->VerifyBlock(2, block).ok());
  EXPECT_FALSE((*t)->VerifyBlock(1, block).ok());
}

TEST_F(TableFileTest, MetadataRoundTrips) {
  TableWriterOptions opt;
  opt.metadata = {{"dtype", "F8_E4M3"}, {"shape", {31, 264}}, {"name", "engram.layer1"}};
  ASSERT_TRUE(WriteTable(path_, 31, 264, 5, opt).ok());
  auto t = TableFile::Open(path_);
  ASSERT_TRUE(t.ok());
  auto parsed = (*t)->ParseMetadata();
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, opt.metadata);
  static constexpr std::string_view kSome[] = {"name", "absent"};
  auto some = (*t)->MetadataMembers(kSome);
  ASSERT_TRUE(some.ok()) << some.status().ToString();
  EXPECT_EQ(*some, (nlohmann::json{{"name", "engram.layer1"}}));
}

TEST_F(TableFileTest, FingerprintSurvivesACopyAndChangesWithARewrite) {
  TableWriterOptions opt;
  ASSERT_TRUE(WriteTable(path_, 31, 264, 5, opt).ok());
  auto first = TableFile::Open(path_);
  ASSERT_TRUE(first.ok());
  const std::string copy = dir_.File("copy.engram");
  std::filesystem::copy_file(path_, copy);
  auto copied = TableFile::Open(copy);
  ASSERT_TRUE(copied.ok());
  EXPECT_EQ((*copied)->fingerprint(), (*first)->fingerprint());
  // The same rows written again get a new random salt, hence a new header.
  // (Once closed: a process never writes over a table it has open.)
  const uint64_t first_fingerprint = (*first)->fingerprint();
  first->reset();
  ASSERT_TRUE(WriteTable(path_, 31, 264, 5, opt).ok());
  auto rewritten = TableFile::Open(path_);
  ASSERT_TRUE(rewritten.ok());
  EXPECT_NE((*rewritten)->fingerprint(), first_fingerprint);
  EXPECT_NE((*rewritten)->fingerprint(), 0u);
}

TEST_F(TableFileTest, TableWithoutRowsIsNeitherWrittenNorOpenedNorServed) {
  // The writer refuses, and leaves neither the table nor its temporary file.
  Status w = WriteTable(path_, 0, 264, 5);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.code(), StatusCode::kInvalidArgument) << w.ToString();
  EXPECT_NE(w.message().find("a table needs at least one row"), std::string::npos) << w.ToString();
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path()));
  // A zero-row file made by a writer without the rule: a one-row table with
  // its data block removed and a self-consistent header.
  ASSERT_TRUE(WriteTable(path_, 1, 264, 5).ok());
  std::vector<std::byte> one = ReadAll(path_);
  std::array<std::byte, kTableBlockSize> block;
  std::memcpy(block.data(), one.data(), kTableBlockSize);
  auto h = DecodeTableHeader(block, one.size());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  TableHeader zero = *h;
  zero.row_count = 0;
  zero.block_count = 0;
  zero.data_bytes = 0;
  zero.metadata_offset = kTableDataOffset;
  zero.file_bytes = h->file_bytes - kTableBlockSize;
  EncodeTableHeader(zero, block);
  std::vector<std::byte> file(block.begin(), block.end());
  file.insert(file.end(), one.begin() + static_cast<std::ptrdiff_t>(h->metadata_offset), one.end());
  WriteAll(path_, file);
  auto t = TableFile::Open(path_);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << t.status().ToString();
  EXPECT_NE(t.status().message().find("a table needs at least one row"), std::string::npos) << t.status().ToString();
  StoreOptions o;
  o.tables.push_back({path_, "", 0});
  o.cache_bytes = 1u << 20;
  o.io_backend = "pread";
  auto store = Store::Open(o);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument) << store.status().ToString();
  EXPECT_NE(store.status().message().find("a table needs at least one row"), std::string::npos)
      << store.status().ToString();
}

TEST_F(TableFileTest, ReadRowChecksRangeAndBufferSize) {
  ASSERT_TRUE(WriteTable(path_, 20, 264, 5).ok());
  auto t = TableFile::Open(path_);
  ASSERT_TRUE(t.ok());
  std::vector<std::byte> row(264), wrong(263);
  Status s = (*t)->ReadRow(20, row);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("row 20"), std::string::npos);
  EXPECT_EQ((*t)->ReadRow(0, wrong).code(), StatusCode::kInvalidArgument);
}

TEST_F(TableFileTest, FlippedDataByteIsFoundByVerifyAllAndReadRow) {
  ASSERT_TRUE(WriteTable(path_, 200, 264, 9).ok());
  uint64_t bad_block = 5;
  {
    auto t = TableFile::Open(path_);
    ASSERT_TRUE(t.ok());
    std::vector<std::byte> bytes = ReadAll(path_);
    bytes[(*t)->BlockOffset(bad_block) + 100] ^= std::byte{0x04};
    WriteAll(path_, bytes);
  }
  auto t = TableFile::Open(path_);  // data is not read at open
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  uint64_t progress_calls = 0;
  Status all = (*t)->VerifyAll([&](uint64_t, uint64_t) { ++progress_calls; });
  EXPECT_EQ(all.code(), StatusCode::kCorruption);
  EXPECT_NE(all.message().find("block 5 "), std::string::npos) << all.ToString();
  EXPECT_NE(all.message().find("rows 75..89"), std::string::npos) << all.ToString();
  std::vector<std::byte> row(264), want(264);
  EXPECT_EQ((*t)->ReadRow(75, row).code(), StatusCode::kCorruption);
  EXPECT_EQ((*t)->ReadRow(89, row).code(), StatusCode::kCorruption);
  ASSERT_TRUE((*t)->ReadRow(90, row).ok());  // the next block is intact
  GenerateRow(9, 90, want);
  EXPECT_EQ(row, want);
}

TEST_F(TableFileTest, FlippedTrailerOrPaddingByteIsCorruption) {
  ASSERT_TRUE(WriteTable(path_, 40, 264, 9).ok());
  for (size_t in_block : {size_t{3970}, size_t{4090}}) {  // padding, trailer
    auto t = TableFile::Open(path_);
    ASSERT_TRUE(t.ok());
    std::vector<std::byte> bytes = ReadAll(path_);
    bytes[(*t)->BlockOffset(1) + in_block] ^= std::byte{0x80};
    std::string copy = dir_.File("copy.engram");
    WriteAll(copy, bytes);
    auto c = TableFile::Open(copy);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ((*c)->VerifyAll().code(), StatusCode::kCorruption) << in_block;
  }
}

TEST_F(TableFileTest, TruncatedOrExtendedFileDoesNotOpen) {
  ASSERT_TRUE(WriteTable(path_, 100, 264, 9).ok());
  std::vector<std::byte> bytes = ReadAll(path_);
  for (size_t keep : {size_t{0}, size_t{100}, size_t{4096}, bytes.size() - 4096, bytes.size() - 1}) {
    std::string p = dir_.File("trunc.engram");
    WriteAll(p, std::vector<std::byte>(bytes.begin(), bytes.begin() + keep));
    auto t = TableFile::Open(p);
    ASSERT_FALSE(t.ok()) << keep;
    EXPECT_EQ(t.status().code(), StatusCode::kCorruption) << keep;
    EXPECT_NE(t.status().message().find(p), std::string::npos) << "error names the file";
  }
  std::vector<std::byte> longer = bytes;
  longer.resize(bytes.size() + 4096);
  WriteAll(dir_.File("long.engram"), longer);
  EXPECT_EQ(TableFile::Open(dir_.File("long.engram")).status().code(), StatusCode::kCorruption);
}

TEST_F(TableFileTest, CorruptMetadataDoesNotOpen) {
  ASSERT_TRUE(WriteTable(path_, 10, 264, 9).ok());
  auto t = TableFile::Open(path_);
  ASSERT_TRUE(t.ok());
  uint64_t meta = (*t)->header().metadata_offset;
  std::vector<std::byte> bytes = ReadAll(path_);
  bytes[meta + 2] ^= std::byte{0x01};
  WriteAll(dir_.File("m.engram"), bytes);
  auto m = TableFile::Open(dir_.File("m.engram"));
  EXPECT_EQ(m.status().code(), StatusCode::kCorruption);
  EXPECT_NE(m.status().message().find("metadata"), std::string::npos);
}

TEST_F(TableFileTest, EachHeaderFieldCorruptedOnDiskIsRejected) {
  ASSERT_TRUE(WriteTable(path_, 100, 264, 9).ok());
  std::vector<std::byte> clean = ReadAll(path_);
  // Field offsets from FORMAT.md; each is bumped alone (header checksum left
  // stale, and separately re-sealed, so both layers of defence are hit).
  const size_t offsets[] = {0, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 248};
  for (size_t off : offsets) {
    for (bool reseal : {false, true}) {
      std::vector<std::byte> bytes = clean;
      bytes[off] ^= std::byte{0x01};
      if (reseal && off != 248) StoreLe64(bytes.data() + 248, XXH3_64bits(bytes.data(), 248));
      std::string p = dir_.File("h.engram");
      WriteAll(p, bytes);
      auto t = TableFile::Open(p);
      if (reseal && (off == 96 || off == 16)) {
        // A consistent header with another salt or record size opens, but
        // both are mixed into every block's checksum seed: no block verifies.
        ASSERT_TRUE(t.ok()) << off;
        EXPECT_EQ((*t)->VerifyAll().code(), StatusCode::kCorruption) << off;
        continue;
      }
      if (reseal && off == 32) {
        // 100 -> 101 rows still needs 7 blocks: the one edit v1 cannot
        // detect once the header checksum is forged (FORMAT.md). Reading
        // the extra row must still be safe.
        ASSERT_TRUE(t.ok());
        std::vector<std::byte> row(264);
        EXPECT_TRUE((*t)->ReadRow(100, row).ok());
        continue;
      }
      ASSERT_FALSE(t.ok()) << "offset " << off << " reseal " << reseal;
      EXPECT_NE(t.status().code(), StatusCode::kOk);
    }
  }
}

TEST_F(TableFileTest, HashLayoutMustMatchTheRowCount) {
  TableWriterOptions opt;
  opt.metadata = {{"hash_layout",
                   {{"layer_id", 0}, {"orders", {2}}, {"heads", 2}, {"pad_id", 0}, {"multipliers", {"3", "5"}},
                    {"primes", {{7, 11}}}, {"offsets", {{0, 7}}}, {"total_rows", 18}}}};
  ASSERT_TRUE(WriteTable(path_, 18, 16, 1, opt).ok());
  EXPECT_TRUE(TableFile::Open(path_).ok());
  ASSERT_TRUE(WriteTable(path_, 17, 16, 1, opt).ok());  // the writer does not judge metadata
  auto t = TableFile::Open(path_);
  EXPECT_EQ(t.status().code(), StatusCode::kCorruption);
  EXPECT_NE(t.status().message().find("total_rows"), std::string::npos) << t.status().ToString();
}

TEST_F(TableFileTest, NonexistentFileIsNotFound) {
  EXPECT_EQ(TableFile::Open(dir_.File("nope.engram")).status().code(), StatusCode::kNotFound);
}

TEST_F(TableFileTest, NotATableIsCorruption) {
  WriteAll(path_, std::vector<std::byte>(8192, std::byte{'a'}));
  auto t = TableFile::Open(path_);
  EXPECT_EQ(t.status().code(), StatusCode::kCorruption);
  EXPECT_NE(t.status().message().find("magic"), std::string::npos);
}

// A large metadata section costs about its text, not a parsed tree (which
// takes 5-13x the text in nlohmann::json nodes): opening a table with ~27 MB
// of metadata grows RSS by at most 3x that, and the table still opens.
TEST_F(TableFileTest, LargeMetadataCostsASmallMultipleOfItsSize) {
  // Built in a child: the JSON tree that writes it must leave no freed heap
  // here for the open to reuse unseen.
  ASSERT_TRUE(testing::RunInChild([&] {
    nlohmann::json shards = nlohmann::json::array();
    for (uint64_t i = 0; i < 300000; ++i) {
      shards.push_back({{"name", "model.layers." + std::to_string(i) + ".engram.weight"},
                        {"shape", {1024, 264}},
                        {"offsets", {i * 1000, i * 1000 + 999}}});
    }
    TableWriterOptions opt;
    opt.metadata = {{"seed", 7}, {"source", {{"shards", std::move(shards)}}}};
    return WriteTable(path_, 100, 264, 7, std::move(opt)).ok();
  }));
  const uint64_t file_bytes = std::filesystem::file_size(path_);
  ASSERT_GT(file_bytes, uint64_t{20} << 20);
  const uint64_t before = testing::ResidentBytes();
  auto t = TableFile::Open(path_);
  const uint64_t after = testing::ResidentBytes();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_GT((*t)->metadata_text().size(), file_bytes - (64u << 10));
  ExpectAllRowsMatch(**t, 7);
  if (testing::kUnderSanitizer) GTEST_SKIP() << "RSS is not comparable under sanitizers (redzones, quarantine)";
  ASSERT_GT(before, 0u) << "/proc/self/statm unreadable";
  EXPECT_LE(after - std::min(after, before), 3 * file_bytes)
      << "opening a table with " << file_bytes << " bytes of metadata grew RSS from " << before << " to " << after;
}

}  // namespace
}  // namespace engram
