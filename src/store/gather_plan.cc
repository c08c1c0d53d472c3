#include "src/store/gather_plan.h"

#include <bit>

namespace engram {

void GatherPlan::Build(std::span<const uint64_t> row_ids) {
  const size_t n = row_ids.size();
  distinct.clear();
  first_pos.clear();
  next_pos.assign(n, kNone);
  if (n == 0) return;
  // One allocation each, never a regrowth (8 + 4 bytes per position).
  distinct.reserve(n);
  first_pos.reserve(n);
  // Slots hold distinct index + 1 (0 = empty); load factor <= 1/2. The hash
  // table and last_pos are scratch, kept per thread so that a gather
  // allocates them only when it is larger than any before it on the thread.
  const size_t slots = std::bit_ceil(2 * n);
  const int shift = 64 - std::countr_zero(slots);
  thread_local std::vector<uint32_t> table;
  thread_local std::vector<uint32_t> last_pos;  // last position seen of each distinct row
  table.assign(slots, 0);
  last_pos.clear();
  for (uint32_t p = 0; p < n; ++p) {
    const uint64_t id = row_ids[p];
    size_t s = (id * 0x9E3779B97F4A7C15ull) >> shift;
    for (;;) {
      uint32_t slot = table[s];
      if (slot == 0) {
        table[s] = static_cast<uint32_t>(distinct.size() + 1);
        distinct.push_back(id);
        first_pos.push_back(p);
        last_pos.push_back(p);
        break;
      }
      if (distinct[slot - 1] == id) {
        next_pos[last_pos[slot - 1]] = p;
        last_pos[slot - 1] = p;
        break;
      }
      s = (s + 1) & (slots - 1);
    }
  }
}

}  // namespace engram
