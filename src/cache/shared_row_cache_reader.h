// SharedRowCacheReader: serves hits from a row cache that another process
// owns and writes (the node service's caches, mapped read-only by each
// client), without writing a byte of it.
//
// A row is served only by an unlocked read the set's version validates (the
// seqlock of set_layout.h): read the version, find the key, copy the row,
// read the version again. A reader therefore never takes a lock -- a reader
// that dies holds nothing -- and never returns a torn row. It also never
// touches the policy: no sketch increment, no clock tick, no stamp; the
// owner records the reader's hits later, in batches (RowCache::RecordHits).
// A row in a pinned way is a miss here (its read-ahead pin must be consumed
// by the owner), and so is a row whose set a writer holds or keeps changing
// through a few retries: the owner then serves it, under its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "engram/status.h"
#include "src/cache/set_hasher.h"
#include "src/cache/set_layout.h"
#include "src/cache/set_storage.h"
#include "src/cache/shared_cache_geometry.h"

namespace engram::cache {

class SharedRowCacheReader {
 public:
  // index and slab: the cache's regions as mapped here (index_bytes and
  // slab_bytes of them readable). Fails on a geometry that does not check
  // out (SharedCacheGeometry::Valid).
  static Result<SharedRowCacheReader> Attach(const SharedCacheGeometry& geometry, const uint8_t* index,
                                             const uint8_t* slab);

  // Looks the rows up: hit[i] = 1 and row i copied to dsts[i] (row_bytes)
  // when it was served, else 0 (dsts[i] may then hold bytes to ignore).
  // Returns the hits. In stages over groups of rows, like
  // SetAssociativeRowCache::LookupBatch (staged_set_probe.h).
  size_t LookupBatch(std::span<const uint64_t> row_ids, std::span<std::byte* const> dsts,
                     std::span<uint8_t> hit) const;

  uint32_t row_bytes() const { return row_bytes_; }

 private:
  SharedRowCacheReader(const SharedCacheGeometry& g, const uint8_t* index, const uint8_t* slab)
      : layout_(SetLayout::For(g.ways)),
        hasher_(g.seed, g.num_sets, g.candidate_sets, g.direct_placement == 1 ? g.ways : 0),
        row_bytes_(g.row_bytes),
        index_(index),
        slab_(slab) {}

  template <uint32_t kWays>
  size_t LookupBatchIn(std::span<const uint64_t> row_ids, std::span<std::byte* const> dsts,
                       std::span<uint8_t> hit) const;
  template <uint32_t kWays>
  const SetLayout& LayoutFor() const;
  // The sets and payloads, addressed with one shape's layout. Only their
  // reading members are used (SetView's hints and version, Payload): the
  // memory may be mapped read-only.
  template <uint32_t kWays>
  SetStorage StorageIn() const {
    return {const_cast<uint8_t*>(index_), const_cast<uint8_t*>(slab_), &LayoutFor<kWays>(), row_bytes_};
  }
  template <uint32_t kWays>
  SetView ViewOf(uint64_t set) const {
    return StorageIn<kWays>().View(set);
  }
  // One validated read of the row from (set, way): true if it was there,
  // unpinned, and no writer came between.
  template <uint32_t kWays>
  bool ReadRow(uint64_t set, int way, uint64_t row_id, std::byte* dst) const;
  // The row found afresh in its candidate sets and read (a few tries when
  // writers interfere); false for a miss, a pinned row or a busy set.
  template <uint32_t kWays>
  bool ReadAfresh(uint64_t row_id, uint64_t hash, std::byte* dst) const;

  SetLayout layout_;
  SetHasher hasher_;
  uint32_t row_bytes_;
  const uint8_t* index_;
  const uint8_t* slab_;
};

}  // namespace engram::cache
