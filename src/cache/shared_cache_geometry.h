// SharedCacheGeometry: what a process needs to read a set-associative row
// cache whose index and slab another process maps it (the node service's
// caches, read by its clients with SharedRowCacheReader).
//
// Plain fixed-width data, sent as bytes between processes of the same build
// (the magic changes with the index layout: a reader never reads an index it
// does not understand). Valid() checks one received from another process
// before anything is addressed with it.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "src/cache/set_layout.h"

namespace engram::cache {

struct SharedCacheGeometry {
  // "ESC3": the set layout of set_layout.h, the hashing of set_hasher.h
  // (with its direct placement).
  static constexpr uint32_t kMagic = 0x33435345;

  uint32_t magic = kMagic;
  uint32_t ways = 0;
  uint64_t num_sets = 0;
  uint64_t seed = 0;            // SetHasher's
  uint32_t candidate_sets = 1;  // 1 or 2
  uint32_t row_bytes = 0;
  uint32_t direct_placement = 0;  // 1: row r is in set r / ways, way r % ways (set_hasher.h)
  uint32_t reserved = 0;
  uint64_t index_bytes = 0;     // the index region's size (>= num_sets * stride)
  uint64_t slab_bytes = 0;      // the slab region's size (>= num_sets * ways * row_bytes)

  // Whether the geometry is one a reader can address without overflow, and
  // the regions hold what it describes; else why not.
  bool Valid(std::string* why) const {
    auto fail = [why](std::string m) {
      if (why) *why = std::move(m);
      return false;
    };
    if (magic != kMagic) return fail("the cache's index layout is not this build's");
    if (ways < 1 || ways > 32) return fail("ways " + std::to_string(ways) + " is not in 1..32");
    if (num_sets < 1 || num_sets > (uint64_t{1} << 40)) return fail("set count " + std::to_string(num_sets));
    if (candidate_sets != 1 && candidate_sets != 2) return fail("candidate sets must be 1 or 2");
    if (direct_placement > 1 || (direct_placement && candidate_sets != 1)) {
      return fail("direct placement must be 0 or 1, and with one candidate set");
    }
    if (reserved != 0) return fail("a reserved field is set");
    if (row_bytes == 0 || row_bytes > (1u << 20)) return fail("row size " + std::to_string(row_bytes));
    const uint64_t stride = SetLayout::For(ways).stride;
    if (index_bytes / stride < num_sets) return fail("the index region is smaller than its sets");
    const uint64_t slots = num_sets * ways;  // < 2^45
    if (slab_bytes / row_bytes < slots) return fail("the slab region is smaller than its rows");
    return true;
  }
};

// Sent as its bytes: no pointers, no padding, the same layout on both ends.
static_assert(std::is_trivially_copyable_v<SharedCacheGeometry> &&
              std::has_unique_object_representations_v<SharedCacheGeometry>);
static_assert(sizeof(SharedCacheGeometry) == 56);

}  // namespace engram::cache
