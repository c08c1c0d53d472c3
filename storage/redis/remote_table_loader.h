// Loading a table into a Redis Cluster (the keys and descriptor of
// remote_table_keys.h), from a table file or straight from a conversion's
// tensors, without a local copy of the table.
//
// Order, so that a half-loaded table never opens and a load can always be
// repeated or resumed:
//   1. If the descriptor names this table's fingerprint already, nothing is
//      written (a second load of the same table is a no-op).
//   2. The blocks are SET in windows of `window_blocks`, pipelined over every
//      master; after each window whose every SET succeeded, the progress key
//      records how many leading blocks are stored. A load that finds a
//      progress key for this fingerprint starts after what it records (a load
//      that was cut off resumes; SETs are idempotent, so a window written
//      twice is harmless).
//   3. The descriptor is SET last: from then on the table opens, at this
//      fingerprint. A descriptor of an older version is replaced, and with
//      drop_replaced that version's blocks are deleted afterwards (readers
//      that opened it keep reading them until then).
//   4. The progress key is deleted.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "engram/status.h"
#include "storage/redis/cluster_client.h"
#include "storage/redis/redis_url.h"
#include "storage/table_converter.h"
#include "storage/table_format.h"

namespace engram::redis {

// A table's stored header, metadata and data blocks, in order.
class BlockSource {
 public:
  virtual ~BlockSource() = default;
  // The header as stored (256 bytes; its fingerprint is the table's).
  virtual std::span<const std::byte> header_bytes() const = 0;
  virtual const TableHeader& header() const = 0;
  virtual const std::string& metadata() const = 0;
  // Blocks [first, first + dst.size() / 4096), sealed, into dst.
  virtual Status ReadBlocks(uint64_t first, std::span<std::byte> dst) = 0;
};

// The blocks of a table file (format version 1; a reference table is
// refused: convert it to a table first).
Result<std::unique_ptr<BlockSource>> OpenFileBlockSource(const std::string& path);

// The blocks a conversion of `spec` would write (ConvertToTable), made as
// they are loaded. Without options.writer.checksum_salt the salt is derived
// from the sources' paths, sizes and modification times and the metadata,
// so loading the same unchanged sources again finds the same fingerprint
// (nothing to do, or a resume), while a changed source gets a new one.
Result<std::unique_ptr<BlockSource>> OpenConvertBlockSource(const ConvertSpec& spec, const ConvertOptions& options);

struct LoadOptions {
  ClusterOptions cluster;  // the seeds and credentials come from the URL
  uint64_t window_blocks = 1024;
  bool drop_replaced = false;
  // After each window: blocks stored so far (resumed ones included), and all.
  std::function<void(uint64_t blocks_done, uint64_t blocks_total)> progress;
};

struct LoadResult {
  uint64_t fingerprint = 0;
  uint64_t blocks = 0;
  bool already_loaded = false;  // the descriptor named this table already
  uint64_t resumed_at = 0;      // blocks a cut-off load had stored (not written again)
  uint64_t replaced_fingerprint = 0;  // the version the descriptor named before (0: none)
  uint64_t dropped_blocks = 0;        // of that version, deleted (drop_replaced)
};

Result<LoadResult> LoadTable(const RedisUrl& url, BlockSource& source, const LoadOptions& options);

}  // namespace engram::redis
