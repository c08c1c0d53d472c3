#include "storage/reference_table.h"

#include <sys/stat.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "storage/byte_order.h"
#include "storage/safetensors_header.h"

namespace engram {

namespace {

constexpr uint64_t kScanChunkBlocks = 1024;  // 4 MiB sequential reads
constexpr uint64_t kFingerprintSamples = 64;

}  // namespace

Result<int64_t> FileMtimeNanos(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno("fstat " + path, errno);
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

Result<uint64_t> ShardFingerprint(int fd, uint64_t size, const std::string& path) {
  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr) return Status::ResourceExhausted("XXH3 state");
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> owner(state, XXH3_freeState);
  XXH3_64bits_reset(state);
  std::byte length[8] = {};
  ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd, std::span(length, std::min<uint64_t>(size, 8)), 0, path));
  uint64_t head = size;
  if (size >= 8) head = std::min<uint64_t>(size, 8 + std::min(LoadLe64(length), kSafetensorsMaxHeaderBytes));
  std::vector<std::byte> buf(1 << 20);
  for (uint64_t at = 0; at < head;) {
    const uint64_t n = std::min<uint64_t>(buf.size(), head - at);
    ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd, std::span(buf.data(), n), at, path));
    XXH3_64bits_update(state, buf.data(), n);
    at += n;
  }
  if (size > 0) {
    const uint64_t blocks = (size + kTableBlockSize - 1) / kTableBlockSize;
    for (uint64_t k = 0; k < kFingerprintSamples; ++k) {
      const uint64_t at = blocks * k / kFingerprintSamples * kTableBlockSize;
      const uint64_t n = std::min<uint64_t>(kTableBlockSize, size - at);
      ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd, std::span(buf.data(), n), at, path));
      XXH3_64bits_update(state, buf.data(), n);
    }
  }
  return XXH3_64bits_digest(state);
}

Result<std::unique_ptr<ReferenceTable>> ReferenceTable::Open(const std::string& reference_path,
                                                             const TableHeader& header,
                                                             std::string_view metadata_text,
                                                             const ReferenceOpenOptions& options,
                                                             const ChecksumLoader& load_checksums) {
  std::unique_ptr<ReferenceTable> t(new ReferenceTable());
  t->path_ = reference_path;
  t->seed_base_ = BlockSeedBase(header);
  ENGRAM_ASSIGN_OR_RETURN(t->layout_, ReferenceLayout::Parse(header, metadata_text, DirectoryOf(reference_path)));
  const auto& shards = t->layout_.shards();
  for (size_t i = 0; i < shards.size(); ++i) {
    const ReferenceShard& s = shards[i];
    const std::string which = "shard " + std::to_string(i) + " '" + s.path + "'";
    auto fd = fileutil::OpenReadOnly(s.path);
    if (!fd.ok()) return Status(fd.status().code(), which + ": " + fd.status().message());
    fileutil::ScopedFd owned(*fd);
    ENGRAM_ASSIGN_OR_RETURN(uint64_t size, fileutil::FileSize(owned.get(), s.path));
    ENGRAM_ASSIGN_OR_RETURN(int64_t mtime, FileMtimeNanos(owned.get(), s.path));
    const std::string changed = which + " is not the file this reference table was written for";
    if (size != s.size) {
      return Status::Corruption(changed + ": it is " + std::to_string(size) + " bytes, the reference recorded " +
                                        std::to_string(s.size) + (size < s.size ? " (truncated)" : " (replaced)"));
    }
    if (mtime != s.mtime_ns) {
      return Status::Corruption(changed + ": modified since (mtime " + std::to_string(mtime) +
                                        " ns, the reference recorded " + std::to_string(s.mtime_ns) +
                                        " ns); re-run engram-convert --in-place if it was replaced on purpose");
    }
    if (options.check_fingerprints) {
      ENGRAM_ASSIGN_OR_RETURN(uint64_t fp, ShardFingerprint(owned.get(), size, s.path));
      if (fp != s.fingerprint) {
        return Status::Corruption(changed + ": fingerprint " + Hex64(fp) + ", the reference recorded " +
                                          Hex64(s.fingerprint));
      }
    }
    t->inputs_.push_back(HoldInputFile(owned.get(), s.path, "a shard of reference table " + reference_path));
    t->fds_.push_back(std::move(owned));
  }
  ENGRAM_ASSIGN_OR_RETURN(t->checksums_, load_checksums());
  if (t->checksums_.size() != t->layout_.unit_count()) {
    return Status::Corruption("reference table has " + std::to_string(t->checksums_.size()) + " checksums for " +
                              std::to_string(t->layout_.unit_count()) + " blocks");
  }
  return t;
}

Status ReferenceTable::VerifyUnit(uint64_t unit, std::span<const std::byte> block) const {
  if (unit >= checksums_.size()) {
    return Status::OutOfRange("block " + std::to_string(unit) + " is past the end of " + path_ + " (" +
                              std::to_string(checksums_.size()) + " blocks)");
  }
  if (block.size() != kTableBlockSize) {
    return Status::InvalidArgument("block buffer is " + std::to_string(block.size()) + " bytes, expected " +
                                   std::to_string(kTableBlockSize));
  }
  const ChecksumUnit u = layout_.Unit(unit);
  const uint64_t computed = ComputeUnitChecksum(block, u, unit, seed_base_);
  if (computed == checksums_[unit]) return Status::OK();
  return Status::Corruption(layout_.shards()[u.shard].path + ": block at offset " + std::to_string(u.file_offset) +
                            " (checksum " + std::to_string(unit) + " of " + path_ + ") checksum mismatch: stored " +
                            Hex64(checksums_[unit]) + ", computed " + Hex64(computed));
}

Status ReferenceTable::ReadUnit(uint64_t unit, std::span<std::byte> block) const {
  if (unit >= checksums_.size() || block.size() != kTableBlockSize) return VerifyUnit(unit, block);
  const ChecksumUnit u = layout_.Unit(unit);
  const ReferenceShard& s = layout_.shards()[u.shard];
  const uint64_t n = std::min<uint64_t>(kTableBlockSize, s.size - u.file_offset);
  std::memset(block.data() + n, 0, kTableBlockSize - n);
  ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fds_[u.shard].get(), block.first(n), u.file_offset, s.path));
  return VerifyUnit(unit, block);
}

Status ReferenceTable::ReadRow(uint64_t row, std::span<std::byte> dst) const {
  if (row >= layout_.row_count()) {
    return Status::OutOfRange("row " + std::to_string(row) + " is past the end of the table (" +
                              std::to_string(layout_.row_count()) + " rows)");
  }
  if (dst.size() != layout_.record_bytes()) {
    return Status::InvalidArgument("ReadRow buffer is " + std::to_string(dst.size()) + " bytes, records are " +
                                   std::to_string(layout_.record_bytes()));
  }
  RowPiece pieces[kMaxRowPieces];
  const int n = layout_.RowPieces(row, true, pieces);
  alignas(64) std::byte block[kTableBlockSize];
  for (int i = 0; i < n; ++i) {
    ENGRAM_RETURN_IF_ERROR(ReadUnit(pieces[i].unit, block));
    std::memcpy(dst.data() + pieces[i].record_offset, block + pieces[i].block_offset, pieces[i].bytes);
  }
  return Status::OK();
}

Status ScanShardRegion(int fd, const ReferenceShard& s, uint64_t first_unit, uint64_t region, uint64_t bytes,
                       const UnitFn& unit_fn, const RegionBytesFn& region_fn) {
  const uint64_t units = ReferenceLayout::UnitsOf(region, bytes);
  const uint64_t base = region / kTableBlockSize * kTableBlockSize;
  std::vector<std::byte> buf(std::min(kScanChunkBlocks, units) * kTableBlockSize);
  for (uint64_t k = 0; k < units;) {
    const uint64_t n = std::min(kScanChunkBlocks, units - k);
    const uint64_t at = base + k * kTableBlockSize;
    const uint64_t len = std::min<uint64_t>(n * kTableBlockSize, s.size - at);
    std::memset(buf.data() + len, 0, n * kTableBlockSize - len);
    ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd, std::span(buf.data(), len), at, s.path));
    for (uint64_t i = 0; i < n; ++i) {
      ENGRAM_RETURN_IF_ERROR(
          unit_fn(first_unit + k + i, std::span<const std::byte>(buf.data() + i * kTableBlockSize, kTableBlockSize)));
    }
    if (region_fn) {
      const uint64_t from = std::max(at, region), to = std::min(at + n * kTableBlockSize, region + bytes);
      region_fn(from - region, std::span<const std::byte>(buf.data() + (from - at), to - from));
    }
    k += n;
  }
  return Status::OK();
}

Status ReferenceTable::ReadScales(std::span<std::byte> dst) const {
  const uint64_t srow = layout_.scale_row_bytes();
  if (dst.size() != layout_.row_count() * srow) {
    return Status::InvalidArgument("ReadScales buffer is " + std::to_string(dst.size()) + " bytes, expected " +
                                   std::to_string(layout_.row_count() * srow));
  }
  auto verify = [&](uint64_t unit, std::span<const std::byte> block) { return VerifyUnit(unit, block); };
  for (size_t i = 0; i < layout_.shards().size(); ++i) {
    const ReferenceShard& s = layout_.shards()[i];
    std::byte* shard_dst = dst.data() + s.first_row * srow;
    ENGRAM_RETURN_IF_ERROR(ScanShardRegion(fds_[i].get(), s, s.scale_units, s.scale_offset, s.rows * srow, verify,
                                      [&](uint64_t off, std::span<const std::byte> bytes) {
                                        std::memcpy(shard_dst + off, bytes.data(), bytes.size());
                                      }));
  }
  return Status::OK();
}

Status ReferenceTable::VerifyAll(const ProgressFn& progress) const {
  uint64_t done = 0;
  const uint64_t total = layout_.unit_count();
  auto verify = [&](uint64_t unit, std::span<const std::byte> block) {
    ++done;
    if (progress && done % kScanChunkBlocks == 0) progress(done, total);
    return VerifyUnit(unit, block);
  };
  for (size_t i = 0; i < layout_.shards().size(); ++i) {
    const ReferenceShard& s = layout_.shards()[i];
    ENGRAM_RETURN_IF_ERROR(ScanShardRegion(fds_[i].get(), s, s.weight_units, s.weight_offset,
                                           s.rows * layout_.weight_row_bytes(), verify));
    ENGRAM_RETURN_IF_ERROR(ScanShardRegion(fds_[i].get(), s, s.scale_units, s.scale_offset,
                                           s.rows * layout_.scale_row_bytes(), verify));
  }
  if (progress) progress(done, total);
  return Status::OK();
}

}  // namespace engram
