// Admission: the last step of placement -- whether a missed row replaces the
// chosen victim or is refused (config.admission). Read-ahead rows
// (InsertPinned) bypass it, and a stale victim (VictimChoice) never wins.
//
//  - AdmitAll: every row replaces the victim.
//  - FrequencyAdmission (TinyLFU): the row's sketch estimate against the
//    victim's, >= or >; a refused row whose estimate reaches warm_threshold
//    is admitted anyway with probability warm_admit_probability (Caffeine's
//    defense against hash flooding: an attacker, or an unlucky workload,
//    cannot keep a warm row out for good by inflating a victim's estimate).
//  - ReuseDistanceAdmission (LIRS's test of reuse distance against recency):
//    the row's previous access, from the ghost history, must be more recent
//    than the victim's last access -- the row came back sooner than the
//    victim has been idle. A row seen for the first time, or too long ago to
//    be remembered, is refused. The sketch then only orders the victims: a
//    count cannot tell a row about to be re-read from an old popular one.
//  - AdaptiveAdmission (adaptive_admission.h): the reuse test, plus a
//    probability of admitting a row that fails it, adapted online from the
//    regret of refusals against the regret of evictions.
#pragma once

#include <cstdint>
#include <variant>

#include "src/cache/adaptive_admission.h"
#include "src/cache/cache_config.h"
#include "src/cache/frequency_sketch.h"
#include "src/cache/ghost_history.h"
#include "src/cache/set_hasher.h"
#include "src/cache/victim_choice.h"

namespace engram::cache {

// The missed row offered for insertion.
struct AdmissionCandidate {
  uint64_t row_id;
  uint64_t hash;
  uint32_t now;  // the insert's tick
  // Ticks since the row's previous access (GhostHistory::kNever if none is
  // remembered); only ReuseDistanceAdmission reads it.
  uint64_t previous_access_age = GhostHistory::kNever;
};

struct AdmitAll {
  bool Admits(const AdmissionCandidate&, const Victim&, const FrequencySketch&, const SetHasher&) const {
    return true;
  }
};

class FrequencyAdmission {
 public:
  explicit FrequencyAdmission(const RowCacheConfig& config);
  bool Admits(const AdmissionCandidate& row, const Victim& victim, const FrequencySketch& sketch,
              const SetHasher& hasher) const;

 private:
  const bool strict_;  // estimate(row) > estimate(victim); else >=
  const double warm_admit_probability_;
  const uint32_t warm_threshold_;
  const uint64_t seed_;
};

struct ReuseDistanceAdmission {
  bool Admits(const AdmissionCandidate& row, const Victim& victim, const FrequencySketch&, const SetHasher&) const {
    return row.previous_access_age < victim.age;
  }
  // A victim's age is 32 bits: a row unseen for at least that long (or
  // never seen, kNever) is refused whichever victim it meets.
  bool RefusesEveryVictim(const AdmissionCandidate& row) const { return row.previous_access_age >= UINT32_MAX; }
};

using Admission = std::variant<AdmitAll, FrequencyAdmission, ReuseDistanceAdmission, AdaptiveAdmission>;

// The admission rule of config.admission, for a cache of capacity_rows slots
// (which only sets the adaptive rule's period; 0 gives its shortest).
Admission AdmissionFor(const RowCacheConfig& config, uint64_t capacity_rows = 0);

inline bool Admits(const Admission& admission, const AdmissionCandidate& row, const Victim& victim,
                   const FrequencySketch& sketch, const SetHasher& hasher) {
  if (victim.stale) return true;
  return std::visit([&](const auto& rule) { return rule.Admits(row, victim, sketch, hasher); }, admission);
}

// Whether Admits is false for `row` against every victim that is not stale,
// so the outcome is known without choosing one. Only the reuse test can say
// so (for a row the history does not remember); the other rules weigh the
// victim, or (adaptive) count every decision.
inline bool RefusesEveryFreshVictim(const Admission& admission, const AdmissionCandidate& row) {
  const auto* reuse = std::get_if<ReuseDistanceAdmission>(&admission);
  return reuse != nullptr && reuse->RefusesEveryVictim(row);
}

}  // namespace engram::cache
