// TraceWriter: records every gather so engram-replay can replay a real
// runtime's row trace through the same cache code (--store-trace FILE).
//
// Format (text, one gather per line):  <table-index> <row-id> <row-id> ...
// Row IDs are written as the runtime asked for them (duplicates kept); the
// replay deduplicates per gather exactly as the store does.
//
// Where the lines go (StoreOptions::trace_path):
//  - a path that is missing or a regular file: a temporary file beside it
//    ("dir/.name.tmp-XXXXXX"), renamed over the path by Close(). Nothing
//    that exists is truncated or written to while the store runs, and an
//    existing file is replaced only by a complete trace. A trace that fails
//    is removed, and the old file is left as it was.
//  - a character device (/dev/null, a terminal): written directly; there is
//    nothing there to lose.
//  - anything else is InvalidArgument: a directory, and a FIFO or socket,
//    whose reader going away would kill the process with SIGPIPE.
// Open, and Close again right before the rename, refuse a path that is the
// same file (device and inode, so also through symlinks and hard links) as
// any file the process reads (storage/input_files.h): a trace must never
// replace a table, a shard or a manifest.
//
// Errors: gathers never fail because of the trace. The first write error is
// logged (spdlog, error level) when it happens; from then on lines are
// dropped and counted (lost_gathers()). Close() reports a write, flush,
// close or rename failure as a Status, and the store logs it at shutdown.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engram/status.h"

namespace engram {

class TraceWriter {
 public:
  static Result<std::unique_ptr<TraceWriter>> Open(const std::string& path);
  // Close()s if not closed yet, logging a failure.
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void Record(size_t table, std::span<const uint64_t> row_ids);
  // Writes the buffered lines out.
  Status Flush();
  // Flushes, closes and (for a temporary) renames the trace into place.
  // Returns the first error of the trace's life, naming the path; after an
  // error the temporary is removed. Idempotent: a second call returns the
  // same status.
  Status Close();
  // Closes without keeping anything: the temporary is removed, an existing
  // file at the path is left as it was. For a store whose Open failed.
  void Discard();

  const std::string& path() const { return path_; }
  // Gathers whose lines reached the file (the kernel took them), and those
  // dropped because the file failed. Lines still buffered are in neither.
  uint64_t written_gathers() const;
  uint64_t lost_gathers() const;

 private:
  TraceWriter(std::string path, std::string temp_path, int fd)
      : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd) {}
  Status WriteBufferLocked();
  void FailLocked(Status s);

  const std::string path_;
  const std::string temp_path_;  // empty when writing straight to path_
  mutable std::mutex mu_;
  int fd_ = -1;
  int temp_token_ = -1;  // RegisterTempFile's, for the temporary
  bool closed_ = false;
  Status error_;  // the first failure; lines are dropped once it is set
  std::string buffer_;
  uint64_t buffered_gathers_ = 0;
  uint64_t written_gathers_ = 0;
  uint64_t lost_gathers_ = 0;
};

}  // namespace engram
