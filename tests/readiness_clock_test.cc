// ReadinessNanos and the clock behind it: a fast counter trusted only between
// anchors on the kernel clock, driven here by a fake counter that runs
// steadily, jumps back and forward, changes rate, and is preempted between
// the two reads of an anchor; and the real clock against steady_clock.
#include "src/store/readiness_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>

namespace engram {
namespace {

// The fake world: nanoseconds, a counter, and what reading the kernel clock
// does to the counter (a preemption between the anchor's reads).
uint64_t fake_nanos = 0;
uint64_t fake_count = 0;
uint64_t kernel_reads = 0;
uint64_t counts_during_kernel_read = 0;

uint64_t FakeCounter() { return fake_count; }
uint64_t FakeKernel() {
  ++kernel_reads;
  const uint64_t now = fake_nanos;
  fake_count += counts_during_kernel_read;
  return now;
}
using FakeClock = AnchoredCounterClock<&FakeCounter, &FakeKernel>;

class ReadinessClockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_nanos = 5'000'000'000;
    fake_count = 123'456'789'000;
    kernel_reads = 0;
    counts_during_kernel_read = 0;
  }
  // Advances time by ns, the counter by counts_per_ns per nanosecond.
  static void Advance(uint64_t ns, uint64_t counts_per_ns = 2) {
    fake_nanos += ns;
    fake_count += ns * counts_per_ns;
  }
  // Reads until a rate is trusted (two measurements 100 us apart agree),
  // the clock anchored at the last reading.
  static void Settle(FakeClock& clock, uint64_t counts_per_ns = 2) {
    for (int i = 0; i < 2; ++i) {
      Advance(FakeClock::kMinRateNanos, counts_per_ns);
      clock.Now();
    }
  }
};

TEST_F(ReadinessClockTest, ReadsTheKernelClockUntilTwoMeasuredRatesAgree) {
  FakeClock clock;
  EXPECT_EQ(clock.Now(), fake_nanos);
  EXPECT_EQ(kernel_reads, 1u);
  Advance(50'000);
  EXPECT_EQ(clock.Now(), fake_nanos);  // too soon to measure a rate: the kernel again
  EXPECT_EQ(kernel_reads, 2u);
  Advance(60'000);
  EXPECT_EQ(clock.Now(), fake_nanos);  // the first rate: not trusted alone
  EXPECT_EQ(kernel_reads, 3u);
  Advance(100'000);
  EXPECT_EQ(clock.Now(), fake_nanos);  // the second agrees: trusted from here
  EXPECT_EQ(kernel_reads, 4u);
  Advance(300'000);
  EXPECT_EQ(clock.Now(), fake_nanos);
  Advance(1'234);
  EXPECT_EQ(clock.Now(), fake_nanos);
  EXPECT_EQ(kernel_reads, 4u);  // both read from the counter
}

TEST_F(ReadinessClockTest, ExtrapolatesTheCounterForAtMostAnAnchorInterval) {
  FakeClock clock;
  clock.Now();
  Settle(clock);
  const uint64_t reads = kernel_reads;
  Advance(FakeClock::kAnchorNanos - 1'000);
  EXPECT_EQ(clock.Now(), fake_nanos);
  EXPECT_EQ(kernel_reads, reads);
  Advance(2'000);
  EXPECT_EQ(clock.Now(), fake_nanos);
  EXPECT_EQ(kernel_reads, reads + 1);  // past the interval: anchored again
  Advance(10'000);
  EXPECT_EQ(clock.Now(), fake_nanos);
  EXPECT_EQ(kernel_reads, reads + 1);  // and the rate still trusted
}

TEST_F(ReadinessClockTest, ACounterThatGoesBackIsNotTrustedUntilItIsSteadyAgain) {
  FakeClock clock;
  clock.Now();
  Settle(clock);
  fake_count -= 50'000'000'000;  // the VM moved to a host whose counter is behind
  Advance(1'000);
  const uint64_t reads = kernel_reads;
  EXPECT_EQ(clock.Now(), fake_nanos);
  EXPECT_EQ(kernel_reads, reads + 1);
  // Every reading is the kernel's until two rates measured after the jump agree.
  for (int i = 0; i < 2; ++i) {
    Advance(FakeClock::kMinRateNanos);
    EXPECT_EQ(clock.Now(), fake_nanos);
  }
  EXPECT_EQ(kernel_reads, reads + 3);
  Advance(500'000);
  EXPECT_EQ(clock.Now(), fake_nanos);
  EXPECT_EQ(kernel_reads, reads + 3);
}

TEST_F(ReadinessClockTest, ACounterThatJumpsForwardIsNotScaledIntoTime) {
  FakeClock clock;
  clock.Now();
  Settle(clock);
  fake_count += 40'000'000'000;  // 20 s of counts in no time
  for (int i = 0; i < 4; ++i) {
    Advance(30'000);
    EXPECT_EQ(clock.Now(), fake_nanos) << "reading " << i;
  }
  Advance(FakeClock::kMinRateNanos);
  EXPECT_EQ(clock.Now(), fake_nanos);
  Advance(FakeClock::kMinRateNanos);
  EXPECT_EQ(clock.Now(), fake_nanos);
  const uint64_t reads = kernel_reads;
  Advance(200'000);
  EXPECT_EQ(clock.Now(), fake_nanos);
  EXPECT_EQ(kernel_reads, reads);  // steady again: trusted again
}

TEST_F(ReadinessClockTest, ACounterThatChangesRateIsOffByAtMostOneIntervalsDrift) {
  FakeClock clock;
  clock.Now();
  Settle(clock, 2);
  // The counter now runs at 3 counts per ns: the old rate reads 1.5x fast
  // until the anchor interval (in old counts) runs out.
  for (int i = 0; i < 40; ++i) {
    Advance(25'000, 3);
    const uint64_t got = clock.Now();
    EXPECT_LE(ElapsedNanos(fake_nanos, got), FakeClock::kAnchorNanos / 2) << "reading " << i;
    EXPECT_LE(ElapsedNanos(got, fake_nanos), 2u) << "reading " << i;  // never behind, but for rounding
  }
  // Re-measured at the new rate and trusted again: exact but for the
  // rate's fixed-point rounding.
  Settle(clock, 3);
  const uint64_t reads = kernel_reads;
  Advance(400'000, 3);
  EXPECT_NEAR(double(clock.Now()), double(fake_nanos), 2.0);
  EXPECT_EQ(kernel_reads, reads);
}

TEST_F(ReadinessClockTest, AnAnchorReadAcrossAPreemptionIsNotTaken) {
  FakeClock clock;
  clock.Now();
  Settle(clock);
  Advance(FakeClock::kAnchorNanos + 1);
  counts_during_kernel_read = FakeClock::kMaxPairCounts + 1;  // preempted between the reads
  EXPECT_EQ(clock.Now(), fake_nanos);
  counts_during_kernel_read = 0;
  // Had the anchor been taken, the counter would be tied to a time ~33 us
  // early and every reading after it would run that far ahead.
  fake_nanos += (FakeClock::kMaxPairCounts + 1) / 2;
  Advance(1'000);
  EXPECT_EQ(clock.Now(), fake_nanos);
  const uint64_t reads = kernel_reads;
  Advance(300'000);
  EXPECT_NEAR(double(clock.Now()), double(fake_nanos), 2.0);
  EXPECT_EQ(kernel_reads, reads);
}

TEST(ReadinessClockIntervalTest, ElapsedNanosIsNeverNegative) {
  EXPECT_EQ(ElapsedNanos(10, 25), 15u);
  EXPECT_EQ(ElapsedNanos(25, 10), 0u);
  EXPECT_EQ(ElapsedNanos(7, 7), 0u);
}

TEST(ReadinessClockRealTest, MeasuresWhatSteadyClockMeasuresAcrossASleep) {
  // Settle this thread's clock, then time sleeps with both clocks. The
  // bound is loose (a loaded machine may preempt between the two clocks'
  // reads); a clock in the wrong units, or extrapolating a wrong rate, is
  // off by far more.
  for (int i = 0; i < 5; ++i) {
    ReadinessNanos();
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  for (int ms : {3, 20}) {
    const uint64_t s0 = io::MonotonicNanos();
    const uint64_t r0 = ReadinessNanos();
    uint64_t last = r0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    // Busy for a while, so the counter is extrapolated and re-anchored.
    while (std::chrono::steady_clock::now() < until) {
      const uint64_t r = ReadinessNanos();
      EXPECT_LE(ElapsedNanos(r, last), 100'000u) << "a reading stepped back by more than 100 us";
      last = r;
    }
    const uint64_t r1 = ReadinessNanos();
    const uint64_t s1 = io::MonotonicNanos();
    const double steady = double(s1 - s0), readiness = double(ElapsedNanos(r0, r1));
    EXPECT_NEAR(readiness, steady, 0.02 * steady + 2e6) << ms << " ms busy";
    EXPECT_GE(readiness, 0.9 * (ms * 1e6)) << ms << " ms busy";
  }
}

}  // namespace
}  // namespace engram
