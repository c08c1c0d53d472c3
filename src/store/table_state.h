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
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engram/counters.h"
#include "engram/store.h"
#include "src/cache/row_cache.h"
#include "src/store/log_rate_limiter.h"
#include "storage/io/io_engine.h"
#include "storage/table_file.h"

namespace engram {

// The table's counters (include/engram/counters.h), updated by concurrent
// gathers and read-aheads; Stats() reads them with CopyTo.
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

struct TableState {
  std::string name;
  std::unique_ptr<TableFile> file;  // validated header + metadata; geometry
  io::FileId file_id = 0;
  // A reference table: its shards in the I/O engine (by shard index), and
  // its scale rows when they are held in memory (row r at r * scale bytes;
  // empty: each miss reads its scale too). See reference_reads.h.
  std::vector<io::FileId> shard_files;
  std::vector<std::byte> resident_scales;
  uint64_t cache_budget_bytes = 0;
  std::unique_ptr<RowCache> cache;
  TableCounters counters;
  // Failed block reads and checksums are counted every time but logged with
  // a rate limit (a corrupt table can fail every gather).
  LogRateLimiter block_error_log;

  // Rows inserted pinned by ReadAhead and not yet consumed or released. The
  // count lets gathers skip the lock when no read-ahead is outstanding.
  // Invariant: a row is pinned in `cache` exactly while it is in this set.
  // Every pin and unpin happens under read_ahead_mu together with the set
  // change (InsertPinned + insert when read-ahead lands, erase + Unpin when
  // a gather consumes or ReleaseReadAhead releases), so no interleaving of
  // gathers, landings and releases can leave a pin the set forgot (its slot
  // would be lost for good) or a listed row with no pin.
  std::mutex read_ahead_mu;
  std::unordered_set<uint64_t> read_ahead_pinned;
  std::atomic<uint64_t> read_ahead_count{0};

  // Rows of read-ahead batches still in flight (guarded by read_ahead_mu).
  // A gather that asks for such a row before its read lands has been served
  // (from the cache or by its own read): the read-ahead must not pin the row
  // when it lands, since no later gather is owed it and the pin would never
  // be released. Each batch carries the sequence number of its issue; a
  // gather records the newest sequence issued so far as `served_through`, so
  // a landing batch issued before the gather drops the row while one issued
  // after it still pins it for the gather it was meant for.
  struct InFlightRow {
    uint32_t batches = 0;         // batches in flight that read this row
    uint64_t served_through = 0;  // batches with seq <= this were served already
  };
  std::unordered_map<uint64_t, InFlightRow> in_flight_rows;
  std::atomic<uint64_t> in_flight_row_count{0};  // in_flight_rows.size(), for the lock-free skip
  uint64_t read_ahead_seq = 0;                    // last batch sequence issued

  // Read-ahead batches of this table still in flight, by generation (guarded
  // by read_ahead_mu). Per table, so releasing one table's rows never waits for
  // another table's reads; by generation, so a wait covers the batches issued
  // before it and is not prolonged by read-ahead other threads keep issuing.
  uint64_t read_ahead_generation = 0;
  std::map<uint64_t, uint64_t> read_aheads_in_flight;  // generation -> batches
  std::condition_variable read_ahead_landed;

  struct ReadAheadTicket {
    uint64_t generation;  // for ReadAheadDone
    uint64_t seq;         // for LandReadAheadRow
  };
  // Registers a batch of distinct rows about to be read ahead.
  ReadAheadTicket ReadAheadStarted(std::span<const uint64_t> rows) {
    std::lock_guard lock(read_ahead_mu);
    ++read_aheads_in_flight[read_ahead_generation];
    const uint64_t seq = ++read_ahead_seq;
    for (uint64_t row : rows) ++in_flight_rows[row].batches;
    in_flight_row_count.store(in_flight_rows.size(), std::memory_order_relaxed);
    return {read_ahead_generation, seq};
  }
  void ReadAheadDone(uint64_t generation) {
    std::lock_guard lock(read_ahead_mu);
    auto it = read_aheads_in_flight.find(generation);
    if (--it->second == 0) {
      read_aheads_in_flight.erase(it);
      read_ahead_landed.notify_all();
    }
  }
  // Waits until every read-ahead of this table issued before the call has
  // landed (its rows are pinned or dropped).
  void WaitForReadAheads() {
    std::unique_lock lock(read_ahead_mu);
    const uint64_t mine = read_ahead_generation++;  // later batches start a new generation
    read_ahead_landed.wait(lock, [&] {
      return read_aheads_in_flight.empty() || read_aheads_in_flight.begin()->first > mine;
    });
  }

  // A row of batch `seq` has landed (verified, or `read_ok` false when its
  // block failed). Pins it unless a gather already served it after the
  // batch was issued; those rows count as read-ahead delivered but wasted.
  void LandReadAheadRow(uint64_t seq, uint64_t row, bool read_ok, std::span<const std::byte> bytes) {
    std::lock_guard lock(read_ahead_mu);  // the pin and the list change together (see above)
    auto it = in_flight_rows.find(row);
    const bool served = it != in_flight_rows.end() && it->second.served_through >= seq;
    if (it != in_flight_rows.end() && --it->second.batches == 0) {
      in_flight_rows.erase(it);
      in_flight_row_count.store(in_flight_rows.size(), std::memory_order_relaxed);
    }
    if (!read_ok) return;  // counted by the block check; a later gather reads it again
    if (served) {
      counters.Add(counters.read_ahead_rows, 1);
      counters.Add(counters.read_ahead_wasted_rows, 1);
      return;
    }
    InsertOutcome o = cache->InsertPinned(row, bytes);
    if (o == InsertOutcome::kRefusedAllPinned || o == InsertOutcome::kRefusedLostAdmission) return;
    if (read_ahead_pinned.insert(row).second) {
      read_ahead_count.fetch_add(1, std::memory_order_relaxed);
      counters.Add(counters.read_ahead_rows, 1);
    }
  }

  // A gather asks for `rows` (distinct): unpins those a read-ahead pinned
  // (sets kConsumedPin in flags[i] for each) and marks those still in
  // flight as served. Returns how many pins it dropped.
  // One lock for the whole gather, and none when no read-ahead is pending.
  static constexpr uint8_t kConsumedPin = 2;
  size_t ConsumeReadAhead(std::span<const uint64_t> rows, std::span<uint8_t> flags) {
    if (read_ahead_count.load(std::memory_order_relaxed) == 0 &&
        in_flight_row_count.load(std::memory_order_relaxed) == 0) {
      return 0;
    }
    size_t consumed = 0;
    std::lock_guard lock(read_ahead_mu);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!in_flight_rows.empty()) {
        auto it = in_flight_rows.find(rows[i]);
        if (it != in_flight_rows.end()) it->second.served_through = read_ahead_seq;
      }
      if (read_ahead_pinned.erase(rows[i]) == 0) continue;
      read_ahead_count.fetch_sub(1, std::memory_order_relaxed);
      cache->Unpin(rows[i]);
      flags[i] |= kConsumedPin;
      ++consumed;
    }
    return consumed;
  }
};

}  // namespace engram
