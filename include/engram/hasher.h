// Engram n-gram hasher: token IDs -> Engram table row IDs for one layer.
//
// This is the arithmetic of DeepSeek-V4.1's Engram (SGLang's
// compute_engram_hash_ids), bit-exact including its int64 behaviour:
//
//   tok[t-k] = map[x[t-k]]   (or x[t-k] in identity mode); pad when t-k < 0
//   mix_n(t) = XOR_{k<n} tok[t-k] * multipliers[k]       (int64, wrapping)
//   row(t,n,h) = floor_mod(mix_n(t), primes[n][h]) + offsets[n][h]
//
// Row IDs are produced [position][order][head], i.e. [position][slot] with
// slot = order index * heads + head. Row IDs depend only on the
// token sequence, so hashing a request chunk by chunk (passing the previous
// tokens of the same request as history) gives the same IDs as hashing it
// whole.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engram/status.h"

namespace engram {

// The hash layout of one Engram layer (one table).
struct EngramHashLayout {
  uint32_t layer_id = 0;
  std::vector<uint32_t> orders;      // n-gram orders, strictly ascending, e.g. {2, 3, 4}
  uint32_t heads = 0;                // heads per order
  uint32_t pad_id = 0;               // (compressed) token used before the sequence start
  std::vector<int64_t> multipliers;  // multipliers[k] multiplies the k-th predecessor; >= max order
  std::vector<std::vector<uint64_t>> primes;   // [order index][head]
  std::vector<std::vector<uint64_t>> offsets;  // [order index][head], exclusive prefix sum of primes
  uint64_t total_rows = 0;                     // sum of all primes

  uint32_t max_order() const { return orders.empty() ? 0 : orders.back(); }
  // Row IDs produced per token: orders.size() * heads.
  uint32_t rows_per_token() const { return static_cast<uint32_t>(orders.size()) * heads; }

  // Checks every field: shapes, primality, offsets == prefix sums, total_rows.
  Status Validate() const;

  // Parses JSON text that is either a layout document (an object with a
  // "layers" array, like layout-v41.json; layer_index picks the layer) or a
  // single layer object (as embedded in a table's metadata; layer_index must
  // then be 0). Multipliers may be decimal strings or JSON integers. The
  // result is validated.
  static Result<EngramHashLayout> FromJson(std::string_view json_text, uint32_t layer_index = 0);
  // The same from a file: a regular file of at most 64 MiB (a FIFO, a
  // device or a directory is InvalidArgument, never waited on or read).
  static Result<EngramHashLayout> FromFile(const std::string& path, uint32_t layer_index = 0);
  // A single layer object that FromJson accepts (multipliers as strings).
  std::string ToJson() const;

  bool operator==(const EngramHashLayout&) const = default;
};

// Compressed-token map: raw token ID -> compressed ID (token-map.u32).
class TokenMap {
 public:
  TokenMap() = default;
  explicit TokenMap(std::vector<uint32_t> ids) : ids_(std::move(ids)) {}
  // Reads a little-endian uint32 file; its size must be a non-zero multiple of
  // 4, at most 1 GiB. It must be a regular file: a FIFO, a device or a
  // directory is InvalidArgument (never waited on or read).
  static Result<TokenMap> FromFile(const std::string& path);

  size_t size() const { return ids_.size(); }
  const std::vector<uint32_t>& ids() const { return ids_; }

 private:
  std::vector<uint32_t> ids_;
};

// The slots (order index * heads + head) that rank `rank` of `ranks` holds
// when a layer's slots are assigned strided: s with s % ranks == rank,
// ascending. Striding spreads every order over the ranks, so each rank gets
// a like share of the hot low-order rows. InvalidArgument unless
// 1 <= ranks <= slot_count and rank < ranks.
Result<std::vector<uint32_t>> StridedRankSlots(uint32_t slot_count, uint32_t ranks, uint32_t rank);

class NgramHasher {
 public:
  // token_map may be null: raw IDs are then used as compressed IDs (identity
  // mode; products may wrap around int64 exactly as the reference does).
  static Result<NgramHasher> Create(EngramHashLayout layout, std::shared_ptr<const TokenMap> token_map = nullptr);
  // A hasher for a subset of the layer's slots, as a rank table holds them:
  // `slots` ascending, each < layout.rows_per_token(); empty = every slot
  // (the same hasher as above). It produces slots.size() row IDs per token,
  // [position][j], into the rank table whose rows are the slots' full-table
  // ranges packed in that order:
  //   row(t, j) = local_offset[j] + floor_mod(mix(t), prime[slots[j]])
  // with local_offset the exclusive prefix sum of the chosen slots' primes.
  // That is the full hasher's ID minus offsets[slots[j]] plus local_offset[j].
  static Result<NgramHasher> Create(EngramHashLayout layout, std::shared_ptr<const TokenMap> token_map,
                                    std::vector<uint32_t> slots);

  // The full layer layout (also for a slot subset).
  const EngramHashLayout& layout() const { return layout_; }
  bool identity() const { return token_map_ == nullptr; }
  // The hashed slots, ascending (every slot of the layer unless a subset was given).
  const std::vector<uint32_t>& slots() const { return slots_; }
  // Row IDs produced per token: slots().size().
  uint32_t rows_per_token() const { return static_cast<uint32_t>(slots_.size()); }
  // Rows of the table these IDs index: the layout's total_rows, or the sum
  // of the chosen slots' primes.
  uint64_t table_rows() const { return table_rows_; }
  // How many previous tokens of a request affect a chunk's rows.
  uint32_t history_tokens() const { return layout_.max_order() - 1; }

  // Hashes `tokens`, which follow `history` (the previous raw tokens of the
  // same request, possibly empty; only its last history_tokens() matter) in
  // one request. Writes tokens.size() * rows_per_token() row IDs to out,
  // [position][slot] (for every slot: [position][order][head]). OutOfRange
  // names the position and token if a token (or history token) is outside
  // the token map.
  Status Hash(std::span<const uint32_t> history, std::span<const uint32_t> tokens, std::span<uint64_t> out) const;
  // A whole request from its first token.
  Result<std::vector<uint64_t>> Hash(std::span<const uint32_t> tokens) const;

 private:
  struct Plan;  // precomputed per-(order, head) exact divisors; src/ngram/ngram_hasher.cc
  NgramHasher() = default;

  EngramHashLayout layout_;
  std::shared_ptr<const TokenMap> token_map_;
  std::shared_ptr<const Plan> plan_;
  std::vector<uint32_t> slots_;
  uint64_t table_rows_ = 0;
};

}  // namespace engram
