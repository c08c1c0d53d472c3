#include "storage/io/io_uring_ring_set.h"

#include <algorithm>

#include "storage/log.h"

namespace engram::io {
namespace {

// The callback of a batch cut into parts: runs once, when the last part lands.
// Held by each part's callback and by the submitting thread until it has
// handed out every part, so whichever finishes last frees it.
struct SplitBatch {
  explicit SplitBatch(IoCallback cb, size_t parts) : done(std::move(cb)), remaining(parts) {}
  IoCallback done;
  std::atomic<size_t> remaining;
  void PartDone() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    // Moved out first: the caller's callback and what it captured are
    // released here, on the thread that ran it, not whenever the last
    // holder of this state lets go.
    IoCallback cb = std::move(done);
    cb();
  }
};

Status CalledFromCallback(const char* what) {
  return Status::Internal(std::string(what) +
                          " called from an io_uring completion callback could deadlock: it waits for every ring");
}

}  // namespace

Status IoUringRingSet::ValidateRings(const IoOptions& options) {
  if (options.rings < 1 || options.rings > kMaxRings || options.rings > options.queue_depth) {
    return Status::InvalidArgument("io: rings " + std::to_string(options.rings) + " not in 1.." +
                                   std::to_string(kMaxRings) + " and at most queue_depth (" +
                                   std::to_string(options.queue_depth) + ")");
  }
  return Status::OK();
}

Result<std::unique_ptr<IoEngine>> IoUringRingSet::Create(const IoOptions& options) {
  ENGRAM_RETURN_IF_ERROR(ValidateRings(options));
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
  return std::to_string(rings_.size()) + " io_uring rings, " + std::to_string(options_.queue_depth) +
         " reads in flight in all; ring 0: " + rings_.front()->Describe();
}

Result<FileId> IoUringRingSet::OpenFile(const std::string& path) {
  if (OnAnyRingThread()) return CalledFromCallback("OpenFile");
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
  if (OnAnyRingThread()) return CalledFromCallback("CloseFile");
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
  // Part p is reads [p * size / parts, (p + 1) * size / parts): sizes differ
  // by at most one, and none is empty (parts <= size).
  for (size_t p = 0; p < parts; ++p) {
    const size_t begin = p * reads.size() / parts;
    const size_t end = (p + 1) * reads.size() / parts;
    rings_[(first + p) % n]->SubmitBatch(reads.subspan(begin, end - begin), [split] { split->PartDone(); });
  }
}

bool IoUringRingSet::OnAnyRingThread() const {
  return std::any_of(rings_.begin(), rings_.end(), [](const auto& ring) { return ring->OnRingThread(); });
}

Status IoUringRingSet::ReadBlocks(std::span<BlockRead> reads) {
  if (OnAnyRingThread()) {
    return CalledFromCallback("ReadBlocks");
  }
  return IoEngine::ReadBlocks(reads);
}

bool IoUringRingSet::RunReadStream(ReadStream& stream) {
  // The stream runs on the caller's own ring, at the set's whole depth; it is
  // counted in the first ring's statistics.
  if (OnAnyRingThread()) return false;
  return rings_.front()->RunReadStreamAtDepth(stream, options_.queue_depth);
}

Status IoUringRingSet::RegisterBuffer(std::span<std::byte> region) {
  if (OnAnyRingThread()) return CalledFromCallback("RegisterBuffer");
  // Every ring registers the region in its own buffer table; a ring that
  // cannot (each pins the pages against RLIMIT_MEMLOCK) reads into it
  // unregistered, as a lone ring would. OK if any ring took it, so that the
  // caller goes on offering regions.
  Status first_failure;
  bool any = false;
  for (auto& ring : rings_) {
    Status st = ring->RegisterBuffer(region);
    any = any || st.ok();
    if (!st.ok() && first_failure.ok()) first_failure = std::move(st);
  }
  if (!any) return first_failure;
  if (!first_failure.ok()) log::Debug("io: a buffer registered with only some rings ({})", first_failure.ToString());
  return Status::OK();
}

IoStatsSnapshot IoUringRingSet::Stats() const {
  IoStatsSnapshot total;
  for (const auto& ring : rings_) total += ring->Stats();
  return total;
}

void IoUringRingSet::Shutdown() {
  // Every ring stops taking work first, then each is drained: the rings
  // cancel and drain side by side, and no ring serves new parts while
  // another is being waited for.
  for (auto& ring : rings_) ring->RequestShutdown();
  for (auto& ring : rings_) ring->Shutdown();
}

}  // namespace engram::io
