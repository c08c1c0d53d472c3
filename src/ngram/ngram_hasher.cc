// The hash loop. Per position: the max_order products tok[t-k] * mult[k] are
// XORed incrementally, so each order's mix is one XOR on top of the previous
// order's and is computed once for all of its heads; each head then needs only
// an exact multiply-shift floor modulo (src/ngram/floor_mod.h).
#include <bit>
#include <string>

#include "engram/hasher.h"
#include "src/ngram/floor_mod.h"

namespace engram {

struct NgramHasher::Plan {
  struct Head {
    FloorModulus mod;
    uint64_t offset;
  };
  std::vector<Head> heads;             // [order index * heads + head]
  std::vector<uint64_t> multipliers;   // as uint64 bit patterns: the product wraps like int64
};

Result<NgramHasher> NgramHasher::Create(EngramHashLayout layout, std::shared_ptr<const TokenMap> token_map) {
  ENGRAM_RETURN_IF_ERROR(layout.Validate());
  if (token_map && token_map->size() == 0) return Status::InvalidArgument("token map is empty");
  auto plan = std::make_shared<Plan>();
  for (size_t i = 0; i < layout.orders.size(); ++i) {
    for (uint32_t h = 0; h < layout.heads; ++h) {
      plan->heads.push_back({MakeFloorModulus(layout.primes[i][h]), layout.offsets[i][h]});
    }
  }
  for (int64_t m : layout.multipliers) plan->multipliers.push_back(static_cast<uint64_t>(m));
  NgramHasher hasher;
  hasher.layout_ = std::move(layout);
  hasher.token_map_ = std::move(token_map);
  hasher.plan_ = std::move(plan);
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
  const uint32_t n_heads = layout_.heads;
  const uint32_t* orders = layout_.orders.data();
  const size_t n_orders = layout_.orders.size();
  uint64_t* dst = out.data();
  for (size_t t = 0; t < tokens.size(); ++t) {
    const uint64_t* cur = &ctx[lookback + t];  // cur[-k] is the k-th predecessor
    uint64_t mix = 0;
    uint32_t k = 0;
    for (size_t oi = 0; oi < n_orders; ++oi) {
      for (; k < orders[oi]; ++k) mix ^= cur[-static_cast<ptrdiff_t>(k)] * mult[k];
      const Plan::Head* h = heads + oi * n_heads;
      for (uint32_t j = 0; j < n_heads; ++j) *dst++ = FloorMod(h[j].mod, mix) + h[j].offset;
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
