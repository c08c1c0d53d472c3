#include "src/replay/replay_stats.h"

namespace engram::replay {

RequestStats PolicyRun::Total() const {
  RequestStats t;
  for (const RequestStats& r : requests) {
    t.gathers += r.gathers;
    t.cache.lookups += r.cache.lookups;
    t.cache.hits += r.cache.hits;
    t.cache.misses += r.cache.misses;
    t.cache.inserts += r.cache.inserts;
    t.cache.evictions += r.cache.evictions;
    for (int i = 0; i < static_cast<int>(RefusalReason::kCount); ++i) t.cache.refusals[i] += r.cache.refusals[i];
    t.cache.relocations += r.cache.relocations;
    t.cache.resident_rows = r.cache.resident_rows;
    t.cache.capacity_rows = r.cache.capacity_rows;
  }
  return t;
}

void RequestRecorder::EndRequest(const RowCacheStats& now, uint64_t gathers_in_request) {
  RequestStats r;
  r.gathers = gathers_in_request;
  r.cache = now;
  r.cache.lookups -= last_.lookups;
  r.cache.hits -= last_.hits;
  r.cache.misses -= last_.misses;
  r.cache.inserts -= last_.inserts;
  r.cache.evictions -= last_.evictions;
  for (int i = 0; i < static_cast<int>(RefusalReason::kCount); ++i) r.cache.refusals[i] -= last_.refusals[i];
  r.cache.relocations -= last_.relocations;
  last_ = now;
  requests_.push_back(r);
}

}  // namespace engram::replay
