#include "src/store/gather_plan.h"

#include <bit>

namespace engram {

void GatherPlan::Build(std::span<const uint64_t> row_ids) {
  const size_t n = row_ids.size();
  distinct.clear();
  first_pos.clear();
  next_pos.assign(n, kNone);
  if (n == 0) return;
  distinct.reserve(n / 4 + 16);
  first_pos.reserve(n / 4 + 16);
  // Slots hold distinct index + 1 (0 = empty); load factor <= 1/2.
  const size_t slots = std::bit_ceil(2 * n);
  const int shift = 64 - std::countr_zero(slots);
  std::vector<uint32_t> table(slots, 0);
  std::vector<uint32_t> last_pos;  // last position seen of each distinct row
  last_pos.reserve(n / 4 + 16);
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
