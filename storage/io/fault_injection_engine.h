// FaultInjectionEngine: wraps any IoEngine and breaks its I/O on purpose,
// reproducibly for a seed, so the store's error paths (retries, checksums,
// per-request failures, out-of-order completions) can be stress-tested.
//
// Faults applied here, at the engine API: EIO on individual reads, one
// flipped bit in a read's data (the store's block checksums must catch it),
// batch completions delayed by FaultOptions::delay or held back by
// FaultOptions::reorder_hold so that later batches overtake them. A read
// stream (IoEngine::RunReadStream) gets the per-read faults as each read
// lands, and its thread is held by a delay at most once per stream.
// Faults applied inside the wrapped backend through the shared FaultInjector
// (see IoOptions::fault_injector): EAGAIN and short reads (io_uring and pread
// must absorb them with retries: they never surface as errors), io_uring
// setup failure (kAuto must fall back to pread) and registration ENOMEM
// (io_uring must keep working with plain fds and buffers). The mmap backend
// has no syscalls to break, so only the API-level faults apply to it.
#pragma once

#include <chrono>
#include <memory>
#include <queue>
#include <thread>
#include <vector>

#include "storage/io/fault_injector.h"
#include "storage/io/io_engine.h"
#include "storage/mutex.h"

namespace engram::io {

class FaultInjectionEngine final : public IoEngine {
 public:
  FaultInjectionEngine(std::unique_ptr<IoEngine> inner, std::shared_ptr<FaultInjector> faults);
  ~FaultInjectionEngine() override;

  IoBackend backend() const override { return inner_->backend(); }
  std::string Describe() const override { return "fault_injection(" + inner_->Describe() + ")"; }
  Result<FileId> OpenFile(const std::string& path) override { return inner_->OpenFile(path); }
  Status CloseFile(FileId file) override { return inner_->CloseFile(file); }
  Result<uint64_t> FileSize(FileId file) const override { return inner_->FileSize(file); }
  void SubmitBatch(std::span<BlockRead> reads, IoCallback done) override;
  // The inner engine's stream (its own EAGAIN and short-read faults), with
  // this engine's per-read faults applied as each read lands.
  bool RunReadStream(ReadStream& stream) override;
  Status RegisterBuffer(std::span<std::byte> region) override { return inner_->RegisterBuffer(region); }
  IoStatsSnapshot Stats() const override { return inner_->Stats(); }
  void Shutdown() override;

  FaultInjector& injector() { return *faults_; }
  IoEngine& inner() { return *inner_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Held {
    Clock::time_point due;
    uint64_t seq;  // FIFO among equal deadlines
    IoCallback done;
    bool operator>(const Held& o) const { return due != o.due ? due > o.due : seq > o.seq; }
  };

  class FaultyStream;
  // EIO or a bit flip, as decided, on a read that succeeded.
  void InjectIntoLandedRead(BlockRead& read);
  void OnInnerDone(std::span<BlockRead> reads, IoCallback done);
  void Hold(Clock::duration delay, IoCallback done);
  void TimerLoop();

  std::unique_ptr<IoEngine> inner_;
  std::shared_ptr<FaultInjector> faults_;
  Mutex mu_;
  CondVar cv_;
  std::priority_queue<Held, std::vector<Held>, std::greater<>> held_ GUARDED_BY(mu_);
  uint64_t next_seq_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread timer_;
  Mutex shutdown_mu_;  // serializes Shutdown (joins)
};

// Builds the backend described by `options` with a FaultInjector configured
// by `faults` plugged into it, and wraps it.
Result<std::unique_ptr<FaultInjectionEngine>> CreateFaultInjectionEngine(IoOptions options,
                                                                         const FaultOptions& faults);

}  // namespace engram::io
