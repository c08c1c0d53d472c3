#include "engram/step_stager.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
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

// Adds one gather's counts to its layer's, or one layer's to the step's.
template <typename Sum, typename Part>
void Accumulate(Sum& sum, const Part& part) {
  if (sum.status.ok() && !part.status.ok()) sum.status = part.status;
  sum.distinct_rows += part.distinct_rows;
  sum.hits += part.hits;
  sum.misses += part.misses;
  sum.refusals += part.refusals;
  sum.blocks_read += part.blocks_read;
  sum.bytes_read += part.bytes_read;
  sum.cache_nanoseconds += part.cache_nanoseconds;
  sum.disk_nanoseconds += part.disk_nanoseconds;
}

// The step's counts from its layers'; its wait is the last layer's.
void SumLayers(StageResult& step, std::vector<StageLayerResult> layers) {
  for (const StageLayerResult& l : layers) {
    Accumulate(step, l);
    step.wait_nanoseconds = std::max(step.wait_nanoseconds, l.wait_nanoseconds);
  }
  step.layers = std::move(layers);
}

}  // namespace

struct StepStager::Plan {
  struct Run {
    size_t layer;
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
    plan->runs.push_back({0, tables_[0], plan->row_ids, out, record_bytes_});
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
        plan->runs.push_back({l, tables_[l], std::span<const uint64_t>(runs + s * n, n), dst, token_stride});
      }
    }
  }
  plan->result.hash_nanoseconds = NowNanoseconds() - plan->start_nanoseconds;
  return plan;
}

std::vector<StageLayerResult> StepStager::NewLayerResults(const StageResult& step) const {
  StageLayerResult layer;
  layer.status = step.status;
  layer.rows = step.tokens * rows_per_token_;
  return std::vector<StageLayerResult>(layers(), layer);
}

StageResult StepStager::Stage(std::span<const uint32_t> history, std::span<const uint32_t> tokens,
                              std::byte* out) const {
  auto plan = Hash(history, tokens, out);
  if (!plan.ok()) {
    StageResult failed;
    failed.status = plan.status();
    failed.layers = NewLayerResults(failed);
    return failed;
  }
  Plan& p = **plan;
  std::vector<GatherTicket> tickets;
  tickets.reserve(p.runs.size());
  for (const Plan::Run& run : p.runs) tickets.push_back(store_.StartGather(run.table, run.row_ids, run.dst, run.stride));
  // The tickets are waited for in the order the gathers started (layer by
  // layer), on this thread, which then does each gather's disk phase.
  std::vector<StageLayerResult> layers = NewLayerResults(p.result);
  for (StageLayerResult& layer : layers) layer.wait_nanoseconds = p.result.hash_nanoseconds;
  for (size_t i = 0; i < tickets.size(); ++i) {
    StageLayerResult& layer = layers[p.runs[i].layer];
    Accumulate(layer, tickets[i].Wait());
    layer.wait_nanoseconds = NowNanoseconds() - p.start_nanoseconds;
  }
  SumLayers(p.result, std::move(layers));
  p.result.wait_nanoseconds = NowNanoseconds() - p.start_nanoseconds;
  return std::move(p.result);
}

// A step's completion, shared by its ticket and its gathers' callbacks.
//
// Guarded by mu: the per-layer counts and results, which the gathers'
// completion callbacks (store completion threads, or the starting thread for
// a gather that completes at once) write and waiters read. Set before the
// first gather starts and only read after: layer_count, step,
// start_nanoseconds; done is moved out once, under mu, by the callback that
// completes the last layer.
struct StageTicket::State : std::enable_shared_from_this<StageTicket::State> {
  // Starts a layer's gathers (set by a step of more than one layer).
  using StartLayer = std::function<void(std::shared_ptr<State>, size_t layer)>;

  State(size_t layers, StageResult hashed, std::vector<StageLayerResult> results, uint64_t start)
      : layer_count(layers), step(std::move(hashed)), start_nanoseconds(start) {
    MutexLock lock(&mu);  // no gather has started yet; the lock satisfies the analysis
    layer_results = std::move(results);
    gathers_left.assign(layers, 0);
    layers_left = layers;
  }

  const size_t layer_count;
  const StageResult step;  // tokens, rows, hash time, and a hashing failure
  const uint64_t start_nanoseconds;
  Mutex mu;
  CondVar layer_ready;
  std::vector<StageLayerResult> layer_results GUARDED_BY(mu);
  std::vector<size_t> gathers_left GUARDED_BY(mu);  // per layer: 0 = ready
  size_t layers_left GUARDED_BY(mu) = 0;
  std::function<void(StageResult)> done GUARDED_BY(mu);  // StartStage's; empty for a ticket
  StartLayer start_layer GUARDED_BY(mu);                  // starts the layer after a ready one

  // Counts `gathers` more gathers for layer (before they start).
  void Expect(size_t layer, size_t gathers) EXCLUDES(mu) {
    MutexLock lock(&mu);
    gathers_left[layer] += gathers;
  }
  // A layer with nothing to gather (no tokens, or hashing failed) is ready.
  void EndEmptyLayers() EXCLUDES(mu) {
    std::function<void(StageResult)> finish;
    StageResult r;
    {
      MutexLock lock(&mu);
      for (size_t l = 0; l < layer_count; ++l) {
        if (gathers_left[l] == 0) EndLayerLocked(l);
      }
      if (layers_left > 0 || !done) return;
      r = ResultLocked();
      finish = std::move(done);
    }
    finish(std::move(r));
  }
  void GatherDone(size_t layer, const GatherResult& g) EXCLUDES(mu) {
    std::function<void(StageResult)> finish;
    StartLayer start_next;
    StageResult r;
    {
      MutexLock lock(&mu);
      Accumulate(layer_results[layer], g);
      if (--gathers_left[layer] > 0) return;
      EndLayerLocked(layer);
      if (layer + 1 < layer_count) start_next = start_layer;
      if (layers_left == 0 && done) {
        r = ResultLocked();
        finish = std::move(done);
      }
    }
    // Outside the lock: both hand work to other threads, which then ask
    // this state about its layers.
    if (start_next) start_next(shared_from_this(), layer + 1);
    if (finish) finish(std::move(r));
  }
  void WaitLayer(size_t layer) REQUIRES(mu) {
    while (gathers_left[layer] > 0) layer_ready.Wait(&mu);
  }
  void WaitAll() EXCLUDES(mu) {
    MutexLock lock(&mu);
    while (layers_left > 0) layer_ready.Wait(&mu);
  }
  StageResult ResultLocked() REQUIRES(mu) {
    StageResult r = step;
    SumLayers(r, layer_results);
    return r;
  }

 private:
  void EndLayerLocked(size_t layer) REQUIRES(mu) {
    layer_results[layer].wait_nanoseconds = NowNanoseconds() - start_nanoseconds;
    --layers_left;
    layer_ready.SignalAll();
  }
};

namespace {

Status CheckLayer(const StageTicket& ticket, size_t layer) {
  if (!ticket.valid()) return Status::InvalidArgument("stage ticket is not valid (default, moved from, or waited for)");
  if (layer >= ticket.layers()) {
    return Status::InvalidArgument("layer " + std::to_string(layer) + " out of range (the step has " +
                                   std::to_string(ticket.layers()) + " layers)");
  }
  return Status::OK();
}

}  // namespace

StageTicket& StageTicket::operator=(StageTicket&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) state_->WaitAll();
    state_ = std::move(other.state_);
  }
  return *this;
}

StageTicket::~StageTicket() {
  if (state_ != nullptr) state_->WaitAll();
}

size_t StageTicket::layers() const { return state_ == nullptr ? 0 : state_->layer_count; }

Result<bool> StageTicket::Ready(size_t layer) const {
  ENGRAM_RETURN_IF_ERROR(CheckLayer(*this, layer));
  MutexLock lock(&state_->mu);
  return state_->gathers_left[layer] == 0;
}

StageLayerResult StageTicket::WaitLayer(size_t layer) const {
  if (Status bad = CheckLayer(*this, layer); !bad.ok()) {
    StageLayerResult r;
    r.status = std::move(bad);
    return r;
  }
  MutexLock lock(&state_->mu);
  state_->WaitLayer(layer);
  return state_->layer_results[layer];
}

StageResult StageTicket::Wait() {
  if (state_ == nullptr) {
    StageResult r;
    r.status = Status::InvalidArgument("stage ticket is not valid (default, moved from, or waited for)");
    return r;
  }
  std::shared_ptr<State> state = std::move(state_);
  state->WaitAll();
  MutexLock lock(&state->mu);
  return state->ResultLocked();
}

// Starts the later layers of launched steps, on a thread of its own: a
// layer is ready in a gather's completion callback, on a store completion
// thread, which must not block; starting gathers may wait for read buffers
// that only those threads free. Counts the steps whose later layers are still
// to start, so the stager's destructor can wait for them.
struct StepStager::LayerStarter {
  boost::asio::thread_pool thread{1};
  Mutex mu;
  CondVar idle;
  size_t steps_starting GUARDED_BY(mu) = 0;

  void Begin() EXCLUDES(mu) {
    MutexLock lock(&mu);
    ++steps_starting;
  }
  void End() EXCLUDES(mu) {
    MutexLock lock(&mu);
    if (--steps_starting == 0) idle.SignalAll();
  }
  void WaitIdle() EXCLUDES(mu) {
    MutexLock lock(&mu);
    while (steps_starting > 0) idle.Wait(&mu);
  }
};

StepStager::~StepStager() {
  if (starter_ == nullptr) return;
  starter_->WaitIdle();
  starter_->thread.join();
}

StepStager::LayerStarter& StepStager::starter() const {
  std::call_once(starter_once_, [this] { starter_ = std::make_shared<LayerStarter>(); });
  return *starter_;
}

void StepStager::StartLayer(const std::shared_ptr<Plan>& plan, const std::shared_ptr<StageTicket::State>& state,
                            size_t layer) const {
  // Each callback holds the plan (its row IDs) until its gather is done.
  for (const Plan::Run& run : plan->runs) {
    if (run.layer != layer) continue;
    store_.StartGather(run.table, run.row_ids, run.dst, run.stride,
                       [state, plan, layer](GatherResult g) { state->GatherDone(layer, g); });
  }
}

std::shared_ptr<StageTicket::State> StepStager::Launch(std::span<const uint32_t> history,
                                                       std::span<const uint32_t> tokens, std::byte* out,
                                                       std::function<void(StageResult)> done) const {
  auto plan = Hash(history, tokens, out);
  StageResult hashed;
  uint64_t start = NowNanoseconds();
  if (plan.ok()) {
    hashed = (*plan)->result;
    start = (*plan)->start_nanoseconds;
  } else {
    hashed.status = plan.status();
  }
  auto state = std::make_shared<StageTicket::State>(layers(), hashed, NewLayerResults(hashed), start);
  {
    MutexLock lock(&state->mu);
    state->done = std::move(done);
  }
  if (!plan.ok() || (*plan)->runs.empty()) {
    state->EndEmptyLayers();
    return state;
  }
  std::shared_ptr<Plan> p = std::move(plan).value();
  for (const Plan::Run& run : p->runs) state->Expect(run.layer, 1);
  // Layer by layer: layer k+1's gathers start when layer k is ready, so
  // layer k's reads and disk phases never queue behind a later layer's
  // (measured: docs/lab-notes/2026-12-05-per-layer-readiness.md).
  if (layers() > 1) {
    LayerStarter& later = starter();
    later.Begin();
    MutexLock lock(&state->mu);
    state->start_layer = [this, p, &later](std::shared_ptr<StageTicket::State> s, size_t layer) {
      boost::asio::post(later.thread, [this, p, s = std::move(s), layer, &later] {
        StartLayer(p, s, layer);
        if (layer + 1 == layers()) later.End();
      });
    };
  }
  StartLayer(p, state, 0);
  return state;
}

StageTicket StepStager::Start(std::span<const uint32_t> history, std::span<const uint32_t> tokens, std::byte* out,
                              std::function<void(StageResult)> done) const {
  return StageTicket(Launch(history, tokens, out, std::move(done)));
}

void StepStager::StartStage(std::span<const uint32_t> history, std::span<const uint32_t> tokens, std::byte* out,
                            std::function<void(StageResult)> done) const {
  Launch(history, tokens, out, std::move(done));
}

}  // namespace engram
