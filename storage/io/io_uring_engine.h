// IoUringEngine: batched block reads through one io_uring owned by a
// dedicated ring thread.
//
// Why one owner thread: it lets the ring use the cheapest setup the kernel
// offers (IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN, 6.1+: completions are
// processed only when the owner asks, with no IPIs), keeps the SQ free of
// locks, and gives completion callbacks the single "engine completion thread"
// the store bridges to its executors. Submitters append batches to a pending
// list and wake the ring thread through an eventfd read that is always armed
// in the ring, so the thread sleeps in exactly one place (io_uring_enter)
// waiting for either completions or new work. A callback that submits more
// reads (e.g. a benchmark keeping QD reads in flight) skips the eventfd: the
// ring thread queues them directly.
//
// Setup steps down: SINGLE_ISSUER|DEFER_TASKRUN, then COOP_TASKRUN, then no
// flags (each EINVAL means "kernel too old for these flags"); any other setup
// error (ENOSYS, EPERM from seccomp or kernel.io_uring_disabled, ENOMEM) fails
// Create so kAuto can fall back to pread. Files are registered in a sparse
// fixed-file table and buffers passed to RegisterBuffer() in a sparse buffer
// table when the kernel and RLIMIT_MEMLOCK allow; otherwise plain fds and
// plain reads are used (logged once).
//
// Per read: at most queue_depth reads are in flight, the rest wait in FIFO
// order; -EAGAIN/-EINTR are resubmitted (up to max_retries); a short read
// resubmits the remainder; a read reaching end-of-file zero-fills the tail of
// the final block. Shutdown cancels queued reads, asks the kernel to cancel
// in-flight ones (IORING_ASYNC_CANCEL_ANY), and waits for every CQE.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <liburing.h>

#include "storage/io/file_table.h"
#include "storage/io/io_engine.h"
#include "storage/mutex.h"

namespace engram::io {

class IoUringEngine final : public IoEngine {
 public:
  // Fails (without logging) if io_uring cannot be set up: disabled by
  // ENGRAM_DISABLE_IO_URING or IoOptions::fail_ring_setup_for_testing, or any
  // io_uring_setup error other than unsupported flags.
  static Result<std::unique_ptr<IoEngine>> Create(const IoOptions& options);
  // One ring of several (IoUringRingSet): its files live in `files`, shared
  // with the other rings, so a FileId means the same file on every ring.
  // Files are then opened and closed through `files` plus AttachFile /
  // DetachFile on every ring, not through OpenFile / CloseFile.
  static Result<std::unique_ptr<IoUringEngine>> CreateSharingFiles(const IoOptions& options,
                                                                    std::shared_ptr<FileTable> files);
  ~IoUringEngine() override;

  // Registers the already opened file `id` in this ring's fixed-file table
  // (a no-op where the ring has none: reads then use the plain fd).
  Status AttachFile(FileId id);
  // Undoes AttachFile; the file's reads must have finished.
  void DetachFile(FileId id);
  // True on this engine's ring thread (inside its completion callbacks).
  bool OnRingThread() const;
  // Starts Shutdown without waiting for it: later submissions are cancelled,
  // and the ring thread begins cancelling and draining. Shutdown() waits.
  void RequestShutdown();

  IoBackend backend() const override { return IoBackend::kIoUring; }
  std::string Describe() const override;
  Result<FileId> OpenFile(const std::string& path) override;
  Status CloseFile(FileId file) override;
  Result<uint64_t> FileSize(FileId file) const override;
  void SubmitBatch(std::span<BlockRead> reads, IoCallback done) override;
  Status ReadBlocks(std::span<BlockRead> reads) override;
  bool RunReadStream(ReadStream& stream) override { return RunReadStreamAtDepth(stream, options_.queue_depth); }
  // RunReadStream with up to `queue_depth` reads in flight (a ring set's
  // whole depth, where this ring has a share of it).
  bool RunReadStreamAtDepth(ReadStream& stream, uint32_t queue_depth);
  Status RegisterBuffer(std::span<std::byte> region) override;
  IoStatsSnapshot Stats() const override { return stats_.Snapshot(); }
  void Shutdown() override;

  // Most regions RegisterBuffer accepts.
  static constexpr uint32_t kMaxRegisteredBuffers = 64;

 private:
  struct Batch;
  struct Op;
  struct Region {
    const std::byte* base;
    size_t size;
  };

  IoUringEngine(const IoOptions& options, std::shared_ptr<FileTable> files);
  Status Start();
  void RingThread(std::promise<Status>* setup_result);
  Status SetupRing();
  void Loop();
  void TakePending();
  void ArmWake();
  void FillSubmissionQueue();
  void PrepareRead(io_uring_sqe* sqe, Op* op);
  void HandleCompletion(uint64_t user_data, int res);
  void Complete(Op* op, Status status);
  void CancelQueued();
  void SubmitCancelAll();
  // Runs `fn` on the ring thread (which alone may call io_uring_register
  // under SINGLE_ISSUER) and returns its result.
  Status RunOnRing(std::function<Status()> fn);
  Batch* MakeBatch(std::span<BlockRead> reads, IoCallback done);
  void CancelBatchInline(Batch* batch);

  const IoOptions options_;
  const std::shared_ptr<FileTable> files_;  // this engine's own, or shared by a ring set
  IoStats stats_;
  int event_fd_ = -1;
  std::thread ring_thread_;
  Mutex shutdown_mu_;

  // Handed from submitters to the ring thread.
  Mutex pending_mu_;
  std::vector<Batch*> pending_batches_ GUARDED_BY(pending_mu_);
  std::vector<std::function<void()>> pending_cmds_ GUARDED_BY(pending_mu_);
  bool stopping_ GUARDED_BY(pending_mu_) = false;

  // Set during setup, read-only afterwards.
  std::string setup_flags_name_;
  bool fixed_files_ = false;
  bool buffer_table_ = false;
  std::atomic<uint32_t> registered_regions_count_{0};

  // Ring thread only.
  io_uring ring_{};
  bool ring_initialized_ = false;
  std::deque<Op*> ready_;       // validated reads waiting for an SQ slot
  uint32_t in_flight_ = 0;      // reads submitted, CQE not yet seen
  uint32_t control_in_flight_ = 0;  // cancel requests in flight
  bool wake_armed_ = false;
  bool stopping_seen_ = false;
  bool cancel_sent_ = false;
  uint64_t wake_value_ = 0;     // eventfd read destination
  std::vector<uint8_t> fixed_file_;  // per FileId: registered in the ring
  std::vector<Region> regions_;      // registered buffers, index = buf_index
  std::vector<std::pair<uint64_t, int>> reaped_;  // scratch for Loop
};

}  // namespace engram::io
