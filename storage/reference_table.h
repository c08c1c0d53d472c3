// ReferenceTable: the open shards of a reference table (format version 2)
// and the checksums that vouch for the bytes it references.
//
// Open() checks every shard against what the reference recorded: it must
// exist, have the recorded size and modification time (always; a stat per
// shard) and, when asked (ReferenceOpenOptions::check_fingerprints), the
// recorded fingerprint (a few MiB read per shard). A replaced or truncated
// shard is refused with a message naming it and what changed.
//
// Reads: VerifyUnit is pure -- the store's I/O backends read a unit's
// aligned 4 KiB block however they like and hand it here. ReadRow, ReadScales
// and VerifyAll use pread on the shards' own descriptors (tools, tests,
// loading scales at open).
//
// Thread safety: all const methods may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engram/status.h"
#include "storage/file_util.h"
#include "storage/input_files.h"
#include "storage/reference_layout.h"
#include "storage/table_format.h"

namespace engram {

struct ReferenceOpenOptions {
  // Also compare each shard's fingerprint (ShardFingerprint) with the
  // recorded one: catches a shard replaced by one of the same size whose
  // modification time was preserved or forged.
  bool check_fingerprints = false;
};

// XXH3-64 of a shard's safetensors header (its first 8 + N bytes, N capped
// at the file size and 100 MiB) followed by 64 blocks of up to 4 KiB spread
// evenly over the file. Cheap (a few MiB read), and it changes when the
// tensor table or any sampled block changes; the per-block checksums, not
// this, vouch for every referenced byte (VerifyAll).
Result<uint64_t> ShardFingerprint(int fd, uint64_t size, const std::string& path);

// Modification time of an open file in nanoseconds since the epoch.
Result<int64_t> FileMtimeNanos(int fd, const std::string& path);

// Reads one tensor region of shard `s` -- the units of `bytes` bytes at file
// offset `region`, numbered from `first_unit` -- in 4 MiB sequential reads.
// Calls unit_fn(unit, its 4 KiB block, zero past the shard's end) for each
// unit in order (stopping at its first error), then region_fn(offset in the
// region, bytes) with the region's bytes of each chunk read.
using UnitFn = std::function<Status(uint64_t unit, std::span<const std::byte> block)>;
using RegionBytesFn = std::function<void(uint64_t region_offset, std::span<const std::byte> bytes)>;
Status ScanShardRegion(int fd, const ReferenceShard& s, uint64_t first_unit, uint64_t region, uint64_t bytes,
                       const UnitFn& unit_fn, const RegionBytesFn& region_fn = {});

class ReferenceTable {
 public:
  // `reference_path` names the reference file (for messages and for
  // resolving relative shard files). `load_checksums` reads the table's
  // checksum section (checked against the header's checksums_xxh3); it is
  // called only once the metadata and every shard have passed their checks,
  // so the memory it takes is bounded by the real shards' sizes (8 B per
  // 4 KiB), not by a header's say-so.
  using ChecksumLoader = std::function<Result<std::vector<uint64_t>>()>;
  static Result<std::unique_ptr<ReferenceTable>> Open(const std::string& reference_path, const TableHeader& header,
                                                      std::string_view metadata_text,
                                                      const ReferenceOpenOptions& options,
                                                      const ChecksumLoader& load_checksums);

  const ReferenceLayout& layout() const { return layout_; }
  const std::vector<ReferenceShard>& shards() const { return layout_.shards(); }

  // Checks a 4 KiB block read at Unit(unit).file_offset of its shard: the
  // XXH3-64 of its bytes [begin, end), seeded with the table's seed base
  // XOR unit, must equal the stored checksum. Corruption names the shard,
  // the file offset and the unit.
  Status VerifyUnit(uint64_t unit, std::span<const std::byte> block) const;

  // pread of the unit's 4 KiB block (zero past the shard's end) + VerifyUnit.
  Status ReadUnit(uint64_t unit, std::span<std::byte> block) const;

  // Reads the units holding `row`, verifies them and assembles the record
  // (weight || scale) into dst (record_bytes bytes).
  Status ReadRow(uint64_t row, std::span<std::byte> dst) const;

  // Reads every scale row, verified, into dst (row_count * scale_row_bytes
  // bytes, row r at r * scale_row_bytes).
  Status ReadScales(std::span<std::byte> dst) const;

  // Reads every unit (in large sequential reads per tensor) and verifies
  // it. progress(done, total) in units.
  using ProgressFn = std::function<void(uint64_t units_done, uint64_t units_total)>;
  Status VerifyAll(const ProgressFn& progress = {}) const;

 private:
  ReferenceTable() = default;

  std::string path_;
  uint64_t seed_base_ = 0;
  ReferenceLayout layout_;
  std::vector<uint64_t> checksums_;
  std::vector<fileutil::ScopedFd> fds_;  // one per shard
  std::vector<InputFileHold> inputs_;    // the shards, as inputs of the process
};

}  // namespace engram
