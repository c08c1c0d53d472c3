#include "src/cache/admission.h"

namespace engram::cache {

FrequencyAdmission::FrequencyAdmission(const RowCacheConfig& config)
    : strict_(config.admission == AdmissionRule::kEstimateGreater),
      warm_admit_probability_(config.warm_admit_probability),
      warm_threshold_(config.warm_threshold),
      seed_(config.seed) {}

bool FrequencyAdmission::Admits(const AdmissionCandidate& row, const Victim& victim, const FrequencySketch& sketch,
                                const SetHasher& hasher) const {
  const uint32_t victim_estimate = victim.estimated ? victim.estimate : sketch.Estimate(hasher.Hash(victim.row_id));
  const uint32_t estimate = sketch.Estimate(row.hash);
  if (strict_ ? estimate > victim_estimate : estimate >= victim_estimate) return true;
  if (warm_admit_probability_ <= 0.0 || estimate < warm_threshold_) return false;
  if (warm_admit_probability_ >= 1.0) return true;
  // Deterministic draw from (row, tick, seed): replayable, and no shared RNG state.
  uint64_t draw = Remix(row.row_id ^ Remix(uint64_t{row.now} ^ seed_ ^ 0xa0761d6478bd642fULL));
  return static_cast<double>(draw >> 11) * 0x1.0p-53 < warm_admit_probability_;
}

Admission AdmissionFor(const RowCacheConfig& config, uint64_t capacity_rows) {
  switch (config.admission) {
    case AdmissionRule::kAlways: return AdmitAll{};
    case AdmissionRule::kEstimateAtLeast:
    case AdmissionRule::kEstimateGreater: return FrequencyAdmission(config);
    case AdmissionRule::kReuseDistance: return ReuseDistanceAdmission{};
    case AdmissionRule::kAdaptiveReuse: return AdaptiveAdmission(config, capacity_rows);
  }
  return AdmitAll{};  // unreachable: RowCacheConfig::Validate rejects other values
}

}  // namespace engram::cache
