// TableFile: an open, validated Engram table file: a table of its own rows
// (format version 1) or a reference table (version 2) whose rows stay in the
// safetensors shards it names (storage/reference_table.h).
//
// Open() reads and checks the header (every field, against the file size) and
// the metadata section (length, checksum, JSON, embedded hash layout). Data
// blocks are not read at open; each is verified when read (ReadBlock,
// ReadRow) or by VerifyAll().
//
// The metadata is kept as its text only: a parsed tree costs over ten times
// the text (61.6 MB of metadata held 790 MB for as long as the table was
// open). Open checks the JSON without building it (ParseBoundedJsonMembers,
// keeping only the hash layout, which it validates); callers parse what
// they need when they need it (ParseMetadata, MetadataMembers).
//
// The geometry helpers and VerifyBlock() are pure (no I/O): I/O backends read
// 4 KiB blocks at BlockOffset() however they like (io_uring, O_DIRECT, mmap)
// and hand the buffer to VerifyBlock(). ReadRow/ReadBlock use pread on the
// file's own descriptor and are meant for tools and tests.
//
// A reference table opens, reads rows and verifies like any table: Open
// also loads its block checksums and checks its shards (reference()), and
// ReadRow / VerifyAll read the shards. Its "blocks" are its checksum units
// (ReadBlock, VerifyBlock, block_count); the block geometry helpers
// (BlockOfRow, BlockOffset, RowOffsetInBlock) describe version 1 only.
//
// While open, the table file (and a reference table's shards) is recorded as
// an input of the process (storage/input_files.h): nothing the process writes
// may replace it.
//
// Thread safety: all const methods may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engram/status.h"
#include "storage/input_files.h"
#include "storage/rank_shard.h"
#include "storage/reference_table.h"
#include "storage/table_format.h"

namespace engram {

class TableFile {
 public:
  // `options` apply to reference tables (shard fingerprints).
  static Result<std::unique_ptr<TableFile>> Open(const std::string& path, const ReferenceOpenOptions& options = {});
  // A table whose blocks live elsewhere (a Redis Cluster, storage/redis/
  // remote_table.h): its stored 256-byte header and its metadata, checked as
  // Open checks a file's header block and metadata section. `path` names it
  // (a URL without credentials). Version 1 only. It has no descriptor:
  // ReadBlock, ReadRow and VerifyAll fail with Unsupported; its reader
  // fetches blocks and checks them with VerifyBlock.
  static Result<std::unique_ptr<TableFile>> FromParts(std::string path, std::span<const std::byte> header,
                                                      std::string metadata);
  ~TableFile();
  TableFile(const TableFile&) = delete;
  TableFile& operator=(const TableFile&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  const TableHeader& header() const { return header_; }
  const TableGeometry& geometry() const { return geometry_; }
  // The shards and checksums of a reference table; nullptr for version 1.
  const ReferenceTable* reference() const { return reference_.get(); }
  bool is_reference() const { return reference_ != nullptr; }
  // Made by FromParts: no file of its own.
  bool is_remote() const { return fd_ < 0; }
  // The metadata section as stored (a JSON object, checked at open).
  const std::string& metadata_text() const { return metadata_text_; }
  // The whole metadata, parsed now: costs a tree of the whole text, so
  // for display, not for a few fields of a large section.
  Result<nlohmann::json> ParseMetadata() const;
  // Only the named top-level members of the metadata (those present), parsed
  // now; memory is that of those members.
  Result<nlohmann::json> MetadataMembers(std::span<const std::string_view> keys) const;

  uint64_t row_count() const { return header_.row_count; }
  uint32_t record_bytes() const { return header_.record_bytes; }
  uint32_t rows_per_block() const { return header_.rows_per_block; }
  uint64_t block_count() const { return header_.block_count; }
  uint64_t file_bytes() const { return header_.file_bytes; }
  // Identifies this file's contents: XXH3-64 (seed 0) of the header's 256
  // bytes as stored. The header holds the metadata's checksum, the sizes and
  // the random per-file checksum salt (and, for a reference table, the
  // checksum of its block checksums), so a rewritten or another table has
  // another fingerprint, while a copy or a rename keeps it. Rank manifests
  // and hot-set files name the table they were made for by it.
  uint64_t fingerprint() const { return fingerprint_; }
  // A rank table's "rank_shard" (storage/rank_shard.h), validated at open;
  // nullptr for an unsharded table.
  const RankShard* rank_shard() const { return rank_shard_ ? &*rank_shard_ : nullptr; }

  uint64_t BlockOfRow(uint64_t row) const { return geometry_.BlockOfRow(row); }
  uint64_t BlockOffset(uint64_t block) const { return geometry_.BlockOffset(block); }
  uint32_t RowOffsetInBlock(uint64_t row) const { return geometry_.RowOffsetInBlock(row); }
  Status CheckRow(uint64_t row) const { return geometry_.CheckRow(row); }

  // Checks a 4096-byte block read from BlockOffset(block_index). Pure.
  // Corruption names the block, its rows and the file.
  Status VerifyBlock(uint64_t block_index, std::span<const std::byte> block) const;

  // pread + VerifyBlock. dst must be kTableBlockSize bytes.
  Status ReadBlock(uint64_t block_index, std::span<std::byte> dst) const;

  // Reads the row's block, verifies it, copies the record into dst
  // (dst.size() must equal record_bytes()).
  Status ReadRow(uint64_t row, std::span<std::byte> dst) const;

  // Reads every data block in large sequential chunks and verifies it.
  // Returns the first failure (naming the block). progress(done, total) is
  // called in blocks, now and then and at the end.
  using ProgressFn = std::function<void(uint64_t blocks_done, uint64_t blocks_total)>;
  Status VerifyAll(const ProgressFn& progress = {}) const;

 private:
  TableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  Status Load(const ReferenceOpenOptions& options);
  // The metadata's embedded hash layout and rank shard, against the header.
  Status CheckMetadata();
  Status NoFile() const;
  Result<std::vector<uint64_t>> LoadChecksums() const;

  std::string path_;
  int fd_ = -1;
  InputFileHold input_;
  TableHeader header_;
  uint64_t fingerprint_ = 0;
  TableGeometry geometry_;
  std::string metadata_text_;
  std::unique_ptr<ReferenceTable> reference_;
  std::optional<RankShard> rank_shard_;
};

}  // namespace engram
