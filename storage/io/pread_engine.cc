#include "storage/io/pread_engine.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "storage/io/fault_injector.h"

namespace engram::io {

Result<std::unique_ptr<IoEngine>> PreadEngine::Create(const IoOptions& options) {
  std::unique_ptr<PreadEngine> engine(new PreadEngine(options));
  engine->StartWorkers();
  return std::unique_ptr<IoEngine>(std::move(engine));
}

PreadEngine::PreadEngine(const IoOptions& options) : WorkerPoolEngine(options, options.use_direct_io) {}

PreadEngine::~PreadEngine() { Shutdown(); }

std::string PreadEngine::Describe() const {
  return "pread(threads=" + std::to_string(options_.threads) +
         (options_.use_direct_io ? ", O_DIRECT)" : ", buffered)");
}

Status PreadEngine::ReadOne(const OpenedFile& file, const BlockRead& read) {
  FaultInjector* faults = options_.fault_injector.get();
  // Bytes that exist in the file; the rest of a final partial block is zero-filled.
  const uint32_t wanted = static_cast<uint32_t>(std::min<uint64_t>(read.length, file.size - read.offset));
  uint32_t done = 0;
  uint32_t retries = 0;
  while (done < wanted) {
    const uint64_t offset = read.offset + done;
    ssize_t n;
    int err = 0;
    if (faults != nullptr && faults->Decide(FaultKind::kEagain, read.file, offset)) {
      n = -1;
      err = EAGAIN;
    } else {
      // Ask for the whole remaining block even past EOF: O_DIRECT needs an
      // aligned length, and the kernel stops at end-of-file anyway.
      n = ::pread(file.fd, read.dst + done, read.length - done, static_cast<off_t>(offset));
      if (n < 0) err = errno;
    }
    if (n < 0) {
      if (err == EINTR || err == EAGAIN) {
        if (++retries > options_.max_retries) {
          return Status::IOError("pread '" + file.path + "' offset " + std::to_string(offset) + ": gave up after " +
                                 std::to_string(options_.max_retries) + " retries: " + std::strerror(err));
        }
        stats_.RecordRetry();
        continue;
      }
      return Status::FromErrno("pread '" + file.path + "' offset " + std::to_string(offset), err);
    }
    if (n == 0) {
      return Status::IOError("pread '" + file.path + "' offset " + std::to_string(offset) +
                             ": unexpected end of file (file size was " + std::to_string(file.size) +
                             " at open; was it truncated?)");
    }
    if (faults != nullptr && n > 512) {
      if (auto bits = faults->Decide(FaultKind::kShortRead, read.file, offset)) {
        // A multiple of 512 so an O_DIRECT resubmission stays sector-aligned.
        n = static_cast<ssize_t>(512 * (1 + *bits % ((n - 1) / 512)));
      }
    }
    done += static_cast<uint32_t>(n);
    if (done < wanted) stats_.RecordShortRead();
  }
  if (done < read.length) std::memset(read.dst + done, 0, read.length - done);
  return Status::OK();
}

}  // namespace engram::io
