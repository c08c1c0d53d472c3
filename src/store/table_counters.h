// TableCounters: one table's counters (include/engram/counters.h), updated
// by concurrent gathers and read-aheads; Stats() reads them with CopyTo.
#pragma once

#include <atomic>
#include <cstdint>

#include "engram/counters.h"
#include "engram/store.h"

namespace engram {

struct TableCounters {
#define ENGRAM_X(member, metric, unit, help) std::atomic<uint64_t> member{0};
  ENGRAM_TABLE_COUNTERS(ENGRAM_X)
#undef ENGRAM_X

  void Add(std::atomic<uint64_t>& c, uint64_t v) { c.fetch_add(v, std::memory_order_relaxed); }
  void CopyTo(TableStats& s) const {
#define ENGRAM_X(member, metric, unit, help) s.member = member.load(std::memory_order_relaxed);
    ENGRAM_TABLE_COUNTERS(ENGRAM_X)
#undef ENGRAM_X
  }
};

}  // namespace engram
