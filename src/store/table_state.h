// TableState: everything the store keeps for one open table: the validated
// file (or a Redis Cluster's copy of one), the engine its blocks are read
// through and their FileId there, its row cache, its counters and its
// read-ahead.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/cache/row_cache.h"
#include "src/store/log_rate_limiter.h"
#include "src/store/read_ahead.h"
#include "src/store/table_counters.h"
#include "storage/io/io_engine.h"
#include "storage/redis/remote_block_engine.h"
#include "storage/table_file.h"

namespace engram {

struct TableState {
  std::string name;
  std::unique_ptr<TableFile> file;  // validated header + metadata; geometry
  io::FileId file_id = 0;
  // Where this table's blocks are read: the store's engine for a file, or
  // `remote` for a table in a Redis Cluster (opened by its redis:// URL),
  // whose misses are GETs verified exactly as blocks read from a disk.
  io::IoEngine* engine = nullptr;
  std::unique_ptr<redis::RemoteBlockEngine> remote;
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
  // Block reads the I/O engine cancelled because the store was shutting
  // down: not failures of the table or the device, so neither logged one by
  // one nor counted as io_errors; the store logs their number once.
  std::atomic<uint64_t> reads_cancelled_by_shutdown{0};
  // Rows read ahead: pinned in `cache` until a gather consumes them.
  ReadAheadTracker read_ahead{*this};
  // Gathers begun on this table (counters.gathers counts those finished):
  // the warm start yields while the two differ.
  std::atomic<uint64_t> gathers_begun{0};
};

}  // namespace engram
