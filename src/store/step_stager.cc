#include "engram/step_stager.h"

#include <algorithm>
#include <atomic>
#include <string>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "src/store/readiness_clock.h"
#include "storage/mutex.h"

namespace engram {
namespace {

// The step's clock is its gathers' (readiness_clock.h): a layer's wait and
// its gather's are read from the same clock.
uint64_t NowNanoseconds() { return ReadinessNanos(); }

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


// A started step's row IDs, held by its gathers' callbacks until the last.
struct StepStager::Plan {
  std::vector<uint64_t> row_ids;  // [layer][token][slot]
  std::byte* out = nullptr;
  size_t tokens = 0;
  StageResult result;  // tokens, rows and hashing time, before any gather
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

RowDestination StepStager::LayerDestination(std::byte* out, size_t layer) const {
  const size_t slot_bytes = size_t(rows_per_token_) * record_bytes_;
  return RowDestination{out + layer * slot_bytes, record_bytes_, rows_per_token_, layers() * slot_bytes};
}

Status StepStager::CheckCompletion(const StepCompletion& completion) const {
  if (completion.words.empty() && completion.sequence == 0) return Status::OK();
  if (completion.words.size() != layers()) {
    return Status::InvalidArgument("step completion: " + std::to_string(completion.words.size()) +
                                   " words given, the step has " + std::to_string(layers()) +
                                   " layers (one word per layer)");
  }
  if (completion.sequence == 0 || completion.sequence > kMaxStepSequence) {
    return Status::InvalidArgument("step completion: sequence number " + std::to_string(completion.sequence) +
                                   " is not in 1.." + std::to_string(kMaxStepSequence) +
                                   " (a word's high bit tells a failed layer)");
  }
  return Status::OK();
}

Status StepStager::CheckStep(size_t tokens, const std::byte* out, const StepCompletion& completion) const {
  ENGRAM_RETURN_IF_ERROR(CheckCompletion(completion));
  if (tokens > 0 && out == nullptr) return Status::InvalidArgument("stage output buffer is null");
  return Status::OK();
}

Status StepStager::CheckGatherStepIds(std::span<const uint64_t> ids) const {
  const size_t slots = rows_per_token_, per_token = layers() * slots;
  if (ids.size() % per_token != 0) {
    return Status::InvalidArgument("gather_step: " + std::to_string(ids.size()) +
                                   " row IDs are not a whole number of tokens of " + std::to_string(layers()) +
                                   " layers x " + std::to_string(slots) + " slots ([tokens, layers, slots])");
  }
  for (size_t t = 0; t < ids.size() / per_token; ++t) {
    for (size_t l = 0; l < layers(); ++l) {
      const uint64_t* run = ids.data() + (t * layers() + l) * slots;
      for (size_t s = 0; s < slots; ++s) {
        if (run[s] < table_rows_[l]) continue;
        return Status::OutOfRange("gather_step: row ID " + std::to_string(run[s]) + " at [token " +
                                  std::to_string(t) + ", layer " + std::to_string(l) + ", slot " + std::to_string(s) +
                                  "] is past the end of its table '" + store_.table_name(tables_[l]) + "' (" +
                                  std::to_string(table_rows_[l]) + " rows)");
      }
    }
  }
  return Status::OK();
}

Status StepStager::HashLayers(std::span<const uint32_t> history, std::span<const uint32_t> tokens,
                              std::vector<uint64_t>& ids) const {
  const size_t per_layer = tokens.size() * rows_per_token_;
  ids.resize(per_layer * layers());
  for (size_t l = 0; l < layers(); ++l) {
    ENGRAM_RETURN_IF_ERROR(hashers_[l].Hash(history, tokens, std::span<uint64_t>(ids).subspan(l * per_layer, per_layer)));
  }
  return Status::OK();
}

void StepStager::SplitByLayer(std::span<const uint64_t> step_ids, std::vector<uint64_t>& ids) const {
  const size_t slots = rows_per_token_, n = step_ids.size() / (layers() * slots), per_layer = n * slots;
  ids.resize(step_ids.size());
  for (size_t t = 0; t < n; ++t) {
    for (size_t l = 0; l < layers(); ++l) {
      std::copy_n(step_ids.data() + (t * layers() + l) * slots, slots, ids.data() + l * per_layer + t * slots);
    }
  }
}

std::vector<StageLayerResult> StepStager::NewLayerResults(const StageResult& step) const {
  StageLayerResult layer;
  layer.status = step.status;
  layer.rows = step.tokens * rows_per_token_;
  return std::vector<StageLayerResult>(layers(), layer);
}

namespace {

// Tells a layer's completion: its hook, then its word (the hook may write
// the rows elsewhere, and the word must come after every write).
void CompleteLayer(const StepCompletion& completion, size_t layer, const StageLayerResult& result) {
  if (completion.layer_done) completion.layer_done(layer, result);
  if (completion.words.empty()) return;
  const uint32_t word = result.status.ok() ? completion.sequence : (completion.sequence | kStepWordFailed);
  std::atomic_ref<uint32_t>(completion.words[layer]).store(word, std::memory_order_release);
}

}  // namespace

StageResult StepStager::FailedStep(Status why, size_t tokens, const StepCompletion& completion) const {
  StageResult failed;
  failed.status = std::move(why);
  failed.tokens = tokens;
  failed.rows = tokens * layers() * rows_per_token_;
  failed.layers = NewLayerResults(failed);
  // Words that cannot be told (not one per layer, no sequence number) are
  // not written at all.
  if (CheckCompletion(completion).ok()) {
    for (size_t l = 0; l < layers(); ++l) CompleteLayer(completion, l, failed.layers[l]);
  }
  return failed;
}

StageResult StepStager::GatherLayers(std::span<const uint64_t> ids, std::byte* out, const StepCompletion& completion,
                                     StageResult step, uint64_t start) const {
  const size_t per_layer = step.tokens * rows_per_token_;
  std::vector<StageLayerResult> results = NewLayerResults(step);
  for (size_t l = 0; l < layers(); ++l) {
    StageLayerResult& layer = results[l];
    if (per_layer > 0) {
      const GatherResult g = store_.Gather(tables_[l], ids.subspan(l * per_layer, per_layer), LayerDestination(out, l));
      Accumulate(layer, g);
    }
    layer.wait_nanoseconds = ElapsedNanos(start, NowNanoseconds());
    CompleteLayer(completion, l, layer);
  }
  SumLayers(step, std::move(results));
  return step;
}

StageResult StepStager::Stage(std::span<const uint32_t> history, std::span<const uint32_t> tokens, std::byte* out,
                              const StepCompletion& completion) const {
  const uint64_t start = NowNanoseconds();
  if (Status bad = CheckStep(tokens.size(), out, completion); !bad.ok()) return FailedStep(bad, tokens.size(), completion);
  // Scratch per thread: a thread's steps of the same size allocate nothing here.
  thread_local std::vector<uint64_t> ids;
  if (Status bad = HashLayers(history, tokens, ids); !bad.ok()) return FailedStep(bad, tokens.size(), completion);
  StageResult step;
  step.tokens = tokens.size();
  step.rows = ids.size();
  step.hash_nanoseconds = ElapsedNanos(start, NowNanoseconds());
  return GatherLayers(ids, out, completion, std::move(step), start);
}

StageResult StepStager::GatherStep(std::span<const uint64_t> step_ids, std::byte* out,
                                   const StepCompletion& completion) const {
  const uint64_t start = NowNanoseconds();
  const size_t tokens = step_ids.size() / (layers() * size_t(rows_per_token_));
  if (Status bad = CheckStep(tokens, out, completion); !bad.ok()) return FailedStep(bad, tokens, completion);
  if (Status bad = CheckGatherStepIds(step_ids); !bad.ok()) return FailedStep(bad, tokens, completion);
  StageResult step;
  step.tokens = tokens;
  step.rows = step_ids.size();
  // One layer's IDs are already the gather's: [token][slot].
  if (layers() == 1) return GatherLayers(step_ids, out, completion, std::move(step), start);
  thread_local std::vector<uint64_t> ids;
  SplitByLayer(step_ids, ids);
  step.hash_nanoseconds = ElapsedNanos(start, NowNanoseconds());
  return GatherLayers(ids, out, completion, std::move(step), start);
}

// A started step's completion, shared by its ticket and its gathers'
// callbacks.
//
// Guarded by mu: the per-layer results, which the gathers' completion
// callbacks (store completion threads, the layer starter, or the starting
// thread for a gather that completes at once) write and waiters read.
// Set before the first gather starts and only read after: layer_count,
// step, start_nanoseconds, completion; done is moved out once, under mu, by
// the callback that completes the last layer.
struct StageTicket::State : std::enable_shared_from_this<StageTicket::State> {
  // Starts a layer's gather (set by a step of more than one layer).
  using StartLayer = std::function<void(std::shared_ptr<State>, size_t layer)>;

  State(size_t layers, StageResult hashed, std::vector<StageLayerResult> results, uint64_t start,
        StepCompletion step_completion)
      : layer_count(layers),
        step(std::move(hashed)),
        start_nanoseconds(start),
        completion(std::move(step_completion)) {
    MutexLock lock(&mu);  // no gather has started yet; the lock satisfies the analysis
    layer_results = std::move(results);
    ready.assign(layers, 0);
    layers_left = layers;
  }

  const size_t layer_count;
  const StageResult step;  // tokens, rows, hash time, and a failure before the gathers
  const uint64_t start_nanoseconds;
  const StepCompletion completion;
  Mutex mu;
  CondVar layer_ready;
  std::vector<StageLayerResult> layer_results GUARDED_BY(mu);
  std::vector<uint8_t> ready GUARDED_BY(mu);  // per layer: its rows are in out, its word stored
  size_t layers_left GUARDED_BY(mu) = 0;
  std::function<void(StageResult)> done GUARDED_BY(mu);  // StartStage's; empty for a ticket
  StartLayer start_layer GUARDED_BY(mu);                  // starts the layer after a finished one

  // Every layer of a step that gathers nothing (no tokens, or it failed
  // before its gathers) is ready.
  void EndEmptyLayers() EXCLUDES(mu) {
    for (size_t l = 0; l < layer_count; ++l) {
      StageLayerResult r;
      {
        MutexLock lock(&mu);
        layer_results[l].wait_nanoseconds = ElapsedNanos(start_nanoseconds, NowNanoseconds());
        r = layer_results[l];
      }
      EndLayer(l, r);
    }
  }
  // Layer `layer`'s gather finished: the next layer starts, then this one
  // completes (hook, word) and is ready.
  void GatherDone(size_t layer, const GatherResult& g) EXCLUDES(mu) {
    StartLayer start_next;
    StageLayerResult r;
    {
      MutexLock lock(&mu);
      StageLayerResult& result = layer_results[layer];
      Accumulate(result, g);
      result.wait_nanoseconds = ElapsedNanos(start_nanoseconds, NowNanoseconds());
      r = result;
      if (layer + 1 < layer_count) start_next = start_layer;
    }
    // Outside the lock: it hands work to another thread, which then asks
    // this state about its layers.
    if (start_next) start_next(shared_from_this(), layer + 1);
    EndLayer(layer, r);
  }
  void WaitLayer(size_t layer) REQUIRES(mu) {
    while (!ready[layer]) layer_ready.Wait(&mu);
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
  // Tells the layer's completion, marks it ready, and ends the step after
  // its last layer.
  void EndLayer(size_t layer, const StageLayerResult& r) EXCLUDES(mu) {
    CompleteLayer(completion, layer, r);
    std::function<void(StageResult)> finish;
    StageResult result;
    {
      MutexLock lock(&mu);
      ready[layer] = 1;
      --layers_left;
      layer_ready.SignalAll();
      if (layers_left > 0 || !done) return;
      result = ResultLocked();
      finish = std::move(done);
    }
    finish(std::move(result));
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
  return state_->ready[layer] != 0;
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

namespace {

// The step this thread is starting a layer of in Launch, and the layer its
// gather's callback, run at once on this thread, asked to start next.
constexpr size_t kNoLayer = SIZE_MAX;
thread_local const void* launching = nullptr;
thread_local size_t next_inline_layer = kNoLayer;

}  // namespace

// Starts the later layers of launched steps, on a thread of its own: a
// layer is ready in a gather's completion callback, on a store completion
// thread, which must not block; starting gathers may wait for read buffers
// that only those threads free. Counts the layers posted and not yet
// started, so the stager's destructor can wait for them.
struct StepStager::LayerStarter {
  boost::asio::thread_pool thread{1};
  Mutex mu;
  CondVar idle;
  size_t layers_to_start GUARDED_BY(mu) = 0;

  void Begin() EXCLUDES(mu) {
    MutexLock lock(&mu);
    ++layers_to_start;
  }
  void End() EXCLUDES(mu) {
    MutexLock lock(&mu);
    if (--layers_to_start == 0) idle.SignalAll();
  }
  void WaitIdle() EXCLUDES(mu) {
    MutexLock lock(&mu);
    while (layers_to_start > 0) idle.Wait(&mu);
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
  // The callback holds the plan (its row IDs) until its gather is done.
  const size_t per_layer = plan->tokens * rows_per_token_;
  store_.StartGather(tables_[layer], std::span<const uint64_t>(plan->row_ids).subspan(layer * per_layer, per_layer),
                     LayerDestination(plan->out, layer),
                     [state, plan, layer](GatherResult g) { state->GatherDone(layer, g); });
}

std::shared_ptr<StageTicket::State> StepStager::Launch(Result<std::shared_ptr<Plan>> plan, size_t tokens,
                                                       std::function<void(StageResult)> done,
                                                       StepCompletion completion) const {
  StageResult step;
  uint64_t start = NowNanoseconds();
  if (plan.ok()) {
    step = (*plan)->result;
    start = (*plan)->start_nanoseconds;
  } else {
    step.status = plan.status();
    step.tokens = tokens;
    step.rows = tokens * layers() * rows_per_token_;
    // Completion words that cannot be told (the wrong count, no sequence
    // number) are not written at all.
    if (!CheckCompletion(completion).ok()) completion = StepCompletion();
  }
  auto state = std::make_shared<StageTicket::State>(layers(), step, NewLayerResults(step), start,
                                                    std::move(completion));
  {
    MutexLock lock(&state->mu);
    state->done = std::move(done);
  }
  if (!plan.ok() || (*plan)->tokens == 0) {
    state->EndEmptyLayers();
    return state;
  }
  std::shared_ptr<Plan> p = std::move(plan).value();
  // Layer by layer: layer k+1's gather starts when layer k is in, so layer
  // k's reads and disk phase never queue behind a later layer's (measured:
  // docs/lab-notes/2026-12-05-per-layer-readiness.md). A layer that is in
  // at once (every row a hit) has its next layer started by this thread,
  // after the loop below; any other, by the layer starter's thread.
  if (layers() > 1) {
    MutexLock lock(&state->mu);
    state->start_layer = [this, p](std::shared_ptr<StageTicket::State> s, size_t layer) {
      if (launching == s.get()) {
        next_inline_layer = layer;
        return;
      }
      LayerStarter& later = starter();
      later.Begin();
      boost::asio::post(later.thread, [this, p, s = std::move(s), layer, &later] {
        StartLayer(p, s, layer);
        later.End();
      });
    };
  }
  for (size_t layer = 0; layer != kNoLayer;) {
    launching = state.get();
    next_inline_layer = kNoLayer;
    StartLayer(p, state, layer);
    launching = nullptr;
    layer = next_inline_layer;
  }
  return state;
}

Result<std::shared_ptr<StepStager::Plan>> StepStager::PlanStage(std::span<const uint32_t> history,
                                                                std::span<const uint32_t> tokens, std::byte* out,
                                                                const StepCompletion& completion) const {
  auto plan = std::make_shared<Plan>();
  plan->start_nanoseconds = NowNanoseconds();
  ENGRAM_RETURN_IF_ERROR(CheckStep(tokens.size(), out, completion));
  ENGRAM_RETURN_IF_ERROR(HashLayers(history, tokens, plan->row_ids));
  plan->out = out;
  plan->tokens = tokens.size();
  plan->result.tokens = tokens.size();
  plan->result.rows = plan->row_ids.size();
  plan->result.hash_nanoseconds = ElapsedNanos(plan->start_nanoseconds, NowNanoseconds());
  return plan;
}

Result<std::shared_ptr<StepStager::Plan>> StepStager::PlanGatherStep(std::span<const uint64_t> ids, std::byte* out,
                                                                     const StepCompletion& completion) const {
  auto plan = std::make_shared<Plan>();
  plan->start_nanoseconds = NowNanoseconds();
  const size_t tokens = ids.size() / (layers() * size_t(rows_per_token_));
  ENGRAM_RETURN_IF_ERROR(CheckStep(tokens, out, completion));
  ENGRAM_RETURN_IF_ERROR(CheckGatherStepIds(ids));
  SplitByLayer(ids, plan->row_ids);
  plan->out = out;
  plan->tokens = tokens;
  plan->result.tokens = tokens;
  plan->result.rows = ids.size();
  plan->result.hash_nanoseconds = ElapsedNanos(plan->start_nanoseconds, NowNanoseconds());
  return plan;
}

StageTicket StepStager::Start(std::span<const uint32_t> history, std::span<const uint32_t> tokens, std::byte* out,
                              std::function<void(StageResult)> done, StepCompletion completion) const {
  auto plan = PlanStage(history, tokens, out, completion);
  return StageTicket(Launch(std::move(plan), tokens.size(), std::move(done), std::move(completion)));
}

void StepStager::StartStage(std::span<const uint32_t> history, std::span<const uint32_t> tokens, std::byte* out,
                            std::function<void(StageResult)> done, StepCompletion completion) const {
  auto plan = PlanStage(history, tokens, out, completion);
  Launch(std::move(plan), tokens.size(), std::move(done), std::move(completion));
}

StageTicket StepStager::StartGatherStep(std::span<const uint64_t> ids, std::byte* out,
                                        std::function<void(StageResult)> done, StepCompletion completion) const {
  auto plan = PlanGatherStep(ids, out, completion);
  const size_t tokens = ids.size() / (layers() * size_t(rows_per_token_));
  return StageTicket(Launch(std::move(plan), tokens, std::move(done), std::move(completion)));
}

}  // namespace engram
