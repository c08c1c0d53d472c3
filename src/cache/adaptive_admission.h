// AdaptiveAdmission (AdmissionRule::kAdaptiveReuse): reuse-distance admission
// that learns, online, how often to let a row failing the test in anyway.
//
// The reuse test (ReuseDistanceAdmission) refuses a row it has no evidence
// for -- a first-seen row above all. That protects the cache from one-time
// rows and from a working set larger than itself, but when a new working set
// fits and is re-read soon, every refused row misses its second read too,
// while an admit-everything policy (FIFO, 2Q) hits it. So a row failing the
// test is admitted with probability p, and p follows the two regrets the
// ghost history can see, in the spirit of ARC's ghost lists and adaptive
// W-TinyLFU's hill climbing:
//
//  - refusal regret: a refused row (marked in the history) comes back
//    sooner than the victims are idle -- had it been admitted, it would
//    likely still be cached (its victim would have been older);
//  - eviction regret: an evicted row comes back within about twice the
//    victims' idle time -- it left, and was needed again soon.
//
// Every `period` refusals and evictions, the two regret rates (returns per
// refusal, returns per eviction) are compared and p moves one step toward
// admitting (refused rows return more often than evicted ones) or toward
// refusing. A fixed sample of rows (1 in kProbeShare, by hash) is always
// refused, so the refusal regret stays measurable when p reaches 1. p starts
// at 0: the cache behaves as the reuse test until regret says otherwise.
//
// "How long the victims are idle" is a running average of the victims'
// ages seen by Admits. All state is relaxed atomics: concurrent inserts may
// lose a count or race an update of p, which only makes the estimate
// coarser, never a wrong row.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "src/cache/cache_config.h"
#include "src/cache/frequency_sketch.h"
#include "src/cache/ghost_history.h"
#include "src/cache/set_hasher.h"
#include "src/cache/victim_choice.h"

namespace engram::cache {

struct AdmissionCandidate;

class AdaptiveAdmission {
 public:
  static constexpr uint32_t kProbabilityOne = 1u << 16;  // p's fixed-point scale
  static constexpr uint32_t kSteps = 16;                 // steps from 0 to 1
  static constexpr uint32_t kProbeShare = 32;            // 1 row in 32 is always refused

  // capacity_rows sets the adaptation period (an eighth of the capacity in
  // refusals and evictions, at least 64).
  AdaptiveAdmission(const RowCacheConfig& config, uint64_t capacity_rows);

  bool Admits(const AdmissionCandidate& row, const Victim& victim, const FrequencySketch&, const SetHasher&) const;

  // Feedback from the cache's insert path, in this order: the missed row's
  // previous access as the ghost history remembered it (age, kNever if not
  // remembered, and whether it was marked refused), then the outcome.
  void OnReturn(uint64_t previous_access_age, bool was_refused) const;
  void OnRefused() const { Count(&State::refusals); }
  void OnEvicted() const { Count(&State::evictions); }

  // The current probability of admitting a row that fails the reuse test.
  double admit_probability() const {
    return double(state_->probability.load(std::memory_order_relaxed)) / kProbabilityOne;
  }
  uint64_t victim_idle_ticks() const { return state_->victim_age.load(std::memory_order_relaxed); }

 private:
  struct State {
    std::atomic<uint32_t> probability{0};
    std::atomic<uint64_t> victim_age{0};  // running average of Victim::age
    std::atomic<uint64_t> refusals{0};
    std::atomic<uint64_t> evictions{0};
    std::atomic<uint64_t> refused_returns{0};
    std::atomic<uint64_t> evicted_returns{0};
  };
  void Count(std::atomic<uint64_t> State::*counter) const;
  void Adapt() const;

  const uint64_t period_;
  const uint64_t seed_;
  // Behind a pointer: the variant holding this type is moved into place, and
  // atomics do not move.
  std::unique_ptr<State> state_;
};

}  // namespace engram::cache
