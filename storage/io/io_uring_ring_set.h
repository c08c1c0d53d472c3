// IoUringRingSet: one IoEngine over several io_uring rings, each with its own
// ring thread (IoOptions::rings).
//
// Why: one ring thread submits and reaps every read of its ring, and on a
// fast NVMe drive that thread's share of each read (the submission, the
// completion, the hand-off of each landed batch) caps the rate one ring
// reaches, well below the 1-2 M random 4 KiB reads per second a PCIe Gen4/5
// drive serves. Several rings on several cores lift that cap. Where one core
// keeps up (few cores, a slower device), one ring is cheaper: the default.
//
// The rings share one FileTable, so a FileId names the same open file on
// every ring and each file is opened once; each ring registers its fd and the
// RegisterBuffer regions in its own fixed tables. The queue depth is split
// among the rings, so the reads in flight stay at most IoOptions::queue_depth
// in total. A batch goes whole to the next ring in turn; a batch of more than
// kSplitReads reads is cut into contiguous parts, one per ring, and its
// callback runs once, after the last part has landed (on that part's ring
// thread, or inline if that part could not be started). OpenFile, CloseFile,
// RegisterBuffer and ReadBlocks wait for every ring, so they are refused
// inside a completion callback (a lone ring runs them inline there).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "storage/io/file_table.h"
#include "storage/io/io_engine.h"
#include "storage/io/io_uring_engine.h"

namespace engram::io {

class IoUringRingSet final : public IoEngine {
 public:
  // Fails as IoUringEngine::Create does if any ring cannot be set up.
  static Result<std::unique_ptr<IoEngine>> Create(const IoOptions& options);
  // InvalidArgument unless 1 <= rings <= min(kMaxRings, queue_depth);
  // CreateIoEngine checks it for every backend.
  static Status ValidateRings(const IoOptions& options);
  ~IoUringRingSet() override;

  // Batches of at most this many reads go whole to one ring.
  static constexpr size_t kSplitReads = 64;
  static constexpr uint32_t kMaxRings = 64;

  IoBackend backend() const override { return IoBackend::kIoUring; }
  std::string Describe() const override;
  Result<FileId> OpenFile(const std::string& path) override;
  Status CloseFile(FileId file) override;
  Result<uint64_t> FileSize(FileId file) const override;
  void SubmitBatch(std::span<BlockRead> reads, IoCallback done) override;
  Status ReadBlocks(std::span<BlockRead> reads) override;
  bool RunReadStream(ReadStream& stream) override;
  Status RegisterBuffer(std::span<std::byte> region) override;
  IoStatsSnapshot Stats() const override;
  void Shutdown() override;

 private:
  explicit IoUringRingSet(const IoOptions& options);
  bool OnAnyRingThread() const;

  const IoOptions options_;
  const std::shared_ptr<FileTable> files_;
  std::vector<std::unique_ptr<IoUringEngine>> rings_;
  std::atomic<size_t> next_ring_{0};
};

}  // namespace engram::io
