#include "storage/io/file_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "storage/file_util.h"
#include "storage/log.h"

namespace engram::io {

FileTable::FileTable(uint32_t capacity) : capacity_(capacity), slots_(new Slot[capacity]) {}

FileTable::~FileTable() {
  for (uint32_t i = 0; i < capacity_; ++i) {
    if (slots_[i].open.load(std::memory_order_acquire)) ::close(slots_[i].file.fd);
  }
}

Result<FileId> FileTable::Open(const std::string& path, bool want_direct) {
  int fd = -1;
  bool direct = false;
  if (want_direct) {
    // O_NONBLOCK: a FIFO would block the open; it is refused as not a
    // regular file by RequireRegularFile, which also clears the flag.
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT | O_NONBLOCK);
    if (fd >= 0) {
      direct = true;
    } else if (errno == EINVAL) {
      // tmpfs and some FUSE/network filesystems refuse O_DIRECT: read through
      // the page cache instead of failing.
      MutexLock lock(&mu_);
      if (!logged_no_direct_) {
        logged_no_direct_ = true;
        log::Info("io: filesystem of '{}' refuses O_DIRECT; using buffered reads", path);
      }
    } else {
      return Status::FromErrno("open '" + path + "'", errno);
    }
  }
  if (fd < 0) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return Status::FromErrno("open '" + path + "'", errno);
  }
  Result<uint64_t> size = fileutil::RequireRegularFile(fd, path);
  if (!size.ok()) {
    ::close(fd);
    return size.status();
  }

  MutexLock lock(&mu_);
  FileId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (next_unused_ < capacity_) {
    id = next_unused_++;
  } else {
    ::close(fd);
    return Status::ResourceExhausted("open '" + path + "': engine already has " +
                                     std::to_string(capacity_) + " files open (IoOptions::max_open_files)");
  }
  Slot& slot = slots_[id];
  slot.file = OpenedFile{fd, *size, direct, path};
  slot.open.store(true, std::memory_order_release);
  return id;
}

Status FileTable::Close(FileId id) {
  MutexLock lock(&mu_);
  if (id >= capacity_ || !slots_[id].open.load(std::memory_order_acquire)) {
    return Status::InvalidArgument("close: file id " + std::to_string(id) + " is not open");
  }
  Slot& slot = slots_[id];
  slot.open.store(false, std::memory_order_release);
  int rc = ::close(slot.file.fd);
  int err = errno;
  std::string path = slot.file.path;
  slot.file = OpenedFile{};
  free_.push_back(id);
  if (rc != 0) return Status::FromErrno("close '" + path + "'", err);
  return Status::OK();
}

const OpenedFile* FileTable::Get(FileId id) const {
  if (id >= capacity_ || !slots_[id].open.load(std::memory_order_acquire)) return nullptr;
  return &slots_[id].file;
}

Status FileTable::Validate(const BlockRead& read, const OpenedFile** file) const {
  const OpenedFile* f = Get(read.file);
  if (f == nullptr) {
    return Status::InvalidArgument("read: file id " + std::to_string(read.file) + " is not open");
  }
  // The message is built only on failure: this runs on every read.
  const auto where = [&] {
    return "read '" + f->path + "' offset " + std::to_string(read.offset) + " length " + std::to_string(read.length);
  };
  if (read.length == 0 || !IsAligned(read.offset, kBlockSize) || !IsAligned(read.length, kBlockSize)) {
    return Status::InvalidArgument(where() + ": offset and length must be non-zero multiples of " +
                                   std::to_string(kBlockSize));
  }
  if (read.dst == nullptr || !IsAligned(read.dst, kBlockSize)) {
    return Status::InvalidArgument(where() + ": destination buffer must be " + std::to_string(kBlockSize) +
                                   "-byte aligned");
  }
  // The last block of a file may be partial; anything starting past it is out of range.
  if (read.offset >= f->size || read.offset + read.length > AlignUp(f->size, kBlockSize)) {
    return Status::OutOfRange(where() + ": past end of file (size " + std::to_string(f->size) + ")");
  }
  *file = f;
  return Status::OK();
}

}  // namespace engram::io
