/* The store's per-table counters and the fields of a gather's result,
 * defined once (the row cache's statistics are in engram/cache_stats.h).
 *
 * Each entry is X(member, metric, unit, help):
 *   member  the field name in engram::TableStats, the C engram_table_stats,
 *           the Python binding's stats() dict and the store's internal
 *           atomic counters;
 *   metric  the Prometheus family name (a counter, labelled by table);
 *   unit    ENGRAM_UNIT_COUNT, or ENGRAM_UNIT_NANOSECONDS for times that are
 *           counted in nanoseconds and exposed to Prometheus in seconds;
 *   help    the Prometheus HELP text.
 * Everything that lists the counters expands this table, so adding one here
 * adds it to the C++ and C stats, the exposition and the binding at once --
 * except for one rule: the C engram_table_stats lays these out before the
 * cache statistics added after them (engram/cache_stats.h), and a struct from
 * an older header must stay a prefix, so a new counter goes into
 * ENGRAM_TABLE_COUNTERS_ADDED, expanded at the end of engram_table_stats (the CapiLayout tests in tests/stats_faces_test.cc pin it).
 * Plain C preprocessor: the C API (engram.h) expands it too. */
#ifndef ENGRAM_COUNTERS_H_
#define ENGRAM_COUNTERS_H_

#define ENGRAM_UNIT_COUNT 0
#define ENGRAM_UNIT_NANOSECONDS 1

#define ENGRAM_TABLE_COUNTERS_FIRST(X)                                                                          \
  X(gathers, "engram_gathers_total", ENGRAM_UNIT_COUNT, "Gathers served.")                                      \
  X(failed_gathers, "engram_gather_failures_total", ENGRAM_UNIT_COUNT,                                          \
    "Gathers that failed (bad row ID, I/O error, corrupt block).")                                              \
  X(rows_requested, "engram_gather_rows_total", ENGRAM_UNIT_COUNT,                                              \
    "Row IDs requested by gathers (before deduplication).")                                                     \
  X(failed_rows, "engram_gather_failed_rows_total", ENGRAM_UNIT_COUNT,                                          \
    "Missed rows whose read or checksum failed (never offered to the cache).")                                  \
  X(readiness_wait_nanoseconds, "engram_readiness_wait_seconds_total", ENGRAM_UNIT_NANOSECONDS,                 \
    "Time from gather start until its rows were ready.")                                                        \
  X(readiness_wait_cache_nanoseconds, "engram_readiness_wait_cache_seconds_total", ENGRAM_UNIT_NANOSECONDS,     \
    "Part of the readiness wait spent on cache work (lookups, copies of hits).")                                \
  X(readiness_wait_disk_nanoseconds, "engram_readiness_wait_disk_seconds_total", ENGRAM_UNIT_NANOSECONDS,       \
    "Part of the readiness wait spent on disk work (reads, verification, inserts of misses).")                  \
  X(read_ahead_rows, "engram_read_ahead_rows_total", ENGRAM_UNIT_COUNT,                                         \
    "Rows delivered by read-ahead (pinned, or dropped because a gather already served them).")                  \
  X(read_ahead_used_rows, "engram_read_ahead_rows_used_total", ENGRAM_UNIT_COUNT,                               \
    "Read-ahead rows consumed by a gather.")                                                                    \
  X(read_ahead_wasted_rows, "engram_read_ahead_rows_wasted_total", ENGRAM_UNIT_COUNT,                           \
    "Read-ahead rows not used: released, or landed after a gather had served them.")                            \
  X(io_reads, "engram_io_reads_total", ENGRAM_UNIT_COUNT, "Block reads issued for this table.")                 \
  X(io_bytes, "engram_io_read_bytes_total", ENGRAM_UNIT_COUNT, "Bytes read for this table.")                    \
  X(io_errors, "engram_io_errors_total", ENGRAM_UNIT_COUNT,                                                     \
    "Block reads that failed (not those a shutdown cancelled).")                                                \
  X(checksum_failures, "engram_checksum_failures_total", ENGRAM_UNIT_COUNT,                                     \
    "Blocks that failed checksum verification.")

/* Counters added after the first release: the C engram_table_stats lays
 * them out after the cache statistics added since (ENGRAM_CACHE_STATS_ADDED).
 * Warm start (StoreOptions::hot_set_path): rows of the saved hot set placed
 * in the cache at open, and those not placed (the table's entry did not
 * match, the cache was full, the row was resident already or its read
 * failed, or the store closed first). A table in a Redis Cluster counts
 * the part of the readiness wait a file's table counts as disk time as
 * remote time (readiness_wait_remote_nanoseconds). */
#define ENGRAM_TABLE_COUNTERS_ADDED(X)                                                                         \
  X(warm_rows, "engram_warm_rows_total", ENGRAM_UNIT_COUNT,                                                   \
    "Rows of the saved hot set read back into the cache at open (warm start).")                               \
  X(warm_skipped_rows, "engram_warm_rows_skipped_total", ENGRAM_UNIT_COUNT,                                   \
    "Rows of the saved hot set not read back (hot set mismatch, cache full, already resident, read failed).")   \
  X(readiness_wait_remote_nanoseconds, "engram_readiness_wait_remote_seconds_total", ENGRAM_UNIT_NANOSECONDS, \
    "Part of the readiness wait spent on remote work (a Redis Cluster table's GETs, verification, inserts).")

#define ENGRAM_TABLE_COUNTERS(X) ENGRAM_TABLE_COUNTERS_FIRST(X) ENGRAM_TABLE_COUNTERS_ADDED(X)

/* What one gather did: engram::GatherResult, the C engram_gather_result and
 * the Python GatherResult's attributes all expand this table (in this order,
 * which is the C struct's: a new field goes at the end). Each entry is
 * X(member, help). The readiness wait is the wall time from the start of
 * the gather until its rows were ready; its cache and disk parts are
 * explained in engram::GatherResult. */
#define ENGRAM_GATHER_RESULT(X)                                                                              \
  X(rows, "Row IDs requested.")                                                                              \
  X(distinct_rows, "Row IDs after deduplication.")                                                           \
  X(hits, "Distinct rows served from the cache.")                                                            \
  X(misses, "Distinct rows read from disk.")                                                                 \
  X(inserts, "Misses the cache kept.")                                                                       \
  X(refusals, "Misses the cache refused to keep.")                                                           \
  X(read_ahead_used, "Hits on rows a read-ahead brought in.")                                                \
  X(blocks_read, "Blocks read from disk.")                                                                   \
  X(bytes_read, "Bytes read from disk.")                                                                     \
  X(wait_nanoseconds, "The readiness wait: from the start of the gather until its rows were ready.")        \
  X(cache_nanoseconds, "Part of the readiness wait spent on cache work (lookups, copies of hits).")          \
  X(disk_nanoseconds, "Part of the readiness wait spent on disk work (reads, verification, inserts).")

#endif /* ENGRAM_COUNTERS_H_ */
