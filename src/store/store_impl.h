// StoreImpl: composes the table files, the I/O engine and one row cache per
// table. Policy (src/cache) knows nothing of I/O; the I/O engine
// (storage/io) knows nothing of caching; this is the only place they meet.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "engram/store.h"
#include "src/cache/row_cache.h"
#include "src/metrics/http_endpoint.h"
#include "src/metrics/metrics_snapshot.h"
#include "src/store/gather_ticket_access.h"
#include "src/store/read_buffer_pool.h"
#include "src/store/table_state.h"
#include "src/store/trace_writer.h"
#include "src/store/warm_start.h"
#include "storage/input_files.h"
#include "storage/io/io_engine.h"

namespace engram {

class GatherOperation;  // src/store/gather_operation.h

// Internal hook (tests, engram-stress; not part of the public API): builds the
// store's I/O engine from the IoOptions derived from StoreOptions, e.g. to wrap
// the real backend in an io::FaultInjectionEngine. The store still only sees
// an io::IoEngine.
using IoEngineFactory = std::function<Result<std::unique_ptr<io::IoEngine>>(const io::IoOptions&)>;

// Internal hooks (tests, engram-stress, the node service; not part of the
// public API).
struct StoreHooks {
  IoEngineFactory engine_factory;  // empty: io::CreateIoEngine
  // Where the caches' index and row slab live (the node service's shared
  // memory); empty: each cache maps its own.
  CacheRegionAllocator cache_regions;
  // Adds series to MetricsText() (the node service's per-client series).
  std::function<void(MetricsSnapshot&)> extra_metrics;
};

class StoreImpl final : public Store {
 public:
  // `engine_factory` empty: io::CreateIoEngine.
  static Result<std::unique_ptr<StoreImpl>> Open(const StoreOptions& options,
                                                 const IoEngineFactory& engine_factory = {});
  static Result<std::unique_ptr<StoreImpl>> Open(const StoreOptions& options, const StoreHooks& hooks);
  ~StoreImpl() override;

  size_t table_count() const override { return tables_.size(); }
  Result<size_t> FindTable(const std::string& name) const override;
  std::string table_name(size_t table) const override {
    return table < tables_.size() ? tables_[table]->name : std::string();
  }
  uint32_t record_bytes(size_t table) const override;
  uint64_t row_count(size_t table) const override;
  std::string metadata_json(size_t table) const override;
  std::string io_description() const override { return engine_->Describe(); }

  using Store::Gather;
  using Store::StartGather;
  GatherResult Gather(size_t table, std::span<const uint64_t> row_ids, const RowDestination& dst) override;
  GatherTicket StartGather(size_t table, std::span<const uint64_t> row_ids, const RowDestination& dst) override;
  void StartGather(size_t table, std::span<const uint64_t> row_ids, const RowDestination& dst,
                   std::function<void(GatherResult)> done) override;

  Status ReadAhead(size_t table, std::span<const uint64_t> row_ids) override;
  void WaitForReadAheads() override;
  void WaitForCacheMemory() override;
  void WaitForWarmUp() override;
  void ReleaseReadAhead(size_t table, std::span<const uint64_t> row_ids) override;

  TableStats Stats(size_t table) const override;
  std::string MetricsText() const override;
  uint16_t metrics_port() const override { return endpoint_ ? endpoint_->port() : 0; }

  // The node service's own entry points (src/node): its clients' gathers
  // and read-aheads, whose pins belong to each client (ReadAheadTracker's
  // owners) rather than to the store.
  //
  // A gather that consumes no read-ahead pin: the service consumes the
  // client's pins of the rows itself (ConsumeReadAheadPins), since a read of
  // rows in flight for several clients is shared.
  void StartGatherLeavingPins(size_t table, std::span<const uint64_t> row_ids, std::byte* dst, size_t stride,
                              std::function<void(GatherResult)> done);
  // The same, waited for on the calling thread, which reads the misses
  // itself as Gather does (its own ring: no hand-off to the engine's or
  // the completion pool's threads).
  GatherResult GatherLeavingPins(size_t table, std::span<const uint64_t> row_ids, std::byte* dst, size_t stride);
  // `owner` was served `row_ids` (distinct, in range): drops its pins of
  // them and keeps its read-aheads in flight from pinning them. Counted as
  // read-ahead used when `served` (the client served them from the cache),
  // else as wasted (it missed them anyway). Returns the pins dropped.
  size_t ConsumeReadAheadPins(size_t table, ReadAheadTracker::PinOwner owner, std::span<const uint64_t> row_ids,
                              bool served);
  // Reads `rows` (distinct, in range) ahead and pins them for `owner`;
  // `landed` runs once every row has landed.
  void ReadAheadFor(ReadAheadTracker::PinOwner owner, size_t table, std::vector<uint64_t> rows,
                    std::function<void()> landed);
  // ReleaseReadAhead of `owner`'s pins only (waits as ReleaseReadAhead does).
  void ReleaseReadAheadFor(ReadAheadTracker::PinOwner owner, size_t table, std::span<const uint64_t> row_ids);
  // Drops every pin `owner` holds in every table; does not wait.
  void ReleaseReadAheadOwner(ReadAheadTracker::PinOwner owner);
  // The read-ahead pins `owner` holds, over every table.
  uint64_t ReadAheadPinsOf(ReadAheadTracker::PinOwner owner) const;

  // For the gather and read-ahead operations.
  TableState& table_state(size_t i) { return *tables_[i]; }
  io::IoEngine& engine() { return *engine_; }
  TraceWriter* trace() { return trace_.get(); }
  // Where landed blocks are processed when no waiter does it (see
  // StoreOptions::completion_threads).
  boost::asio::thread_pool& completion_pool() { return *completion_pool_; }
  ReadBufferPool& read_buffers() { return *read_buffers_; }
  // For the warm start: gathers begun and not yet finished, over all tables
  // (counted only in a store with a hot set; 0 otherwise).
  uint64_t GathersInFlight() const;
  uint32_t queue_depth() const { return options_.queue_depth; }

 private:
  StoreImpl() = default;
  // `caller_reads`: the calling thread waits for the gather right away
  // (Gather), so it reads the misses itself (GatherOperation::WaitOnThisThread).
  std::shared_ptr<GatherOperation> Begin(size_t table, std::span<const uint64_t> row_ids, const RowDestination& dst,
                                         std::function<void(GatherResult)> done,
                                         bool caller_reads = false, bool consumes_read_ahead = true);

  StoreOptions options_;
  std::function<void(MetricsSnapshot&)> extra_metrics_;
  // Declared before engine_, so destroyed after it: the ring the arena is
  // registered with goes first.
  std::unique_ptr<ReadBufferPool> read_buffers_;
  std::unique_ptr<io::IoEngine> engine_;
  std::vector<std::unique_ptr<TableState>> tables_;
  // The rank manifests the tables were opened by: inputs of the process for
  // as long as the store lives, so its hot set and trace, written up to the
  // end of the destructor, can never replace one.
  std::vector<InputFileHold> manifest_inputs_;
  std::unique_ptr<TraceWriter> trace_;
  std::unique_ptr<MetricsHttpEndpoint> endpoint_;
  std::unique_ptr<boost::asio::thread_pool> completion_pool_;
  // Warm start (StoreOptions::hot_set_path); null when off.
  std::unique_ptr<HotSetKeeper> hot_set_;
};

// Store::Open with a custom I/O engine (see IoEngineFactory).
Result<std::unique_ptr<Store>> OpenStoreWithEngineFactory(const StoreOptions& options,
                                                          const IoEngineFactory& engine_factory);

}  // namespace engram
