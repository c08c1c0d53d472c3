// The C API: a thin shell over engram::Store. Status messages go to a
// thread-local so the C caller can fetch them with engram_last_error().
// No exception may cross into C: every entry point that can allocate runs
// inside Guarded(), which turns std::bad_alloc into ENGRAM_RESOURCE_EXHAUSTED
// and anything else into ENGRAM_INTERNAL.
#include "engram/engram.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "engram/store.h"
#include "src/store/gather_operation.h"

struct engram_store {
  std::unique_ptr<engram::Store> store;
};

// Holds no pointer to its store: a gather can be waited on after the store
// is closed (closing finishes every pending gather; see WaitForGather).
struct engram_gather {
  engram::GatherTicket ticket;
  size_t count = 0;  // row IDs asked for, the length of a row_written array
};

namespace {

thread_local std::string g_last_error;

engram_status Report(const engram::Status& s) noexcept {
  try {
    g_last_error = s.ok() ? std::string() : s.ToString();
  } catch (...) {
    g_last_error.clear();  // no memory for the message; the code still tells
  }
  return static_cast<engram_status>(s.code());
}

// Runs fn (returning engram_status) with no exception escaping.
template <typename Fn>
engram_status Guarded(const char* what, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Report(engram::Status::ResourceExhausted(std::string(what) + ": out of memory"));
  } catch (const std::exception& e) {
    return Report(engram::Status::Internal(std::string(what) + ": " + e.what()));
  } catch (...) {
    return Report(engram::Status::Internal(std::string(what) + ": unknown exception"));
  }
}

void Fill(const engram::GatherResult& r, engram_gather_result* out) {
  if (!out) return;
  out->rows = r.rows;
  out->distinct_rows = r.distinct_rows;
  out->hits = r.hits;
  out->misses = r.misses;
  out->inserts = r.inserts;
  out->refusals = r.refusals;
  out->prefetched_used = r.prefetched_used;
  out->blocks_read = r.blocks_read;
  out->bytes_read = r.bytes_read;
  out->wait_nanoseconds = r.wait_nanoseconds;
  out->cache_nanoseconds = r.cache_nanoseconds;
  out->disk_nanoseconds = r.disk_nanoseconds;
}

}  // namespace

static_assert(int(engram::StatusCode::kInternal) == ENGRAM_INTERNAL, "C status codes follow StatusCode");

extern "C" {

const char* engram_last_error(void) { return g_last_error.c_str(); }

const char* engram_status_string(engram_status status) {
  if (status < ENGRAM_OK || status > ENGRAM_INTERNAL) return "Unknown";
  return engram::StatusCodeName(static_cast<engram::StatusCode>(status));
}

engram_status engram_store_open(const engram_store_options* options, engram_store** out) {
  return Guarded("engram_store_open", [&] {
  if (!options || !out) return Report(engram::Status::InvalidArgument("engram_store_open: null argument"));
  *out = nullptr;
  if (options->table_count > 0 && !options->table_paths) {
    return Report(engram::Status::InvalidArgument("engram_store_open: table_paths is null"));
  }
  engram::StoreOptions o;
  for (size_t i = 0; i < options->table_count; ++i) {
    if (!options->table_paths[i]) return Report(engram::Status::InvalidArgument("engram_store_open: null path"));
    o.tables.push_back({options->table_paths[i], "", 0});
  }
  if (options->cache_bytes) o.cache_bytes = options->cache_bytes;
  if (options->cache_policy) o.cache_policy = options->cache_policy;
  if (options->io_backend) o.io_backend = options->io_backend;
  if (options->metrics_listen) o.metrics_listen = options->metrics_listen;
  if (options->trace_path) o.trace_path = options->trace_path;
  o.cache_memory_fraction = options->cache_memory_fraction;
  auto store = engram::Store::Open(o);
  if (!store.ok()) return Report(store.status());
  *out = new engram_store{std::move(store).value()};
  return Report(engram::Status::OK());
  });
}

void engram_store_close(engram_store* store) { delete store; }

size_t engram_table_count(const engram_store* store) { return store ? store->store->table_count() : 0; }
uint32_t engram_record_bytes(const engram_store* store, size_t table) {
  return store ? store->store->record_bytes(table) : 0;
}
uint64_t engram_row_count(const engram_store* store, size_t table) {
  return store ? store->store->row_count(table) : 0;
}

engram_status engram_gather_rows(engram_store* store, size_t table, const uint64_t* row_ids, size_t count,
                                 void* dst, size_t stride, engram_gather_result* result) {
  return engram_gather_rows_checked(store, table, row_ids, count, dst, stride, result, nullptr);
}

engram_status engram_gather_rows_checked(engram_store* store, size_t table, const uint64_t* row_ids, size_t count,
                                         void* dst, size_t stride, engram_gather_result* result,
                                         unsigned char* row_written) {
  engram_gather* g = nullptr;
  engram_status s = engram_gather_start(store, table, row_ids, count, dst, stride, &g);
  if (s != ENGRAM_OK) {
    if (row_written && count > 0) std::memset(row_written, 0, count);
    return s;
  }
  return engram_gather_wait_checked(g, result, row_written);
}

engram_status engram_gather_start(engram_store* store, size_t table, const uint64_t* row_ids, size_t count,
                                  void* dst, size_t stride, engram_gather** out) {
  if (!store || !out || (count > 0 && !row_ids)) {
    return Report(engram::Status::InvalidArgument("engram_gather_start: null argument"));
  }
  return Guarded("engram_gather_start", [&] {
    auto g = std::make_unique<engram_gather>();
    g->ticket = store->store->StartGather(table, std::span<const uint64_t>(row_ids, count),
                                          static_cast<std::byte*>(dst), stride);
    g->count = count;
    *out = g.release();
    return Report(engram::Status::OK());
  });
}

engram_status engram_gather_wait(engram_gather* gather, engram_gather_result* result) {
  return engram_gather_wait_checked(gather, result, nullptr);
}

engram_status engram_gather_wait_checked(engram_gather* gather, engram_gather_result* result,
                                         unsigned char* row_written) {
  if (!gather) return Report(engram::Status::InvalidArgument("engram_gather_wait: null gather"));
  std::unique_ptr<engram_gather> g(gather);
  return Guarded("engram_gather_wait", [&] {
    engram::GatherResult r = engram::WaitForGather(std::move(g->ticket));
    Fill(r, result);
    if (row_written) {
      for (size_t i = 0; i < g->count; ++i) row_written[i] = r.RowWritten(i) ? 1 : 0;
    }
    return Report(r.status);
  });
}

engram_status engram_prefetch(engram_store* store, size_t table, const uint64_t* row_ids, size_t count) {
  if (!store || (count > 0 && !row_ids)) return Report(engram::Status::InvalidArgument("engram_prefetch: null"));
  return Guarded("engram_prefetch",
                 [&] { return Report(store->store->Prefetch(table, std::span<const uint64_t>(row_ids, count))); });
}

void engram_prefetch_wait(engram_store* store) {
  if (store) store->store->WaitForPrefetches();
}

void engram_prefetch_release(engram_store* store, size_t table, const uint64_t* row_ids, size_t count) {
  if (!store || (!row_ids && count > 0)) return;
  (void)Guarded("engram_prefetch_release", [&] {
    store->store->ReleasePrefetch(table, std::span<const uint64_t>(row_ids, count));
    return ENGRAM_OK;
  });
}

engram_status engram_table_stats_get(const engram_store* store, size_t table, engram_table_stats* out) {
  if (!store || !out) return Report(engram::Status::InvalidArgument("engram_table_stats_get: null argument"));
  if (table >= store->store->table_count()) {
    return Report(engram::Status::InvalidArgument("engram_table_stats_get: no table " + std::to_string(table)));
  }
  return Guarded("engram_table_stats_get", [&] {
  engram::TableStats s = store->store->Stats(table);
  *out = engram_table_stats{};
  out->row_count = s.row_count;
  out->record_bytes = s.record_bytes;
  out->lookups = s.cache.lookups;
  out->hits = s.cache.hits;
  out->misses = s.cache.misses;
  out->inserts = s.cache.inserts;
  out->evictions = s.cache.evictions;
  out->refusals = s.cache.total_refusals();
  out->refusals_lost_admission = s.cache.refusals[int(engram::RefusalReason::kLostAdmission)];
  out->refusals_all_pinned = s.cache.refusals[int(engram::RefusalReason::kAllPinned)];
  out->relocations = s.cache.relocations;
  out->capacity_rows = s.cache.capacity_rows;
  out->resident_rows = s.cache.resident_rows;
  out->pinned_rows = s.cache.pinned_rows;
  out->gathers = s.gathers;
  out->failed_gathers = s.failed_gathers;
  out->readiness_wait_nanoseconds = s.readiness_wait_nanoseconds;
  out->readiness_wait_cache_nanoseconds = s.readiness_wait_cache_nanoseconds;
  out->readiness_wait_disk_nanoseconds = s.readiness_wait_disk_nanoseconds;
  out->prefetch_rows = s.prefetch_rows;
  out->prefetch_used_rows = s.prefetch_used_rows;
  out->prefetch_wasted_rows = s.prefetch_wasted_rows;
  out->io_reads = s.io_reads;
  out->io_bytes = s.io_bytes;
  out->io_errors = s.io_errors;
  out->checksum_failures = s.checksum_failures;
  return Report(engram::Status::OK());
  });
}

size_t engram_metrics_text(const engram_store* store, char* buffer, size_t capacity) {
  if (!store) return 0;
  size_t length = 0;
  // Out of memory: 0, with the reason in engram_last_error().
  (void)Guarded("engram_metrics_text", [&] {
    std::string text = store->store->MetricsText();
    if (buffer && capacity > 0) {
      size_t n = std::min(capacity - 1, text.size());
      std::memcpy(buffer, text.data(), n);
      buffer[n] = '\0';
    }
    length = text.size();
    return ENGRAM_OK;
  });
  return length;
}

uint16_t engram_metrics_port(const engram_store* store) { return store ? store->store->metrics_port() : 0; }

}  // extern "C"
