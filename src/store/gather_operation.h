// One gather in flight (GatherTicket::State) and one read-ahead in flight.
//
// Timeline of a gather, which is also how its readiness wait is split:
//   t0  Start: validate, deduplicate, look every distinct row up in the cache,
//       copy hits (and their duplicates) to dst            -> cache time
//       The rows are looked up in segments of growing size; after each, the
//       missed rows' 4 KiB blocks (rows of a block coalesced) that fill a
//       chunk of kChunkBlocks blocks go to the engine as one batch, so the
//       device is busy while the rest of the gather is looked up.
//   t1  the last lookup; the last, partial chunk is submitted
//   t2  every block landed; each is verified and its missed rows copied to
//       dst, then offered to the cache                      -> disk time
//       (this disk phase runs on the thread in Wait() if there is one, else
//       on the store's completion pool -- never on the I/O engine's
//       completion thread, which only hands the landed chunks off). A thread
//       in Wait() verifies and copies each chunk as it lands, while the later
//       chunks are still being read, and offers the cache each prefix of the
//       misses (in the gather's order, as engram-replay offers them) whose
//       blocks are all checked. Blocks are read in the order their first
//       missed row appears, so the prefix grows as the reads land. Nothing is
//       offered before the last lookup, so the cache sees all of a gather's
//       lookups before its inserts, as in engram-replay. (A gather that may
//       miss more blocks than its read buffers hold submits after its last
//       lookup, and if it does, streams the blocks through the buffers and is
//       checked on the completion pool: stream_chunks.)
//   wait = t2 - t0 >= cache + disk.
// Nothing is copied out of, or inserted from, a block that failed its read or
// its checksum; the gather then fails with that block's status, and lists the
// positions of that block's rows in failed_positions (its other rows are
// written and cached as usual).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "engram/store.h"
#include "src/store/first_appearance_index.h"
#include "src/store/gather_plan.h"
#include "src/store/gather_ticket_access.h"
#include "src/store/read_buffer_pool.h"
#include "src/store/table_state.h"
#include "storage/io/aligned_buffer.h"
#include "storage/io/io_engine.h"
#include "storage/io/io_stats.h"

namespace engram {

class StoreImpl;
struct TableState;
struct ReferenceBatch;

// Blocks to read for a set of rows, grouped by block. Blocks are in the
// order their first row appears in the input, so that a gather's reads land
// roughly in the order its misses are offered to the cache, and the cache
// can be filled while the later reads are still in flight. Rows can be added
// after the first blocks' reads were submitted (a gather submits each chunk
// of blocks as soon as its lookups have found that many): a later row of a
// block already being read joins that block's read.
struct BlockBatch {
  static constexpr uint32_t kEnd = UINT32_MAX;

  std::vector<uint64_t> blocks;     // distinct block indexes, by first appearance
  std::vector<uint64_t> rows;       // rows[k]: the k-th row added
  std::vector<uint32_t> row_ref;    // row_ref[k]: the caller's reference for it
  std::vector<uint32_t> row_block;  // row_block[k]: its block's index in blocks
  ReadBufferPool::Lease buffers;    // room for the blocks of `reads`
  // reads[b]: block b's read, for the blocks whose reads are prepared. Its
  // capacity is reserved by Reset and never grows: the engine holds pointers
  // into it while later reads are prepared.
  std::vector<io::BlockRead> reads;

  // Empties the batch for at most max_rows rows.
  void Reset(size_t max_rows);
  // Empties it, keeping the storage, for a Reset before its next use.
  void Clear();
  // Adds row `row` (with `ref`) as the next row; at most max_rows in all.
  void Add(uint64_t row, uint32_t ref, const TableGeometry& g);
  // Calls fn(k) for each row k of block b, in the order they were added.
  template <typename Fn>
  void ForEachRowOf(size_t b, Fn&& fn) const {
    for (uint32_t k = block_first_[b]; k != kEnd; k = next_in_block_[k]) fn(k);
  }
  // Prepares the reads of blocks [reads.size(), end), extending the lease;
  // or, if ring_blocks < end (then no read may be prepared yet), leases room
  // for ring_blocks blocks only: a ring the reads go through (see Lease).
  Status PrepareReads(io::FileId file, const TableGeometry& g, ReadBufferPool& pool, size_t end,
                      size_t ring_blocks = SIZE_MAX);
  // Reset, then adds rows[i] (with refs[i]) and prepares every block's read,
  // leasing buffers for at most `max_blocks` of them (a ring, see Lease).
  Status Build(const TableState& table, io::FileId file, ReadBufferPool& pool,
               std::span<const std::pair<uint64_t, uint32_t>> rows_and_refs, size_t max_blocks = SIZE_MAX);
  std::span<const std::byte> Block(size_t b) const { return {buffers.Block(b), io::kBlockSize}; }
  // Checks the read status and checksum of block b, counting failures.
  Status Check(size_t b, TableState& table) const;

 private:
  FirstAppearanceIndex index_;             // block -> its index in blocks
  std::vector<uint32_t> block_first_;      // block_first_[b]: its first row
  std::vector<uint32_t> block_last_;       // block_last_[b]: its last row so far
  std::vector<uint32_t> next_in_block_;    // next_in_block_[k]: the next row of k's block, or kEnd
  std::vector<uint64_t> block_keys_;       // the index's keys (blocks, with room for max_rows)
};

}  // namespace engram

struct engram::GatherTicket::State {
  StoreImpl* store = nullptr;
  size_t table = 0;
  std::span<const uint64_t> row_ids;
  std::byte* dst = nullptr;
  size_t stride = 0;

  // A gather's reads go to the engine in chunks of this many blocks, so a
  // waiter can verify and copy the first chunks while the rest are read.
  // One of the read buffer pool's chunks: a streaming gather's chunk c reads
  // into its lease's chunk c mod stream_chunks.
  static constexpr size_t kChunkBlocks = ReadBufferPool::kChunkBlocks;

  GatherPlan plan;
  BlockBatch batch;
  std::shared_ptr<ReferenceBatch> reference;  // a reference table's reads (reference_reads.h)
  GatherResult result;
  uint64_t t0 = 0, t1 = 0;
  // The disk phase fills the cache in the gather's order (the order of
  // `missed`, ascending distinct index), as engram-replay does: the rows of
  // batch inputs [0, offered) have been offered (or skipped: their block
  // failed). A prefix is offered as soon as all its blocks are checked.
  size_t offered = 0;
  std::vector<uint8_t> block_ok;  // block_ok[b]: block b was read and verified
  // A reference table's verified rows: (distinct index, assembled record).
  std::vector<std::pair<uint32_t, const std::byte*>> verified;

  // A gather that misses more blocks than the read buffer pool's
  // stream_chunks() chunks hold reads through that many chunk buffers, so it
  // never allocates (or zeroes and faults in) buffers beyond the pool: chunk
  // c is read once chunk c - stream_chunks() has been checked and its rows
  // copied out, to dst and to `staged`, from which the cache is filled.
  // Since later reads wait for the checks, its chunks are checked on the
  // completion pool as they land, one task at a time (Drain), and a waiter
  // only waits.
  size_t stream_chunks = 0;       // 0: not streaming
  bool draining = false;          // a Drain task is running (guarded by mu)
  size_t chunks_checked = 0;      // by Drain
  std::vector<std::byte> staged;  // staged[i * record]: verified row batch.rows[i]
  static constexpr size_t kKeptStagedBytes = size_t{4} << 20;  // a recycled state keeps at most this
  bool streaming() const { return stream_chunks != 0; }

  std::function<void(GatherResult)> done;  // callback form; empty for Wait()
  std::mutex mu;
  std::condition_variable cv;
  bool complete = false;
  // The disk phase runs exactly once, on whichever claims it first: a thread
  // in Wait() or a completion-pool thread (guarded by mu).
  bool waiting = false;  // a thread is in Wait()
  bool landed = false;   // every block read has finished
  bool claimed = false;  // someone is running (or ran) OnBlocksRead
  size_t chunks_landed = 0;                 // chunks whose reads have all finished
  std::vector<uint32_t> chunks_to_check;    // landed, not yet taken by a waiter
  // checked[c]: chunk c was verified and copied early by the waiter, or has
  // nothing to check (Start set it for a chunk it could not submit). Written
  // by Start before it publishes `landings`, then by the waiter only; read by
  // whoever runs OnBlocksRead, which is then the waiter too: a pool thread
  // never claims a gather that has a waiter.
  std::vector<uint8_t> checked;

  size_t chunks() const { return (batch.blocks.size() + kChunkBlocks - 1) / kChunkBlocks; }
  // Chunks handed to the engine so far (by Start, before `landings` is set).
  size_t chunks_submitted = 0;
  // Engine batches whose completion the disk phase waits for: the chunks
  // submitted, or for a reference table the one batch of its reads
  // (reference_reads.h). kLandingsUnknown while Start may still submit more
  // (guarded by mu; set by SetLandings).
  static constexpr size_t kLandingsUnknown = SIZE_MAX;
  size_t landings = kLandingsUnknown;
  // OnLanded's chunk for a landing that is not one of the chunks (a reference
  // table's reads, checked only by OnBlocksRead).
  static constexpr uint32_t kWholeGather = UINT32_MAX;
  // Distinct rows the first lookup segment covers; each segment after it is
  // twice the one before, so a large gather's first reads go out after a few
  // microseconds of lookups and the lookups still run in a few long batches.
  static constexpr size_t kFirstSegmentRows = 128;
  // A state for a new gather on this thread. Each thread keeps its last state
  // and reuses it once nobody else holds it (its ticket is gone and no engine
  // or pool callback still refers to it), so the vectors keep their storage
  // and a thread's back-to-back hit-only gathers allocate nothing. States of
  // gathers larger than kRecycledRows are not kept.
  static std::shared_ptr<State> Acquire();
  static constexpr size_t kRecycledRows = size_t{1} << 16;
  // Runs the cache phase and submits the reads (or completes at once).
  static void Start(const std::shared_ptr<State>& self);
  // The engine's completion of chunk c: only hands it off, to the waiter if
  // there is one, else (once every chunk has landed) to the completion pool.
  static void OnLanded(const std::shared_ptr<State>& self, uint32_t c = kWholeGather);
  // Submits the reads of chunk c.
  static void SubmitChunk(const std::shared_ptr<State>& self, size_t c);
  // Prepares and submits the chunks after the first chunks_submitted whose
  // blocks are all known (full ones; with `all`, the last partial one too).
  // Fails if no read buffer could be had: the chunks from chunks_submitted on
  // are then not submitted.
  static Status SubmitReadyChunks(const std::shared_ptr<State>& self, bool all);
  // Hands the disk phase to the completion pool, unless a waiter takes it.
  static void PostDiskPhase(const std::shared_ptr<State>& self);
  // Publishes how many landings the disk phase waits for (`landings`), and
  // hands the disk phase off if they have all happened already.
  static void SetLandings(const std::shared_ptr<State>& self, size_t n);
  // A recycled state keeps room for at most this many block reads.
  static constexpr size_t kKeptReads = 4096;
  // A streaming gather's checks, on the completion pool: checks the landed
  // chunks, reads the chunks that take their buffers, and runs the disk
  // phase after the last.
  static void Drain(const std::shared_ptr<State>& self);
  // Verifies the blocks of chunk c, copies their rows to dst (and to staged)
  // and marks them in block_ok (or records their positions as failed).
  void CheckChunk(uint32_t c);
  // Offers the cache the rows of the longest prefix of batch inputs whose
  // blocks are all checked, from `offered` on.
  void OfferCheckedPrefix();
  // Inserts rows (ids[i], bytes[i]) in that order, counting the outcomes.
  void Offer(std::span<const uint64_t> ids, std::span<const std::byte* const> bytes);
  // Copies the row of distinct index d to each of its positions in dst.
  void CopyOut(uint32_t d, const std::byte* bytes, uint32_t record);
  // Copies it to the later positions holding it (the first already has it).
  void CopyToDuplicates(uint32_t d, const std::byte* bytes, uint32_t record);
  // The disk phase: check the chunks not checked yet, fill the cache in the
  // gather's order, Finish().
  void OnBlocksRead();
  // Records distinct row d (every position holding it) as not written.
  void AddFailedRow(uint32_t d);
  // Records every row of batch block b as failed (counted and listed).
  void FailBlockRows(size_t b);
  // Publishes the result: counters, then the callback or the waiter. `now`
  // is the time the rows were ready.
  void Finish(uint64_t now = io::MonotonicNanos());
  // Readies the state for the next gather: empties every field but the plan
  // (which Build rewrites whole), keeping the vectors' storage.
  void Reset();
};

namespace engram {
// GatherTicket::Wait and Store::Wait: waits for the ticket's gather (running
// its disk phase on this thread if the blocks have landed and nobody has
// taken them) and returns its result.
GatherResult WaitForGather(GatherTicket ticket);

// Reads the blocks of `rows` (distinct, in range; resident ones too) and
// inserts the rows pinned, except those a gather served while the reads were
// in flight. Completes asynchronously (the inserts run on the store's
// completion pool); then calls the table's ReadAheadDone.
void StartReadAhead(StoreImpl* store, size_t table, std::vector<uint64_t> rows);

// The two steps every kind of read-ahead shares. BeginReadAhead registers
// the read-ahead of `rows` with the table and fills `refs` with the (row, 0)
// pairs its block batch is built from. EndReadAheadWithoutReads ends a
// read-ahead that will read nothing -- its batch failed to build (`built`:
// its rows then land as failed) or needs no block -- and says whether it did.
TableState::ReadAheadTicket BeginReadAhead(TableState& table, std::span<const uint64_t> rows,
                                           std::vector<std::pair<uint64_t, uint32_t>>& refs);
bool EndReadAheadWithoutReads(TableState& table, const TableState::ReadAheadTicket& ticket,
                              std::span<const uint64_t> rows, const Status& built, bool no_blocks);
}  // namespace engram
