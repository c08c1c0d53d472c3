#include "src/store/store_impl.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "src/store/budget_split.h"
#include "src/store/gather_arguments.h"
#include "src/store/gather_operation.h"
#include "src/store/reference_reads.h"
#include "src/store/store_metrics.h"
#include "storage/io/io_stats.h"
#include "storage/log.h"
#include "storage/rank_manifest.h"
#include "storage/redis/redis_url.h"
#include "storage/redis/remote_table.h"

namespace engram {
namespace {

// A table's file: its path, or the file its rank manifest names for the
// store's rank (with the manifest, to check the file against once open).
struct RankTablePick {
  std::string path;
  std::optional<RankManifest> manifest;
  InputFileHold manifest_input;
};

Result<std::vector<RankTablePick>> PickRankTables(const StoreOptions& options) {
  bool any_manifest = false;
  std::vector<RankTablePick> picks;
  for (const TableOptions& t : options.tables) {
    RankTablePick pick;
    if (t.manifest.empty()) {
      pick.path = t.path;
      picks.push_back(std::move(pick));
      continue;
    }
    any_manifest = true;
    if (!t.path.empty()) {
      return Status::InvalidArgument("store: table '" + t.path + "' also gives manifest '" + t.manifest +
                                     "': give a path or a manifest, not both");
    }
    if (options.rank < 0) {
      return Status::InvalidArgument("store: table given by rank manifest '" + t.manifest +
                                     "' but no rank: set the rank (0..R-1) whose tables to open");
    }
    ENGRAM_ASSIGN_OR_RETURN(RankManifest m, ReadRankManifest(t.manifest));
    pick.manifest_input =
        HoldInputPath(t.manifest, "the rank manifest of table '" + (t.name.empty() ? m.name : t.name) + "'");
    if (static_cast<uint32_t>(options.rank) >= m.ranks) {
      return Status::InvalidArgument("store: rank " + std::to_string(options.rank) + " but manifest '" + t.manifest +
                                     "' has ranks 0.." + std::to_string(m.ranks - 1));
    }
    pick.path = m.rank_files[options.rank].path;
    pick.manifest = std::move(m);
    picks.push_back(std::move(pick));
  }
  if (!any_manifest && options.rank != -1) {
    return Status::InvalidArgument("store: rank " + std::to_string(options.rank) +
                                   " given, but no table is given by rank manifest");
  }
  return picks;
}

// A table file (or the rank table a manifest names), in the store's engine.
Status OpenFileTable(const std::string& path, const StoreOptions& options, const RankManifest* manifest,
                     const std::string& manifest_path, io::IoEngine& engine, TableState& state) {
  auto file = TableFile::Open(path, {options.verify_shard_fingerprints});
  if (!file.ok() && manifest) return file.status().WithContext("rank manifest " + manifest_path);
  ENGRAM_ASSIGN_OR_RETURN(state.file, std::move(file));
  if (manifest) {
    ENGRAM_RETURN_IF_ERROR(CheckRankTable(*manifest, static_cast<uint32_t>(options.rank), *state.file)
                               .WithContext("rank manifest " + manifest_path));
  }
  state.engine = &engine;
  if (state.file->is_reference()) return OpenReferenceShards(state, engine);
  auto fid = engine.OpenFile(path);
  if (!fid.ok()) return fid.status().WithContext("open table " + path);
  state.file_id = *fid;
  return Status::OK();
}

// A table in a Redis Cluster: its descriptor read and checked, its blocks
// read through a reader of its own (one cluster client: a connection per
// master, an I/O thread).
Status OpenRemoteTable(const std::string& url, const StoreOptions& options, TableState& state) {
  redis::ClusterOptions cluster;
  // As many GETs in flight on a master's connection as reads on a drive.
  cluster.pipeline_depth = std::max<uint32_t>(options.queue_depth, 1);
  ENGRAM_ASSIGN_OR_RETURN(redis::RemoteTable remote, redis::OpenRemoteTable(url, cluster));
  state.file = std::move(remote.file);
  state.remote = std::make_unique<redis::RemoteBlockEngine>(std::move(remote.client), std::move(remote.keys),
                                                            state.file->block_count(), remote.url.name);
  state.engine = state.remote.get();
  state.file_id = redis::RemoteBlockEngine::kTableFile;
  log::Info("store: table {} is read from {}", state.file->path(), state.remote->Describe());
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Store>> OpenStoreWithEngineFactory(const StoreOptions& options,
                                                          const IoEngineFactory& engine_factory) {
  ENGRAM_ASSIGN_OR_RETURN(auto impl, StoreImpl::Open(options, engine_factory));
  return std::unique_ptr<Store>(std::move(impl));
}

Result<std::unique_ptr<StoreImpl>> StoreImpl::Open(const StoreOptions& options,
                                                   const IoEngineFactory& engine_factory) {
  StoreHooks hooks;
  hooks.engine_factory = engine_factory;
  return Open(options, hooks);
}

Result<std::unique_ptr<StoreImpl>> StoreImpl::Open(const StoreOptions& options, const StoreHooks& hooks) {
  const IoEngineFactory& engine_factory = hooks.engine_factory;
  if (!options.node.empty()) {
    return Status::InvalidArgument("store: StoreOptions::node names a node service; Store::Open opens its client");
  }
  if (options.tables.empty()) return Status::InvalidArgument("store: no tables given");
  ENGRAM_ASSIGN_OR_RETURN(RowCacheConfig cache_config, RowCacheConfig::FromSpec(options.cache_policy));
  ENGRAM_ASSIGN_OR_RETURN(io::IoBackend backend, io::ParseIoBackend(options.io_backend));

  if (!(options.hot_set_interval_seconds >= 0.0) || options.hot_set_interval_seconds > 1e9) {
    return Status::InvalidArgument("store: hot_set_interval_seconds must be in [0, 1e9], got " +
                                   std::to_string(options.hot_set_interval_seconds));
  }
  if (options.completion_threads < 1 || options.completion_threads > 256) {
    return Status::InvalidArgument("store: completion_threads must be in [1, 256], got " +
                                   std::to_string(options.completion_threads));
  }
  std::unique_ptr<StoreImpl> store(new StoreImpl());
  store->options_ = options;
  store->extra_metrics_ = hooks.extra_metrics;
  store->completion_pool_ = std::make_unique<boost::asio::thread_pool>(options.completion_threads);
  io::IoOptions io;
  io.backend = backend;
  io.queue_depth = options.queue_depth;
  io.rings = options.io_rings;
  io.threads = options.io_threads;
  io.use_direct_io = options.direct_io;
  if (engine_factory) {
    ENGRAM_ASSIGN_OR_RETURN(store->engine_, engine_factory(io));
    if (store->engine_ == nullptr) return Status::Internal("store: the I/O engine factory returned no engine");
  } else {
    ENGRAM_ASSIGN_OR_RETURN(store->engine_, io::CreateIoEngine(io));
  }
  ENGRAM_ASSIGN_OR_RETURN(store->read_buffers_, ReadBufferPool::Create(options.read_buffer_bytes, options.queue_depth, *store->engine_));
  log::Info("store: I/O backend {}", store->engine_->Describe());

  // Tables given by rank manifest: this rank's file of each.
  ENGRAM_ASSIGN_OR_RETURN(std::vector<RankTablePick> picks, PickRankTables(options));
  std::vector<uint64_t> explicit_bytes, weights;
  for (size_t i = 0; i < options.tables.size(); ++i) {
    const TableOptions& t = options.tables[i];
    const std::string& path = picks[i].path;
    auto state = std::make_unique<TableState>();
    if (redis::IsRedisUrl(path) && !picks[i].manifest) {
      ENGRAM_RETURN_IF_ERROR(OpenRemoteTable(path, options, *state));
    } else {
      ENGRAM_RETURN_IF_ERROR(OpenFileTable(path, options, picks[i].manifest ? &*picks[i].manifest : nullptr,
                                           t.manifest, *store->engine_, *state));
    }
    state->name = !t.name.empty()        ? t.name
                  : picks[i].manifest    ? picks[i].manifest->name
                  : state->remote        ? state->remote->table_name()
                                         : std::filesystem::path(path).stem().string();
    for (const auto& other : store->tables_) {
      if (other->name == state->name) return Status::InvalidArgument("two tables named '" + state->name + "'");
    }
    if (picks[i].manifest) store->manifest_inputs_.push_back(std::move(picks[i].manifest_input));
    explicit_bytes.push_back(t.cache_bytes);
    weights.push_back(state->file->row_count() * state->file->record_bytes());
    store->tables_.push_back(std::move(state));
  }
  uint64_t mem_available = 0;
  if (options.cache_memory_fraction != 0.0) {
    ENGRAM_ASSIGN_OR_RETURN(mem_available, ReadMemAvailable());
  }
  ENGRAM_ASSIGN_OR_RETURN(
      uint64_t cache_budget,
      EffectiveCacheBudget(options.cache_bytes, options.cache_memory_fraction, mem_available));
  if (options.cache_memory_fraction != 0.0) {
    log::Info("store: cache budget {} B = min(cache_bytes {}, {} x MemAvailable {})", cache_budget,
              options.cache_bytes, options.cache_memory_fraction, mem_available);
  }
  // A table's cache is capped at its rows; what it cannot use goes to others.
  std::vector<uint64_t> caps;
  for (const auto& t : store->tables_) {
    auto cap = RowCache::BudgetForRows(cache_config, t->file->row_count(), t->file->record_bytes());
    if (!cap.ok()) return cap.status().WithContext("cache for table " + t->name);
    caps.push_back(*cap);
  }
  ENGRAM_ASSIGN_OR_RETURN(std::vector<uint64_t> budgets,
                          SplitCacheBudget(cache_budget, explicit_bytes, weights, caps));
  for (size_t i = 0; i < store->tables_.size(); ++i) {
    TableState& t = *store->tables_[i];
    t.cache_budget_bytes = budgets[i];
    ENGRAM_RETURN_IF_ERROR(HoldReferenceScales(t, options.in_place_scale_share));
    auto cache = RowCache::Create(cache_config, t.cache_budget_bytes, t.file->record_bytes(), t.file->row_count(),
                                  hooks.cache_regions);
    if (!cache.ok()) return cache.status().WithContext("cache for table " + t.name);
    t.cache = std::move(cache).value();
    if (options.commit_cache_memory) t.cache->CommitMemory();
    log::Info("store: table {} ({} rows of {} B) cache {} B = {} rows, policy {}", t.name, t.file->row_count(),
              t.file->record_bytes(), t.cache_budget_bytes, t.cache->capacity_rows(), cache_config.ToSpec());
  }
  // Every check that can fail comes before the trace is opened: a store that
  // does not open leaves no trace file.
  std::optional<HttpEndpointOptions> http;
  if (!options.metrics_listen.empty()) {
    ENGRAM_ASSIGN_OR_RETURN(HttpEndpointOptions parsed, ParseListenAddress(options.metrics_listen));
    http = parsed;
  }
  // The files the store writes (hot set, trace) must not be any the process
  // reads: its tables, shards and manifests (held above), or anything else
  // (a layout, a token map). A hot set replaces only a regular file (or
  // creates one): a FIFO, a device or a directory at its path is refused
  // here, not replaced at close.
  if (!options.hot_set_path.empty()) {
    ENGRAM_RETURN_IF_ERROR(CheckOutputPath(options.hot_set_path, "hot_set_path"));
  }
  if (!options.trace_path.empty()) {
    ENGRAM_ASSIGN_OR_RETURN(store->trace_, TraceWriter::Open(options.trace_path));
  }
  if (http) {
    StoreImpl* raw = store.get();
    auto endpoint = MetricsHttpEndpoint::Start(*http, [raw] { return raw->MetricsText(); });
    if (!endpoint.ok()) {
      if (store->trace_) store->trace_->Discard();
      return endpoint.status();
    }
    store->endpoint_ = std::move(endpoint).value();
  }
  // Warm start: last, once the store can serve; warming runs beside gathers.
  if (!options.hot_set_path.empty()) {
    store->hot_set_ = std::make_unique<HotSetKeeper>(store.get(), options.hot_set_path,
                                                     options.hot_set_interval_seconds);
  }
  return store;
}

StoreImpl::~StoreImpl() {
  // Warming and periodic saves end first: they read through the engine.
  if (hot_set_) hot_set_->Stop();
  endpoint_.reset();  // no scrape may run while the store is torn down
  if (engine_) engine_->Shutdown();  // every pending callback has run after this
  for (const auto& table : tables_) {
    if (table->remote) table->remote->Shutdown();  // the same for each remote table's reader
  }
  // ... and posted its disk phase here: drain it while the tables still exist.
  if (completion_pool_) completion_pool_->join();
  uint64_t cancelled = 0;
  for (const auto& table : tables_) cancelled += table->reads_cancelled_by_shutdown.load(std::memory_order_relaxed);
  if (cancelled > 0) {
    log::Info("store: closing cancelled {} block reads in flight; their gathers ended with Cancelled", cancelled);
  }
  if (hot_set_) {
    // Every gather has finished: the caches hold what the store ends with.
    if (Status s = hot_set_->Save(); !s.ok()) log::Error("store: the hot set was not saved: {}", s.ToString());
  }
  if (trace_) {
    // The store has no other way to report it: the log says the trace is
    // missing or incomplete, and why.
    if (Status s = trace_->Close(); !s.ok()) log::Error("store: the gather trace was not saved: {}", s.ToString());
  }
}

Result<size_t> StoreImpl::FindTable(const std::string& name) const {
  for (size_t i = 0; i < tables_.size(); ++i) {
    if (tables_[i]->name == name) return i;
  }
  return Status::NotFound("no table named '" + name + "'");
}

uint32_t StoreImpl::record_bytes(size_t table) const {
  return table < tables_.size() ? tables_[table]->file->record_bytes() : 0;
}
uint64_t StoreImpl::row_count(size_t table) const {
  return table < tables_.size() ? tables_[table]->file->row_count() : 0;
}
std::string StoreImpl::metadata_json(size_t table) const {
  return table < tables_.size() ? tables_[table]->file->metadata_text() : std::string();
}

std::shared_ptr<GatherOperation> StoreImpl::Begin(size_t table, std::span<const uint64_t> row_ids,
                                                  const RowDestination& dst, std::function<void(GatherResult)> done,
                                                  bool caller_reads, bool consumes_read_ahead) {
  // Only a warm-up asks how many gathers are in flight (GathersInFlight), so
  // only a store with a hot set pays this locked add on every gather. hot_set_
  // is set in Open, before any gather can begin.
  if (hot_set_ && table < tables_.size()) tables_[table]->gathers_begun.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<GatherOperation> st = GatherOperation::Acquire();
  st->Init(this, table, row_ids, dst, std::move(done), caller_reads, consumes_read_ahead);
  GatherTarget target{tables_.size()};
  if (table < tables_.size()) {
    target.record_bytes = tables_[table]->file->record_bytes();
    target.row_count = tables_[table]->file->row_count();
    target.name = &tables_[table]->name;
  }
  Status bad = CheckGatherArguments(target, table, row_ids, dst);
  if (!bad.ok()) {
    st->Reject(std::move(bad));
    return st;
  }
  if (trace_) trace_->Record(table, row_ids);
  GatherOperation::Start(st);
  return st;
}

GatherResult StoreImpl::Gather(size_t table, std::span<const uint64_t> row_ids, const RowDestination& dst) {
  return GatherOperation::WaitOnThisThread(Begin(table, row_ids, dst, nullptr, /*caller_reads=*/true));
}

GatherTicket StoreImpl::StartGather(size_t table, std::span<const uint64_t> row_ids, const RowDestination& dst) {
  return GatherTicketAccess::Make(Begin(table, row_ids, dst, nullptr));
}

void StoreImpl::StartGather(size_t table, std::span<const uint64_t> row_ids, const RowDestination& dst,
                            std::function<void(GatherResult)> done) {
  if (!done) done = [](GatherResult) {};
  Begin(table, row_ids, dst, std::move(done));
}

void StoreImpl::StartGatherLeavingPins(size_t table, std::span<const uint64_t> row_ids, std::byte* dst,
                                       size_t stride, std::function<void(GatherResult)> done) {
  if (!done) done = [](GatherResult) {};
  Begin(table, row_ids, RowDestination{dst, stride}, std::move(done), /*caller_reads=*/false,
        /*consumes_read_ahead=*/false);
}

GatherResult StoreImpl::GatherLeavingPins(size_t table, std::span<const uint64_t> row_ids, std::byte* dst,
                                          size_t stride) {
  return GatherOperation::WaitOnThisThread(Begin(table, row_ids, RowDestination{dst, stride}, nullptr,
                                                 /*caller_reads=*/true, /*consumes_read_ahead=*/false));
}

size_t StoreImpl::ConsumeReadAheadPins(size_t table, ReadAheadTracker::PinOwner owner,
                                       std::span<const uint64_t> row_ids, bool served) {
  if (table >= tables_.size() || row_ids.empty()) return 0;
  TableState& t = *tables_[table];
  std::vector<uint8_t> flags(row_ids.size(), 0);
  const size_t consumed = t.read_ahead.Consume(row_ids, flags, owner);
  if (consumed != 0) t.counters.Add(served ? t.counters.read_ahead_used_rows : t.counters.read_ahead_wasted_rows, consumed);
  return consumed;
}

void StoreImpl::ReadAheadFor(ReadAheadTracker::PinOwner owner, size_t table, std::vector<uint64_t> rows,
                             std::function<void()> landed) {
  StartReadAhead(this, table, std::move(rows), owner, std::move(landed));
}

void StoreImpl::ReleaseReadAheadFor(ReadAheadTracker::PinOwner owner, size_t table,
                                    std::span<const uint64_t> row_ids) {
  if (table < tables_.size()) tables_[table]->read_ahead.Release(row_ids, owner);
}

void StoreImpl::ReleaseReadAheadOwner(ReadAheadTracker::PinOwner owner) {
  for (auto& t : tables_) t->read_ahead.ReleaseOwner(owner);
}

uint64_t StoreImpl::ReadAheadPinsOf(ReadAheadTracker::PinOwner owner) const {
  uint64_t pins = 0;
  for (const auto& t : tables_) pins += t->read_ahead.pins_of(owner);
  return pins;
}

Status StoreImpl::ReadAhead(size_t table, std::span<const uint64_t> row_ids) {
  if (table >= tables_.size()) return Status::InvalidArgument("read-ahead: no table " + std::to_string(table));
  const TableGeometry& g = tables_[table]->file->geometry();
  std::vector<uint64_t> rows;
  rows.reserve(row_ids.size());
  for (uint64_t id : row_ids) {
    ENGRAM_RETURN_IF_ERROR(g.CheckRow(id).WithContext("read-ahead on table " + tables_[table]->name));
    rows.push_back(id);
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  StartReadAhead(this, table, std::move(rows));
  return Status::OK();
}

void StoreImpl::WaitForCacheMemory() {
  for (auto& t : tables_) t->cache->WaitForMemory();
}

void StoreImpl::WaitForWarmUp() {
  if (hot_set_) hot_set_->WaitForWarmUp();
}

uint64_t StoreImpl::GathersInFlight() const {
  uint64_t in_flight = 0;
  for (const auto& t : tables_) {
    // Finished first: a gather is begun before it finishes, so this never underflows.
    const uint64_t finished = t->counters.gathers.load(std::memory_order_relaxed);
    const uint64_t begun = t->gathers_begun.load(std::memory_order_relaxed);
    in_flight += begun > finished ? begun - finished : 0;
  }
  return in_flight;
}

void StoreImpl::WaitForReadAheads() {
  for (auto& t : tables_) t->read_ahead.WaitForLanded();
}

void StoreImpl::ReleaseReadAhead(size_t table, std::span<const uint64_t> row_ids) {
  if (table >= tables_.size()) return;
  tables_[table]->read_ahead.Release(row_ids);
}

TableStats StoreImpl::Stats(size_t table) const {
  TableStats s;
  if (table >= tables_.size()) return s;
  const TableState& t = *tables_[table];
  s.name = t.name;
  s.path = t.file->path();
  s.row_count = t.file->row_count();
  s.record_bytes = t.file->record_bytes();
  s.cache_budget_bytes = t.cache_budget_bytes;
  s.cache = t.cache->Stats();
  t.counters.CopyTo(s);
  return s;
}

std::string StoreImpl::MetricsText() const {
  std::vector<TableStats> stats;
  for (size_t i = 0; i < tables_.size(); ++i) stats.push_back(Stats(i));
  MetricsSnapshot m = BuildStoreMetrics(stats, engine_->Stats(), io::IoBackendName(engine_->backend()));
  for (const auto& t : tables_) {
    if (t->remote) AddRemoteTableMetrics(m, t->name, t->remote->client().Stats());
  }
  if (trace_) {
    m.AddCounter("engram_store_trace_gathers_total",
                 "Gathers of the trace capture (StoreOptions::trace_path) written to the file, and lost to a "
                 "write error (logged).",
                 {{"outcome", "written"}}, double(trace_->written_gathers()));
    m.AddCounter("engram_store_trace_gathers_total", "", {{"outcome", "lost"}}, double(trace_->lost_gathers()));
  }
  if (extra_metrics_) extra_metrics_(m);
  return m.ToPrometheusText();
}

}  // namespace engram
