// GatedEngine: an I/O engine for tests that holds the completions of one
// file's batches until Open() (the reads themselves run; only the callbacks
// wait). Everything else passes through to the engine it wraps. It runs no
// read stream (IoEngine::RunReadStream says it cannot), so a gather waited
// for by its own thread goes through SubmitBatch, and is held too.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "storage/io/io_engine.h"

namespace engram::testing {

class GatedEngine final : public io::IoEngine {
 public:
  GatedEngine(std::unique_ptr<io::IoEngine> inner, std::string gated_path)
      : inner_(std::move(inner)), gated_path_(std::move(gated_path)) {}
  ~GatedEngine() override { Shutdown(); }

  io::IoBackend backend() const override { return inner_->backend(); }
  std::string Describe() const override { return "gated(" + inner_->Describe() + ")"; }
  Result<io::FileId> OpenFile(const std::string& path) override {
    auto id = inner_->OpenFile(path);
    if (id.ok() && path == gated_path_) gated_file_ = *id;
    return id;
  }
  Status CloseFile(io::FileId file) override { return inner_->CloseFile(file); }
  Result<uint64_t> FileSize(io::FileId file) const override { return inner_->FileSize(file); }
  io::IoStatsSnapshot Stats() const override { return inner_->Stats(); }
  void SubmitBatch(std::span<io::BlockRead> reads, io::IoCallback done) override {
    const bool gated = !reads.empty() && reads[0].file == gated_file_;
    if (!gated) return inner_->SubmitBatch(reads, std::move(done));
    if (on_submit) on_submit(reads.size());
    const uint64_t seq = next_seq_.fetch_add(1);
    inner_->SubmitBatch(reads, [this, seq, done = std::move(done)]() mutable {
      std::unique_lock lock(mu_);
      if (open_) {
        lock.unlock();
        done();
        return;
      }
      held_.emplace(seq, std::move(done));
    });
    if (after_submit) after_submit();
  }
  void Shutdown() override {
    Open();
    inner_->Shutdown();
    Open();  // batches that completed during the inner shutdown
  }
  // Lets the held completions run (here) and every later one pass.
  void Open() {
    std::map<uint64_t, io::IoCallback> run;
    {
      std::lock_guard lock(mu_);
      open_ = true;
      run.swap(held_);
    }
    for (auto& [seq, done] : run) done();
  }
  size_t held() {
    std::lock_guard lock(mu_);
    return held_.size();
  }
  // Called on the submitting thread with each gated batch's size, before the
  // batch goes on, and after it went on (set them before the batches they
  // should see).
  std::function<void(size_t reads)> on_submit;
  std::function<void()> after_submit;
  // Lets the held completion of the earliest submitted batch run (here); the
  // gate stays shut.
  void RunOldestHeld() {
    io::IoCallback done;
    {
      std::lock_guard lock(mu_);
      if (held_.empty()) return;
      done = std::move(held_.begin()->second);
      held_.erase(held_.begin());
    }
    done();
  }

 private:
  std::unique_ptr<io::IoEngine> inner_;
  std::string gated_path_;
  io::FileId gated_file_ = ~io::FileId{0};
  std::mutex mu_;
  bool open_ = false;
  std::atomic<uint64_t> next_seq_{0};
  std::map<uint64_t, io::IoCallback> held_;  // by submission order
};

}  // namespace engram::testing
