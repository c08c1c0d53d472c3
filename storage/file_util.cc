#include "storage/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

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

Result<uint64_t> RequireRegularFile(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno("stat " + path, errno);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("open " + path + ": not a regular file");
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) return Status::FromErrno("fcntl " + path, errno);
  return static_cast<uint64_t>(st.st_size);
}

Result<int> OpenReadOnly(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  // forever; RequireRegularFile refuses it and clears the flag.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  ScopedFd guard(fd);
  ENGRAM_RETURN_IF_ERROR(RequireRegularFile(fd, path).status());
  return guard.release();
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

}  // namespace engram::fileutil
