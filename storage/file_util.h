// Small POSIX file helpers shared by the table writer, reader and converter.
//
// They exist so that every short read/write, EINTR and errno is handled in one
// place and turned into a Status that names the file and the offset.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "engram/status.h"

namespace engram::fileutil {

// Reads exactly dst.size() bytes at `offset`; a short file is Corruption
// ("<path>: unexpected end of file at offset N").
Status PreadExact(int fd, std::span<std::byte> dst, uint64_t offset, std::string_view path);

// Writes all of `src` at the current file position.
Status WriteAll(int fd, std::span<const std::byte> src, std::string_view path);

// Writes all of `src` at `offset`.
Status PwriteAll(int fd, std::span<const std::byte> src, uint64_t offset, std::string_view path);

// The mkstemp template of a temporary file next to `path`, under which a
// writer builds it before renaming it into place: "dir/.name.tmp-XXXXXX".
std::string TempPathFor(const std::string& path);

// Creates the temporary file of `path` (TempPathFor; mode 0600, O_CLOEXEC)
// and takes an exclusive flock on it, held while the returned descriptor
// stays open: the mark of a live writer, which RemoveStaleTempFiles leaves
// alone. So a writer keeps the descriptor open until its file is renamed into
// place or removed. Removes the stale temporary files of `path` first.
// Returns the descriptor; *temp_path receives the file's name.
Result<int> CreateTempFileFor(const std::string& path, std::string* temp_path);

// Removes the temporary files of `path` that no live writer holds: those a
// writer left when it was killed (SIGKILL, a crash, a power loss). Only names
// of exactly TempPathFor's pattern for this path (".NAME.tmp-" and six
// letters or digits, beside it), only regular files, and only those whose
// flock can be taken at once. Best effort: returns how many were removed.
size_t RemoveStaleTempFiles(const std::string& path);

// Writes `contents` as the whole of `path`, atomically: to a temporary file
// beside it (CreateTempFileFor; removed on failure, and on SIGINT/SIGTERM in
// a tool that asked for that), mode 0644, fsynced when `sync`, renamed over
// `path`, and the directory fsynced. Readers see the old file or the new one,
// never a part. `path` passes CheckOutputPath (storage/input_files.h) before
// anything is written and again right before the rename; `what` names it in
// the message ("hot_set_path", "the rank manifest").
Status WriteFileAtomically(const std::string& path, std::string_view contents, std::string_view what,
                           bool sync = true);

// What a file of this mode is, for messages: "a directory", "a FIFO", "a
// character device", "a block device", "a socket", "a regular file".
const char* FileTypeName(mode_t mode);

// Size of an open file.
Result<uint64_t> FileSize(int fd, std::string_view path);

// fsync of the directory holding `path`, so a rename into it is durable.
Status SyncParentDir(const std::string& path);

// Opens `path` read-only (O_CLOEXEC); InvalidArgument if it is not a regular
// file. The path is stat()ed first, so a device is never opened, and the
// open is non-blocking, so a FIFO is refused at once, not waited on.
Result<int> OpenReadOnly(const std::string& path);

// For an fd opened with O_NONBLOCK (so that opening a FIFO cannot block):
// InvalidArgument unless it is a regular file ("PATH: not a regular file
// (a directory)"), then clears O_NONBLOCK, which io_uring would otherwise
// honour on regular files too (-EAGAIN on a page-cache miss instead of
// waiting). Returns the file's size.
Result<uint64_t> RequireRegularFile(int fd, const std::string& path);

// The whole of the regular file `path`, which must hold at most max_bytes.
// Every small file the tools and the library read whole (layouts, token
// maps, traces) is read through this, so none can be a FIFO that blocks the
// reader, a device that never ends (/dev/zero), a directory, or a file so
// large that reading it exhausts memory: each is InvalidArgument naming
// `what` and the path, before anything is read. `opened`, if set, is called
// with the open file before it is read (to record it as an input).
Result<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes, std::string_view what,
                                    const std::function<void(int fd)>& opened = nullptr);

// Best effort: writes the file's dirty pages back (a page still dirty cannot
// be dropped) and asks the kernel to drop its cached pages, so the next reads
// go to the device. For cold-cache benchmarks and tests; a failure only
// leaves the file cached, so there is nothing to report.
void DropFromPageCache(const std::string& path);

// Closes `fd` on destruction. Move-only.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& o) noexcept : fd_(o.release()) {}
  ScopedFd& operator=(ScopedFd&& o) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_ = -1;
};

}  // namespace engram::fileutil
