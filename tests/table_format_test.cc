// Format v1 codec: header encode/decode/validation, block checksums, geometry.
// Pure functions over bytes, no files.
#include "storage/table_format.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <array>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "storage/byte_order.h"

namespace engram {
namespace {

using Block = std::array<std::byte, kTableBlockSize>;

TableHeader ValidHeader(uint64_t rows = 1000, uint32_t record_bytes = 264) {
  auto h = MakeTableHeader(record_bytes, rows, /*metadata_bytes=*/300, /*metadata_xxh3=*/0x1234, /*salt=*/0x55);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return *h;
}

Block Encode(const TableHeader& h) {
  Block b;
  EncodeTableHeader(h, b);
  return b;
}

// Rewrites the header checksum after a raw edit, so only the edited field is wrong.
void Reseal(Block& b) { StoreLe64(b.data() + 248, XXH3_64bits(b.data(), 248)); }

TEST(TableFormat, RowsPerBlockLeavesRoomForTheTrailer) {
  EXPECT_EQ(RowsPerBlock(264), 15u);  // V4.1: 15 * 264 = 3960 <= 4088
  EXPECT_EQ(RowsPerBlock(256), 15u);  // 16 * 256 = 4096 would overwrite the trailer
  EXPECT_EQ(RowsPerBlock(1), 4088u);
  EXPECT_EQ(RowsPerBlock(4088), 1u);
  EXPECT_EQ(RowsPerBlock(4089), 0u);
  EXPECT_EQ(RowsPerBlock(0), 0u);
}

TEST(TableFormat, HeaderRoundTripsEveryField) {
  TableHeader h = ValidHeader(384006168, 264);  // V4.1 layer 1
  Block b = Encode(h);
  auto d = DecodeTableHeader(b, h.file_bytes);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->record_bytes, 264u);
  EXPECT_EQ(d->rows_per_block, 15u);
  EXPECT_EQ(d->row_count, 384006168u);
  EXPECT_EQ(d->block_count, (384006168u + 14) / 15);
  EXPECT_EQ(d->data_offset, 4096u);
  EXPECT_EQ(d->data_bytes, d->block_count * 4096);
  EXPECT_EQ(d->metadata_offset, 4096 + d->data_bytes);
  EXPECT_EQ(d->metadata_bytes, 300u);
  EXPECT_EQ(d->metadata_xxh3, 0x1234u);
  EXPECT_EQ(d->checksum_salt, 0x55u);
  EXPECT_EQ(d->file_bytes, d->metadata_offset + 4096);
  EXPECT_EQ(d->file_bytes % 4096, 0u);
}

TEST(TableFormat, TableWithoutRowsIsRefusedWhenMadeAndWhenDecoded) {
  auto made = MakeTableHeader(264, 0, /*metadata_bytes=*/300, /*metadata_xxh3=*/0x1234, /*salt=*/0x55);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(made.status().message(), "a table needs at least one row");
  // A self-consistent zero-row header, as a writer without the rule made it.
  TableHeader h = ValidHeader(1);
  h.row_count = 0;
  h.block_count = 0;
  h.data_bytes = 0;
  h.metadata_offset = kTableDataOffset;
  h.file_bytes = kTableDataOffset + kTableBlockSize;
  auto d = DecodeTableHeader(Encode(h), h.file_bytes);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.status().message(), "a table needs at least one row");
}

TEST(TableFormat, BadMagicIsCorruption) {
  TableHeader h = ValidHeader();
  Block b = Encode(h);
  b[0] = std::byte{'X'};
  Reseal(b);
  auto d = DecodeTableHeader(b, h.file_bytes);
  EXPECT_EQ(d.status().code(), StatusCode::kCorruption);
  EXPECT_NE(d.status().message().find("magic"), std::string::npos);
}

TEST(TableFormat, AnyFlippedHeaderByteFailsTheHeaderChecksum) {
  TableHeader h = ValidHeader();
  Block clean = Encode(h);
  for (size_t i = 8; i < 256; ++i) {
    Block b = clean;
    b[i] ^= std::byte{0x01};
    auto d = DecodeTableHeader(b, h.file_bytes);
    ASSERT_FALSE(d.ok()) << "byte " << i;
    EXPECT_EQ(d.status().code(), StatusCode::kCorruption) << "byte " << i;
    EXPECT_NE(d.status().message().find("checksum"), std::string::npos) << d.status().ToString();
  }
}

TEST(TableFormat, NonZeroHeaderPaddingIsCorruption) {
  TableHeader h = ValidHeader();
  for (size_t i : {size_t{104}, size_t{200}, size_t{256}, size_t{4095}}) {
    Block b = Encode(h);
    b[i] = std::byte{1};
    Reseal(b);
    auto d = DecodeTableHeader(b, h.file_bytes);
    EXPECT_EQ(d.status().code(), StatusCode::kCorruption) << i;
  }
}

TEST(TableFormat, NewerVersionAndUnknownFlagsAreUnsupported) {
  TableHeader h = ValidHeader();
  TableHeader v3 = h;
  v3.version = 3;
  auto d = DecodeTableHeader(Encode(v3), h.file_bytes);
  EXPECT_EQ(d.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(d.status().message().find("version 3"), std::string::npos);
  TableHeader flags = h;
  flags.flags = 4;
  EXPECT_EQ(DecodeTableHeader(Encode(flags), h.file_bytes).status().code(), StatusCode::kUnsupported);
}

// Each field edited alone, with a valid header checksum: the validator must
// catch the inconsistency and name the field.
TEST(TableFormat, EachInconsistentFieldIsNamed) {
  const TableHeader h = ValidHeader(1000, 264);
  struct Case {
    const char* field;
    std::function<void(TableHeader&)> edit;
  };
  std::vector<Case> cases = {
      {"block_size", [](TableHeader& x) { x.block_size = 8192; }},
      {"record_bytes", [](TableHeader& x) { x.record_bytes = 0; }},
      {"record_bytes", [](TableHeader& x) { x.record_bytes = 5000; }},
      {"rows_per_block", [](TableHeader& x) { x.rows_per_block = 16; }},
      {"rows_per_block", [](TableHeader& x) { x.record_bytes = 300; }},  // 300-B records fit 13, header says 15
      {"block_count", [](TableHeader& x) { x.block_count += 1; }},
      {"block_count", [](TableHeader& x) { x.row_count += 15; }},
      {"data_offset", [](TableHeader& x) { x.data_offset = 8192; }},
      {"data_bytes", [](TableHeader& x) { x.data_bytes -= 4096; }},
      {"metadata_offset", [](TableHeader& x) { x.metadata_offset += 4096; }},
      {"metadata_bytes", [](TableHeader& x) { x.metadata_bytes = 0; }},
      {"metadata_bytes", [](TableHeader& x) { x.metadata_bytes = kMaxMetadataBytes + 1; }},
      {"file_bytes", [](TableHeader& x) { x.file_bytes += 4096; }},
  };
  for (const Case& c : cases) {
    TableHeader bad = h;
    c.edit(bad);
    auto d = DecodeTableHeader(Encode(bad), h.file_bytes);
    ASSERT_FALSE(d.ok()) << c.field;
    EXPECT_EQ(d.status().code(), StatusCode::kCorruption) << c.field;
    EXPECT_NE(d.status().message().find(c.field), std::string::npos)
        << c.field << ": " << d.status().ToString();
  }
}

TEST(TableFormat, RowCountThatOverflowsTheFileSizeIsRejected) {
  EXPECT_FALSE(MakeTableHeader(264, std::numeric_limits<uint64_t>::max(), 10, 0, 0).ok());
  EXPECT_FALSE(MakeTableHeader(4088, std::numeric_limits<uint64_t>::max() / 4096 + 1, 10, 0, 0).ok());
  // Past INT64_MAX bytes: pread's off_t could not address it.
  EXPECT_FALSE(MakeTableHeader(1, std::numeric_limits<uint64_t>::max() / 2, 10, 0, 0).ok());
  // A header claiming such a row count (checksummed, with the other fields
  // as a naive 64-bit wrap would compute them) must fail, not wrap around.
  TableHeader h = ValidHeader();
  h.row_count = std::numeric_limits<uint64_t>::max() - 3;
  h.block_count = h.row_count / 15 + 1;
  h.data_bytes = h.block_count * 4096;  // wraps
  auto d = DecodeTableHeader(Encode(h), h.file_bytes);
  EXPECT_EQ(d.status().code(), StatusCode::kCorruption);
  EXPECT_NE(d.status().message().find("row_count"), std::string::npos) << d.status().ToString();
}

TEST(TableFormat, FileSizeMustMatchTheHeader) {
  TableHeader h = ValidHeader();
  Block b = Encode(h);
  auto shorter = DecodeTableHeader(b, h.file_bytes - 1);
  EXPECT_EQ(shorter.status().code(), StatusCode::kCorruption);
  EXPECT_NE(shorter.status().message().find("truncated"), std::string::npos);
  auto longer = DecodeTableHeader(b, h.file_bytes + 4096);
  EXPECT_EQ(longer.status().code(), StatusCode::kCorruption);
  EXPECT_FALSE(DecodeTableHeader(std::span(b.data(), 100), 100).ok());
}

TEST(TableFormat, SealedBlockVerifiesAndAnyFlippedBitFails) {
  Block b{};
  for (size_t i = 0; i < 15 * 264; ++i) b[i] = static_cast<std::byte>(i * 7);
  SealBlock(b, 42, 0x99);
  EXPECT_TRUE(VerifyBlockChecksum(b, 42, 0x99).ok());
  for (size_t i : {size_t{0}, size_t{3959}, size_t{3960}, size_t{4087}, size_t{4088}, size_t{4095}}) {
    Block c = b;
    c[i] ^= std::byte{0x10};
    Status s = VerifyBlockChecksum(c, 42, 0x99);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << i;
    EXPECT_NE(s.message().find("block 42"), std::string::npos);
  }
}

TEST(TableFormat, MisplacedBlockOrBlockFromAnotherTableFails) {
  Block b{};
  b[0] = std::byte{1};
  const uint64_t base = BlockSeedBase(0xabc, 264);
  SealBlock(b, 7, base);
  EXPECT_TRUE(VerifyBlockChecksum(b, 7, base).ok());
  EXPECT_FALSE(VerifyBlockChecksum(b, 8, base).ok());                     // read from the wrong offset
  EXPECT_FALSE(VerifyBlockChecksum(b, 7, BlockSeedBase(0xabd, 264)).ok());  // another table's salt
  EXPECT_FALSE(VerifyBlockChecksum(b, 7, BlockSeedBase(0xabc, 265)).ok());  // header with another record size
  Block zeros{};
  EXPECT_FALSE(VerifyBlockChecksum(zeros, 0, BlockSeedBase(0, 264)).ok());  // an unwritten (hole) block
}

TEST(TableFormat, SeedBaseSeparatesBlockIndexFromRecordSize) {
  // Block indexes stay below 2^51, record sizes below 2^12 at bit 52: no
  // (index, record size) pair of one salt shares a seed with another.
  uint64_t salt = 0x0123456789abcdefull;
  EXPECT_NE(BlockSeedBase(salt, 264) ^ 0, BlockSeedBase(salt, 265) ^ 0);
  EXPECT_NE(BlockSeedBase(salt, 264) ^ ((1ull << 51) - 1), BlockSeedBase(salt, 265) ^ 0);
  TableHeader h = ValidHeader();
  EXPECT_EQ(BlockSeedBase(h), BlockSeedBase(h.checksum_salt, h.record_bytes));
}

TEST(TableFormat, VerifyRejectsWrongBufferSize) {
  std::vector<std::byte> small(4000);
  EXPECT_EQ(VerifyBlockChecksum(small, 0, 0).code(), StatusCode::kInvalidArgument);
}

TEST(TableFormat, GeometryPlacesRowsInAlignedBlocks) {
  TableGeometry g(ValidHeader(1000, 264));
  EXPECT_EQ(g.BlockOfRow(0), 0u);
  EXPECT_EQ(g.BlockOfRow(14), 0u);
  EXPECT_EQ(g.BlockOfRow(15), 1u);
  EXPECT_EQ(g.RowOffsetInBlock(14), 14u * 264);
  EXPECT_EQ(g.RowOffsetInBlock(15), 0u);
  EXPECT_EQ(g.BlockOffset(0), 4096u);
  EXPECT_EQ(g.BlockOffset(3) % 4096, 0u);
  EXPECT_EQ(g.RowFileOffset(16), 4096u + 4096u + 264u);
  EXPECT_EQ(g.block_count(), 67u);
  EXPECT_EQ(g.RowsInBlock(0), 15u);
  EXPECT_EQ(g.RowsInBlock(66), 1000u - 66 * 15);
  EXPECT_EQ(g.RowsInBlock(67), 0u);
  for (uint64_t r = 0; r < 1000; ++r) {
    ASSERT_LE(g.RowOffsetInBlock(r) + 264u, kBlockRecordArea) << "row " << r << " straddles its block";
  }
  EXPECT_TRUE(g.CheckRow(999).ok());
  EXPECT_EQ(g.CheckRow(1000).code(), StatusCode::kOutOfRange);
}

TEST(TableFormat, GeometryHandles64BitRowIds) {
  // A table past 2^32 rows: offsets must not be truncated to 32 bits.
  TableHeader h = ValidHeader(6'000'000'000ull, 264);
  TableGeometry g(h);
  uint64_t row = 5'999'999'999ull;
  EXPECT_EQ(g.BlockOfRow(row), row / 15);
  EXPECT_EQ(g.BlockOffset(g.BlockOfRow(row)), 4096 + (row / 15) * 4096);
  EXPECT_TRUE(g.CheckRow(row).ok());
}

}  // namespace
}  // namespace engram
