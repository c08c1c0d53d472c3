#include "storage/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "storage/input_files.h"
#include "storage/temp_file_cleanup.h"

namespace engram::fileutil {

std::string TempPathFor(const std::string& path) {
  std::string dir, base = path;
  if (auto slash = path.rfind('/'); slash != std::string::npos) {
    dir = path.substr(0, slash + 1);
    base = path.substr(slash + 1);
  }
  return dir + "." + base + ".tmp-XXXXXX";
}

namespace {

// The letters mkstemp fills its template with.
bool IsTempLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

}  // namespace

size_t RemoveStaleTempFiles(const std::string& path) {
  // TempPathFor's pattern, split into the directory and the name's prefix.
  std::string dir = ".", base = path;
  if (auto slash = path.rfind('/'); slash != std::string::npos) {
    dir = slash == 0 ? "/" : path.substr(0, slash);
    base = path.substr(slash + 1);
  }
  const std::string prefix = "." + base + ".tmp-";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  size_t removed = 0;
  const int dir_fd = ::dirfd(d);
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name(e->d_name);
    if (name.size() != prefix.size() + 6 || !name.starts_with(prefix)) continue;
    bool ours = true;
    for (char c : name.substr(prefix.size())) ours = ours && IsTempLetter(c);
    if (!ours) continue;
    // Only a regular file of that name is a temporary file of ours: looked
    // at first (a device is never opened), then opened without following a
    // symlink or waiting on a FIFO swapped in meanwhile.
    struct stat open_st {}, named_st {};
    if (::fstatat(dir_fd, e->d_name, &named_st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(named_st.st_mode)) continue;
    const int fd = ::openat(dir_fd, e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) continue;
    ScopedFd guard(fd);
    if (::fstat(fd, &open_st) != 0 || !S_ISREG(open_st.st_mode)) continue;
    // A live writer holds the lock; a dead one's was released with its
    // process. The name must still be the file locked: it is removed only
    // while held, so no writer can start on it in between.
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) continue;
    if (::fstatat(dir_fd, e->d_name, &named_st, AT_SYMLINK_NOFOLLOW) != 0 || named_st.st_dev != open_st.st_dev ||
        named_st.st_ino != open_st.st_ino) {
      continue;
    }
    if (::unlinkat(dir_fd, e->d_name, 0) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

Result<int> CreateTempFileFor(const std::string& path, std::string* temp_path) {
  RemoveStaleTempFiles(path);
  for (int attempt = 0;; ++attempt) {
    std::string temp = TempPathFor(path);
    const int raw = ::mkostemp(temp.data(), O_CLOEXEC);
    if (raw < 0) return Status::FromErrno("create temporary file " + temp, errno);
    ScopedFd fd(raw);
    // Blocking: another writer's sweep holds a new file's lock only while it
    // checks it. A file system without flock: then no sweep can take the lock
    // either, so nothing there is ever removed as stale.
    int locked;
    while ((locked = ::flock(fd.get(), LOCK_EX)) != 0 && errno == EINTR) {
    }
    if (locked != 0) {
      if (errno == ENOLCK || errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL) {
        *temp_path = std::move(temp);
        return fd.release();
      }
      return Status::FromErrno("lock temporary file " + temp, errno);
    }
    // A sweep may have found the file between its creation and the lock and
    // removed it: then take another.
    struct stat open_st {}, named_st {};
    if (::fstat(fd.get(), &open_st) == 0 && ::lstat(temp.c_str(), &named_st) == 0 &&
        open_st.st_dev == named_st.st_dev && open_st.st_ino == named_st.st_ino) {
      *temp_path = std::move(temp);
      return fd.release();
    }
    if (attempt == 10) return Status::IOError("temporary file " + temp + " keeps disappearing");
  }
}

namespace {
std::string At(std::string_view verb, std::string_view path, uint64_t offset) {
  std::string s(verb);
  s += " ";
  s += path;
  s += " at offset ";
  s += std::to_string(offset);
  return s;
}
}  // namespace

Status PreadExact(int fd, std::span<std::byte> dst, uint64_t offset, std::string_view path) {
  size_t done = 0;
  while (done < dst.size()) {
    ssize_t n = ::pread(fd, dst.data() + done, dst.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(At("read", path, offset + done), errno);
    }
    if (n == 0) {
      return Status::Corruption(std::string(path) + ": unexpected end of file at offset " +
                                std::to_string(offset + done));
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

Status WriteAll(int fd, std::span<const std::byte> src, std::string_view path) {
  size_t done = 0;
  while (done < src.size()) {
    ssize_t n = ::write(fd, src.data() + done, src.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("write " + std::string(path), errno);
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

Status PwriteAll(int fd, std::span<const std::byte> src, uint64_t offset, std::string_view path) {
  size_t done = 0;
  while (done < src.size()) {
    ssize_t n = ::pwrite(fd, src.data() + done, src.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(At("write", path, offset + done), errno);
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

Result<uint64_t> FileSize(int fd, std::string_view path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno("stat " + std::string(path), errno);
  return static_cast<uint64_t>(st.st_size);
}

Status SyncParentDir(const std::string& path) {
  std::string dir = ".";
  if (auto slash = path.rfind('/'); slash != std::string::npos) dir = slash == 0 ? "/" : path.substr(0, slash);
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open directory " + dir, errno);
  ScopedFd guard(fd);
  if (::fsync(fd) != 0) return Status::FromErrno("fsync directory " + dir, errno);
  return Status::OK();
}

const char* FileTypeName(mode_t mode) {
  return S_ISREG(mode)    ? "a regular file"
         : S_ISDIR(mode)  ? "a directory"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
         : S_ISLNK(mode)  ? "a symbolic link"
                          : "not a file";
}

namespace {

// "not a regular file (a directory)": what the path is instead.
Status NotRegular(const std::string& path, mode_t mode) {
  return Status::InvalidArgument("open " + path + ": not a regular file (" + FileTypeName(mode) + ")");
}

}  // namespace

Result<uint64_t> RequireRegularFile(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno("stat " + path, errno);
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) return Status::FromErrno("fcntl " + path, errno);
  return static_cast<uint64_t>(st.st_size);
}

Result<int> OpenReadOnly(const std::string& path) {
  // stat first: opening a device can have effects of its own (a tape
  // rewinds, a terminal becomes the controlling one).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno("open " + path, errno);
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  // O_NONBLOCK: should the path be swapped for a FIFO after the stat, the
  // open must not wait for a writer forever; RequireRegularFile refuses it
  // and clears the flag.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  ScopedFd guard(fd);
  ENGRAM_RETURN_IF_ERROR(RequireRegularFile(fd, path).status());
  return guard.release();
}

Result<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes, std::string_view what,
                                    const std::function<void(int fd)>& opened) {
  const std::string name = std::string(what) + " " + path;
  auto raw = OpenReadOnly(path);
  if (!raw.ok()) return raw.status().WithContext(what);
  ScopedFd fd(*raw);
  if (opened) opened(fd.get());
  ENGRAM_ASSIGN_OR_RETURN(uint64_t size, FileSize(fd.get(), path));
  auto too_large = [&](uint64_t bytes) {
    return Status::InvalidArgument(name + ": " + std::to_string(bytes) + " bytes" +
                                   " is more than the limit of " + std::to_string(max_bytes) + " bytes");
  };
  if (size > max_bytes) return too_large(size);
  // Read to the end rather than `size` bytes: a file still growing is read
  // as far as it goes, and the limit holds for it too.
  std::string bytes(static_cast<size_t>(size), '\0');
  size_t done = 0;
  for (;;) {
    if (done == bytes.size()) {
      if (bytes.size() > max_bytes) return too_large(bytes.size());
      bytes.resize(bytes.size() + 4096);
    }
    ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("read " + name, errno);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  if (done > max_bytes) return too_large(done);
  bytes.resize(done);
  return bytes;
}

ScopedFd& ScopedFd::operator=(ScopedFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

void DropFromPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

Status WriteFileAtomically(const std::string& path, std::string_view contents, std::string_view what, bool sync) {
  if (path.empty() || path.back() == '/') return Status::InvalidArgument("path '" + path + "' names no file");
  ENGRAM_RETURN_IF_ERROR(CheckOutputPath(path, what));
  std::string temp;
  ENGRAM_ASSIGN_OR_RETURN(int raw, CreateTempFileFor(path, &temp));
  ScopedFd fd(raw);
  const int token = RegisterTempFile(temp);
  Status s = WriteAll(fd.get(), std::as_bytes(std::span(contents.data(), contents.size())), temp);
  if (s.ok() && sync && ::fsync(fd.get()) != 0) s = Status::FromErrno("fsync " + temp, errno);
  if (s.ok() && ::fchmod(fd.get(), 0644) != 0) s = Status::FromErrno("chmod " + temp, errno);
  // Again right before the rename: the path may have become an input (or
  // something else than a file) while the contents were written.
  if (s.ok()) s = CheckOutputPath(path, what);
  // Renamed with the descriptor (and so the lock of a live writer) still
  // open: a sweep never removes it before it is in place.
  if (s.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    s = Status::FromErrno("rename " + temp + " to " + path, errno);
  }
  if (!s.ok()) ::unlink(temp.c_str());
  UnregisterTempFile(token);
  if (::close(fd.release()) != 0 && s.ok()) s = Status::FromErrno("close " + path, errno);
  if (s.ok() && sync) s = SyncParentDir(path);
  return s;
}

}  // namespace engram::fileutil
