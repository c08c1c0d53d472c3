#include "storage/background_writer.h"

#include <fcntl.h>

#include "storage/file_util.h"

namespace engram {

BackgroundWriter::BackgroundWriter(int fd, std::string path, bool early_writeback)
    : fd_(fd), path_(std::move(path)), early_writeback_(early_writeback), thread_([this] { Run(); }) {}

BackgroundWriter::~BackgroundWriter() {
  {
    MutexLock lock(&mu_);
    while (busy_) cv_.Wait(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

Status BackgroundWriter::Submit(std::span<const std::byte> data, uint64_t offset) {
  MutexLock lock(&mu_);
  while (busy_) cv_.Wait(&mu_);
  if (!error_.ok()) return error_;
  pending_ = data;
  pending_offset_ = offset;
  busy_ = true;
  lock.Unlock();
  cv_.SignalAll();
  return Status::OK();
}

Status BackgroundWriter::Wait() {
  MutexLock lock(&mu_);
  while (busy_) cv_.Wait(&mu_);
  return error_;
}

void BackgroundWriter::Run() {
  MutexLock lock(&mu_);
  for (;;) {
    while (!busy_ && !stop_) cv_.Wait(&mu_);
    if (busy_) {
      std::span<const std::byte> data = pending_;
      uint64_t offset = pending_offset_;
      lock.Unlock();
      Status s = fileutil::PwriteAll(fd_, data, offset, path_);
      if (s.ok() && early_writeback_) {
        // Best effort: only starts writeback; durability comes from fsync.
        ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(data.size()), SYNC_FILE_RANGE_WRITE);
      }
      lock.Lock();
      if (!s.ok() && error_.ok()) error_ = s;
      busy_ = false;
      cv_.SignalAll();
      continue;
    }
    if (stop_) return;
  }
}

}  // namespace engram
