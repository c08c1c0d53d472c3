#include "src/replay/gather_trace.h"

#include <bit>

#include "src/replay/trace_files.h"

namespace engram::replay {
namespace {

// Open-addressing set for the IDs of one gather; reused across gathers, so it
// is cleared by generation stamp instead of memset.
class GatherDedup {
 public:
  // True if id was not yet seen in the current gather.
  bool Insert(uint64_t id) {
    size_t i = Mix(id) & mask_;
    while (stamp_[i] == generation_) {
      if (keys_[i] == id) return false;
      i = (i + 1) & mask_;
    }
    stamp_[i] = generation_;
    keys_[i] = id;
    return true;
  }
  void Reset(size_t max_ids) {
    const size_t want = std::bit_ceil(std::max<size_t>(16, max_ids * 2));
    if (want > keys_.size()) {
      keys_.assign(want, 0);
      stamp_.assign(want, 0);
      mask_ = want - 1;
      generation_ = 0;
    }
    ++generation_;
  }

 private:
  static uint64_t Mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
  }
  std::vector<uint64_t> keys_;
  std::vector<uint64_t> stamp_;
  size_t mask_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace

void GatherTrace::AddGather(std::span<const uint64_t> row_ids) {
  thread_local GatherDedup dedup;
  dedup.Reset(row_ids.size());
  for (uint64_t id : row_ids) {
    if (dedup.Insert(id)) rows.push_back(id);
  }
  gather_end.push_back(rows.size());
}

void GatherTrace::EndRequest(std::string name) {
  request_end.push_back(gather_end.size());
  request_names.push_back(std::move(name));
}

Result<GatherTrace> BuildTraceFromTokens(const NgramHasher& hasher, std::span<const std::vector<uint32_t>> requests,
                                         std::span<const SplitSpec> splits, std::span<const std::string> names) {
  if (splits.size() != requests.size() || names.size() != requests.size())
    return Status::InvalidArgument("BuildTraceFromTokens: requests, splits and names differ in count");
  GatherTrace trace;
  std::vector<uint64_t> chunk_rows;
  for (size_t r = 0; r < requests.size(); ++r) {
    std::span<const uint32_t> tokens(requests[r]);
    const std::vector<size_t> bounds = splits[r].Boundaries(tokens.size());
    for (size_t c = 0; c + 1 < bounds.size(); ++c) {
      const size_t start = bounds[c], n = bounds[c + 1] - bounds[c];
      chunk_rows.resize(n * hasher.rows_per_token());
      Status st = hasher.Hash(tokens.subspan(0, start), tokens.subspan(start, n), chunk_rows);
      if (!st.ok()) return st.WithContext(names[r] + " (chunk starting at token " + std::to_string(start) + ")");
      trace.AddGather(chunk_rows);
    }
    trace.EndRequest(names[r]);
  }
  return trace;
}

Result<GatherTrace> BuildTraceFromRequests(const NgramHasher& hasher, std::span<const RequestSpec> requests) {
  std::vector<std::vector<uint32_t>> tokens;
  std::vector<SplitSpec> splits;
  std::vector<std::string> names;
  for (const RequestSpec& r : requests) {
    ENGRAM_ASSIGN_OR_RETURN(std::vector<uint32_t> t, ReadTokenFile(r.path));
    tokens.push_back(std::move(t));
    splits.push_back(r.split);
    names.push_back(r.path);
  }
  return BuildTraceFromTokens(hasher, tokens, splits, names);
}

GatherTrace TraceFromRows(std::span<const uint64_t> rows, std::string name) {
  GatherTrace trace;
  trace.rows.assign(rows.begin(), rows.end());
  trace.gather_end.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) trace.gather_end[i] = i + 1;
  trace.EndRequest(std::move(name));
  return trace;
}

}  // namespace engram::replay
