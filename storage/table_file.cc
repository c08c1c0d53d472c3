#include "storage/table_file.h"

#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <vector>

#include "storage/bounded_json.h"
#include "storage/byte_order.h"
#include "storage/file_util.h"
#include "storage/embedded_hash_layout.h"
#include "storage/rank_shard.h"

namespace engram {

namespace {
constexpr size_t kVerifyChunkBlocks = 1024;  // 4 MiB sequential reads
}  // namespace

Result<std::unique_ptr<TableFile>> TableFile::Open(const std::string& path, const ReferenceOpenOptions& options) {
  ENGRAM_ASSIGN_OR_RETURN(int fd, fileutil::OpenReadOnly(path));
  std::unique_ptr<TableFile> t(new TableFile(path, fd));
  t->input_ = HoldInputFile(fd, path, "a table file");
  Status s = t->Load(options);
  if (!s.ok()) return s.WithContext(path);
  return t;
}

TableFile::~TableFile() {
  if (fd_ >= 0) ::close(fd_);
}

// The data section of a reference table: block_count checksums, checked
// against the header's checksums_xxh3, then zero padding.
Result<std::vector<uint64_t>> TableFile::LoadChecksums() const {
  std::vector<std::byte> section(header_.data_bytes);
  ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd_, section, header_.data_offset, path_));
  const uint64_t used = header_.block_count * 8;
  if (XXH3_64bits(section.data(), used) != header_.checksums_xxh3) {
    return Status::Corruption("reference table checksum section checksum mismatch");
  }
  for (uint64_t i = used; i < section.size(); ++i) {
    if (section[i] != std::byte{0}) return Status::Corruption("reference table checksum section padding is not zero");
  }
  std::vector<uint64_t> checksums(header_.block_count);
  for (uint64_t i = 0; i < checksums.size(); ++i) checksums[i] = LoadLe64(section.data() + i * 8);
  return checksums;
}

Status TableFile::Load(const ReferenceOpenOptions& options) {
  ENGRAM_ASSIGN_OR_RETURN(uint64_t size, fileutil::FileSize(fd_, path_));
  if (size < kTableBlockSize) {
    return Status::Corruption("file is " + std::to_string(size) + " bytes, too short for the " +
                              std::to_string(kTableBlockSize) + "-byte table header block");
  }
  std::vector<std::byte> block(kTableBlockSize);
  ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd_, block, 0, path_));
  ENGRAM_ASSIGN_OR_RETURN(header_, DecodeTableHeader(block, size));
  fingerprint_ = XXH3_64bits(block.data(), kTableHeaderBytes);
  geometry_ = TableGeometry(header_);

  // The metadata section and its zero padding (bounded by kMaxMetadataBytes),
  // read straight into the text that is kept: no second copy, even briefly.
  uint64_t padded = header_.file_bytes - header_.metadata_offset;
  metadata_text_.resize(padded);
  std::span<std::byte> section(reinterpret_cast<std::byte*>(metadata_text_.data()), padded);
  ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd_, section, header_.metadata_offset, path_));
  uint64_t hash = XXH3_64bits(section.data(), header_.metadata_bytes);
  if (hash != header_.metadata_xxh3) return Status::Corruption("metadata section checksum mismatch");
  for (uint64_t i = header_.metadata_bytes; i < padded; ++i) {
    if (section[i] != std::byte{0}) return Status::Corruption("metadata section padding is not zero");
  }
  metadata_text_.resize(header_.metadata_bytes);
  ENGRAM_RETURN_IF_ERROR(CheckMetadata());
  if (header_.is_reference()) {
    ENGRAM_ASSIGN_OR_RETURN(reference_, ReferenceTable::Open(path_, header_, metadata_text_, options,
                                                             [this] { return LoadChecksums(); }));
  }
  return Status::OK();
}

Result<std::unique_ptr<TableFile>> TableFile::FromParts(std::string path, std::span<const std::byte> header,
                                                        std::string metadata) {
  std::unique_ptr<TableFile> t(new TableFile(std::move(path), -1));
  if (header.size() != kTableHeaderBytes) return Status::Corruption(t->path_ + ": the header is not 256 bytes");
  std::vector<std::byte> block(kTableBlockSize);
  std::copy(header.begin(), header.end(), block.begin());
  // The size a file of this table would have: the parts are checked as a
  // file's header block and metadata section are.
  const uint64_t claimed = LoadLe64(header.data() + 88);
  auto decoded = DecodeTableHeader(block, claimed);
  if (!decoded.ok()) return decoded.status().WithContext(t->path_);
  t->header_ = *decoded;
  if (t->header_.is_reference()) {
    return Status::Unsupported(t->path_ + ": a reference table (format version 2) cannot be served remotely");
  }
  t->fingerprint_ = XXH3_64bits(block.data(), kTableHeaderBytes);
  t->geometry_ = TableGeometry(t->header_);
  if (metadata.size() != t->header_.metadata_bytes ||
      XXH3_64bits(metadata.data(), metadata.size()) != t->header_.metadata_xxh3) {
    return Status::Corruption(t->path_ + ": metadata section checksum mismatch");
  }
  t->metadata_text_ = std::move(metadata);
  Status s = t->CheckMetadata();
  if (!s.ok()) return s.WithContext(t->path_);
  return t;
}

Status TableFile::CheckMetadata() {
  static constexpr std::string_view kChecked[] = {"hash_layout", "rank_shard"};
  auto checked = ParseBoundedJsonMembers(metadata_text_, kChecked);
  if (!checked.ok()) return Status::Corruption("metadata section: " + checked.status().message());
  const nlohmann::json* layout = checked->contains("hash_layout") ? &(*checked)["hash_layout"] : nullptr;
  if (checked->contains("rank_shard")) {
    // A rank table: its layout is the full layer's, checked against the
    // unsharded table's rows, and its rows must be exactly its slots'.
    auto shard = ParseRankShard((*checked)["rank_shard"], layout, header_.row_count);
    if (!shard.ok()) return Status::Corruption("metadata: " + shard.status().message());
    rank_shard_ = std::move(shard).value();
  } else if (layout != nullptr) {
    Status s = ValidateHashLayout(*layout, header_.row_count);
    if (!s.ok()) return Status::Corruption("metadata: " + s.message());
  }
  return Status::OK();
}

Result<nlohmann::json> TableFile::ParseMetadata() const {
  auto parsed = ParseBoundedJson(metadata_text_);
  if (!parsed.ok()) return Status::Corruption(path_ + ": metadata section: " + parsed.status().message());
  return parsed;
}

Result<nlohmann::json> TableFile::MetadataMembers(std::span<const std::string_view> keys) const {
  auto parsed = ParseBoundedJsonMembers(metadata_text_, keys);
  if (!parsed.ok()) return Status::Corruption(path_ + ": metadata section: " + parsed.status().message());
  return parsed;
}

Status TableFile::VerifyBlock(uint64_t block_index, std::span<const std::byte> block) const {
  if (reference_) return reference_->VerifyUnit(block_index, block);
  if (block_index >= header_.block_count) {
    return Status::OutOfRange("block " + std::to_string(block_index) + " is past the end of " + path_ + " (" +
                              std::to_string(header_.block_count) + " blocks)");
  }
  Status s = VerifyBlockChecksum(block, block_index, BlockSeedBase(header_));
  if (s.ok()) return s;
  uint64_t first = geometry_.FirstRowOfBlock(block_index);
  uint64_t last = first + geometry_.RowsInBlock(block_index) - 1;
  return Status(s.code(), path_ + ": " + s.message() + " (rows " + std::to_string(first) + ".." +
                              std::to_string(last) + ", file offset " +
                              std::to_string(geometry_.BlockOffset(block_index)) + ")");
}

Status TableFile::NoFile() const {
  return Status::Unsupported(path_ + " has no local file: its blocks are read through its remote reader");
}

Status TableFile::ReadBlock(uint64_t block_index, std::span<std::byte> dst) const {
  if (dst.size() != kTableBlockSize) {
    return Status::InvalidArgument("ReadBlock buffer is " + std::to_string(dst.size()) + " bytes, expected " +
                                   std::to_string(kTableBlockSize));
  }
  if (block_index >= header_.block_count) return VerifyBlock(block_index, dst);  // OutOfRange
  if (reference_) return reference_->ReadUnit(block_index, dst);
  if (is_remote()) return NoFile();
  ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd_, dst, geometry_.BlockOffset(block_index), path_));
  return VerifyBlock(block_index, dst);
}

Status TableFile::ReadRow(uint64_t row, std::span<std::byte> dst) const {
  ENGRAM_RETURN_IF_ERROR(geometry_.CheckRow(row).WithContext(path_));
  if (reference_) return reference_->ReadRow(row, dst);
  if (dst.size() != header_.record_bytes) {
    return Status::InvalidArgument("ReadRow buffer is " + std::to_string(dst.size()) + " bytes, records are " +
                                   std::to_string(header_.record_bytes));
  }
  alignas(64) std::byte block[kTableBlockSize];
  ENGRAM_RETURN_IF_ERROR(ReadBlock(geometry_.BlockOfRow(row), block));
  std::memcpy(dst.data(), block + geometry_.RowOffsetInBlock(row), header_.record_bytes);
  return Status::OK();
}

Status TableFile::VerifyAll(const ProgressFn& progress) const {
  if (reference_) return reference_->VerifyAll(progress);
  if (is_remote()) return NoFile();
  const uint64_t total = header_.block_count;
  std::vector<std::byte> chunk(kVerifyChunkBlocks * kTableBlockSize);
  for (uint64_t b = 0; b < total;) {
    uint64_t n = std::min<uint64_t>(kVerifyChunkBlocks, total - b);
    std::span<std::byte> span(chunk.data(), n * kTableBlockSize);
    ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd_, span, geometry_.BlockOffset(b), path_));
    for (uint64_t i = 0; i < n; ++i) {
      ENGRAM_RETURN_IF_ERROR(VerifyBlock(b + i, span.subspan(i * kTableBlockSize, kTableBlockSize)));
    }
    b += n;
    if (progress) progress(b, total);
  }
  if (progress && total == 0) progress(0, 0);
  return Status::OK();
}

}  // namespace engram
