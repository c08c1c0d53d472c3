// Engram table file format v1: the on-disk layout as pure functions over bytes.
//
// Nothing here does I/O. The writer, the reader (TableFile), every I/O backend
// and the store share these functions, so a block read by io_uring, pread or
// mmap is verified by exactly the same code. storage/FORMAT.md is the
// normative description; this header mirrors it.
//
//   offset 0              header block (4096 B): 256-B header + zero padding
//   offset 4096           data section: block_count blocks of 4096 B
//                           block = rows_per_block records | zero pad | XXH3-64 trailer (8 B)
//   metadata_offset       metadata section: UTF-8 JSON, zero padded to 4096 B
//
// All integers are little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "engram/status.h"

namespace engram {

inline constexpr uint32_t kTableFormatVersion = 1;
// A reference table (FORMAT.md, "Reference tables"): the same header block,
// but the rows stay in the safetensors shards it names; its data section
// holds one XXH3-64 per 4 KiB block of the referenced tensor data.
inline constexpr uint32_t kReferenceTableVersion = 2;
inline constexpr uint32_t kTableBlockSize = 4096;
// The last 8 bytes of each data block hold its checksum.
inline constexpr uint32_t kBlockTrailerBytes = 8;
// Bytes of each block available to records (and zero padding).
inline constexpr uint32_t kBlockRecordArea = kTableBlockSize - kBlockTrailerBytes;
inline constexpr uint32_t kMaxRecordBytes = kBlockRecordArea;
// The header is stored in the first block; only its first 256 bytes carry fields.
inline constexpr uint32_t kTableHeaderBytes = 256;
inline constexpr uint64_t kTableDataOffset = kTableBlockSize;
// A sanity bound so a corrupt length cannot make a reader allocate gigabytes.
inline constexpr uint64_t kMaxMetadataBytes = 64ull << 20;
inline constexpr char kTableMagic[8] = {'E', 'N', 'G', 'R', 'A', 'M', 'T', 'B'};

// Every field of the v1 header, decoded. See FORMAT.md for offsets.
struct TableHeader {
  uint32_t version = kTableFormatVersion;
  uint32_t block_size = kTableBlockSize;
  uint32_t record_bytes = 0;
  uint32_t rows_per_block = 0;
  uint32_t flags = 0;  // no flags are defined in v1; must be 0
  uint64_t row_count = 0;
  uint64_t block_count = 0;
  uint64_t data_offset = kTableDataOffset;
  uint64_t data_bytes = 0;
  uint64_t metadata_offset = 0;
  uint64_t metadata_bytes = 0;
  uint64_t metadata_xxh3 = 0;  // XXH3-64 (seed 0) of the metadata JSON bytes
  uint64_t file_bytes = 0;     // exact size of a complete file
  uint64_t checksum_salt = 0;  // mixed into every block checksum seed
  // Version 2 only: XXH3-64 (seed 0) of the block_count checksums (8 B each)
  // of the data section. Reserved (0) in version 1.
  uint64_t checksums_xxh3 = 0;

  bool is_reference() const { return version == kReferenceTableVersion; }
};

// Rows that fit in one block for this record size: floor(4088 / record_bytes),
// or 0 if the record size is 0 or larger than kMaxRecordBytes.
uint32_t RowsPerBlock(uint32_t record_bytes);

// The one rule for empty tables: a table has at least one row. A table
// without rows can serve nothing and has no size to weigh in a store's cache
// budget split, so writers refuse to write one and readers refuse to open
// one, with this same error: InvalidArgument "a table needs at least one row".
Status CheckTableHasRows(uint64_t row_count);

// A complete, self-consistent header for a table of `row_count` records.
// Fails (InvalidArgument) for zero rows (CheckTableHasRows), an unsupported
// record size or if any derived size overflows 64 bits.
Result<TableHeader> MakeTableHeader(uint32_t record_bytes, uint64_t row_count, uint64_t metadata_bytes,
                                    uint64_t metadata_xxh3, uint64_t checksum_salt);

// A complete, self-consistent version-2 (reference table) header: the data
// section holds `checksum_count` 8-byte checksums, zero padded to 4096.
Result<TableHeader> MakeReferenceTableHeader(uint32_t record_bytes, uint64_t row_count, uint64_t checksum_count,
                                             uint64_t checksums_xxh3, uint64_t metadata_bytes,
                                             uint64_t metadata_xxh3, uint64_t checksum_salt);

// Writes the whole 4096-byte header block (fields, header checksum, zero padding).
void EncodeTableHeader(const TableHeader& header, std::span<std::byte, kTableBlockSize> block);

// Decodes and fully validates a header block against the size of the file it
// came from: magic, version, header checksum, reserved bytes, block geometry,
// every derived size (with overflow checks) and the file size. Errors are
// Corruption (or Unsupported for a newer version / unknown flags) and name the
// field.
Result<TableHeader> DecodeTableHeader(std::span<const std::byte> block, uint64_t file_size);

// The geometry checks of DecodeTableHeader, on an already decoded header.
Status ValidateTableHeader(const TableHeader& header, uint64_t file_size);

// Block checksums. Each data block's last 8 bytes hold
//   XXH3_64bits_withSeed(block[0..4088), seed = seed_base ^ block_index)
// where seed_base = checksum_salt ^ (record_bytes << 52). block_index < 2^51
// (files are < 2^63 bytes) and record_bytes < 2^12, so for one salt every
// (block index, record size) pair gets its own seed: a block read from the
// wrong offset, copied from another table (another salt) or read under a
// header with a different record size fails verification.
uint64_t BlockSeedBase(uint64_t checksum_salt, uint32_t record_bytes);
inline uint64_t BlockSeedBase(const TableHeader& h) { return BlockSeedBase(h.checksum_salt, h.record_bytes); }

// `block` must hold at least 4088 bytes.
uint64_t ComputeBlockChecksum(std::span<const std::byte> block, uint64_t block_index, uint64_t seed_base);

// Stores the checksum in the block's trailer. `block` must be 4096 bytes.
void SealBlock(std::span<std::byte> block, uint64_t block_index, uint64_t seed_base);

// Corruption naming the block if its trailer does not match its contents;
// InvalidArgument if the buffer is not 4096 bytes.
Status VerifyBlockChecksum(std::span<const std::byte> block, uint64_t block_index, uint64_t seed_base);

// Where rows live: pure arithmetic, shared by the reader and the I/O backends.
class TableGeometry {
 public:
  TableGeometry() = default;
  explicit TableGeometry(const TableHeader& h)
      : record_bytes_(h.record_bytes), rows_per_block_(h.rows_per_block), row_count_(h.row_count),
        block_count_(h.block_count), data_offset_(h.data_offset) {}

  uint32_t record_bytes() const { return record_bytes_; }
  uint32_t rows_per_block() const { return rows_per_block_; }
  uint64_t row_count() const { return row_count_; }
  uint64_t block_count() const { return block_count_; }

  // Callers check row < row_count() first (CheckRow); these do not.
  uint64_t BlockOfRow(uint64_t row) const { return row / rows_per_block_; }
  uint32_t RowOffsetInBlock(uint64_t row) const {
    return static_cast<uint32_t>(row % rows_per_block_) * record_bytes_;
  }
  // File offset of a data block; always a multiple of 4096.
  uint64_t BlockOffset(uint64_t block) const { return data_offset_ + block * kTableBlockSize; }
  uint64_t RowFileOffset(uint64_t row) const { return BlockOffset(BlockOfRow(row)) + RowOffsetInBlock(row); }
  uint64_t FirstRowOfBlock(uint64_t block) const { return block * rows_per_block_; }
  // Rows stored in `block` (the last block may be partly filled).
  uint32_t RowsInBlock(uint64_t block) const;

  // OutOfRange naming the row and the table size.
  Status CheckRow(uint64_t row) const;

 private:
  uint32_t record_bytes_ = 0;
  uint32_t rows_per_block_ = 1;
  uint64_t row_count_ = 0;
  uint64_t block_count_ = 0;
  uint64_t data_offset_ = kTableDataOffset;
};

}  // namespace engram
