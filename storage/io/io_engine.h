// IoEngine: reads aligned blocks from files, in batches, through a pluggable
// backend (io_uring, a pread thread pool, or mmap).
//
// This layer knows nothing of table formats or caching (compare RocksDB's
// FileSystem and CacheLib Navy's separation of the I/O engine from cache
// policy): it opens files, reads 4 KiB-aligned byte ranges into aligned
// buffers, and reports a Status per read. The store above composes it with
// the row cache and decodes blocks.
//
// Batches: a gather that misses N blocks submits them together with one
// SubmitBatch; the engine issues them at once (up to its queue depth, the rest
// pipelined), and calls the batch's completion once, after every read has its
// own Status. One failed read fails only its own BlockRead.
//
// Threading: every method may be called from any thread concurrently, except
// that Shutdown() and the destructor must not run on an engine thread (i.e.
// inside a completion callback). Completion callbacks run on an engine thread
// (the io_uring ring thread or a pool worker); they must only hand the result
// off (post to an executor, signal a waiter) and return quickly, because they
// delay every other completion of the engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "engram/status.h"
#include "storage/io/aligned_buffer.h"
#include "storage/io/io_stats.h"

namespace engram::io {

class FaultInjector;

// Index of an open file within one engine.
using FileId = uint32_t;

// One block read: the caller fills file/offset/length/dst; the engine fills
// status. offset and length must be multiples of kBlockSize (length > 0) and
// dst must be kBlockSize-aligned with `length` writable bytes. A read may
// cover the final partial block of a file whose size is not a multiple of
// kBlockSize: the bytes past end-of-file are zero-filled. Reads starting at or
// past the end of the file fail with OutOfRange.
struct BlockRead {
  FileId file = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
  std::byte* dst = nullptr;
  Status status;
};

// Called exactly once per batch when every read of it has its final status.
using IoCallback = std::function<void()>;

enum class IoBackend : uint8_t {
  kAuto,     // io_uring, falling back to pread (one warning) if the ring cannot be set up
  kIoUring,  // io_uring only; fails if the ring cannot be set up
  kPread,    // a pool of threads calling pread(2)
  kMmap,     // memcpy out of a read-only MAP_SHARED mapping (see mmap_engine.h for caveats)
  // GETs from a Redis Cluster (storage/redis/remote_block_engine.h): made by
  // the store for a table opened by its redis:// URL, never chosen by name.
  kRedisCluster,
};

// "auto", "io_uring", "pread", "mmap".
const char* IoBackendName(IoBackend backend);
Result<IoBackend> ParseIoBackend(std::string_view name);

struct IoOptions {
  IoBackend backend = IoBackend::kAuto;
  // io_uring: reads in flight at once; more are queued and submitted as
  // earlier ones complete. 1..4096.
  uint32_t queue_depth = 64;
  // io_uring: rings, each with its own ring thread, sharing queue_depth
  // (io_uring_ring_set.h). More than one where one thread cannot submit and
  // reap as fast as the device reads. 1..64 and at most queue_depth.
  uint32_t rings = 1;
  // pread / mmap: worker threads that serve asynchronous batches. 1..1024.
  uint32_t threads = 4;
  // Open files with O_DIRECT so reads bypass the page cache (falls back to
  // buffered reads, with a log line, on filesystems that refuse O_DIRECT).
  // Ignored by the mmap backend, which is the page cache by construction.
  bool use_direct_io = true;
  // io_uring: allow RegisterBuffer() to pin memory for fixed-buffer reads.
  bool register_buffers = true;
  // io_uring: register every opened file descriptor with the ring.
  bool register_files = true;
  // Most files open at once in one engine (also the fixed-file table size).
  uint32_t max_open_files = 1024;
  // Resubmissions of one read after EAGAIN/EINTR before it fails with IOError.
  uint32_t max_retries = 64;

  // Testing: behave as if io_uring setup failed (kAuto then falls back to
  // pread). Users can get the same effect with ENGRAM_DISABLE_IO_URING=1.
  bool fail_ring_setup_for_testing = false;
  // Testing: syscall-level faults (EAGAIN, short reads, ring setup and
  // registration failures) consulted by the backends. See fault_injector.h.
  std::shared_ptr<FaultInjector> fault_injector;
};

// Reads issued and reaped by the calling thread itself (IoEngine::
// RunReadStream). The engine asks for reads as it has room for them and hands
// each one back as it finishes, all on the thread that runs the stream, so a
// caller that checks what it reads does so without waking another thread.
class ReadStream {
 public:
  virtual ~ReadStream() = default;
  // The next read to start, or nullptr if none can start before more of the
  // started ones finish (say, its buffer still holds an unchecked block).
  // The read and its buffer must stay valid until Finished(read).
  virtual BlockRead* NextRead() = 0;
  // `read` has its final status. May make more reads available to NextRead.
  // May throw: the engine then waits for the reads it has started, hands
  // none of them on, and lets the exception leave RunReadStream.
  virtual void Finished(BlockRead* read) = 0;
};

class IoEngine {
 public:
  virtual ~IoEngine() = default;

  // The backend actually in use (never kAuto).
  virtual IoBackend backend() const = 0;
  // A one-line human description, e.g. "io_uring(qd=64, SINGLE_ISSUER|DEFER_TASKRUN, O_DIRECT, fixed files)".
  virtual std::string Describe() const = 0;

  virtual Result<FileId> OpenFile(const std::string& path) = 0;
  // The caller must not close a file that still has reads in flight.
  virtual Status CloseFile(FileId file) = 0;
  virtual Result<uint64_t> FileSize(FileId file) const = 0;

  // Starts every read of `reads`; calls `done` once all have finished. The
  // span and the buffers must stay valid until then. `done` runs on an engine
  // thread, or inline before SubmitBatch returns if no read could be started
  // (every read invalid, or the engine shut down) -- for an engine that cuts a
  // batch into parts (IoUringRingSet), if the part that finishes last could not. Invalid reads (unaligned,
  // unknown file, past EOF) fail individually without failing the others.
  virtual void SubmitBatch(std::span<BlockRead> reads, IoCallback done) = 0;

  // Synchronous form: returns when every read has finished; OK if all
  // succeeded, else the first failed read's status. Do not call it from a
  // completion callback.
  virtual Status ReadBlocks(std::span<BlockRead> reads);

  // Runs `stream` on the calling thread, on an io_uring ring that thread owns
  // (made on its first stream, kept until it exits): the thread submits the
  // reads and reaps them, with no engine thread in between. Returns once
  // NextRead has nothing more and every read it gave has finished. Returns
  // false, having asked the stream for nothing, where this engine cannot (not
  // io_uring, shut down, testing faults, or the ring could not be made); the
  // caller then reads through SubmitBatch. Not from a completion callback.
  virtual bool RunReadStream(ReadStream& stream);

  // Asks the engine to pin `region` for zero-copy fixed-buffer reads (io_uring
  // registered buffers). Reads into unregistered memory always work; this is
  // only an optimization, so callers may ignore a failure: Unsupported
  // (backend has no registration, or disabled by options) or
  // ResourceExhausted (RLIMIT_MEMLOCK / ENOMEM). Registrations last for the
  // engine's lifetime, so `region` must outlive the engine.
  virtual Status RegisterBuffer(std::span<std::byte> region);

  virtual IoStatsSnapshot Stats() const = 0;

  // Stops the engine: reads not yet started and those the kernel can still
  // abandon finish with kCancelled, the rest finish normally; every pending
  // callback runs before Shutdown returns. Later submissions fail with
  // kCancelled. Idempotent; the destructor calls it.
  virtual void Shutdown() = 0;
};

// Creates the engine described by `options` (see IoBackend::kAuto for the
// fallback). Fails with InvalidArgument for out-of-range options.
Result<std::unique_ptr<IoEngine>> CreateIoEngine(const IoOptions& options);

// OK if every read succeeded, else the first failure.
Status FirstError(std::span<const BlockRead> reads);

// True when ENGRAM_DISABLE_IO_URING is set to a non-empty value other than "0".
bool IoUringDisabledByEnvironment();

}  // namespace engram::io
