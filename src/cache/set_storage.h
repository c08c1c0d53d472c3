// SetStorage: the memory of a set-associative cache, addressed by set and way.
//
// The index (sets of SetLayout::stride bytes) and the payload slab (row
// (set * ways + way)) are separate regions; this is a non-owning view of both,
// cheap to copy, shared by the cache and its placement policies. Callers hold
// the locks of the sets they change (unlocked reads: set_layout.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "src/cache/set_layout.h"

namespace engram::cache {

struct SetStorage {
  uint8_t* index;
  uint8_t* slab;
  const SetLayout* layout;
  uint32_t row_bytes;

  SetView View(uint64_t set) const { return SetView(index + set * layout->stride, *layout); }
  uint8_t* Payload(uint64_t set, uint32_t way) const {
    return slab + (set * layout->ways + way) * uint64_t{row_bytes};
  }
  // All ways of a set, as an occupied mask.
  uint32_t FullMask() const { return layout->ways == 32 ? ~0u : (1u << layout->ways) - 1; }

  // Moves an unpinned resident (key, stamp, payload) to a free way of another set.
  void MoveEntry(uint64_t from_set, uint32_t from_way, uint64_t to_set, uint32_t to_way) const {
    SetView from = View(from_set);
    SetView to = View(to_set);
    to.set_key(to_way, from.keys()[from_way]);
    to.set_stamp(to_way, from.stamp(from_way));
    to.set_occupied(to.occupied() | (1u << to_way));
    to.set_pinned(to.pinned() & ~(1u << to_way));  // pinned rows are never moved
    from.set_occupied(from.occupied() & ~(1u << from_way));
    if (row_bytes != 0) std::memcpy(Payload(to_set, to_way), Payload(from_set, from_way), row_bytes);
  }
};

}  // namespace engram::cache
