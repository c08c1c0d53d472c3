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
// Deduplication: the rows of one (order, head) slot lie in their own range of
// the table ([offset, offset + prime)), so rows of different slots never
// coincide. Each slot's rows for all tokens of the step go to the store as
// one gather (which looks each distinct row up once) writing with stride
// layers * rows_per_token * record_bytes straight into `out`: no row is
// looked up twice within a step and nothing is copied twice.
//
// Thread safety: a StepStager is immutable after Create; any number of
// threads may stage through it at once. The Store must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engram/hasher.h"
#include "engram/status.h"
#include "engram/store.h"

namespace engram {

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

  size_t layers() const { return tables_.size(); }
  const std::vector<size_t>& tables() const { return tables_; }
  uint32_t rows_per_token() const { return rows_per_token_; }
  uint32_t record_bytes() const { return record_bytes_; }
  // Tokens of history that affect a step's rows (max order - 1 over layers).
  uint32_t history_tokens() const;
  const NgramHasher& hasher(size_t layer) const { return hashers_[layer]; }
  // Bytes `out` must hold for a step of `tokens` tokens.
  size_t OutputBytes(size_t tokens) const { return tokens * layers() * rows_per_token_ * record_bytes_; }

  // Hashes and gathers; returns when every row is in out (OutputBytes(tokens)
  // bytes). `history` is the request's tokens before `tokens` (only the last
  // history_tokens() matter), so n-grams reach back across steps.
  StageResult Stage(std::span<const uint32_t> history, std::span<const uint32_t> tokens, std::byte* out) const;

  // Hashes on the calling thread, starts the gathers and returns; `done` runs
  // once with the result on a store completion thread (or on the calling
  // thread, if everything completed at once or hashing failed). out must stay
  // valid until then; history and tokens need not.
  void StartStage(std::span<const uint32_t> history, std::span<const uint32_t> tokens, std::byte* out,
                  std::function<void(StageResult)> done) const;

 private:
  struct Plan;  // the step's row IDs, one run per (layer, slot)
  StepStager(Store& store, std::vector<size_t> tables, std::vector<NgramHasher> hashers, uint32_t rows_per_token,
             uint32_t record_bytes)
      : store_(store),
        tables_(std::move(tables)),
        hashers_(std::move(hashers)),
        rows_per_token_(rows_per_token),
        record_bytes_(record_bytes) {}
  Result<std::shared_ptr<Plan>> Hash(std::span<const uint32_t> history, std::span<const uint32_t> tokens,
                                     std::byte* out) const;

  Store& store_;
  std::vector<size_t> tables_;
  std::vector<NgramHasher> hashers_;
  uint32_t rows_per_token_ = 0;
  uint32_t record_bytes_ = 0;
};

}  // namespace engram
