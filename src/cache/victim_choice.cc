#include "src/cache/victim_choice.h"

#include <algorithm>
#include <cmath>

#include "src/cache/logical_clock.h"

namespace engram::cache {
namespace {

// config.stale_after x capacity, clamped to the ages stamps keep exactly
// (up to kMaxStampAge); 0 = off.
uint32_t StaleTicks(const RowCacheConfig& c, uint64_t capacity_rows) {
  if (c.stale_after <= 0.0) return 0;
  double t = std::ceil(c.stale_after * static_cast<double>(capacity_rows));
  return t >= double(kMaxStampAge) ? kMaxStampAge - 1 : std::max<uint32_t>(1, static_cast<uint32_t>(t));
}

}  // namespace

VictimChoice::VictimChoice(const RowCacheConfig& config, uint64_t capacity_rows)
    : by_estimate_(config.victim_order == VictimOrder::kLowestEstimateThenOldest),
      stale_ticks_(StaleTicks(config, capacity_rows)) {}

Victim VictimChoice::Choose(const SetStorage& storage, const uint64_t* sets, int count, uint32_t now,
                            const FrequencySketch& sketch, const SetHasher& hasher) const {
  Victim v;
  const uint32_t ways = storage.layout->ways;
  for (int i = 0; i < count; ++i) {
    SetView s = storage.View(sets[i]);
    const uint32_t unpinned = s.occupied() & ~s.pinned();
    for (uint32_t w = 0; w < ways; ++w) {
      if (!((unpinned >> w) & 1)) continue;
      const uint32_t age = AgeOf(now, s.stamp(w));
      const bool stale = stale_ticks_ != 0 && age > stale_ticks_;
      if (v.stale && !stale) continue;
      const uint32_t estimate = by_estimate_ && !stale ? sketch.Estimate(hasher.Hash(s.keys()[w])) : 0;
      const bool better = !v.found || (stale && !v.stale) || estimate < v.estimate ||
                          (estimate == v.estimate && age > v.age);
      if (better) {
        v.found = true;
        v.stale = stale;
        v.set = sets[i];
        v.way = w;
        v.row_id = s.keys()[w];
        v.estimate = estimate;
        v.age = age;
      }
    }
  }
  v.estimated = by_estimate_ && !v.stale;
  return v;
}

VictimChoice::Presence VictimChoice::Scan(const SetStorage& storage, const uint64_t* sets, int count,
                                          uint32_t now) const {
  Presence p;
  const uint32_t ways = storage.layout->ways;
  for (int i = 0; i < count; ++i) {
    SetView s = storage.View(sets[i]);
    const uint32_t unpinned = s.occupied() & ~s.pinned();
    if (unpinned == 0) continue;
    p.any = true;
    if (stale_ticks_ == 0) return p;
    for (uint32_t w = 0; w < ways; ++w) {
      if (((unpinned >> w) & 1) && AgeOf(now, s.stamp(w)) > stale_ticks_) {
        p.stale = true;
        return p;
      }
    }
  }
  return p;
}

}  // namespace engram::cache
