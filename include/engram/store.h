// Store: serves rows of disk-backed Engram tables through a row cache.
//
// The runtime hands the store the row IDs of a prefill chunk (48 per token
// for V4.1) and waits until the rows are in its buffer:
//
//   auto store = engram::Store::Open(options).value();
//   engram::GatherTicket ticket = store->StartGather(table, row_ids, dst, stride);
//   ...                                     // other work while the rows are read
//   engram::GatherResult r = ticket.Wait();
//   if (!r.status.ok()) ...;   // nothing unverified was returned or cached
//
// Waiting for a gather has one way: GatherTicket::Wait(). Store::Gather() is
// StartGather(...).Wait() in one call. Asio applications use
// engram::AsyncGather (engram/asio.h) instead, which completes a handler on
// its executor.
//
// A gather deduplicates its row IDs (each distinct row is looked up once:
// hit or miss), copies hits from the cache, reads every missed 4 KiB block
// once (rows of one block coalesced), verifies the block checksum, offers the
// rows to the cache and copies them to dst[i * stride]. The time the caller
// waits is reported split into cache time and disk time, per gather and as
// cumulative counters per table.
//
// Read-ahead: ReadAhead() starts reads of rows known early; they are inserted
// pinned (never evicted) until a gather consumes them or ReleaseReadAhead().
//
// Thread safety: every method may be called concurrently from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <algorithm>

#include "engram/cache_stats.h"
#include "engram/counters.h"
#include "engram/options.h"
#include "engram/status.h"

namespace engram {

struct GatherResult {
  // OK: every row of dst is written. Otherwise why the gather failed; which
  // rows of dst are still valid is then told by RowWritten().
  Status status;
  // The fields of include/engram/counters.h's ENGRAM_GATHER_RESULT: rows,
  // distinct_rows, hits, misses, inserts, refusals, read_ahead_used,
  // blocks_read, bytes_read, and the readiness wait in wait_nanoseconds: wall
  // time from the start of the gather until its rows were ready. Its parts:
  // cache_nanoseconds for cache work (dedup, lookups, copies of hits, and
  // handing the first reads to the I/O engine, which a large gather does
  // between its lookups), disk_nanoseconds for disk work (from the last
  // lookup until every missed row was verified, offered to the cache and
  // copied; reads submitted earlier were already under way).
  // cache_nanoseconds + disk_nanoseconds <= wait_nanoseconds.
#define ENGRAM_X(member, help) uint64_t member = 0;
  ENGRAM_GATHER_RESULT(ENGRAM_X)
#undef ENGRAM_X
  // After a gather that failed on a read or a corrupt block: the positions
  // (indexes into row_ids, ascending) whose rows dst does not hold (their
  // bytes there are unspecified). Every other row is written, verified, and
  // can be used; only these need a re-read (or zeroing). Empty when the gather succeeded, and when it failed
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
  // OK, or why the figures below the sizes are missing (zero): a node
  // client whose service did not answer (Unavailable, DeadlineExceeded).
  // The name, path and sizes are filled either way.
  Status status;
  std::string name;
  std::string path;
  uint64_t row_count = 0;
  uint32_t record_bytes = 0;
  uint64_t cache_budget_bytes = 0;
  RowCacheStats cache;
  // The counters of include/engram/counters.h: gathers, failed_gathers,
  // rows_requested, failed_rows (misses whose read or checksum failed, never
  // offered to the cache), the readiness wait and its cache and disk parts,
  // read-ahead rows delivered / used / wasted (read_ahead_rows ==
  // used + wasted + rows still pinned for a gather), I/O, and the warm
  // start's rows warmed and skipped.
#define ENGRAM_X(member, metric, unit, help) uint64_t member = 0;
  ENGRAM_TABLE_COUNTERS(ENGRAM_X)
#undef ENGRAM_X
};

// The table of counters as data: for code that lists every counter (the
// metrics exposition, language bindings) without naming each one.
struct TableCounterInfo {
  const char* name;    // the TableStats member's name
  const char* metric;  // Prometheus family
  int unit;            // ENGRAM_UNIT_COUNT or ENGRAM_UNIT_NANOSECONDS
  const char* help;
  uint64_t TableStats::*member;
};
inline constexpr TableCounterInfo kTableCounters[] = {
#define ENGRAM_X(member, metric, unit, help) {#member, metric, unit, help, &TableStats::member},
    ENGRAM_TABLE_COUNTERS(ENGRAM_X)
#undef ENGRAM_X
};

// The fields of GatherResult as data, for code that lists them (language
// bindings) without naming each one.
struct GatherResultFieldInfo {
  const char* name;  // the GatherResult member's name
  const char* help;
  uint64_t GatherResult::*member;
};
inline constexpr GatherResultFieldInfo kGatherResultFields[] = {
#define ENGRAM_X(member, help) {#member, help, &GatherResult::member},
    ENGRAM_GATHER_RESULT(ENGRAM_X)
#undef ENGRAM_X
};

// Where a gather writes its rows: row i of the gather at
//
//   dst + (i / group_rows) * group_stride + (i % group_rows) * stride
//
// group_rows = 0 is one group (row i at dst + i * stride), what the
// (dst, stride) forms of the gather write. Groups let one gather fill one
// layer of a step's [tokens][layers][slots][record] buffer: the layer's row
// IDs in [token][slot] order go in groups of `slots` rows (a token's), a
// record apart, each group layers * slots * record after the one before.
// A destination's rows never overlap: stride >= the table's record_bytes,
// and with groups, group_stride >= (group_rows - 1) * stride + record_bytes.
struct RowDestination {
  std::byte* dst = nullptr;
  size_t stride = 0;
  size_t group_rows = 0;    // rows per group; 0: a single group
  size_t group_stride = 0;  // bytes from one group's first row to the next's
};

// A started gather: what Store::StartGather returns. Opaque and move-only.
// Wait() on it exactly once: that is how a gather is waited for. Wait()
// returns when every row of the gather is in dst (or the gather failed) and
// may itself do the gather's disk phase (verify, copy, cache fill) on the
// calling thread. A ticket may also just be destroyed: the store then
// finishes the gather on its completion pool, and row_ids and dst must stay
// valid until it has.
class GatherTicket {
 public:
  GatherTicket() = default;
  GatherTicket(GatherTicket&&) noexcept = default;
  GatherTicket& operator=(GatherTicket&&) noexcept = default;
  GatherTicket(const GatherTicket&) = delete;
  GatherTicket& operator=(const GatherTicket&) = delete;
  ~GatherTicket() = default;

  // False for a default-constructed or moved-from ticket.
  bool valid() const { return state_ != nullptr; }

  // Waits for the gather and returns its result, consuming the ticket. Needs
  // no Store: a store finishes every gather it started before it is
  // destroyed, so a ticket may be waited on after its store is gone. An
  // invalid ticket gives InvalidArgument.
  GatherResult Wait();

  // Opaque: the gather in flight, defined by the implementation (a store's
  // own gathers, or a node client's).
  struct State;

 private:
  friend struct GatherTicketAccess;  // the store's implementation
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
  // The table's name (its `table` label in stats and metrics); empty for an
  // index past the last table.
  virtual std::string table_name(size_t table) const = 0;
  virtual uint32_t record_bytes(size_t table) const = 0;
  virtual uint64_t row_count(size_t table) const = 0;
  // The table file's metadata JSON (dtype, shapes, hash layout, ...).
  virtual std::string metadata_json(size_t table) const = 0;
  // "io_uring(...)" / "pread(...)": the backend actually in use.
  virtual std::string io_description() const = 0;

  // Starts a gather: row i goes to dst + i * stride (stride >= record_bytes),
  // and returns its ticket; ticket.Wait() returns its result. Bad arguments
  // fail immediately in that result. row_ids and dst must stay valid until
  // the gather completes. A thread in Wait() does its own gather's disk phase
  // (verify the blocks, copy rows out, fill the cache) once the reads land;
  // a gather nobody waits on yet is finished by the completion pool.
  GatherTicket StartGather(size_t table, std::span<const uint64_t> row_ids, std::byte* dst, size_t stride) {
    return StartGather(table, row_ids, RowDestination{dst, stride});
  }
  // The same into a destination of groups (RowDestination).
  virtual GatherTicket StartGather(size_t table, std::span<const uint64_t> row_ids, const RowDestination& dst) = 0;
  // StartGather(...).Wait() in one call. Since the calling thread waits for
  // the reads anyway, a store on io_uring submits and reaps them on a ring of
  // that thread's own, checking each block as it lands: no engine thread
  // between the caller and the device.
  GatherResult Gather(size_t table, std::span<const uint64_t> row_ids, std::byte* dst, size_t stride) {
    return Gather(table, row_ids, RowDestination{dst, stride});
  }
  virtual GatherResult Gather(size_t table, std::span<const uint64_t> row_ids, const RowDestination& dst) {
    return StartGather(table, row_ids, dst).Wait();
  }

  // Read-ahead: reads the rows (cached ones too, which are then pinned in
  // place) and inserts them pinned. Returns once the reads are issued; the
  // rows become hits when they land. Pins are released when a gather
  // consumes the row or by ReleaseReadAhead. A row that a gather asks for
  // before its read-ahead lands is served by that gather (a hit, or its own
  // read) and is not pinned when the read-ahead lands: ReadAhead then Gather
  // with no wait in between leaves no pin behind.
  virtual Status ReadAhead(size_t table, std::span<const uint64_t> row_ids) = 0;
  // Waits until every read-ahead issued so far has landed (or failed).
  virtual void WaitForReadAheads() = 0;
  // Waits until the cache memory that Open commits in the background
  // (StoreOptions::commit_cache_memory) is committed, in huge pages where the
  // kernel allows. Gathers never need it. It is for a runtime that wants its
  // first gathers to run at steady-state speed rather than beside the commit
  // (10-700 ms of a core for 64-256 MiB, measured: more where pages must be
  // collapsed into huge pages), and for benchmarks that time gathers, not
  // opening.
  virtual void WaitForCacheMemory() = 0;
  // Waits until the warm start (StoreOptions::hot_set_path) has read back
  // every saved row it will, or given up on them; at once without a hot set.
  // Gathers never need it: for tests, benchmarks and runtimes that want to
  // start serving from a warm cache.
  virtual void WaitForWarmUp() {}
  // Unpins rows that were read_ahead_pinned and not consumed (counted as wasted).
  // Waits first for this table's read-ahead still in flight, so no pin lands
  // after it (never for other tables' reads).
  virtual void ReleaseReadAhead(size_t table, std::span<const uint64_t> row_ids) = 0;

  virtual TableStats Stats(size_t table) const = 0;
  // Every metric in the Prometheus text exposition format 0.0.4.
  virtual std::string MetricsText() const = 0;
  // Port of the metrics endpoint, 0 if none is running.
  virtual uint16_t metrics_port() const = 0;

  // For adapters, not a way to wait: the completion hook engram::AsyncGather
  // (engram/asio.h) and the Python binding's gather_async are built on.
  // Applications use GatherTicket::Wait() or AsyncGather. Starts a gather as
  // StartGather does and calls `done` with its result on a thread of the
  // store's completion pool (StoreOptions::completion_threads), or on the
  // calling thread if the gather completes at once; `done` must only hand the
  // result off, and must not drop the last reference to the Store (its
  // teardown waits for that pool).
  void StartGather(size_t table, std::span<const uint64_t> row_ids, std::byte* dst, size_t stride,
                   std::function<void(GatherResult)> done) {
    StartGather(table, row_ids, RowDestination{dst, stride}, std::move(done));
  }
  virtual void StartGather(size_t table, std::span<const uint64_t> row_ids, const RowDestination& dst,
                           std::function<void(GatherResult)> done) = 0;
};

}  // namespace engram
