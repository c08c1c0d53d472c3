#include "storage/io/io_uring_engine.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "storage/io/fault_injector.h"
#include "storage/io/io_uring_caller_ring.h"
#include "storage/io/io_uring_read_result.h"
#include "storage/io/io_uring_ring_setup.h"
#include "storage/log.h"

namespace engram::io {
namespace {

// user_data values that are not Op pointers (which are never this small).
constexpr uint64_t kWakeTag = 1;
constexpr uint64_t kCancelTag = 2;

// The engine whose ring thread is running on this thread, if any.
thread_local const IoUringEngine* tls_ring_owner = nullptr;

}  // namespace

struct IoUringEngine::Op {
  Batch* batch;
  BlockRead* read;
  const OpenedFile* file;
  ReadProgress progress;
};

struct IoUringEngine::Batch {
  IoCallback done;
  uint64_t start_ns = 0;
  size_t remaining = 0;  // ring thread only once handed over
  std::vector<Op> ops;
};

Result<std::unique_ptr<IoEngine>> IoUringEngine::Create(const IoOptions& options) {
  ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<IoUringEngine> engine,
                          CreateSharingFiles(options, std::make_shared<FileTable>(options.max_open_files)));
  return std::unique_ptr<IoEngine>(std::move(engine));
}

Result<std::unique_ptr<IoUringEngine>> IoUringEngine::CreateSharingFiles(const IoOptions& options,
                                                                         std::shared_ptr<FileTable> files) {
  if (IoUringDisabledByEnvironment()) {
    return Status::Unsupported("io_uring disabled by ENGRAM_DISABLE_IO_URING");
  }
  if (options.fail_ring_setup_for_testing) {
    return Status::Unsupported("io_uring setup failure forced by IoOptions::fail_ring_setup_for_testing");
  }
  if (options.fault_injector && options.fault_injector->FailRingSetup()) {
    return Status::IOError("io_uring_setup: injected failure (fault injection)");
  }
  std::unique_ptr<IoUringEngine> engine(new IoUringEngine(options, std::move(files)));
  ENGRAM_RETURN_IF_ERROR(engine->Start());
  return engine;
}

IoUringEngine::IoUringEngine(const IoOptions& options, std::shared_ptr<FileTable> files)
    : options_(options), files_(std::move(files)), fixed_file_(options.max_open_files, 0) {}

IoUringEngine::~IoUringEngine() {
  Shutdown();
  if (event_fd_ >= 0) ::close(event_fd_);
}

Status IoUringEngine::Start() {
  event_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (event_fd_ < 0) return Status::FromErrno("eventfd", errno);
  std::promise<Status> setup;
  std::future<Status> result = setup.get_future();
  ring_thread_ = std::thread([this, &setup] { RingThread(&setup); });
  Status st = result.get();
  if (!st.ok()) ring_thread_.join();
  return st;
}

bool IoUringEngine::OnRingThread() const { return tls_ring_owner == this; }

void IoUringEngine::RingThread(std::promise<Status>* setup_result) {
  tls_ring_owner = this;
  // The ring must be created here: under SINGLE_ISSUER its creator is the
  // only task allowed to submit or register.
  Status st = SetupRing();
  const bool ok = st.ok();
  setup_result->set_value(std::move(st));
  if (!ok) return;
  Loop();
  io_uring_queue_exit(&ring_);
  ring_initialized_ = false;
}

Status IoUringEngine::SetupRing() {
  // Reads plus the always-armed eventfd read plus one cancel request.
  const char* flags_name = "";
  int rc = InitRingWithBestFlags(options_.queue_depth + 2, &ring_, &flags_name);
  if (rc == 0) setup_flags_name_ = flags_name;
  if (rc != 0) return Status::FromErrno("io_uring_setup", -rc);
  ring_initialized_ = true;

  FaultInjector* faults = options_.fault_injector.get();
  if (options_.register_files) {
    rc = (faults != nullptr && faults->FailRegistration()) ? -ENOMEM
                                                          : io_uring_register_files_sparse(&ring_, options_.max_open_files);
    fixed_files_ = rc == 0;
    if (!fixed_files_) {
      log::Info("io: io_uring file registration failed ({}); using plain file descriptors", std::strerror(-rc));
    }
  }
  if (options_.register_buffers) {
    rc = (faults != nullptr && faults->FailRegistration()) ? -ENOMEM
                                                          : io_uring_register_buffers_sparse(&ring_, kMaxRegisteredBuffers);
    buffer_table_ = rc == 0;
    if (!buffer_table_) {
      log::Info("io: io_uring buffer table setup failed ({}); reads will not use fixed buffers",
                std::strerror(-rc));
    }
  }
  return Status::OK();
}

std::string IoUringEngine::Describe() const {
  return "io_uring(qd=" + std::to_string(options_.queue_depth) + ", " + setup_flags_name_ +
         (options_.use_direct_io ? ", O_DIRECT" : ", buffered") + (fixed_files_ ? ", fixed files" : "") +
         ", fixed buffers=" + std::to_string(registered_regions_count_.load()) + ")";
}

// --- Submission side (any thread) -------------------------------------------

IoUringEngine::Batch* IoUringEngine::MakeBatch(std::span<BlockRead> reads, IoCallback done) {
  auto* batch = new Batch;
  batch->done = std::move(done);
  batch->start_ns = MonotonicNanos();
  batch->ops.reserve(reads.size());
  for (BlockRead& read : reads) {
    const OpenedFile* file = nullptr;
    read.status = files_->Validate(read, &file);
    if (!read.status.ok()) {
      stats_.RecordRead(read.status.code(), 0, 0);
      continue;
    }
    batch->ops.push_back(Op{batch, &read, file, ReadProgress{WantedBytes(read, *file)}});
  }
  batch->remaining = batch->ops.size();
  return batch;
}

void IoUringEngine::CancelBatchInline(Batch* batch) {
  for (Op& op : batch->ops) {
    op.read->status = ShutdownCancelledStatus();
    stats_.RecordRead(StatusCode::kCancelled, 0, MonotonicNanos() - batch->start_ns);
  }
  IoCallback done = std::move(batch->done);
  delete batch;
  done();
}

void IoUringEngine::SubmitBatch(std::span<BlockRead> reads, IoCallback done) {
  Batch* batch = MakeBatch(reads, std::move(done));
  if (batch->ops.empty()) {
    IoCallback cb = std::move(batch->done);
    delete batch;
    cb();
    return;
  }
  if (OnRingThread()) {
    // From a completion callback: queue directly; Loop() submits it on its
    // next turn (and cancels it if the engine is stopping).
    for (Op& op : batch->ops) ready_.push_back(&op);
    return;
  }
  bool wake;
  {
    MutexLock lock(&pending_mu_);
    if (stopping_) {
      wake = false;
    } else {
      wake = pending_batches_.empty() && pending_cmds_.empty();
      pending_batches_.push_back(batch);
      batch = nullptr;
    }
  }
  if (batch != nullptr) {
    CancelBatchInline(batch);
    return;
  }
  if (wake) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof(one));
  }
}

Status IoUringEngine::ReadBlocks(std::span<BlockRead> reads) {
  if (OnRingThread()) {
    return Status::Internal("ReadBlocks called from an io_uring completion callback would deadlock");
  }
  return IoEngine::ReadBlocks(reads);
}

bool IoUringEngine::RunReadStreamAtDepth(ReadStream& stream, uint32_t queue_depth) {
  if (OnRingThread()) return false;
  {
    MutexLock lock(&pending_mu_);
    if (stopping_) return false;  // SubmitBatch cancels the reads
  }
  return RunReadStreamOnCallerRing(stream, *files_, queue_depth, options_.max_retries, options_.fault_injector.get(),
                                   stats_);
}

Status IoUringEngine::RunOnRing(std::function<Status()> fn) {
  if (OnRingThread()) return fn();
  std::promise<Status> promise;
  std::future<Status> result = promise.get_future();
  bool wake;
  {
    MutexLock lock(&pending_mu_);
    if (stopping_) return Status::Cancelled("I/O engine is shut down");
    wake = pending_batches_.empty() && pending_cmds_.empty();
    pending_cmds_.push_back([&] { promise.set_value(fn()); });
  }
  if (wake) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof(one));
  }
  return result.get();
}

Result<FileId> IoUringEngine::OpenFile(const std::string& path) {
  ENGRAM_ASSIGN_OR_RETURN(FileId id, files_->Open(path, options_.use_direct_io));
  Status st = AttachFile(id);
  if (!st.ok()) {
    (void)files_->Close(id);
    return st.WithContext("open '" + path + "'");
  }
  return id;
}

Status IoUringEngine::AttachFile(FileId id) {
  const OpenedFile* file = files_->Get(id);
  if (file == nullptr) return Status::InvalidArgument("attach: file id " + std::to_string(id) + " is not open");
  if (!fixed_files_) return Status::OK();
  const int fd = file->fd;
  const std::string path = file->path;
  return RunOnRing([&]() -> Status {
    int to_register = fd;
    const int rc = io_uring_register_files_update(&ring_, id, &to_register, 1);
    fixed_file_[id] = rc == 1;
    if (rc != 1) log::Debug("io: registering '{}' as fixed file failed ({})", path, std::strerror(-rc));
    return Status::OK();
  });
}

void IoUringEngine::DetachFile(FileId id) {
  if (!fixed_files_ || id >= fixed_file_.size()) return;
  // After shutdown the ring is gone and so is the registration.
  (void)RunOnRing([&]() -> Status {
    if (fixed_file_[id]) {
      int none = -1;
      (void)io_uring_register_files_update(&ring_, id, &none, 1);
      fixed_file_[id] = 0;
    }
    return Status::OK();
  });
}

Status IoUringEngine::CloseFile(FileId file) {
  if (files_->Get(file) == nullptr) {
    return Status::InvalidArgument("close: file id " + std::to_string(file) + " is not open");
  }
  DetachFile(file);
  return files_->Close(file);
}

Result<uint64_t> IoUringEngine::FileSize(FileId file) const {
  const OpenedFile* f = files_->Get(file);
  if (f == nullptr) return Status::InvalidArgument("file id " + std::to_string(file) + " is not open");
  return f->size;
}

Status IoUringEngine::RegisterBuffer(std::span<std::byte> region) {
  if (!options_.register_buffers) {
    return Status::Unsupported("io_uring buffer registration disabled by IoOptions::register_buffers");
  }
  if (!buffer_table_) return Status::Unsupported("io_uring buffer table could not be set up");
  if (region.empty()) return Status::InvalidArgument("register buffer: empty region");
  return RunOnRing([&]() -> Status {
    if (regions_.size() >= kMaxRegisteredBuffers) {
      return Status::ResourceExhausted("register buffer: already " + std::to_string(kMaxRegisteredBuffers) +
                                       " regions registered");
    }
    int rc;
    if (options_.fault_injector && options_.fault_injector->FailRegistration()) {
      rc = -ENOMEM;
    } else {
      iovec iov{region.data(), region.size()};
      rc = io_uring_register_buffers_update_tag(&ring_, static_cast<unsigned>(regions_.size()), &iov, nullptr, 1);
    }
    if (rc < 0) {
      const std::string what = "io_uring register buffer of " + std::to_string(region.size()) + " bytes";
      if (rc == -ENOMEM) {
        return Status::ResourceExhausted(what + ": ENOMEM (RLIMIT_MEMLOCK too low?); reads will not use fixed buffers");
      }
      return Status::FromErrno(what, -rc);
    }
    regions_.push_back(Region{region.data(), region.size()});
    registered_regions_count_.fetch_add(1, std::memory_order_relaxed);
    return Status::OK();
  });
}

void IoUringEngine::RequestShutdown() {
  {
    MutexLock lock(&pending_mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof(one));
}

void IoUringEngine::Shutdown() {
  MutexLock shutdown_lock(&shutdown_mu_);
  RequestShutdown();
  if (ring_thread_.joinable()) ring_thread_.join();
}

// --- Ring thread -------------------------------------------------------------

void IoUringEngine::Loop() {
  for (;;) {
    TakePending();
    if (stopping_seen_) {
      CancelQueued();
      if (!cancel_sent_ && in_flight_ > 0) SubmitCancelAll();
      if (in_flight_ == 0 && control_in_flight_ == 0 && !wake_armed_ && ready_.empty()) return;
    } else {
      if (!wake_armed_) ArmWake();
      FillSubmissionQueue();
    }
    int rc = io_uring_submit_and_wait(&ring_, 1);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      // The ring itself is failing: fail what has not been submitted rather
      // than spinning on it. In-flight reads still get their CQEs.
      log::Error("io: io_uring_enter failed: {}", std::strerror(-rc));
      while (!ready_.empty()) {
        Op* op = ready_.front();
        ready_.pop_front();
        Complete(op, Status::FromErrno("io_uring_enter", -rc));
      }
    }
    // Copy the CQEs out and release the CQ before running callbacks, which
    // may take a while and may queue more reads.
    reaped_.clear();
    unsigned head;
    unsigned count = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      reaped_.emplace_back(cqe->user_data, cqe->res);
      ++count;
    }
    io_uring_cq_advance(&ring_, count);
    for (auto [user_data, res] : reaped_) HandleCompletion(user_data, res);
  }
}

void IoUringEngine::TakePending() {
  std::vector<Batch*> batches;
  std::vector<std::function<void()>> cmds;
  {
    MutexLock lock(&pending_mu_);
    batches.swap(pending_batches_);
    cmds.swap(pending_cmds_);
    stopping_seen_ = stopping_;
  }
  for (auto& cmd : cmds) cmd();
  for (Batch* batch : batches) {
    for (Op& op : batch->ops) ready_.push_back(&op);
  }
}

void IoUringEngine::ArmWake() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) return;  // SQ full; retried next turn (the SQ has a slot reserved for this)
  io_uring_prep_read(sqe, event_fd_, &wake_value_, sizeof(wake_value_), 0);
  io_uring_sqe_set_data64(sqe, kWakeTag);
  wake_armed_ = true;
}

void IoUringEngine::SubmitCancelAll() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) return;
  io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
  io_uring_sqe_set_data64(sqe, kCancelTag);
  ++control_in_flight_;
  cancel_sent_ = true;
}

void IoUringEngine::FillSubmissionQueue() {
  while (!ready_.empty() && in_flight_ < options_.queue_depth) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) break;
    Op* op = ready_.front();
    ready_.pop_front();
    PrepareRead(sqe, op);
    ++in_flight_;
  }
}

void IoUringEngine::PrepareRead(io_uring_sqe* sqe, Op* op) {
  std::byte* dst = op->read->dst + op->progress.done;
  const unsigned len = op->read->length - op->progress.done;
  const uint64_t offset = op->read->offset + op->progress.done;
  const FileId id = op->read->file;
  const bool fixed_file = fixed_file_[id] != 0;
  const int fd = fixed_file ? static_cast<int>(id) : op->file->fd;
  int buf_index = -1;
  for (size_t i = 0; i < regions_.size(); ++i) {
    if (dst >= regions_[i].base && dst + len <= regions_[i].base + regions_[i].size) {
      buf_index = static_cast<int>(i);
      break;
    }
  }
  if (buf_index >= 0) {
    io_uring_prep_read_fixed(sqe, fd, dst, len, offset, buf_index);
  } else {
    io_uring_prep_read(sqe, fd, dst, len, offset);
  }
  if (fixed_file) sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data(sqe, op);
}

void IoUringEngine::HandleCompletion(uint64_t user_data, int res) {
  if (user_data == kWakeTag) {
    wake_armed_ = false;  // the value is irrelevant: TakePending looks at the lists
    return;
  }
  if (user_data == kCancelTag) {
    --control_in_flight_;
    return;
  }
  Op* op = reinterpret_cast<Op*>(user_data);
  --in_flight_;
  const BlockRead& read = *op->read;
  res = InjectReadFaults(options_.fault_injector.get(), read, op->progress, res);
  Status status;
  if (ApplyReadResult(res, read, *op->file, op->progress, options_.max_retries, stopping_seen_, stats_, &status) ==
      ReadStep::kResubmit) {
    ready_.push_front(op);  // the remainder, ahead of reads that have not started
    return;
  }
  Complete(op, std::move(status));
}

void IoUringEngine::Complete(Op* op, Status status) {
  Batch* batch = op->batch;
  stats_.RecordRead(status.code(), op->read->length, MonotonicNanos() - batch->start_ns);
  op->read->status = std::move(status);
  if (--batch->remaining == 0) {
    IoCallback done = std::move(batch->done);
    delete batch;
    done();
  }
}

void IoUringEngine::CancelQueued() {
  while (!ready_.empty()) {
    Op* op = ready_.front();
    ready_.pop_front();
    Complete(op, ShutdownCancelledStatus());
  }
}

}  // namespace engram::io
