#include "storage/io/io_uring_read_result.h"

#include "storage/io/fault_injector.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace engram::io {

uint32_t WantedBytes(const BlockRead& read, const OpenedFile& file) {
  return static_cast<uint32_t>(std::min<uint64_t>(read.length, file.size - read.offset));
}

int InjectReadFaults(FaultInjector* faults, const BlockRead& read, const ReadProgress& progress, int res) {
  if (faults == nullptr || res <= 0) return res;
  const uint64_t offset = read.offset + progress.done;
  if (faults->Decide(FaultKind::kEagain, read.file, offset)) return -EAGAIN;
  if (res > 512) {
    if (auto bits = faults->Decide(FaultKind::kShortRead, read.file, offset)) {
      return static_cast<int>(512 * (1 + *bits % ((static_cast<unsigned>(res) - 1) / 512)));
    }
  }
  return res;
}

Status ShutdownCancelledStatus() { return Status::Cancelled("read cancelled: I/O engine shutting down"); }

ReadStep ApplyReadResult(int res, const BlockRead& read, const OpenedFile& file, ReadProgress& progress,
                         uint32_t max_retries, bool stopping, IoStats& stats, Status* status) {
  const uint64_t offset = read.offset + progress.done;
  const auto where = [&] { return "io_uring read '" + file.path + "' offset " + std::to_string(offset); };
  if (res == -EAGAIN || res == -EINTR) {
    if (stopping) {
      *status = ShutdownCancelledStatus();
      return ReadStep::kComplete;
    }
    if (++progress.retries > max_retries) {
      *status = Status::IOError(where() + ": gave up after " + std::to_string(max_retries) +
                                " retries: " + std::strerror(-res));
      return ReadStep::kComplete;
    }
    stats.RecordRetry();
    return ReadStep::kResubmit;
  }
  if (res == -ECANCELED) {
    *status = ShutdownCancelledStatus();
    return ReadStep::kComplete;
  }
  if (res < 0) {
    *status = Status::FromErrno(where(), -res);
    return ReadStep::kComplete;
  }
  if (res == 0) {
    *status = Status::IOError(where() + ": unexpected end of file (file size was " + std::to_string(file.size) +
                              " at open; was it truncated?)");
    return ReadStep::kComplete;
  }
  progress.done += static_cast<uint32_t>(res);
  if (progress.done >= progress.wanted) {
    if (progress.done < read.length) std::memset(read.dst + progress.done, 0, read.length - progress.done);
    *status = Status::OK();
    return ReadStep::kComplete;
  }
  if (stopping) {
    *status = ShutdownCancelledStatus();
    return ReadStep::kComplete;
  }
  stats.RecordShortRead();
  return ReadStep::kResubmit;
}

}  // namespace engram::io
