// IoEngine::RunReadStream: reads submitted and reaped by the calling thread on
// a ring of its own, against real files on the real disk.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "storage/io/fault_injection_engine.h"
#include "storage/io/fault_injector.h"
#include "storage/io/io_engine.h"
#include "tests/io_test_util.h"

namespace engram::io {
namespace {

using testing::CheckBlock;
using testing::RandomReads;
using testing::TempFile;

constexpr uint64_t kFileSize = 1024 * 1024 + 1000;  // a partial final block

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

std::unique_ptr<IoEngine> MustCreate(IoBackend backend, uint32_t rings = 1) {
  IoOptions o;
  o.backend = backend;
  o.queue_depth = 8;
  o.rings = rings;
  auto engine = CreateIoEngine(o);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

// One ring, and a set of three (whose streams run at the set's whole depth).
class IoUringReadStream : public ::testing::TestWithParam<uint32_t> {
 protected:
  void SetUp() override { ENGRAM_SKIP_WITHOUT_IO_URING(); }
};

TEST_P(IoUringReadStream, ReadsAreByteExactAndEachFinishesOnceOnTheCallingThread) {
  TempFile file(kFileSize);
  auto engine = MustCreate(IoBackend::kIoUring, GetParam());
  ASSERT_NE(engine, nullptr);
  FileId id = *engine->OpenFile(file.path());
  auto arena = AlignedBuffer::Allocate(304 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::memset(arena->data(), 0xAB, arena->size());  // zeros past the end must come from the engine
  std::vector<BlockRead> reads = RandomReads(id, file.blocks(), 300, 1, *arena, 5);
  const uint64_t last = (file.blocks() - 1) * kBlockSize;
  reads.push_back(BlockRead{id, last, kBlockSize, arena->data() + 300 * kBlockSize, Status()});  // partial
  reads.push_back(BlockRead{id, last + kBlockSize, kBlockSize, arena->data() + 301 * kBlockSize, Status()});
  reads.push_back(BlockRead{id, 100, kBlockSize, arena->data() + 302 * kBlockSize, Status()});  // unaligned
  reads.push_back(BlockRead{id + 7, 0, kBlockSize, arena->data() + 303 * kBlockSize, Status()});  // no such file

  WindowedStream stream(reads, /*window=*/5);
  ASSERT_TRUE(engine->RunReadStream(stream));

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
  const IoStatsSnapshot stats = engine->Stats();
  EXPECT_EQ(stats.reads, reads.size());
  EXPECT_EQ(stats.errors, 3u);
}

TEST_P(IoUringReadStream, ThreadsStreamingAtOnceEachGetTheirOwnBytes) {
  TempFile file(kFileSize);
  auto engine = MustCreate(IoBackend::kIoUring, GetParam());
  ASSERT_NE(engine, nullptr);
  FileId id = *engine->OpenFile(file.path());
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
        std::vector<BlockRead> reads = RandomReads(id, file.blocks() - 1, 64, 1, *arena, 100 * t + round);
        WindowedStream stream(reads, 16);
        if (!engine->RunReadStream(stream) || !stream.EachFinishedOnce() || stream.finished_elsewhere() != 0) ++bad;
        for (const BlockRead& r : reads) bad += !r.status.ok() || !CheckBlock(r, kFileSize).empty();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_P(IoUringReadStream, AForkedChildStreamsOnARingOfItsOwnAndTheParentsStillWorks) {
  // The parent's thread has a ring; its forked child inherits a copy, which
  // it may neither share nor submit to (SINGLE_ISSUER): it must make its own.
  TempFile file(kFileSize);
  auto engine = MustCreate(IoBackend::kIoUring, GetParam());
  ASSERT_NE(engine, nullptr);
  FileId id = *engine->OpenFile(file.path());
  auto arena = AlignedBuffer::Allocate(64 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  auto stream_ok = [&](uint64_t seed) {
    std::vector<BlockRead> reads = RandomReads(id, file.blocks() - 1, 64, 1, *arena, seed);
    WindowedStream stream(reads, 16);
    if (!engine->RunReadStream(stream) || !stream.EachFinishedOnce()) return false;
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

INSTANTIATE_TEST_SUITE_P(Rings, IoUringReadStream, ::testing::Values(1u, 3u),
                         [](const ::testing::TestParamInfo<uint32_t>& p) {
                           return std::to_string(p.param) + (p.param == 1 ? "Ring" : "Rings");
                         });

// Each engine that cannot run a stream says so before asking for any read,
// so its caller can read through SubmitBatch instead.
void ExpectRefusedUntouched(IoEngine& engine, const char* what) {
  std::vector<BlockRead> reads(1);
  WindowedStream stream(reads, 1);
  EXPECT_FALSE(engine.RunReadStream(stream)) << what;
  EXPECT_EQ(stream.next_read_calls(), 0u) << what;
}

TEST(ReadStreamRefusal, EnginesWithoutARingOfTheCallersOwnRefuseWithoutAskingForARead) {
  for (IoBackend backend : {IoBackend::kPread, IoBackend::kMmap}) {
    auto engine = MustCreate(backend);
    ASSERT_NE(engine, nullptr);
    ExpectRefusedUntouched(*engine, IoBackendName(backend));
  }
}

TEST(ReadStreamRefusal, AShutDownIoUringEngineRefusesWithoutAskingForARead) {
  ENGRAM_SKIP_WITHOUT_IO_URING();
  auto stopped = MustCreate(IoBackend::kIoUring);
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

}  // namespace
}  // namespace engram::io
