// miss_reaper_shapes: how fast can a miss path go on 2 vCPUs, depending on
// which thread checks the landed blocks? The store's own per-block work --
// the block checksum (VerifyBlockChecksum), one row copied out, the rows
// offered to a real default-policy RowCache (InsertBatch) -- arranged around
// one io_uring ring three ways, with no store around it:
//   bare     the ring's thread reaps and resubmits, nothing else (fio's shape)
//   inline   the ring's thread also checks each landed chunk of 64 blocks,
//            then reads the next blocks into it (two busy threads: it and
//            the kernel's io-wq worker)
//   handoff  a landed chunk goes to a checker thread (mutex + condition
//            variable), which hands it back through an eventfd the ring
//            reads: the store's shape (three busy threads)
// and the last two again through the store's own I/O engine (IoUringEngine,
// one SubmitBatch of 64 reads per chunk, its completion callback):
//   engine-inline   the callback checks the chunk and resubmits it (on the
//                   engine's ring thread)
//   engine-handoff  the callback hands the chunk to a checker thread, which
//                   resubmits it with SubmitBatch from there (the store's
//                   streaming gather, without the store)
// Random distinct 4 KiB blocks, O_DIRECT, fixed file and buffers, a ring of
// 4 chunks (256 buffers) and 128 reads in flight, as the store streams a
// large gather. The shapes alternate pass by pass (a shared host drifts).
// An experiment, built with -DENGRAM_BUILD_EXPERIMENTS=ON; its figures are in
// docs/lab-notes/2026-12-05-miss-path-anatomy-sector-reads-and-the-raw-engine.md
// (section 8).
//   cmake --build build --target miss_reaper_shapes
//   build/miss_reaper_shapes TABLE [SECONDS] [PASSES] [SHAPE...]
#include <fcntl.h>
#include <liburing.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>
#include <cstring>
#include <thread>
#include <vector>

#include "src/cache/row_cache.h"
#include "storage/io/io_engine.h"
#include "storage/io/aligned_buffer.h"
#include "storage/table_file.h"
#include "storage/table_format.h"

using namespace engram;

namespace {

constexpr unsigned kChunkBlocks = 64;
constexpr unsigned kRingChunks = 4;
constexpr unsigned kInFlight = 128;
constexpr uint64_t kWakeTag = ~uint64_t{0};

double CpuSeconds() {
  rusage r;
  getrusage(RUSAGE_SELF, &r);  // io-wq workers are threads of this process
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

enum class Shape { kBare, kInline, kHandoff, kEngineInline, kEngineHandoff };
const char* Name(Shape s) {
  switch (s) {
    case Shape::kBare: return "bare";
    case Shape::kInline: return "inline";
    case Shape::kHandoff: return "handoff";
    case Shape::kEngineInline: return "engine-inline";
    case Shape::kEngineHandoff: return "engine-handoff";
  }
  return "?";
}

struct PassResult {
  double reads_per_s;
  double cpu_ns_per_read;
  uint64_t bad_blocks;
};

class Pass {
 public:
  Pass(const TableFile& table, int fd, Shape shape) : table_(table), fd_(fd), shape_(shape), rng_(7) {}

  Result<PassResult> Run(double seconds) {
    if (shape_ == Shape::kEngineInline || shape_ == Shape::kEngineHandoff) return RunOnEngine(seconds);
    ENGRAM_RETURN_IF_ERROR(Prepare());
    io_uring_params params{};
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    if (int rc = io_uring_queue_init_params(2 * kInFlight, &ring_, &params); rc != 0) {
      return Status::FromErrno("io_uring_setup", -rc);
    }
    io_uring_register_files(&ring_, &fd_, 1);
    iovec iov{buffers_.data(), buffers_.size()};
    io_uring_register_buffers(&ring_, &iov, 1);
    wake_fd_ = eventfd(0, EFD_CLOEXEC);

    std::thread checker;
    if (shape_ == Shape::kHandoff) checker = std::thread([this] { CheckerLoop(); });
    for (unsigned c = 0; c < kRingChunks; ++c) QueueChunk(c);

    const double cpu0 = CpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    const auto deadline = t0 + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) Turn();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = CpuSeconds() - cpu0;

    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (checker.joinable()) checker.join();
    // Drain what is in flight before the buffers go.
    while (in_flight_ > 0) {
      io_uring_submit_and_wait(&ring_, 1);
      io_uring_cqe* cqe;
      while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
        if (cqe->user_data != kWakeTag) --in_flight_;
        io_uring_cqe_seen(&ring_, cqe);
      }
    }
    io_uring_queue_exit(&ring_);
    ::close(wake_fd_);
    return PassResult{static_cast<double>(reads_) / elapsed, cpu / static_cast<double>(reads_) * 1e9, bad_blocks_};
  }

 private:
  Status Prepare() {
    RowCacheConfig config = RowCacheConfig::Preset("default").value();
    const uint32_t record = table_.header().record_bytes;
    ENGRAM_ASSIGN_OR_RETURN(cache_, RowCache::Create(config, uint64_t{64} << 20, record, table_.header().row_count));
    cache_->CommitMemory();
    cache_->WaitForMemory();
    ENGRAM_ASSIGN_OR_RETURN(buffers_, io::AlignedBuffer::Allocate(kRingChunks * kChunkBlocks * io::kBlockSize));
    out_.assign(size_t{kChunkBlocks} * record, std::byte{0});
    return Status::OK();
  }

  Result<PassResult> RunOnEngine(double seconds) {
    ENGRAM_RETURN_IF_ERROR(Prepare());
    io::IoOptions options;
    options.backend = io::IoBackend::kIoUring;
    options.queue_depth = kInFlight;
    ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<io::IoEngine> engine, io::CreateIoEngine(options));
    ENGRAM_ASSIGN_OR_RETURN(io::FileId file, engine->OpenFile(table_.path()));
    (void)engine->RegisterBuffer({buffers_.data(), buffers_.size()});
    engine_ = engine.get();
    file_ = file;
    std::thread checker;
    if (shape_ == Shape::kEngineHandoff) checker = std::thread([this] { CheckerLoop(); });
    const double cpu0 = CpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (unsigned c = 0; c < kRingChunks; ++c) SubmitToEngine(c);
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stopping_.store(true);
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return idle_chunks_ == kRingChunks; });
      stop_ = true;
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = CpuSeconds() - cpu0;
    cv_.notify_all();
    if (checker.joinable()) checker.join();
    engine->Shutdown();
    const double reads = static_cast<double>(engine_reads_.load());
    return PassResult{reads / elapsed, cpu / reads * 1e9, bad_blocks_};
  }

  void SubmitToEngine(unsigned c) {
    for (unsigned k = 0; k < kChunkBlocks; ++k) {
      const uint64_t block = rng_() % table_.header().block_count;
      block_of_[c][k] = block;
      reads_of_[c][k] = io::BlockRead{file_, table_.BlockOffset(block), static_cast<uint32_t>(io::kBlockSize),
                                      Block(c, k), Status::OK()};
    }
    engine_->SubmitBatch(std::span<io::BlockRead>(reads_of_[c], kChunkBlocks), [this, c] { OnEngineLanded(c); });
  }

  void OnEngineLanded(unsigned c) {
    engine_reads_.fetch_add(kChunkBlocks, std::memory_order_relaxed);
    if (shape_ == Shape::kEngineInline) {
      Check(c);
      return Recycle(c);
    }
    std::lock_guard lock(mu_);
    landed_.push_back(c);
    cv_.notify_all();
  }

  void Recycle(unsigned c) {
    if (!stopping_.load()) return SubmitToEngine(c);
    std::lock_guard lock(mu_);
    ++idle_chunks_;
    cv_.notify_all();
  }

  std::byte* Block(unsigned c, unsigned k) { return buffers_.data() + (size_t{c} * kChunkBlocks + k) * io::kBlockSize; }

  void QueueChunk(unsigned c) {
    left_[c] = kChunkBlocks;
    for (unsigned k = 0; k < kChunkBlocks; ++k) {
      const uint64_t block = rng_() % table_.header().block_count;
      block_of_[c][k] = block;
      ready_.push_back({c, k});
    }
  }

  void Turn() {
    if (shape_ == Shape::kHandoff && !wake_armed_) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      io_uring_prep_read(sqe, wake_fd_, &wake_value_, sizeof(wake_value_), 0);
      io_uring_sqe_set_data64(sqe, kWakeTag);
      wake_armed_ = true;
    }
    while (!ready_.empty() && in_flight_ < kInFlight) {
      auto [c, k] = ready_.front();
      ready_.pop_front();
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      io_uring_prep_read_fixed(sqe, 0, Block(c, k), io::kBlockSize, table_.BlockOffset(block_of_[c][k]), 0);
      sqe->flags |= IOSQE_FIXED_FILE;
      io_uring_sqe_set_data64(sqe, c);
      ++in_flight_;
    }
    io_uring_submit_and_wait(&ring_, 1);
    unsigned head, seen = 0;
    io_uring_cqe* cqe;
    landed_now_.clear();
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      if (cqe->user_data == kWakeTag) {
        wake_armed_ = false;
        continue;
      }
      --in_flight_;
      ++reads_;
      const auto c = static_cast<unsigned>(cqe->user_data);
      if (--left_[c] == 0) landed_now_.push_back(c);
    }
    io_uring_cq_advance(&ring_, seen);
    for (unsigned c : landed_now_) {
      switch (shape_) {
        case Shape::kBare:
          QueueChunk(c);
          break;
        case Shape::kInline:
          Check(c);
          QueueChunk(c);
          break;
        case Shape::kHandoff: {
          std::lock_guard lock(mu_);
          landed_.push_back(c);
          cv_.notify_one();
          break;
        }
        case Shape::kEngineInline:
        case Shape::kEngineHandoff:
          break;  // never here: Run hands these shapes to RunOnEngine
      }
    }
    if (shape_ == Shape::kHandoff) {
      std::lock_guard lock(mu_);
      for (unsigned c : checked_) QueueChunk(c);
      checked_.clear();
    }
  }

  // The store's per-chunk work: verify each block, copy one row of it out,
  // offer the chunk's rows to the cache.
  void Check(unsigned c) {
    const uint32_t record = table_.header().record_bytes;
    const uint64_t seed = BlockSeedBase(table_.header());
    for (unsigned k = 0; k < kChunkBlocks; ++k) {
      const std::byte* block = Block(c, k);
      if (!VerifyBlockChecksum({block, io::kBlockSize}, block_of_[c][k], seed).ok()) ++bad_blocks_;
      const unsigned r = static_cast<unsigned>(block_of_[c][k] % table_.rows_per_block());
      const std::byte* row = block + size_t{r} * record;
      std::memcpy(out_.data() + size_t{k} * record, row, record);
      ids_[k] = block_of_[c][k] * table_.rows_per_block() + r;
      rows_[k] = row;
    }
    cache_->InsertBatch(ids_, rows_, outcomes_);
  }

  // The checker thread of the handoff shapes: checks each landed chunk and
  // hands it back, to the engine (engine-handoff) or to the ring's thread
  // through checked_ and the eventfd (handoff).
  void CheckerLoop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !landed_.empty(); });
      if (stop_) return;
      const unsigned c = landed_.front();
      landed_.pop_front();
      lock.unlock();
      Check(c);
      if (shape_ == Shape::kEngineHandoff) {
        Recycle(c);
        lock.lock();
        continue;
      }
      lock.lock();
      const bool wake = checked_.empty();
      checked_.push_back(c);
      if (wake) {
        const uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
      }
    }
  }

  const TableFile& table_;
  int fd_;
  io::IoEngine* engine_ = nullptr;
  io::FileId file_ = 0;
  io::BlockRead reads_of_[kRingChunks][kChunkBlocks];
  std::atomic<uint64_t> engine_reads_{0};
  std::atomic<bool> stopping_{false};
  unsigned idle_chunks_ = 0;
  Shape shape_;
  std::mt19937_64 rng_;
  std::unique_ptr<RowCache> cache_;
  io::AlignedBuffer buffers_;
  std::vector<std::byte> out_;
  io_uring ring_{};
  int wake_fd_ = -1;
  uint64_t wake_value_ = 0;
  bool wake_armed_ = false;
  std::deque<std::pair<unsigned, unsigned>> ready_;
  unsigned in_flight_ = 0;
  unsigned left_[kRingChunks] = {};
  uint64_t block_of_[kRingChunks][kChunkBlocks] = {};
  uint64_t ids_[kChunkBlocks] = {};
  const std::byte* rows_[kChunkBlocks] = {};
  InsertOutcome outcomes_[kChunkBlocks] = {};
  std::vector<unsigned> landed_now_;
  uint64_t reads_ = 0;
  uint64_t bad_blocks_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<unsigned> landed_;   // chunks for the checker
  std::vector<unsigned> checked_;  // chunks back from it
  bool stop_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TABLE [SECONDS] [PASSES]\n", argv[0]);
    return 2;
  }
  const double seconds = argc > 2 ? std::atof(argv[2]) : 2.0;
  const int passes = argc > 3 ? std::atoi(argv[3]) : 3;
  auto table = TableFile::Open(argv[1]);
  if (!table.ok()) {
    std::fprintf(stderr, "%s\n", table.status().ToString().c_str());
    return 1;
  }
  if ((*table)->header().is_reference()) {
    std::fprintf(stderr, "%s: a block table is needed (engram-gen makes one)\n", argv[1]);
    return 2;
  }
  const int fd = ::open(argv[1], O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) {
    std::perror(argv[1]);
    return 1;
  }
  std::vector<Shape> shapes;
  for (int i = 4; i < argc; ++i) {
    for (Shape s : {Shape::kBare, Shape::kInline, Shape::kHandoff, Shape::kEngineInline, Shape::kEngineHandoff}) {
      if (std::strcmp(argv[i], Name(s)) == 0) shapes.push_back(s);
    }
  }
  if (shapes.empty()) shapes = {Shape::kBare, Shape::kInline, Shape::kHandoff, Shape::kEngineInline, Shape::kEngineHandoff};
  for (int p = 0; p < passes; ++p) {
    double bare = 0;
    for (Shape shape : shapes) {
      Pass pass(**table, fd, shape);
      auto r = pass.Run(seconds);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
        return 1;
      }
      if (shape == Shape::kBare || bare == 0) bare = r->reads_per_s;
      std::printf("pass=%d shape=%-14s reads_per_s=%.0f cpu_ns_per_read=%.0f ratio_to_bare=%.3f bad_blocks=%llu\n", p,
                  Name(shape), r->reads_per_s, r->cpu_ns_per_read, r->reads_per_s / bare,
                  static_cast<unsigned long long>(r->bad_blocks));
    }
  }
  return 0;
}
