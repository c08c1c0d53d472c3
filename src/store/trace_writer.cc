#include "src/store/trace_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "storage/file_util.h"
#include "storage/input_files.h"
#include "storage/log.h"
#include "storage/temp_file_cleanup.h"

namespace engram {
namespace {

// Lines are written out in pieces of about this size: few system calls, and
// little lost if the process dies.
constexpr size_t kWriteBytes = 64 << 10;

}  // namespace

Result<std::unique_ptr<TraceWriter>> TraceWriter::Open(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("trace_path is empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    ENGRAM_RETURN_IF_ERROR(CheckNotAnInput(path, "trace_path"));
    if (S_ISCHR(st.st_mode)) {
      // A device (/dev/null, /dev/full, a terminal): written as it is.
      int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
      if (fd < 0) return Status::FromErrno("open trace file " + path, errno);
      return std::unique_ptr<TraceWriter>(new TraceWriter(path, "", fd));
    }
    if (!S_ISREG(st.st_mode)) {
      // A FIFO or socket would kill the process with SIGPIPE once its reader
      // went away; a directory cannot be replaced by a file.
      return Status::InvalidArgument("trace_path " + path +
                                     " is neither a regular file nor a character device");
    }
  } else if (errno != ENOENT) {
    return Status::FromErrno("trace file " + path, errno);
  }
  std::string temp;
  ENGRAM_ASSIGN_OR_RETURN(int fd, fileutil::CreateTempFileFor(path, &temp));
  if (::fchmod(fd, 0644) != 0) {
    Status s = Status::FromErrno("chmod " + temp, errno);
    ::unlink(temp.c_str());
    ::close(fd);
    return s;
  }
  std::unique_ptr<TraceWriter> w(new TraceWriter(path, temp, fd));
  w->temp_token_ = RegisterTempFile(temp);
  return w;
}

TraceWriter::~TraceWriter() {
  bool closed;
  {
    std::lock_guard lock(mu_);
    closed = closed_;
  }
  if (closed) return;  // whoever closed it was told how it went
  if (Status s = Close(); !s.ok()) log::Error("store: the gather trace was not saved: {}", s.ToString());
}

void TraceWriter::Record(size_t table, std::span<const uint64_t> row_ids) {
  std::lock_guard lock(mu_);
  if (closed_ || !error_.ok()) {
    ++lost_gathers_;
    return;
  }
  char buf[24];
  auto append = [&](uint64_t v) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    buffer_.append(buf, end);
  };
  append(table);
  for (uint64_t id : row_ids) {
    buffer_ += ' ';
    append(id);
  }
  buffer_ += '\n';
  ++buffered_gathers_;
  if (buffer_.size() >= kWriteBytes) (void)WriteBufferLocked();
}

Status TraceWriter::WriteBufferLocked() {
  if (!error_.ok()) return error_;
  if (buffer_.empty()) return Status::OK();
  Status s = fileutil::WriteAll(fd_, std::as_bytes(std::span(buffer_)), "trace file " + path_);
  if (!s.ok()) {
    FailLocked(s);
    return error_;
  }
  written_gathers_ += buffered_gathers_;
  buffered_gathers_ = 0;
  buffer_.clear();
  return Status::OK();
}

void TraceWriter::FailLocked(Status s) {
  if (error_.ok()) {
    error_ = std::move(s);
    log::Error("store: gather trace failed, no more gathers are recorded: {}", error_.ToString());
  }
  lost_gathers_ += buffered_gathers_;
  buffered_gathers_ = 0;
  buffer_.clear();
}

Status TraceWriter::Flush() {
  std::lock_guard lock(mu_);
  if (closed_) return error_;
  return WriteBufferLocked();
}

Status TraceWriter::Close() {
  std::lock_guard lock(mu_);
  if (closed_) return error_;
  closed_ = true;
  (void)WriteBufferLocked();
  // A rename without it could, after a crash, replace the old file by an
  // empty one.
  if (error_.ok() && !temp_path_.empty() && ::fsync(fd_) != 0) {
    FailLocked(Status::FromErrno("fsync trace file " + path_, errno));
  }
  if (!temp_path_.empty()) {
    // Again right before the rename: the path may have become a file the
    // process reads while the store ran.
    if (error_.ok()) {
      if (Status s = CheckNotAnInput(path_, "trace_path"); !s.ok()) FailLocked(std::move(s));
    }
    // Renamed with the descriptor, and so the lock that marks a live writer
    // (fileutil::CreateTempFileFor), still open.
    if (error_.ok() && ::rename(temp_path_.c_str(), path_.c_str()) != 0) {
      FailLocked(Status::FromErrno("rename " + temp_path_ + " to trace file " + path_, errno));
    }
    if (!error_.ok()) ::unlink(temp_path_.c_str());
    UnregisterTempFile(temp_token_);
  }
  if (::close(fd_) != 0 && error_.ok()) FailLocked(Status::FromErrno("close trace file " + path_, errno));
  fd_ = -1;
  return error_;
}

void TraceWriter::Discard() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    if (error_.ok()) error_ = Status::Cancelled("trace file " + path_ + ": discarded");
  }
  (void)Close();  // with error_ set: writes nothing, removes the temporary
}

uint64_t TraceWriter::written_gathers() const {
  std::lock_guard lock(mu_);
  return written_gathers_;
}

uint64_t TraceWriter::lost_gathers() const {
  std::lock_guard lock(mu_);
  return lost_gathers_;
}

}  // namespace engram
