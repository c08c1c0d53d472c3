#include "storage/io/worker_pool_engine.h"

#include <algorithm>

namespace engram::io {

struct WorkerPoolEngine::Batch {
  std::span<BlockRead> reads;
  std::vector<uint32_t> todo;            // indexes of the reads that passed validation
  std::vector<const OpenedFile*> files;  // parallel to todo
  IoCallback done;
  uint64_t start_ns = 0;
  std::atomic<size_t> next{0};
  std::atomic<size_t> remaining{0};
};

WorkerPoolEngine::WorkerPoolEngine(const IoOptions& options, bool want_direct_io)
    : options_(options), files_(options.max_open_files), want_direct_io_(want_direct_io) {}

WorkerPoolEngine::~WorkerPoolEngine() { Shutdown(); }

void WorkerPoolEngine::StartWorkers() {
  workers_.reserve(options_.threads);
  for (uint32_t i = 0; i < options_.threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

Result<FileId> WorkerPoolEngine::OpenFile(const std::string& path) {
  ENGRAM_ASSIGN_OR_RETURN(FileId id, files_.Open(path, want_direct_io_));
  if (Status st = OnFileOpened(id, *files_.Get(id)); !st.ok()) {
    (void)files_.Close(id);
    return st;
  }
  return id;
}

Status WorkerPoolEngine::CloseFile(FileId file) {
  const OpenedFile* f = files_.Get(file);
  if (f == nullptr) return Status::InvalidArgument("close: file id " + std::to_string(file) + " is not open");
  OnFileClosing(file, *f);
  return files_.Close(file);
}

Result<uint64_t> WorkerPoolEngine::FileSize(FileId file) const {
  const OpenedFile* f = files_.Get(file);
  if (f == nullptr) return Status::InvalidArgument("file id " + std::to_string(file) + " is not open");
  return f->size;
}

std::shared_ptr<WorkerPoolEngine::Batch> WorkerPoolEngine::PrepareBatch(std::span<BlockRead> reads,
                                                                       IoCallback done) {
  auto batch = std::make_shared<Batch>();
  batch->reads = reads;
  batch->done = std::move(done);
  batch->start_ns = MonotonicNanos();
  batch->todo.reserve(reads.size());
  batch->files.reserve(reads.size());
  for (uint32_t i = 0; i < reads.size(); ++i) {
    const OpenedFile* f = nullptr;
    reads[i].status = files_.Validate(reads[i], &f);
    if (reads[i].status.ok()) {
      batch->todo.push_back(i);
      batch->files.push_back(f);
    } else {
      stats_.RecordRead(reads[i].status.code(), 0, 0);
    }
  }
  batch->remaining.store(batch->todo.size(), std::memory_order_relaxed);
  return batch;
}

void WorkerPoolEngine::Work(Batch& batch) {
  const size_t n = batch.todo.size();
  for (size_t k = batch.next.fetch_add(1, std::memory_order_relaxed); k < n;
       k = batch.next.fetch_add(1, std::memory_order_relaxed)) {
    BlockRead& read = batch.reads[batch.todo[k]];
    read.status = cancel_.load(std::memory_order_acquire)
                      ? Status::Cancelled("read cancelled: I/O engine shutting down")
                      : ReadOne(*batch.files[k], read);
    stats_.RecordRead(read.status.code(), read.length, MonotonicNanos() - batch.start_ns);
    if (batch.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      IoCallback done = std::move(batch.done);
      done();
    }
  }
}

void WorkerPoolEngine::SubmitBatch(std::span<BlockRead> reads, IoCallback done) {
  std::shared_ptr<Batch> batch = PrepareBatch(reads, std::move(done));
  if (batch->todo.empty()) {
    batch->done();
    return;
  }
  const size_t tickets = std::min<size_t>(batch->todo.size(), workers_.size());
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      for (size_t i = 0; i < tickets; ++i) tickets_.push_back(batch);
      lock.Unlock();
      if (tickets == 1) {
        work_cv_.Signal();
      } else {
        work_cv_.SignalAll();
      }
      return;
    }
  }
  // Shut down: nothing may start any more. Work() sees cancel_ and cancels.
  Work(*batch);
}

Status WorkerPoolEngine::ReadBlocks(std::span<BlockRead> reads) {
  if (reads.size() == 1) {
    // One block: no batch, no helpers, no signalling; just the syscall.
    BlockRead& read = reads[0];
    const uint64_t start_ns = MonotonicNanos();
    const OpenedFile* file = nullptr;
    read.status = files_.Validate(read, &file);
    if (read.status.ok()) {
      read.status = cancel_.load(std::memory_order_acquire)
                        ? Status::Cancelled("read cancelled: I/O engine shutting down")
                        : ReadOne(*file, read);
    }
    stats_.RecordRead(read.status.code(), file != nullptr ? read.length : 0, MonotonicNanos() - start_ns);
    return read.status;
  }
  Mutex mu;
  CondVar cv;
  bool finished = false;
  std::shared_ptr<Batch> batch = PrepareBatch(reads, [&] {
    MutexLock lock(&mu);
    finished = true;
    cv.Signal();  // under the lock: the waiter cannot return (and destroy cv) before this
  });
  if (batch->todo.empty()) return FirstError(reads);
  // The caller serves reads itself; workers help only with the rest.
  const size_t helpers = std::min<size_t>(batch->todo.size() - 1, workers_.size());
  if (helpers > 0) {
    MutexLock lock(&mu_);
    if (!stopping_) {
      for (size_t i = 0; i < helpers; ++i) tickets_.push_back(batch);
      lock.Unlock();
      if (helpers == 1) {
        work_cv_.Signal();
      } else {
        work_cv_.SignalAll();
      }
    }
  }
  Work(*batch);
  MutexLock lock(&mu);
  while (!finished) cv.Wait(&mu);
  return FirstError(reads);
}

void WorkerPoolEngine::WorkerLoop() {
  MutexLock lock(&mu_);
  for (;;) {
    while (!stopping_ && tickets_.empty()) work_cv_.Wait(&mu_);
    if (tickets_.empty()) return;  // stopping, and everything queued is served
    std::shared_ptr<Batch> batch = std::move(tickets_.front());
    tickets_.pop_front();
    lock.Unlock();
    Work(*batch);
    batch.reset();
    lock.Lock();
  }
}

void WorkerPoolEngine::Shutdown() {
  // Serialized: a second, concurrent call must also wait for the joins (every
  // pending callback has run when Shutdown returns), not return at once.
  MutexLock shutdown_lock(&shutdown_mu_);
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    cancel_.store(true, std::memory_order_release);
  }
  work_cv_.SignalAll();
  // Workers drain the queued tickets (cancelling unstarted reads) before exiting.
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace engram::io
