#include "src/store/read_ahead.h"

#include <utility>

#include "src/store/store_impl.h"
#include "src/store/table_state.h"
#include "src/store/verified_row_reads.h"

namespace engram {

ReadAheadTracker::Ticket ReadAheadTracker::Started(std::span<const uint64_t> rows, PinOwner owner) {
  MutexLock lock(&mu_);
  ++batches_in_flight_[generation_];
  ++batches_by_owner_[owner];
  const uint64_t seq = ++seq_;
  for (uint64_t row : rows) ++in_flight_rows_[OwnedRow{row, owner}].batches;
  in_flight_row_count_.store(in_flight_rows_.size(), std::memory_order_relaxed);
  return {generation_, seq, owner};
}

void ReadAheadTracker::Done(const Ticket& ticket) {
  MutexLock lock(&mu_);
  auto owner = batches_by_owner_.find(ticket.owner);
  if (--owner->second == 0) {
    batches_by_owner_.erase(owner);
    released_owners_.erase(ticket.owner);
  }
  auto it = batches_in_flight_.find(ticket.generation);
  if (--it->second == 0) {
    batches_in_flight_.erase(it);
    landed_.SignalAll();
  }
}

void ReadAheadTracker::WaitForLanded() {
  MutexLock lock(&mu_);
  const uint64_t mine = generation_++;  // later batches start a new generation
  while (!(batches_in_flight_.empty() || batches_in_flight_.begin()->first > mine)) landed_.Wait(&mu_);
}

void ReadAheadTracker::Land(const Ticket& ticket, uint64_t row, bool read_ok, std::span<const std::byte> bytes) {
  TableCounters& counters = table_.counters;
  const OwnedRow key{row, ticket.owner};
  MutexLock lock(&mu_);  // the pin and the list change together (see pinned_)
  auto it = in_flight_rows_.find(key);
  const bool served = it != in_flight_rows_.end() && it->second.served_through >= ticket.seq;
  if (it != in_flight_rows_.end() && --it->second.batches == 0) {
    in_flight_rows_.erase(it);
    in_flight_row_count_.store(in_flight_rows_.size(), std::memory_order_relaxed);
  }
  if (!read_ok) return;  // counted by the block check; a later gather reads it again
  if (served || released_owners_.count(ticket.owner) != 0) {
    counters.Add(counters.read_ahead_rows, 1);
    counters.Add(counters.read_ahead_wasted_rows, 1);
    return;
  }
  if (pinned_.count(key) != 0) return;  // this owner's pin from an earlier batch holds it already
  InsertOutcome o = table_.cache->InsertPinned(row, bytes);
  if (o == InsertOutcome::kRefusedAllPinned || o == InsertOutcome::kRefusedLostAdmission) return;
  pinned_.insert(key);
  ++pin_owners_[row];
  ++pins_by_owner_[ticket.owner];
  pinned_count_.fetch_add(1, std::memory_order_relaxed);
  counters.Add(counters.read_ahead_rows, 1);
}

void ReadAheadTracker::DropPin(const OwnedRow& pin) {
  pinned_.erase(pin);
  auto mine = pins_by_owner_.find(pin.owner);
  if (--mine->second == 0) pins_by_owner_.erase(mine);
  pinned_count_.fetch_sub(1, std::memory_order_relaxed);
  auto owners = pin_owners_.find(pin.row);
  if (--owners->second == 0) {
    pin_owners_.erase(owners);
    table_.cache->Unpin(pin.row);
  }
}

size_t ReadAheadTracker::ConsumePending(std::span<const uint64_t> rows, std::span<uint8_t> flags, PinOwner owner) {
  size_t consumed = 0;
  MutexLock lock(&mu_);
  for (size_t i = 0; i < rows.size(); ++i) {
    const OwnedRow key{rows[i], owner};
    if (!in_flight_rows_.empty()) {
      auto it = in_flight_rows_.find(key);
      if (it != in_flight_rows_.end()) it->second.served_through = seq_;
    }
    if (pinned_.count(key) == 0) continue;
    DropPin(key);
    flags[i] |= kConsumedPin;
    ++consumed;
  }
  return consumed;
}

void ReadAheadTracker::Release(std::span<const uint64_t> rows, PinOwner owner) {
  WaitForLanded();
  TableCounters& counters = table_.counters;
  MutexLock lock(&mu_);
  for (uint64_t id : rows) {
    const OwnedRow key{id, owner};
    if (pinned_.count(key) == 0) continue;
    DropPin(key);
    counters.Add(counters.read_ahead_wasted_rows, 1);
  }
}

void ReadAheadTracker::ReleaseOwner(PinOwner owner) {
  TableCounters& counters = table_.counters;
  MutexLock lock(&mu_);
  if (batches_by_owner_.count(owner) != 0) released_owners_.insert(owner);
  std::vector<OwnedRow> held;
  if (pins_by_owner_.count(owner) != 0) {
    for (const OwnedRow& pin : pinned_) {
      if (pin.owner == owner) held.push_back(pin);
    }
  }
  for (const OwnedRow& pin : held) {
    DropPin(pin);
    counters.Add(counters.read_ahead_wasted_rows, 1);
  }
}

size_t ReadAheadTracker::pins_of(PinOwner owner) const {
  MutexLock lock(&mu_);
  auto it = pins_by_owner_.find(owner);
  return it == pins_by_owner_.end() ? 0 : it->second;
}

void StartReadAhead(StoreImpl* store, size_t table_index, std::vector<uint64_t> rows,
                    ReadAheadTracker::PinOwner owner, std::function<void()> landed) {
  ReadAheadTracker& tracker = store->table_state(table_index).read_ahead;
  // Rows already resident are read again too: Land then pins them in place.
  // Simple and always correct; read-ahead targets rows not yet seen.
  const ReadAheadTracker::Ticket ticket = tracker.Started(rows, owner);
  ReadRowsVerified(
      store, table_index, std::move(rows), "read-ahead",
      [&tracker, ticket](uint64_t row, bool ok, std::span<const std::byte> bytes) {
        tracker.Land(ticket, row, ok, bytes);
      },
      [&tracker, ticket, landed = std::move(landed)] {
        tracker.Done(ticket);
        if (landed) landed();
      });
}

}  // namespace engram
