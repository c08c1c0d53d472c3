#include "src/store/gather_plan.h"

#include "src/store/first_appearance_index.h"

namespace engram {

void GatherPlan::Build(std::span<const uint64_t> row_ids) {
  const size_t n = row_ids.size();
  // Sized for n distinct rows, then cut to the count found: no growth and no
  // capacity checks per row. A recycled plan (GatherOperation::Acquire)
  // keeps its storage, so a thread's gathers allocate here only when one is
  // larger than any before it.
  distinct.resize(n);
  first_pos.resize(n);
  next_pos.resize(n);
  // The index and last_pos are scratch, kept per thread.
  thread_local FirstAppearanceIndex index;
  thread_local std::vector<uint32_t> last_pos;  // last position seen of each distinct row
  index.Reset(n);
  last_pos.resize(n);
  uint32_t count = 0;
  for (uint32_t p = 0; p < n; ++p) {
    next_pos[p] = kNone;
    const FirstAppearanceIndex::Found d = index.Find(row_ids[p], distinct.data(), count);
    if (d.added) {
      first_pos[d.index] = p;
    } else {
      next_pos[last_pos[d.index]] = p;
    }
    last_pos[d.index] = p;
  }
  distinct.resize(count);
  first_pos.resize(count);
}

}  // namespace engram
