// Store: serves rows of disk-backed Engram tables through a row cache.
//
// The runtime hands the store the row IDs of a prefill chunk (48 per token
// for V4.1) and waits until the rows are in its buffer:
//
//   auto store = engram::Store::Open(options).value();
//   engram::GatherResult r = store->Gather(table, row_ids, dst, stride);
//   if (!r.status.ok()) ...;   // nothing unverified was returned or cached
//
// A gather deduplicates its row IDs (each distinct row is looked up once:
// hit or miss), copies hits from the cache, reads every missed 4 KiB block
// once (rows of one block coalesced), verifies the block checksum, offers the
// rows to the cache and copies them to dst[i * stride]. The time the caller
// waits is reported split into cache time and disk time, per gather and as
// cumulative counters per table.
//
// Read-ahead: Prefetch() starts reads of rows known early; they are inserted
// pinned (never evicted) until a gather consumes them or ReleasePrefetch().
//
// Thread safety: every method may be called concurrently from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <algorithm>
#include <vector>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include "engram/cache_config.h"
#include "engram/options.h"
#include "engram/status.h"

namespace engram {

struct GatherResult {
  // OK: every row of dst is written. Otherwise why the gather failed; which
  // rows of dst are still valid is then told by RowWritten().
  Status status;
  uint64_t rows = 0;            // row IDs requested
  uint64_t distinct_rows = 0;   // after deduplication
  uint64_t hits = 0;            // distinct rows served from the cache
  uint64_t misses = 0;          // distinct rows read from disk
  uint64_t inserts = 0;         // misses kept by the cache
  uint64_t refusals = 0;        // misses the cache refused to keep
  uint64_t prefetched_used = 0; // hits on rows a Prefetch brought in
  uint64_t blocks_read = 0;
  uint64_t bytes_read = 0;
  // The readiness wait: wall time from the start of the gather until its rows
  // were ready, and the parts of it spent on cache work (dedup, lookups,
  // copies of hits) and on disk work (from submitting the reads until every
  // missed row was verified, offered to the cache and copied).
  // cache_nanoseconds + disk_nanoseconds <= wait_nanoseconds.
  uint64_t wait_nanoseconds = 0;
  uint64_t cache_nanoseconds = 0;
  uint64_t disk_nanoseconds = 0;
  // After a gather that failed on a read or a corrupt block: the positions
  // (indexes into row_ids, ascending) whose rows were not written. Every
  // other row is written, verified, and can be used; only these need a
  // re-read (or zeroing). Empty when the gather succeeded, and when it failed
  // before reading anything (a bad argument: then no row is written).
  std::vector<size_t> failed_positions;

  // Whether dst's row at `position` holds its row.
  bool RowWritten(size_t position) const {
    if (status.ok()) return true;
    if (failed_positions.empty() || position >= rows) return false;
    return !std::binary_search(failed_positions.begin(), failed_positions.end(), position);
  }
};

struct TableStats {
  std::string name;
  std::string path;
  uint64_t row_count = 0;
  uint32_t record_bytes = 0;
  uint64_t cache_budget_bytes = 0;
  RowCacheStats cache;
  uint64_t gathers = 0;
  uint64_t failed_gathers = 0;
  uint64_t rows_requested = 0;
  uint64_t failed_rows = 0;  // misses whose read or checksum failed (never offered to the cache)
  uint64_t readiness_wait_nanoseconds = 0;
  uint64_t readiness_wait_cache_nanoseconds = 0;
  uint64_t readiness_wait_disk_nanoseconds = 0;
  // Read-ahead: rows it delivered (pinned, or dropped on landing because a
  // gather had asked for them meanwhile), of those consumed by a gather
  // while pinned, and wasted (released unused, or landed too late).
  // prefetch_rows == used + wasted + rows still pinned for a gather.
  uint64_t prefetch_rows = 0;
  uint64_t prefetch_used_rows = 0;
  uint64_t prefetch_wasted_rows = 0;
  uint64_t io_reads = 0;
  uint64_t io_bytes = 0;
  uint64_t io_errors = 0;
  uint64_t checksum_failures = 0;
};

// A started gather. Wait() on it exactly once (or destroy it: the store then
// waits for its reads internally, the buffers must stay valid until then).
class GatherTicket {
 public:
  GatherTicket() = default;
  bool valid() const { return state_ != nullptr; }
  struct State;
  explicit GatherTicket(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

class Store {
 public:
  static Result<std::unique_ptr<Store>> Open(const StoreOptions& options);
  virtual ~Store() = default;

  virtual size_t table_count() const = 0;
  // Index of the table with this name, or NotFound.
  virtual Result<size_t> FindTable(const std::string& name) const = 0;
  virtual uint32_t record_bytes(size_t table) const = 0;
  virtual uint64_t row_count(size_t table) const = 0;
  // The table file's metadata JSON (dtype, shapes, hash layout, ...).
  virtual std::string metadata_json(size_t table) const = 0;
  // "io_uring(...)" / "pread(...)": the backend actually in use.
  virtual std::string io_description() const = 0;

  // Starts a gather: row i goes to dst + i * stride (stride >= record_bytes).
  // Bad arguments fail immediately in the returned result; otherwise the
  // ticket is waited on with Wait(). row_ids and dst must stay valid until the
  // gather completes. A thread in Wait() does its own gather's disk phase
  // (verify the blocks, copy rows out, fill the cache) once the reads land;
  // a gather nobody waits on yet is finished by the completion pool.
  virtual GatherTicket StartGather(size_t table, std::span<const uint64_t> row_ids, std::byte* dst,
                                   size_t stride) = 0;
  virtual GatherResult Wait(GatherTicket ticket) = 0;
  GatherResult Gather(size_t table, std::span<const uint64_t> row_ids, std::byte* dst, size_t stride) {
    return Wait(StartGather(table, row_ids, dst, stride));
  }

  // Callback form. `done` runs on a thread of the store's completion pool
  // (StoreOptions::completion_threads), or on the calling thread if the gather
  // completes at once; it must only hand the result off, and must not drop
  // the last reference to the Store (its teardown waits for that pool).
  // AsyncGather below is what applications use.
  virtual void StartGather(size_t table, std::span<const uint64_t> row_ids, std::byte* dst, size_t stride,
                           std::function<void(GatherResult)> done) = 0;

  // Boost.Asio form: any completion token (a callback, asio::use_future,
  // asio::use_awaitable, ...). The handler runs on its associated executor
  // (bind one with asio::bind_executor; a handler with none runs on Asio's
  // system executor, a thread of Asio's own pool), never on a store thread,
  // and is destroyed there too. The gather counts as outstanding work on that
  // executor until the handler has run, so io_context::run() does not return
  // while a gather is in flight. The executor's execution context (e.g. the
  // io_context) must outlive the Store: the store's thread may still be
  // returning from post() after the handler has already run, so destroy the
  // Store first.
  template <typename CompletionToken>
  auto AsyncGather(size_t table, std::span<const uint64_t> row_ids, std::byte* dst, size_t stride,
                   CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(GatherResult)>(
        [this, table, row_ids, dst, stride](auto handler) {
          using Handler = decltype(handler);
          auto executor = boost::asio::get_associated_executor(handler);
          struct Pending {
            Handler handler;
            boost::asio::executor_work_guard<decltype(executor)> work;
          };
          auto pending = std::make_shared<Pending>(Pending{std::move(handler), boost::asio::make_work_guard(executor)});
          StartGather(table, row_ids, dst, stride, [pending](GatherResult result) {
            auto ex = pending->work.get_executor();
            boost::asio::post(ex, [pending, result = std::move(result)]() mutable {
              // Moved out so the handler (and what it owns) dies here, on
              // its executor, not on whichever thread drops `pending` last.
              Handler h = std::move(pending->handler);
              auto work = std::move(pending->work);
              h(std::move(result));
            });
          });
        },
        token);
  }

  // Read-ahead: reads the rows (cached ones too, which are then pinned in
  // place) and inserts them pinned. Returns once the reads are issued; the
  // rows become hits when they land. Pins are released when a gather
  // consumes the row or by ReleasePrefetch. A row that a gather asks for
  // before its read-ahead lands is served by that gather (a hit, or its own
  // read) and is not pinned when the read-ahead lands: Prefetch then Gather
  // with no wait in between leaves no pin behind.
  virtual Status Prefetch(size_t table, std::span<const uint64_t> row_ids) = 0;
  // Waits until every prefetch issued so far has landed (or failed).
  virtual void WaitForPrefetches() = 0;
  // Unpins rows that were prefetched and not consumed (counted as wasted).
  // Waits first for this table's read-ahead still in flight, so no pin lands
  // after it (never for other tables' reads).
  virtual void ReleasePrefetch(size_t table, std::span<const uint64_t> row_ids) = 0;

  virtual TableStats Stats(size_t table) const = 0;
  // Every metric in the Prometheus text exposition format 0.0.4.
  virtual std::string MetricsText() const = 0;
  // Port of the metrics endpoint, 0 if none is running.
  virtual uint16_t metrics_port() const = 0;
};

}  // namespace engram
