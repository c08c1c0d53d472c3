#include "storage/io/io_uring_ring_set.h"

#include <algorithm>

namespace engram::io {
namespace {

// The callback of a batch cut into parts: runs once, when the last part lands.
struct SplitBatch {
  explicit SplitBatch(IoCallback cb, size_t parts) : done(std::move(cb)), remaining(parts) {}
  IoCallback done;
  std::atomic<size_t> remaining;
  void PartDone() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) done();
  }
};

}  // namespace

Result<std::unique_ptr<IoEngine>> IoUringRingSet::Create(const IoOptions& options) {
  if (options.rings < 1 || options.rings > options.queue_depth) {
    return Status::InvalidArgument("io: rings " + std::to_string(options.rings) + " not in 1..queue_depth (" +
                                   std::to_string(options.queue_depth) + ")");
  }
  std::unique_ptr<IoUringRingSet> set(new IoUringRingSet(options));
  for (uint32_t i = 0; i < options.rings; ++i) {
    IoOptions ring = options;
    ring.rings = 1;
    // queue_depth split as evenly as it goes: the first (depth % rings) rings take one more.
    ring.queue_depth = options.queue_depth / options.rings + (i < options.queue_depth % options.rings ? 1 : 0);
    ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<IoUringEngine> engine, IoUringEngine::CreateSharingFiles(ring, set->files_));
    set->rings_.push_back(std::move(engine));
  }
  return std::unique_ptr<IoEngine>(std::move(set));
}

IoUringRingSet::IoUringRingSet(const IoOptions& options)
    : options_(options), files_(std::make_shared<FileTable>(options.max_open_files)) {}

IoUringRingSet::~IoUringRingSet() { Shutdown(); }

std::string IoUringRingSet::Describe() const {
  return std::to_string(rings_.size()) + " rings, each " + rings_.front()->Describe();
}

Result<FileId> IoUringRingSet::OpenFile(const std::string& path) {
  ENGRAM_ASSIGN_OR_RETURN(FileId id, files_->Open(path, options_.use_direct_io));
  for (size_t i = 0; i < rings_.size(); ++i) {
    Status st = rings_[i]->AttachFile(id);
    if (!st.ok()) {
      for (size_t j = 0; j < i; ++j) rings_[j]->DetachFile(id);
      (void)files_->Close(id);
      return st.WithContext("open '" + path + "'");
    }
  }
  return id;
}

Status IoUringRingSet::CloseFile(FileId file) {
  if (files_->Get(file) == nullptr) {
    return Status::InvalidArgument("close: file id " + std::to_string(file) + " is not open");
  }
  for (auto& ring : rings_) ring->DetachFile(file);
  return files_->Close(file);
}

Result<uint64_t> IoUringRingSet::FileSize(FileId file) const { return rings_.front()->FileSize(file); }

void IoUringRingSet::SubmitBatch(std::span<BlockRead> reads, IoCallback done) {
  const size_t n = rings_.size();
  const size_t parts = std::min(n, (reads.size() + kSplitReads - 1) / kSplitReads);
  const size_t first = next_ring_.fetch_add(std::max<size_t>(parts, 1), std::memory_order_relaxed);
  if (parts <= 1) {
    rings_[first % n]->SubmitBatch(reads, std::move(done));
    return;
  }
  // shared_ptr: each part's callback holds it, so it outlives the part that
  // finishes last, whichever ring thread (or inline failure) that is.
  auto split = std::make_shared<SplitBatch>(std::move(done), parts);
  const size_t per_part = (reads.size() + parts - 1) / parts;
  for (size_t p = 0; p < parts; ++p) {
    const size_t begin = p * per_part;
    const size_t count = std::min(per_part, reads.size() - begin);
    rings_[(first + p) % n]->SubmitBatch(reads.subspan(begin, count), [split] { split->PartDone(); });
  }
}

bool IoUringRingSet::OnAnyRingThread() const {
  return std::any_of(rings_.begin(), rings_.end(), [](const auto& ring) { return ring->OnRingThread(); });
}

Status IoUringRingSet::ReadBlocks(std::span<BlockRead> reads) {
  if (OnAnyRingThread()) {
    return Status::Internal("ReadBlocks called from an io_uring completion callback would deadlock");
  }
  return IoEngine::ReadBlocks(reads);
}

Status IoUringRingSet::RegisterBuffer(std::span<std::byte> region) {
  // Every ring registers the region in its own buffer table; a ring that
  // cannot reads into it unregistered, as a lone ring would.
  Status first_failure;
  for (auto& ring : rings_) {
    Status st = ring->RegisterBuffer(region);
    if (!st.ok() && first_failure.ok()) first_failure = std::move(st);
  }
  return first_failure;
}

IoStatsSnapshot IoUringRingSet::Stats() const {
  IoStatsSnapshot total;
  for (const auto& ring : rings_) total += ring->Stats();
  return total;
}

void IoUringRingSet::Shutdown() {
  for (auto& ring : rings_) ring->Shutdown();
}

}  // namespace engram::io
