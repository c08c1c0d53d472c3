// WorkerPoolEngine: the shared machinery of the synchronous-syscall backends
// (pread, mmap): a pool of worker threads serving batches, with the caller of
// ReadBlocks helping so a one-block synchronous read never pays a thread
// handoff.
//
// A batch is handed to up to `threads` workers as "tickets"; every ticket
// holder (and a synchronous caller) claims reads from the batch with one
// atomic increment until none are left, so a batch of N reads is served in
// parallel without a per-read queue operation. The thread finishing the last
// read runs the batch's callback.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "storage/io/file_table.h"
#include "storage/io/io_engine.h"
#include "storage/mutex.h"

namespace engram::io {

class WorkerPoolEngine : public IoEngine {
 public:
  ~WorkerPoolEngine() override;

  Result<FileId> OpenFile(const std::string& path) override;
  Status CloseFile(FileId file) override;
  Result<uint64_t> FileSize(FileId file) const override;
  void SubmitBatch(std::span<BlockRead> reads, IoCallback done) override;
  Status ReadBlocks(std::span<BlockRead> reads) override;
  IoStatsSnapshot Stats() const override { return stats_.Snapshot(); }
  void Shutdown() override;

 protected:
  WorkerPoolEngine(const IoOptions& options, bool want_direct_io);
  // Starts the workers; called by the derived constructor once it is fully
  // built (workers call ReadOne). Derived destructors must call Shutdown()
  // before their members go away, for the same reason.
  void StartWorkers();

  // Reads one validated block, retrying what must be retried. `file` is the
  // open file of read.file; read.status is not touched here.
  virtual Status ReadOne(const OpenedFile& file, const BlockRead& read) = 0;
  virtual Status OnFileOpened(FileId, const OpenedFile&) { return Status::OK(); }
  virtual void OnFileClosing(FileId, const OpenedFile&) {}

  const IoOptions options_;
  FileTable files_;
  IoStats stats_;

 private:
  struct Batch;
  std::shared_ptr<Batch> PrepareBatch(std::span<BlockRead> reads, IoCallback done);
  void Work(Batch& batch);
  void WorkerLoop();

  const bool want_direct_io_;
  Mutex mu_;
  CondVar work_cv_;
  std::deque<std::shared_ptr<Batch>> tickets_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::atomic<bool> cancel_{false};              // set with stopping_; read lock-free by Work
  std::vector<std::thread> workers_;
  Mutex shutdown_mu_;  // serializes Shutdown (joins)
};

}  // namespace engram::io
