#include "src/store/read_ahead.h"

#include <utility>

#include "src/store/store_impl.h"
#include "src/store/table_state.h"
#include "src/store/verified_row_reads.h"

namespace engram {

ReadAheadTracker::Ticket ReadAheadTracker::Started(std::span<const uint64_t> rows) {
  MutexLock lock(&mu_);
  ++batches_in_flight_[generation_];
  const uint64_t seq = ++seq_;
  for (uint64_t row : rows) ++in_flight_rows_[row].batches;
  in_flight_row_count_.store(in_flight_rows_.size(), std::memory_order_relaxed);
  return {generation_, seq};
}

void ReadAheadTracker::Done(uint64_t generation) {
  MutexLock lock(&mu_);
  auto it = batches_in_flight_.find(generation);
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

void ReadAheadTracker::Land(uint64_t seq, uint64_t row, bool read_ok, std::span<const std::byte> bytes) {
  TableCounters& counters = table_.counters;
  MutexLock lock(&mu_);  // the pin and the list change together (see pinned_)
  auto it = in_flight_rows_.find(row);
  const bool served = it != in_flight_rows_.end() && it->second.served_through >= seq;
  if (it != in_flight_rows_.end() && --it->second.batches == 0) {
    in_flight_rows_.erase(it);
    in_flight_row_count_.store(in_flight_rows_.size(), std::memory_order_relaxed);
  }
  if (!read_ok) return;  // counted by the block check; a later gather reads it again
  if (served) {
    counters.Add(counters.read_ahead_rows, 1);
    counters.Add(counters.read_ahead_wasted_rows, 1);
    return;
  }
  InsertOutcome o = table_.cache->InsertPinned(row, bytes);
  if (o == InsertOutcome::kRefusedAllPinned || o == InsertOutcome::kRefusedLostAdmission) return;
  if (pinned_.insert(row).second) {
    pinned_count_.fetch_add(1, std::memory_order_relaxed);
    counters.Add(counters.read_ahead_rows, 1);
  }
}

size_t ReadAheadTracker::ConsumePending(std::span<const uint64_t> rows, std::span<uint8_t> flags) {
  size_t consumed = 0;
  MutexLock lock(&mu_);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!in_flight_rows_.empty()) {
      auto it = in_flight_rows_.find(rows[i]);
      if (it != in_flight_rows_.end()) it->second.served_through = seq_;
    }
    if (pinned_.erase(rows[i]) == 0) continue;
    pinned_count_.fetch_sub(1, std::memory_order_relaxed);
    table_.cache->Unpin(rows[i]);
    flags[i] |= kConsumedPin;
    ++consumed;
  }
  return consumed;
}

void ReadAheadTracker::Release(std::span<const uint64_t> rows) {
  WaitForLanded();
  TableCounters& counters = table_.counters;
  MutexLock lock(&mu_);
  for (uint64_t id : rows) {
    if (pinned_.erase(id) == 0) continue;
    pinned_count_.fetch_sub(1, std::memory_order_relaxed);
    table_.cache->Unpin(id);
    counters.Add(counters.read_ahead_wasted_rows, 1);
  }
}

void StartReadAhead(StoreImpl* store, size_t table_index, std::vector<uint64_t> rows) {
  ReadAheadTracker& tracker = store->table_state(table_index).read_ahead;
  // Rows already resident are read again too: Land then pins them in place.
  // Simple and always correct; read-ahead targets rows not yet seen.
  const ReadAheadTracker::Ticket ticket = tracker.Started(rows);
  ReadRowsVerified(
      store, table_index, std::move(rows), "read-ahead",
      [&tracker, ticket](uint64_t row, bool ok, std::span<const std::byte> bytes) {
        tracker.Land(ticket.seq, row, ok, bytes);
      },
      [&tracker, ticket] { tracker.Done(ticket.generation); });
}

}  // namespace engram
