#include "src/replay/reference_policies.h"

#include <queue>
#include <utility>

namespace engram::replay {
namespace {

// Drives a policy's Lookup/Insert through the trace's gathers and records
// per-request counters. Policy: bool Lookup(lookup index), bool Insert(lookup
// index) (false = refused; may evict, and bumps stats.evictions itself),
// uint64_t resident().
template <typename Policy>
std::vector<RequestStats> Drive(const GatherTrace& trace, Policy& policy, RowCacheStats& stats) {
  RequestRecorder recorder;
  std::vector<uint64_t> misses;
  for (size_t r = 0; r < trace.requests(); ++r) {
    for (uint64_t g = trace.request_begin(r); g < trace.request_end[r]; ++g) {
      misses.clear();
      for (uint64_t i = trace.gather_begin(g); i < trace.gather_end[g]; ++i) {
        ++stats.lookups;
        if (policy.Lookup(i)) {
          ++stats.hits;
        } else {
          ++stats.misses;
          misses.push_back(i);
        }
      }
      for (uint64_t i : misses) {
        if (policy.Insert(i)) {
          ++stats.inserts;
        } else {
          ++stats.refusals[static_cast<int>(RefusalReason::kLostAdmission)];
        }
      }
    }
    stats.resident_rows = policy.resident();
    recorder.EndRequest(stats, trace.request_end[r] - trace.request_begin(r));
  }
  return recorder.Take();
}

class FullLru {
 public:
  FullLru(const TraceIndex& index, uint64_t capacity, RowCacheStats& stats)
      : index_(index), capacity_(capacity), stats_(stats),
        prev_(index.distinct_rows, kNone), next_(index.distinct_rows, kNone), resident_(index.distinct_rows, 0) {}

  bool Lookup(uint64_t i) {
    const uint32_t d = index_.dense[i];
    if (!resident_[d]) return false;
    Unlink(d);
    PushFront(d);
    return true;
  }
  bool Insert(uint64_t i) {
    if (size_ == capacity_) {
      const uint32_t victim = tail_;
      Unlink(victim);
      resident_[victim] = 0;
      --size_;
      ++stats_.evictions;
    }
    const uint32_t d = index_.dense[i];
    resident_[d] = 1;
    PushFront(d);
    ++size_;
    return true;
  }
  uint64_t resident() const { return size_; }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  void Unlink(uint32_t d) {
    if (prev_[d] != kNone) next_[prev_[d]] = next_[d]; else head_ = next_[d];
    if (next_[d] != kNone) prev_[next_[d]] = prev_[d]; else tail_ = prev_[d];
    prev_[d] = next_[d] = kNone;
  }
  void PushFront(uint32_t d) {
    prev_[d] = kNone;
    next_[d] = head_;
    if (head_ != kNone) prev_[head_] = d; else tail_ = d;
    head_ = d;
  }

  const TraceIndex& index_;
  const uint64_t capacity_;
  RowCacheStats& stats_;
  std::vector<uint32_t> prev_, next_;
  std::vector<uint8_t> resident_;
  uint32_t head_ = kNone, tail_ = kNone;
  uint64_t size_ = 0;
};

// MIN. With bypass (MIN for a cache that may refuse a row, as the RowCache
// policies do): a missed row whose next use is no sooner than every
// resident's is not admitted at all -- the optimum for that model; without
// it every miss is admitted and the farthest resident is evicted.
class Belady {
 public:
  Belady(const TraceIndex& index, uint64_t capacity, RowCacheStats& stats, bool bypass)
      : index_(index), capacity_(capacity), stats_(stats), bypass_(bypass), next_use_(index.distinct_rows, 0),
        resident_(index.distinct_rows, 0) {}

  bool Lookup(uint64_t i) {
    const uint32_t d = index_.dense[i];
    if (!resident_[d]) return false;
    Touch(d, i);
    return true;
  }
  bool Insert(uint64_t i) {
    if (size_ == capacity_) {
      // Max-heap with lazy deletion: an entry is current only if it still
      // matches the row's recorded next use.
      while (!(resident_[heap_.top().second] && next_use_[heap_.top().second] == heap_.top().first)) heap_.pop();
      auto [use, d] = heap_.top();
      if (bypass_ && index_.next_use[i] >= use) return false;
      heap_.pop();
      resident_[d] = 0;
      --size_;
      ++stats_.evictions;
    }
    const uint32_t d = index_.dense[i];
    resident_[d] = 1;
    ++size_;
    Touch(d, i);
    return true;
  }
  uint64_t resident() const { return size_; }

 private:
  void Touch(uint32_t d, uint64_t i) {
    next_use_[d] = index_.next_use[i];
    heap_.emplace(next_use_[d], d);
  }

  const TraceIndex& index_;
  const uint64_t capacity_;
  RowCacheStats& stats_;
  const bool bypass_;
  std::vector<uint64_t> next_use_;
  std::vector<uint8_t> resident_;
  std::priority_queue<std::pair<uint64_t, uint32_t>> heap_;
  uint64_t size_ = 0;
};

template <typename Policy, typename... Args>
PolicyRun Simulate(const char* name, const char* spec, const GatherTrace& trace, const TraceIndex& index,
                   uint64_t capacity_rows, Args... args) {
  RowCacheStats stats;
  stats.capacity_rows = capacity_rows;
  Policy policy(index, capacity_rows, stats, args...);
  PolicyRun run;
  run.policy = name;
  run.spec = spec;
  run.capacity_rows = capacity_rows;
  run.requests = Drive(trace, policy, stats);
  return run;
}

}  // namespace

PolicyRun SimulateFullLru(const GatherTrace& trace, const TraceIndex& index, uint64_t capacity_rows) {
  return Simulate<FullLru>("full-lru", "fully associative LRU, every miss admitted", trace, index, capacity_rows);
}

PolicyRun SimulateBelady(const GatherTrace& trace, const TraceIndex& index, uint64_t capacity_rows) {
  return Simulate<Belady>("belady", "offline optimum MIN, fully associative, every miss admitted", trace, index,
                          capacity_rows, /*bypass=*/false);
}

PolicyRun SimulateBeladyBypass(const GatherTrace& trace, const TraceIndex& index, uint64_t capacity_rows) {
  return Simulate<Belady>("belady-bypass",
                          "offline optimum MIN with bypass, fully associative: a miss used no sooner than every "
                          "resident is not admitted",
                          trace, index, capacity_rows, /*bypass=*/true);
}

}  // namespace engram::replay
