// Where a table's bytes live in a Redis Cluster, and the descriptor that
// makes a loaded table visible.
//
// Keys of the table NAME whose stored header has fingerprint FP (16 hex
// digits, TableFile::fingerprint()):
//
//   engram:NAME                 the descriptor, written last by a load
//   engram:NAME:FP:{B}          data block B (decimal), its 4096 bytes as in
//                               the file, checksum trailer included
//   engram:NAME:FP:loaded       an unfinished load's progress: blocks
//                               [0, value) are stored (decimal)
//
// The hash tag {B} puts each block in the slot of its number, so a table's
// blocks spread over every master (and a gather's misses over every
// connection); NAME has no braces (CheckTableName), so the tag is the only
// one. The fingerprint in every block key keeps two tables, or two versions
// of one table, from ever mixing: a reader reads the blocks of the
// fingerprint its descriptor names, and each block is still checked against
// that table's checksum salt and index (the block's XXH3 trailer).
//
// The descriptor (version 1), little-endian:
//   0    8  magic "ENGRAMRD"
//   8    4  version = 1
//   12   4  header bytes = 256
//   16   8  fingerprint = XXH3-64 (seed 0) of the header
//   24   8  block_count (= the header's)
//   32   8  metadata bytes (= the header's metadata_bytes)
//   40 256  the table's header, as stored in its file (format version 1)
//   296  M  the metadata JSON, as stored
//   ..   8  XXH3-64 (seed 0) of every byte before it
//
// Pure.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engram/status.h"
#include "storage/table_format.h"

namespace engram::redis {

std::string DescriptorKey(std::string_view name);

class RemoteTableKeys {
 public:
  RemoteTableKeys(std::string_view name, uint64_t fingerprint);
  const std::string& descriptor() const { return descriptor_; }
  std::string Block(uint64_t block) const { return block_prefix_ + std::to_string(block) + "}"; }
  // The same, written into `out` (its storage reused).
  void Block(uint64_t block, std::string* out) const;
  const std::string& progress() const { return progress_; }

 private:
  std::string descriptor_;
  std::string block_prefix_;  // "engram:NAME:FP:{"
  std::string progress_;
};

struct RemoteDescriptor {
  std::array<std::byte, kTableHeaderBytes> header{};  // as stored in the file
  std::string metadata;
  uint64_t fingerprint = 0;
  uint64_t block_count = 0;
};

std::string EncodeDescriptor(const RemoteDescriptor& d);
// Checks the framing, the checksum, and that the fingerprint is the
// header's; the header and metadata themselves are checked by whoever opens
// them (TableFile::FromParts). Corruption names `where`.
Result<RemoteDescriptor> DecodeDescriptor(std::string_view value, std::string_view where);

std::string FingerprintHex(uint64_t fingerprint);

}  // namespace engram::redis
