#include "engram/step_stager.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "storage/mutex.h"

namespace engram {
namespace {

uint64_t NowNanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What a table's metadata says about hashing for it: the full layer layout,
// and for a rank table ("rank_shard") the slots it holds.
struct TableHashing {
  EngramHashLayout layout;
  std::vector<uint32_t> slots;  // empty: every slot (an unsharded table)
};

std::string SlotList(const std::vector<uint32_t>& slots) {
  std::string text = "slots [";
  for (size_t j = 0; j < slots.size(); ++j) text += (j ? ", " : "") + std::to_string(slots[j]);
  return text + "]";
}

Result<TableHashing> ReadTableHashing(const Store& store, size_t table) {
  const std::string where = "table " + std::to_string(table);
  nlohmann::json meta = nlohmann::json::parse(store.metadata_json(table), nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object()) return Status::InvalidArgument(where + ": metadata is not a JSON object");
  auto it = meta.find("hash_layout");
  if (it == meta.end()) return Status::InvalidArgument(where + ": metadata has no hash_layout (needed to hash tokens)");
  TableHashing hashing;
  auto layout = EngramHashLayout::FromJson(it->dump());
  if (!layout.ok()) return layout.status().WithContext(where + " hash_layout");
  hashing.layout = std::move(layout).value();
  auto shard = meta.find("rank_shard");
  if (shard == meta.end()) return hashing;
  const nlohmann::json* slots = shard->is_object() && shard->contains("slots") ? &(*shard)["slots"] : nullptr;
  if (slots == nullptr || !slots->is_array() || slots->empty()) {
    return Status::InvalidArgument(where + ": rank_shard has no non-empty \"slots\" array");
  }
  for (const nlohmann::json& s : *slots) {
    if (!s.is_number_unsigned() || s.get<uint64_t>() > UINT32_MAX) {
      return Status::InvalidArgument(where + ": rank_shard slot " + s.dump() + " is not a slot number");
    }
    hashing.slots.push_back(s.get<uint32_t>());
  }
  return hashing;
}

// Adds one gather's counts to the step's.
void Accumulate(StageResult& step, const GatherResult& g) {
  if (step.status.ok() && !g.status.ok()) step.status = g.status;
  step.distinct_rows += g.distinct_rows;
  step.hits += g.hits;
  step.misses += g.misses;
  step.refusals += g.refusals;
  step.blocks_read += g.blocks_read;
  step.bytes_read += g.bytes_read;
  step.cache_nanoseconds += g.cache_nanoseconds;
  step.disk_nanoseconds += g.disk_nanoseconds;
}

}  // namespace

struct StepStager::Plan {
  struct Run {
    size_t table;
    std::span<const uint64_t> row_ids;
    std::byte* dst;
    size_t stride;
  };
  std::vector<uint64_t> row_ids;  // [layer][slot][token], or [token][slot] for one layer
  std::vector<Run> runs;
  StageResult result;
  uint64_t start_nanoseconds = 0;
};

Result<std::unique_ptr<StepStager>> StepStager::Create(Store& store, std::vector<size_t> tables,
                                                       std::shared_ptr<const TokenMap> token_map) {
  if (tables.empty()) return Status::InvalidArgument("StepStager needs at least one table");
  std::vector<NgramHasher> hashers;
  uint32_t rows_per_token = 0, record_bytes = 0;
  bool first_is_rank_table = false;
  for (size_t i = 0; i < tables.size(); ++i) {
    const size_t t = tables[i];
    if (t >= store.table_count()) {
      return Status::InvalidArgument("table index " + std::to_string(t) + " out of range (store has " +
                                     std::to_string(store.table_count()) + " tables)");
    }
    ENGRAM_ASSIGN_OR_RETURN(TableHashing hashing, ReadTableHashing(store, t));
    const bool rank_table = !hashing.slots.empty();
    ENGRAM_ASSIGN_OR_RETURN(NgramHasher hasher,
                            NgramHasher::Create(std::move(hashing.layout), token_map, std::move(hashing.slots)));
    if (rank_table && hasher.table_rows() != store.row_count(t)) {
      return Status::InvalidArgument("table " + std::to_string(t) + " has " + std::to_string(store.row_count(t)) +
                                     " rows, but the primes of its rank_shard " + SlotList(hasher.slots()) +
                                     " sum to " + std::to_string(hasher.table_rows()));
    }
    // A step's output has one slot axis for every layer, so every layer must
    // be hashed for the same slots (a rank's tables all come from one
    // assignment).
    if (i == 0) {
      first_is_rank_table = rank_table;
    } else if ((rank_table || first_is_rank_table) && hasher.slots() != hashers[0].slots()) {
      auto holds = [](bool rank, const NgramHasher& h) { return rank ? SlotList(h.slots()) : "every slot"; };
      return Status::InvalidArgument("table " + std::to_string(t) + " holds " + holds(rank_table, hasher) +
                                     "; the first layer (table " + std::to_string(tables[0]) + ") holds " +
                                     holds(first_is_rank_table, hashers[0]) +
                                     ": every staged layer must hold the same slots");
    }
    if (i == 0) {
      rows_per_token = hasher.rows_per_token();
      record_bytes = store.record_bytes(t);
    } else if (hasher.rows_per_token() != rows_per_token || store.record_bytes(t) != record_bytes) {
      return Status::InvalidArgument("table " + std::to_string(t) + " has " + std::to_string(hasher.rows_per_token()) +
                                     " rows per token and " + std::to_string(store.record_bytes(t)) +
                                     "-byte records; the first layer has " + std::to_string(rows_per_token) +
                                     " and " + std::to_string(record_bytes));
    }
    hashers.push_back(std::move(hasher));
  }
  return std::unique_ptr<StepStager>(
      new StepStager(store, std::move(tables), std::move(hashers), rows_per_token, record_bytes));
}

uint32_t StepStager::history_tokens() const {
  uint32_t h = 0;
  for (const NgramHasher& hasher : hashers_) h = std::max(h, hasher.history_tokens());
  return h;
}

Result<std::shared_ptr<StepStager::Plan>> StepStager::Hash(std::span<const uint32_t> history,
                                                           std::span<const uint32_t> tokens, std::byte* out) const {
  auto plan = std::make_shared<Plan>();
  plan->start_nanoseconds = NowNanoseconds();
  const size_t n = tokens.size(), slots = rows_per_token_, per_layer = n * slots;
  plan->result.tokens = n;
  plan->result.rows = per_layer * layers();
  if (n == 0) return plan;
  if (out == nullptr) return Status::InvalidArgument("stage output buffer is null");
  plan->row_ids.resize(per_layer * layers());
  if (layers() == 1) {
    // One layer: out is [token][slot], the hasher's own order: one gather.
    ENGRAM_RETURN_IF_ERROR(hashers_[0].Hash(history, tokens, plan->row_ids));
    plan->runs.push_back({tables_[0], plan->row_ids, out, record_bytes_});
  } else {
    std::vector<uint64_t> layer_ids(per_layer);
    const size_t token_stride = layers() * slots * size_t(record_bytes_);
    for (size_t l = 0; l < layers(); ++l) {
      ENGRAM_RETURN_IF_ERROR(hashers_[l].Hash(history, tokens, layer_ids));
      uint64_t* runs = plan->row_ids.data() + l * per_layer;  // [slot][token]
      for (size_t t = 0; t < n; ++t) {
        for (size_t s = 0; s < slots; ++s) runs[s * n + t] = layer_ids[t * slots + s];
      }
      for (size_t s = 0; s < slots; ++s) {
        std::byte* dst = out + (l * slots + s) * size_t(record_bytes_);
        plan->runs.push_back({tables_[l], std::span<const uint64_t>(runs + s * n, n), dst, token_stride});
      }
    }
  }
  plan->result.hash_nanoseconds = NowNanoseconds() - plan->start_nanoseconds;
  return plan;
}

StageResult StepStager::Stage(std::span<const uint32_t> history, std::span<const uint32_t> tokens,
                              std::byte* out) const {
  auto plan = Hash(history, tokens, out);
  if (!plan.ok()) {
    StageResult failed;
    failed.status = plan.status();
    return failed;
  }
  Plan& p = **plan;
  std::vector<GatherTicket> tickets;
  tickets.reserve(p.runs.size());
  for (const Plan::Run& run : p.runs) tickets.push_back(store_.StartGather(run.table, run.row_ids, run.dst, run.stride));
  for (GatherTicket& ticket : tickets) Accumulate(p.result, ticket.Wait());
  p.result.wait_nanoseconds = NowNanoseconds() - p.start_nanoseconds;
  return std::move(p.result);
}

void StepStager::StartStage(std::span<const uint32_t> history, std::span<const uint32_t> tokens, std::byte* out,
                            std::function<void(StageResult)> done) const {
  auto plan = Hash(history, tokens, out);
  if (!plan.ok()) {
    StageResult failed;
    failed.status = plan.status();
    done(std::move(failed));
    return;
  }
  std::shared_ptr<Plan> p = std::move(plan).value();
  if (p->runs.empty()) {
    p->result.wait_nanoseconds = NowNanoseconds() - p->start_nanoseconds;
    done(std::move(p->result));
    return;
  }
  struct Pending {
    std::shared_ptr<Plan> plan;
    std::function<void(StageResult)> done;
    Mutex mu;
    size_t remaining GUARDED_BY(mu);
  };
  auto pending = std::make_shared<Pending>();
  pending->plan = p;
  pending->done = std::move(done);
  {
    MutexLock lock(&pending->mu);  // no gather has started yet; the lock satisfies the analysis
    pending->remaining = p->runs.size();
  }
  for (const Plan::Run& run : p->runs) {
    store_.StartGather(run.table, run.row_ids, run.dst, run.stride, [pending](GatherResult g) {
      bool last;
      {
        MutexLock lock(&pending->mu);
        Accumulate(pending->plan->result, g);
        last = --pending->remaining == 0;
      }
      if (!last) return;
      StageResult r = std::move(pending->plan->result);
      r.wait_nanoseconds = NowNanoseconds() - pending->plan->start_nanoseconds;
      // Moved out first: the Pending (and its row IDs) dies with the last
      // gather's callback, never while a gather still reads them.
      auto done = std::move(pending->done);
      done(std::move(r));
    });
  }
}

}  // namespace engram
