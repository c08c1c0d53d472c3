// RowCache: a set-associative cache of fixed-size rows keyed by 64-bit row ID.
//
// The cache does no I/O and knows nothing of files: the store and the trace
// emulator (engram-replay) both drive this same class, so emulated and real
// results agree.
//
// Protocol (what the store and the emulator do for one gather):
//   for each distinct row ID:  Lookup(id, dst)    -> hit (row copied) or miss
//   for each miss, once read:  Insert(id, bytes)  -> kept or refused (counted)
// Every miss is followed by exactly one Insert, so
// stats.misses == stats.inserts + stats.total_refusals() when quiescent.
//
// Read-ahead: InsertPinned() bypasses admission; a pinned row is never evicted
// (nor relocated) until a Lookup with PinAction::kConsume uses it or Unpin()
// releases it. Read-ahead is counted in pinned_inserts / pinned_refusals, not
// in inserts / refusals, so the identity below holds with read-ahead too.
//
// An Insert that finds the row already resident (another thread inserted it
// between this thread's miss and insert) returns kAlreadyPresent and counts
// as an insert: that keeps misses == inserts + refusals exact under races.
//
// Thread safety: all methods may be called concurrently. A reader never sees a
// torn row, even while that slot is being replaced: a lookup copies the row
// under the set's lock, or without it and then checks that no writer changed
// the set meanwhile (retrying under the lock if one did).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engram/status.h"
#include "src/cache/anonymous_memory.h"
#include "src/cache/cache_config.h"
#include "src/cache/shared_cache_geometry.h"

namespace engram {

enum class InsertOutcome : uint8_t {
  kInserted,         // placed in a free slot (or a relocation made one)
  kInsertedEvicted,  // placed after evicting a victim
  kAlreadyPresent,   // another thread inserted it first; counts as an insert of nothing
  kRefusedLostAdmission,
  kRefusedAllPinned,
};

enum class PinAction : uint8_t {
  kKeep,     // a hit on a pinned row leaves it pinned
  kConsume,  // a hit on a pinned row unpins it (the gather that used the read-ahead)
};

// Where a cache's index and row slab come from when not its own anonymous
// memory: zero-filled regions, 2 MiB-aligned, of `bytes` (`what` names the
// region in errors).
using CacheRegionAllocator = std::function<Result<cache::AnonymousMemory>(uint64_t bytes, const char* what)>;

class RowCache {
 public:
  // A cache holding as many rows of row_bytes as fit in budget_bytes after the
  // index, per-slot metadata and sketch are charged. row_bytes may be 0: the
  // cache then keeps only the index (the emulator's mode); capacity must then
  // be given with CreateWithCapacity.
  //
  // max_rows caps the capacity at a table's row count: a cache never has
  // more sets than it takes to give every row a slot (whole sets, rounded up,
  // so fewer than config.ways slots beyond the rows). Row IDs must then be
  // below max_rows. A cache with a slot for every row places rows directly
  // (set_hasher.h) and so holds the whole table once it has read it.
  // Creating a cache commits no memory (every array is anonymous memory), so
  // a large cache costs no RSS and no time until rows arrive or
  // CommitMemory() is called.
  static constexpr uint64_t kNoRowLimit = ~uint64_t{0};
  // `regions`, if given, provides the index and the row slab (the node
  // service's shared memory); the sketch and history stay private.
  static Result<std::unique_ptr<RowCache>> Create(const RowCacheConfig& config, uint64_t budget_bytes,
                                                  uint32_t row_bytes, uint64_t max_rows = kNoRowLimit,
                                                  const CacheRegionAllocator& regions = {});
  // The capacity_rows Create() would give for this budget, without allocating:
  // lets the emulator size an index-only cache (row_bytes = 0 in
  // CreateWithCapacity) exactly like a real cache of row_bytes rows.
  static Result<uint64_t> CapacityForBudget(const RowCacheConfig& config, uint64_t budget_bytes,
                                            uint32_t row_bytes, uint64_t max_rows = kNoRowLimit);
  // The budget beyond which a cache capped at max_rows gains nothing: the
  // footprint of its largest capped size. A store gives the rest to other
  // tables.
  static Result<uint64_t> BudgetForRows(const RowCacheConfig& config, uint64_t max_rows, uint32_t row_bytes);
  // A cache with (at least, rounded to whole sets) capacity_rows slots; row
  // IDs below max_rows, as for Create.
  static Result<std::unique_ptr<RowCache>> CreateWithCapacity(const RowCacheConfig& config,
                                                              uint64_t capacity_rows, uint32_t row_bytes,
                                                              uint64_t max_rows = kNoRowLimit);
  virtual ~RowCache() = default;

  // Counts one lookup (hit or miss) and increments the row's sketch estimate.
  // On a hit copies the row into dst (dst.size() >= row_bytes; may be empty
  // when row_bytes == 0) and returns true.
  virtual bool Lookup(uint64_t row_id, std::span<std::byte> dst, PinAction pin = PinAction::kConsume) = 0;

  // Many lookups at once, with exactly the effect of Lookup(row_ids[i],
  // {dsts[i], row_bytes}, pin) for i = 0, 1, ... in order: same counts, same
  // sketch increments, same outcome. Implementations may overlap the memory
  // accesses of rows a few places apart (a gather of cached rows is otherwise
  // a chain of dependent cache misses). hit[i] = 1 on a hit, 0 on a miss;
  // dsts.size() and hit.size() == row_ids.size(). Returns the hits. Unlike
  // Lookup's, a missed row's destination may have been written (with bytes
  // to ignore): an implementation may copy before it knows the copy is good.
  // With direct placement a batch's hits are not stamped as used (the stamp
  // is in the index line the batch does not read), so ResidentRowsByValue
  // ranks such a cache's rows by when they were placed or last looked up
  // one at a time.
  virtual size_t LookupBatch(std::span<const uint64_t> row_ids, std::span<std::byte* const> dsts, PinAction pin,
                             std::span<uint8_t> hit);

  // Offers a missed row (row.size() == row_bytes). Exactly one call per miss.
  virtual InsertOutcome Insert(uint64_t row_id, std::span<const std::byte> row) = 0;

  // Exactly Insert(row_ids[i], {rows[i], row_bytes}) for i = 0, 1, ... in
  // order (rows empty, or rows[i] null: an empty row): same outcomes, same
  // counts. outcomes[i] receives row i's; outcomes.size() == row_ids.size().
  // Implementations may overlap the memory accesses of rows a few places
  // apart, as LookupBatch does.
  virtual void InsertBatch(std::span<const uint64_t> row_ids, std::span<const std::byte* const> rows,
                           std::span<InsertOutcome> outcomes);

  // Read-ahead insert: bypasses admission, the row stays until consumed or
  // unpinned. Refused (kRefusedAllPinned) if every candidate slot is pinned,
  // or (kRefusedLostAdmission) with direct placement, a row ID with no slot.
  // Does not count a lookup or a miss. If the row is already resident it is
  // pinned in place.
  virtual InsertOutcome InsertPinned(uint64_t row_id, std::span<const std::byte> row) = 0;
  // Releases a read-ahead pin; returns false if the row was not pinned.
  virtual bool Unpin(uint64_t row_id) = 0;

  // ---- Warm start: a store saves the rows it holds and refills a fresh
  // cache from them after a restart (src/store/hot_set.h). ----

  // A resident row and what it is worth to keep: the frequency sketch's
  // estimate, and its age in ticks since its last access.
  struct ResidentRow {
    uint64_t row_id;
    uint32_t estimate;
    uint32_t age;
  };
  // Every resident row, most valuable first: higher estimate, then more
  // recently used (then row ID, so the order is deterministic). Locks one
  // set at a time: concurrent gathers go on, and a row they move meanwhile
  // may be listed once, twice or not at all.
  virtual std::vector<ResidentRow> ResidentRowsByValue() { return {}; }
  // Places a row only in a free way of its candidate sets: it evicts and
  // relocates no one, and is unpinned (an ordinary resident row). The sketch
  // is credited with up to `estimate` accesses (capped at what its counters
  // hold), so that a restored row is valued like the row it was rather than
  // like a row never seen. Counts no lookup, miss or insert (the identity
  // misses == inserts + refusals is about gathers); it counts as resident.
  // Returns true if the row was placed; false when it was resident already
  // or no candidate set had a free way.
  virtual bool InsertIntoFreeWay(uint64_t row_id, std::span<const std::byte> row, uint32_t estimate) {
    (void)row_id, (void)row, (void)estimate;
    return false;
  }

  // Commits the cache's memory now, in the background, instead of page by
  // page as rows arrive (and maps it with huge pages where the kernel
  // allows): for a cache that will be filled anyway, so that its first
  // inserts do not each pay a page fault. Lookups and inserts go on
  // meanwhile. Resident memory is the whole budget from then on.
  virtual void CommitMemory() {}
  // Blocks until what CommitMemory (or a fill that crossed the huge-page
  // threshold) started in the background has finished; at once otherwise.
  virtual void WaitForMemory() {}

  virtual RowCacheStats Stats() const = 0;
  virtual const RowCacheConfig& config() const = 0;
  virtual uint64_t capacity_rows() const = 0;
  virtual uint32_t row_bytes() const = 0;
  // Bytes of memory the cache itself uses (rows + index + metadata + sketch).
  virtual uint64_t memory_bytes() const = 0;

  // ---- Sharing: the node service puts its caches' index and slab in shared
  // memory (CacheRegionAllocator), and readers in other processes serve hits
  // from it (SharedRowCacheReader) without touching the policy. ----

  // What a reader needs to find rows in this cache's index and slab; nothing
  // for a cache that cannot be read that way.
  virtual std::optional<cache::SharedCacheGeometry> SharedGeometry() const { return std::nullopt; }
  virtual const uint8_t* index_data() const { return nullptr; }
  virtual const uint8_t* slab_data() const { return nullptr; }
  // Hits a reader elsewhere has already served (copied), reported for the
  // policy: each row, in order, counts as a lookup and a hit, raises its
  // sketch estimate and, if still resident, is stamped as just used, as
  // Lookup would have done -- without a copy and without touching pins.
  virtual void RecordHits(std::span<const uint64_t> row_ids) { (void)row_ids; }
};

}  // namespace engram
