/* The row cache's statistics, defined once: engram::RowCacheStats (per table
 * in engram::TableStats::cache), the C engram_table_stats, the Prometheus
 * exposition and the Python binding's stats() dict all expand this table.
 *
 * Each entry of ENGRAM_CACHE_STATS is X(member, metric, kind, help):
 *   member  the field in engram::RowCacheStats and engram_table_stats, and
 *           the key "cache_<member>" of the Python stats() dict;
 *   metric  the Prometheus family name (labelled by table);
 *   kind    COUNTER (cumulative), GAUGE (a current level), or BY_REASON (a
 *           cumulative count per refusal reason: in C++ an array indexed by
 *           engram::RefusalReason; in C and Python the total `member` and
 *           one `member_<reason>` per reason; in Prometheus one series per
 *           `reason` label);
 *   help    the Prometheus HELP text and the Python documentation.
 * ENGRAM_REFUSAL_REASONS is X(enumerator, name, help): the reasons of
 * BY_REASON, in engram::RefusalReason's order.
 *
 * ENGRAM_CACHE_STATS is two lists because the C engram_table_stats lays
 * them out around the table counters (engram/counters.h): the fields of
 * ENGRAM_CACHE_STATS_FIRST, then the table counters, then
 * ENGRAM_CACHE_STATS_ADDED. A struct from an older header must stay a prefix
 * of the current one, so a new cache statistic goes at the end of
 * ENGRAM_CACHE_STATS_ADDED (the CapiLayout tests in tests/stats_faces_test.cc pin
 * the order).
 *
 * Plain C preprocessor: the C API (engram.h) expands it too. */
#ifndef ENGRAM_CACHE_STATS_H_
#define ENGRAM_CACHE_STATS_H_

#define ENGRAM_REFUSAL_REASONS(X)                                                              \
  X(kLostAdmission, lost_admission, "The admission rule preferred the resident victim.")       \
  X(kAllPinned, all_pinned, "Every candidate slot holds a pinned read-ahead row.")

#define ENGRAM_CACHE_STATS_FIRST(X)                                                                               \
  X(lookups, "engram_row_cache_lookups_total", COUNTER, "Row-cache lookups (each distinct row once per gather).") \
  X(hits, "engram_row_cache_hits_total", COUNTER, "Row-cache lookups that found the row.")                       \
  X(misses, "engram_row_cache_misses_total", COUNTER, "Row-cache lookups that did not find the row.")            \
  X(inserts, "engram_row_cache_inserts_total", COUNTER,                                                          \
    "Missed rows the cache kept (or found already present: another thread inserted them first).")              \
  X(evictions, "engram_row_cache_evictions_total", COUNTER,                                                      \
    "Resident rows removed to make room (for a missed row or a read-ahead row).")                               \
  X(refusals, "engram_row_cache_refusals_total", BY_REASON, "Missed rows the cache refused to keep, by reason.") \
  X(relocations, "engram_row_cache_relocations_total", COUNTER, "Residents moved to their other candidate set.") \
  X(capacity_rows, "engram_row_cache_capacity_rows", GAUGE, "Rows the table's cache can hold.")                  \
  X(resident_rows, "engram_row_cache_resident_rows", GAUGE, "Rows in the table's cache.")                        \
  X(pinned_rows, "engram_row_cache_pinned_rows", GAUGE, "Read-ahead rows pinned in the table's cache.")

/* Read-ahead is counted apart from inserts and refusals, so that
 * misses == inserts + refusals holds with or without read-ahead. */
#define ENGRAM_CACHE_STATS_ADDED(X)                                                                              \
  X(pinned_inserts, "engram_row_cache_pinned_inserts_total", COUNTER,                                           \
    "Read-ahead rows the cache placed or pinned in place.")                                                     \
  X(pinned_refusals, "engram_row_cache_pinned_refusals_total", COUNTER,                                         \
    "Read-ahead rows the cache refused: every candidate slot was pinned.")                                      \
  X(memory_bytes, "engram_row_cache_memory_bytes", GAUGE, "Memory charged to the table's cache budget.")        \
  X(overhead_bytes, "engram_row_cache_overhead_bytes", GAUGE,                                                   \
    "Memory charged to the table's cache budget beyond its rows (index, sketch, history).")

#define ENGRAM_CACHE_STATS(X) ENGRAM_CACHE_STATS_FIRST(X) ENGRAM_CACHE_STATS_ADDED(X)

#ifdef __cplusplus

#include <cstdint>

namespace engram {

// Why a missed row was not kept. Every miss is followed by exactly one insert
// attempt, so misses == inserts + sum(refusals) at every quiescent point --
// for a caller that offers every miss. The store offers every miss whose read
// succeeded, so for a store's table misses == inserts + sum(refusals) +
// TableStats::failed_rows (rows whose read or checksum failed).
// (An Insert that finds the row already present -- another thread inserted it
// first, or a concurrent relocation hid it from the Lookup -- counts as an
// insert, which is what keeps the identity exact under races.)
enum class RefusalReason : uint8_t {
#define ENGRAM_X(enumerator, name, help) enumerator,
  ENGRAM_REFUSAL_REASONS(ENGRAM_X)
#undef ENGRAM_X
  kCount,
};
inline constexpr int kRefusalReasonCount = static_cast<int>(RefusalReason::kCount);
struct RowCacheStats {
#define ENGRAM_CACHE_STAT_FIELD_COUNTER(member) uint64_t member = 0;
#define ENGRAM_CACHE_STAT_FIELD_GAUGE(member) uint64_t member = 0;
#define ENGRAM_CACHE_STAT_FIELD_BY_REASON(member) uint64_t member[kRefusalReasonCount] = {};
#define ENGRAM_X(member, metric, kind, help) ENGRAM_CACHE_STAT_FIELD_##kind(member)
  ENGRAM_CACHE_STATS(ENGRAM_X)
#undef ENGRAM_X
#undef ENGRAM_CACHE_STAT_FIELD_COUNTER
#undef ENGRAM_CACHE_STAT_FIELD_GAUGE
#undef ENGRAM_CACHE_STAT_FIELD_BY_REASON

  uint64_t total_refusals() const {
    uint64_t t = 0;
    for (uint64_t r : refusals) t += r;
    return t;
  }
  double hit_rate() const { return lookups ? double(hits) / double(lookups) : 0.0; }
};

// The table as data, for code that lists every statistic (the metrics
// exposition, language bindings) without naming each one.
enum class CacheStatKind : uint8_t { kCounter, kGauge, kByReason };
struct CacheStatInfo {
  const char* name;    // the RowCacheStats member's name
  const char* metric;  // Prometheus family
  CacheStatKind kind;
  const char* help;
  uint64_t RowCacheStats::*value;                             // kCounter, kGauge
  uint64_t (RowCacheStats::*by_reason)[kRefusalReasonCount];  // kByReason

  // The value; for kByReason the total over the reasons.
  uint64_t Total(const RowCacheStats& s) const {
    if (value != nullptr) return s.*value;
    uint64_t t = 0;
    for (uint64_t r : s.*by_reason) t += r;
    return t;
  }
};
#define ENGRAM_CACHE_STAT_INFO_COUNTER(member, metric, help) \
  {#member, metric, CacheStatKind::kCounter, help, &RowCacheStats::member, nullptr},
#define ENGRAM_CACHE_STAT_INFO_GAUGE(member, metric, help) \
  {#member, metric, CacheStatKind::kGauge, help, &RowCacheStats::member, nullptr},
#define ENGRAM_CACHE_STAT_INFO_BY_REASON(member, metric, help) \
  {#member, metric, CacheStatKind::kByReason, help, nullptr, &RowCacheStats::member},
inline constexpr CacheStatInfo kCacheStats[] = {
#define ENGRAM_X(member, metric, kind, help) ENGRAM_CACHE_STAT_INFO_##kind(member, metric, help)
    ENGRAM_CACHE_STATS(ENGRAM_X)
#undef ENGRAM_X
};
#undef ENGRAM_CACHE_STAT_INFO_COUNTER
#undef ENGRAM_CACHE_STAT_INFO_GAUGE
#undef ENGRAM_CACHE_STAT_INFO_BY_REASON

struct RefusalReasonInfo {
  RefusalReason reason;
  const char* name;  // the Prometheus `reason` label and the C / Python field suffix
  const char* help;
};
inline constexpr RefusalReasonInfo kRefusalReasons[] = {
#define ENGRAM_X(enumerator, name, help) {RefusalReason::enumerator, #name, help},
    ENGRAM_REFUSAL_REASONS(ENGRAM_X)
#undef ENGRAM_X
};

// "lost_admission", "all_pinned", ...
inline const char* RefusalReasonName(RefusalReason r) {
  for (const RefusalReasonInfo& info : kRefusalReasons) {
    if (info.reason == r) return info.name;
  }
  return "unknown";
}

}  // namespace engram

#endif /* __cplusplus */

#endif /* ENGRAM_CACHE_STATS_H_ */
