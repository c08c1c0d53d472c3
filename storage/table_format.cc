#include "storage/table_format.h"

#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "storage/block_hash.h"
#include "storage/byte_order.h"

namespace engram {

namespace {

// Field offsets inside the 256-byte header (FORMAT.md, "Header").
constexpr size_t kOffMagic = 0;
constexpr size_t kOffVersion = 8;
constexpr size_t kOffBlockSize = 12;
constexpr size_t kOffRecordBytes = 16;
constexpr size_t kOffRowsPerBlock = 20;
constexpr size_t kOffFlags = 24;
constexpr size_t kOffReserved0 = 28;
constexpr size_t kOffRowCount = 32;
constexpr size_t kOffBlockCount = 40;
constexpr size_t kOffDataOffset = 48;
constexpr size_t kOffDataBytes = 56;
constexpr size_t kOffMetadataOffset = 64;
constexpr size_t kOffMetadataBytes = 72;
constexpr size_t kOffMetadataXxh3 = 80;
constexpr size_t kOffFileBytes = 88;
constexpr size_t kOffChecksumSalt = 96;
constexpr size_t kOffChecksumsXxh3 = 104;  // version 2; reserved in version 1
constexpr size_t kOffReservedStart = 104;
constexpr size_t kOffHeaderXxh3 = 248;
static_assert(kOffHeaderXxh3 + 8 == kTableHeaderBytes);

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string Field(const char* name, uint64_t got, uint64_t want) {
  return std::string("table header field ") + name + " is " + std::to_string(got) + ", expected " +
         std::to_string(want);
}

uint64_t RoundUpToBlock(uint64_t v) { return (v + kTableBlockSize - 1) / kTableBlockSize * kTableBlockSize; }

// Sizes derived from (record_bytes, row_count, metadata_bytes); false on overflow.
struct DerivedSizes {
  uint32_t rows_per_block;
  uint64_t block_count;
  uint64_t data_bytes;
  uint64_t metadata_offset;
  uint64_t file_bytes;
};

// The checks both versions share; fills rows_per_block.
Result<DerivedSizes> CheckRecordAndMetadata(uint32_t record_bytes, uint64_t metadata_bytes) {
  DerivedSizes d{};
  d.rows_per_block = RowsPerBlock(record_bytes);
  if (d.rows_per_block == 0) {
    return Status::InvalidArgument("record_bytes " + std::to_string(record_bytes) + " is not in [1, " +
                                   std::to_string(kMaxRecordBytes) + "]");
  }
  if (metadata_bytes > kMaxMetadataBytes) {
    return Status::InvalidArgument("metadata is " + std::to_string(metadata_bytes) + " bytes, more than the " +
                                   std::to_string(kMaxMetadataBytes) + " byte limit");
  }
  return d;
}

Result<DerivedSizes> Derive(uint32_t record_bytes, uint64_t row_count, uint64_t metadata_bytes) {
  ENGRAM_ASSIGN_OR_RETURN(DerivedSizes d, CheckRecordAndMetadata(record_bytes, metadata_bytes));
  d.block_count = row_count / d.rows_per_block + (row_count % d.rows_per_block != 0 ? 1 : 0);
  uint64_t meta_padded = RoundUpToBlock(metadata_bytes);
  if (__builtin_mul_overflow(d.block_count, uint64_t{kTableBlockSize}, &d.data_bytes) ||
      __builtin_add_overflow(kTableDataOffset, d.data_bytes, &d.metadata_offset) ||
      __builtin_add_overflow(d.metadata_offset, meta_padded, &d.file_bytes)) {
    return Status::InvalidArgument("row_count " + std::to_string(row_count) + " of " +
                                   std::to_string(record_bytes) + "-byte records overflows a 64-bit file size");
  }
  // Offsets are passed to pread/pwrite as off_t, which is signed.
  if (d.file_bytes > static_cast<uint64_t>(INT64_MAX)) {
    return Status::InvalidArgument("row_count " + std::to_string(row_count) + " of " +
                                   std::to_string(record_bytes) + "-byte records exceeds the largest file size");
  }
  return d;
}

// Version 2: the data section holds `checksum_count` 8-byte checksums.
Result<DerivedSizes> DeriveReference(uint32_t record_bytes, uint64_t checksum_count, uint64_t metadata_bytes) {
  ENGRAM_ASSIGN_OR_RETURN(DerivedSizes d, CheckRecordAndMetadata(record_bytes, metadata_bytes));
  d.block_count = checksum_count;
  uint64_t raw = 0;
  if (__builtin_mul_overflow(checksum_count, uint64_t{8}, &raw) || raw > static_cast<uint64_t>(INT64_MAX / 2)) {
    return Status::InvalidArgument(std::to_string(checksum_count) + " block checksums overflow the file size");
  }
  d.data_bytes = RoundUpToBlock(raw);
  d.metadata_offset = kTableDataOffset + d.data_bytes;
  d.file_bytes = d.metadata_offset + RoundUpToBlock(metadata_bytes);
  return d;
}

}  // namespace

uint32_t RowsPerBlock(uint32_t record_bytes) {
  if (record_bytes == 0 || record_bytes > kMaxRecordBytes) return 0;
  return kBlockRecordArea / record_bytes;
}

Status CheckTableHasRows(uint64_t row_count) {
  if (row_count == 0) return Status::InvalidArgument("a table needs at least one row");
  return Status::OK();
}

namespace {

TableHeader HeaderOf(uint32_t version, uint32_t record_bytes, uint64_t row_count, const DerivedSizes& d,
                     uint64_t metadata_bytes, uint64_t metadata_xxh3, uint64_t checksum_salt) {
  TableHeader h;
  h.version = version;
  h.record_bytes = record_bytes;
  h.rows_per_block = d.rows_per_block;
  h.row_count = row_count;
  h.block_count = d.block_count;
  h.data_offset = kTableDataOffset;
  h.data_bytes = d.data_bytes;
  h.metadata_offset = d.metadata_offset;
  h.metadata_bytes = metadata_bytes;
  h.metadata_xxh3 = metadata_xxh3;
  h.file_bytes = d.file_bytes;
  h.checksum_salt = checksum_salt;
  return h;
}

}  // namespace

Result<TableHeader> MakeTableHeader(uint32_t record_bytes, uint64_t row_count, uint64_t metadata_bytes,
                                    uint64_t metadata_xxh3, uint64_t checksum_salt) {
  ENGRAM_RETURN_IF_ERROR(CheckTableHasRows(row_count));
  ENGRAM_ASSIGN_OR_RETURN(DerivedSizes d, Derive(record_bytes, row_count, metadata_bytes));
  return HeaderOf(kTableFormatVersion, record_bytes, row_count, d, metadata_bytes, metadata_xxh3, checksum_salt);
}

Result<TableHeader> MakeReferenceTableHeader(uint32_t record_bytes, uint64_t row_count, uint64_t checksum_count,
                                             uint64_t checksums_xxh3, uint64_t metadata_bytes,
                                             uint64_t metadata_xxh3, uint64_t checksum_salt) {
  ENGRAM_RETURN_IF_ERROR(CheckTableHasRows(row_count));
  ENGRAM_ASSIGN_OR_RETURN(DerivedSizes d, DeriveReference(record_bytes, checksum_count, metadata_bytes));
  TableHeader h =
      HeaderOf(kReferenceTableVersion, record_bytes, row_count, d, metadata_bytes, metadata_xxh3, checksum_salt);
  h.checksums_xxh3 = checksums_xxh3;
  return h;
}

void EncodeTableHeader(const TableHeader& h, std::span<std::byte, kTableBlockSize> block) {
  std::memset(block.data(), 0, block.size());
  std::byte* p = block.data();
  std::memcpy(p + kOffMagic, kTableMagic, sizeof kTableMagic);
  StoreLe32(p + kOffVersion, h.version);
  StoreLe32(p + kOffBlockSize, h.block_size);
  StoreLe32(p + kOffRecordBytes, h.record_bytes);
  StoreLe32(p + kOffRowsPerBlock, h.rows_per_block);
  StoreLe32(p + kOffFlags, h.flags);
  StoreLe64(p + kOffRowCount, h.row_count);
  StoreLe64(p + kOffBlockCount, h.block_count);
  StoreLe64(p + kOffDataOffset, h.data_offset);
  StoreLe64(p + kOffDataBytes, h.data_bytes);
  StoreLe64(p + kOffMetadataOffset, h.metadata_offset);
  StoreLe64(p + kOffMetadataBytes, h.metadata_bytes);
  StoreLe64(p + kOffMetadataXxh3, h.metadata_xxh3);
  StoreLe64(p + kOffFileBytes, h.file_bytes);
  StoreLe64(p + kOffChecksumSalt, h.checksum_salt);
  if (h.is_reference()) StoreLe64(p + kOffChecksumsXxh3, h.checksums_xxh3);
  StoreLe64(p + kOffHeaderXxh3, XXH3_64bits(p, kOffHeaderXxh3));
}

Result<TableHeader> DecodeTableHeader(std::span<const std::byte> block, uint64_t file_size) {
  if (file_size < kTableBlockSize || block.size() < kTableBlockSize) {
    return Status::Corruption("file is " + std::to_string(file_size) + " bytes, too short for the " +
                              std::to_string(kTableBlockSize) + "-byte table header block");
  }
  const std::byte* p = block.data();
  if (std::memcmp(p + kOffMagic, kTableMagic, sizeof kTableMagic) != 0) {
    return Status::Corruption("bad magic: not an Engram table file (expected \"ENGRAMTB\")");
  }
  // Check the checksum before trusting any field, so a random bit flip reads
  // as "corrupt header" rather than as some odd field value.
  uint64_t stored = LoadLe64(p + kOffHeaderXxh3);
  uint64_t computed = XXH3_64bits(p, kOffHeaderXxh3);
  uint32_t version = LoadLe32(p + kOffVersion);
  if (stored != computed) {
    return Status::Corruption("table header checksum mismatch: stored " + Hex(stored) + ", computed " +
                              Hex(computed));
  }
  if (version != kTableFormatVersion && version != kReferenceTableVersion) {
    return Status::Unsupported("table format version " + std::to_string(version) + " (this build reads versions " +
                               std::to_string(kTableFormatVersion) + " and " + std::to_string(kReferenceTableVersion) +
                               ")");
  }
  if (LoadLe32(p + kOffReserved0) != 0) return Status::Corruption("table header reserved field at 28 is not zero");
  const size_t reserved_start = version == kReferenceTableVersion ? kOffChecksumsXxh3 + 8 : kOffReservedStart;
  for (size_t i = reserved_start; i < kOffHeaderXxh3; ++i) {
    if (p[i] != std::byte{0}) {
      return Status::Corruption("table header reserved byte " + std::to_string(i) + " is not zero");
    }
  }
  for (size_t i = kTableHeaderBytes; i < kTableBlockSize; ++i) {
    if (p[i] != std::byte{0}) {
      return Status::Corruption("table header block padding byte " + std::to_string(i) + " is not zero");
    }
  }
  TableHeader h;
  h.version = version;
  h.block_size = LoadLe32(p + kOffBlockSize);
  h.record_bytes = LoadLe32(p + kOffRecordBytes);
  h.rows_per_block = LoadLe32(p + kOffRowsPerBlock);
  h.flags = LoadLe32(p + kOffFlags);
  h.row_count = LoadLe64(p + kOffRowCount);
  h.block_count = LoadLe64(p + kOffBlockCount);
  h.data_offset = LoadLe64(p + kOffDataOffset);
  h.data_bytes = LoadLe64(p + kOffDataBytes);
  h.metadata_offset = LoadLe64(p + kOffMetadataOffset);
  h.metadata_bytes = LoadLe64(p + kOffMetadataBytes);
  h.metadata_xxh3 = LoadLe64(p + kOffMetadataXxh3);
  h.file_bytes = LoadLe64(p + kOffFileBytes);
  h.checksum_salt = LoadLe64(p + kOffChecksumSalt);
  if (h.is_reference()) h.checksums_xxh3 = LoadLe64(p + kOffChecksumsXxh3);
  ENGRAM_RETURN_IF_ERROR(ValidateTableHeader(h, file_size));
  return h;
}

Status ValidateTableHeader(const TableHeader& h, uint64_t file_size) {
  if (h.version != kTableFormatVersion && h.version != kReferenceTableVersion) {
    return Status::Unsupported("table format version " + std::to_string(h.version));
  }
  if (h.flags != 0) {
    return Status::Unsupported("table header flags " + Hex(h.flags) + " are not defined in format version " +
                               std::to_string(h.version));
  }
  if (h.block_size != kTableBlockSize) return Status::Corruption(Field("block_size", h.block_size, kTableBlockSize));
  if (h.record_bytes == 0 || h.record_bytes > kMaxRecordBytes) {
    return Status::Corruption("table header field record_bytes is " + std::to_string(h.record_bytes) +
                              ", not in [1, " + std::to_string(kMaxRecordBytes) + "]");
  }
  if (h.rows_per_block != RowsPerBlock(h.record_bytes)) {
    return Status::Corruption(Field("rows_per_block", h.rows_per_block, RowsPerBlock(h.record_bytes)));
  }
  if (h.metadata_bytes == 0 || h.metadata_bytes > kMaxMetadataBytes) {
    return Status::Corruption("table header field metadata_bytes is " + std::to_string(h.metadata_bytes) +
                              ", not in [1, " + std::to_string(kMaxMetadataBytes) + "]");
  }
  // Well-formed but against the rule: the writers' own error, not Corruption.
  ENGRAM_RETURN_IF_ERROR(CheckTableHasRows(h.row_count));
  auto derived = h.is_reference() ? DeriveReference(h.record_bytes, h.block_count, h.metadata_bytes)
                                  : Derive(h.record_bytes, h.row_count, h.metadata_bytes);
  if (!derived.ok()) {
    return Status::Corruption("table header field row_count " + std::to_string(h.row_count) + ": " +
                              derived.status().message());
  }
  const DerivedSizes& d = *derived;
  if (h.block_count != d.block_count) return Status::Corruption(Field("block_count", h.block_count, d.block_count));
  if (h.data_offset != kTableDataOffset) {
    return Status::Corruption(Field("data_offset", h.data_offset, kTableDataOffset));
  }
  if (h.data_bytes != d.data_bytes) return Status::Corruption(Field("data_bytes", h.data_bytes, d.data_bytes));
  if (h.metadata_offset != d.metadata_offset) {
    return Status::Corruption(Field("metadata_offset", h.metadata_offset, d.metadata_offset));
  }
  if (h.file_bytes != d.file_bytes) return Status::Corruption(Field("file_bytes", h.file_bytes, d.file_bytes));
  if (file_size != h.file_bytes) {
    return Status::Corruption("file is " + std::to_string(file_size) + " bytes but its header describes " +
                              std::to_string(h.file_bytes) + " bytes" +
                              (file_size < h.file_bytes ? " (truncated)" : " (trailing bytes)"));
  }
  return Status::OK();
}

uint64_t BlockSeedBase(uint64_t checksum_salt, uint32_t record_bytes) {
  return checksum_salt ^ (static_cast<uint64_t>(record_bytes) << 52);
}

uint64_t ComputeBlockChecksum(std::span<const std::byte> block, uint64_t block_index, uint64_t seed_base) {
  return BlockHash(block.data(), kBlockRecordArea, seed_base ^ block_index);
}

void SealBlock(std::span<std::byte> block, uint64_t block_index, uint64_t seed_base) {
  StoreLe64(block.data() + kBlockRecordArea, ComputeBlockChecksum(block, block_index, seed_base));
}

Status VerifyBlockChecksum(std::span<const std::byte> block, uint64_t block_index, uint64_t seed_base) {
  if (block.size() != kTableBlockSize) {
    return Status::InvalidArgument("block " + std::to_string(block_index) + ": buffer is " +
                                   std::to_string(block.size()) + " bytes, expected " +
                                   std::to_string(kTableBlockSize));
  }
  uint64_t stored = LoadLe64(block.data() + kBlockRecordArea);
  uint64_t computed = ComputeBlockChecksum(block, block_index, seed_base);
  if (stored != computed) {
    return Status::Corruption("block " + std::to_string(block_index) + " checksum mismatch: stored " + Hex(stored) +
                              ", computed " + Hex(computed));
  }
  return Status::OK();
}

uint32_t TableGeometry::RowsInBlock(uint64_t block) const {
  if (block >= block_count_) return 0;
  uint64_t first = FirstRowOfBlock(block);
  uint64_t left = row_count_ - first;
  return left < rows_per_block_ ? static_cast<uint32_t>(left) : rows_per_block_;
}

Status TableGeometry::CheckRow(uint64_t row) const {
  if (row >= row_count_) {
    return Status::OutOfRange("row " + std::to_string(row) + " is past the end of the table (" +
                              std::to_string(row_count_) + " rows)");
  }
  return Status::OK();
}

}  // namespace engram
