// TableState: everything the store keeps for one open table: the validated
// file, its FileId in the I/O engine, its row cache and its counters.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
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
  // Read-ahead batches of this table still in flight, by generation (guarded
  // by prefetch_mu). Per table, so releasing one table's rows never waits for
  // another table's reads; by generation, so a wait covers the batches issued
  // before it and is not prolonged by read-ahead other threads keep issuing.
  uint64_t prefetch_generation = 0;
  std::map<uint64_t, uint64_t> prefetches_in_flight;  // generation -> batches
  std::condition_variable prefetch_landed;

  // Returns the batch's generation, for PrefetchDone.
  uint64_t PrefetchStarted() {
    std::lock_guard lock(prefetch_mu);
    ++prefetches_in_flight[prefetch_generation];
    return prefetch_generation;
  }
  void PrefetchDone(uint64_t generation) {
    std::lock_guard lock(prefetch_mu);
    auto it = prefetches_in_flight.find(generation);
    if (--it->second == 0) {
      prefetches_in_flight.erase(it);
      prefetch_landed.notify_all();
    }
  }
  // Waits until every read-ahead of this table issued before the call has
  // landed (its rows are pinned or dropped).
  void WaitForPrefetches() {
    std::unique_lock lock(prefetch_mu);
    const uint64_t mine = prefetch_generation++;  // later batches start a new generation
    prefetch_landed.wait(lock, [&] {
      return prefetches_in_flight.empty() || prefetches_in_flight.begin()->first > mine;
    });
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
