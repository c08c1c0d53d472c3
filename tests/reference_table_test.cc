// Reference tables (engram-convert --in-place): rows served from the
// safetensors shards where they lie, verified per 4 KiB block. Shards are
// assembled byte by byte (tests/testing/safetensors_file.h); every row is
// compared with the table converted from the same shards, through TableFile
// and through the Store on every backend.
#include <fcntl.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <filesystem>
#include <string>
#include <vector>

#include "engram/store.h"
#include "storage/file_util.h"
#include "storage/reference_writer.h"
#include "storage/table_converter.h"
#include "storage/table_file.h"
#include "tests/io_test_util.h"
#include "tests/testing/safetensors_file.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

using namespace engram::testing;

// Rows per shard: a 1-row shard, and shards whose rows straddle many 4 KiB
// boundaries (the tensors start right after an unaligned JSON header).
const std::vector<uint64_t> kShardRows = {700, 1, 950};
constexpr uint64_t kRows = 1651;

struct Dtypes {
  std::string weight, scale;
  friend void PrintTo(const Dtypes& d, std::ostream* os) { *os << d.weight << "+" << (d.scale.empty() ? "none" : d.scale); }
};

class ReferenceTableTest : public ::testing::TestWithParam<Dtypes> {
 protected:
  void SetUp() override {
    uint64_t first = 0;
    for (size_t i = 0; i < kShardRows.size(); ++i) {
      shards_.push_back(dir_.File("model-0000" + std::to_string(i) + ".safetensors"));
      WriteFile(shards_.back(), EngramShard(first, kShardRows[i], GetParam().weight, GetParam().scale));
      first += kShardRows[i];
    }
    ConvertOptions o;
    o.writer.sync = false;
    auto spec = Spec();
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    ASSERT_TRUE(ConvertToTable(*spec, converted_, o).ok());
    auto h = WriteReferenceTable(*spec, reference_, o);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
  }

  Result<ConvertSpec> Spec() const { return SafetensorsConvertSpec(shards_, "engram.weight", ScaleName()); }
  std::string ScaleName() const { return GetParam().scale.empty() ? "" : "engram.scale"; }
  uint32_t Record() const { return GetParam().scale.empty() ? 256 : 264; }

  std::vector<std::byte> Want(uint64_t row) const {
    std::string s = Rows(1, row, 1, 256) + (GetParam().scale.empty() ? "" : Rows(2, row, 1, 8));
    std::vector<std::byte> v(s.size());
    std::memcpy(v.data(), s.data(), s.size());
    return v;
  }

  // Overwrites one byte of a file and puts its modification time back, as a
  // bit flip on the device would leave it.
  static void FlipByteKeepingMtime(const std::string& path, uint64_t offset) {
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    unsigned char b = 0;
    ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(offset)), 1);
    b ^= 0x5a;
    ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(offset)), 1);
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    ASSERT_EQ(::futimens(fd, times), 0);
    ::close(fd);
  }

  // File offset of `row`'s first weight byte in its shard.
  uint64_t WeightOffset(size_t shard, uint64_t local_row) const {
    auto spec = Spec();
    return spec->weight[shard].tensor.data_offset + local_row * 256;
  }

  StoreOptions Options(const std::string& backend, double scale_share = 0.25) const {
    StoreOptions o;
    o.tables.push_back({reference_, "ref", 0});
    o.cache_bytes = 1u << 20;
    o.io_backend = backend;
    o.in_place_scale_share = scale_share;
    return o;
  }

  static std::vector<std::string> Backends() {
    std::vector<std::string> b{"pread", "mmap"};
    if (io::testing::IoUringAvailable()) b.insert(b.begin() + 1, "io_uring");
    return b;
  }

  TempDir dir_;
  std::vector<std::string> shards_;
  std::string converted_ = dir_.File("converted.engram");
  std::string reference_ = dir_.File("reference.engram");
};

INSTANTIATE_TEST_SUITE_P(Dtypes, ReferenceTableTest,
                         ::testing::Values(Dtypes{"F8_E4M3", "F8_E8M0"}, Dtypes{"U8", "F32"}, Dtypes{"F8_E4M3", ""}),
                         [](const auto& info) {
                           return info.param.weight + "_" + (info.param.scale.empty() ? "noscale" : info.param.scale);
                         });

TEST_P(ReferenceTableTest, RowsAreBitExactWithTheConvertedTable) {
  auto ref = TableFile::Open(reference_);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto conv = TableFile::Open(converted_);
  ASSERT_TRUE(conv.ok());
  ASSERT_TRUE((*ref)->is_reference());
  ASSERT_EQ((*ref)->row_count(), kRows);
  ASSERT_EQ((*ref)->record_bytes(), Record());
  std::vector<std::byte> a(Record()), b(Record());
  for (uint64_t r = 0; r < kRows; ++r) {
    ASSERT_TRUE((*ref)->ReadRow(r, a).ok()) << r;
    ASSERT_TRUE((*conv)->ReadRow(r, b).ok()) << r;
    ASSERT_EQ(a, b) << "row " << r;
    ASSERT_EQ(a, Want(r)) << "row " << r;
  }
  EXPECT_TRUE((*ref)->VerifyAll().ok());
  EXPECT_EQ((*ref)->ReadRow(kRows, a).code(), StatusCode::kOutOfRange);
}

TEST_P(ReferenceTableTest, ChecksumsCostAboutTwoTenthsOfAPercentOfTheShards) {
  uint64_t shards = 0;
  for (const auto& s : shards_) shards += std::filesystem::file_size(s);
  auto t = TableFile::Open(reference_);
  ASSERT_TRUE(t.ok());
  // One 8-byte checksum per 4 KiB block touched, plus at most two partial
  // blocks per tensor; the rest of the file is one header and one metadata
  // block (see the benchmark for the whole file against large shards).
  const TableHeader& h = (*t)->header();
  EXPECT_LE(h.block_count, shards / 4096 + 2 * 2 * kShardRows.size());
  EXPECT_EQ(h.file_bytes, 4096 + h.data_bytes + 4096);
  EXPECT_EQ(std::filesystem::file_size(reference_), h.file_bytes);
}

TEST_P(ReferenceTableTest, EveryBackendServesRowsBitExactWithScalesHeldOrRead) {
  auto conv = TableFile::Open(converted_);
  ASSERT_TRUE(conv.ok());
  std::vector<uint64_t> ids;
  for (uint64_t r = 0; r < kRows; r += 3) ids.push_back(r);
  ids.push_back(700);  // the one-row shard
  ids.push_back(0);    // a duplicate
  for (const std::string& backend : Backends()) {
    for (double share : {0.25, 0.0}) {
      SCOPED_TRACE(backend + " scale share " + std::to_string(share));
      auto store = Store::Open(Options(backend, share));
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      std::vector<std::byte> dst(ids.size() * Record());
      for (int pass = 0; pass < 2; ++pass) {  // misses, then hits
        GatherResult r = (*store)->Gather(0, ids, dst.data(), Record());
        ASSERT_TRUE(r.status.ok()) << r.status.ToString();
        std::vector<std::byte> want(Record());
        for (size_t i = 0; i < ids.size(); ++i) {
          ASSERT_TRUE((*conv)->ReadRow(ids[i], want).ok());
          ASSERT_EQ(std::memcmp(dst.data() + i * Record(), want.data(), Record()), 0) << "row " << ids[i];
        }
        if (pass == 0) {
          EXPECT_GT(r.misses, 0u);
        }
      }
      TableStats s = (*store)->Stats(0);
      EXPECT_EQ(s.checksum_failures, 0u);
      EXPECT_GT(s.io_reads, 0u);
      EXPECT_EQ(s.io_bytes, s.io_reads * 4096);
      // Read-ahead lands verified rows as hits.
      std::vector<uint64_t> ahead{1, 2, 4};
      ASSERT_TRUE((*store)->ReadAhead(0, ahead).ok());
      (*store)->WaitForReadAheads();
      std::vector<std::byte> out(ahead.size() * Record());
      GatherResult r = (*store)->Gather(0, ahead, out.data(), Record());
      ASSERT_TRUE(r.status.ok());
      EXPECT_EQ(r.hits, ahead.size());
      for (size_t i = 0; i < ahead.size(); ++i) {
        EXPECT_EQ(std::memcmp(out.data() + i * Record(), Want(ahead[i]).data(), Record()), 0);
      }
    }
  }
}

TEST_P(ReferenceTableTest, ConcurrentGathersAndReadAheadFromSeveralThreadsAreBitExact) {
  for (double share : {0.25, 0.0}) {
    SCOPED_TRACE(share);
    auto store = Store::Open(Options("auto", share));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    std::atomic<int> wrong{0}, failed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(t + 1);
        std::vector<uint64_t> ids(32);
        std::vector<std::byte> dst(ids.size() * Record());
        for (int g = 0; g < 200; ++g) {
          for (auto& id : ids) id = rng() % kRows;
          if (g % 7 == 0) (void)(*store)->ReadAhead(0, std::span(ids).first(8));
          GatherResult r = (*store)->Gather(0, ids, dst.data(), Record());
          if (!r.status.ok()) ++failed;
          for (size_t i = 0; i < ids.size(); ++i) {
            if (std::memcmp(dst.data() + i * Record(), Want(ids[i]).data(), Record()) != 0) ++wrong;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    (*store)->WaitForReadAheads();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(failed.load(), 0);
    EXPECT_EQ((*store)->Stats(0).checksum_failures, 0u);
  }
}

TEST_P(ReferenceTableTest, CorruptShardByteIsCaughtByVerifyAndByAGatherWithoutPoisoningTheCache) {
  // Row 800 is local row 99 of shard 2.
  FlipByteKeepingMtime(shards_[2], WeightOffset(2, 99) + 17);
  auto t = TableFile::Open(reference_);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Status v = (*t)->VerifyAll();
  EXPECT_EQ(v.code(), StatusCode::kCorruption);
  EXPECT_NE(v.message().find("model-00002.safetensors"), std::string::npos) << v.ToString();
  std::vector<std::byte> rec(Record());
  EXPECT_EQ((*t)->ReadRow(800, rec).code(), StatusCode::kCorruption);
  for (const std::string& backend : Backends()) {
    SCOPED_TRACE(backend);
    auto store = Store::Open(Options(backend));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    std::vector<uint64_t> ids{5, 800, 1500};
    std::vector<std::byte> dst(ids.size() * Record());
    for (int pass = 0; pass < 2; ++pass) {  // the bad row is never cached: it fails again
      GatherResult r = (*store)->Gather(0, ids, dst.data(), Record());
      EXPECT_EQ(r.status.code(), StatusCode::kCorruption) << r.status.ToString();
      EXPECT_EQ(r.failed_positions, (std::vector<size_t>{1}));
      EXPECT_EQ(std::memcmp(dst.data(), Want(5).data(), Record()), 0);
      EXPECT_EQ(std::memcmp(dst.data() + 2 * Record(), Want(1500).data(), Record()), 0);
    }
    EXPECT_GE((*store)->Stats(0).checksum_failures, 2u);
    EXPECT_EQ((*store)->Stats(0).failed_rows, 2u);
  }
}

TEST_P(ReferenceTableTest, CorruptScaleBlockFailsOnlyItsRowsWhenScalesAreHeldInMemory) {
  if (GetParam().scale.empty()) GTEST_SKIP() << "no scales";
  auto spec = Spec();
  // Scale of shard 0, local row 10.
  FlipByteKeepingMtime(shards_[0], spec->scale[0].tensor.data_offset + 10 * 8 + 3);
  auto store = Store::Open(Options("pread", 1.0));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::vector<uint64_t> ids{10, 600, 1000};
  std::vector<std::byte> dst(ids.size() * Record());
  GatherResult r = (*store)->Gather(0, ids, dst.data(), Record());
  EXPECT_EQ(r.status.code(), StatusCode::kCorruption) << r.status.ToString();
  EXPECT_EQ(r.failed_positions, (std::vector<size_t>{0}));
  EXPECT_EQ(std::memcmp(dst.data() + 2 * Record(), Want(1000).data(), Record()), 0);
}

TEST_P(ReferenceTableTest, ReplacedOrTruncatedShardIsRefusedAtOpen) {
  const std::string keep = dir_.File("keep");
  std::filesystem::copy_file(shards_[1], keep);
  // Replaced by another shard's bytes of the same layout (size differs).
  WriteFile(shards_[1], EngramShard(0, 2, GetParam().weight, GetParam().scale));
  auto t = TableFile::Open(reference_);
  EXPECT_EQ(t.status().code(), StatusCode::kCorruption);
  EXPECT_NE(t.status().message().find("model-00001.safetensors"), std::string::npos) << t.status().ToString();
  EXPECT_NE(t.status().message().find("not the file this reference table was written for"), std::string::npos);
  EXPECT_FALSE(Store::Open(Options("pread")).ok());
  // Truncated.
  std::filesystem::copy_file(keep, shards_[1], std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(shards_[1], std::filesystem::file_size(keep) - 1);
  t = TableFile::Open(reference_);
  EXPECT_NE(t.status().message().find("truncated"), std::string::npos) << t.status().ToString();
}

TEST_P(ReferenceTableTest, SameSizeAndMtimeButOtherContentIsCaughtByTheFingerprintOnRequest) {
  // Same size, a renamed tensor in the header, the old mtime put back.
  std::string bytes = EngramShard(700, 1, GetParam().weight, GetParam().scale);
  bytes.replace(bytes.find("\"other\""), 7, "\"othex\"");
  struct stat st {};
  ASSERT_EQ(::stat(shards_[1].c_str(), &st), 0);
  WriteFile(shards_[1], bytes);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, shards_[1].c_str(), times, 0), 0);
  EXPECT_TRUE(TableFile::Open(reference_).ok());  // size and mtime agree
  auto t = TableFile::Open(reference_, {.check_fingerprints = true});
  EXPECT_EQ(t.status().code(), StatusCode::kCorruption);
  EXPECT_NE(t.status().message().find("fingerprint"), std::string::npos) << t.status().ToString();
  StoreOptions o = Options("pread");
  o.verify_shard_fingerprints = true;
  EXPECT_EQ(Store::Open(o).status().code(), StatusCode::kCorruption);
}

TEST_P(ReferenceTableTest, MissingShardAndDamagedReferenceGiveClearErrors) {
  // Damaged checksum section, then damaged metadata.
  const std::string copy = dir_.File("copy.engram");
  std::filesystem::copy_file(reference_, copy);
  FlipByteKeepingMtime(copy, 4096 + 5);
  EXPECT_NE(TableFile::Open(copy).status().message().find("checksum section"), std::string::npos);
  auto good = TableFile::Open(reference_);
  ASSERT_TRUE(good.ok());
  std::filesystem::copy_file(reference_, copy, std::filesystem::copy_options::overwrite_existing);
  FlipByteKeepingMtime(copy, (*good)->header().metadata_offset + 3);
  EXPECT_NE(TableFile::Open(copy).status().message().find("metadata"), std::string::npos);
  // A shard gone.
  std::filesystem::remove(shards_[0]);
  auto t = TableFile::Open(reference_);
  EXPECT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("model-00000.safetensors"), std::string::npos) << t.status().ToString();
}

TEST(ReferenceTableWriter, BadShardsAndTensorsAreRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  WriteFile(dir.File("a.safetensors"), EngramShard(0, 5));
  ConvertOptions o;
  o.writer.sync = false;
  // Tensor not found.
  auto missing = SafetensorsConvertSpec({dir.File("a.safetensors")}, "nope", "");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  // A scalar is not a table of rows.
  WriteFile(dir.File("s.safetensors"), Safetensors("{" + TensorJson("w", "U8", "[]", 0, 1) + "}", "x"));
  auto scalar = SafetensorsConvertSpec({dir.File("s.safetensors")}, "w", "");
  ASSERT_TRUE(scalar.ok());
  auto h = WriteReferenceTable(*scalar, dir.File("o.engram"), o);
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find("scalar"), std::string::npos) << h.status().ToString();
  // Weight and scale of different row counts.
  const std::string w = Rows(1, 0, 3, 16);
  WriteFile(dir.File("r.safetensors"), Safetensors("{" + TensorJson("w", "U8", "[3,16]", 0, 48) + "," +
                                                       TensorJson("s", "U8", "[2,8]", 48, 64) + "}",
                                                   w + std::string(16, 's')));
  auto rows = SafetensorsConvertSpec({dir.File("r.safetensors")}, "w", "s");
  ASSERT_TRUE(rows.ok());
  h = WriteReferenceTable(*rows, dir.File("o.engram"), o);
  EXPECT_NE(h.status().message().find("different row counts"), std::string::npos) << h.status().ToString();
  // A record larger than a block.
  WriteFile(dir.File("b.safetensors"),
            Safetensors("{" + TensorJson("w", "U8", "[1,5000]", 0, 5000) + "}", std::string(5000, 'b')));
  auto big = SafetensorsConvertSpec({dir.File("b.safetensors")}, "w", "");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(WriteReferenceTable(*big, dir.File("o.engram"), o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir.File("o.engram")));
}

}  // namespace
}  // namespace engram
