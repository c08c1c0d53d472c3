// TableState: everything the store keeps for one open table: the validated
// file, its FileId in the I/O engine, its row cache and its counters.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "src/cache/row_cache.h"
#include "storage/io/io_engine.h"
#include "storage/table_file.h"

namespace engram {

struct TableCounters {
  std::atomic<uint64_t> gathers{0};
  std::atomic<uint64_t> failed_gathers{0};
  std::atomic<uint64_t> rows_requested{0};
  std::atomic<uint64_t> failed_rows{0};
  std::atomic<uint64_t> wait_ns{0};
  std::atomic<uint64_t> wait_cache_ns{0};
  std::atomic<uint64_t> wait_disk_ns{0};
  std::atomic<uint64_t> prefetch_rows{0};
  std::atomic<uint64_t> prefetch_used_rows{0};
  std::atomic<uint64_t> prefetch_wasted_rows{0};
  std::atomic<uint64_t> io_reads{0};
  std::atomic<uint64_t> io_bytes{0};
  std::atomic<uint64_t> io_errors{0};
  std::atomic<uint64_t> checksum_failures{0};

  void Add(std::atomic<uint64_t>& c, uint64_t v) { c.fetch_add(v, std::memory_order_relaxed); }
};

struct TableState {
  std::string name;
  std::unique_ptr<TableFile> file;  // validated header + metadata; geometry
  io::FileId file_id = 0;
  uint64_t cache_budget_bytes = 0;
  std::unique_ptr<RowCache> cache;
  TableCounters counters;

  // Rows inserted pinned by Prefetch and not yet consumed or released. The
  // count lets gathers skip the lock when no read-ahead is outstanding.
  // Invariant: a row is pinned in `cache` exactly while it is in this set.
  // Every pin and unpin happens under prefetch_mu together with the set
  // change (InsertPinned + insert when read-ahead lands, erase + Unpin when
  // a gather consumes or ReleasePrefetch releases), so no interleaving of
  // gathers, landings and releases can leave a pin the set forgot (its slot
  // would be lost for good) or a listed row with no pin.
  std::mutex prefetch_mu;
  std::unordered_set<uint64_t> prefetched;
  std::atomic<uint64_t> prefetched_count{0};
  // Read-ahead batches of this table still in flight (guarded by
  // prefetch_mu). Per table, so releasing one table's rows never waits for
  // another table's reads.
  uint64_t prefetches_in_flight = 0;
  std::condition_variable prefetch_landed;

  void PrefetchStarted() {
    std::lock_guard lock(prefetch_mu);
    ++prefetches_in_flight;
  }
  void PrefetchDone() {
    std::lock_guard lock(prefetch_mu);
    if (--prefetches_in_flight == 0) prefetch_landed.notify_all();
  }
  // Waits until every read-ahead of this table issued so far has landed.
  void WaitForPrefetches() {
    std::unique_lock lock(prefetch_mu);
    prefetch_landed.wait(lock, [&] { return prefetches_in_flight == 0; });
  }

  // True (and unpins it) if `row` was a prefetched row not yet consumed.
  bool ConsumePrefetched(uint64_t row) {
    if (prefetched_count.load(std::memory_order_relaxed) == 0) return false;
    std::lock_guard lock(prefetch_mu);
    if (prefetched.erase(row) == 0) return false;
    prefetched_count.fetch_sub(1, std::memory_order_relaxed);
    cache->Unpin(row);
    return true;
  }
};

}  // namespace engram
