#include "src/cache/adaptive_admission.h"

#include <algorithm>

#include "src/cache/admission.h"

namespace engram::cache {

AdaptiveAdmission::AdaptiveAdmission(const RowCacheConfig& config, uint64_t capacity_rows)
    : period_(std::max<uint64_t>(64, capacity_rows / 8)),
      seed_(Remix(config.seed ^ 0x3c6ef372fe94f82bULL)),
      state_(std::make_unique<State>()) {}

bool AdaptiveAdmission::Admits(const AdmissionCandidate& row, const Victim& victim, const FrequencySketch&,
                               const SetHasher&) const {
  // Running average of the victims' idle time, weight 1/64.
  const uint64_t average = state_->victim_age.load(std::memory_order_relaxed);
  state_->victim_age.store(average - average / 64 + victim.age / 64, std::memory_order_relaxed);
  if (row.previous_access_age < victim.age) return true;  // the reuse test
  if (Remix(row.hash ^ seed_) % kProbeShare == 0) return false;
  const uint32_t p = state_->probability.load(std::memory_order_relaxed);
  if (p == 0) return false;
  // Deterministic draw from (row, tick): replayable, no shared RNG state.
  const uint64_t draw = Remix(row.hash ^ Remix(uint64_t{row.now} ^ seed_));
  return (draw >> 48) < p;
}

void AdaptiveAdmission::OnReturn(uint64_t previous_access_age, bool was_refused) const {
  if (previous_access_age == GhostHistory::kNever) return;
  const uint64_t idle = state_->victim_age.load(std::memory_order_relaxed);
  if (was_refused ? previous_access_age < idle : previous_access_age < 2 * idle) {
    (was_refused ? state_->refused_returns : state_->evicted_returns).fetch_add(1, std::memory_order_relaxed);
  }
}

void AdaptiveAdmission::Count(std::atomic<uint64_t> State::*counter) const {
  (state_.get()->*counter).fetch_add(1, std::memory_order_relaxed);
  const uint64_t events =
      state_->refusals.load(std::memory_order_relaxed) + state_->evictions.load(std::memory_order_relaxed);
  if (events >= period_) Adapt();
}

void AdaptiveAdmission::Adapt() const {
  State& s = *state_;
  const uint64_t refusals = s.refusals.exchange(0, std::memory_order_relaxed);
  const uint64_t evictions = s.evictions.exchange(0, std::memory_order_relaxed);
  const uint64_t refused_returns = s.refused_returns.exchange(0, std::memory_order_relaxed);
  const uint64_t evicted_returns = s.evicted_returns.exchange(0, std::memory_order_relaxed);
  if (refusals + evictions < period_) return;  // another thread adapted first
  // refused_returns / refusals against evicted_returns / evictions, cross-multiplied.
  const unsigned __int128 refusal_regret = (unsigned __int128)refused_returns * std::max<uint64_t>(evictions, 1);
  const unsigned __int128 eviction_regret = (unsigned __int128)evicted_returns * std::max<uint64_t>(refusals, 1);
  constexpr uint32_t kStep = kProbabilityOne / kSteps;
  const uint32_t p = s.probability.load(std::memory_order_relaxed);
  if (refusal_regret > eviction_regret) {
    s.probability.store(std::min(kProbabilityOne, p + kStep), std::memory_order_relaxed);
  } else if (refusal_regret < eviction_regret) {
    s.probability.store(p > kStep ? p - kStep : 0, std::memory_order_relaxed);
  }
}

}  // namespace engram::cache
