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

void BlockBatch::Reset(size_t max_rows) {
  Clear();
  reads.reserve(max_rows);
  block_keys_.resize(max_rows);
  index_.Reset(max_rows);
}

void BlockBatch::Clear() {
  blocks.clear();
  rows.clear();
  row_ref.clear();
  row_block.clear();
  reads.clear();
  block_first_.clear();
  block_last_.clear();
  next_in_block_.clear();
}

void BlockBatch::Add(uint64_t row, uint32_t ref, const TableGeometry& g) {
  const auto k = static_cast<uint32_t>(rows.size());
  uint32_t count = static_cast<uint32_t>(blocks.size());
  const FirstAppearanceIndex::Found b = index_.Find(g.BlockOfRow(row), block_keys_.data(), count);
  if (b.added) {
    blocks.push_back(block_keys_[b.index]);
    block_first_.push_back(k);
    block_last_.push_back(k);
  } else {
    next_in_block_[block_last_[b.index]] = k;
    block_last_[b.index] = k;
  }
  rows.push_back(row);
  row_ref.push_back(ref);
  row_block.push_back(b.index);
  next_in_block_.push_back(kEnd);
}

Status BlockBatch::PrepareReads(io::FileId file, const TableGeometry& g, ReadBufferPool& pool, size_t end,
                                size_t ring_blocks) {
  if (!reads.empty() && end > reads.capacity()) {
    // Growing would move the reads the engine already holds.
    return Status::Internal("block batch: more reads than Reset made room for");
  }
  if (ring_blocks < end) {
    // Replaces the lease: only before any read into it is prepared.
    if (!reads.empty()) return Status::Internal("block batch: a ring lease after reads were prepared");
    ENGRAM_ASSIGN_OR_RETURN(buffers, pool.Acquire(ring_blocks));
  } else {
    ENGRAM_RETURN_IF_ERROR(pool.Extend(buffers, end));
  }
  for (size_t b = reads.size(); b < end; ++b) {
    reads.push_back(io::BlockRead{file, g.BlockOffset(blocks[b]), static_cast<uint32_t>(io::kBlockSize),
                                  buffers.Block(b), Status()});
  }
  return Status::OK();
}

Status BlockBatch::Build(const TableState& table, io::FileId file, ReadBufferPool& pool,
                         std::span<const std::pair<uint64_t, uint32_t>> rows_and_refs, size_t max_blocks) {
  const TableGeometry& g = table.file->geometry();
  Reset(rows_and_refs.size());
  for (const auto& [row, ref] : rows_and_refs) Add(row, ref, g);
  if (blocks.empty()) return Status::OK();
  return PrepareReads(file, g, pool, blocks.size(), max_blocks);
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
  batch.buffers.Release();
  batch.Clear();
  if (batch.reads.capacity() > kKeptReads) std::vector<io::BlockRead>().swap(batch.reads);
  reference.reset();
  result = GatherResult();
  t0 = t1 = 0;
  offered = 0;
  block_ok.clear();
  verified.clear();
  done = nullptr;
  complete = waiting = landed = claimed = false;
  chunks_landed = 0;
  chunks_submitted = 0;
  landings = kLandingsUnknown;
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
  const size_t distinct = st.plan.distinct.size();
  st.result.distinct_rows = distinct;

  // Per-thread scratch, used only until the reads are submitted or the gather
  // finishes (a callback that starts another gather on this thread comes later).
  thread_local std::vector<std::byte*> outs;
  // hit[d]: bit 0 set by the lookup (a hit), bit 1 by ConsumeReadAhead (a
  // read-ahead pin of the row was released), so the hit path allocates nothing more.
  thread_local std::vector<uint8_t> hit;
  outs.resize(distinct);
  hit.resize(distinct);  // every hit[d] is set by LookupBatch
  for (size_t d = 0; d < distinct; ++d) outs[d] = st.dst + size_t(st.plan.first_pos[d]) * st.stride;

  // A reference table's misses are read in one batch after the lookups
  // (reference_reads.h); a block table's go into st.batch as they are found.
  const bool reference = table.file->is_reference();
  std::vector<std::pair<uint64_t, uint32_t>> reference_misses;
  ReadBufferPool& pool = st.store->read_buffers();
  const size_t stream_chunks = pool.stream_chunks();
  // Chunks go to the engine during the lookups unless the gather might miss
  // more blocks than its buffers hold: whether it streams is known only after
  // its last lookup.
  const bool submit_early = !reference && (stream_chunks == 0 || distinct <= stream_chunks * kChunkBlocks);
  bool batch_ready = false;  // st.batch is sized for this gather's misses (at the first one)
  const TableGeometry& g = table.file->geometry();
  Status no_buffer;  // why the chunks from chunks_submitted on have no read buffer

  // Pipelined batch lookups (RowCache::LookupBatch overlaps the memory
  // accesses of consecutive rows), one per segment, then the bookkeeping.
  // Looking up in segments decides the same as one batch would: LookupBatch
  // equals one lookup per row, in order.
  for (size_t begin = 0, segment = kFirstSegmentRows; begin < distinct; begin += segment, segment *= 2) {
    const size_t n = std::min(segment, distinct - begin);
    const std::span<const uint64_t> ids = std::span<const uint64_t>(st.plan.distinct).subspan(begin, n);
    const std::span<uint8_t> flags = std::span<uint8_t>(hit).subspan(begin, n);
    // kKeep: the pin of a read-ahead row is dropped by ConsumeReadAhead below,
    // under the lock that pairs it with the store's list (see TableState).
    const size_t hits = table.cache->LookupBatch(ids, std::span<std::byte* const>(outs).subspan(begin, n),
                                                 PinAction::kKeep, flags);
    // Every row asked for is served by this gather, hit or miss: a read-ahead
    // of it still in flight must not pin it when it lands.
    const size_t consumed = table.ConsumeReadAhead(ids, flags);
    if (hits == n && consumed == 0) {
      // Every row a hit, none of them a read-ahead's: all that is left is to
      // copy the rows asked for more than once.
      st.result.hits += hits;
      if (st.plan.has_duplicates()) {
        for (size_t d = begin; d < begin + n; ++d) st.CopyToDuplicates(d, outs[d], record);
      }
      continue;
    }
    for (size_t d = begin; d < begin + n; ++d) {
      const bool consumed = (hit[d] & TableState::kConsumedPin) != 0;
      if (hit[d] & 1) {
        ++st.result.hits;
        if (consumed) {
          ++st.result.read_ahead_used;
          table.counters.Add(table.counters.read_ahead_used_rows, 1);
        }
        st.CopyToDuplicates(d, outs[d], record);
        continue;
      }
      // Pinned by a read-ahead that landed between the lookup and the
      // consume: unpinned above, and of no use to this gather.
      if (consumed) table.counters.Add(table.counters.read_ahead_wasted_rows, 1);
      if (reference) {
        reference_misses.emplace_back(st.plan.distinct[d], static_cast<uint32_t>(d));
      } else {
        if (!batch_ready) {
          st.batch.Reset(distinct - d);  // the misses still to come, at most
          batch_ready = true;
        }
        st.batch.Add(st.plan.distinct[d], static_cast<uint32_t>(d), g);
      }
    }
    if (submit_early && no_buffer.ok()) no_buffer = SubmitReadyChunks(self, /*all=*/false);
  }
  st.result.misses = reference ? reference_misses.size() : st.batch.rows.size();
  st.t1 = io::MonotonicNanos();
  st.result.cache_nanoseconds = st.t1 - st.t0;
  if (st.result.misses == 0) return st.Finish(st.t1);
  if (reference) return StartReferenceReads(self, std::move(reference_misses));

  st.block_ok.assign(st.batch.blocks.size(), 0);
  st.checked.assign(st.chunks(), 0);
  if (!submit_early && stream_chunks != 0 && st.chunks() > stream_chunks) {
    // More blocks than the buffers hold: read them through a ring of
    // stream_chunks chunks. Nothing is submitted yet.
    no_buffer = st.batch.PrepareReads(table.file_id, g, pool, st.batch.blocks.size(), stream_chunks * kChunkBlocks);
    if (no_buffer.ok()) {
      st.stream_chunks = stream_chunks;
      st.staged.resize(st.batch.rows.size() * size_t(record));
      st.result.blocks_read = st.batch.blocks.size();
      SetLandings(self, st.chunks());  // before the first read: nothing can have landed
      for (size_t c = 0; c < st.stream_chunks; ++c) SubmitChunk(self, c);
      return;
    }
  } else if (no_buffer.ok()) {
    no_buffer = SubmitReadyChunks(self, /*all=*/true);
  }
  const size_t submitted_blocks = std::min(st.batch.blocks.size(), st.chunks_submitted * kChunkBlocks);
  st.result.blocks_read = submitted_blocks;
  if (!no_buffer.ok()) {
    // No read buffer for these blocks: none of their rows is read, returned
    // or cached. The chunks already submitted go on.
    st.result.status = no_buffer;
    for (size_t b = submitted_blocks; b < st.batch.blocks.size(); ++b) st.FailBlockRows(b);
    for (size_t c = st.chunks_submitted; c < st.chunks(); ++c) st.checked[c] = 1;
    if (st.chunks_submitted == 0) {
      std::sort(st.result.failed_positions.begin(), st.result.failed_positions.end());
      return st.Finish();
    }
  }
  SetLandings(self, st.chunks_submitted);
}

void GatherTicket::State::SetLandings(const std::shared_ptr<State>& self, size_t n) {
  State& st = *self;
  bool post;
  {
    std::lock_guard lock(st.mu);
    st.landings = n;
    st.landed = st.chunks_landed == n;
    // A streaming gather's Drain runs the disk phase after its last check.
    post = st.landed && !st.waiting && !st.streaming();
  }
  if (post) PostDiskPhase(self);
}

engram::Status GatherTicket::State::SubmitReadyChunks(const std::shared_ptr<State>& self, bool all) {
  State& st = *self;
  const TableState& table = st.store->table_state(st.table);
  const size_t blocks = st.batch.blocks.size();
  for (;;) {
    const size_t first = st.chunks_submitted * kChunkBlocks;
    const size_t end = std::min(first + kChunkBlocks, blocks);
    if (first >= blocks || (end - first < kChunkBlocks && !all)) return Status::OK();
    ENGRAM_RETURN_IF_ERROR(
        st.batch.PrepareReads(table.file_id, table.file->geometry(), st.store->read_buffers(), end));
    SubmitChunk(self, st.chunks_submitted++);
  }
}

void GatherTicket::State::SubmitChunk(const std::shared_ptr<State>& self, size_t c) {
  // The engine holds `batch.reads` and the buffer until the callback runs,
  // and the callback holds the state.
  State& st = *self;
  const size_t first = c * kChunkBlocks;
  st.store->engine().SubmitBatch(
      std::span<io::BlockRead>(st.batch.reads).subspan(first, std::min(kChunkBlocks, st.batch.reads.size() - first)),
      [self, c = static_cast<uint32_t>(c)] { OnLanded(self, c); });
}

void GatherTicket::State::PostDiskPhase(const std::shared_ptr<State>& self) {
  boost::asio::post(self->store->completion_pool(), [self] {
    {
      std::lock_guard lock(self->mu);
      // A waiter arrived (it runs the disk phase), or one already took it.
      if (self->claimed || self->waiting) return;
      self->claimed = true;
    }
    self->OnBlocksRead();
  });
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
    st.landed = st.chunks_landed == st.landings;
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
    // Whoever takes the gather checks every chunk; while Start is still
    // submitting (landings unknown), Start hands it off at its end.
    if (!st.landed) return;
  }
  PostDiskPhase(self);
}

void GatherTicket::State::CheckChunk(uint32_t c) {
  TableState& table = store->table_state(this->table);
  const uint32_t record = table.file->record_bytes();
  const TableGeometry& g = table.file->geometry();
  const size_t end_block = std::min(batch.blocks.size(), (size_t(c) + 1) * kChunkBlocks);
  for (size_t b = size_t(c) * kChunkBlocks; b < end_block; ++b) {
    Status s = batch.Check(b, table);
    if (!s.ok()) {
      // Nothing from this block is returned or cached.
      FailBlockRows(b);
      if (result.status.ok()) result.status = s;
      continue;
    }
    result.bytes_read += io::kBlockSize;
    block_ok[b] = 1;
    const std::byte* block = batch.Block(b).data();
    batch.ForEachRowOf(b, [&](uint32_t k) {
      const std::byte* row = block + g.RowOffsetInBlock(batch.rows[k]);
      CopyOut(batch.row_ref[k], row, record);
      if (streaming()) std::memcpy(staged.data() + size_t(k) * record, row, record);
    });
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
  const size_t n = batch.rows.size();
  for (; offered < n; ++offered) {
    const uint32_t b = batch.row_block[offered];
    if (!checked[b / kChunkBlocks]) break;
    if (!block_ok[b]) continue;  // nothing from a failed block is cached
    const uint64_t row = batch.rows[offered];
    ids.push_back(row);
    // A streaming gather's block buffer may hold a later block by now.
    rows.push_back(streaming() ? staged.data() + offered * record : batch.Block(b).data() + g.RowOffsetInBlock(row));
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

void GatherTicket::State::FailBlockRows(size_t b) {
  TableCounters& c = store->table_state(table).counters;
  batch.ForEachRowOf(b, [&](uint32_t k) {
    c.Add(c.failed_rows, 1);
    AddFailedRow(batch.row_ref[k]);
  });
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
    op.batch.ForEachRowOf(b, [&](uint32_t k) {
      const uint64_t row = op.batch.rows[k];
      t.LandReadAheadRow(op.ticket.seq, row, ok, ok ? block.subspan(g.RowOffsetInBlock(row), record)
                                                    : std::span<const std::byte>());
    });
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
