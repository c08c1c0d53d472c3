// ReadinessNanos: the clock a gather's readiness accounting reads (its wait,
// cache and disk times in GatherResult), at least twice per gather.
//
// Why not steady_clock alone: where the kernel keeps time with a paravirtual
// clock (kvm-clock), each steady_clock::now() is a ~26 ns vDSO call, and a
// 24-row hit gather's two of them were ~4.6 % of its time. The CPU's
// time-stamp counter reads in ~11 ns, but such a kernel may have been told
// not to trust it (tsc=unstable): the host can move the VM, and the counter's
// origin and rate with it. So the counter is trusted only between anchors
// (AnchoredCounterClock): a reading is the kernel clock's time at the last
// anchor plus the counts since, scaled, for at most kAnchorNanos; then, or
// when the counter has gone backwards, the kernel clock is read again. A
// rate is used only once two consecutive measurements of it agree within
// 1 %, so after a jump the clock reads the kernel until the counter is
// steady again; an anchor is the counter read on both sides of the kernel
// clock, and is not taken if a preemption came between. Measured in
// docs/lab-notes/2026-12-06-what-a-small-hashed-gather-pays-once.md.
//
// Each thread anchors its own clock, so two readings agree with
// steady_clock, and with each other across threads, to within the
// extrapolation's error (a rate measured over >= 100 us, applied for <= 1 ms:
// well under a microsecond), and a thread's readings may step back by that
// much at an anchor. Intervals are taken with ElapsedNanos, never below 0.
// A forward jump of the counter shorter than the anchor interval (a thread
// moved to a core whose counter is not synchronized with its last one's, on
// the rare machines where that happens) is read as time until the next
// anchor, at most 1 ms later.
// Off x86-64 the clock is steady_clock (an ARM host's vDSO reads its
// architectural counter directly).
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "storage/io/io_stats.h"  // io::MonotonicNanos: steady_clock in nanoseconds

namespace engram {

// The interval from `from` to `to`: 0 if `to` reads earlier.
inline uint64_t ElapsedNanos(uint64_t from, uint64_t to) { return to > from ? to - from : 0; }

// Nanoseconds from a fast counter (kCounter) kept in step with a kernel clock
// (kKernel, in nanoseconds), as described above. One instance per thread:
// it is not safe for concurrent use. The sources are template arguments so
// that the tests can drive it with counters that jump.
template <uint64_t (*kCounter)(), uint64_t (*kKernel)()>
class AnchoredCounterClock {
 public:
  // The longest a reading is extrapolated from the last kernel reading.
  static constexpr uint64_t kAnchorNanos = 1'000'000;
  // The shortest interval a rate is measured over.
  static constexpr uint64_t kMinRateNanos = 100'000;

  // The most counts a (counter, kernel clock) pair may span: a pair read
  // across a preemption would tie the counter to a later time.
  static constexpr uint64_t kMaxPairCounts = 1 << 16;

  uint64_t Now() {
    // Unsigned: a counter behind the anchor is far past the limit.
    const uint64_t since = kCounter() - anchor_count_;
    if (since < extrapolate_counts_) return anchor_nanos_ + ((since * nanos_per_count_q32_) >> 32);
    return Anchor();
  }

 private:
  // Reads the kernel clock; measures the rate since the last anchor and
  // moves the anchor there, unless too little time has passed to measure it
  // or the pair is not one instant.
  uint64_t Anchor() {
    const uint64_t before = kCounter();
    const uint64_t now = kKernel();
    const uint64_t span = kCounter() - before;
    if (span > kMaxPairCounts) return now;
    const uint64_t count = before + span / 2;
    const bool forward = anchored_ && count >= anchor_count_ && now >= anchor_nanos_;
    if (forward && now - anchor_nanos_ < kMinRateNanos) return now;  // keep the anchor: a longer interval
    extrapolate_counts_ = 0;
    if (forward && count > anchor_count_) {
      const uint64_t rate = static_cast<uint64_t>((static_cast<unsigned __int128>(now - anchor_nanos_) << 32) /
                                                  (count - anchor_count_));
      const uint64_t gap = rate > measured_q32_ ? rate - measured_q32_ : measured_q32_ - rate;
      if (measured_q32_ != 0 && rate != 0 && gap <= measured_q32_ / 100) {
        nanos_per_count_q32_ = rate;
        // since * rate stays below kAnchorNanos << 32 < 2^52: no overflow.
        extrapolate_counts_ = static_cast<uint64_t>((static_cast<unsigned __int128>(kAnchorNanos) << 32) / rate);
      }
      measured_q32_ = rate;
    } else {
      measured_q32_ = 0;  // the counter or the clock went back: measure afresh
    }
    anchor_count_ = count;
    anchor_nanos_ = now;
    anchored_ = true;
    return now;
  }

  uint64_t anchor_count_ = 0;
  uint64_t anchor_nanos_ = 0;
  uint64_t extrapolate_counts_ = 0;   // counts past the anchor read from it; 0: read the kernel clock
  uint64_t nanos_per_count_q32_ = 0;  // the trusted rate, nanoseconds per count in 32.32 fixed point
  uint64_t measured_q32_ = 0;         // the rate measured at the last anchor, 0 if none
  bool anchored_ = false;
};

#if defined(__x86_64__)
inline uint64_t TimeStampCounter() { return __rdtsc(); }

inline uint64_t ReadinessNanos() {
  // Constant-initialized (all members zero): no guard on each read.
  thread_local AnchoredCounterClock<&TimeStampCounter, &io::MonotonicNanos> clock;
  return clock.Now();
}
#else
inline uint64_t ReadinessNanos() { return io::MonotonicNanos(); }
#endif

}  // namespace engram
