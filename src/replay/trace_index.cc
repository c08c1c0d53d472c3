#include "src/replay/trace_index.h"

#include <bit>

namespace engram::replay {

TraceIndex TraceIndex::Build(const GatherTrace& trace) {
  TraceIndex index;
  const size_t n = trace.rows.size();
  index.dense.resize(n);
  // Open-addressing map row ID -> dense number (a std::unordered_map costs an
  // allocation per distinct row; traces have millions).
  const size_t slots = std::bit_ceil(std::max<size_t>(16, n * 2));
  std::vector<uint64_t> keys(slots);
  std::vector<uint32_t> values(slots, UINT32_MAX);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t id = trace.rows[i];
    uint64_t h = id * 0x9e3779b97f4a7c15ull;
    size_t s = (h ^ (h >> 29)) & (slots - 1);
    while (values[s] != UINT32_MAX && keys[s] != id) s = (s + 1) & (slots - 1);
    if (values[s] == UINT32_MAX) {
      keys[s] = id;
      values[s] = index.distinct_rows++;
    }
    index.dense[i] = values[s];
  }
  index.next_use.resize(n);
  std::vector<uint64_t> upcoming(index.distinct_rows, kNever);
  for (size_t i = n; i-- > 0;) {
    index.next_use[i] = upcoming[index.dense[i]];
    upcoming[index.dense[i]] = i;
  }
  return index;
}

}  // namespace engram::replay
