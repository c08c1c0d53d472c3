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
  // The dedup table is scratch, kept per thread.
  thread_local FirstAppearanceIndex index;
  index.Reset(n);
  // Raw pointers and a Finder in locals: the loop's stores through uint32_t
  // arrays would otherwise make the compiler reload every vector's data
  // pointer, and the index's shape, on each row.
  const FirstAppearanceIndex::Finder finder = index.finder();
  const uint64_t* const ids = row_ids.data();
  uint64_t* const keys = distinct.data();
  uint32_t* const first = first_pos.data();
  uint32_t count = 0;
  for (uint32_t p = 0; p < n; ++p) {
    const FirstAppearanceIndex::Found d = finder.Find(ids[p], keys, count);
    if (d.added) first[d.index] = p;
  }
  distinct.resize(count);
  first_pos.resize(count);
  duplicates_ = count < n;
  if (!duplicates_) return;
  // Chain each distinct row's positions: last[d] is the last position of
  // row d linked so far, starting at its first. The table still holds every
  // row, so each position's row is found again, not remembered by the loop
  // above (which most gathers, without repeats, end after).
  next_pos.assign(n, kNone);
  thread_local std::vector<uint32_t> last;
  last.assign(first_pos.begin(), first_pos.end());
  for (uint32_t p = 0; p < n; ++p) {
    const uint32_t d = finder.Find(ids[p], keys, count).index;
    if (p == first_pos[d]) continue;
    next_pos[last[d]] = p;
    last[d] = p;
  }
}

}  // namespace engram
