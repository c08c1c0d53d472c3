#include "src/store/gather_operation.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstring>
#include <utility>

#include "src/store/first_appearance_index.h"
#include "src/store/reference_reads.h"
#include "src/store/store_impl.h"
#include "storage/io/io_stats.h"

namespace engram {

Status BlockBatch::Build(const TableState& table, io::FileId file, ReadBufferPool& pool,
                         std::span<const std::pair<uint64_t, uint32_t>> rows_and_refs, size_t max_blocks) {
  const size_t n = rows_and_refs.size();
  const TableGeometry& g = table.file->geometry();
  blocks.resize(n);
  first_row.assign(n + 1, 0);
  input_block.resize(n);
  // Group by block, keeping the blocks in order of first appearance: O(n),
  // and no sort on the way to the first read.
  thread_local FirstAppearanceIndex index;
  index.Reset(n);
  uint32_t block_count = 0;
  for (size_t k = 0; k < n; ++k) {
    const FirstAppearanceIndex::Found b = index.Find(g.BlockOfRow(rows_and_refs[k].first), blocks.data(), block_count);
    input_block[k] = b.index;
    ++first_row[b.index];  // a count until the prefix sum below
  }
  blocks.resize(block_count);
  first_row.resize(block_count);
  // Counts to start indexes; then each row goes to its block's next place.
  uint32_t start = 0;
  for (uint32_t& f : first_row) start += std::exchange(f, start);
  first_row.push_back(start);
  rows.resize(n);
  row_ref.resize(n);
  input_row.resize(n);
  thread_local std::vector<uint32_t> next;
  next.assign(first_row.begin(), first_row.end() - 1);
  for (size_t k = 0; k < n; ++k) {
    const uint32_t i = next[input_block[k]]++;
    rows[i] = rows_and_refs[k].first;
    row_ref[i] = rows_and_refs[k].second;
    input_row[k] = i;
  }
  if (blocks.empty()) return Status::OK();
  ENGRAM_ASSIGN_OR_RETURN(buffers, pool.Acquire(std::min(blocks.size(), max_blocks)));
  reads.resize(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) {
    reads[b] = io::BlockRead{file, g.BlockOffset(blocks[b]), static_cast<uint32_t>(io::kBlockSize),
                             buffers.Block(b), Status()};
  }
  return Status::OK();
}

Status BlockBatch::Check(size_t b, TableState& table) const {
  TableCounters& c = table.counters;
  c.Add(c.io_reads, 1);
  Status s;
  if (!reads[b].status.ok()) {
    c.Add(c.io_errors, 1);
    s = reads[b].status.WithContext("table " + table.name + " block " + std::to_string(blocks[b]));
  } else {
    c.Add(c.io_bytes, io::kBlockSize);
    s = table.file->VerifyBlock(blocks[b], Block(b));
    if (!s.ok()) c.Add(c.checksum_failures, 1);
  }
  if (!s.ok()) {
    LogRateLimiter::Decision d = table.block_error_log.Admit();
    if (d.log && d.suppressed > 0) {
      spdlog::error("table {}: {} ({} more block failures not logged since the last line; see the counters)",
                    table.name, s.ToString(), d.suppressed);
    } else if (d.log) {
      spdlog::error("table {}: {}", table.name, s.ToString());
    }
  }
  return s;
}

}  // namespace engram

using engram::GatherTicket;

std::shared_ptr<GatherTicket::State> GatherTicket::State::Acquire() {
  thread_local std::shared_ptr<State> spare;
  if (spare && spare.use_count() == 1 && spare->plan.next_pos.capacity() <= kRecycledRows) {
    // Every other holder has let go, and each one's last use of the state
    // was under mu (a waiter's, a callback's Finish, an engine's OnLanded):
    // taking mu orders those uses before the reuse.
    { std::lock_guard lock(spare->mu); }
    spare->Reset();
    return spare;
  }
  spare = std::make_shared<State>();
  return spare;
}

void GatherTicket::State::Reset() {
  store = nullptr;
  table = 0;
  row_ids = {};
  dst = nullptr;
  stride = 0;
  // The plan is left as it is: Build overwrites all of it, and a plan of the
  // same size as the last is then built without zeroing anything.
  batch.blocks.clear();
  batch.first_row.clear();
  batch.rows.clear();
  batch.row_ref.clear();
  batch.input_row.clear();
  batch.input_block.clear();
  batch.buffers.Release();
  batch.reads.clear();
  reference.reset();
  result = GatherResult();
  t0 = t1 = 0;
  offered = 0;
  block_ok.clear();
  verified.clear();
  done = nullptr;
  complete = waiting = landed = claimed = false;
  chunks_landed = 0;
  chunks_to_check.clear();
  checked.clear();
  stream_chunks = 0;
  draining = false;
  chunks_checked = 0;
  staged.clear();
  if (staged.capacity() > kKeptStagedBytes) std::vector<std::byte>().swap(staged);
}

void GatherTicket::State::Start(const std::shared_ptr<State>& self) {
  State& st = *self;
  TableState& table = st.store->table_state(st.table);
  const uint32_t record = table.file->record_bytes();
  st.plan.Build(st.row_ids);
  st.result.rows = st.row_ids.size();
  st.result.distinct_rows = st.plan.distinct.size();

  // One pipelined batch lookup for the whole gather (RowCache::LookupBatch
  // overlaps the memory accesses of consecutive rows), then the bookkeeping.
  const size_t distinct = st.plan.distinct.size();
  // Per-thread scratch, used only until the reads are submitted or the gather
  // finishes (a callback that starts another gather on this thread comes later).
  thread_local std::vector<std::byte*> outs;
  // hit[d]: bit 0 set by the lookup (a hit), bit 1 by ConsumeReadAhead (a
  // read-ahead pin of the row was released), so the hit path allocates nothing more.
  thread_local std::vector<uint8_t> hit;
  outs.resize(distinct);
  hit.resize(distinct);  // every hit[d] is set by LookupBatch
  for (size_t d = 0; d < distinct; ++d) outs[d] = st.dst + size_t(st.plan.first_pos[d]) * st.stride;
  // kKeep: the pin of a read-ahead row is dropped by ConsumeReadAhead below,
  // under the lock that pairs it with the store's list (see TableState).
  const size_t hits = table.cache->LookupBatch(st.plan.distinct, outs, PinAction::kKeep, hit);
  // Every row asked for is served by this gather, hit or miss: a read-ahead
  // of it still in flight must not pin it when it lands.
  const size_t consumed = table.ConsumeReadAhead(st.plan.distinct, hit);
  std::vector<std::pair<uint64_t, uint32_t>> missed;
  if (hits == distinct && consumed == 0) {
    // Every row a hit, none of them a read-ahead's: all that is left is to
    // copy the rows asked for more than once.
    st.result.hits = hits;
    if (st.plan.has_duplicates()) {
      for (size_t d = 0; d < distinct; ++d) st.CopyToDuplicates(d, outs[d], record);
    }
  } else {
    for (size_t d = 0; d < distinct; ++d) {
      const bool consumed = (hit[d] & TableState::kConsumedPin) != 0;
      if (hit[d] & 1) {
        ++st.result.hits;
        if (consumed) {
          ++st.result.read_ahead_used;
          table.counters.Add(table.counters.read_ahead_used_rows, 1);
        }
        st.CopyToDuplicates(d, outs[d], record);
      } else {
        // Pinned by a read-ahead that landed between the lookup and the
        // consume: unpinned above, and of no use to this gather.
        if (consumed) table.counters.Add(table.counters.read_ahead_wasted_rows, 1);
        missed.emplace_back(st.plan.distinct[d], static_cast<uint32_t>(d));
      }
    }
  }
  st.result.misses = missed.size();
  st.t1 = io::MonotonicNanos();
  st.result.cache_nanoseconds = st.t1 - st.t0;
  if (missed.empty()) return st.Finish(st.t1);

  if (table.file->is_reference()) return StartReferenceReads(self, std::move(missed));
  const size_t missed_rows = missed.size();
  ReadBufferPool& pool = st.store->read_buffers();
  const size_t stream_chunks = pool.stream_chunks();
  Status s = st.batch.Build(table, table.file_id, pool, missed,
                            stream_chunks == 0 ? SIZE_MAX : stream_chunks * kChunkBlocks);
  if (!s.ok()) {
    // No read buffer: none of the misses is read, returned or cached.
    table.counters.Add(table.counters.failed_rows, missed_rows);
    st.result.status = s;
    for (uint32_t ref : st.batch.row_ref) st.AddFailedRow(ref);
    std::sort(st.result.failed_positions.begin(), st.result.failed_positions.end());
    return st.Finish();
  }
  st.result.blocks_read = st.batch.blocks.size();
  st.block_ok.assign(st.batch.blocks.size(), 0);
  st.checked.assign(st.chunks(), 0);
  if (stream_chunks != 0 && st.chunks() > stream_chunks) {
    st.stream_chunks = stream_chunks;
    st.staged.resize(st.batch.rows.size() * size_t(record));
  }
  const size_t first_reads = st.streaming() ? st.stream_chunks : st.chunks();
  for (size_t c = 0; c < first_reads; ++c) SubmitChunk(self, c);
}

void GatherTicket::State::SubmitChunk(const std::shared_ptr<State>& self, size_t c) {
  // The engine holds `batch.reads` and the buffer until the callback runs,
  // and the callback holds the state.
  State& st = *self;
  const size_t first = c * kChunkBlocks;
  st.store->engine().SubmitBatch(
      std::span<io::BlockRead>(st.batch.reads).subspan(first, std::min(kChunkBlocks, st.batch.blocks.size() - first)),
      [self, c = static_cast<uint32_t>(c)] { OnLanded(self, c); });
}

void GatherTicket::State::Drain(const std::shared_ptr<State>& self) {
  State& st = *self;
  for (;;) {
    std::vector<uint32_t> landed;
    {
      std::lock_guard lock(st.mu);
      if (st.chunks_to_check.empty()) {
        st.draining = false;
        return;
      }
      landed.swap(st.chunks_to_check);
    }
    for (uint32_t c : landed) {
      st.CheckChunk(c);
      ++st.chunks_checked;
      // Its buffer is free: the chunk that reads into it next.
      if (c + st.stream_chunks < st.chunks()) SubmitChunk(self, c + st.stream_chunks);
    }
    st.OfferCheckedPrefix();
    if (st.chunks_checked == st.chunks()) {
      {
        std::lock_guard lock(st.mu);
        st.claimed = true;  // draining stays set: nothing lands any more
      }
      return st.OnBlocksRead();
    }
  }
}

void GatherTicket::State::OnLanded(const std::shared_ptr<State>& self, uint32_t c) {
  State& st = *self;
  {
    std::unique_lock lock(st.mu);
    ++st.chunks_landed;
    st.landed = st.chunks_landed == st.landings();
    if (st.streaming()) {
      st.chunks_to_check.push_back(c);
      if (st.draining) return;  // the running Drain takes it
      st.draining = true;
      lock.unlock();
      boost::asio::post(st.store->completion_pool(), [self] { Drain(self); });
      return;
    }
    // Queued for a waiter, present or yet to come, to check early.
    if (c != kWholeGather) st.chunks_to_check.push_back(c);
    if (st.waiting) {
      // The waiter checks the chunk now, and runs the disk phase at the end.
      st.cv.notify_all();
      return;
    }
    if (!st.landed) return;  // whoever takes the gather checks every chunk
  }
  boost::asio::post(st.store->completion_pool(), [self] {
    {
      std::lock_guard lock(self->mu);
      // A waiter arrived (it runs the disk phase), or one already took it.
      if (self->claimed || self->waiting) return;
      self->claimed = true;
    }
    self->OnBlocksRead();
  });
}

void GatherTicket::State::CheckChunk(uint32_t c) {
  TableState& table = store->table_state(this->table);
  const uint32_t record = table.file->record_bytes();
  const TableGeometry& g = table.file->geometry();
  const size_t end_block = std::min(batch.blocks.size(), (size_t(c) + 1) * kChunkBlocks);
  for (size_t b = size_t(c) * kChunkBlocks; b < end_block; ++b) {
    const uint32_t begin = batch.first_row[b], end = batch.first_row[b + 1];
    Status s = batch.Check(b, table);
    if (!s.ok()) {
      // Nothing from this block is returned or cached.
      table.counters.Add(table.counters.failed_rows, end - begin);
      if (result.status.ok()) result.status = s;
      for (uint32_t i = begin; i < end; ++i) AddFailedRow(batch.row_ref[i]);
      continue;
    }
    result.bytes_read += io::kBlockSize;
    block_ok[b] = 1;
    const std::byte* block = batch.Block(b).data();
    for (uint32_t i = begin; i < end; ++i) {
      const std::byte* row = block + g.RowOffsetInBlock(batch.rows[i]);
      CopyOut(batch.row_ref[i], row, record);
      if (streaming()) std::memcpy(staged.data() + size_t(i) * record, row, record);
    }
  }
  checked[c] = 1;
}

void GatherTicket::State::OfferCheckedPrefix() {
  const TableGeometry& g = store->table_state(table).file->geometry();
  const uint32_t record = store->table_state(table).file->record_bytes();
  // Per-thread scratch, as in Start.
  thread_local std::vector<uint64_t> ids;
  thread_local std::vector<const std::byte*> rows;
  ids.clear();
  rows.clear();
  const size_t n = batch.input_row.size();
  for (; offered < n; ++offered) {
    const uint32_t b = batch.input_block[offered];
    if (!checked[b / kChunkBlocks]) break;
    if (!block_ok[b]) continue;  // nothing from a failed block is cached
    const uint32_t i = batch.input_row[offered];
    const uint64_t row = batch.rows[i];
    ids.push_back(row);
    // A streaming gather's block buffer may hold a later block by now.
    rows.push_back(streaming() ? staged.data() + size_t(i) * record : batch.Block(b).data() + g.RowOffsetInBlock(row));
  }
  Offer(ids, rows);
}

void GatherTicket::State::Offer(std::span<const uint64_t> ids, std::span<const std::byte* const> bytes) {
  if (ids.empty()) return;
  thread_local std::vector<InsertOutcome> outcomes;
  outcomes.resize(ids.size());
  store->table_state(table).cache->InsertBatch(ids, bytes, outcomes);
  for (InsertOutcome o : outcomes) {
    if (o == InsertOutcome::kRefusedLostAdmission || o == InsertOutcome::kRefusedAllPinned) {
      ++result.refusals;
    } else {
      ++result.inserts;
    }
  }
}

void GatherTicket::State::CopyOut(uint32_t d, const std::byte* bytes, uint32_t record) {
  std::memcpy(dst + size_t(plan.first_pos[d]) * stride, bytes, record);
  CopyToDuplicates(d, bytes, record);
}

void GatherTicket::State::CopyToDuplicates(uint32_t d, const std::byte* bytes, uint32_t record) {
  plan.ForEachDuplicate(d, [&](uint32_t p) { std::memcpy(dst + size_t(p) * stride, bytes, record); });
}

void GatherTicket::State::OnBlocksRead() {
  TableState& table = store->table_state(this->table);
  const uint32_t record = table.file->record_bytes();
  if (reference) {
    result.bytes_read += reference->ForEachRow(table, [&](uint64_t, uint32_t d, const Status& s, const std::byte* rec) {
      if (s.ok()) {
        CopyOut(d, rec, record);
        verified.emplace_back(d, rec);
        return;
      }
      table.counters.Add(table.counters.failed_rows, 1);
      if (result.status.ok()) result.status = s;
      AddFailedRow(d);
    });
  }
  for (uint32_t c = 0; c < chunks(); ++c) {
    if (!checked[c]) CheckChunk(c);
  }
  // Verified rows offered to the cache by distinct index, in first-occurrence
  // order, the same order engram-replay offers them, so emulated and served
  // counts agree exactly. A waiter may have offered a prefix already.
  OfferCheckedPrefix();
  if (!verified.empty()) {
    std::sort(verified.begin(), verified.end());
    thread_local std::vector<uint64_t> ids;
    thread_local std::vector<const std::byte*> rows;
    ids.clear();
    rows.clear();
    for (const auto& [d, bytes] : verified) {
      ids.push_back(plan.distinct[d]);
      rows.push_back(bytes);
    }
    Offer(ids, rows);
  }
  std::sort(result.failed_positions.begin(), result.failed_positions.end());
  result.disk_nanoseconds = io::MonotonicNanos() - t1;
  batch.buffers.Release();  // back to the pool now, not when the ticket dies
  if (reference) reference->blocks.buffers.Release();
  Finish();
}

void GatherTicket::State::AddFailedRow(uint32_t d) {
  result.failed_positions.push_back(plan.first_pos[d]);
  plan.ForEachDuplicate(d, [&](uint32_t p) { result.failed_positions.push_back(p); });
}

void GatherTicket::State::Finish(uint64_t now) {
  TableState& table = store->table_state(this->table);
  result.wait_nanoseconds = now - t0;
  TableCounters& c = table.counters;
  c.Add(c.gathers, 1);
  c.Add(c.rows_requested, result.rows);
  if (!result.status.ok()) c.Add(c.failed_gathers, 1);
  c.Add(c.readiness_wait_nanoseconds, result.wait_nanoseconds);
  c.Add(c.readiness_wait_cache_nanoseconds, result.cache_nanoseconds);
  c.Add(c.readiness_wait_disk_nanoseconds, result.disk_nanoseconds);
  if (done) {
    // The callback form hands the result off; it must not block. Marking the
    // gather complete under mu afterwards orders this thread's use of the
    // state before its reuse (Acquire).
    auto cb = std::move(done);
    cb(std::move(result));
    std::lock_guard lock(mu);
    complete = true;
    return;
  }
  std::lock_guard lock(mu);
  complete = true;
  cv.notify_all();
}

namespace engram {

namespace {

struct ReadAheadOperation {
  StoreImpl* store;
  size_t table;
  TableState::ReadAheadTicket ticket;
  BlockBatch batch;
};

// On the completion pool: verify the landed blocks and pin their rows.
void FinishReadAhead(const ReadAheadOperation& op) {
  TableState& t = op.store->table_state(op.table);
  const uint32_t record = t.file->record_bytes();
  const TableGeometry& g = t.file->geometry();
  for (size_t b = 0; b < op.batch.blocks.size(); ++b) {
    const bool ok = op.batch.Check(b, t).ok();  // a failure is counted; a later gather reads it again
    std::span<const std::byte> block = op.batch.Block(b);
    for (uint32_t i = op.batch.first_row[b]; i < op.batch.first_row[b + 1]; ++i) {
      const uint64_t row = op.batch.rows[i];
      t.LandReadAheadRow(op.ticket.seq, row, ok, ok ? block.subspan(g.RowOffsetInBlock(row), record)
                                                    : std::span<const std::byte>());
    }
  }
  t.ReadAheadDone(op.ticket.generation);
}

}  // namespace

}  // namespace engram

engram::GatherResult engram::GatherTicket::Wait() { return WaitForGather(std::move(*this)); }

namespace engram {

GatherResult WaitForGather(GatherTicket ticket) {
  if (!ticket.valid()) {
    GatherResult r;
    r.status = Status::InvalidArgument("wait on an empty gather ticket");
    return r;
  }
  GatherState& st = GatherTicketAccess::Get(ticket);
  std::unique_lock lock(st.mu);
  st.waiting = true;
  // Unless a pool thread has already taken the gather, this thread runs its
  // disk phase: it checks each chunk as it lands (chunks that landed before
  // it arrived are checked by OnBlocksRead), then, once all have landed,
  // fills the cache. The caller's thread does its own gather's
  // verify/copy/insert work, in parallel with others.
  for (;;) {
    // A streaming gather's chunks are checked by Drain: its waiter only waits.
    st.cv.wait(lock, [&] {
      return st.complete || (!st.streaming() && !st.claimed && (st.landed || !st.chunks_to_check.empty()));
    });
    if (st.complete) break;
    if (st.landed) {
      st.claimed = true;
      lock.unlock();
      st.OnBlocksRead();  // ends in Finish(), which sets complete
      lock.lock();
      break;
    }
    std::vector<uint32_t> landed;
    landed.swap(st.chunks_to_check);
    lock.unlock();
    for (uint32_t c : landed) st.CheckChunk(c);
    st.OfferCheckedPrefix();
    lock.lock();
  }
  return std::move(st.result);
}

TableState::ReadAheadTicket BeginReadAhead(TableState& table, std::span<const uint64_t> rows,
                                           std::vector<std::pair<uint64_t, uint32_t>>& refs) {
  refs.clear();
  refs.reserve(rows.size());
  // Rows already resident are read again too: InsertPinned then pins them in
  // place. Simple and always correct; read-ahead targets rows not yet seen.
  for (uint64_t r : rows) refs.emplace_back(r, 0);
  return table.ReadAheadStarted(rows);
}

bool EndReadAheadWithoutReads(TableState& table, const TableState::ReadAheadTicket& ticket,
                              std::span<const uint64_t> rows, const Status& built, bool no_blocks) {
  if (!built.ok()) {
    spdlog::warn("read-ahead on table {}: {}", table.name, built.ToString());
    for (uint64_t r : rows) table.LandReadAheadRow(ticket.seq, r, false, {});
  }
  if (built.ok() && !no_blocks) return false;
  table.ReadAheadDone(ticket.generation);
  return true;
}

void StartReadAhead(StoreImpl* store, size_t table_index, std::vector<uint64_t> rows) {
  TableState& table = store->table_state(table_index);
  if (table.file->is_reference()) return StartReferenceReadAhead(store, table_index, std::move(rows));
  auto op = std::make_shared<ReadAheadOperation>();
  op->store = store;
  op->table = table_index;
  std::vector<std::pair<uint64_t, uint32_t>> refs;
  op->ticket = BeginReadAhead(table, rows, refs);
  Status s = op->batch.Build(table, table.file_id, store->read_buffers(), refs);
  if (EndReadAheadWithoutReads(table, op->ticket, rows, s, op->batch.blocks.empty())) return;
  // The engine's completion thread only hands the blocks off.
  store->engine().SubmitBatch(op->batch.reads, [op] {
    boost::asio::post(op->store->completion_pool(), [op] { FinishReadAhead(*op); });
  });
}

}  // namespace engram
