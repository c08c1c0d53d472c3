/* Engram Store C API: what a Rust, Python or C runtime links against.
 *
 * Every function returns an engram_status (0 = OK). On failure the message
 * for the calling thread is available from engram_last_error() until the
 * next call on that thread. Handles are opaque; all functions are thread-safe
 * except closing a store while other calls on it are running.
 *
 * Structs carry their size: set `size` to sizeof the struct before passing
 * one (engram_table_stats s = {sizeof s};). The library reads and writes only
 * that many bytes, so a struct can grow new fields at its end without
 * breaking a caller built against an older header. A size of 0 is refused
 * with ENGRAM_INVALID_ARGUMENT. */
#ifndef ENGRAM_ENGRAM_H_
#define ENGRAM_ENGRAM_H_

#include <stddef.h>
#include <stdint.h>

#include "engram/cache_stats.h"
#include "engram/counters.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum engram_status {
  ENGRAM_OK = 0,
  ENGRAM_INVALID_ARGUMENT = 1,
  ENGRAM_NOT_FOUND = 2,
  ENGRAM_CORRUPTION = 3,
  ENGRAM_IO_ERROR = 4,
  ENGRAM_OUT_OF_RANGE = 5,
  ENGRAM_UNSUPPORTED = 6,
  ENGRAM_RESOURCE_EXHAUSTED = 7,
  ENGRAM_CANCELLED = 8,
  ENGRAM_INTERNAL = 9,
  ENGRAM_UNAVAILABLE = 10, /* the node service (engram-served) is gone or restarting */
  /* the node service (engram-served) did not answer within the client's
   * deadline (engram_store_options.node_open_timeout_ms to open,
   * node_call_timeout_ms per call): it is stopped or wedged */
  ENGRAM_DEADLINE_EXCEEDED = 11
} engram_status;

typedef struct engram_store engram_store;
typedef struct engram_gather engram_gather;
typedef struct engram_stager engram_stager;
typedef struct engram_stage engram_stage;

typedef struct engram_store_options {
  size_t size;                    /* sizeof(engram_store_options) */
  const char* const* table_paths; /* one file (or redis:// URL: TableOptions::path) per table */
  size_t table_count;
  uint64_t cache_bytes;           /* 0 = 1 GiB */
  const char* cache_policy;       /* NULL = "default" */
  const char* io_backend;         /* NULL = "auto" */
  const char* metrics_listen;     /* NULL = no endpoint; "127.0.0.1:9464" */
  const char* trace_path;         /* NULL = no trace capture; see StoreOptions::trace_path (written beside, renamed at close; never a file the store reads) */
  /* 0 = unused. In (0, 1]: the cache budget is the smaller of cache_bytes
   * (or its 1 GiB default) and this share of MemAvailable at open, for
   * unified-memory hosts (StoreOptions::cache_memory_fraction). */
  double cache_memory_fraction;
  /* 0 = 1. io_uring rings, each with its own thread, sharing the reads in
   * flight; more than one for a drive faster than one ring thread
   * (StoreOptions::io_rings). */
  uint32_t io_rings;
  /* Rank tables (engram-convert --ranks R OUT.json): manifest_count rank
   * manifests, opened as tables after table_paths' (in this order), each as
   * the file it names for `rank` (0..R-1, checked against the manifest). A
   * nonzero rank without manifests is refused (StoreOptions::rank). */
  const char* const* manifest_paths;
  size_t manifest_count;
  int32_t rank;
  /* Warm start (StoreOptions::hot_set_path, hot_set_interval_seconds): NULL =
   * off; else the file the store saves its hot set to at close (and every
   * hot_set_interval_seconds; 0 = only at close) and warms its caches from at
   * open, in the background. */
  const char* hot_set_path;
  double hot_set_interval_seconds;
  /* One store per node (StoreOptions::node): NULL = off; else the Unix
   * socket of an engram-served this store is a client of (an empty path is
   * refused). Its tables and rank must be the service's. The cache, I/O,
   * metrics, trace and warm-start fields are the service's: a client leaves
   * them 0 / NULL (or at their defaults), and any other value is refused
   * with ENGRAM_INVALID_ARGUMENT. node_client_name: the client's label in
   * the service's /metrics, at most 128 bytes of UTF-8 without control
   * characters; NULL = the process ID. While the service is gone, calls
   * fail with ENGRAM_UNAVAILABLE (the client reconnects by itself). */
  const char* node;
  const char* node_client_name;
  /* A node client's deadlines in milliseconds, 1..3,600,000; 0 = the
   * default (5,000 to open, 30,000 per call), as in an older caller's
   * struct without them (StoreOptions::node_open_timeout_ms,
   * node_call_timeout_ms). engram_store_open fails after the first, and a
   * gather whose misses the service does not answer after the second, with
   * ENGRAM_DEADLINE_EXCEEDED; calls that return no status (the waits, a
   * read-ahead release, the stats' figures) return at that deadline. The
   * session outlives a deadline: once the service answers again, so do
   * the calls. */
  uint32_t node_open_timeout_ms;
  uint32_t node_call_timeout_ms;
} engram_store_options;

/* The fields of ENGRAM_GATHER_RESULT (engram/counters.h), in its order. */
typedef struct engram_gather_result {
  size_t size; /* sizeof(engram_gather_result) */
#define ENGRAM_X(member, help) uint64_t member;
  ENGRAM_GATHER_RESULT(ENGRAM_X)
#undef ENGRAM_X
} engram_gather_result;

/* A cache statistic of kind BY_REASON (engram/cache_stats.h; only
 * `refusals` is) is its total followed by one `refusals_<reason>` per
 * refusal reason; every other statistic is one field. */
#define ENGRAM_C_CACHE_STAT_COUNTER(member) uint64_t member;
#define ENGRAM_C_CACHE_STAT_GAUGE(member) uint64_t member;
#define ENGRAM_C_REFUSAL_REASON(enumerator, name, help) uint64_t refusals_##name;
#define ENGRAM_C_CACHE_STAT_BY_REASON(member) uint64_t member; ENGRAM_REFUSAL_REASONS(ENGRAM_C_REFUSAL_REASON)
#define ENGRAM_C_CACHE_STAT(member, metric, kind, help) ENGRAM_C_CACHE_STAT_##kind(member)
#define ENGRAM_C_TABLE_COUNTER(member, metric, unit, help) uint64_t member;

/* Its layout is every older header's, then what was added since (see
 * engram/cache_stats.h): the row cache's first statistics, the table's
 * counters (engram/counters.h), then the cache statistics and the table
 * counters added since. */
typedef struct engram_table_stats {
  size_t size; /* sizeof(engram_table_stats) */
  uint64_t row_count;
  uint32_t record_bytes;
  ENGRAM_CACHE_STATS_FIRST(ENGRAM_C_CACHE_STAT)
  ENGRAM_TABLE_COUNTERS_FIRST(ENGRAM_C_TABLE_COUNTER)
  ENGRAM_CACHE_STATS_ADDED(ENGRAM_C_CACHE_STAT)
  ENGRAM_TABLE_COUNTERS_ADDED(ENGRAM_C_TABLE_COUNTER)
} engram_table_stats;
#undef ENGRAM_C_CACHE_STAT_COUNTER
#undef ENGRAM_C_CACHE_STAT_GAUGE
#undef ENGRAM_C_REFUSAL_REASON
#undef ENGRAM_C_CACHE_STAT_BY_REASON
#undef ENGRAM_C_CACHE_STAT
#undef ENGRAM_C_TABLE_COUNTER

const char* engram_last_error(void);
const char* engram_status_string(engram_status status);

engram_status engram_store_open(const engram_store_options* options, engram_store** out);
void engram_store_close(engram_store* store);
size_t engram_table_count(const engram_store* store);
uint32_t engram_record_bytes(const engram_store* store, size_t table);
uint64_t engram_row_count(const engram_store* store, size_t table);

/* Synchronous gather: row i lands at dst + i * stride. */
engram_status engram_gather_rows(engram_store* store, size_t table, const uint64_t* row_ids, size_t count,
                                 void* dst, size_t stride, engram_gather_result* result);
/* Asynchronous: start, then wait exactly once (which frees the handle).
 * row_ids and dst must stay valid until the wait returns. */
engram_status engram_gather_start(engram_store* store, size_t table, const uint64_t* row_ids, size_t count,
                                  void* dst, size_t stride, engram_gather** out);
engram_status engram_gather_wait(engram_gather* gather, engram_gather_result* result);
/* The same, and per row: row_written[i] (count bytes; NULL to skip) is 1 when
 * dst's row i holds its row, 0 when it does not. A gather that fails on a
 * read or a corrupt block still writes (and caches) its other rows: only the
 * rows marked 0 need a re-read or zeroing. After a bad argument every row is 0. */
engram_status engram_gather_rows_checked(engram_store* store, size_t table, const uint64_t* row_ids, size_t count,
                                         void* dst, size_t stride, engram_gather_result* result,
                                         unsigned char* row_written);
engram_status engram_gather_wait_checked(engram_gather* gather, engram_gather_result* result,
                                         unsigned char* row_written);

engram_status engram_read_ahead(engram_store* store, size_t table, const uint64_t* row_ids, size_t count);
void engram_read_ahead_wait(engram_store* store);
void engram_read_ahead_release(engram_store* store, size_t table, const uint64_t* row_ids, size_t count);

/* Blocks until the cache memory the store commits in the background after
 * open is committed (Store::WaitForCacheMemory). Gathers never need it; it
 * keeps that commit from running beside the first gathers. NULL: no-op. */
void engram_cache_memory_wait(engram_store* store);
/* Blocks until the warm start (hot_set_path) has read back what it will
 * (Store::WaitForWarmUp). Gathers never need it. NULL: no-op. */
void engram_warm_up_wait(engram_store* store);

engram_status engram_table_stats_get(const engram_store* store, size_t table, engram_table_stats* out);
/* The Prometheus exposition; returns its length. Writes at most capacity
 * bytes (NUL-terminated when it fits); call with capacity 0 to size it. */
size_t engram_metrics_text(const engram_store* store, char* buffer, size_t capacity);

/* The port the metrics endpoint listens on (the one chosen when
 * metrics_listen asked for port 0); 0 when the store serves no endpoint. */
uint16_t engram_metrics_port(const engram_store* store);

/* Step staging (engram/step_stager.h): one call per forward step hashes the
 * step's tokens for every Engram layer and gathers each layer's rows into one
 * buffer laid out [token][layer][slot][record_bytes]. The gathers start layer
 * by layer, in the stager's table order, and each layer can be waited for on
 * its own, so a runtime runs layer 0 while the later layers are still read. */

/* A step's figures: for one layer (engram_stage_wait_layer), or the whole
 * step's (engram_stage_wait: summed over the layers). wait_nanoseconds runs
 * from the start of the stage (hashing included) until the layer's rows (the
 * whole step's: the last layer's) were all in out. hash_nanoseconds is the
 * step's hashing time (0 in a layer's figures). */
typedef struct engram_stage_result {
  size_t size; /* sizeof(engram_stage_result) */
  uint64_t tokens;
  uint64_t rows; /* row IDs staged: tokens * rows_per_token (* layers for the step) */
  uint64_t distinct_rows;
  uint64_t hits;
  uint64_t misses;
  uint64_t refusals;
  uint64_t blocks_read;
  uint64_t bytes_read;
  uint64_t hash_nanoseconds;
  uint64_t wait_nanoseconds;
  uint64_t cache_nanoseconds;
  uint64_t disk_nanoseconds;
} engram_stage_result;

/* A stager over `tables` (store table indexes, one per layer, in the order of
 * out's layer axis). Each table's metadata must hold its hash_layout.
 * token_map_path: the tokenizer-to-compressed-ID map (a little-endian uint32
 * file), or NULL to hash raw token IDs as compressed IDs. The store must
 * outlive the stager; any number of threads may stage through it at once. */
engram_status engram_stager_create(engram_store* store, const size_t* tables, size_t table_count,
                                   const char* token_map_path, engram_stager** out);
void engram_stager_destroy(engram_stager* stager);
size_t engram_stager_layers(const engram_stager* stager);
uint32_t engram_stager_rows_per_token(const engram_stager* stager);
/* Bytes out must hold for a step of `tokens` tokens. */
size_t engram_stager_output_bytes(const engram_stager* stager, size_t tokens);

/* Hashes `tokens` (after `history`, the request's earlier tokens; only its
 * last few matter), starts every layer's gathers into out and returns the
 * step's handle. out must stay valid until engram_stage_wait returns;
 * history and tokens need not. A bad token is reported by the waits. The
 * handle may outlive its stager. */
engram_status engram_stage_start(const engram_stager* stager, const uint32_t* history, size_t history_count,
                                 const uint32_t* tokens, size_t token_count, void* out, engram_stage** stage);
/* Never blocks: 1 when layer's rows are in out (or its gathers failed), 0
 * when not yet, -1 for a NULL handle or a layer out of range (with the
 * reason in engram_last_error()). */
int engram_stage_ready(const engram_stage* stage, size_t layer);
/* Blocks until layer's rows are in out; fills result (NULL to skip) with
 * that layer's figures and returns its status. Any thread, any number of
 * times; the handle stays valid. ENGRAM_INVALID_ARGUMENT for a layer out of
 * range. */
engram_status engram_stage_wait_layer(engram_stage* stage, size_t layer, engram_stage_result* result);
/* Waits for every layer, fills result (NULL to skip) with the step's figures
 * and frees the handle: call it exactly once per handle, after every
 * engram_stage_wait_layer call on it has returned. */
engram_status engram_stage_wait(engram_stage* stage, engram_stage_result* result);

/* Completion words for a step (engram/step_stager.h, StepCompletion): once
 * layer k's rows are all in out, words[k] is set to `sequence` with release
 * ordering (to sequence | ENGRAM_STEP_WORD_FAILED for a layer that failed).
 * A GPU stream waits for it with cuStreamWaitValue32(word, sequence,
 * CU_STREAM_WAIT_VALUE_GEQ). count must be the stager's layers, sequence
 * 1..ENGRAM_MAX_STEP_SEQUENCE; the words must stay valid until the step's
 * last layer is in. Pass NULL for no words. */
#define ENGRAM_STEP_WORD_FAILED 0x80000000u
#define ENGRAM_MAX_STEP_SEQUENCE 0x7fffffffu
typedef struct engram_step_words {
  size_t size; /* sizeof(engram_step_words) */
  uint32_t* words;
  size_t count;
  uint32_t sequence;
} engram_step_words;

/* engram_stage_start with completion words. */
engram_status engram_stage_start_with_words(const engram_stager* stager, const uint32_t* history,
                                            size_t history_count, const uint32_t* tokens, size_t token_count,
                                            void* out, const engram_step_words* words, engram_stage** stage);
/* The synchronous stage: hashes and gathers every layer on the calling
 * thread (which reads its own misses), setting each layer's word (if words
 * is not NULL) as the layer lands; returns once every row is in out, with
 * the step's figures in result (NULL to skip). */
engram_status engram_stage_rows(const engram_stager* stager, const uint32_t* history, size_t history_count,
                                const uint32_t* tokens, size_t token_count, void* out,
                                const engram_step_words* words, engram_stage_result* result);

/* A step's row IDs in, as a GPU hash kernel writes them: `ids` holds id_count
 * = tokens * layers * rows_per_token IDs, [token][layer][slot] (each layer's
 * IDs index its own table; a rank's, the rank's table), out as for a stage.
 * An id_count that is not a whole number of tokens is
 * ENGRAM_INVALID_ARGUMENT, an ID past its table ENGRAM_OUT_OF_RANGE (the
 * message names it), before anything is gathered. engram_gather_step runs
 * on the calling thread; engram_gather_step_start returns a stage handle
 * (engram_stage_ready / _wait_layer / _wait) and copies the IDs, so only
 * out and the words must stay valid until the wait. */
engram_status engram_gather_step(const engram_stager* stager, const uint64_t* ids, size_t id_count, void* out,
                                 const engram_step_words* words, engram_stage_result* result);
engram_status engram_gather_step_start(const engram_stager* stager, const uint64_t* ids, size_t id_count, void* out,
                                       const engram_step_words* words, engram_stage** stage);

/* A step ring (engram/step_ring.h): `slots` out buffers of
 * engram_stager_output_bytes(stager, max_tokens) bytes and their completion
 * words (one uint32 per layer), allocated once at creation and never moved,
 * for a runtime whose forward pass is a CUDA graph. A start copies the
 * step's IDs (or tokens) into the ring, picks the next free slot, queues the
 * step for the ring's own thread and returns the slot and the step's
 * sequence number: it never allocates, never does I/O and never waits for
 * a gather, so it may run in a CUDA host callback. The ring's thread sets
 * the slot's words as each layer lands. Release a slot once its step's
 * compute is done. The stager must outlive the ring. */
typedef struct engram_step_ring engram_step_ring;
typedef struct engram_step_ring_options {
  size_t size;       /* sizeof(engram_step_ring_options) */
  size_t slots;      /* 0 = 2 */
  size_t max_tokens; /* the most tokens of a step: 1 or more */
  int huge_pages;    /* nonzero: 2 MiB pages where the kernel allows */
  /* Called once per buffer at creation (each slot's out, then the words of
   * every slot as one array), e.g. to cudaHostRegister it; a status other
   * than ENGRAM_OK fails the creation. NULL: none. */
  engram_status (*register_buffer)(void* user, void* address, size_t bytes);
  /* Called for each registered buffer when the ring is destroyed, after its
   * last step (cudaHostUnregister). NULL: none. */
  void (*unregister_buffer)(void* user, void* address, size_t bytes);
  void* user; /* passed to both */
} engram_step_ring_options;

engram_status engram_step_ring_create(const engram_stager* stager, const engram_step_ring_options* options,
                                      engram_step_ring** out);
/* Stages the steps already started, unregisters and frees the buffers. */
void engram_step_ring_destroy(engram_step_ring* ring);
size_t engram_step_ring_slots(const engram_step_ring* ring);
size_t engram_step_ring_buffer_bytes(const engram_step_ring* ring);
/* Slot `slot`'s out, and its words (engram_stager_layers of them); NULL for a
 * slot past the last. */
void* engram_step_ring_buffer(const engram_step_ring* ring, size_t slot);
uint32_t* engram_step_ring_words(const engram_step_ring* ring, size_t slot);
/* Starts a step of row IDs ([token][layer][slot], as engram_gather_step) or
 * of tokens after history; *slot and *sequence say where and with what.
 * ENGRAM_RESOURCE_EXHAUSTED when every slot holds a step not yet released. */
engram_status engram_step_ring_start_ids(engram_step_ring* ring, const uint64_t* ids, size_t id_count, size_t* slot,
                                         uint32_t* sequence);
engram_status engram_step_ring_start_tokens(engram_step_ring* ring, const uint32_t* history, size_t history_count,
                                            const uint32_t* tokens, size_t token_count, size_t* slot,
                                            uint32_t* sequence);
/* Blocks until the slot's step is staged; its figures (NULL to skip) and
 * status. ENGRAM_INVALID_ARGUMENT for a slot with no step. */
engram_status engram_step_ring_wait(engram_step_ring* ring, size_t slot, engram_stage_result* result);
/* Frees the slot for a later step. ENGRAM_INVALID_ARGUMENT for a slot with
 * no step (released twice) or a step still being staged. */
engram_status engram_step_ring_release(engram_step_ring* ring, size_t slot);

#ifdef __cplusplus
}
#endif

#endif /* ENGRAM_ENGRAM_H_ */
