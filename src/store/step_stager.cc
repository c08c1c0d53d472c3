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

Result<EngramHashLayout> TableHashLayout(const Store& store, size_t table) {
  const std::string where = "table " + std::to_string(table);
  nlohmann::json meta = nlohmann::json::parse(store.metadata_json(table), nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object()) return Status::InvalidArgument(where + ": metadata is not a JSON object");
  auto it = meta.find("hash_layout");
  if (it == meta.end()) return Status::InvalidArgument(where + ": metadata has no hash_layout (needed to hash tokens)");
  auto layout = EngramHashLayout::FromJson(it->dump());
  if (!layout.ok()) return layout.status().WithContext(where + " hash_layout");
  return layout;
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
  for (size_t i = 0; i < tables.size(); ++i) {
    const size_t t = tables[i];
    if (t >= store.table_count()) {
      return Status::InvalidArgument("table index " + std::to_string(t) + " out of range (store has " +
                                     std::to_string(store.table_count()) + " tables)");
    }
    ENGRAM_ASSIGN_OR_RETURN(EngramHashLayout layout, TableHashLayout(store, t));
    if (i == 0) {
      rows_per_token = layout.rows_per_token();
      record_bytes = store.record_bytes(t);
    } else if (layout.rows_per_token() != rows_per_token || store.record_bytes(t) != record_bytes) {
      return Status::InvalidArgument("table " + std::to_string(t) + " has " + std::to_string(layout.rows_per_token()) +
                                     " rows per token and " + std::to_string(store.record_bytes(t)) +
                                     "-byte records; the first layer has " + std::to_string(rows_per_token) +
                                     " and " + std::to_string(record_bytes));
    }
    ENGRAM_ASSIGN_OR_RETURN(NgramHasher hasher, NgramHasher::Create(std::move(layout), token_map));
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
