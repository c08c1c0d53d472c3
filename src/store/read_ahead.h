// Read-ahead (Store::ReadAhead): rows a runtime knows it will need are read
// before it asks for them and held in the cache, pinned, until a gather
// consumes them or Store::ReleaseReadAhead lets them go.
//
// ReadAheadTracker is one table's account of that: which rows a read-ahead
// pinned, which are still being read, and which batches are in flight.
// StartReadAhead issues the reads (of blocks, or of a reference table's
// pieces) and lands their rows through it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
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
  // Identifies a batch of read-ahead rows from its start to its landing.
  struct Ticket {
    uint64_t generation;  // for Done
    uint64_t seq;         // for Land
  };
  // Set in a gather's lookup flags for each row whose read-ahead pin the
  // gather released (Consume).
  static constexpr uint8_t kConsumedPin = 2;

  // `table` holds the cache the rows are pinned in and the counters.
  explicit ReadAheadTracker(TableState& table) : table_(table) {}
  ReadAheadTracker(const ReadAheadTracker&) = delete;
  ReadAheadTracker& operator=(const ReadAheadTracker&) = delete;

  // Registers a batch of distinct rows about to be read ahead.
  Ticket Started(std::span<const uint64_t> rows) EXCLUDES(mu_);
  // A row of batch `seq` has landed (verified, or `read_ok` false when its
  // block failed). Pins it unless a gather already served it after the
  // batch was issued; those rows count as read-ahead delivered but wasted.
  void Land(uint64_t seq, uint64_t row, bool read_ok, std::span<const std::byte> bytes) EXCLUDES(mu_);
  // Every row of the batch of `generation` has landed.
  void Done(uint64_t generation) EXCLUDES(mu_);
  // Waits until every read-ahead of this table issued before the call has
  // landed (its rows are pinned or dropped).
  void WaitForLanded() EXCLUDES(mu_);

  // A gather asks for `rows` (distinct): unpins those a read-ahead pinned
  // (sets kConsumedPin in flags[i] for each) and marks those still in
  // flight as served. Returns how many pins it dropped.
  // One lock for the whole gather, and none when no read-ahead is pending.
  size_t Consume(std::span<const uint64_t> rows, std::span<uint8_t> flags) EXCLUDES(mu_) {
    if (pinned_count_.load(std::memory_order_relaxed) == 0 &&
        in_flight_row_count_.load(std::memory_order_relaxed) == 0) {
      return 0;
    }
    return ConsumePending(rows, flags);
  }

  // Store::ReleaseReadAhead: unpins those of `rows` still pinned, counted
  // as wasted. Waits for this table's read-aheads in flight first: one
  // landing after the release would pin its rows again, and nothing could
  // evict those slots until some gather consumed them. Only this table's:
  // other tables' reads cannot pin rows here.
  void Release(std::span<const uint64_t> rows) EXCLUDES(mu_);

 private:
  size_t ConsumePending(std::span<const uint64_t> rows, std::span<uint8_t> flags) EXCLUDES(mu_);

  TableState& table_;

  // Invariant: a row is pinned in the table's cache exactly while it is in
  // pinned_. Every pin and unpin happens under mu_ together with the set
  // change (InsertPinned + insert when read-ahead lands, erase + Unpin when
  // a gather consumes or Release releases), so no interleaving of gathers,
  // landings and releases can leave a pin the set forgot (its slot would be
  // lost for good) or a listed row with no pin.
  Mutex mu_;
  std::unordered_set<uint64_t> pinned_ GUARDED_BY(mu_);
  std::atomic<uint64_t> pinned_count_{0};  // pinned_.size(), for the lock-free skip

  // Rows of read-ahead batches still in flight. A gather that asks for such
  // a row before its read lands has been served (from the cache or by its
  // own read): the read-ahead must not pin the row when it lands, since no
  // later gather is owed it and the pin would never be released. Each batch
  // carries the sequence number of its issue; a gather records the newest
  // sequence issued so far as `served_through`, so a landing batch issued
  // before the gather drops the row while one issued after it still pins it
  // for the gather it was meant for.
  struct InFlightRow {
    uint32_t batches = 0;         // batches in flight that read this row
    uint64_t served_through = 0;  // batches with seq <= this were served already
  };
  std::unordered_map<uint64_t, InFlightRow> in_flight_rows_ GUARDED_BY(mu_);
  std::atomic<uint64_t> in_flight_row_count_{0};  // in_flight_rows_.size(), for the lock-free skip
  uint64_t seq_ GUARDED_BY(mu_) = 0;               // last batch sequence issued

  // Batches still in flight, by generation. Per table, so releasing one
  // table's rows never waits for another table's reads; by generation, so a
  // wait covers the batches issued before it and is not prolonged by
  // read-ahead other threads keep issuing.
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, uint64_t> batches_in_flight_ GUARDED_BY(mu_);  // generation -> batches
  CondVar landed_;
};

// Reads the blocks of `rows` (distinct, in range; resident ones too) and
// inserts the rows pinned, except those a gather served while the reads were
// in flight. Completes asynchronously (the inserts run on the store's
// completion pool); then tells the table's tracker the batch is Done.
void StartReadAhead(StoreImpl* store, size_t table, std::vector<uint64_t> rows);

}  // namespace engram
