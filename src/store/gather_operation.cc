#include "src/store/gather_operation.h"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstring>
#include <utility>

#include "src/store/read_ahead.h"
#include "src/store/reference_reads.h"
#include "src/store/store_impl.h"
#include "src/store/table_state.h"

namespace engram {

std::shared_ptr<GatherOperation> GatherOperation::Acquire() {
  thread_local std::shared_ptr<GatherOperation> spare;
  if (spare && spare.use_count() == 1 && spare->plan_.capacity() <= kRecycledRows) {
    spare->Reset();
    return spare;
  }
  spare = std::make_shared<GatherOperation>();
  return spare;
}

void GatherOperation::Reset() {
  if (!finished_alone_) {
    // Every other holder has let go, and each one's last use of the state
    // was under mu_ (a waiter's, a callback's Finish, an engine's OnLanded):
    // taking mu_ orders those uses before the reuse. A gather finished alone
    // was never seen by another thread and left these fields as it found them.
    MutexLock lock(&mu_);
    complete_ = waiting_ = landed_ = claimed_ = draining_ = false;
    chunks_landed_ = 0;
    chunks_to_check_.clear();
    landings_ = kLandingsUnknown;
  }
  finished_alone_ = false;
  store_ = nullptr;
  table_ = 0;
  row_ids_ = {};
  dst_ = RowPlacement();
  done_ = nullptr;
  caller_reads_ = reads_pending_ = false;
  consumes_read_ahead_ = true;
  // The plan is left as it is: Build overwrites all of it, and a plan of the
  // same size as the last is then built without zeroing anything.
  result_ = GatherResult();
  t0_ = t1_ = 0;
  if (!missed_) return;  // the fields below belong to the reads of misses
  missed_ = false;
  batch_.buffers.Release();
  batch_.Clear();
  if (batch_.reads.capacity() > kKeptReads) std::vector<io::BlockRead>().swap(batch_.reads);
  reference_.reset();
  offered_ = 0;
  block_state_.clear();
  verified_.clear();
  chunks_submitted_ = 0;
  checked_.clear();
  stream_chunks_ = 0;
  chunks_checked_ = 0;
  staged_.clear();
  if (staged_.capacity() > kKeptStagedBytes) std::vector<std::byte>().swap(staged_);
}

void GatherOperation::Init(StoreImpl* store, size_t table, std::span<const uint64_t> row_ids,
                           const RowDestination& dst, std::function<void(GatherResult)> done, bool caller_reads,
                           bool consumes_read_ahead) {
  t0_ = ReadinessNanos();
  store_ = store;
  table_ = table;
  row_ids_ = row_ids;
  dst_ = RowPlacement(dst);
  done_ = std::move(done);
  caller_reads_ = caller_reads;
  consumes_read_ahead_ = consumes_read_ahead;
}

void GatherOperation::Reject(Status why) {
  result_.status = std::move(why);
  result_.rows = row_ids_.size();
  if (table_ < store_->table_count()) return Finish();
  // No table to account the failure to.
  result_.wait_nanoseconds = ElapsedNanos(t0_, ReadinessNanos());
  if (done_) {
    auto cb = std::move(done_);
    cb(result_);
    return;
  }
  MutexLock lock(&mu_);
  complete_ = true;
}

// The steps Start calls are defined inline (only this file calls them), so
// that the compiler may fold them back into Start: a hit-only gather then
// costs what it cost as one function.
// The cache phase, then the reads of the misses.
void GatherOperation::Start(const std::shared_ptr<GatherOperation>& self) {
  GatherOperation& st = *self;
  st.PlanDistinctRows();
  CachePhase phase = st.BeginCachePhase();
  // Pipelined batch lookups (RowCache::LookupBatch overlaps the memory
  // accesses of consecutive rows), one per segment, each followed by the
  // submission of the chunks its misses completed. Looking up in segments
  // decides the same as one batch would: LookupBatch equals one lookup per
  // row, in order.
  const size_t distinct = st.plan_.distinct.size();
  for (size_t begin = 0, segment = kFirstSegmentRows; begin < distinct; begin += segment, segment *= 2) {
    st.LookUpSegment(begin, std::min(segment, distinct - begin), phase);
    if (phase.submit_early && phase.no_buffer.ok()) phase.no_buffer = SubmitReadyChunks(self, /*all=*/false);
  }
  st.EndCachePhase(phase);
  if (st.result_.misses == 0) {
    // Waited for by this thread, with nothing to read: no other thread has
    // seen the gather, so it finishes without the hand-off's lock.
    if (st.caller_reads_) return st.FinishAlone(st.t1_);
    return st.Finish(st.t1_);
  }
  if (phase.reference) return StartReferenceReads(self, std::move(phase.reference_misses));
  SubmitBlockReads(self, phase);
}

inline void GatherOperation::PlanDistinctRows() {
  plan_.Build(row_ids_);
  result_.rows = row_ids_.size();
  result_.distinct_rows = plan_.distinct.size();
}

inline GatherOperation::CachePhase GatherOperation::BeginCachePhase() {
  const size_t distinct = plan_.distinct.size();
  thread_local std::vector<std::byte*> outs;
  thread_local std::vector<uint8_t> hit;
  outs.resize(distinct);
  hit.resize(distinct);  // every hit[d] is set by LookupBatch
  if (dst_.flat()) {
    std::byte* const dst = dst_.dst();
    const size_t stride = dst_.stride();
    for (size_t d = 0; d < distinct; ++d) outs[d] = dst + size_t(plan_.first_pos[d]) * stride;
  } else {
    for (size_t d = 0; d < distinct; ++d) outs[d] = dst_.At(plan_.first_pos[d]);
  }
  const bool reference = store_->table_state(table_).file->is_reference();
  const ReadBufferPool& buffers = store_->read_buffers();
  const size_t stream_chunks = buffers.stream_chunks();
  // A gather its own thread reads submits nothing before its last lookup:
  // it reads once it waits.
  const bool submit_early =
      !reference && !caller_reads_ && (stream_chunks == 0 || distinct <= buffers.early_blocks());
  return CachePhase{outs, hit, reference, /*reference_misses=*/{}, stream_chunks, submit_early,
                    /*batch_ready=*/false, /*no_buffer=*/Status()};
}

inline void GatherOperation::LookUpSegment(size_t begin, size_t n, CachePhase& phase) {
  TableState& table = store_->table_state(table_);
  const uint32_t record = table.file->record_bytes();
  const std::span<const uint64_t> ids = std::span<const uint64_t>(plan_.distinct).subspan(begin, n);
  const std::span<uint8_t> flags = std::span<uint8_t>(phase.hit).subspan(begin, n);
  // kKeep: the pin of a read-ahead row is dropped by the tracker's Consume
  // below, under the lock that pairs it with the tracker's list.
  const size_t hits =
      table.cache->LookupBatch(ids, std::span<std::byte* const>(phase.outs).subspan(begin, n), PinAction::kKeep, flags);
  // Every row asked for is served by this gather, hit or miss: a read-ahead
  // of it still in flight must not pin it when it lands.
  const size_t consumed = consumes_read_ahead_ ? table.read_ahead.Consume(ids, flags) : 0;
  if (hits == n && consumed == 0) {
    // Every row a hit, none of them a read-ahead's: all that is left is to
    // copy the rows asked for more than once.
    result_.hits += hits;
    if (plan_.has_duplicates()) {
      for (size_t d = begin; d < begin + n; ++d) CopyToDuplicates(d, phase.outs[d], record);
    }
    return;
  }
  const TableGeometry& g = table.file->geometry();
  for (size_t d = begin; d < begin + n; ++d) {
    const bool consumed = (phase.hit[d] & ReadAheadTracker::kConsumedPin) != 0;
    if (phase.hit[d] & 1) {
      ++result_.hits;
      if (consumed) {
        ++result_.read_ahead_used;
        table.counters.Add(table.counters.read_ahead_used_rows, 1);
      }
      CopyToDuplicates(d, phase.outs[d], record);
      continue;
    }
    // Pinned by a read-ahead that landed between the lookup and the
    // consume: unpinned above, and of no use to this gather.
    if (consumed) table.counters.Add(table.counters.read_ahead_wasted_rows, 1);
    if (phase.reference) {
      phase.reference_misses.emplace_back(plan_.distinct[d], static_cast<uint32_t>(d));
    } else {
      if (!phase.batch_ready) {
        batch_.Reset(plan_.distinct.size() - d);  // the misses still to come, at most
        phase.batch_ready = true;
      }
      batch_.Add(plan_.distinct[d], static_cast<uint32_t>(d), g);
    }
  }
}

inline void GatherOperation::EndCachePhase(const CachePhase& phase) {
  result_.misses = phase.reference ? phase.reference_misses.size() : batch_.rows.size();
  missed_ = result_.misses != 0;
  t1_ = ReadinessNanos();
  result_.cache_nanoseconds = ElapsedNanos(t0_, t1_);
}

void GatherOperation::SubmitBlockReads(const std::shared_ptr<GatherOperation>& self, CachePhase& phase) {
  GatherOperation& st = *self;
  st.block_state_.assign(st.batch_.blocks.size(), BlockState::kUnchecked);
  st.checked_.assign(st.chunks(), 0);
  // More blocks than the buffers hold: read them through a ring of
  // stream_chunks chunks. Nothing is submitted yet.
  const bool streams = !phase.submit_early && phase.stream_chunks != 0 && st.chunks() > phase.stream_chunks;
  if (streams) {
    phase.no_buffer = st.PrepareStreamingReads(phase.stream_chunks);
    if (phase.no_buffer.ok()) {
      if (!st.caller_reads_) return SubmitPreparedReads(self);
      st.reads_pending_ = true;  // WaitOnThisThread reads them
      return;
    }
  } else if (phase.no_buffer.ok()) {
    phase.no_buffer = st.caller_reads_ ? st.PrepareChunkReads() : SubmitReadyChunks(self, /*all=*/true);
  }
  st.result_.blocks_read = std::min(st.batch_.blocks.size(), st.chunks_submitted_ * kChunkBlocks);
  if (!phase.no_buffer.ok()) {
    // The chunks already submitted (or prepared) go on.
    st.FailUnsubmittedBlocks(phase.no_buffer);
    if (st.chunks_submitted_ == 0) return st.FinishWithoutReads();
  }
  if (st.caller_reads_) {
    st.reads_pending_ = true;  // WaitOnThisThread reads the chunks that got buffers
    return;
  }
  SetLandings(self, st.chunks_submitted_);
}

void GatherOperation::StartReferenceReads(const std::shared_ptr<GatherOperation>& self,
                                          std::vector<std::pair<uint64_t, uint32_t>> missed) {
  GatherOperation& st = *self;
  TableState& table = st.store_->table_state(st.table_);
  const size_t missed_rows = missed.size();
  st.reference_ = std::make_shared<ReferenceBatch>();
  Status s = st.reference_->Build(table, st.store_->read_buffers(), std::move(missed));
  if (!s.ok()) {
    // No read buffer: none of the misses is read, returned or cached.
    table.counters.Add(table.counters.failed_rows, missed_rows);
    st.result_.status = s;
    for (uint32_t ref : st.reference_->row_ref) st.AddFailedRow(ref);
    return st.FinishWithoutReads();
  }
  st.result_.blocks_read = st.reference_->blocks.blocks.size();
  SetLandings(self, 1);  // before the read: nothing can have landed
  st.store_->engine().SubmitBatch(st.reference_->blocks.reads, [self] { OnLanded(self); });
}

Result<bool> GatherOperation::PrepareNextChunk(bool all) {
  const size_t blocks = batch_.blocks.size();
  const size_t first = chunks_submitted_ * kChunkBlocks;
  const size_t end = std::min(first + kChunkBlocks, blocks);
  if (first >= blocks || (end - first < kChunkBlocks && !all)) return false;
  const TableState& table = store_->table_state(table_);
  ENGRAM_RETURN_IF_ERROR(batch_.PrepareReads(table.file_id, table.file->geometry(), store_->read_buffers(), end));
  ++chunks_submitted_;
  return true;
}

Status GatherOperation::SubmitReadyChunks(const std::shared_ptr<GatherOperation>& self, bool all) {
  GatherOperation& st = *self;
  for (;;) {
    ENGRAM_ASSIGN_OR_RETURN(const bool prepared, st.PrepareNextChunk(all));
    if (!prepared) return Status::OK();
    SubmitChunk(self, st.chunks_submitted_ - 1);
  }
}

Status GatherOperation::PrepareStreamingReads(size_t ring_chunks) {
  const TableState& table = store_->table_state(table_);
  ENGRAM_RETURN_IF_ERROR(batch_.PrepareReads(table.file_id, table.file->geometry(), store_->read_buffers(),
                                             batch_.blocks.size(), ring_chunks * kChunkBlocks));
  stream_chunks_ = ring_chunks;
  staged_.resize(batch_.rows.size() * size_t(table.file->record_bytes()));
  result_.blocks_read = batch_.blocks.size();
  return Status::OK();
}

Status GatherOperation::PrepareChunkReads() {
  for (;;) {
    ENGRAM_ASSIGN_OR_RETURN(const bool prepared, PrepareNextChunk(/*all=*/true));
    if (!prepared) return Status::OK();
  }
}

void GatherOperation::SubmitPreparedReads(const std::shared_ptr<GatherOperation>& self) {
  GatherOperation& st = *self;
  if (st.streaming()) {
    SetLandings(self, st.chunks());  // before the first read: nothing can have landed
    for (size_t c = 0; c < st.stream_chunks_; ++c) SubmitChunk(self, c);
    return;
  }
  for (size_t c = 0; c < st.chunks_submitted_; ++c) SubmitChunk(self, c);
  SetLandings(self, st.chunks_submitted_);
}

void GatherOperation::SubmitChunk(const std::shared_ptr<GatherOperation>& self, size_t c) {
  // The engine holds `batch_.reads` and the buffer until the callback runs,
  // and the callback holds the state.
  GatherOperation& st = *self;
  const size_t first = c * kChunkBlocks;
  st.store_->table_state(st.table_).engine->SubmitBatch(
      std::span<io::BlockRead>(st.batch_.reads).subspan(first, std::min(kChunkBlocks, st.batch_.reads.size() - first)),
      [self, c = static_cast<uint32_t>(c)] { OnLanded(self, c); });
}

void GatherOperation::FailUnsubmittedBlocks(const Status& why) {
  result_.status = why;
  const size_t submitted_blocks = std::min(batch_.blocks.size(), chunks_submitted_ * kChunkBlocks);
  for (size_t b = submitted_blocks; b < batch_.blocks.size(); ++b) FailBlockRows(b);
  for (size_t c = chunks_submitted_; c < chunks(); ++c) checked_[c] = 1;
}

void GatherOperation::SetLandings(const std::shared_ptr<GatherOperation>& self, size_t n) {
  GatherOperation& st = *self;
  bool post;
  {
    MutexLock lock(&st.mu_);
    st.landings_ = n;
    st.landed_ = st.chunks_landed_ == n;
    // A streaming gather's Drain runs the disk phase after its last check.
    post = st.landed_ && !st.waiting_ && !st.streaming();
  }
  if (post) PostDiskPhase(self);
}

void GatherOperation::PostDiskPhase(const std::shared_ptr<GatherOperation>& self) {
  boost::asio::post(self->store_->completion_pool(), [self] {
    GatherOperation& st = *self;
    {
      MutexLock lock(&st.mu_);
      // A waiter arrived (it runs the disk phase), or one already took it.
      if (st.claimed_ || st.waiting_) return;
      st.claimed_ = true;
    }
    st.OnBlocksRead();
  });
}

void GatherOperation::Drain(const std::shared_ptr<GatherOperation>& self) {
  GatherOperation& st = *self;
  for (;;) {
    std::vector<uint32_t> landed;
    {
      MutexLock lock(&st.mu_);
      if (st.chunks_to_check_.empty()) {
        st.draining_ = false;
        return;
      }
      landed.swap(st.chunks_to_check_);
    }
    for (uint32_t c : landed) {
      st.CheckChunk(c);
      ++st.chunks_checked_;
      // Its buffer is free: the chunk that reads into it next.
      if (c + st.stream_chunks_ < st.chunks()) SubmitChunk(self, c + st.stream_chunks_);
    }
    st.OfferCheckedPrefix();
    if (st.chunks_checked_ == st.chunks()) {
      {
        MutexLock lock(&st.mu_);
        st.claimed_ = true;  // draining_ stays set: nothing lands any more
      }
      return st.OnBlocksRead();
    }
  }
}

void GatherOperation::OnLanded(const std::shared_ptr<GatherOperation>& self, uint32_t c) {
  GatherOperation& st = *self;
  {
    MutexLock lock(&st.mu_);
    ++st.chunks_landed_;
    st.landed_ = st.chunks_landed_ == st.landings_;
    if (st.streaming()) {
      st.chunks_to_check_.push_back(c);
      if (st.draining_) return;  // the running Drain takes it
      st.draining_ = true;
      lock.Unlock();
      boost::asio::post(st.store_->completion_pool(), [self] { Drain(self); });
      return;
    }
    // Queued for a waiter, present or yet to come, to check early.
    if (c != kWholeGather) st.chunks_to_check_.push_back(c);
    if (st.waiting_) {
      // The waiter checks the chunk now, and runs the disk phase at the end.
      st.cv_.SignalAll();
      return;
    }
    // Whoever takes the gather checks every chunk; while Start is still
    // submitting (landings unknown), Start hands it off at its end.
    if (!st.landed_) return;
  }
  PostDiskPhase(self);
}

void GatherOperation::CheckChunk(uint32_t c) {
  const size_t end_block = std::min(batch_.blocks.size(), (size_t(c) + 1) * kChunkBlocks);
  for (size_t b = size_t(c) * kChunkBlocks; b < end_block; ++b) CheckBlock(b);
  checked_[c] = 1;
}

void GatherOperation::CheckBlock(size_t b) {
  TableState& table = store_->table_state(table_);
  const uint32_t record = table.file->record_bytes();
  const TableGeometry& g = table.file->geometry();
  Status s = batch_.Check(b, table);
  if (!s.ok()) {
    // Nothing from this block is returned or cached.
    FailBlockRows(b);
    if (result_.status.ok()) result_.status = s;
    return;
  }
  result_.bytes_read += io::kBlockSize;
  block_state_[b] = BlockState::kVerified;
  const std::byte* block = batch_.Block(b).data();
  batch_.ForEachRowOf(b, [&](uint32_t k) {
    const std::byte* row = block + g.RowOffsetInBlock(batch_.rows[k]);
    CopyOut(batch_.row_ref[k], row, record);
    if (streaming()) std::memcpy(staged_.data() + size_t(k) * record, row, record);
  });
}

void GatherOperation::OfferCheckedPrefix() {
  const TableGeometry& g = store_->table_state(table_).file->geometry();
  const uint32_t record = store_->table_state(table_).file->record_bytes();
  // Per-thread scratch, as in Start.
  thread_local std::vector<uint64_t> ids;
  thread_local std::vector<const std::byte*> rows;
  ids.clear();
  rows.clear();
  const size_t n = batch_.rows.size();
  for (; offered_ < n; ++offered_) {
    const uint32_t b = batch_.row_block[offered_];
    if (block_state_[b] == BlockState::kUnchecked) break;
    if (block_state_[b] == BlockState::kFailed) continue;  // nothing from a failed block is cached
    const uint64_t row = batch_.rows[offered_];
    ids.push_back(row);
    // A streaming gather's block buffer may hold a later block by now.
    rows.push_back(streaming() ? staged_.data() + offered_ * record : batch_.Block(b).data() + g.RowOffsetInBlock(row));
  }
  Offer(ids, rows);
}

void GatherOperation::Offer(std::span<const uint64_t> ids, std::span<const std::byte* const> bytes) {
  if (ids.empty()) return;
  thread_local std::vector<InsertOutcome> outcomes;
  outcomes.resize(ids.size());
  store_->table_state(table_).cache->InsertBatch(ids, bytes, outcomes);
  for (InsertOutcome o : outcomes) {
    if (o == InsertOutcome::kRefusedLostAdmission || o == InsertOutcome::kRefusedAllPinned) {
      ++result_.refusals;
    } else {
      ++result_.inserts;
    }
  }
}

void GatherOperation::CopyOut(uint32_t d, const std::byte* bytes, uint32_t record) {
  std::memcpy(dst_.At(plan_.first_pos[d]), bytes, record);
  CopyToDuplicates(d, bytes, record);
}

void GatherOperation::CopyToDuplicates(uint32_t d, const std::byte* bytes, uint32_t record) {
  plan_.ForEachDuplicate(d, [&](uint32_t p) { std::memcpy(dst_.At(p), bytes, record); });
}

void GatherOperation::OnBlocksRead() {
  TableState& table = store_->table_state(table_);
  const uint32_t record = table.file->record_bytes();
  if (reference_) {
    result_.bytes_read += reference_->ForEachRow(table, [&](uint64_t, uint32_t d, const Status& s, const std::byte* rec) {
      if (s.ok()) {
        CopyOut(d, rec, record);
        verified_.emplace_back(d, rec);
        return;
      }
      table.counters.Add(table.counters.failed_rows, 1);
      if (result_.status.ok()) result_.status = s;
      AddFailedRow(d);
    });
  }
  for (uint32_t c = 0; c < chunks(); ++c) {
    if (!checked_[c]) CheckChunk(c);
  }
  // Verified rows offered to the cache by distinct index, in first-occurrence
  // order, the same order engram-replay offers them, so emulated and served
  // counts agree exactly. A waiter may have offered a prefix already.
  OfferCheckedPrefix();
  if (!verified_.empty()) {
    std::sort(verified_.begin(), verified_.end());
    thread_local std::vector<uint64_t> ids;
    thread_local std::vector<const std::byte*> rows;
    ids.clear();
    rows.clear();
    for (const auto& [d, bytes] : verified_) {
      ids.push_back(plan_.distinct[d]);
      rows.push_back(bytes);
    }
    Offer(ids, rows);
  }
  std::sort(result_.failed_positions.begin(), result_.failed_positions.end());
  // The rows are ready: one reading ends both the disk part and the wait.
  const uint64_t ready = ReadinessNanos();
  result_.disk_nanoseconds = ElapsedNanos(t1_, ready);
  batch_.buffers.Release();  // back to the pool now, not when the ticket dies
  if (reference_) reference_->blocks.buffers.Release();
  Finish(ready);
}

void GatherOperation::FailBlockRows(size_t b) {
  block_state_[b] = BlockState::kFailed;
  TableCounters& c = store_->table_state(table_).counters;
  batch_.ForEachRowOf(b, [&](uint32_t k) {
    c.Add(c.failed_rows, 1);
    AddFailedRow(batch_.row_ref[k]);
  });
}

void GatherOperation::AddFailedRow(uint32_t d) {
  result_.failed_positions.push_back(plan_.first_pos[d]);
  plan_.ForEachDuplicate(d, [&](uint32_t p) { result_.failed_positions.push_back(p); });
}

void GatherOperation::FinishWithoutReads() {
  std::sort(result_.failed_positions.begin(), result_.failed_positions.end());
  Finish();
}

void GatherOperation::FinishAlone(uint64_t now) {
  CountFinished(now);
  finished_alone_ = true;
}

void GatherOperation::CountFinished(uint64_t now) {
  TableState& table = store_->table_state(table_);
  // Its parts may have been timed on other threads, whose readings of the
  // clock can differ by a little (readiness_clock.h): the wait is at least
  // their sum, as GatherResult promises.
  result_.wait_nanoseconds =
      std::max(ElapsedNanos(t0_, now), result_.cache_nanoseconds + result_.disk_nanoseconds);
  TableCounters& c = table.counters;
  c.Add(c.gathers, 1);
  c.Add(c.rows_requested, result_.rows);
  if (!result_.status.ok()) c.Add(c.failed_gathers, 1);
  c.Add(c.readiness_wait_nanoseconds, result_.wait_nanoseconds);
  c.Add(c.readiness_wait_cache_nanoseconds, result_.cache_nanoseconds);
  // A remote table's reads are the cluster's round trips: named so.
  c.Add(table.remote ? c.readiness_wait_remote_nanoseconds : c.readiness_wait_disk_nanoseconds,
        result_.disk_nanoseconds);
}

void GatherOperation::Finish(uint64_t now) {
  CountFinished(now);
  if (done_) {
    // The callback form hands the result off; it must not block. Marking the
    // gather complete under mu_ afterwards orders this thread's use of the
    // state before its reuse (Acquire).
    auto cb = std::move(done_);
    cb(std::move(result_));
    MutexLock lock(&mu_);
    complete_ = true;
    return;
  }
  MutexLock lock(&mu_);
  complete_ = true;
  cv_.SignalAll();
}


// A gather's prepared reads as the stream its own thread runs: a block's
// read starts once its buffer is free (in a streaming gather, once the chunk
// that read into the same ring place before it has been checked), and each
// chunk is checked, and the cache offered the rows it completes, as soon as
// its last block lands.
class GatherOperation::CallerReads final : public io::ReadStream {
 public:
  explicit CallerReads(GatherOperation& st) : st_(st), landed_(st.chunks(), 0) {}

  io::BlockRead* NextRead() override {
    if (next_ == st_.batch_.reads.size()) return nullptr;
    const size_t c = next_ / kChunkBlocks;
    if (st_.streaming() && c >= st_.stream_chunks_ && !st_.checked_[c - st_.stream_chunks_]) return nullptr;
    return &st_.batch_.reads[next_++];
  }

  void Finished(io::BlockRead* read) override {
    // Each block is checked and its rows copied out as it lands, while the
    // device reads the rest: the check does not wait for the chunk's last
    // block. A one-chunk gather also offers the cache each prefix as it
    // completes; a larger one offers per chunk, since an InsertBatch call per
    // block costs more there than the overlap gains.
    const size_t b = static_cast<size_t>(read - st_.batch_.reads.data());
    const size_t c = b / kChunkBlocks;
    st_.CheckBlock(b);
    if (++landed_[c] < st_.ChunkBlocks(c)) {
      if (st_.chunks() == 1 && st_.batch_.row_block[st_.offered_] == b) st_.OfferCheckedPrefix();
      return;
    }
    st_.checked_[c] = 1;
    ++st_.chunks_checked_;
    st_.OfferCheckedPrefix();
  }

 private:
  GatherOperation& st_;
  size_t next_ = 0;              // reads handed out so far, in block order
  std::vector<uint32_t> landed_;  // landed_[c]: blocks of chunk c that have landed
};

GatherResult GatherOperation::WaitOnThisThread(const std::shared_ptr<GatherOperation>& self) {
  GatherOperation& st = *self;
  if (st.finished_alone_) return std::move(st.result_);
  if (st.reads_pending_) {
    st.reads_pending_ = false;
    CallerReads reads(st);
    if (st.store_->table_state(st.table_).engine->RunReadStream(reads)) {
      st.OnBlocksRead();  // every chunk is checked; fills the rest of the cache and finishes
    } else {
      SubmitPreparedReads(self);  // the engine cannot: its threads read them
    }
  }
  return st.Wait();
}

GatherResult GatherOperation::Wait() {
  MutexLock lock(&mu_);
  waiting_ = true;
  // Unless a pool thread has already taken the gather, this thread runs its
  // disk phase: it checks each chunk as it lands (chunks that landed before
  // it arrived are checked by OnBlocksRead), then, once all have landed,
  // fills the cache. The caller's thread does its own gather's
  // verify/copy/insert work, in parallel with others.
  for (;;) {
    // A streaming gather's chunks are checked by Drain: its waiter only waits.
    while (!(complete_ || (!streaming() && !claimed_ && (landed_ || !chunks_to_check_.empty())))) cv_.Wait(&mu_);
    if (complete_) break;
    if (landed_) {
      claimed_ = true;
      lock.Unlock();
      OnBlocksRead();  // ends in Finish(), which sets complete_
      lock.Lock();
      break;
    }
    std::vector<uint32_t> landed;
    landed.swap(chunks_to_check_);
    lock.Unlock();
    for (uint32_t c : landed) CheckChunk(c);
    OfferCheckedPrefix();
    lock.Lock();
  }
  return std::move(result_);
}

GatherResult GatherTicket::Wait() { return WaitForGather(std::move(*this)); }

GatherResult WaitForGather(GatherTicket ticket) {
  if (!ticket.valid()) {
    GatherResult r;
    r.status = Status::InvalidArgument("wait on an empty gather ticket");
    return r;
  }
  return GatherTicketAccess::Get(ticket).Wait();
}

}  // namespace engram
