// TableWriter: streams fixed-size records into a new Engram table file.
//
// Memory is bounded by options.buffer_bytes whatever the table size. The
// file is built under a temporary name in the destination directory; only
// Finish() writes the header, fsyncs, renames it into place and fsyncs the
// directory. Until then the header block is all zeros, so neither an
// interrupted write nor a leftover temp file ever opens as a valid table.
// Destroying a writer without Finish() (or calling Abandon()) deletes the
// temporary file; so does SIGINT/SIGTERM in a tool that called
// RemoveTempFilesOnTerminationSignals() (storage/temp_file_cleanup.h). The
// temporary file is locked until it is renamed (fileutil::CreateTempFileFor),
// and Create removes those of the same path a killed writer left. Create and
// Finish (before the rename) refuse a path that is not a regular file or
// missing, or that is a file the process reads (CheckOutputPath,
// storage/input_files.h).
//
//   TableWriterOptions opt;
//   opt.record_bytes = 264;
//   ENGRAM_ASSIGN_OR_RETURN(auto w, TableWriter::Create("layer1.engram", opt));
//   ENGRAM_RETURN_IF_ERROR(w->AppendRecords(bytes));   // any multiple of 264
//   w->SetMetadata(json);                               // any time before Finish
//   ENGRAM_RETURN_IF_ERROR(w->Finish());
//
// Not thread-safe: one thread drives a writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engram/status.h"
#include "storage/background_writer.h"
#include "storage/table_format.h"

namespace engram {

struct TableWriterOptions {
  uint32_t record_bytes = 0;  // required, in [1, kMaxRecordBytes]
  // Written as the metadata section (compact JSON). Must be an object.
  nlohmann::json metadata = nlohmann::json::object();
  // Seed mixed into block checksums. Unset: random per file (a block copied
  // from another table then fails). Set it for byte-identical reruns.
  std::optional<uint64_t> checksum_salt;
  // Size of each of the two write buffers (rounded to whole blocks, at least
  // one block): one is filled while the other is written in the background.
  size_t buffer_bytes = 8u << 20;
  // fsync the file and its directory in Finish(). Only tests turn this off.
  bool sync = true;
  // Start writeback of each flushed buffer at once (sync_file_range), so the
  // disk works while the producer fills the next buffer instead of all at
  // once in Finish()'s fsync. Off when sync is off.
  bool early_writeback = true;
};

// A random checksum salt, as writers use when none is given.
uint64_t RandomChecksumSalt();

class TableWriter {
 public:
  static Result<std::unique_ptr<TableWriter>> Create(const std::string& path, TableWriterOptions options);

  ~TableWriter();  // Abandon() unless Finish() succeeded
  TableWriter(const TableWriter&) = delete;
  TableWriter& operator=(const TableWriter&) = delete;

  // Appends whole records: records.size() must be a multiple of record_bytes.
  Status AppendRecords(std::span<const std::byte> records);
  Status Append(std::span<const std::byte> record) { return AppendRecords(record); }

  // Zero-copy append, for producers that build records in place (saves a
  // memcpy per byte, which matters at disk speed): returns room for between
  // 1 and max_records records in the block being filled (fewer at a block
  // boundary), or an empty span after an error. Fill the first n records,
  // then CommitRecords(n).
  std::span<std::byte> RecordSlots(uint64_t max_records);
  Status CommitRecords(uint64_t n);

  // Replaces the metadata written by Finish() (must be a JSON object).
  void SetMetadata(nlohmann::json metadata) { options_.metadata = std::move(metadata); }

  // Seals the last block, writes metadata and header, fsyncs, renames the
  // temporary file to the final path and fsyncs the directory.
  Status Finish();

  // Deletes the temporary file; later calls fail. Idempotent.
  void Abandon();

  uint32_t record_bytes() const { return options_.record_bytes; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  // The header Finish() wrote (valid after a successful Finish()).
  const TableHeader& header() const { return header_; }

 private:
  TableWriter(std::string path, std::string temp_path, int fd, TableWriterOptions options, uint64_t salt);

  Status Fail(Status s);
  Status SealCurrentBlock();
  Status FlushBuffer();

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  TableWriterOptions options_;
  uint64_t salt_;
  uint32_t rows_per_block_;
  int temp_token_;  // registration of temp_path_ for removal on SIGINT/SIGTERM
  std::vector<std::byte> buffers_[2];  // whole blocks; the last may be in progress
  int active_ = 0;                     // the buffer being filled; the other may be in flight
  size_t buffer_blocks_used_ = 0;      // sealed blocks in the active buffer
  uint32_t rows_in_block_ = 0;     // records in the block being filled
  uint64_t blocks_written_ = 0;    // sealed blocks already on disk or in buffer_
  uint64_t file_offset_ = 0;       // bytes handed to writer_ so far
  std::unique_ptr<BackgroundWriter> writer_;
  uint64_t rows_written_ = 0;
  Status error_;                   // sticky first failure
  bool finished_ = false;
  bool abandoned_ = false;
  TableHeader header_;
};

}  // namespace engram
