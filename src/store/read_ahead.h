// Read-ahead (Store::ReadAhead): rows a runtime knows it will need are read
// before it asks for them and held in the cache, pinned, until a gather
// consumes them or Store::ReleaseReadAhead lets them go.
//
// ReadAheadTracker is one table's account of that: which rows a read-ahead
// pinned, which are still being read, and which batches are in flight.
// StartReadAhead issues the reads (of blocks, or of a reference table's
// pieces) and lands their rows through it.
//
// A pin belongs to its owner. A private store is one owner (kStoreOwner);
// the node service makes each client connection an owner of its own, so a
// row two clients read ahead stays pinned until both have consumed or
// released it, one client's gather or release drops only its own pin, and
// a client that goes away drops only what it still held (ReleaseOwner).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "storage/mutex.h"
#include "storage/thread_annotations.h"

namespace engram {

class StoreImpl;
struct TableState;

class ReadAheadTracker {
 public:
  using PinOwner = uint64_t;
  static constexpr PinOwner kStoreOwner = 0;

  // Identifies a batch of read-ahead rows from its start to its landing.
  struct Ticket {
    uint64_t generation;  // for Done
    uint64_t seq;         // for Land
    PinOwner owner;       // whose pins its rows become
  };
  // Set in a gather's lookup flags for each row whose read-ahead pin the
  // gather released (Consume).
  static constexpr uint8_t kConsumedPin = 2;

  // `table` holds the cache the rows are pinned in and the counters.
  explicit ReadAheadTracker(TableState& table) : table_(table) {}
  ReadAheadTracker(const ReadAheadTracker&) = delete;
  ReadAheadTracker& operator=(const ReadAheadTracker&) = delete;

  // Registers a batch of distinct rows about to be read ahead for `owner`.
  Ticket Started(std::span<const uint64_t> rows, PinOwner owner = kStoreOwner) EXCLUDES(mu_);
  // A row of the batch has landed (verified, or `read_ok` false when its
  // block failed). Pins it for the batch's owner unless a gather of that
  // owner already served it after the batch was issued (or the owner is
  // gone); those rows count as read-ahead delivered but wasted.
  void Land(const Ticket& ticket, uint64_t row, bool read_ok, std::span<const std::byte> bytes) EXCLUDES(mu_);
  // Every row of the batch has landed.
  void Done(const Ticket& ticket) EXCLUDES(mu_);
  // Waits until every read-ahead of this table issued before the call has
  // landed (its rows are pinned or dropped).
  void WaitForLanded() EXCLUDES(mu_);

  // A gather of `owner` asks for `rows` (distinct): unpins those a
  // read-ahead of that owner pinned (sets kConsumedPin in flags[i] for
  // each) and marks that owner's reads of them still in flight as served.
  // Other owners' pins stay. Returns how many pins it dropped.
  // One lock for the whole gather, and none when no read-ahead is pending.
  size_t Consume(std::span<const uint64_t> rows, std::span<uint8_t> flags, PinOwner owner = kStoreOwner)
      EXCLUDES(mu_) {
    if (pinned_count_.load(std::memory_order_relaxed) == 0 &&
        in_flight_row_count_.load(std::memory_order_relaxed) == 0) {
      return 0;
    }
    return ConsumePending(rows, flags, owner);
  }

  // Store::ReleaseReadAhead: unpins `owner`'s pins of those of `rows` it
  // still holds, counted as wasted. Waits for this table's read-aheads in
  // flight first: one landing after the release would pin its rows again,
  // and nothing could evict those slots until some gather consumed them.
  // Only this table's: other tables' reads cannot pin rows here.
  void Release(std::span<const uint64_t> rows, PinOwner owner = kStoreOwner) EXCLUDES(mu_);

  // The owner is gone: drops every pin it holds (counted as wasted), and
  // its batches still in flight pin nothing when they land. Does not wait.
  // Owners are never reused.
  void ReleaseOwner(PinOwner owner) EXCLUDES(mu_);

  // Pins `owner` holds (tests, the node service's limits).
  size_t pins_of(PinOwner owner) const EXCLUDES(mu_);

 private:
  // A (row, owner) pair: the key of a pin and of a row in flight.
  struct OwnedRow {
    uint64_t row;
    PinOwner owner;
    bool operator==(const OwnedRow&) const = default;
  };
  struct OwnedRowHash {
    size_t operator()(const OwnedRow& k) const { return k.row ^ (k.owner * 0x9E3779B97F4A7C15ull); }
  };

  size_t ConsumePending(std::span<const uint64_t> rows, std::span<uint8_t> flags, PinOwner owner) EXCLUDES(mu_);
  // Drops one owner's pin of a row: the row's cache pin goes with its last.
  void DropPin(const OwnedRow& pin) REQUIRES(mu_);

  TableState& table_;

  // Invariant: a row is pinned in the table's cache exactly while some
  // owner's pin of it is in pinned_, and pin_owners_ counts those owners.
  // Every pin and unpin happens under mu_ together with the set change
  // (InsertPinned + insert when read-ahead lands, erase + Unpin when the
  // last owner consumes or releases it), so no interleaving of gathers,
  // landings and releases can leave a pin the set forgot (its slot would be
  // lost for good) or a listed row with no pin.
  mutable Mutex mu_;
  std::unordered_set<OwnedRow, OwnedRowHash> pinned_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, uint32_t> pin_owners_ GUARDED_BY(mu_);  // row -> owners pinning it
  std::unordered_map<PinOwner, uint64_t> pins_by_owner_ GUARDED_BY(mu_);  // owner -> its pins
  std::atomic<uint64_t> pinned_count_{0};  // pinned_.size(), for the lock-free skip

  // Rows of read-ahead batches still in flight, per owner. A gather that
  // asks for such a row before its read lands has been served (from the
  // cache or by its own read): the read-ahead must not pin the row for that
  // owner when it lands, since no later gather is owed it and the pin would
  // never be released. Each batch carries the sequence number of its issue;
  // a gather records the newest sequence issued so far as `served_through`,
  // so a landing batch issued before the gather drops the row while one
  // issued after it still pins it for the gather it was meant for.
  struct InFlightRow {
    uint32_t batches = 0;         // batches in flight that read this row
    uint64_t served_through = 0;  // batches with seq <= this were served already
  };
  std::unordered_map<OwnedRow, InFlightRow, OwnedRowHash> in_flight_rows_ GUARDED_BY(mu_);
  std::atomic<uint64_t> in_flight_row_count_{0};  // in_flight_rows_.size(), for the lock-free skip
  uint64_t seq_ GUARDED_BY(mu_) = 0;               // last batch sequence issued

  // Owners that ReleaseOwner let go while batches of theirs were in
  // flight, with the count of those batches: their landings pin nothing,
  // and the entry goes with their last batch.
  std::unordered_map<PinOwner, uint64_t> batches_by_owner_ GUARDED_BY(mu_);
  std::unordered_set<PinOwner> released_owners_ GUARDED_BY(mu_);

  // Batches still in flight, by generation. Per table, so releasing one
  // table's rows never waits for another table's reads; by generation, so a
  // wait covers the batches issued before it and is not prolonged by
  // read-ahead other threads keep issuing.
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, uint64_t> batches_in_flight_ GUARDED_BY(mu_);  // generation -> batches
  CondVar landed_;
};

// Reads the blocks of `rows` (distinct, in range; resident ones too) and
// inserts the rows pinned for `owner`, except those a gather of that owner
// served while the reads were in flight. Completes asynchronously (the
// inserts run on the store's completion pool); then tells the table's
// tracker the batch is Done and calls `landed`, if given.
void StartReadAhead(StoreImpl* store, size_t table, std::vector<uint64_t> rows,
                    ReadAheadTracker::PinOwner owner = ReadAheadTracker::kStoreOwner,
                    std::function<void()> landed = nullptr);

}  // namespace engram
