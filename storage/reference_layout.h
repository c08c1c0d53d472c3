// ReferenceLayout: where the rows of a reference table (format version 2,
// FORMAT.md "Reference tables") lie in the safetensors shards it names, and
// which stored checksum covers each 4 KiB block of them.
//
// A record is the weight row followed by the scale row (if any), exactly as
// in a converted table. The referenced bytes of each shard -- its weight
// tensor, then its scale tensor -- are cut along the shard file's own 4 KiB
// grid (so O_DIRECT reads of them are aligned); each piece is a checksum
// unit: one aligned 4 KiB read, whose bytes of that tensor one stored
// XXH3-64 covers. Units are numbered across shards in file order: shard 0's
// weight units, its scale units, shard 1's weight units, ...
//
// Pure functions over the metadata (no I/O), so the parser can be fuzzed.
// A weight or scale row may straddle a 4 KiB boundary, so a row needs one or
// two units for its weight and, unless the scales are held in memory, one
// or two more for its scale.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engram/status.h"
#include "storage/table_format.h"

namespace engram {

// Metadata "format" of a reference table.
inline constexpr char kReferenceFormat[] = "engram-reference/1";

struct ReferenceShard {
  std::string file;        // as stored: absolute, or relative to the reference file's directory
  std::string path;        // `file` resolved against that directory
  uint64_t size = 0;       // bytes, when the reference was written
  int64_t mtime_ns = 0;    // modification time (ns since the epoch), idem
  uint64_t fingerprint = 0;  // ShardFingerprint (storage/reference_table.h)
  uint64_t rows = 0;
  uint64_t weight_offset = 0;  // file offset of the weight tensor's first byte
  uint64_t scale_offset = 0;   // idem for the scale tensor (when the table has scales)
  // Derived:
  uint64_t first_row = 0;
  uint64_t weight_units = 0;  // first checksum unit of the weight tensor
  uint64_t scale_units = 0;   // first checksum unit of the scale tensor
  uint64_t units_end = 0;     // one past this shard's last unit
};

// One checksum unit: the aligned 4 KiB block of `shard` at `file_offset`,
// whose bytes [begin, end) belong to the tensor the unit covers.
struct ChecksumUnit {
  uint32_t shard = 0;
  uint64_t file_offset = 0;
  uint32_t begin = 0;
  uint32_t end = 0;
};

// Part of a record held in one unit: `bytes` bytes at `block_offset` of the
// unit's block go to `record_offset` of the record.
struct RowPiece {
  uint64_t unit = 0;
  uint32_t block_offset = 0;
  uint32_t bytes = 0;
  uint32_t record_offset = 0;
};
inline constexpr int kMaxRowPieces = 4;  // weight (1-2 units) + scale (1-2 units)

// "0x" and 16 lower-case hex digits: how fingerprints are stored, and how
// checksums are shown in messages.
std::string Hex64(uint64_t v);
// The inverse of Hex64: true and *out for exactly "0x" and 16 lower-case
// hex digits, false for anything else.
bool ParseHex64(std::string_view text, uint64_t* out);

// The directory part of `path` ("" for a bare name), against which a
// reference table's relative shard files are resolved.
std::string DirectoryOf(const std::string& path);

// The checksum of unit `unit`, whose 4 KiB block is `block`: XXH3-64 of the
// block's bytes [u.begin, u.end), seeded with seed_base XOR unit (seed_base
// as for version 1 blocks: BlockSeedBase of the header).
uint64_t ComputeUnitChecksum(std::span<const std::byte> block, const ChecksumUnit& u, uint64_t unit,
                             uint64_t seed_base);

class ReferenceLayout {
 public:
  // Checks the metadata of a reference table against its (validated)
  // header: record fields, every shard's entry, offsets inside the shard
  // size, rows adding up to row_count and units to block_count. Relative
  // shard files are resolved against `reference_dir`. Corruption names the
  // field.
  static Result<ReferenceLayout> Parse(const TableHeader& header, std::string_view metadata_text,
                                       const std::string& reference_dir);

  // Checksum units of `bytes` bytes at `offset`: the number of 4 KiB blocks
  // of the file's grid they touch.
  static uint64_t UnitsOf(uint64_t offset, uint64_t bytes);

  const std::vector<ReferenceShard>& shards() const { return shards_; }
  uint32_t weight_row_bytes() const { return weight_row_; }
  uint32_t scale_row_bytes() const { return scale_row_; }
  uint32_t record_bytes() const { return weight_row_ + scale_row_; }
  uint64_t row_count() const { return row_count_; }
  uint64_t unit_count() const { return unit_count_; }
  // Bytes of the shards the table references (weights and scales).
  uint64_t referenced_bytes() const { return (uint64_t{weight_row_} + scale_row_) * row_count_; }

  // The shard holding `row` (< row_count()).
  size_t ShardOfRow(uint64_t row) const;
  // `unit` < unit_count().
  ChecksumUnit Unit(uint64_t unit) const;
  // The pieces of `row`'s record, weight first; the scale's only if
  // `with_scale`. Returns how many were written to `out` (<= kMaxRowPieces).
  int RowPieces(uint64_t row, bool with_scale, RowPiece* out) const;

 private:
  std::vector<ReferenceShard> shards_;
  uint32_t weight_row_ = 0, scale_row_ = 0;
  uint64_t row_count_ = 0, unit_count_ = 0;
};

}  // namespace engram
