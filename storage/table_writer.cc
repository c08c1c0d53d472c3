#include "storage/table_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "storage/file_util.h"
#include "storage/input_files.h"
#include "storage/log.h"
#include "storage/temp_file_cleanup.h"

namespace engram {

uint64_t RandomChecksumSalt() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

Result<std::unique_ptr<TableWriter>> TableWriter::Create(const std::string& path, TableWriterOptions options) {
  if (path.empty() || path.back() == '/') return Status::InvalidArgument("table path '" + path + "' names no file");
  if (RowsPerBlock(options.record_bytes) == 0) {
    return Status::InvalidArgument("record_bytes " + std::to_string(options.record_bytes) + " is not in [1, " +
                                   std::to_string(kMaxRecordBytes) + "]");
  }
  if (!options.metadata.is_object()) return Status::InvalidArgument("table metadata must be a JSON object");
  ENGRAM_RETURN_IF_ERROR(CheckOutputPath(path, "output table"));
  std::string temp;
  ENGRAM_ASSIGN_OR_RETURN(int fd, fileutil::CreateTempFileFor(path, &temp));
  uint64_t salt = options.checksum_salt ? *options.checksum_salt : RandomChecksumSalt();
  std::unique_ptr<TableWriter> w(new TableWriter(path, temp, fd, std::move(options), salt));
  // Reserve the header block as zeros: the file cannot open as a table until
  // Finish() overwrites it.
  std::vector<std::byte> zeros(kTableBlockSize);
  ENGRAM_RETURN_IF_ERROR(w->Fail(fileutil::PwriteAll(fd, zeros, 0, temp)));
  w->file_offset_ = kTableBlockSize;
  return w;
}

TableWriter::TableWriter(std::string path, std::string temp_path, int fd, TableWriterOptions options, uint64_t salt)
    : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd), options_(std::move(options)), salt_(salt),
      rows_per_block_(RowsPerBlock(options_.record_bytes)), temp_token_(RegisterTempFile(temp_path_)) {
  size_t blocks = std::max<size_t>(1, options_.buffer_bytes / kTableBlockSize);
  for (auto& b : buffers_) b.assign(blocks * kTableBlockSize, std::byte{0});
  writer_ = std::make_unique<BackgroundWriter>(fd_, temp_path_, options_.sync && options_.early_writeback);
}

TableWriter::~TableWriter() {
  if (!finished_) Abandon();
}

Status TableWriter::Fail(Status s) {
  if (!s.ok() && error_.ok()) error_ = s;
  return s;
}

void TableWriter::Abandon() {
  if (abandoned_ || finished_) return;
  abandoned_ = true;
  writer_.reset();  // waits for a write in flight before the fd goes away
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_path_.c_str());
  UnregisterTempFile(temp_token_);
  temp_token_ = -1;
  if (error_.ok()) error_ = Status::Cancelled("table writer for " + path_ + " was abandoned");
}

Status TableWriter::SealCurrentBlock() {
  std::span<std::byte> block(buffers_[active_].data() + buffer_blocks_used_ * kTableBlockSize, kTableBlockSize);
  SealBlock(block, blocks_written_, BlockSeedBase(salt_, options_.record_bytes));
  ++blocks_written_;
  ++buffer_blocks_used_;
  rows_in_block_ = 0;
  if (buffer_blocks_used_ * kTableBlockSize == buffers_[active_].size()) return FlushBuffer();
  return Status::OK();
}

Status TableWriter::FlushBuffer() {
  size_t bytes = buffer_blocks_used_ * kTableBlockSize;
  ENGRAM_RETURN_IF_ERROR(Fail(writer_->Submit(std::span(buffers_[active_].data(), bytes), file_offset_)));
  file_offset_ += bytes;
  buffer_blocks_used_ = 0;
  // Switch to the other buffer. Submit() waited for its write, so it is free;
  // blocks are sealed with zero padding, so it must be zero again.
  active_ ^= 1;
  std::memset(buffers_[active_].data(), 0, buffers_[active_].size());
  return Status::OK();
}

std::span<std::byte> TableWriter::RecordSlots(uint64_t max_records) {
  if (!error_.ok() || finished_ || max_records == 0) return {};
  const uint32_t rb = options_.record_bytes;
  uint64_t n = std::min<uint64_t>(rows_per_block_ - rows_in_block_, max_records);
  std::byte* dst = buffers_[active_].data() + buffer_blocks_used_ * kTableBlockSize + size_t{rows_in_block_} * rb;
  return {dst, n * rb};
}

Status TableWriter::CommitRecords(uint64_t n) {
  if (!error_.ok()) return error_;
  if (finished_) return Status::InvalidArgument("table " + path_ + " is already finished");
  if (n > rows_per_block_ - rows_in_block_) {
    return Fail(Status::Internal("CommitRecords(" + std::to_string(n) + ") past the end of the block"));
  }
  rows_in_block_ += static_cast<uint32_t>(n);
  rows_written_ += n;
  if (rows_in_block_ == rows_per_block_) return SealCurrentBlock();
  return Status::OK();
}

Status TableWriter::AppendRecords(std::span<const std::byte> records) {
  if (!error_.ok()) return error_;
  if (finished_) return Status::InvalidArgument("table " + path_ + " is already finished");
  const uint32_t rb = options_.record_bytes;
  if (records.size() % rb != 0) {
    return Status::InvalidArgument("append of " + std::to_string(records.size()) +
                                   " bytes is not a whole number of " + std::to_string(rb) + "-byte records");
  }
  size_t pos = 0;
  while (pos < records.size()) {
    // As many records as fit in the current block, in one memcpy.
    std::span<std::byte> slots = RecordSlots((records.size() - pos) / rb);
    std::memcpy(slots.data(), records.data() + pos, slots.size());
    pos += slots.size();
    ENGRAM_RETURN_IF_ERROR(CommitRecords(slots.size() / rb));
  }
  return Status::OK();
}

Status TableWriter::Finish() {
  if (!error_.ok()) return error_;
  if (finished_) return Status::InvalidArgument("table " + path_ + " is already finished");
  if (!options_.metadata.is_object()) return Fail(Status::InvalidArgument("table metadata must be a JSON object"));
  if (rows_in_block_ > 0) ENGRAM_RETURN_IF_ERROR(SealCurrentBlock());
  if (buffer_blocks_used_ > 0) ENGRAM_RETURN_IF_ERROR(FlushBuffer());
  ENGRAM_RETURN_IF_ERROR(Fail(writer_->Wait()));

  std::string meta = options_.metadata.dump(-1, ' ', /*ensure_ascii=*/false,
                                            nlohmann::json::error_handler_t::replace);
  uint64_t meta_hash = XXH3_64bits(meta.data(), meta.size());
  auto header = MakeTableHeader(options_.record_bytes, rows_written_, meta.size(), meta_hash, salt_);
  if (!header.ok()) return Fail(header.status().WithContext(path_));
  header_ = *header;
  if (header_.block_count != blocks_written_) {
    return Fail(Status::Internal("wrote " + std::to_string(blocks_written_) + " blocks, header expects " +
                                 std::to_string(header_.block_count)));
  }
  // Metadata, zero padded to a whole block.
  std::vector<std::byte> meta_section((meta.size() + kTableBlockSize - 1) / kTableBlockSize * kTableBlockSize);
  std::memcpy(meta_section.data(), meta.data(), meta.size());
  ENGRAM_RETURN_IF_ERROR(Fail(fileutil::PwriteAll(fd_, meta_section, file_offset_, temp_path_)));

  // Data and metadata must be durable before the header that vouches for them.
  if (options_.sync && ::fdatasync(fd_) != 0) return Fail(Status::FromErrno("fdatasync " + temp_path_, errno));
  alignas(64) std::byte hblock[kTableBlockSize];
  EncodeTableHeader(header_, std::span<std::byte, kTableBlockSize>(hblock, kTableBlockSize));
  ENGRAM_RETURN_IF_ERROR(Fail(fileutil::PwriteAll(fd_, hblock, 0, temp_path_)));
  if (options_.sync && ::fsync(fd_) != 0) return Fail(Status::FromErrno("fsync " + temp_path_, errno));
  if (::fchmod(fd_, 0644) != 0) return Fail(Status::FromErrno("chmod " + temp_path_, errno));
  writer_.reset();
  // Again right before the rename: the path may have become an input of the
  // process (a store opened it) while the table was written.
  ENGRAM_RETURN_IF_ERROR(Fail(CheckOutputPath(path_, "output table")));
  // Renamed with the descriptor, and so the lock that marks a live writer,
  // still open (fileutil::CreateTempFileFor).
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return Fail(Status::FromErrno("rename " + temp_path_ + " to " + path_, errno));
  }
  finished_ = true;
  UnregisterTempFile(temp_token_);
  temp_token_ = -1;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return Fail(Status::FromErrno("close " + path_, errno));
  if (options_.sync) ENGRAM_RETURN_IF_ERROR(fileutil::SyncParentDir(path_));
  log::Info("wrote Engram table {}: {} rows of {} B, {} blocks, {} bytes", path_, header_.row_count,
            header_.record_bytes, header_.block_count, header_.file_bytes);
  return Status::OK();
}

}  // namespace engram
