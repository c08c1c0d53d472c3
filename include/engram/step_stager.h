// StepStager: one call per forward step of a serving runtime.
//
// A model has several Engram layers, one table each. Per step the runtime
// needs, for every token of the step and every layer, that layer's
// rows_per_token() rows (24 for V4.1). StepStager hashes the step's tokens
// with each table's own hash layout (the "hash_layout" of its metadata),
// deduplicates the row IDs across the step and gathers every layer's rows
// into one caller buffer laid out
//
//   out[token][layer][slot][record_bytes]     slot = order index * heads + head
//
// A rank table (metadata "rank_shard", written by engram-convert --ranks)
// holds only some slots (its "slots", ascending); the stager then hashes only
// those, rows_per_token() is their count, and the slot axis of `out` runs
// over the rank's slots in that order: out[token][layer][j] is slot
// slots[j]. Gathering every rank's `out` rebuilds the full step as
//
//   full[:, :, s] = part[slot_to_rank[s]][:, :, slot_index_in_rank[s]]
//
// (the manifest's maps; for the strided assignment slot_to_rank[s] = s % R
// and slot_index_in_rank[s] = s / R).
//
// Row IDs in: a runtime that hashes on the GPU (a kernel writing the step's
// [tokens, layers, slots] row IDs) stages the step with GatherStep or
// StartGatherStep instead, into the same `out`. A rank's IDs are its own
// table's (the rank's slots only, numbered as its hasher numbers them).
//
// Each layer of a step is one gather: the layer's row IDs, [token][slot] as
// the hasher writes them, go to the store with a destination of groups of a
// token's slots (RowDestination), straight into `out`. The gather looks each
// distinct row of the layer up once and writes each row where it goes, with
// no copy in between. A node client sends one message per layer (none when
// every row is a hit).
//
// Per-layer readiness: a runtime stages the whole step at its start and runs
// layer k as soon as layer k's rows are in `out`. Every form gathers the
// layers one after another in table order, so layer 0's reads never wait
// behind a later layer's. Start, StartStage and StartGatherStep start layer
// k+1's gather when layer k is ready and return a StageTicket that answers
// Ready(k) and WaitLayer(k) for each layer on its own; Stage and GatherStep
// gather every layer on the calling thread, which reads its own misses as
// Store::Gather does.
//
// Completion words (StepCompletion): a step may be given an array of uint32
// words, one per layer, that the caller owns (say, in host memory a GPU
// stream waits on). Once layer k's rows are all in `out` (and after
// StepCompletion::layer_done, which may dequantize them elsewhere), the
// stager stores the step's sequence number into word k with release
// ordering; a layer that failed gets the sequence number with its high bit
// (kStepWordFailed) set. A reader that loads word k with acquire ordering
// and sees the sequence number sees every row of layer k. Sequence numbers
// run 1..kMaxStepSequence. CUDA's CU_STREAM_WAIT_VALUE_GEQ compares
// cyclically ((int32_t)(word - value) >= 0), so a failed layer's word never
// satisfies a stream's wait for its sequence number: the stream stays
// blocked until the host, told of the failure, deals with it and stores the
// sequence number itself.
//
// Thread safety: a StepStager is immutable after Create; any number of
// threads may stage through it at once. The Store must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "engram/hasher.h"
#include "engram/status.h"
#include "engram/store.h"

namespace engram {

// One layer's part of a step's staging.
struct StageLayerResult {
  // OK: every row of this layer is in out. Otherwise the first failure of
  // this layer's gathers (or of the whole step, e.g. a bad token).
  Status status;
  uint64_t rows = 0;  // tokens * rows_per_token
  uint64_t distinct_rows = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t refusals = 0;
  uint64_t blocks_read = 0;
  uint64_t bytes_read = 0;
  // Wall time from the start of the stage (hashing included) until this
  // layer's rows were all in out: what a runtime that issued the step and
  // waited for this layer at once would be exposed to.
  uint64_t wait_nanoseconds = 0;
  uint64_t cache_nanoseconds = 0;
  uint64_t disk_nanoseconds = 0;
};

struct StageResult {
  // OK: every row of out is written. Otherwise why staging failed (a bad
  // token fails before any gather starts and writes nothing).
  Status status;
  uint64_t tokens = 0;
  uint64_t rows = 0;           // row IDs staged: tokens * layers * rows_per_token
  uint64_t distinct_rows = 0;  // after deduplication (summed over layers)
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t refusals = 0;
  uint64_t blocks_read = 0;
  uint64_t bytes_read = 0;
  uint64_t hash_nanoseconds = 0;  // hashing every layer
  // Wall time from the start of the call until every row was in `out`
  // (hashing included), and the gathers' cache and disk parts summed over
  // the step's gathers (they overlap, so the sums may exceed the wall time).
  uint64_t wait_nanoseconds = 0;
  uint64_t cache_nanoseconds = 0;
  uint64_t disk_nanoseconds = 0;
  // Per layer, in the stager's table order (each with the step's failure if
  // hashing failed).
  std::vector<StageLayerResult> layers;
};

// A step's completion words and what runs as each layer lands (see the
// header comment). Default: neither.
inline constexpr uint32_t kStepWordFailed = 0x80000000u;
inline constexpr uint32_t kMaxStepSequence = 0x7fffffffu;

struct StepCompletion {
  // One word per layer of the stager, or empty for none. They must stay
  // valid until the step's last layer is ready.
  std::span<uint32_t> words;
  // What is stored into each word: 1..kMaxStepSequence.
  uint32_t sequence = 0;
  // Runs once for each layer of the step (a failed one too), on the thread
  // that finished the layer, after its rows are in `out` and before its word
  // is stored and its readiness told: e.g. to dequantize the layer into
  // another buffer. It must return promptly (the next layer's start may
  // wait for it) and must not stage.
  std::function<void(size_t layer, const StageLayerResult& result)> layer_done;
};

class StepStager;

// A started step: what StepStager::Start returns. Move-only. Every layer can
// be asked about on its own, from any thread; Wait() ends the ticket.
// Destroying a ticket that was not waited for blocks until every gather of
// the step has finished, so `out` may be freed right after.
class StageTicket {
 public:
  StageTicket() = default;
  StageTicket(StageTicket&&) noexcept = default;
  StageTicket& operator=(StageTicket&& other) noexcept;
  StageTicket(const StageTicket&) = delete;
  StageTicket& operator=(const StageTicket&) = delete;
  ~StageTicket();

  // False for a default-constructed, moved-from or waited-for ticket.
  bool valid() const { return state_ != nullptr; }
  size_t layers() const;

  // Whether layer's rows are all in out (or its gathers failed); never
  // blocks. InvalidArgument for a layer out of range or an invalid ticket.
  Result<bool> Ready(size_t layer) const;
  // Blocks until layer's gathers have finished and returns its result; any
  // thread, any number of times, until Wait(). A layer out of range or an
  // invalid ticket gives InvalidArgument at once.
  StageLayerResult WaitLayer(size_t layer) const;
  // Waits for every layer and returns the step's result (with its per-layer
  // results), consuming the ticket. An invalid ticket gives InvalidArgument.
  StageResult Wait();

 private:
  struct State;
  friend class StepStager;
  explicit StageTicket(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

class StepStager {
 public:
  // One layer per entry of `tables` (store table indexes, in output order).
  // Each table's metadata must hold a hash_layout; all tables must share
  // record_bytes and rows_per_token, and hold the same slots (every slot, or
  // one rank_shard slot list). token_map null = identity mode (raw token IDs
  // hashed as compressed IDs).
  static Result<std::unique_ptr<StepStager>> Create(Store& store, std::vector<size_t> tables,
                                                    std::shared_ptr<const TokenMap> token_map);
  // Waits until every step it started has started all its layers' gathers.
  ~StepStager();

  size_t layers() const { return tables_.size(); }
  const std::vector<size_t>& tables() const { return tables_; }
  uint32_t rows_per_token() const { return rows_per_token_; }
  uint32_t record_bytes() const { return record_bytes_; }
  // Tokens of history that affect a step's rows (max order - 1 over layers).
  uint32_t history_tokens() const;
  const NgramHasher& hasher(size_t layer) const { return hashers_[layer]; }
  // Bytes `out` must hold for a step of `tokens` tokens.
  size_t OutputBytes(size_t tokens) const { return tokens * layers() * rows_per_token_ * record_bytes_; }

  // Hashes and gathers on the calling thread (which reads its own misses);
  // returns when every row is in out (OutputBytes(tokens) bytes). `history`
  // is the request's tokens before `tokens` (only the last history_tokens()
  // matter), so n-grams reach back across steps. Completion words of the
  // wrong count or a sequence number out of range are InvalidArgument, and
  // then nothing is written, words included.
  StageResult Stage(std::span<const uint32_t> history, std::span<const uint32_t> tokens, std::byte* out,
                    const StepCompletion& completion = {}) const;

  // The step's row IDs in, as a GPU hash kernel writes them: `ids` is
  // [tokens][layers][rows_per_token()] (each layer's IDs index its own
  // table: a rank's, the rank's table); `out` and the rest as for Stage.
  // InvalidArgument when ids.size() is not a whole number of tokens,
  // OutOfRange naming the first ID past its table: both before anything is
  // gathered.
  StageResult GatherStep(std::span<const uint64_t> ids, std::byte* out, const StepCompletion& completion = {}) const;
  // OK, or why `completion` is refused for this stager's steps: words not
  // one per layer, or a sequence number outside 1..kMaxStepSequence.
  Status CheckCompletion(const StepCompletion& completion) const;
  // OK, or why `ids` are not a step's [tokens][layers][slots] row IDs of
  // these tables (what GatherStep refuses); allocates nothing unless it
  // refuses them.
  Status CheckGatherStepIds(std::span<const uint64_t> ids) const;
  // GatherStep started as Start starts a stage: layer by layer, with a
  // ticket answering each layer's readiness (and `done`, if given, as for
  // Start). The IDs are copied: only out and the completion words must stay
  // valid until the ticket is waited for or destroyed.
  StageTicket StartGatherStep(std::span<const uint64_t> ids, std::byte* out,
                              std::function<void(StageResult)> done = nullptr, StepCompletion completion = {}) const;

  // Hashes on the calling thread, starts layer 0's gathers and returns the
  // step's ticket; each later layer's gathers start once the layer before it
  // is ready (on the stager's own starter thread), so every layer has the
  // device and the completion threads to itself and layer k is ready after
  // about layers 0..k's share of the step. out must stay valid until
  // the ticket is waited for or destroyed; history and tokens need not. A
  // bad token or argument gives a ticket whose every layer has failed.
  // `done`, if given, also runs once with the step's result when its last
  // layer is ready, under StartStage's rules (for an adapter that signals
  // the whole step elsewhere, e.g. an event loop).
  StageTicket Start(std::span<const uint32_t> history, std::span<const uint32_t> tokens, std::byte* out,
                    std::function<void(StageResult)> done = nullptr, StepCompletion completion = {}) const;

  // For adapters: hashes on the calling thread, starts the gathers and returns; `done` runs
  // once with the result on a store completion thread (or on the calling
  // thread, if everything completed at once or hashing failed). out must stay
  // valid until then; history and tokens need not.
  void StartStage(std::span<const uint32_t> history, std::span<const uint32_t> tokens, std::byte* out,
                  std::function<void(StageResult)> done, StepCompletion completion = {}) const;

 private:
  struct Plan;  // a started step's row IDs
  struct LayerStarter;  // the thread that starts a step's later layers
  StepStager(Store& store, std::vector<size_t> tables, std::vector<NgramHasher> hashers, uint32_t rows_per_token,
             uint32_t record_bytes)
      : store_(store),
        tables_(std::move(tables)),
        hashers_(std::move(hashers)),
        rows_per_token_(rows_per_token),
        record_bytes_(record_bytes) {
    for (size_t t : tables_) table_rows_.push_back(store_.row_count(t));
  }

  // Where layer `layer` of a step's rows go in out.
  RowDestination LayerDestination(std::byte* out, size_t layer) const;
  // OK, or why a step of `tokens` tokens into out with `completion` is refused.
  Status CheckStep(size_t tokens, const std::byte* out, const StepCompletion& completion) const;
  // Hashes every layer of the step into ids, [layer][token][slot].
  Status HashLayers(std::span<const uint32_t> history, std::span<const uint32_t> tokens,
                    std::vector<uint64_t>& ids) const;
  // [token][layer][slot] IDs into ids, [layer][token][slot].
  void SplitByLayer(std::span<const uint64_t> step_ids, std::vector<uint64_t>& ids) const;
  // A started step's plan, hashed or from the caller's IDs, or why the step
  // is refused.
  Result<std::shared_ptr<Plan>> PlanStage(std::span<const uint32_t> history, std::span<const uint32_t> tokens,
                                          std::byte* out, const StepCompletion& completion) const;
  Result<std::shared_ptr<Plan>> PlanGatherStep(std::span<const uint64_t> ids, std::byte* out,
                                               const StepCompletion& completion) const;
  // Stage and GatherStep after their checks: gathers each layer of `ids`
  // ([layer][token][slot]) in turn on this thread.
  StageResult GatherLayers(std::span<const uint64_t> ids, std::byte* out, const StepCompletion& completion,
                           StageResult step, uint64_t start) const;
  // A step that failed before its gathers: every layer failed with `why`
  // (and, when the words can tell, told so).
  StageResult FailedStep(Status why, size_t tokens, const StepCompletion& completion) const;
  // Each layer's result before its gather: rows, and the step's status.
  std::vector<StageLayerResult> NewLayerResults(const StageResult& step) const;
  // Start, StartStage and StartGatherStep after their checks: layer 0's
  // gather, with a callback into the returned state.
  std::shared_ptr<StageTicket::State> Launch(Result<std::shared_ptr<Plan>> plan, size_t tokens,
                                             std::function<void(StageResult)> done,
                                             StepCompletion completion) const;
  // Starts `layer`'s gather of a launched step.
  void StartLayer(const std::shared_ptr<Plan>& plan, const std::shared_ptr<StageTicket::State>& state,
                  size_t layer) const;
  LayerStarter& starter() const;

  mutable std::once_flag starter_once_;
  // Made by the first step of more than one layer (a shared_ptr: the type is
  // complete only in the .cc).
  mutable std::shared_ptr<LayerStarter> starter_;
  Store& store_;
  std::vector<size_t> tables_;
  std::vector<NgramHasher> hashers_;
  std::vector<uint64_t> table_rows_;  // per layer, its table's rows
  uint32_t rows_per_token_ = 0;
  uint32_t record_bytes_ = 0;
};

}  // namespace engram
