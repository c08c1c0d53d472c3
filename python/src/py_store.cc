#include "python/src/py_store.h"

#include <cmath>
#include <utility>

#include "python/src/errors.h"

namespace py = pybind11;

namespace engram::python {
namespace {

// out for a gather of n rows: writable, C-contiguous uint8 [n, record_bytes].
ArrayView GatherOutput(py::handle out, size_t n, uint32_t record_bytes) {
  ArrayView v = ArrayView::Borrow(out, /*writable=*/true, "out");
  if (v.kind() != ElementKind::kUnsignedInt || v.itemsize() != 1) {
    throw py::value_error("out must be a uint8 array, got " + v.Describe());
  }
  if (v.shape().size() != 2 || size_t(v.shape()[0]) != n || size_t(v.shape()[1]) != record_bytes) {
    throw py::value_error("out must have shape [" + std::to_string(n) + ", " + std::to_string(record_bytes) +
                          "] (len(row_ids), record_bytes), got " + v.Describe());
  }
  if (!v.contiguous()) {
    throw py::value_error("out must be C-contiguous: rows are written in place, never through a temporary copy");
  }
  return v;
}

// The async forms write into out after they return, so out's memory must
// stay where it is until then. Holding a torch tensor (its DLPack capsule or
// its storage) does not pin that memory: Tensor.resize_() swaps a larger
// allocation into the same storage and frees the old one under the pending
// writes. A numpy array refuses to resize while referenced, and a torch
// tensor over numpy memory (torch.from_numpy) refuses to resize at all.
void RefuseMovableOut(const ArrayView& out, const char* call) {
  if (out.from_dlpack()) {
    throw py::type_error(std::string(call) +
                         ": out must be a numpy array (or another buffer-protocol object), not a DLPack/torch tensor: "
                         "Tensor.resize_() can reallocate a tensor's memory while the store writes into it. "
                         "Pass a numpy array and use torch.from_numpy(array) as the tensor, or call the synchronous form");
  }
}

// A node client's deadline, given in seconds, as the milliseconds
// StoreOptions takes: positive, finite and at most an hour, rounded up so
// that every positive value is at least 1 ms.
uint32_t DeadlineMilliseconds(const char* argument, double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > 3600) {
    throw py::value_error(std::string(argument) + "= must be a number of seconds in (0, 3600], got " +
                          std::string(py::repr(py::float_(seconds))));
  }
  return static_cast<uint32_t>(std::ceil(seconds * 1000));
}

// Store::Open refuses a client the service's options too, by their C++
// names; this says it with the Python argument the caller wrote. Each
// argument's Python default is StoreOptions' default, so leaving it out is
// leaving it at the service's choice.
void RefuseServiceArguments(const StoreOptions& o) {
  const StoreOptions d;
  const std::pair<const char*, bool> changed[] = {
      {"cache_bytes", o.cache_bytes != d.cache_bytes},
      {"policy", o.cache_policy != d.cache_policy},
      {"io_backend", o.io_backend != d.io_backend},
      {"direct_io", o.direct_io != d.direct_io},
      {"completion_threads", o.completion_threads != d.completion_threads},
      {"io_rings", o.io_rings != d.io_rings},
      {"metrics_listen", o.metrics_listen != d.metrics_listen},
      {"hot_set", o.hot_set_path != d.hot_set_path},
      {"hot_set_interval", o.hot_set_interval_seconds != d.hot_set_interval_seconds},
  };
  for (const auto& [argument, given] : changed) {
    if (given) {
      throw py::value_error("Store(node=...): " + std::string(argument) +
                            "= is engram-served's to set, once for all its clients (see engram-served --help); "
                            "a client leaves it out");
    }
  }
}

GatherResult Checked(GatherResult r) {
  if (!r.status.ok()) {
    RaiseStatus(r.status, r.failed_positions.empty() ? nullptr : &r.failed_positions);
  }
  return r;
}

}  // namespace

std::shared_ptr<const TokenMap> TokenMapArgument(py::handle token_map) {
  if (token_map.is_none()) return nullptr;
  if (py::isinstance<py::str>(token_map) || py::hasattr(token_map, "__fspath__")) {
    const std::string path = py::str(py::module_::import("os").attr("fspath")(token_map));
    return std::make_shared<const TokenMap>(ValueOrRaise(TokenMap::FromFile(path)));
  }
  std::vector<uint32_t> ids = TokenIds(token_map, "token_map");
  if (ids.empty()) throw py::value_error("token_map is empty");
  return std::make_shared<const TokenMap>(std::move(ids));
}

GatherHandle::~GatherHandle() {
  py::gil_scoped_release release;
  if (started_) completion_->Wait();
  // The last reference to a store closes it, which may wait (a node client
  // waits for its gathers in flight).
  store_.reset();
}

GatherResult GatherHandle::Wait() {
  {
    py::gil_scoped_release release;
    completion_->Wait();
  }
  // Done: the buffers are no longer the store's.
  ids_.reset();
  out_.reset();
  row_ids_obj_ = py::object();
  out_obj_ = py::object();
  return Checked(completion_->Wait());
}

StageHandle::~StageHandle() {
  py::gil_scoped_release release;
  if (started_) Finish();
  stager_.reset();
  store_.reset();
}

void TicketSlot::Set(StageTicket ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  ticket_.emplace(std::move(ticket));
  cv_.notify_all();
}

const StageTicket& TicketSlot::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return ticket_.has_value(); });
  return *ticket_;
}

const StageTicket* TicketSlot::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  return ticket_ ? &*ticket_ : nullptr;
}

void StageHandle::DequantizeLayer(size_t layer) {
  // raw_ is [token][layer][slot][record], out [token][layer][slot][value]:
  // one run of rows_per_token records per token.
  const size_t per_token = stager_->rows_per_token(), layers = stager_->layers();
  const size_t record = stager_->record_bytes(), values = fp8_->weight_bytes;
  const size_t tokens = raw_.size() / (layers * per_token * record);
  for (size_t t = 0; t < tokens; ++t) {
    const size_t first = (t * layers + layer) * per_token;
    if (half_) {
      Dequantize(raw_.data() + first * record, per_token, record, *fp8_,
                 reinterpret_cast<_Float16*>(out_->data()) + first * values);
    } else {
      Dequantize(raw_.data() + first * record, per_token, record, *fp8_,
                 reinterpret_cast<float*>(out_->data()) + first * values);
    }
  }
}

StepCompletion StageHandle::StepCompletionFor(uint32_t sequence) {
  StepCompletion c;
  if (words_) {
    c.words = std::span<uint32_t>(reinterpret_cast<uint32_t*>(words_->data()), words_->size());
    c.sequence = sequence;
  }
  // The handle outlives the step: dropping it waits for the step first.
  if (fp8_) {
    c.layer_done = [this](size_t layer, const StageLayerResult& r) {
      if (r.status.ok()) DequantizeLayer(layer);
    };
  }
  return c;
}

StageResult& StageHandle::Finish() {
  StageResult& r = completion_->Wait();
  // Under a lock: two threads may wait on one handle, and only one frees
  // the raw records (every layer was dequantized as it landed).
  std::lock_guard<std::mutex> lock(finish_mu_);
  std::vector<std::byte>().swap(raw_);
  return r;
}

size_t StageHandle::LayerIndex(py::handle layer) const {
  if (PyBool_Check(layer.ptr()) || !PyIndex_Check(layer.ptr())) {
    throw py::type_error("layer must be an int (a position in the step's layers), not " + TypeName(layer));
  }
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(layer.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long i = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0 || i < 0 || size_t(i) >= stager_->layers()) {
    throw py::index_error("layer " + std::string(py::str(index)) + " out of range (the step has " +
                          std::to_string(stager_->layers()) + " layers)");
  }
  return size_t(i);
}

bool StageHandle::Ready(py::handle layer) {
  const size_t l = LayerIndex(layer);
  if (completion_->done()) return true;
  const StageTicket* ticket = ticket_->Get();
  if (ticket == nullptr) return false;  // the gathers are not started yet
  Result<bool> ready = ticket->Ready(l);
  return ready.ok() && *ready;
}

StageLayerResult StageHandle::WaitLayer(py::handle layer) {
  const size_t l = LayerIndex(layer);
  StageLayerResult r;
  {
    py::gil_scoped_release release;
    if (completion_->done()) {
      // Staged synchronously, or finished: the step's result has the layer's.
      StageResult& step = Finish();
      r = l < step.layers.size() ? step.layers[l] : StageLayerResult{step.status};
    } else {
      r = ticket_->Wait().WaitLayer(l);  // dequantized, if out is float, before it is ready
    }
  }
  if (!r.status.ok()) RaiseStatus(r.status);
  return r;
}

StageResult StageHandle::Wait() {
  StageResult* r;
  {
    py::gil_scoped_release release;
    r = &Finish();
  }
  out_.reset();
  out_obj_ = py::object();
  words_.reset();
  words_obj_ = py::object();
  if (!r->status.ok()) RaiseStatus(r->status);
  return *r;
}

PyStore::PyStore(const std::vector<std::string>& tables, uint64_t cache_bytes, const std::string& policy,
                 const std::string& io_backend, const std::optional<std::string>& metrics_listen,
                 py::handle token_map, bool direct_io, uint32_t completion_threads, uint32_t io_rings,
                 const std::vector<std::string>& manifests, int32_t rank,
                 // warm start
                 const std::optional<std::string>& hot_set, double hot_set_interval,
                 // one store per node
                 const std::optional<std::string>& node, const std::optional<std::string>& client_name,
                 std::optional<double> node_open_timeout, std::optional<double> node_call_timeout) {
  if (tables.empty() && manifests.empty()) throw py::value_error("Store needs at least one table or manifest");
  StoreOptions options;
  for (const std::string& path : tables) {
    TableOptions table;
    table.path = path;
    options.tables.push_back(table);
  }
  // Rank tables: each manifest's file for `rank`, after the plain tables.
  for (const std::string& path : manifests) {
    TableOptions table;
    table.manifest = path;
    options.tables.push_back(table);
  }
  options.rank = rank;
  options.cache_bytes = cache_bytes;
  options.cache_policy = policy;
  options.io_backend = io_backend;
  options.metrics_listen = metrics_listen.value_or("");
  options.direct_io = direct_io;
  options.completion_threads = completion_threads;
  options.io_rings = io_rings;
  // Warm start.
  options.hot_set_path = hot_set.value_or("");
  options.hot_set_interval_seconds = hot_set_interval;
  // One store per node: a client of the engram-served at this socket.
  if (node.has_value()) {
    // StoreOptions::node = "" is a private store: never what node="" meant.
    if (node->empty()) {
      throw py::value_error("node= is an empty socket path: give the path of engram-served's --socket, or "
                            "node=None for a store of this process's own");
    }
    RefuseServiceArguments(options);
    options.node = *node;
    options.node_client_name = client_name.value_or("");
    if (node_open_timeout) options.node_open_timeout_ms = DeadlineMilliseconds("node_open_timeout", *node_open_timeout);
    if (node_call_timeout) options.node_call_timeout_ms = DeadlineMilliseconds("node_call_timeout", *node_call_timeout);
  } else {
    const std::pair<const char*, bool> client_only[] = {{"client_name", client_name.has_value()},
                                                        {"node_open_timeout", node_open_timeout.has_value()},
                                                        {"node_call_timeout", node_call_timeout.has_value()}};
    for (const auto& [argument, given] : client_only) {
      if (given) throw py::value_error(std::string(argument) + "= is for a client of a node service: give node= too");
    }
  }
  token_map_ = TokenMapArgument(token_map);
  Result<std::unique_ptr<Store>> opened = Status::Internal("not opened");
  {
    py::gil_scoped_release release;
    opened = Store::Open(options);
  }
  store_ = std::shared_ptr<Store>(ValueOrRaise(std::move(opened)));
}

PyStore::~PyStore() {
  if (store_ == nullptr && stage_thread_ == nullptr) return;
  py::gil_scoped_release release;
  stage_thread_.reset();
  store_.reset();
}

void PyStore::Close() {
  std::shared_ptr<Store> store;
  std::unique_ptr<JobThread> stage_thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stagers_.clear();
    store = std::move(store_);
    stage_thread = std::move(stage_thread_);
  }
  // Steps already issued still complete; outstanding handles keep their own
  // reference to the store, and the last one closes it.
  py::gil_scoped_release release;
  stage_thread.reset();
  store.reset();
}

std::shared_ptr<Store> PyStore::store() const {
  std::shared_ptr<Store> s = store_;
  if (s == nullptr) throw py::value_error("the store is closed");
  return s;
}

size_t PyStore::Table(py::handle table) const {
  const std::shared_ptr<Store> s = store();
  if (py::isinstance<py::str>(table)) {
    Result<size_t> found = s->FindTable(table.cast<std::string>());
    if (!found.ok()) throw py::value_error(found.status().ToString());
    return *found;
  }
  // True has __index__ too; an array (row IDs passed first) or a tensor of
  // several elements has one that fails.
  const std::string expected = "table must be a table index (int) or name (str), not ";
  if (PyBool_Check(table.ptr()) || !PyIndex_Check(table.ptr())) throw py::type_error(expected + TypeName(table));
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(table.ptr()));
  if (!index) {
    py::error_already_set cause;
    throw py::type_error(expected + TypeName(table) + " (" + cause.what() + ")");
  }
  int overflow = 0;
  const long long i = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0 || i < 0 || size_t(i) >= s->table_count()) {
    throw py::value_error("table index " + std::string(py::str(index)) + " out of range (the store has " +
                          std::to_string(s->table_count()) + " tables)");
  }
  return size_t(i);
}

std::vector<std::string> PyStore::table_names() const {
  const std::shared_ptr<Store> s = store();
  std::vector<std::string> names;
  for (size_t i = 0; i < s->table_count(); ++i) names.push_back(s->table_name(i));
  return names;
}

std::string PyStore::metrics_text() const {
  const std::shared_ptr<Store> s = store();
  py::gil_scoped_release release;
  return s->MetricsText();
}

py::dict PyStore::Stats() const {
  const std::shared_ptr<Store> s = store();
  std::vector<TableStats> tables(s->table_count());
  {
    // A node client asks the service, and waits for its answer.
    py::gil_scoped_release release;
    for (size_t i = 0; i < tables.size(); ++i) tables[i] = s->Stats(i);
  }
  for (const TableStats& t : tables) {
    if (!t.status.ok()) RaiseStatus(t.status);  // a node client's service did not answer
  }
  py::dict all;
  for (size_t i = 0; i < tables.size(); ++i) {
    const TableStats& t = tables[i];
    py::dict d;
    d["index"] = i;
    d["path"] = t.path;
    d["row_count"] = t.row_count;
    d["record_bytes"] = t.record_bytes;
    d["cache_budget_bytes"] = t.cache_budget_bytes;
#define ENGRAM_X(member, metric, unit, help) d[#member] = t.member;
    ENGRAM_TABLE_COUNTERS(ENGRAM_X)
#undef ENGRAM_X
    for (const CacheStatInfo& stat : kCacheStats) {
      const std::string key = std::string("cache_") + stat.name;
      d[py::str(key)] = stat.Total(t.cache);
      if (stat.kind != CacheStatKind::kByReason) continue;
      for (const RefusalReasonInfo& reason : kRefusalReasons) {
        d[py::str(key + "_" + reason.name)] = (t.cache.*stat.by_reason)[static_cast<int>(reason.reason)];
      }
    }
    d["cache_hit_rate"] = t.cache.hit_rate();
    all[py::str(t.name)] = d;
  }
  return all;
}

GatherResult PyStore::Gather(py::handle table, py::handle row_ids, py::handle out) {
  const std::shared_ptr<Store> s = store();
  const size_t t = Table(table);
  RowIds ids(row_ids, "row_ids");
  ArrayView dst = GatherOutput(out, ids.size(), s->record_bytes(t));
  GatherResult r;
  {
    py::gil_scoped_release release;
    r = s->Gather(t, std::span<const uint64_t>(ids.data(), ids.size()), dst.data(), s->record_bytes(t));
  }
  return Checked(std::move(r));
}

std::unique_ptr<GatherHandle> PyStore::GatherAsync(py::handle table, py::object row_ids, py::object out) {
  const std::shared_ptr<Store> s = store();
  const size_t t = Table(table);
  auto handle = std::make_unique<GatherHandle>(s, row_ids, out);
  handle->ids_.emplace(row_ids, "row_ids");
  handle->out_.emplace(GatherOutput(out, handle->ids_->size(), s->record_bytes(t)));
  RefuseMovableOut(*handle->out_, "gather_async");
  const std::span<const uint64_t> span(handle->ids_->data(), handle->ids_->size());
  std::byte* dst = handle->out_->data();
  handle->started_ = true;
  {
    py::gil_scoped_release release;
    s->StartGather(t, span, dst, s->record_bytes(t),
                   [completion = handle->completion_](GatherResult r) { completion->Deliver(std::move(r)); });
  }
  return handle;
}

void PyStore::ReadAhead(py::handle table, py::handle row_ids) {
  const std::shared_ptr<Store> s = store();
  const size_t t = Table(table);
  RowIds ids(row_ids, "row_ids");
  Status st;
  {
    py::gil_scoped_release release;
    st = s->ReadAhead(t, std::span<const uint64_t>(ids.data(), ids.size()));
  }
  ThrowIfError(st);
}

void PyStore::ReleaseReadAhead(py::handle table, py::handle row_ids) {
  const std::shared_ptr<Store> s = store();
  const size_t t = Table(table);
  RowIds ids(row_ids, "row_ids");
  py::gil_scoped_release release;
  s->ReleaseReadAhead(t, std::span<const uint64_t>(ids.data(), ids.size()));
}

void PyStore::WaitForReadAheads() {
  const std::shared_ptr<Store> s = store();
  py::gil_scoped_release release;
  s->WaitForReadAheads();
}

void PyStore::WaitForCacheMemory() {
  const std::shared_ptr<Store> s = store();
  py::gil_scoped_release release;
  s->WaitForCacheMemory();
}

void PyStore::WaitForWarmUp() {
  const std::shared_ptr<Store> s = store();
  py::gil_scoped_release release;
  s->WaitForWarmUp();
}

std::shared_ptr<const StepStager> PyStore::Stager(py::handle layers) {
  const std::shared_ptr<Store> s = store();
  std::vector<size_t> tables;
  if (layers.is_none()) {
    for (size_t i = 0; i < s->table_count(); ++i) tables.push_back(i);
  } else {
    // A str is iterable too, but as characters, never as table names.
    if (py::isinstance<py::str>(layers) || PyBytes_Check(layers.ptr()) || !py::isinstance<py::iterable>(layers)) {
      throw py::type_error("layers must be a sequence of table indexes or names (e.g. [\"layer1\"]), not " +
                           TypeName(layers));
    }
    for (py::handle layer : layers) tables.push_back(Table(layer));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = stagers_.find(tables);
  if (it != stagers_.end()) return it->second;
  std::shared_ptr<const StepStager> stager = ValueOrRaise(StepStager::Create(*s, tables, token_map_));
  stagers_.emplace(tables, stager);
  return stager;
}

std::unique_ptr<StageHandle> PyStore::NewStepHandle(const std::shared_ptr<const StepStager>& stager, size_t n,
                                                    py::object out, py::object words, uint64_t sequence, bool async,
                                                    std::byte** dst) {
  std::shared_ptr<Store> s = store();
  auto handle = std::make_unique<StageHandle>(s, stager, out);
  handle->out_.emplace(ArrayView::Borrow(out, /*writable=*/true, "out"));
  const ArrayView& v = *handle->out_;
  const size_t layer_count = stager->layers(), slots = stager->rows_per_token();
  size_t width = stager->record_bytes();
  if (v.kind() == ElementKind::kFloat && (v.itemsize() == 2 || v.itemsize() == 4)) {
    handle->fp8_ = ValueOrRaise(Fp8RecordLayoutFromMetadata(s->metadata_json(stager->tables()[0]), stager->record_bytes()));
    handle->half_ = v.itemsize() == 2;
    width = handle->fp8_->weight_bytes;
  } else if (v.kind() != ElementKind::kUnsignedInt || v.itemsize() != 1) {
    throw py::value_error("out must be uint8 (raw records) or float16/float32 (dequantized), got " + v.Describe());
  }
  const std::vector<int64_t> want = {int64_t(n), int64_t(layer_count), int64_t(slots), int64_t(width)};
  if (v.shape() != want) {
    // A rank's tables hold some of the slots: say so, since an out shaped
    // for another rank (or for every slot) is the likely mistake.
    const uint32_t layer_slots = stager->hasher(0).layout().rows_per_token();
    const std::string slot_axis = slots == layer_slots ? "rows per token"
                                                       : "this rank's slots, " + std::to_string(slots) + " of " +
                                                             std::to_string(layer_slots);
    throw py::value_error("out must have shape [" + std::to_string(n) + ", " + std::to_string(layer_count) + ", " +
                          std::to_string(slots) + ", " + std::to_string(width) + "] (tokens, layers, " + slot_axis +
                          ", " + (handle->fp8_ ? "values" : "record_bytes") + "), got " + v.Describe());
  }
  if (!v.contiguous()) throw py::value_error("out must be C-contiguous: rows are written in place");
  if (async) RefuseMovableOut(v, "stage_async");
  if (!words.is_none()) {
    handle->words_.emplace(ArrayView::Borrow(words, /*writable=*/true, "words"));
    const ArrayView& w = *handle->words_;
    if (w.kind() != ElementKind::kUnsignedInt || w.itemsize() != 4 || w.shape().size() != 1 || !w.contiguous()) {
      throw py::value_error("words must be a contiguous 1-D uint32 array (one word per layer), got " + w.Describe());
    }
    if (async && w.from_dlpack()) {
      throw py::type_error("words must be a numpy array (or another buffer-protocol object), not a DLPack/torch "
                           "tensor: the store writes them after the call returns");
    }
    handle->words_obj_ = std::move(words);
  } else if (sequence != 0) {
    throw py::value_error("sequence= is what the completion words are set to: give words= too");
  }
  StepCompletion check;
  if (handle->words_) {
    check.words = std::span<uint32_t>(reinterpret_cast<uint32_t*>(handle->words_->data()), handle->words_->size());
    check.sequence = sequence > kMaxStepSequence ? 0 : static_cast<uint32_t>(sequence);
  }
  ThrowIfError(stager->CheckCompletion(check));
  *dst = v.data();
  if (handle->fp8_) {
    handle->raw_.resize(stager->OutputBytes(n));
    *dst = handle->raw_.data();
  }
  return handle;
}

void PyStore::PostStep(std::function<void()> job) {
  // Under mu_ with the GIL held: Close() (on another thread) cannot take
  // the staging thread away between the check and the Post. Post only
  // queues the job, so holding the GIL here blocks nobody for long.
  std::lock_guard<std::mutex> lock(mu_);
  if (store_ == nullptr) throw py::value_error("the store is closed");
  if (stage_thread_ == nullptr) stage_thread_ = std::make_unique<JobThread>();
  stage_thread_->Post(std::move(job));
}

std::unique_ptr<StageHandle> PyStore::StartStage(py::handle tokens, py::handle history, py::object out,
                                                 py::handle layers, py::object words, uint64_t sequence,
                                                 bool async) {
  std::shared_ptr<const StepStager> stager = Stager(layers);
  const std::vector<uint32_t> step = TokenIds(tokens, "tokens");
  std::byte* dst = nullptr;
  std::unique_ptr<StageHandle> handle =
      NewStepHandle(stager, step.size(), std::move(out), std::move(words), sequence, async, &dst);
  // Only the history's last tokens are hashed: only those are converted.
  auto before = std::make_shared<HistoryTokens>(history, "history", stager->history_tokens());
  StepCompletion completion = handle->StepCompletionFor(static_cast<uint32_t>(sequence));
  handle->started_ = true;
  if (async) {
    // The staging thread only hashes and starts the gathers (layer by
    // layer); the store finishes them, so the handle can tell each layer's
    // readiness on its own.
    PostStep([store = store(), stager, before, step, dst, completion = handle->completion_,
              ticket = handle->ticket_, step_completion = std::move(completion)]() mutable {
      ticket->Set(stager->Start(
          before->span(), step, dst, [completion](StageResult r) { completion->Deliver(std::move(r)); },
          std::move(step_completion)));
    });
  } else {
    // The calling thread gathers every layer and reads its own misses.
    py::gil_scoped_release release;
    handle->completion_->Deliver(stager->Stage(before->span(), step, dst, completion));
  }
  return handle;
}

std::unique_ptr<StageHandle> PyStore::StartGatherStep(py::handle ids, py::object out, py::handle layers,
                                                      py::object words, uint64_t sequence, bool async) {
  std::shared_ptr<const StepStager> stager = Stager(layers);
  RowIds rows(ids, "ids");
  const std::vector<int64_t>& shape = rows.shape();
  const size_t layer_count = stager->layers(), slots = stager->rows_per_token();
  if (shape.size() != 3 || size_t(shape[1]) != layer_count || size_t(shape[2]) != slots) {
    std::string got = "[";
    for (size_t d = 0; d < shape.size(); ++d) got += (d ? ", " : "") + std::to_string(shape[d]);
    throw py::value_error("ids must have shape [tokens, " + std::to_string(layer_count) + ", " +
                          std::to_string(slots) + "] (tokens, layers, slots), got " + got + "]");
  }
  const size_t n = size_t(shape[0]);
  std::byte* dst = nullptr;
  std::unique_ptr<StageHandle> handle =
      NewStepHandle(stager, n, std::move(out), std::move(words), sequence, async, &dst);
  const std::span<const uint64_t> span(rows.data(), rows.size());
  ThrowIfError(stager->CheckGatherStepIds(span));
  StepCompletion completion = handle->StepCompletionFor(static_cast<uint32_t>(sequence));
  handle->started_ = true;
  if (async) {
    std::vector<uint64_t> copy(span.begin(), span.end());
    PostStep([stager, copy = std::move(copy), dst, completion = handle->completion_, ticket = handle->ticket_,
              step_completion = std::move(completion)]() mutable {
      ticket->Set(stager->StartGatherStep(
          copy, dst, [completion](StageResult r) { completion->Deliver(std::move(r)); }, std::move(step_completion)));
    });
  } else {
    py::gil_scoped_release release;
    handle->completion_->Deliver(stager->GatherStep(span, dst, completion));
  }
  return handle;
}

StageResult PyStore::Stage(py::handle tokens, py::handle history, py::object out, py::handle layers, py::object words,
                           uint64_t sequence) {
  return StartStage(tokens, history, std::move(out), layers, std::move(words), sequence, /*async=*/false)->Wait();
}

std::unique_ptr<StageHandle> PyStore::StageAsync(py::handle tokens, py::handle history, py::object out,
                                                 py::handle layers, py::object words, uint64_t sequence) {
  return StartStage(tokens, history, std::move(out), layers, std::move(words), sequence, /*async=*/true);
}

StageResult PyStore::GatherStep(py::handle ids, py::object out, py::handle layers, py::object words,
                                uint64_t sequence) {
  return StartGatherStep(ids, std::move(out), layers, std::move(words), sequence, /*async=*/false)->Wait();
}

std::unique_ptr<StageHandle> PyStore::GatherStepAsync(py::handle ids, py::object out, py::handle layers,
                                                      py::object words, uint64_t sequence) {
  return StartGatherStep(ids, std::move(out), layers, std::move(words), sequence, /*async=*/true);
}

}  // namespace engram::python
