#include "src/store/gather_plan.h"

#include "src/store/first_appearance_index.h"

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
  // The index and last_pos are scratch, kept per thread so that a gather
  // allocates them only when it is larger than any before it on the thread.
  thread_local FirstAppearanceIndex index;
  thread_local std::vector<uint32_t> last_pos;  // last position seen of each distinct row
  index.Reset(n);
  last_pos.clear();
  for (uint32_t p = 0; p < n; ++p) {
    const FirstAppearanceIndex::Found d = index.Find(row_ids[p], distinct);
    if (d.added) {
      first_pos.push_back(p);
      last_pos.push_back(p);
    } else {
      next_pos[last_pos[d.index]] = p;
      last_pos[d.index] = p;
    }
  }
}

}  // namespace engram
