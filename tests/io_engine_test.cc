// Behaviour of every I/O backend against real files on the real disk.
#include "storage/io/io_engine.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <future>

#include "storage/io/fault_injection_engine.h"
#include "tests/io_test_util.h"

namespace engram::io {
namespace {

using testing::CheckBlock;
using testing::RandomReads;
using testing::TempFile;

// A few MB with a partial final block (size not a multiple of 4 KiB).
constexpr uint64_t kFileSize = 1024 * 1024 + 1000;

BlockRead MakeRead(FileId file, uint64_t offset, uint64_t length, std::byte* dst) {
  return BlockRead{file, offset, static_cast<uint32_t>(length), dst, Status()};
}

IoOptions OptionsFor(IoBackend backend, uint32_t rings = 1) {
  IoOptions o;
  o.backend = backend;
  o.queue_depth = 8;  // small, so the batches below exceed it
  o.rings = rings;    // io_uring: 8 split 3 / 3 / 2 over three rings
  o.threads = 3;
  return o;
}

// One engine of the conformance suite below: a backend, and for io_uring the
// number of rings (a ring set cuts batches of more than 64 reads across its
// rings, so the larger batches below land in parts).
struct EngineKind {
  IoBackend backend;
  uint32_t rings = 1;
};

std::unique_ptr<IoEngine> MustCreate(const IoOptions& options) {
  auto engine = CreateIoEngine(options);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

// Waits for one asynchronous batch.
class Completion {
 public:
  IoCallback Callback() {
    return [this] {
      std::lock_guard lock(mu_);
      ++calls_;
      cv_.notify_all();
    };
  }
  void Wait(int calls = 1) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return calls_ >= calls; });
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
};

class IoEngineTest : public ::testing::TestWithParam<EngineKind> {
 protected:
  void SetUp() override {
    if (GetParam().backend == IoBackend::kIoUring) ENGRAM_SKIP_WITHOUT_IO_URING();
    engine_ = MustCreate(OptionsFor(GetParam().backend, GetParam().rings));
    ASSERT_NE(engine_, nullptr);
    auto id = engine_->OpenFile(file_.path());
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    file_id_ = *id;
  }

  TempFile file_{kFileSize};
  std::unique_ptr<IoEngine> engine_;
  FileId file_id_ = 0;
};

TEST_P(IoEngineTest, BackendIsTheOneRequested) {
  EXPECT_EQ(engine_->backend(), GetParam().backend);
  EXPECT_FALSE(engine_->Describe().empty());
  EXPECT_EQ(*engine_->FileSize(file_id_), kFileSize);
}

TEST_P(IoEngineTest, ColdBatchLargerThanQueueDepthReturnsByteExactBlocks) {
  auto arena = AlignedBuffer::Allocate(200 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::vector<BlockRead> reads = RandomReads(file_id_, file_.blocks(), 200, 1, *arena, 7);
  ASSERT_TRUE(engine_->ReadBlocks(reads).ok()) << FirstError(reads).ToString();
  for (const BlockRead& r : reads) {
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    ASSERT_EQ(CheckBlock(r, kFileSize), "");
  }
}

TEST_P(IoEngineTest, MultiBlockReadsAreByteExact) {
  auto arena = AlignedBuffer::Allocate(40 * 4 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::vector<BlockRead> reads = RandomReads(file_id_, file_.blocks() - 1, 40, 4, *arena, 11);
  ASSERT_TRUE(engine_->ReadBlocks(reads).ok()) << FirstError(reads).ToString();
  for (const BlockRead& r : reads) ASSERT_EQ(CheckBlock(r, kFileSize), "");
}

TEST_P(IoEngineTest, FinalPartialBlockIsZeroFilledPastEndOfFile) {
  auto arena = AlignedBuffer::Allocate(2 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::memset(arena->data(), 0xAB, arena->size());  // zeros must come from the engine
  BlockRead read = MakeRead(file_id_, (file_.blocks() - 2) * kBlockSize, 2 * kBlockSize, arena->data());
  ASSERT_TRUE(engine_->ReadBlocks({&read, 1}).ok()) << read.status.ToString();
  EXPECT_EQ(CheckBlock(read, kFileSize), "");
}

TEST_P(IoEngineTest, ReadPastEndOfFileFailsOnlyThatRead) {
  auto arena = AlignedBuffer::Allocate(3 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  BlockRead reads[3] = {
      MakeRead(file_id_, 0, kBlockSize, arena->data()),
      MakeRead(file_id_, file_.blocks() * kBlockSize, kBlockSize, arena->data() + kBlockSize),  // starts at EOF
      MakeRead(file_id_, kBlockSize, kBlockSize, arena->data() + 2 * kBlockSize),
  };
  Status st = engine_->ReadBlocks(reads);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  EXPECT_NE(st.message().find("past end of file"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(file_.path()), std::string::npos) << "error must name the file: " << st.message();
  EXPECT_TRUE(reads[0].status.ok());
  EXPECT_EQ(reads[1].status.code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(reads[2].status.ok());
  EXPECT_EQ(CheckBlock(reads[0], kFileSize), "");
  EXPECT_EQ(CheckBlock(reads[2], kFileSize), "");
  // A multi-block read running past the last (partial) block is also out of range.
  BlockRead over = MakeRead(file_id_, (file_.blocks() - 1) * kBlockSize, 2 * kBlockSize, arena->data());
  EXPECT_EQ(engine_->ReadBlocks({&over, 1}).code(), StatusCode::kOutOfRange);
}

TEST_P(IoEngineTest, UnalignedOrMalformedRequestsAreInvalidArguments) {
  auto arena = AlignedBuffer::Allocate(4 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::byte* dst = arena->data();
  BlockRead bad[] = {
      MakeRead(file_id_, 512, kBlockSize, dst),             // unaligned offset
      MakeRead(file_id_, 0, 1000, dst),                     // unaligned length
      MakeRead(file_id_, 0, 0, dst),                        // empty
      MakeRead(file_id_, 0, kBlockSize, dst + 8),           // unaligned destination
      MakeRead(file_id_, 0, kBlockSize, nullptr),           // no destination
      MakeRead(file_id_ + 100, 0, kBlockSize, dst),         // unknown file
  };
  for (BlockRead& r : bad) {
    EXPECT_EQ(engine_->ReadBlocks({&r, 1}).code(), StatusCode::kInvalidArgument)
        << "offset " << r.offset << " length " << r.length;
  }
  // Also inside a batch of good reads: only the bad one fails.
  BlockRead mixed[2] = {MakeRead(file_id_, 0, kBlockSize, dst), MakeRead(file_id_, 100, kBlockSize, dst + kBlockSize)};
  EXPECT_EQ(engine_->ReadBlocks(mixed).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(mixed[0].status.ok());
  EXPECT_EQ(CheckBlock(mixed[0], kFileSize), "");
}

TEST_P(IoEngineTest, AsyncBatchCallsDoneOnceAfterEveryRead) {
  auto arena = AlignedBuffer::Allocate(100 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::vector<BlockRead> reads = RandomReads(file_id_, file_.blocks(), 100, 1, *arena, 3);
  Completion done;
  engine_->SubmitBatch(reads, done.Callback());
  done.Wait();
  for (const BlockRead& r : reads) {
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    ASSERT_EQ(CheckBlock(r, kFileSize), "");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(done.calls(), 1);
}

TEST_P(IoEngineTest, BatchOfOnlyInvalidReadsCompletesInline) {
  auto arena = AlignedBuffer::Allocate(kBlockSize);
  ASSERT_TRUE(arena.ok());
  BlockRead r = MakeRead(file_id_, 3, kBlockSize, arena->data());
  Completion done;
  engine_->SubmitBatch({&r, 1}, done.Callback());
  EXPECT_EQ(done.calls(), 1);
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
}

TEST_P(IoEngineTest, ConcurrentSubmittersAllGetTheirOwnBytes) {
  constexpr int kThreads = 4;
  constexpr int kBatches = 30;
  constexpr int kPerBatch = 16;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto arena = AlignedBuffer::Allocate(kPerBatch * 2 * kBlockSize);
      if (!arena.ok()) {
        ++failures;
        return;
      }
      for (int b = 0; b < kBatches; ++b) {
        std::vector<BlockRead> reads =
            RandomReads(file_id_, file_.blocks() - 1, kPerBatch, 1 + (b % 2), *arena, t * 1000 + b);
        Status st;
        if (b % 3 == 0) {  // mix the synchronous and asynchronous forms
          Completion done;
          engine_->SubmitBatch(reads, done.Callback());
          done.Wait();
          st = FirstError(reads);
        } else {
          st = engine_->ReadBlocks(reads);
        }
        if (!st.ok()) ++failures;
        for (const BlockRead& r : reads) {
          if (!CheckBlock(r, kFileSize).empty()) ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(engine_->Stats().reads, uint64_t{kThreads} * kBatches * kPerBatch);
}

TEST_P(IoEngineTest, ShutdownWithReadsInFlightFinishesEveryReadAsDoneOrCancelled) {
  constexpr int kBatches = 40;
  constexpr int kPerBatch = 32;
  auto arena = AlignedBuffer::Allocate(kBatches * kPerBatch * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::vector<std::vector<BlockRead>> batches;
  for (int b = 0; b < kBatches; ++b) {
    batches.push_back(RandomReads(file_id_, file_.blocks(), kPerBatch, 1, *arena, b));
    for (int i = 0; i < kPerBatch; ++i) batches[b][i].dst = arena->data() + (b * kPerBatch + i) * kBlockSize;
  }
  Completion done;
  for (auto& reads : batches) engine_->SubmitBatch(reads, done.Callback());
  engine_->Shutdown();  // must not hang, must run every callback before returning
  EXPECT_EQ(done.calls(), kBatches);
  int ok = 0, cancelled = 0;
  for (auto& reads : batches) {
    for (const BlockRead& r : reads) {
      if (r.status.ok()) {
        ++ok;
        EXPECT_EQ(CheckBlock(r, kFileSize), "");
      } else {
        EXPECT_EQ(r.status.code(), StatusCode::kCancelled) << r.status.ToString();
        ++cancelled;
      }
    }
  }
  EXPECT_EQ(ok + cancelled, kBatches * kPerBatch);
  // After shutdown, new work is refused as cancelled, inline.
  BlockRead late = MakeRead(file_id_, 0, kBlockSize, arena->data());
  EXPECT_EQ(engine_->ReadBlocks({&late, 1}).code(), StatusCode::kCancelled);
  engine_->Shutdown();  // idempotent
}

// Shutdown may be called from any (non-engine) thread, and every call, not
// just the first, returns only after every pending callback has run: a
// caller relies on that to free the batch's buffers.
TEST_P(IoEngineTest, ConcurrentShutdownsBothWaitForARunningCallback) {
  auto arena = AlignedBuffer::Allocate(kBlockSize);
  ASSERT_TRUE(arena.ok());
  BlockRead read = MakeRead(file_id_, 0, kBlockSize, arena->data());
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> callback_finished{false};
  engine_->SubmitBatch({&read, 1}, [&] {
    entered.set_value();
    released.wait();
    callback_finished = true;
  });
  entered.get_future().wait();  // the callback now blocks an engine thread
  auto first = std::async(std::launch::async, [&] { engine_->Shutdown(); });
  auto second = std::async(std::launch::async, [&] { engine_->Shutdown(); });
  // Neither may return while the callback is still running.
  const bool first_early = first.wait_for(std::chrono::milliseconds(300)) == std::future_status::ready;
  const bool second_early = second.wait_for(std::chrono::milliseconds(300)) == std::future_status::ready;
  release.set_value();
  first.wait();
  second.wait();
  EXPECT_FALSE(first_early) << "a Shutdown returned while a completion callback was still running";
  EXPECT_FALSE(second_early) << "a Shutdown returned while a completion callback was still running";
  EXPECT_TRUE(callback_finished);
}

TEST_P(IoEngineTest, StatsCountReadsBytesErrorsAndLatency) {
  auto arena = AlignedBuffer::Allocate(10 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::vector<BlockRead> reads = RandomReads(file_id_, file_.blocks() - 1, 10, 1, *arena, 5);
  ASSERT_TRUE(engine_->ReadBlocks(reads).ok());
  BlockRead past = MakeRead(file_id_, file_.blocks() * kBlockSize, kBlockSize, arena->data());
  (void)engine_->ReadBlocks({&past, 1});
  IoStatsSnapshot s = engine_->Stats();
  EXPECT_EQ(s.reads, 11u);
  EXPECT_EQ(s.bytes, 10 * kBlockSize);
  EXPECT_EQ(s.errors, 1u);
  uint64_t histogram_total = 0;
  for (uint64_t c : s.latency_log2_ns) histogram_total += c;
  EXPECT_EQ(histogram_total, 11u);
  EXPECT_GT(s.LatencyQuantileUpperBoundNs(0.99), 0u);
}

TEST_P(IoEngineTest, ClosedFileIdIsRejectedAndFilesCanBeReopened) {
  ASSERT_TRUE(engine_->CloseFile(file_id_).ok());
  auto arena = AlignedBuffer::Allocate(kBlockSize);
  ASSERT_TRUE(arena.ok());
  BlockRead r = MakeRead(file_id_, 0, kBlockSize, arena->data());
  EXPECT_EQ(engine_->ReadBlocks({&r, 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->CloseFile(file_id_).code(), StatusCode::kInvalidArgument);
  auto again = engine_->OpenFile(file_.path());
  ASSERT_TRUE(again.ok());
  r.file = *again;
  ASSERT_TRUE(engine_->ReadBlocks({&r, 1}).ok());
  EXPECT_EQ(CheckBlock(r, kFileSize), "");
}

TEST_P(IoEngineTest, OpeningAMissingFileNamesIt) {
  auto id = engine_->OpenFile("/nonexistent/engram-table.bin");
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kNotFound) << id.status().ToString();
  EXPECT_NE(id.status().message().find("/nonexistent/engram-table.bin"), std::string::npos);
}

TEST_P(IoEngineTest, AFifoIsRefusedAtOnceNotWaitedOn) {
  // Opening a FIFO for reading blocks until a writer appears; the engine must
  // refuse it as not a regular file instead of hanging.
  const std::string fifo = file_.path() + ".fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto opened = std::async(std::launch::async, [&] { return engine_->OpenFile(fifo); });
  if (opened.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // releases the blocked open
    opened.wait();
    if (writer >= 0) ::close(writer);
    ::unlink(fifo.c_str());
    FAIL() << "OpenFile blocked on a FIFO";
  }
  auto id = opened.get();
  EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument) << id.status().ToString();
  EXPECT_NE(id.status().message().find("not a regular file"), std::string::npos);
  ::unlink(fifo.c_str());
}

// --- Read streams (IoEngine::RunReadStream) -----------------------------------

// Hands out `reads` in order, at most `window` unfinished at a time (as a
// caller whose buffers are still in use would), and records what the engine
// did with them.
class WindowedStream final : public ReadStream {
 public:
  WindowedStream(std::vector<BlockRead>& reads, size_t window) : reads_(reads), window_(window) {}

  BlockRead* NextRead() override {
    ++next_read_calls_;
    if (next_ == reads_.size() || next_ - finished_ >= window_) return nullptr;
    max_outstanding_ = std::max(max_outstanding_, next_ - finished_ + 1);
    return &reads_[next_++];
  }
  void Finished(BlockRead* read) override {
    ++finished_;
    ++finished_count_[static_cast<size_t>(read - reads_.data())];
    if (std::this_thread::get_id() != caller_) ++finished_elsewhere_;
  }

  size_t next_read_calls() const { return next_read_calls_; }
  size_t finished() const { return finished_; }
  size_t max_outstanding() const { return max_outstanding_; }
  int finished_elsewhere() const { return finished_elsewhere_; }
  bool EachFinishedOnce() const {
    for (size_t i = 0; i < reads_.size(); ++i) {
      if (finished_count_[i] != 1) return false;
    }
    return true;
  }

 private:
  std::vector<BlockRead>& reads_;
  const size_t window_;
  const std::thread::id caller_ = std::this_thread::get_id();
  std::vector<int> finished_count_ = std::vector<int>(reads_.size(), 0);
  size_t next_ = 0, finished_ = 0, max_outstanding_ = 0, next_read_calls_ = 0;
  int finished_elsewhere_ = 0;
};

// Each engine that cannot run a stream says so before asking for any read,
// so its caller can read through SubmitBatch instead.
void ExpectRefusedUntouched(IoEngine& engine, const char* what) {
  std::vector<BlockRead> reads(1);
  WindowedStream stream(reads, 1);
  EXPECT_FALSE(engine.RunReadStream(stream)) << what;
  EXPECT_EQ(stream.next_read_calls(), 0u) << what;
}

TEST_P(IoEngineTest, ReadStreamIsByteExactOnTheCallingThreadOrRefusedUntouched) {
  if (GetParam().backend != IoBackend::kIoUring) {
    // Only io_uring has a ring of the caller's own to read on.
    return ExpectRefusedUntouched(*engine_, IoBackendName(GetParam().backend));
  }
  auto arena = AlignedBuffer::Allocate(304 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::memset(arena->data(), 0xAB, arena->size());  // zeros past the end must come from the engine
  std::vector<BlockRead> reads = RandomReads(file_id_, file_.blocks(), 300, 1, *arena, 5);
  const uint64_t last = (file_.blocks() - 1) * kBlockSize;
  reads.push_back(MakeRead(file_id_, last, kBlockSize, arena->data() + 300 * kBlockSize));  // partial
  reads.push_back(MakeRead(file_id_, last + kBlockSize, kBlockSize, arena->data() + 301 * kBlockSize));
  reads.push_back(MakeRead(file_id_, 100, kBlockSize, arena->data() + 302 * kBlockSize));  // unaligned
  reads.push_back(MakeRead(file_id_ + 7, 0, kBlockSize, arena->data() + 303 * kBlockSize));  // no such file
  const IoStatsSnapshot before = engine_->Stats();

  WindowedStream stream(reads, /*window=*/5);
  ASSERT_TRUE(engine_->RunReadStream(stream));

  EXPECT_EQ(stream.finished(), reads.size());
  EXPECT_TRUE(stream.EachFinishedOnce());
  EXPECT_EQ(stream.finished_elsewhere(), 0);
  EXPECT_LE(stream.max_outstanding(), 5u);
  for (size_t i = 0; i <= 300; ++i) {
    ASSERT_TRUE(reads[i].status.ok()) << i << ": " << reads[i].status.ToString();
    ASSERT_EQ(CheckBlock(reads[i], kFileSize), "") << i;
  }
  EXPECT_EQ(reads[301].status.code(), StatusCode::kOutOfRange) << reads[301].status.ToString();
  EXPECT_EQ(reads[302].status.code(), StatusCode::kInvalidArgument) << reads[302].status.ToString();
  EXPECT_FALSE(reads[303].status.ok());
  const IoStatsSnapshot after = engine_->Stats();
  EXPECT_EQ(after.reads - before.reads, reads.size());
  EXPECT_EQ(after.errors - before.errors, 3u);
}

TEST_P(IoEngineTest, ThreadsRunningReadStreamsAtOnceEachGetTheirOwnBytes) {
  if (GetParam().backend != IoBackend::kIoUring) GTEST_SKIP() << "no read streams on this backend";
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        auto arena = AlignedBuffer::Allocate(64 * kBlockSize);
        if (!arena.ok()) {
          ++bad;
          return;
        }
        std::vector<BlockRead> reads = RandomReads(file_id_, file_.blocks() - 1, 64, 1, *arena, 100 * t + round);
        WindowedStream stream(reads, 16);
        if (!engine_->RunReadStream(stream) || !stream.EachFinishedOnce() || stream.finished_elsewhere() != 0) ++bad;
        for (const BlockRead& r : reads) bad += !r.status.ok() || !CheckBlock(r, kFileSize).empty();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// A stream whose Finished throws (as one that runs out of memory would) on
// its `throw_at`-th finished read, with reads still in the kernel (up to the
// engine's queue depth).
class ThrowingStream final : public ReadStream {
 public:
  ThrowingStream(std::vector<BlockRead>& reads, size_t window, size_t throw_at)
      : inner_(reads, window), throw_at_(throw_at) {}
  BlockRead* NextRead() override { return inner_.NextRead(); }
  void Finished(BlockRead* read) override {
    inner_.Finished(read);
    if (inner_.finished() == throw_at_) throw std::runtime_error("out of room");
  }
  const WindowedStream& inner() const { return inner_; }

 private:
  WindowedStream inner_;
  const size_t throw_at_;
};

TEST_P(IoEngineTest, AStreamThatThrowsLeavesNoReadInFlightAndTheThreadsNextStreamWorks) {
  if (GetParam().backend != IoBackend::kIoUring) GTEST_SKIP() << "no read streams on this backend";
  auto arena = AlignedBuffer::Allocate(256 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  for (int round = 0; round < 20; ++round) {
    std::vector<BlockRead> reads = RandomReads(file_id_, file_.blocks() - 1, 256, 1, *arena, 7 + round);
    ThrowingStream throwing(reads, /*window=*/128, /*throw_at=*/3);
    EXPECT_THROW(engine_->RunReadStream(throwing), std::runtime_error);
    EXPECT_EQ(throwing.inner().finished(), 3u);  // no read handed on after the throw
    // Nothing the kernel was still reading may land once the stream has left.
    std::memset(arena->data(), 0xCD, arena->size());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    for (size_t i = 0; i < arena->size(); ++i) {
      ASSERT_EQ(arena->data()[i], std::byte{0xCD}) << "round " << round << ": a read landed at byte " << i;
    }
    // The thread's ring and slots are whole: its next stream is byte-exact.
    std::vector<BlockRead> next = RandomReads(file_id_, file_.blocks() - 1, 256, 1, *arena, 1000 + round);
    WindowedStream stream(next, 128);
    ASSERT_TRUE(engine_->RunReadStream(stream));
    ASSERT_TRUE(stream.EachFinishedOnce()) << "round " << round;
    for (const BlockRead& r : next) ASSERT_TRUE(r.status.ok() && CheckBlock(r, kFileSize).empty()) << round;
  }
}

TEST_P(IoEngineTest, AForkedChildStreamsOnARingOfItsOwnAndTheParentsStillWorks) {
  // The parent's thread has a ring; its forked child inherits a copy, which
  // it may neither share nor submit to (SINGLE_ISSUER): it must make its own.
  if (GetParam().backend != IoBackend::kIoUring) GTEST_SKIP() << "no read streams on this backend";
  auto arena = AlignedBuffer::Allocate(64 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  auto stream_ok = [&](uint64_t seed) {
    std::vector<BlockRead> reads = RandomReads(file_id_, file_.blocks() - 1, 64, 1, *arena, seed);
    WindowedStream stream(reads, 16);
    if (!engine_->RunReadStream(stream) || !stream.EachFinishedOnce()) return false;
    for (const BlockRead& r : reads) {
      if (!r.status.ok() || !CheckBlock(r, kFileSize).empty()) return false;
    }
    return true;
  };
  ASSERT_TRUE(stream_ok(1));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(30);  // a child that hangs fails rather than stalls the suite
    ::_exit(stream_ok(2) && stream_ok(3) ? 0 : 1);
  }
  EXPECT_TRUE(stream_ok(4));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_TRUE(stream_ok(5));
}

INSTANTIATE_TEST_SUITE_P(Backends, IoEngineTest,
                         ::testing::Values(EngineKind{IoBackend::kIoUring}, EngineKind{IoBackend::kIoUring, 3},
                                           EngineKind{IoBackend::kPread}, EngineKind{IoBackend::kMmap}),
                         [](const auto& info) {
                           return std::string(IoBackendName(info.param.backend)) +
                                  (info.param.rings > 1 ? "_" + std::to_string(info.param.rings) + "_rings" : "");
                         });

TEST(ReadStreamRefusal, AShutDownIoUringEngineRefusesWithoutAskingForARead) {
  ENGRAM_SKIP_WITHOUT_IO_URING();
  auto stopped = MustCreate(OptionsFor(IoBackend::kIoUring));
  ASSERT_NE(stopped, nullptr);
  stopped->Shutdown();
  ExpectRefusedUntouched(*stopped, "shut down");
}

TEST(ReadStreamFaults, EagainAndShortReadsAreAbsorbedAndEioAndBitFlipsReachTheStream) {
  // The faults the engine's batches get, on the caller's ring: EAGAIN and
  // short reads are retried away (every read byte-exact), EIO fails its read
  // and a flipped bit changes its block.
  ENGRAM_SKIP_WITHOUT_IO_URING();
  TempFile file(kFileSize);
  for (bool visible : {false, true}) {
    SCOPED_TRACE(visible ? "EIO and bit flips" : "EAGAIN and short reads");
    FaultOptions f;
    f.seed = 3;
    (visible ? f.eio_rate : f.eagain_rate) = 0.2;
    (visible ? f.bitflip_rate : f.short_read_rate) = 0.2;
    IoOptions o;
    o.backend = IoBackend::kIoUring;
    o.queue_depth = 8;
    auto engine = CreateFaultInjectionEngine(o, f);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    FileId id = *(*engine)->OpenFile(file.path());
    auto arena = AlignedBuffer::Allocate(200 * kBlockSize);
    ASSERT_TRUE(arena.ok());
    std::vector<BlockRead> reads = RandomReads(id, file.blocks() - 1, 200, 1, *arena, 9);
    WindowedStream stream(reads, 16);
    ASSERT_TRUE((*engine)->RunReadStream(stream));
    EXPECT_TRUE(stream.EachFinishedOnce());
    EXPECT_EQ(stream.finished_elsewhere(), 0);
    size_t failed = 0, changed = 0;
    for (const BlockRead& r : reads) {
      if (!r.status.ok()) {
        ++failed;
        EXPECT_EQ(r.status.code(), StatusCode::kIOError) << r.status.ToString();
      } else if (!CheckBlock(r, kFileSize).empty()) {
        ++changed;
      }
    }
    FaultInjector& injector = (*engine)->injector();
    const IoStatsSnapshot stats = (*engine)->Stats();
    if (visible) {
      EXPECT_EQ(failed, injector.count(FaultKind::kEio));
      EXPECT_EQ(changed, injector.count(FaultKind::kBitFlip));
      EXPECT_GT(failed, 0u);
      EXPECT_GT(changed, 0u);
    } else {
      EXPECT_EQ(failed + changed, 0u);
      EXPECT_GT(stats.retries, 0u);
      EXPECT_GT(stats.short_reads, 0u);
      EXPECT_EQ(stats.retries, injector.count(FaultKind::kEagain));
      EXPECT_EQ(stats.short_reads, injector.count(FaultKind::kShortRead));
    }
  }
}

// --- Backend selection and io_uring specifics ---------------------------------

TEST(IoBackendNames, ParseRoundTripsAndRejectsUnknown) {
  for (IoBackend b : {IoBackend::kAuto, IoBackend::kIoUring, IoBackend::kPread, IoBackend::kMmap}) {
    auto parsed = ParseIoBackend(IoBackendName(b));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, b);
  }
  auto bad = ParseIoBackend("uring");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("auto|io_uring|pread|mmap"), std::string::npos);
}

TEST(IoOptionsValidation, OutOfRangeQueueDepthOrThreadsIsInvalidArgument) {
  IoOptions o;
  o.queue_depth = 0;
  EXPECT_EQ(CreateIoEngine(o).status().code(), StatusCode::kInvalidArgument);
  o.queue_depth = 8;
  for (uint32_t rings : {0u, 9u, 65u}) {  // none, more rings than reads in flight, over the cap
    o.rings = rings;
    o.queue_depth = rings == 65 ? 128 : 8;
    const Status st = CreateIoEngine(o).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << rings;
    EXPECT_NE(st.message().find("rings"), std::string::npos) << st.ToString();
  }
  o.rings = 1;
  o.queue_depth = 8;
  o.threads = 0;
  o.backend = IoBackend::kPread;
  EXPECT_EQ(CreateIoEngine(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(IoBackendSelection, AutoPrefersIoUringWhenAvailable) {
  ENGRAM_SKIP_WITHOUT_IO_URING();
  auto engine = MustCreate(OptionsFor(IoBackend::kAuto));
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->backend(), IoBackend::kIoUring) << engine->Describe();
}

TEST(IoBackendSelection, ForcedRingFailureFallsBackToPreadWithIdenticalResults) {
  ENGRAM_SKIP_WITHOUT_IO_URING();
  TempFile file(kFileSize);
  IoOptions forced = OptionsFor(IoBackend::kAuto);
  forced.fail_ring_setup_for_testing = true;
  auto fallback = MustCreate(forced);
  ASSERT_NE(fallback, nullptr);
  EXPECT_EQ(fallback->backend(), IoBackend::kPread);
  auto ring = MustCreate(OptionsFor(IoBackend::kIoUring));
  ASSERT_NE(ring, nullptr);

  auto a = AlignedBuffer::Allocate(64 * kBlockSize);
  auto b = AlignedBuffer::Allocate(64 * kBlockSize);
  ASSERT_TRUE(a.ok() && b.ok());
  FileId fa = *fallback->OpenFile(file.path());
  FileId fb = *ring->OpenFile(file.path());
  std::vector<BlockRead> ra = RandomReads(fa, file.blocks(), 64, 1, *a, 99);
  std::vector<BlockRead> rb = RandomReads(fb, file.blocks(), 64, 1, *b, 99);
  ASSERT_TRUE(fallback->ReadBlocks(ra).ok());
  ASSERT_TRUE(ring->ReadBlocks(rb).ok());
  EXPECT_EQ(std::memcmp(a->data(), b->data(), a->size()), 0);

  // Asking for io_uring explicitly does not silently fall back.
  IoOptions explicit_ring = OptionsFor(IoBackend::kIoUring);
  explicit_ring.fail_ring_setup_for_testing = true;
  EXPECT_EQ(CreateIoEngine(explicit_ring).status().code(), StatusCode::kUnsupported);
}

TEST(IoBackendSelection, EnvironmentVariableDisablesIoUring) {
  ASSERT_EQ(::setenv("ENGRAM_DISABLE_IO_URING", "1", 1), 0);
  auto fallback = CreateIoEngine(OptionsFor(IoBackend::kAuto));
  auto ring = CreateIoEngine(OptionsFor(IoBackend::kIoUring));
  ::unsetenv("ENGRAM_DISABLE_IO_URING");
  ASSERT_TRUE(fallback.ok());
  EXPECT_EQ((*fallback)->backend(), IoBackend::kPread);
  ASSERT_FALSE(ring.ok());
  EXPECT_NE(ring.status().message().find("ENGRAM_DISABLE_IO_URING"), std::string::npos);
}

TEST(IoUringEngine, RegisteredBufferReadsAreByteExact) {
  ENGRAM_SKIP_WITHOUT_IO_URING();
  TempFile file(kFileSize);
  auto engine = MustCreate(OptionsFor(IoBackend::kIoUring));
  ASSERT_NE(engine, nullptr);
  auto arena = AlignedBuffer::Allocate(64 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  Status reg = engine->RegisterBuffer(arena->span());
  // Registration may legitimately be refused (RLIMIT_MEMLOCK); reads must work either way.
  if (reg.ok()) {
    EXPECT_NE(engine->Describe().find("fixed buffers=1"), std::string::npos) << engine->Describe();
  } else {
    EXPECT_EQ(reg.code(), StatusCode::kResourceExhausted) << reg.ToString();
  }
  FileId id = *engine->OpenFile(file.path());
  std::vector<BlockRead> reads = RandomReads(id, file.blocks() - 1, 32, 2, *arena, 4);
  ASSERT_TRUE(engine->ReadBlocks(reads).ok()) << FirstError(reads).ToString();
  for (const BlockRead& r : reads) ASSERT_EQ(CheckBlock(r, kFileSize), "");
}

TEST(IoUringEngine, QueueDepthOneStillServesLargeBatches) {
  ENGRAM_SKIP_WITHOUT_IO_URING();
  TempFile file(kFileSize);
  IoOptions o = OptionsFor(IoBackend::kIoUring);
  o.queue_depth = 1;
  auto engine = MustCreate(o);
  ASSERT_NE(engine, nullptr);
  FileId id = *engine->OpenFile(file.path());
  auto arena = AlignedBuffer::Allocate(50 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::vector<BlockRead> reads = RandomReads(id, file.blocks(), 50, 1, *arena, 8);
  ASSERT_TRUE(engine->ReadBlocks(reads).ok());
  for (const BlockRead& r : reads) ASSERT_EQ(CheckBlock(r, kFileSize), "");
}

// One ring, and a set of three, where each read of the chain goes to the next
// ring: a callback on one ring thread submits to another ring, and ReadBlocks
// is refused on every ring thread (the set could route it to the calling ring).
class IoUringCallbacks : public ::testing::TestWithParam<uint32_t> {};

TEST_P(IoUringCallbacks, CompletionCallbackMaySubmitMoreReads) {
  ENGRAM_SKIP_WITHOUT_IO_URING();
  TempFile file(kFileSize);
  auto engine = MustCreate(OptionsFor(IoBackend::kIoUring, GetParam()));
  ASSERT_NE(engine, nullptr);
  FileId id = *engine->OpenFile(file.path());
  auto arena = AlignedBuffer::Allocate(kBlockSize);
  ASSERT_TRUE(arena.ok());
  // A chain of 20 reads, each submitted from the previous one's callback.
  BlockRead read = MakeRead(id, 0, kBlockSize, arena->data());
  std::mutex mu;
  std::condition_variable cv;
  int remaining = 20;
  int bad = 0;
  std::function<void()> next = [&] {
    std::lock_guard lock(mu);
    if (!read.status.ok() || !CheckBlock(read, kFileSize).empty()) ++bad;
    // ReadBlocks here would deadlock; the engine refuses it instead.
    BlockRead nested = MakeRead(id, 0, kBlockSize, arena->data());
    if (engine->ReadBlocks({&nested, 1}).code() != StatusCode::kInternal) ++bad;
    if (--remaining == 0) {
      cv.notify_all();
      return;
    }
    read.offset = (remaining * 37 % file.blocks()) * kBlockSize;
    engine->SubmitBatch({&read, 1}, next);
  };
  engine->SubmitBatch({&read, 1}, next);
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return remaining == 0; });
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(Rings, IoUringCallbacks, ::testing::Values(1u, 3u),
                         [](const auto& info) { return std::to_string(info.param) + "_rings"; });

TEST(IoUringRingSet, DescribesItsRingsTheTotalDepthAndTheFirstRingsShare) {
  ENGRAM_SKIP_WITHOUT_IO_URING();
  IoOptions o = OptionsFor(IoBackend::kIoUring, 3);
  o.queue_depth = 10;
  auto engine = MustCreate(o);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->backend(), IoBackend::kIoUring);
  // 10 reads in flight over 3 rings: 4 + 3 + 3; the description shows the first ring's.
  EXPECT_EQ(engine->Describe().rfind("3 io_uring rings, 10 reads in flight in all; ring 0: io_uring(qd=4,", 0), 0u)
      << engine->Describe();
}

TEST(IoUringRingSet, RingSetupFailureMakesAutoFallBackToPreadWithIdenticalResults) {
  TempFile file(kFileSize);
  IoOptions o = OptionsFor(IoBackend::kAuto, 3);
  o.fail_ring_setup_for_testing = true;
  auto engine = MustCreate(o);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->backend(), IoBackend::kPread);
  FileId id = *engine->OpenFile(file.path());
  auto arena = AlignedBuffer::Allocate(100 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::vector<BlockRead> reads = RandomReads(id, file.blocks(), 100, 1, *arena, 11);
  ASSERT_TRUE(engine->ReadBlocks(reads).ok());
  for (const BlockRead& r : reads) ASSERT_EQ(CheckBlock(r, kFileSize), "");
  o.backend = IoBackend::kIoUring;  // asked for explicitly: no fallback
  EXPECT_FALSE(CreateIoEngine(o).ok());
}

// A 3-ring set (queue depth 8: 3 / 3 / 2) with one file open.
class IoUringRingSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ENGRAM_SKIP_WITHOUT_IO_URING();
    engine = MustCreate(OptionsFor(IoBackend::kIoUring, 3));
    ASSERT_NE(engine, nullptr);
    auto opened = engine->OpenFile(file.path());
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    id = *opened;
  }

  TempFile file{kFileSize};
  std::unique_ptr<IoEngine> engine;
  FileId id = 0;
};

TEST_F(IoUringRingSetTest, ASplitBatchWhosePartFailsAtOnceStillCallsDoneOnceAfterTheOtherParts) {
  auto arena = AlignedBuffer::Allocate(150 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  // 150 reads: three parts of 50; the last part's reads are all unaligned,
  // so that part fails inline, before or after the others land.
  for (int round = 0; round < 20; ++round) {
    std::vector<BlockRead> reads = RandomReads(id, file.blocks() - 1, 150, 1, *arena, 20 + round);
    for (size_t i = 100; i < 150; ++i) reads[i].offset += 512;
    Completion done;
    engine->SubmitBatch(reads, done.Callback());
    done.Wait();
    for (size_t i = 0; i < 150; ++i) {
      if (i < 100) {
        ASSERT_TRUE(reads[i].status.ok()) << reads[i].status.ToString();
        ASSERT_EQ(CheckBlock(reads[i], kFileSize), "");
      } else {
        ASSERT_EQ(reads[i].status.code(), StatusCode::kInvalidArgument) << i;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(done.calls(), 1);
  }
}

TEST_F(IoUringRingSetTest, ShutdownWithSplitBatchesInFlightCallsEveryDoneOnce) {
  constexpr int kBatches = 10;
  constexpr size_t kPerBatch = 200;  // cut into three parts
  auto arena = AlignedBuffer::Allocate(kBatches * kPerBatch * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::vector<std::vector<BlockRead>> batches;
  for (int b = 0; b < kBatches; ++b) {
    batches.push_back(RandomReads(id, file.blocks(), kPerBatch, 1, *arena, 40 + b));
    for (BlockRead& r : batches.back()) r.dst += size_t(b) * kPerBatch * kBlockSize;
  }
  std::atomic<int> calls{0};
  for (auto& batch : batches) engine->SubmitBatch(batch, [&] { calls.fetch_add(1); });
  engine->Shutdown();  // returns after every callback has run
  EXPECT_EQ(calls.load(), kBatches);
  for (const auto& batch : batches) {
    for (const BlockRead& r : batch) {
      if (r.status.ok()) {
        ASSERT_EQ(CheckBlock(r, kFileSize), "");
      } else {
        ASSERT_EQ(r.status.code(), StatusCode::kCancelled) << r.status.ToString();
      }
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(calls.load(), kBatches);
}

TEST_F(IoUringRingSetTest, CallsThatWaitForEveryRingAreRefusedInsideACallback) {
  auto arena = AlignedBuffer::Allocate(2 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  BlockRead read = MakeRead(id, 0, kBlockSize, arena->data());
  std::promise<std::vector<StatusCode>> codes;
  engine->SubmitBatch({&read, 1}, [&] {
    codes.set_value({engine->OpenFile(file.path()).status().code(), engine->CloseFile(id).code(),
                     engine->RegisterBuffer(arena->span().subspan(kBlockSize)).code()});
  });
  EXPECT_EQ(codes.get_future().get(),
            (std::vector<StatusCode>{StatusCode::kInternal, StatusCode::kInternal, StatusCode::kInternal}));
  EXPECT_TRUE(read.status.ok());
  EXPECT_TRUE(engine->CloseFile(id).ok());  // still open: the refused close did nothing
}

TEST_F(IoUringRingSetTest, RegisteredBuffersAreReadIntoByteExact) {
  auto arena = AlignedBuffer::Allocate(200 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  const Status registered = engine->RegisterBuffer(arena->span());
  if (!registered.ok()) GTEST_SKIP() << "no fixed buffers here: " << registered.ToString();
  EXPECT_NE(engine->Describe().find("fixed buffers=1"), std::string::npos) << engine->Describe();
  std::vector<BlockRead> reads = RandomReads(id, file.blocks(), 200, 1, *arena, 60);
  ASSERT_TRUE(engine->ReadBlocks(reads).ok()) << FirstError(reads).ToString();
  for (const BlockRead& r : reads) ASSERT_EQ(CheckBlock(r, kFileSize), "");
}

TEST(IoUringRingSet, EveryRingReadsTheSameFileAfterIdsAreReused) {
  ENGRAM_SKIP_WITHOUT_IO_URING();
  TempFile first(kFileSize), second(kFileSize + 4096);
  auto engine = MustCreate(OptionsFor(IoBackend::kIoUring, 3));
  ASSERT_NE(engine, nullptr);
  FileId a = *engine->OpenFile(first.path());
  ASSERT_TRUE(engine->CloseFile(a).ok());
  // The id is reused for another file; every ring must now read that file.
  FileId b = *engine->OpenFile(second.path());
  EXPECT_EQ(*engine->FileSize(b), kFileSize + 4096);
  auto arena = AlignedBuffer::Allocate(300 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::vector<BlockRead> reads = RandomReads(b, second.blocks(), 300, 1, *arena, 12);
  ASSERT_TRUE(engine->ReadBlocks(reads).ok()) << FirstError(reads).ToString();
  for (const BlockRead& r : reads) ASSERT_EQ(CheckBlock(r, kFileSize + 4096), "");
  // Single reads go to the rings in turn: each ring reads once the block the
  // first file ends in and once the block past its end (a ring reading the
  // first file would get 1,000 bytes of the one and nothing of the other).
  for (int i = 0; i < 6; ++i) {
    BlockRead r = MakeRead(b, (kFileSize / kBlockSize + i % 2) * kBlockSize, kBlockSize, arena->data());
    ASSERT_TRUE(engine->ReadBlocks({&r, 1}).ok()) << r.status.ToString();
    ASSERT_EQ(CheckBlock(r, kFileSize + 4096), "") << i;
  }
  EXPECT_EQ(engine->Stats().reads, 306u);
  EXPECT_EQ(engine->CloseFile(a == b ? 999 : a).code(), StatusCode::kInvalidArgument);
}

TEST(PreadEngine, RegisterBufferIsUnsupported) {
  auto engine = MustCreate(OptionsFor(IoBackend::kPread));
  ASSERT_NE(engine, nullptr);
  auto arena = AlignedBuffer::Allocate(kBlockSize);
  ASSERT_TRUE(arena.ok());
  EXPECT_EQ(engine->RegisterBuffer(arena->span()).code(), StatusCode::kUnsupported);
}

// Rounding a size near SIZE_MAX up to the alignment wraps round to a small
// number; the buffer must not then claim the huge size it does not own.
TEST(AlignedBuffer, SizeWhoseRoundingOverflowsIsRefused) {
  for (size_t size : {SIZE_MAX, SIZE_MAX - kBlockSize + 2}) {
    auto buffer = AlignedBuffer::Allocate(size);
    ASSERT_FALSE(buffer.ok()) << "got a buffer of " << buffer->size() << " bytes";
    EXPECT_EQ(buffer.status().code(), StatusCode::kResourceExhausted) << buffer.status().ToString();
  }
}

TEST(IoStatsHistogram, BucketsArePowersOfTwoNanoseconds) {
  EXPECT_EQ(IoStats::BucketFor(0), 0);
  EXPECT_EQ(IoStats::BucketFor(1), 0);
  EXPECT_EQ(IoStats::BucketFor(2), 1);
  EXPECT_EQ(IoStats::BucketFor(3), 1);
  EXPECT_EQ(IoStats::BucketFor(1024), 10);
  EXPECT_EQ(IoStats::BucketFor(UINT64_MAX), kLatencyBuckets - 1);
  IoStats stats;
  for (int i = 0; i < 99; ++i) stats.RecordRead(StatusCode::kOk, 4096, 1000);  // bucket 9: [512, 1024)
  stats.RecordRead(StatusCode::kOk, 4096, 1'000'000);                           // bucket 19
  IoStatsSnapshot s = stats.Snapshot();
  EXPECT_EQ(s.LatencyQuantileUpperBoundNs(0.5), 1023u);
  EXPECT_EQ(s.LatencyQuantileUpperBoundNs(0.99), 1023u);
  EXPECT_EQ(s.LatencyQuantileUpperBoundNs(1.0), (1u << 20) - 1);
}

}  // namespace
}  // namespace engram::io
