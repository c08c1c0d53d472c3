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

#include "engram/step_ring.h"
#include "engram/step_stager.h"
#include "engram/store.h"

struct engram_store {
  std::unique_ptr<engram::Store> store;
};

// Holds no pointer to its store: a gather can be waited on after the store
// is closed (closing finishes every pending gather; see WaitForGather).
struct engram_gather {
  engram::GatherTicket ticket;
  size_t count = 0;  // row IDs asked for, the length of a row_written array
};

struct engram_stager {
  std::unique_ptr<engram::StepStager> stager;
};

// Holds no pointer to its stager or store: the ticket owns what the step's
// gathers need, and a store finishes every gather before it closes.
struct engram_stage {
  engram::StageTicket ticket;
  uint64_t tokens = 0;
};

struct engram_step_ring {
  std::unique_ptr<engram::StepRing> ring;
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

// A caller's struct of `size` bytes (its header's sizeof): sizes up to ours
// are read or written as far as they go, larger ones (a newer header) as far
// as ours does.
template <typename T>
engram::Status CheckSize(const T& sized, const char* what) {
  if (sized.size < sizeof(size_t)) {
    return engram::Status::InvalidArgument(std::string(what) + ".size is " + std::to_string(sized.size) +
                                           "; set it to sizeof(" + what + ")");
  }
  return engram::Status::OK();
}

// Reads a caller's struct: its fields up to its size, the rest zero.
template <typename T>
T ReadSized(const T& in) {
  T full{};
  std::memcpy(&full, &in, std::min(in.size, sizeof(T)));
  return full;
}

// Writes `full` into a caller's struct, as far as its size reaches.
template <typename T>
void WriteSized(const T& full, T* out) {
  const size_t size = out->size;
  std::memcpy(static_cast<void*>(out), &full, std::min(size, sizeof(T)));
  out->size = size;
}

void Fill(const engram::GatherResult& r, engram_gather_result* out) {
  if (!out) return;
  engram_gather_result full{};
#define ENGRAM_X(member, help) full.member = r.member;
  ENGRAM_GATHER_RESULT(ENGRAM_X)
#undef ENGRAM_X
  WriteSized(full, out);
}

// A layer's or a step's figures into a caller's engram_stage_result.
template <typename Figures>
void FillStage(const Figures& r, uint64_t tokens, uint64_t hash_nanoseconds, engram_stage_result* out) {
  if (!out) return;
  engram_stage_result full{};
  full.tokens = tokens;
  full.rows = r.rows;
  full.distinct_rows = r.distinct_rows;
  full.hits = r.hits;
  full.misses = r.misses;
  full.refusals = r.refusals;
  full.blocks_read = r.blocks_read;
  full.bytes_read = r.bytes_read;
  full.hash_nanoseconds = hash_nanoseconds;
  full.wait_nanoseconds = r.wait_nanoseconds;
  full.cache_nanoseconds = r.cache_nanoseconds;
  full.disk_nanoseconds = r.disk_nanoseconds;
  WriteSized(full, out);
}

// A caller's completion words (NULL: none) as the stager takes them.
engram::Result<engram::StepCompletion> StepWords(const engram_step_words* words, const char* what) {
  engram::StepCompletion c;
  if (words == nullptr) return c;
  if (auto st = CheckSize(*words, "engram_step_words"); !st.ok()) return st;
  const engram_step_words w = ReadSized(*words);
  if (w.count > 0 && w.words == nullptr) {
    return engram::Status::InvalidArgument(std::string(what) + ": engram_step_words.words is NULL");
  }
  c.words = std::span<uint32_t>(w.words, w.count);
  c.sequence = w.sequence;
  return c;
}

}  // namespace

static_assert(int(engram::StatusCode::kInternal) == ENGRAM_INTERNAL, "C status codes follow StatusCode");
static_assert(int(engram::StatusCode::kUnavailable) == ENGRAM_UNAVAILABLE, "C status codes follow StatusCode");
static_assert(int(engram::StatusCode::kDeadlineExceeded) == ENGRAM_DEADLINE_EXCEEDED,
              "C status codes follow StatusCode");

extern "C" {

const char* engram_last_error(void) { return g_last_error.c_str(); }

const char* engram_status_string(engram_status status) {
  // A C caller may pass any int as the enum; in C++ reading a value outside
  // the enumerators as the enum type is undefined, so the bits are read as
  // the int they are.
  static_assert(sizeof(engram_status) == sizeof(int));
  int code;
  std::memcpy(&code, &status, sizeof(code));
  if (code < ENGRAM_OK || code > ENGRAM_DEADLINE_EXCEEDED) return "Unknown";
  return engram::StatusCodeName(static_cast<engram::StatusCode>(code));
}

engram_status engram_store_open(const engram_store_options* options_in, engram_store** out) {
  return Guarded("engram_store_open", [&] {
  if (!options_in || !out) return Report(engram::Status::InvalidArgument("engram_store_open: null argument"));
  *out = nullptr;
  if (auto st = CheckSize(*options_in, "engram_store_options"); !st.ok()) return Report(st);
  const engram_store_options read = ReadSized(*options_in);
  const engram_store_options* options = &read;
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
  if (options->io_rings) o.io_rings = options->io_rings;
  // Rank tables: a struct without these fields reads them as zero (no manifests).
  if (options->manifest_count > 0 && !options->manifest_paths) {
    return Report(engram::Status::InvalidArgument("engram_store_open: manifest_paths is null"));
  }
  for (size_t i = 0; i < options->manifest_count; ++i) {
    if (!options->manifest_paths[i]) return Report(engram::Status::InvalidArgument("engram_store_open: null manifest"));
    engram::TableOptions t;
    t.manifest = options->manifest_paths[i];
    o.tables.push_back(std::move(t));
  }
  if (options->manifest_count > 0 || options->rank != 0) o.rank = options->rank;
  // Warm start (fields zero in an older caller's struct: off).
  if (options->hot_set_path) o.hot_set_path = options->hot_set_path;
  o.hot_set_interval_seconds = options->hot_set_interval_seconds;
  // One store per node (NULL in an older caller's struct: a private store;
  // zero deadlines: the defaults). "" would be a private store to
  // StoreOptions, which is not what a caller who set node meant.
  if (options->node) {
    if (options->node[0] == '\0') {
      return Report(engram::Status::InvalidArgument(
          "engram_store_open: node is an empty socket path (NULL opens a store of this process's own)"));
    }
    o.node = options->node;
  }
  if (options->node_client_name) o.node_client_name = options->node_client_name;
  if (options->node_open_timeout_ms) o.node_open_timeout_ms = options->node_open_timeout_ms;
  if (options->node_call_timeout_ms) o.node_call_timeout_ms = options->node_call_timeout_ms;
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

namespace {

// A finished gather of `count` row IDs as the C API reports it.
engram_status ReportGather(const engram::GatherResult& r, size_t count, engram_gather_result* result,
                           unsigned char* row_written) {
  Fill(r, result);
  if (row_written) {
    for (size_t i = 0; i < count; ++i) row_written[i] = r.RowWritten(i) ? 1 : 0;
  }
  return Report(r.status);
}

}  // namespace

engram_status engram_gather_rows(engram_store* store, size_t table, const uint64_t* row_ids, size_t count,
                                 void* dst, size_t stride, engram_gather_result* result) {
  return engram_gather_rows_checked(store, table, row_ids, count, dst, stride, result, nullptr);
}

engram_status engram_gather_rows_checked(engram_store* store, size_t table, const uint64_t* row_ids, size_t count,
                                         void* dst, size_t stride, engram_gather_result* result,
                                         unsigned char* row_written) {
  if (result) {
    if (auto st = CheckSize(*result, "engram_gather_result"); !st.ok()) {
      if (row_written && count > 0) std::memset(row_written, 0, count);
      return Report(st);
    }
  }
  if (!store || (count > 0 && !row_ids)) {
    if (row_written && count > 0) std::memset(row_written, 0, count);
    return Report(engram::Status::InvalidArgument("engram_gather_rows: null argument"));
  }
  return Guarded("engram_gather_rows", [&] {
    // Store::Gather, not a ticket: the calling thread waits anyway, so it
    // reads the misses itself (store.h).
    engram::GatherResult r = store->store->Gather(table, std::span<const uint64_t>(row_ids, count),
                                                  static_cast<std::byte*>(dst), stride);
    return ReportGather(r, count, result, row_written);
  });
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
    engram::GatherResult r = g->ticket.Wait();
    if (result) {
      // Checked after the wait: the handle is freed either way.
      if (auto st = CheckSize(*result, "engram_gather_result"); !st.ok()) return Report(st);
    }
    return ReportGather(r, g->count, result, row_written);
  });
}

engram_status engram_read_ahead(engram_store* store, size_t table, const uint64_t* row_ids, size_t count) {
  if (!store || (count > 0 && !row_ids)) return Report(engram::Status::InvalidArgument("engram_read_ahead: null"));
  return Guarded("engram_read_ahead",
                 [&] { return Report(store->store->ReadAhead(table, std::span<const uint64_t>(row_ids, count))); });
}

void engram_read_ahead_wait(engram_store* store) {
  if (store) store->store->WaitForReadAheads();
}

void engram_cache_memory_wait(engram_store* store) {
  if (store) store->store->WaitForCacheMemory();
}

void engram_warm_up_wait(engram_store* store) {
  if (store) store->store->WaitForWarmUp();
}

void engram_read_ahead_release(engram_store* store, size_t table, const uint64_t* row_ids, size_t count) {
  if (!store || (!row_ids && count > 0)) return;
  (void)Guarded("engram_read_ahead_release", [&] {
    store->store->ReleaseReadAhead(table, std::span<const uint64_t>(row_ids, count));
    return ENGRAM_OK;
  });
}

engram_status engram_table_stats_get(const engram_store* store, size_t table, engram_table_stats* out) {
  if (!store || !out) return Report(engram::Status::InvalidArgument("engram_table_stats_get: null argument"));
  if (auto st = CheckSize(*out, "engram_table_stats"); !st.ok()) return Report(st);
  if (table >= store->store->table_count()) {
    return Report(engram::Status::InvalidArgument("engram_table_stats_get: no table " + std::to_string(table)));
  }
  return Guarded("engram_table_stats_get", [&] {
  engram::TableStats s = store->store->Stats(table);
  if (!s.status.ok()) return Report(s.status);  // a node client's service did not answer
  engram_table_stats full{};
  full.row_count = s.row_count;
  full.record_bytes = s.record_bytes;
#define FILL_COUNTER(member) full.member = s.cache.member;
#define FILL_GAUGE(member) full.member = s.cache.member;
#define FILL_REASON(enumerator, name, help) \
  full.refusals_##name = s.cache.refusals[static_cast<int>(engram::RefusalReason::enumerator)];
#define FILL_BY_REASON(member)                      \
  full.member = 0;                                  \
  for (uint64_t n : s.cache.member) full.member += n; \
  ENGRAM_REFUSAL_REASONS(FILL_REASON)
#define ENGRAM_X(member, metric, kind, help) FILL_##kind(member)
  ENGRAM_CACHE_STATS(ENGRAM_X)
#undef ENGRAM_X
#undef FILL_BY_REASON
#undef FILL_REASON
#undef FILL_GAUGE
#undef FILL_COUNTER
#define ENGRAM_X(member, metric, unit, help) full.member = s.member;
  ENGRAM_TABLE_COUNTERS(ENGRAM_X)
#undef ENGRAM_X
  WriteSized(full, out);
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

engram_status engram_stager_create(engram_store* store, const size_t* tables, size_t table_count,
                                   const char* token_map_path, engram_stager** out) {
  if (!store || !out || (table_count > 0 && !tables)) {
    return Report(engram::Status::InvalidArgument("engram_stager_create: null argument"));
  }
  *out = nullptr;
  return Guarded("engram_stager_create", [&] {
    std::shared_ptr<const engram::TokenMap> token_map;
    if (token_map_path) {
      auto map = engram::TokenMap::FromFile(token_map_path);
      if (!map.ok()) return Report(map.status().WithContext("engram_stager_create: token map"));
      token_map = std::make_shared<const engram::TokenMap>(std::move(map).value());
    }
    auto stager = engram::StepStager::Create(*store->store, std::vector<size_t>(tables, tables + table_count),
                                             std::move(token_map));
    if (!stager.ok()) return Report(stager.status());
    *out = new engram_stager{std::move(stager).value()};
    return Report(engram::Status::OK());
  });
}

void engram_stager_destroy(engram_stager* stager) { delete stager; }

size_t engram_stager_layers(const engram_stager* stager) { return stager ? stager->stager->layers() : 0; }
uint32_t engram_stager_rows_per_token(const engram_stager* stager) {
  return stager ? stager->stager->rows_per_token() : 0;
}
size_t engram_stager_output_bytes(const engram_stager* stager, size_t tokens) {
  return stager ? stager->stager->OutputBytes(tokens) : 0;
}

engram_status engram_stage_start(const engram_stager* stager, const uint32_t* history, size_t history_count,
                                 const uint32_t* tokens, size_t token_count, void* out, engram_stage** stage) {
  if (!stager || !stage || (history_count > 0 && !history) || (token_count > 0 && !tokens)) {
    return Report(engram::Status::InvalidArgument("engram_stage_start: null argument"));
  }
  *stage = nullptr;
  return Guarded("engram_stage_start", [&] {
    auto s = std::make_unique<engram_stage>();
    s->tokens = token_count;
    s->ticket = stager->stager->Start(std::span<const uint32_t>(history, history_count),
                                      std::span<const uint32_t>(tokens, token_count), static_cast<std::byte*>(out));
    *stage = s.release();
    return Report(engram::Status::OK());
  });
}

engram_status engram_stage_start_with_words(const engram_stager* stager, const uint32_t* history,
                                            size_t history_count, const uint32_t* tokens, size_t token_count,
                                            void* out, const engram_step_words* words, engram_stage** stage) {
  if (!stager || !stage || (history_count > 0 && !history) || (token_count > 0 && !tokens)) {
    return Report(engram::Status::InvalidArgument("engram_stage_start_with_words: null argument"));
  }
  *stage = nullptr;
  return Guarded("engram_stage_start_with_words", [&] {
    auto completion = StepWords(words, "engram_stage_start_with_words");
    if (!completion.ok()) return Report(completion.status());
    if (auto st = stager->stager->CheckCompletion(*completion); !st.ok()) return Report(st);
    auto s = std::make_unique<engram_stage>();
    s->tokens = token_count;
    s->ticket = stager->stager->Start(std::span<const uint32_t>(history, history_count),
                                      std::span<const uint32_t>(tokens, token_count), static_cast<std::byte*>(out),
                                      nullptr, std::move(completion).value());
    *stage = s.release();
    return Report(engram::Status::OK());
  });
}

engram_status engram_stage_rows(const engram_stager* stager, const uint32_t* history, size_t history_count,
                                const uint32_t* tokens, size_t token_count, void* out,
                                const engram_step_words* words, engram_stage_result* result) {
  if (!stager || (history_count > 0 && !history) || (token_count > 0 && !tokens)) {
    return Report(engram::Status::InvalidArgument("engram_stage_rows: null argument"));
  }
  if (result) {
    if (auto st = CheckSize(*result, "engram_stage_result"); !st.ok()) return Report(st);
  }
  return Guarded("engram_stage_rows", [&] {
    auto completion = StepWords(words, "engram_stage_rows");
    if (!completion.ok()) return Report(completion.status());
    engram::StageResult r = stager->stager->Stage(std::span<const uint32_t>(history, history_count),
                                                  std::span<const uint32_t>(tokens, token_count),
                                                  static_cast<std::byte*>(out), *completion);
    FillStage(r, r.tokens, r.hash_nanoseconds, result);
    return Report(r.status);
  });
}

engram_status engram_gather_step(const engram_stager* stager, const uint64_t* ids, size_t id_count, void* out,
                                 const engram_step_words* words, engram_stage_result* result) {
  if (!stager || (id_count > 0 && !ids)) return Report(engram::Status::InvalidArgument("engram_gather_step: null argument"));
  if (result) {
    if (auto st = CheckSize(*result, "engram_stage_result"); !st.ok()) return Report(st);
  }
  return Guarded("engram_gather_step", [&] {
    auto completion = StepWords(words, "engram_gather_step");
    if (!completion.ok()) return Report(completion.status());
    engram::StageResult r = stager->stager->GatherStep(std::span<const uint64_t>(ids, id_count),
                                                       static_cast<std::byte*>(out), *completion);
    FillStage(r, r.tokens, r.hash_nanoseconds, result);
    return Report(r.status);
  });
}

engram_status engram_gather_step_start(const engram_stager* stager, const uint64_t* ids, size_t id_count, void* out,
                                       const engram_step_words* words, engram_stage** stage) {
  if (!stager || !stage || (id_count > 0 && !ids)) {
    return Report(engram::Status::InvalidArgument("engram_gather_step_start: null argument"));
  }
  *stage = nullptr;
  return Guarded("engram_gather_step_start", [&] {
    auto completion = StepWords(words, "engram_gather_step_start");
    if (!completion.ok()) return Report(completion.status());
    const std::span<const uint64_t> span(ids, id_count);
    // Refused here rather than by the waits: the caller learns at once.
    if (auto st = stager->stager->CheckCompletion(*completion); !st.ok()) return Report(st);
    if (auto st = stager->stager->CheckGatherStepIds(span); !st.ok()) return Report(st);
    auto s = std::make_unique<engram_stage>();
    s->tokens = id_count / (stager->stager->layers() * size_t(stager->stager->rows_per_token()));
    s->ticket = stager->stager->StartGatherStep(span, static_cast<std::byte*>(out), nullptr,
                                                std::move(completion).value());
    *stage = s.release();
    return Report(engram::Status::OK());
  });
}

engram_status engram_step_ring_create(const engram_stager* stager, const engram_step_ring_options* options,
                                      engram_step_ring** out) {
  if (!stager || !options || !out) return Report(engram::Status::InvalidArgument("engram_step_ring_create: null argument"));
  *out = nullptr;
  if (auto st = CheckSize(*options, "engram_step_ring_options"); !st.ok()) return Report(st);
  return Guarded("engram_step_ring_create", [&] {
    const engram_step_ring_options o = ReadSized(*options);
    engram::StepRingOptions ro;
    ro.slots = o.slots == 0 ? 2 : o.slots;
    ro.max_tokens = o.max_tokens;
    ro.huge_pages = o.huge_pages != 0;
    if (o.register_buffer) {
      ro.register_buffer = [fn = o.register_buffer, user = o.user](void* address, size_t bytes) {
        const engram_status st = fn(user, address, bytes);
        if (st == ENGRAM_OK) return engram::Status::OK();
        return engram::Status(static_cast<engram::StatusCode>(st),
                              "the register_buffer callback returned " + std::string(engram_status_string(st)));
      };
    }
    if (o.unregister_buffer) {
      ro.unregister_buffer = [fn = o.unregister_buffer, user = o.user](void* address, size_t bytes) {
        fn(user, address, bytes);
      };
    }
    auto ring = engram::StepRing::Create(*stager->stager, std::move(ro));
    if (!ring.ok()) return Report(ring.status());
    *out = new engram_step_ring{std::move(ring).value()};
    return Report(engram::Status::OK());
  });
}

void engram_step_ring_destroy(engram_step_ring* ring) { delete ring; }
size_t engram_step_ring_slots(const engram_step_ring* ring) { return ring ? ring->ring->slots() : 0; }
size_t engram_step_ring_buffer_bytes(const engram_step_ring* ring) { return ring ? ring->ring->buffer_bytes() : 0; }
void* engram_step_ring_buffer(const engram_step_ring* ring, size_t slot) {
  return ring ? ring->ring->buffer(slot) : nullptr;
}
uint32_t* engram_step_ring_words(const engram_step_ring* ring, size_t slot) {
  return ring ? ring->ring->words(slot) : nullptr;
}

namespace {

// A ring start's outcome into the caller's slot and sequence number.
engram_status ReportStarted(const engram::Result<engram::StepRing::Started>& started, size_t* slot,
                            uint32_t* sequence) {
  if (!started.ok()) return Report(started.status());
  *slot = started->slot;
  *sequence = started->sequence;
  return Report(engram::Status::OK());
}

}  // namespace

engram_status engram_step_ring_start_ids(engram_step_ring* ring, const uint64_t* ids, size_t id_count, size_t* slot,
                                         uint32_t* sequence) {
  if (!ring || !slot || !sequence || (id_count > 0 && !ids)) {
    return Report(engram::Status::InvalidArgument("engram_step_ring_start_ids: null argument"));
  }
  return Guarded("engram_step_ring_start_ids", [&] {
    return ReportStarted(ring->ring->StartGatherStep(std::span<const uint64_t>(ids, id_count)), slot, sequence);
  });
}

engram_status engram_step_ring_start_tokens(engram_step_ring* ring, const uint32_t* history, size_t history_count,
                                            const uint32_t* tokens, size_t token_count, size_t* slot,
                                            uint32_t* sequence) {
  if (!ring || !slot || !sequence || (history_count > 0 && !history) || (token_count > 0 && !tokens)) {
    return Report(engram::Status::InvalidArgument("engram_step_ring_start_tokens: null argument"));
  }
  return Guarded("engram_step_ring_start_tokens", [&] {
    return ReportStarted(ring->ring->StartStage(std::span<const uint32_t>(history, history_count),
                                                std::span<const uint32_t>(tokens, token_count)),
                         slot, sequence);
  });
}

engram_status engram_step_ring_wait(engram_step_ring* ring, size_t slot, engram_stage_result* result) {
  if (!ring) return Report(engram::Status::InvalidArgument("engram_step_ring_wait: null ring"));
  if (result) {
    if (auto st = CheckSize(*result, "engram_stage_result"); !st.ok()) return Report(st);
  }
  return Guarded("engram_step_ring_wait", [&] {
    engram::StageResult r = ring->ring->Wait(slot);
    FillStage(r, r.tokens, r.hash_nanoseconds, result);
    return Report(r.status);
  });
}

engram_status engram_step_ring_release(engram_step_ring* ring, size_t slot) {
  if (!ring) return Report(engram::Status::InvalidArgument("engram_step_ring_release: null ring"));
  return Guarded("engram_step_ring_release", [&] { return Report(ring->ring->Release(slot)); });
}

int engram_stage_ready(const engram_stage* stage, size_t layer) {
  if (!stage) {
    Report(engram::Status::InvalidArgument("engram_stage_ready: null stage"));
    return -1;
  }
  engram::Result<bool> ready = stage->ticket.Ready(layer);
  if (!ready.ok()) {
    Report(ready.status().WithContext("engram_stage_ready"));
    return -1;
  }
  return *ready ? 1 : 0;
}

engram_status engram_stage_wait_layer(engram_stage* stage, size_t layer, engram_stage_result* result) {
  if (!stage) return Report(engram::Status::InvalidArgument("engram_stage_wait_layer: null stage"));
  if (result) {
    if (auto st = CheckSize(*result, "engram_stage_result"); !st.ok()) return Report(st);
  }
  return Guarded("engram_stage_wait_layer", [&] {
    engram::StageLayerResult r = stage->ticket.WaitLayer(layer);
    FillStage(r, stage->tokens, 0, result);
    return Report(r.status);
  });
}

engram_status engram_stage_wait(engram_stage* stage, engram_stage_result* result) {
  if (!stage) return Report(engram::Status::InvalidArgument("engram_stage_wait: null stage"));
  std::unique_ptr<engram_stage> s(stage);
  return Guarded("engram_stage_wait", [&] {
    engram::StageResult r = s->ticket.Wait();
    if (result) {
      // Checked after the wait: the handle is freed either way.
      if (auto st = CheckSize(*result, "engram_stage_result"); !st.ok()) return Report(st);
    }
    FillStage(r, r.tokens, r.hash_nanoseconds, result);
    return Report(r.status);
  });
}

}  // extern "C"
