// FileTable: the open files of one engine, indexed by FileId.
//
// Lookups happen on every read from several threads while other threads may
// open files, so a lookup is a lock-free acquire load of a slot published by
// Open(); only Open/Close take the mutex. FileIds are slot indexes, dense in
// [0, capacity), which lets io_uring use them directly as fixed-file indexes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engram/status.h"
#include "storage/io/io_engine.h"
#include "storage/mutex.h"

namespace engram::io {

struct OpenedFile {
  int fd = -1;
  uint64_t size = 0;
  bool direct = false;  // opened with O_DIRECT
  std::string path;
};

class FileTable {
 public:
  explicit FileTable(uint32_t capacity);
  ~FileTable();  // closes every file still open
  FileTable(const FileTable&) = delete;
  FileTable& operator=(const FileTable&) = delete;

  // Opens `path` read-only, with O_DIRECT if `want_direct` and the filesystem
  // accepts it (otherwise buffered, logged once per engine).
  Result<FileId> Open(const std::string& path, bool want_direct);
  Status Close(FileId id);
  // nullptr if `id` is not open. The pointer stays valid until Close(id).
  const OpenedFile* Get(FileId id) const;

  // Checks one read against alignment rules and the file's bounds. On
  // success stores the file in *file.
  Status Validate(const BlockRead& read, const OpenedFile** file) const;

  uint32_t capacity() const { return capacity_; }

 private:
  struct Slot {
    std::atomic<bool> open{false};
    OpenedFile file;
  };
  const uint32_t capacity_;
  std::unique_ptr<Slot[]> slots_;
  Mutex mu_;  // serializes Open and Close
  std::vector<FileId> free_ GUARDED_BY(mu_);  // closed slots, reused LIFO
  uint32_t next_unused_ GUARDED_BY(mu_) = 0;  // slots never used yet start here
  bool logged_no_direct_ GUARDED_BY(mu_) = false;
};

}  // namespace engram::io
