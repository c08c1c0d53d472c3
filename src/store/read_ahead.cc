#include "src/store/read_ahead.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include <memory>
#include <utility>

#include "src/store/block_batch.h"
#include "src/store/reference_reads.h"
#include "src/store/store_impl.h"
#include "src/store/table_state.h"

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

namespace {

// The two steps every kind of read-ahead shares. BeginReadAhead registers
// the read-ahead of `rows` with the table and fills `refs` with the (row, 0)
// pairs its batch is built from. EndReadAheadWithoutReads ends a read-ahead
// that will read nothing -- its batch failed to build (`built`: its rows then
// land as failed) or needs no block -- and says whether it did.
ReadAheadTracker::Ticket BeginReadAhead(TableState& table, std::span<const uint64_t> rows,
                                        std::vector<std::pair<uint64_t, uint32_t>>& refs) {
  refs.clear();
  refs.reserve(rows.size());
  // Rows already resident are read again too: InsertPinned then pins them in
  // place. Simple and always correct; read-ahead targets rows not yet seen.
  for (uint64_t r : rows) refs.emplace_back(r, 0);
  return table.read_ahead.Started(rows);
}

bool EndReadAheadWithoutReads(TableState& table, const ReadAheadTracker::Ticket& ticket,
                              std::span<const uint64_t> rows, const Status& built, bool no_blocks) {
  if (!built.ok()) {
    spdlog::warn("read-ahead on table {}: {}", table.name, built.ToString());
    for (uint64_t r : rows) table.read_ahead.Land(ticket.seq, r, false, {});
  }
  if (built.ok() && !no_blocks) return false;
  table.read_ahead.Done(ticket.generation);
  return true;
}

struct BlockReadAhead {
  StoreImpl* store;
  size_t table;
  ReadAheadTracker::Ticket ticket;
  BlockBatch batch;
};

// On the completion pool: verify the landed blocks and pin their rows.
void FinishBlockReadAhead(const BlockReadAhead& op) {
  TableState& t = op.store->table_state(op.table);
  const uint32_t record = t.file->record_bytes();
  const TableGeometry& g = t.file->geometry();
  for (size_t b = 0; b < op.batch.blocks.size(); ++b) {
    const bool ok = op.batch.Check(b, t).ok();  // a failure is counted; a later gather reads it again
    std::span<const std::byte> block = op.batch.Block(b);
    op.batch.ForEachRowOf(b, [&](uint32_t k) {
      const uint64_t row = op.batch.rows[k];
      t.read_ahead.Land(op.ticket.seq, row, ok,
                        ok ? block.subspan(g.RowOffsetInBlock(row), record) : std::span<const std::byte>());
    });
  }
  t.read_ahead.Done(op.ticket.generation);
}

struct ReferenceReadAhead {
  StoreImpl* store;
  size_t table;
  ReadAheadTracker::Ticket ticket;
  ReferenceBatch batch;
};

// On the completion pool: verify the landed pieces and pin the rows.
void FinishReferenceReadAhead(ReferenceReadAhead& op) {
  TableState& t = op.store->table_state(op.table);
  const uint32_t record = t.file->record_bytes();
  op.batch.ForEachRow(t, [&](uint64_t row, uint32_t, const Status& status, const std::byte* rec) {
    t.read_ahead.Land(op.ticket.seq, row, status.ok(),
                      status.ok() ? std::span<const std::byte>(rec, record) : std::span<const std::byte>());
  });
  op.batch.blocks.buffers.Release();
  t.read_ahead.Done(op.ticket.generation);
}

void StartReferenceReadAhead(StoreImpl* store, size_t table_index, std::vector<uint64_t> rows) {
  TableState& table = store->table_state(table_index);
  auto op = std::make_shared<ReferenceReadAhead>();
  op->store = store;
  op->table = table_index;
  std::vector<std::pair<uint64_t, uint32_t>> refs;
  op->ticket = BeginReadAhead(table, rows, refs);
  Status s = op->batch.Build(table, store->read_buffers(), std::move(refs));
  if (EndReadAheadWithoutReads(table, op->ticket, rows, s, op->batch.blocks.blocks.empty())) return;
  store->engine().SubmitBatch(op->batch.blocks.reads, [op] {
    boost::asio::post(op->store->completion_pool(), [op] { FinishReferenceReadAhead(*op); });
  });
}

}  // namespace

void StartReadAhead(StoreImpl* store, size_t table_index, std::vector<uint64_t> rows) {
  TableState& table = store->table_state(table_index);
  if (table.file->is_reference()) return StartReferenceReadAhead(store, table_index, std::move(rows));
  auto op = std::make_shared<BlockReadAhead>();
  op->store = store;
  op->table = table_index;
  std::vector<std::pair<uint64_t, uint32_t>> refs;
  op->ticket = BeginReadAhead(table, rows, refs);
  Status s = op->batch.Build(table, table.file_id, store->read_buffers(), refs);
  if (EndReadAheadWithoutReads(table, op->ticket, rows, s, op->batch.blocks.empty())) return;
  // The engine's completion thread only hands the blocks off.
  store->engine().SubmitBatch(op->batch.reads, [op] {
    boost::asio::post(op->store->completion_pool(), [op] { FinishBlockReadAhead(*op); });
  });
}

}  // namespace engram
