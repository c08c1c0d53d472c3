#include "storage/io/io_engine.h"

#include <atomic>
#include <cstdlib>

#include "storage/io/io_uring_engine.h"
#include "storage/io/io_uring_ring_set.h"
#include "storage/io/mmap_engine.h"
#include "storage/io/pread_engine.h"
#include "storage/log.h"
#include "storage/mutex.h"

namespace engram::io {

const char* IoBackendName(IoBackend backend) {
  switch (backend) {
    case IoBackend::kAuto: return "auto";
    case IoBackend::kIoUring: return "io_uring";
    case IoBackend::kPread: return "pread";
    case IoBackend::kMmap: return "mmap";
    case IoBackend::kRedisCluster: return "redis-cluster";
  }
  return "unknown";
}

Result<IoBackend> ParseIoBackend(std::string_view name) {
  for (IoBackend b : {IoBackend::kAuto, IoBackend::kIoUring, IoBackend::kPread, IoBackend::kMmap}) {
    if (name == IoBackendName(b)) return b;
  }
  return Status::InvalidArgument("unknown I/O backend '" + std::string(name) + "' (expected auto|io_uring|pread|mmap)");
}

bool IoUringDisabledByEnvironment() {
  const char* v = std::getenv("ENGRAM_DISABLE_IO_URING");
  return v != nullptr && v[0] != '\0' && std::string_view(v) != "0";
}

Status FirstError(std::span<const BlockRead> reads) {
  for (const BlockRead& r : reads) {
    if (!r.status.ok()) return r.status;
  }
  return Status::OK();
}

bool IoEngine::RunReadStream(ReadStream& stream) {
  (void)stream;
  return false;
}

Status IoEngine::ReadBlocks(std::span<BlockRead> reads) {
  Mutex mu;
  CondVar cv;
  bool finished = false;
  SubmitBatch(reads, [&] {
    MutexLock lock(&mu);
    finished = true;
    cv.Signal();  // under the lock: the waiter cannot return (and destroy cv) before this
  });
  MutexLock lock(&mu);
  while (!finished) cv.Wait(&mu);
  return FirstError(reads);
}

Status IoEngine::RegisterBuffer(std::span<std::byte>) {
  return Status::Unsupported(std::string(IoBackendName(backend())) + " backend has no buffer registration");
}

namespace {

Status ValidateOptions(const IoOptions& o) {
  if (o.queue_depth < 1 || o.queue_depth > 4096) {
    return Status::InvalidArgument("io: queue_depth " + std::to_string(o.queue_depth) + " not in 1..4096");
  }
  ENGRAM_RETURN_IF_ERROR(IoUringRingSet::ValidateRings(o));
  if (o.threads < 1 || o.threads > 1024) {
    return Status::InvalidArgument("io: threads " + std::to_string(o.threads) + " not in 1..1024");
  }
  if (o.max_open_files < 1 || o.max_open_files > (1u << 20)) {
    return Status::InvalidArgument("io: max_open_files " + std::to_string(o.max_open_files) + " not in 1..1048576");
  }
  return Status::OK();
}

Result<std::unique_ptr<IoEngine>> CreateIoUring(const IoOptions& options) {
  return options.rings > 1 ? IoUringRingSet::Create(options) : IoUringEngine::Create(options);
}

}  // namespace

Result<std::unique_ptr<IoEngine>> CreateIoEngine(const IoOptions& options) {
  ENGRAM_RETURN_IF_ERROR(ValidateOptions(options));
  switch (options.backend) {
    case IoBackend::kIoUring:
      return CreateIoUring(options);
    case IoBackend::kPread:
      return PreadEngine::Create(options);
    case IoBackend::kMmap:
      return MmapEngine::Create(options);
    case IoBackend::kRedisCluster:
      return Status::InvalidArgument("io: a redis-cluster reader is made for its table (storage/redis/remote_block_engine.h)");
    case IoBackend::kAuto: {
      auto ring = CreateIoUring(options);
      if (ring.ok()) return ring;
      // One warning per process: a server creating many engines in a
      // container without io_uring should not repeat it for every table.
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true)) {
        log::Warn("io: io_uring unavailable ({}); falling back to the pread backend", ring.status().ToString());
      } else {
        log::Debug("io: io_uring unavailable ({}); using pread", ring.status().ToString());
      }
      return PreadEngine::Create(options);
    }
  }
  return Status::InvalidArgument("io: unknown backend");
}

}  // namespace engram::io
