// One gather in flight in a store (GatherOperation, what a private store's
// GatherTicket refers to): its cache phase, its reads and its disk phase.
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
//       lookups before its inserts, as in engram-replay. (A gather with more
//       distinct rows than the read buffer pool's early_blocks() submits
//       after its last lookup; if it misses more blocks than the pool's
//       stream_chunks() chunks hold, it streams them through that many
//       buffers and is checked on the completion pool: stream_chunks_.)
//   wait = t2 - t0 >= cache + disk.
// A gather waited on at once by the thread that starts it (Store::Gather,
// WaitOnThisThread) submits nothing during its lookups: after the last one,
// that thread reads the misses on its own io_uring ring
// (IoEngine::RunReadStream), checking each block as it lands and offering
// the cache each prefix as it completes (a one-chunk gather) or as a chunk's
// last block lands (a larger one), the same work in the same order, with no
// engine or pool thread in between. Where the engine cannot, the
// reads go through it as above.
// Nothing is copied out of, or inserted from, a block that failed its read or
// its checksum; the gather then fails with that block's status, and lists the
// positions of that block's rows in failed_positions (its other rows are
// written and cached as usual).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "engram/status.h"
#include "engram/store.h"
#include "src/store/block_batch.h"
#include "src/store/gather_plan.h"
#include "src/store/gather_ticket_access.h"
#include "src/store/read_buffer_pool.h"
#include "src/store/readiness_clock.h"
#include "src/store/row_placement.h"
#include "storage/io/io_stats.h"
#include "storage/mutex.h"
#include "storage/thread_annotations.h"

namespace engram {

class StoreImpl;
struct ReferenceBatch;

}  // namespace engram

namespace engram {

class GatherOperation final : public GatherTicket::State {
 public:
  // A state for a new gather on this thread. Each thread keeps its last state
  // and reuses it once nobody else holds it (its ticket is gone and no engine
  // or pool callback still refers to it), so the vectors keep their storage
  // and a thread's back-to-back hit-only gathers allocate nothing. States of
  // gathers larger than kRecycledRows are not kept.
  static std::shared_ptr<GatherOperation> Acquire();
  // Names the gather (not yet checked) and starts its clock. `done` empty:
  // the result goes to Wait().
  // `caller_reads`: the gather is waited for by WaitOnThisThread, on the
  // thread that starts it. `consumes_read_ahead`: see consumes_read_ahead_.
  void Init(StoreImpl* store, size_t table, std::span<const uint64_t> row_ids, const RowDestination& dst,
            std::function<void(GatherResult)> done, bool caller_reads = false, bool consumes_read_ahead = true);
  // Completes the gather with `why` without looking anything up (a bad
  // argument), counted against its table if it has one.
  void Reject(Status why);
  // Runs the cache phase and submits the reads (or completes at once).
  static void Start(const std::shared_ptr<GatherOperation>& self);
  // GatherTicket::Wait: waits for the gather (running its disk phase on this
  // thread if the blocks have landed and nobody has taken them) and returns
  // its result.
  GatherResult Wait() override EXCLUDES(mu_);
  // Wait() for a gather Init'ed with caller_reads, on the thread that started
  // it: that thread reads the misses on its own ring (IoEngine::RunReadStream)
  // and checks each block as it lands; where the engine cannot,
  // the reads go through it as usual.
  static GatherResult WaitOnThisThread(const std::shared_ptr<GatherOperation>& self) EXCLUDES(mu_);

 private:
  // A gather's reads go to the engine in chunks of this many blocks, so a
  // waiter can verify and copy the first chunks while the rest are read.
  // One of the read buffer pool's chunks: a streaming gather's chunk c reads
  // into its lease's chunk c mod stream_chunks_.
  static constexpr size_t kChunkBlocks = ReadBufferPool::kChunkBlocks;
  // Distinct rows the first lookup segment covers; each segment after it is
  // twice the one before, so a large gather's first reads go out after a few
  // microseconds of lookups and the lookups still run in a few long batches.
  static constexpr size_t kFirstSegmentRows = 128;
  static constexpr size_t kRecycledRows = size_t{1} << 16;
  // A recycled state keeps room for at most this many block reads, and at
  // most this many staged bytes.
  static constexpr size_t kKeptReads = 4096;
  static constexpr size_t kKeptStagedBytes = size_t{4} << 20;
  // Engine batches the disk phase waits for, while Start may still submit more.
  static constexpr size_t kLandingsUnknown = SIZE_MAX;
  // OnLanded's chunk for a landing that is not one of the chunks (a reference
  // table's reads, checked only by OnBlocksRead).
  static constexpr uint32_t kWholeGather = UINT32_MAX;

  // What Start's cache phase carries from one lookup segment to the next.
  struct CachePhase {
    // Per-thread scratch, used only until the reads are submitted or the
    // gather finishes (a callback that starts another gather on this thread
    // comes later). outs[d]: where distinct row d goes in dst. hit[d]: bit 0
    // set by the lookup (a hit), bit 1 by the read-ahead tracker (a
    // read-ahead pin of the row was released), so the hit path allocates
    // nothing more.
    std::vector<std::byte*>& outs;
    std::vector<uint8_t>& hit;
    // A reference table's misses are read in one batch after the lookups
    // (reference_reads.h); a block table's go into batch_ as they are found.
    bool reference;
    std::vector<std::pair<uint64_t, uint32_t>> reference_misses;
    size_t stream_chunks;  // the read buffer pool's stream_chunks()
    // Chunks go to the engine during the lookups unless the gather might
    // miss more blocks than its buffers hold: whether it streams is known
    // only after its last lookup.
    bool submit_early;
    bool batch_ready = false;  // batch_ is sized for this gather's misses (at the first one)
    Status no_buffer;          // why the chunks from chunks_submitted_ on have no read buffer
  };

  // The steps of Start, in order.
  // Deduplicates the row IDs.
  void PlanDistinctRows();
  // Points each distinct row at its place in dst and decides how the misses
  // are read.
  CachePhase BeginCachePhase();
  // Looks distinct rows [begin, begin + n) up, copies the hits out and files
  // the misses.
  void LookUpSegment(size_t begin, size_t n, CachePhase& phase);
  // Counts the misses and stops the cache clock.
  void EndCachePhase(const CachePhase& phase);
  // Reads a block table's missed blocks: the chunks not submitted during the
  // lookups, or all of them through a ring of buffers.
  static void SubmitBlockReads(const std::shared_ptr<GatherOperation>& self, CachePhase& phase);
  // Reads a reference table's missed rows (row, distinct index) in one batch.
  static void StartReferenceReads(const std::shared_ptr<GatherOperation>& self,
                                  std::vector<std::pair<uint64_t, uint32_t>> missed);

  // Leases room for the next chunk after the first chunks_submitted_ and
  // prepares its reads, if its blocks are all known (a full chunk; with
  // `all`, the last partial one too): whether there was one. Fails if no
  // read buffer could be had.
  Result<bool> PrepareNextChunk(bool all);
  // Prepares and submits every such chunk (PrepareNextChunk). Fails if no
  // read buffer could be had: the chunks from chunks_submitted_ on are then
  // not submitted.
  static Status SubmitReadyChunks(const std::shared_ptr<GatherOperation>& self, bool all);
  // Leases a ring of `ring_chunks` chunk buffers for more blocks than they
  // hold, and prepares every block's read into its place in the ring.
  Status PrepareStreamingReads(size_t ring_chunks);
  // Prepares every chunk's reads without submitting any (for a gather its
  // own thread reads), a chunk at a time, so that a pool out of memory part
  // way still leaves the chunks before it to read: those are
  // chunks_submitted_'s.
  Status PrepareChunkReads();
  // Submits prepared reads to the engine: the chunks_submitted_ first chunks,
  // or a streaming gather's first stream_chunks_ (Drain submits the rest).
  static void SubmitPreparedReads(const std::shared_ptr<GatherOperation>& self);
  // Submits the reads of chunk c.
  static void SubmitChunk(const std::shared_ptr<GatherOperation>& self, size_t c);
  // Records the blocks of the chunks from chunks_submitted_ on as failed
  // with `why` (no read buffer for them): none of their rows is read,
  // returned or cached.
  void FailUnsubmittedBlocks(const Status& why);
  // Publishes how many landings the disk phase waits for (landings_), and
  // hands the disk phase off if they have all happened already.
  static void SetLandings(const std::shared_ptr<GatherOperation>& self, size_t n) EXCLUDES(mu_);

  // The engine's completion of chunk c: only hands it off, to the waiter if
  // there is one, else (once every chunk has landed) to the completion pool.
  static void OnLanded(const std::shared_ptr<GatherOperation>& self, uint32_t c = kWholeGather) EXCLUDES(mu_);
  // Hands the disk phase to the completion pool, unless a waiter takes it.
  static void PostDiskPhase(const std::shared_ptr<GatherOperation>& self);
  // A streaming gather's checks, on the completion pool: checks the landed
  // chunks, reads the chunks that take their buffers, and runs the disk
  // phase after the last.
  static void Drain(const std::shared_ptr<GatherOperation>& self) EXCLUDES(mu_);
  // CheckBlock for each block of chunk c, then marks the chunk checked.
  void CheckChunk(uint32_t c);
  // Verifies block b, copies its rows to dst (and to staged_) and marks it
  // verified in block_state_, or marks it failed and records its rows'
  // positions as failed.
  void CheckBlock(size_t b);
  // Offers the cache the rows of the longest prefix of batch inputs whose
  // blocks are all checked, from offered_ on.
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
  // Marks batch block b failed and records every row of it as failed
  // (counted and listed).
  void FailBlockRows(size_t b);
  // Finish() for a gather that reads nothing more: its failed positions in order.
  void FinishWithoutReads();
  // Publishes the result: counters, then the callback or the waiter. `now`
  // is the time the rows were ready.
  void Finish(uint64_t now = ReadinessNanos()) EXCLUDES(mu_);
  // Finish() for a gather that no other thread has seen (waited for by the
  // thread that started it, with nothing to read): the counters, and the
  // result left for WaitOnThisThread, with no lock and no signal.
  void FinishAlone(uint64_t now);
  // The table's counters for the finished gather, and its wait time.
  void CountFinished(uint64_t now);
  // Readies the state for the next gather: empties every field but the plan
  // (which Build rewrites whole), keeping the vectors' storage.
  void Reset() EXCLUDES(mu_);

  size_t chunks() const { return (batch_.blocks.size() + kChunkBlocks - 1) / kChunkBlocks; }
  size_t ChunkBlocks(size_t c) const { return std::min(kChunkBlocks, batch_.blocks.size() - c * kChunkBlocks); }
  bool streaming() const { return stream_chunks_ != 0; }

  // The gather, as Init names it.
  StoreImpl* store_ = nullptr;
  size_t table_ = 0;
  std::span<const uint64_t> row_ids_;
  RowPlacement dst_;  // where each position's row goes
  std::function<void(GatherResult)> done_;  // callback form; empty for Wait()
  bool caller_reads_ = false;  // WaitOnThisThread reads the misses (Init)
  // Its rows consume the store's own read-ahead pins (Init). The node
  // service's gathers do not: it consumes each client's pins itself.
  bool consumes_read_ahead_ = true;
  bool reads_pending_ = false;  // its reads are prepared and not yet started
  bool finished_alone_ = false;  // FinishAlone: the result waits for WaitOnThisThread
  bool missed_ = false;          // the gather had misses: its read state needs emptying (Reset)
  class CallerReads;            // the reads as a stream for RunReadStream

  GatherPlan plan_;
  BlockBatch batch_;
  std::shared_ptr<ReferenceBatch> reference_;  // a reference table's reads (reference_reads.h)
  GatherResult result_;
  uint64_t t0_ = 0, t1_ = 0;  // ReadinessNanos() at Init and at the end of the cache phase
  // The disk phase fills the cache in the gather's order (the order of the
  // misses, ascending distinct index), as engram-replay does: the rows of
  // batch inputs [0, offered_) have been offered (or skipped: their block
  // failed). A prefix is offered once all its blocks are checked.
  size_t offered_ = 0;
  enum class BlockState : uint8_t { kUnchecked, kVerified, kFailed };
  std::vector<BlockState> block_state_;  // block_state_[b]: block b's check so far
  // A reference table's verified rows: (distinct index, assembled record).
  std::vector<std::pair<uint32_t, const std::byte*>> verified_;

  // A gather with more distinct rows than the read buffer pool's
  // early_blocks() that misses more blocks than its stream_chunks() chunks
  // hold reads through that many chunk buffers, so it never allocates (or
  // zeroes and faults in) buffers beyond the pool: chunk c is read once chunk
  // c - stream_chunks_ has been checked and its rows copied out, to dst and
  // to staged_, from which the cache is filled.
  // Since later reads wait for the checks, its chunks are checked on the
  // completion pool as they land, one task at a time (Drain), and a waiter
  // only waits.
  size_t stream_chunks_ = 0;       // 0: not streaming
  size_t chunks_checked_ = 0;      // by Drain
  std::vector<std::byte> staged_;  // staged_[i * record]: verified row batch_.rows[i]

  // Chunks handed to the engine so far (by Start, before landings_ is set),
  // or, for a gather its own thread reads, whose reads are prepared for it.
  size_t chunks_submitted_ = 0;
  // checked_[c]: chunk c was verified and copied early by the waiter, or has
  // nothing to check (Start set it for a chunk it could not submit). Written
  // by Start before it publishes landings_, then by the waiter only; read by
  // whoever runs OnBlocksRead, which is then the waiter too: a pool thread
  // never claims a gather that has a waiter.
  std::vector<uint8_t> checked_;

  // The hand-offs between Start, the engine's completions, the completion
  // pool and a waiter. The disk phase runs exactly once, on whichever claims
  // it first: a thread in Wait() or a completion-pool thread.
  Mutex mu_;
  CondVar cv_;
  bool complete_ GUARDED_BY(mu_) = false;
  bool waiting_ GUARDED_BY(mu_) = false;   // a thread is in Wait()
  bool landed_ GUARDED_BY(mu_) = false;    // every block read has finished
  bool claimed_ GUARDED_BY(mu_) = false;   // someone is running (or ran) OnBlocksRead
  bool draining_ GUARDED_BY(mu_) = false;  // a Drain task is running
  size_t chunks_landed_ GUARDED_BY(mu_) = 0;               // chunks whose reads have all finished
  std::vector<uint32_t> chunks_to_check_ GUARDED_BY(mu_);  // landed, not yet taken by a waiter or Drain
  // Engine batches whose completion the disk phase waits for: the chunks
  // submitted, or for a reference table the one batch of its reads
  // (reference_reads.h). kLandingsUnknown until SetLandings.
  size_t landings_ GUARDED_BY(mu_) = kLandingsUnknown;
};

// GatherTicket::Wait (GatherTicket::State::Wait).
GatherResult WaitForGather(GatherTicket ticket);
}  // namespace engram
