// FaultInjectionEngine and FaultInjector: each fault kind fires at its seeded
// rate, is counted, has the promised effect (or is absorbed by the backend),
// and is reproducible for a seed.
#include "storage/io/fault_injection_engine.h"

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>

#include <gtest/gtest.h>

#include "tests/io_test_util.h"

namespace engram::io {
namespace {

using testing::CheckBlock;
using testing::ExpectedByte;
using testing::TempFile;

constexpr uint64_t kFileSize = 2 * 1024 * 1024;  // 512 blocks
constexpr uint64_t kBlocks = kFileSize / kBlockSize;

// True if `count` is a plausible Binomial(n, rate) draw (within 6 sigma).
bool PlausibleCount(uint64_t count, uint64_t n, double rate) {
  const double mean = n * rate;
  const double sigma = std::sqrt(n * rate * (1 - rate));
  return std::fabs(static_cast<double>(count) - mean) <= 6 * sigma + 1;
}

struct WholeFileRun {
  std::unique_ptr<FaultInjectionEngine> engine;
  AlignedBuffer arena;
  std::vector<BlockRead> reads;  // one read per block of the file, in order
};

// Reads every block of `file` once, in batches of 64, through a fault-injecting
// engine over `backend`.
WholeFileRun ReadWholeFile(const TempFile& file, IoBackend backend, const FaultOptions& faults) {
  IoOptions options;
  options.backend = backend;
  options.queue_depth = 16;
  options.threads = 2;
  WholeFileRun run;
  auto engine = CreateFaultInjectionEngine(options, faults);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  if (!engine.ok()) return run;
  run.engine = std::move(engine).value();
  auto arena = AlignedBuffer::Allocate(kFileSize);
  EXPECT_TRUE(arena.ok());
  run.arena = std::move(arena).value();
  FileId id = *run.engine->OpenFile(file.path());
  run.reads.resize(kBlocks);
  for (uint64_t b = 0; b < kBlocks; ++b) {
    run.reads[b] = BlockRead{id, b * kBlockSize, static_cast<uint32_t>(kBlockSize),
                             run.arena.data() + b * kBlockSize, Status()};
  }
  for (uint64_t b = 0; b < kBlocks; b += 64) {
    (void)run.engine->ReadBlocks(std::span<BlockRead>(run.reads).subspan(b, 64));
  }
  return run;
}

// Number of bits in which block `r` differs from the file's content.
int DifferingBits(const BlockRead& r) {
  if (CheckBlock(r, kFileSize).empty()) return 0;
  int bits = 0;
  for (uint32_t i = 0; i < r.length; ++i) {
    bits += std::popcount(static_cast<unsigned>(r.dst[i] ^ ExpectedByte(r.offset + i)));
  }
  return bits;
}

class FaultInjectionTest : public ::testing::TestWithParam<IoBackend> {
 protected:
  void SetUp() override {
    if (GetParam() == IoBackend::kIoUring) ENGRAM_SKIP_WITHOUT_IO_URING();
  }
  TempFile file_{kFileSize};
};

TEST_P(FaultInjectionTest, InjectedEioFailsExactlyTheCountedReads) {
  FaultOptions faults;
  faults.seed = 42;
  faults.eio_rate = 0.1;
  WholeFileRun run = ReadWholeFile(file_, GetParam(), faults);
  ASSERT_NE(run.engine, nullptr);
  uint64_t failed = 0;
  for (const BlockRead& r : run.reads) {
    if (r.status.ok()) {
      ASSERT_EQ(CheckBlock(r, kFileSize), "");
    } else {
      EXPECT_EQ(r.status.code(), StatusCode::kIOError);
      EXPECT_NE(r.status.message().find("injected EIO"), std::string::npos);
      ++failed;
    }
  }
  EXPECT_EQ(failed, run.engine->injector().count(FaultKind::kEio));
  EXPECT_TRUE(PlausibleCount(failed, kBlocks, 0.1)) << failed;
}

TEST_P(FaultInjectionTest, FlippedBitsCorruptExactlyOneBitOfTheCountedReads) {
  FaultOptions faults;
  faults.seed = 7;
  faults.bitflip_rate = 0.05;
  WholeFileRun run = ReadWholeFile(file_, GetParam(), faults);
  ASSERT_NE(run.engine, nullptr);
  uint64_t corrupted = 0;
  for (const BlockRead& r : run.reads) {
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();  // corruption is silent at this layer
    const int bits = DifferingBits(r);
    ASSERT_LE(bits, 1);
    corrupted += bits;
  }
  EXPECT_EQ(corrupted, run.engine->injector().count(FaultKind::kBitFlip));
  EXPECT_TRUE(PlausibleCount(corrupted, kBlocks, 0.05)) << corrupted;
}

TEST_P(FaultInjectionTest, DelayedAndReorderedCompletionsStillDeliverEveryBatch) {
  FaultOptions faults;
  faults.seed = 3;
  faults.delay_rate = 0.2;
  faults.reorder_rate = 0.3;
  faults.delay = std::chrono::microseconds(300);
  faults.reorder_hold = std::chrono::microseconds(3000);
  IoOptions options;
  options.backend = GetParam();
  auto engine = CreateFaultInjectionEngine(options, faults);
  ASSERT_TRUE(engine.ok());
  FileId id = *(*engine)->OpenFile(file_.path());
  constexpr int kBatches = 40;
  auto arena = AlignedBuffer::Allocate(kBatches * kBlockSize);
  ASSERT_TRUE(arena.ok());
  std::vector<BlockRead> reads(kBatches);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> order;
  for (int i = 0; i < kBatches; ++i) {
    reads[i] = BlockRead{id, static_cast<uint64_t>(i) * 7 * kBlockSize, static_cast<uint32_t>(kBlockSize),
                         arena->data() + i * kBlockSize, Status()};
    (*engine)->SubmitBatch({&reads[i], 1}, [&, i] {
      std::lock_guard lock(mu);
      order.push_back(i);
      cv.notify_all();
    });
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // issue order = i
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return order.size() == kBatches; });
  }
  for (const BlockRead& r : reads) {
    ASSERT_TRUE(r.status.ok());
    ASSERT_EQ(CheckBlock(r, kFileSize), "");
  }
  const uint64_t delayed = (*engine)->injector().count(FaultKind::kDelay);
  const uint64_t reordered = (*engine)->injector().count(FaultKind::kReorder);
  EXPECT_GT(delayed + reordered, 0u);
  if (reordered > 0) {
    // A held batch is overtaken by at least one batch issued after it.
    int inversions = 0;
    for (size_t k = 1; k < order.size(); ++k) inversions += order[k] < order[k - 1];
    EXPECT_GT(inversions, 0);
  }
}

TEST_P(FaultInjectionTest, SameSeedGivesSameFaultsDifferentSeedDoesNot) {
  auto faulty = [&](uint64_t seed) {
    FaultOptions faults;
    faults.seed = seed;
    faults.eio_rate = 0.05;
    faults.bitflip_rate = 0.05;
    WholeFileRun run = ReadWholeFile(file_, GetParam(), faults);
    std::set<std::pair<uint64_t, int>> outcome;  // (offset, 1 = EIO / 2 = flipped)
    for (const BlockRead& r : run.reads) {
      if (!r.status.ok()) outcome.insert({r.offset, 1});
      else if (DifferingBits(r) != 0) outcome.insert({r.offset, 2});
    }
    return outcome;
  };
  auto a = faulty(1234);
  auto b = faulty(1234);
  auto c = faulty(999);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

INSTANTIATE_TEST_SUITE_P(Backends, FaultInjectionTest,
                         ::testing::Values(IoBackend::kIoUring, IoBackend::kPread, IoBackend::kMmap),
                         [](const auto& info) { return std::string(IoBackendName(info.param)); });

// EAGAIN and short reads happen below the API: the backends with syscalls must
// absorb them by retrying, so every read still succeeds byte-exact.
class RetriedFaultTest : public ::testing::TestWithParam<IoBackend> {
 protected:
  void SetUp() override {
    if (GetParam() == IoBackend::kIoUring) ENGRAM_SKIP_WITHOUT_IO_URING();
  }
  TempFile file_{kFileSize};
};

TEST_P(RetriedFaultTest, EagainIsRetriedTransparentlyAndCounted) {
  FaultOptions faults;
  faults.seed = 5;
  faults.eagain_rate = 0.2;
  WholeFileRun run = ReadWholeFile(file_, GetParam(), faults);
  ASSERT_NE(run.engine, nullptr);
  for (const BlockRead& r : run.reads) {
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    ASSERT_EQ(CheckBlock(r, kFileSize), "");
  }
  const uint64_t injected = run.engine->injector().count(FaultKind::kEagain);
  EXPECT_EQ(run.engine->Stats().retries, injected);
  // Retries are asked again, so the denominator is reads + retries.
  EXPECT_TRUE(PlausibleCount(injected, kBlocks + injected, 0.2)) << injected;
}

TEST_P(RetriedFaultTest, ShortReadsResubmitTheRemainderAndAreCounted) {
  FaultOptions faults;
  faults.seed = 6;
  faults.short_read_rate = 0.2;
  WholeFileRun run = ReadWholeFile(file_, GetParam(), faults);
  ASSERT_NE(run.engine, nullptr);
  for (const BlockRead& r : run.reads) {
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    ASSERT_EQ(CheckBlock(r, kFileSize), "");
  }
  const uint64_t injected = run.engine->injector().count(FaultKind::kShortRead);
  EXPECT_GT(injected, 0u);
  EXPECT_EQ(run.engine->Stats().short_reads, injected);
}

TEST_P(RetriedFaultTest, EagainOnEveryAttemptGivesUpWithIoError) {
  FaultOptions faults;
  faults.eagain_rate = 1.0;
  IoOptions options;
  options.backend = GetParam();
  options.max_retries = 3;
  auto engine = CreateFaultInjectionEngine(options, faults);
  ASSERT_TRUE(engine.ok());
  FileId id = *(*engine)->OpenFile(file_.path());
  auto arena = AlignedBuffer::Allocate(kBlockSize);
  ASSERT_TRUE(arena.ok());
  BlockRead r{id, 0, static_cast<uint32_t>(kBlockSize), arena->data(), Status()};
  Status st = (*engine)->ReadBlocks({&r, 1});
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_NE(st.message().find("retries"), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(Backends, RetriedFaultTest, ::testing::Values(IoBackend::kIoUring, IoBackend::kPread),
                         [](const auto& info) { return std::string(IoBackendName(info.param)); });

TEST(FaultInjectionSetup, RingSetupFailureMakesAutoFallBackToPread) {
  FaultOptions faults;
  faults.fail_ring_setup = true;
  IoOptions options;  // kAuto
  auto engine = CreateFaultInjectionEngine(options, faults);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->backend(), IoBackend::kPread);
  EXPECT_EQ((*engine)->injector().count(FaultKind::kRingSetupFailure), 1u);
  options.backend = IoBackend::kIoUring;
  EXPECT_FALSE(CreateFaultInjectionEngine(options, faults).ok());
}

TEST(FaultInjectionSetup, RegistrationFailureLeavesReadsWorking) {
  ENGRAM_SKIP_WITHOUT_IO_URING();
  TempFile file(kFileSize);
  FaultOptions faults;
  faults.fail_registration = true;
  IoOptions options;
  options.backend = IoBackend::kIoUring;
  auto engine = CreateFaultInjectionEngine(options, faults);
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ((*engine)->Describe().find("fixed files"), std::string::npos) << (*engine)->Describe();
  auto arena = AlignedBuffer::Allocate(16 * kBlockSize);
  ASSERT_TRUE(arena.ok());
  // The buffer table itself failed to set up, so the region is refused.
  EXPECT_FALSE((*engine)->RegisterBuffer(arena->span()).ok());
  EXPECT_GE((*engine)->injector().count(FaultKind::kRegistrationFailure), 2u);  // files + buffers
  FileId id = *(*engine)->OpenFile(file.path());
  std::vector<BlockRead> reads(16);
  for (int i = 0; i < 16; ++i) {
    reads[i] = BlockRead{id, static_cast<uint64_t>(i) * 13 * kBlockSize, static_cast<uint32_t>(kBlockSize),
                         arena->data() + i * kBlockSize, Status()};
  }
  ASSERT_TRUE((*engine)->ReadBlocks(reads).ok());
  for (const BlockRead& r : reads) ASSERT_EQ(CheckBlock(r, kFileSize), "");
}

TEST(FaultInjector, DecisionsDependOnSeedAndOccurrenceNotOnCallOrder) {
  FaultOptions options;
  options.seed = 77;
  options.eio_rate = 0.5;
  FaultInjector forward(options), backward(options);
  std::vector<bool> a(200), b(200);
  for (int i = 0; i < 200; ++i) a[i] = forward.Decide(FaultKind::kEio, 0, i * kBlockSize).has_value();
  for (int i = 199; i >= 0; --i) b[i] = backward.Decide(FaultKind::kEio, 0, i * kBlockSize).has_value();
  EXPECT_EQ(a, b);
  EXPECT_EQ(forward.count(FaultKind::kEio), backward.count(FaultKind::kEio));
  // Asking again about the same block is a new, independent draw.
  int repeats_differ = 0;
  for (int i = 0; i < 200; ++i) repeats_differ += forward.Decide(FaultKind::kEio, 0, i * kBlockSize).has_value() != a[i];
  EXPECT_GT(repeats_differ, 0);
  FaultInjector zero(FaultOptions{});
  EXPECT_FALSE(zero.Decide(FaultKind::kBitFlip, 0, 0).has_value());
  EXPECT_EQ(zero.count(FaultKind::kBitFlip), 0u);
}

}  // namespace
}  // namespace engram::io
