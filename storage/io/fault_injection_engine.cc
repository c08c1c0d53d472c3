#include "storage/io/fault_injection_engine.h"

#include <algorithm>
#include <thread>

namespace engram::io {

FaultInjectionEngine::FaultInjectionEngine(std::unique_ptr<IoEngine> inner, std::shared_ptr<FaultInjector> faults)
    : inner_(std::move(inner)), faults_(std::move(faults)) {
  timer_ = std::thread([this] { TimerLoop(); });
}

FaultInjectionEngine::~FaultInjectionEngine() { Shutdown(); }

void FaultInjectionEngine::SubmitBatch(std::span<BlockRead> reads, IoCallback done) {
  inner_->SubmitBatch(reads, [this, reads, done = std::move(done)]() mutable { OnInnerDone(reads, std::move(done)); });
}

void FaultInjectionEngine::InjectIntoLandedRead(BlockRead& r) {
  if (!r.status.ok()) return;
  if (faults_->Decide(FaultKind::kEio, r.file, r.offset)) {
    r.status = Status::IOError("read file " + std::to_string(r.file) + " offset " + std::to_string(r.offset) +
                               ": injected EIO (fault injection)");
    return;
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

void FaultInjectionEngine::OnInnerDone(std::span<BlockRead> reads, IoCallback done) {
  for (BlockRead& r : reads) InjectIntoLandedRead(r);
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

// A stream whose reads land with the faults a batch's would: EIO or a bit
// flip per read, and a delay (the calling thread held) at most once per
// stream, decided by its first read as a batch's is by its first.
class FaultInjectionEngine::FaultyStream final : public ReadStream {
 public:
  FaultyStream(FaultInjectionEngine& engine, ReadStream& inner) : engine_(engine), inner_(inner) {}
  BlockRead* NextRead() override { return inner_.NextRead(); }
  void Finished(BlockRead* read) override {
    engine_.InjectIntoLandedRead(*read);
    if (!delay_decided_) {
      delay_decided_ = true;
      FaultInjector& faults = *engine_.faults_;
      if (faults.Decide(FaultKind::kDelay, read->file, read->offset)) {
        std::this_thread::sleep_for(faults.options().delay);
      } else if (faults.Decide(FaultKind::kReorder, read->file, read->offset)) {
        std::this_thread::sleep_for(faults.options().reorder_hold);
      }
    }
    inner_.Finished(read);
  }

 private:
  FaultInjectionEngine& engine_;
  ReadStream& inner_;
  bool delay_decided_ = false;
};

bool FaultInjectionEngine::RunReadStream(ReadStream& stream) {
  FaultyStream faulty(*this, stream);
  return inner_->RunReadStream(faulty);
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
