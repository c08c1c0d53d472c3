// The hash loop. Per position: the max_order products tok[t-k] * mult[k] are
// XORed incrementally, so each order's mix is one XOR on top of the previous
// order's and is computed once for all of its heads; each head then needs only
// an exact multiply-shift floor modulo (src/ngram/floor_mod.h). A hasher for
// a subset of the slots (a rank's) computes the same mixes and skips the
// heads it does not hold.
#include <bit>
#include <string>

#include "engram/hasher.h"
#include "src/ngram/floor_mod.h"
#include "storage/rank_shard.h"

namespace engram {

struct NgramHasher::Plan {
  struct Head {
    FloorModulus mod;
    uint64_t offset;  // where the slot's range starts in the table hashed into
  };
  std::vector<Head> heads;           // one per hashed slot, in slot order
  std::vector<size_t> order_end;     // [order index]: heads of orders <= it (the hashed slots are ascending)
  std::vector<uint64_t> multipliers;  // as uint64 bit patterns: the product wraps like int64
};

Result<std::vector<uint32_t>> StridedRankSlots(uint32_t slot_count, uint32_t ranks, uint32_t rank) {
  if (ranks == 0 || ranks > slot_count) {
    return Status::InvalidArgument("ranks must be in 1.." + std::to_string(slot_count) +
                                   " (one slot at least per rank), got " + std::to_string(ranks));
  }
  if (rank >= ranks) {
    return Status::InvalidArgument("rank " + std::to_string(rank) + " is out of range for " + std::to_string(ranks) +
                                   " ranks (0.." + std::to_string(ranks - 1) + ")");
  }
  return StridedSlots(slot_count, ranks, rank);
}

Result<NgramHasher> NgramHasher::Create(EngramHashLayout layout, std::shared_ptr<const TokenMap> token_map) {
  return Create(std::move(layout), std::move(token_map), {});
}

Result<NgramHasher> NgramHasher::Create(EngramHashLayout layout, std::shared_ptr<const TokenMap> token_map,
                                        std::vector<uint32_t> slots) {
  ENGRAM_RETURN_IF_ERROR(layout.Validate());
  if (token_map && token_map->size() == 0) return Status::InvalidArgument("token map is empty");
  const uint32_t slot_count = layout.rows_per_token();
  if (slots.empty()) {
    for (uint32_t s = 0; s < slot_count; ++s) slots.push_back(s);
  }
  for (size_t j = 0; j < slots.size(); ++j) {
    if (slots[j] >= slot_count) {
      return Status::InvalidArgument("slot " + std::to_string(slots[j]) + " is out of range: the layer has " +
                                     std::to_string(slot_count) + " slots");
    }
    if (j > 0 && slots[j] <= slots[j - 1]) {
      return Status::InvalidArgument("slots must be strictly ascending; " + std::to_string(slots[j]) + " follows " +
                                     std::to_string(slots[j - 1]));
    }
  }
  const bool every_slot = slots.size() == slot_count;
  auto plan = std::make_shared<Plan>();
  uint64_t local_offset = 0;
  size_t next = 0;
  for (size_t i = 0; i < layout.orders.size(); ++i) {
    for (; next < slots.size() && slots[next] / layout.heads == i; ++next) {
      const uint32_t h = slots[next] % layout.heads;
      const uint64_t prime = layout.primes[i][h];
      plan->heads.push_back({MakeFloorModulus(prime), every_slot ? layout.offsets[i][h] : local_offset});
      local_offset += prime;  // Validate() bounds the sum of all primes, so this cannot wrap
    }
    plan->order_end.push_back(next);
  }
  for (int64_t m : layout.multipliers) plan->multipliers.push_back(static_cast<uint64_t>(m));
  NgramHasher hasher;
  hasher.table_rows_ = every_slot ? layout.total_rows : local_offset;
  hasher.layout_ = std::move(layout);
  hasher.token_map_ = std::move(token_map);
  hasher.plan_ = std::move(plan);
  hasher.slots_ = std::move(slots);
  return hasher;
}

Status NgramHasher::Hash(std::span<const uint32_t> history, std::span<const uint32_t> tokens,
                         std::span<uint64_t> out) const {
  const size_t per_token = rows_per_token();
  if (out.size() < tokens.size() * per_token)
    return Status::InvalidArgument("hash output has room for " + std::to_string(out.size()) + " rows, need " +
                                   std::to_string(tokens.size() * per_token));
  const size_t lookback = history_tokens();
  // ctx = [lookback tokens before the chunk (pad before the request start)] + chunk, compressed.
  std::vector<uint64_t> ctx(lookback + tokens.size(), layout_.pad_id);
  const size_t from_history = std::min(lookback, history.size());
  auto compress = [&](uint32_t raw, const char* what, int64_t position, uint64_t* dst) -> Status {
    if (!token_map_) {
      *dst = raw;
      return Status::OK();
    }
    if (raw >= token_map_->size())
      return Status::OutOfRange(std::string(what) + " " + std::to_string(raw) + " at position " +
                                std::to_string(position) + " is outside the token map (" +
                                std::to_string(token_map_->size()) + " entries)");
    *dst = token_map_->ids()[raw];
    return Status::OK();
  };
  for (size_t j = 0; j < from_history; ++j) {
    const size_t back = from_history - j;  // 1 = the token just before the chunk
    const size_t position = history.size() - back;
    ENGRAM_RETURN_IF_ERROR(compress(history[position], "history token", static_cast<int64_t>(position),
                                    &ctx[lookback - back]));
  }
  for (size_t t = 0; t < tokens.size(); ++t) {
    ENGRAM_RETURN_IF_ERROR(compress(tokens[t], "token", static_cast<int64_t>(t), &ctx[lookback + t]));
  }

  const uint64_t* mult = plan_->multipliers.data();
  const Plan::Head* heads = plan_->heads.data();
  const size_t* order_end = plan_->order_end.data();
  const uint32_t* orders = layout_.orders.data();
  const size_t n_orders = layout_.orders.size();
  uint64_t* dst = out.data();
  for (size_t t = 0; t < tokens.size(); ++t) {
    const uint64_t* cur = &ctx[lookback + t];  // cur[-k] is the k-th predecessor
    uint64_t mix = 0;
    uint32_t k = 0;
    for (size_t oi = 0; oi < n_orders; ++oi) {
      for (; k < orders[oi]; ++k) mix ^= cur[-static_cast<ptrdiff_t>(k)] * mult[k];
      // Bounds in locals: dst's uint64 stores could alias order_end otherwise.
      const Plan::Head* h = heads + (oi == 0 ? 0 : order_end[oi - 1]);
      const size_t n_heads = order_end[oi] - (oi == 0 ? 0 : order_end[oi - 1]);
      for (size_t j = 0; j < n_heads; ++j) *dst++ = FloorMod(h[j].mod, mix) + h[j].offset;
    }
  }
  return Status::OK();
}

Result<std::vector<uint64_t>> NgramHasher::Hash(std::span<const uint32_t> tokens) const {
  std::vector<uint64_t> out(tokens.size() * rows_per_token());
  ENGRAM_RETURN_IF_ERROR(Hash({}, tokens, out));
  return out;
}

}  // namespace engram
