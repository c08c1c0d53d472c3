#include "storage/io/fault_injection_engine.h"

#include <algorithm>

namespace engram::io {

FaultInjectionEngine::FaultInjectionEngine(std::unique_ptr<IoEngine> inner, std::shared_ptr<FaultInjector> faults)
    : inner_(std::move(inner)), faults_(std::move(faults)) {
  timer_ = std::thread([this] { TimerLoop(); });
}

FaultInjectionEngine::~FaultInjectionEngine() { Shutdown(); }

void FaultInjectionEngine::SubmitBatch(std::span<BlockRead> reads, IoCallback done) {
  inner_->SubmitBatch(reads, [this, reads, done = std::move(done)]() mutable { OnInnerDone(reads, std::move(done)); });
}

void FaultInjectionEngine::OnInnerDone(std::span<BlockRead> reads, IoCallback done) {
  for (BlockRead& r : reads) {
    if (!r.status.ok()) continue;
    if (faults_->Decide(FaultKind::kEio, r.file, r.offset)) {
      r.status = Status::IOError("read file " + std::to_string(r.file) + " offset " + std::to_string(r.offset) +
                                 ": injected EIO (fault injection)");
      continue;
    }
    if (auto bits = faults_->Decide(FaultKind::kBitFlip, r.file, r.offset)) {
      // Flip a bit among the bytes that exist in the file, not in the
      // zero-filled tail of a final partial block, so a checksum over the
      // file's bytes is guaranteed to see it.
      uint64_t valid = r.length;
      if (auto size = inner_->FileSize(r.file); size.ok()) valid = std::min<uint64_t>(valid, *size - r.offset);
      const uint64_t bit = *bits % (valid * 8);
      r.dst[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    }
  }
  const FileId key_file = reads.empty() ? 0 : reads.front().file;
  const uint64_t key_offset = reads.empty() ? 0 : reads.front().offset;
  if (faults_->Decide(FaultKind::kDelay, key_file, key_offset)) {
    Hold(faults_->options().delay, std::move(done));
  } else if (faults_->Decide(FaultKind::kReorder, key_file, key_offset)) {
    Hold(faults_->options().reorder_hold, std::move(done));
  } else {
    done();
  }
}

void FaultInjectionEngine::Hold(Clock::duration delay, IoCallback done) {
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      held_.push(Held{Clock::now() + delay, next_seq_++, std::move(done)});
      cv_.Signal();
      return;
    }
  }
  done();  // the timer is gone: deliver now rather than never
}

void FaultInjectionEngine::TimerLoop() {
  MutexLock lock(&mu_);
  for (;;) {
    if (held_.empty()) {
      if (stopping_) return;
      cv_.Wait(&mu_);
      continue;
    }
    if (!stopping_ && Clock::now() < held_.top().due) {
      // Copy the deadline: wait_until keeps reading it after unlocking, and a
      // push meanwhile may reallocate the heap under a reference.
      const Clock::time_point due = held_.top().due;
      cv_.WaitUntil(&mu_, due);
      continue;
    }
    IoCallback done = std::move(const_cast<Held&>(held_.top()).done);
    held_.pop();
    lock.Unlock();
    done();
    lock.Lock();
  }
}

void FaultInjectionEngine::Shutdown() {
  MutexLock shutdown_lock(&shutdown_mu_);
  // Inner first: its last completions may still be held here.
  inner_->Shutdown();
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (timer_.joinable()) timer_.join();
}

Result<std::unique_ptr<FaultInjectionEngine>> CreateFaultInjectionEngine(IoOptions options,
                                                                         const FaultOptions& faults) {
  auto injector = std::make_shared<FaultInjector>(faults);
  options.fault_injector = injector;
  ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<IoEngine> inner, CreateIoEngine(options));
  return std::make_unique<FaultInjectionEngine>(std::move(inner), std::move(injector));
}

}  // namespace engram::io
