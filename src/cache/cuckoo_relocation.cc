#include "src/cache/cuckoo_relocation.h"

#include <bit>

namespace engram::cache {

bool CuckooRelocation::FreeWay(const SetStorage& storage, const SetHasher& hasher, const CandidateSets& candidates,
                               uint64_t* set, uint32_t* way, uint64_t* moves) const {
  // Node i's row sits in way `way` of its parent's set.
  struct Node {
    uint64_t set;
    int parent;
    uint32_t way;
    uint32_t depth;
  };
  Node nodes[kMaxNodes];
  int n = 0;
  nodes[n++] = {candidates.first, -1, 0, 0};
  nodes[n++] = {candidates.second, -1, 0, 0};
  const int roots = n;
  const uint32_t ways = storage.layout->ways;
  const uint32_t full = storage.FullMask();
  auto visited = [&](uint64_t s) {
    for (int i = 0; i < n; ++i) {
      if (nodes[i].set == s) return true;
    }
    return false;
  };

  int found = -1;
  for (int i = 0; i < n && found < 0 && n < kMaxNodes; ++i) {
    if (nodes[i].depth >= depth_) break;  // BFS order: all later nodes are as deep
    SetView s = storage.View(nodes[i].set);
    const uint32_t movable = s.occupied() & ~s.pinned();
    for (uint32_t w = 0; w < ways && n < kMaxNodes; ++w) {
      if (!((movable >> w) & 1)) continue;
      const uint64_t alt = hasher.OtherSet(s.keys()[w], nodes[i].set);
      if (visited(alt)) continue;
      // Never wait for a lock out of order: a busy set is simply not explored.
      if (!storage.View(alt).TryLock()) continue;
      nodes[n++] = {alt, i, w, nodes[i].depth + 1};
      if (storage.View(alt).occupied() != full) {
        found = n - 1;
        break;
      }
    }
  }

  if (found >= 0) {
    uint64_t moved = 0;
    int child = found;
    uint32_t freed_way = 0;
    while (nodes[child].parent >= 0) {
      const Node& c = nodes[child];
      const uint32_t to_way = std::countr_zero(~storage.View(c.set).occupied() & full);
      storage.MoveEntry(nodes[c.parent].set, c.way, c.set, to_way);
      freed_way = c.way;
      child = c.parent;
      ++moved;
    }
    *set = nodes[child].set;
    *way = freed_way;
    *moves = moved;
  }
  for (int i = roots; i < n; ++i) storage.View(nodes[i].set).Unlock();
  return found >= 0;
}

}  // namespace engram::cache
