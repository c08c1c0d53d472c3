#include "src/store/warm_start.h"

#include <algorithm>
#include <chrono>
#include <unordered_set>
#include <utility>

#include "src/store/store_impl.h"
#include "src/store/table_state.h"
#include "src/store/verified_row_reads.h"
#include "storage/file_util.h"
#include "storage/log.h"
#include "storage/reference_layout.h"

namespace engram {
namespace {

// How long warming waits for gathers in flight before it issues a batch anyway.
constexpr auto kYieldToGathers = std::chrono::milliseconds(1);
// Rows taken at a time from the hot set, most valuable first, and read in
// row order.
constexpr size_t kWarmChunkRows = 4096;
// Batches in flight at once while no gather is.
constexpr size_t kIdleBatchesInFlight = 4;

}  // namespace

HotSetKeeper::HotSetKeeper(StoreImpl* store, std::string path, double interval_seconds)
    : store_(store), path_(std::move(path)) {
  // What a save killed midway (kill -9, a crash) left beside the hot set.
  fileutil::RemoveStaleTempFiles(path_);
  warm_thread_ = std::thread([this] { Warm(Load()); });
  if (interval_seconds > 0) save_thread_ = std::thread([this, interval_seconds] { SaveEvery(interval_seconds); });
}

HotSetKeeper::~HotSetKeeper() { Stop(); }

void HotSetKeeper::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    changed_.SignalAll();
  }
  if (warm_thread_.joinable()) warm_thread_.join();
  if (save_thread_.joinable()) save_thread_.join();
}

bool HotSetKeeper::stopping() {
  MutexLock lock(&mu_);
  return stop_;
}

void HotSetKeeper::WaitForWarmUp() {
  MutexLock lock(&mu_);
  while (!warm_done_) changed_.Wait(&mu_);
}

std::vector<std::vector<HotSetRow>> HotSetKeeper::Load() {
  const size_t n = store_->table_count();
  std::vector<std::vector<HotSetRow>> warm(n);
  // A hot set of these caches holds at most their capacity in rows.
  uint64_t max_bytes = 4096 * (n + 1);
  for (size_t i = 0; i < n; ++i) max_bytes += store_->table_state(i).cache->capacity_rows() * 12 + 4096;
  auto saved = ReadHotSetFile(path_, max_bytes);
  std::vector<HotSetEntryHead> heads;
  if (saved.ok()) {
    for (HotSetTable& t : *saved) {
      const uint64_t rows = t.rows.size();
      heads.push_back({std::move(t), rows});
    }
  } else if (saved.status().code() == StatusCode::kOutOfRange) {
    // Larger than a hot set of these caches can be: most likely saved from
    // larger caches. Only the entries' headers are read, to say so.
    auto read = ReadHotSetHeads(path_);
    if (!read.ok()) {
      log::Warn("store: hot set {} ignored: {}", path_, read.status().ToString());
      return warm;
    }
    heads = std::move(read).value();
  } else {
    if (saved.status().code() == StatusCode::kNotFound) {
      log::Info("store: no hot set at {} yet: the caches start cold", path_);
    } else {
      log::Warn("store: hot set {} ignored: {}", path_, saved.status().ToString());
    }
    return warm;
  }
  std::vector<std::string> reasons;
  for (size_t i = 0; i < n; ++i) {
    TableState& t = store_->table_state(i);
    auto entry = std::find_if(heads.begin(), heads.end(),
                              [&](const HotSetEntryHead& s) { return s.table.fingerprint == t.file->fingerprint(); });
    if (entry == heads.end()) {
      reasons.push_back("table " + t.name + ": no entry for its fingerprint " + Hex64(t.file->fingerprint()));
      continue;
    }
    const std::string why = HotSetMismatch(entry->table, t.file->row_count(), t.file->record_bytes(),
                                           t.cache->config().ToSpec(), t.cache->capacity_rows());
    if (!why.empty()) {
      reasons.push_back("table " + t.name + ": " + why);
      t.counters.Add(t.counters.warm_skipped_rows, entry->rows);
      continue;
    }
    if (!saved.ok()) {
      // Its entry fits, yet the file is too large: it holds more (other
      // tables' entries, or bytes no hot set has).
      reasons.push_back("table " + t.name + ": " + saved.status().message());
      t.counters.Add(t.counters.warm_skipped_rows, entry->rows);
      continue;
    }
    // Each row once (a file written by EncodeHotSet lists each once).
    std::unordered_set<uint64_t> seen;
    for (const HotSetRow& r : entry->table.rows) {
      if (seen.insert(r.row_id).second) warm[i].push_back(r);
    }
  }
  if (!reasons.empty()) {
    std::string all;
    for (const std::string& r : reasons) all += (all.empty() ? "" : "; ") + r;
    log::Warn("store: hot set {} ignored for {} of {} tables: {}", path_, reasons.size(), n, all);
  }
  return warm;
}

void HotSetKeeper::Warm(std::vector<std::vector<HotSetRow>> rows) {
  // The tables take turns, one chunk of their most valuable rows each: every
  // layer of a step then gets its hottest rows first, rather than the last
  // table waiting for the whole of the others.
  const size_t n = rows.size();
  std::vector<size_t> reached(n, 0);
  std::vector<bool> finished(n, false);
  for (bool any = true; any;) {
    any = false;
    for (size_t i = 0; i < n; ++i) {
      if (finished[i] || reached[i] >= rows[i].size()) continue;
      any = true;
      bool table_finished = false;
      reached[i] += WarmChunk(i, rows[i], reached[i], &table_finished);
      finished[i] = table_finished;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    TableCounters& c = store_->table_state(i).counters;
    c.Add(c.warm_skipped_rows, rows[i].size() - reached[i]);
  }
  MutexLock lock(&mu_);
  warm_done_ = true;
  changed_.SignalAll();
}

size_t HotSetKeeper::WarmChunk(size_t table, const std::vector<HotSetRow>& rows, size_t done, bool* finished) {
  TableState& t = store_->table_state(table);
  RowCache& cache = *t.cache;
  const TableGeometry& g = t.file->geometry();
  const size_t busy_blocks = std::clamp<size_t>(store_->queue_depth() / 8, 1, 16);
  const size_t idle_blocks = std::clamp<size_t>(store_->queue_depth() / 2, 1, 64);
  // The next most valuable rows, in row order: rows sharing a block are
  // then read by one read (a hot set names many rows of each block).
  const size_t chunk_end = std::min(rows.size(), done + kWarmChunkRows);
  std::vector<HotSetRow> chunk(rows.begin() + done, rows.begin() + chunk_end);
  std::sort(chunk.begin(), chunk.end(), [](const HotSetRow& a, const HotSetRow& b) { return a.row_id < b.row_id; });
  size_t next = 0;
  // Batches of this chunk still in flight land before the chunk (which
  // their landing reads) goes, and before this returns.
  auto drain = [this] {
    MutexLock lock(&mu_);
    while (batch_pending_ != 0) changed_.Wait(&mu_);
  };
  while (next < chunk.size()) {
    bool busy;
    {
      MutexLock lock(&mu_);
      const auto give_up = std::chrono::steady_clock::now() + kYieldToGathers;
      while (!stop_ && store_->GathersInFlight() > 0 && std::chrono::steady_clock::now() < give_up) {
        changed_.WaitUntil(&mu_, std::min(give_up, std::chrono::steady_clock::now() + std::chrono::microseconds(50)));
      }
      busy = store_->GathersInFlight() > 0;
      // One batch in flight beside gathers, a few when the device is ours.
      const size_t max_in_flight = busy ? 1 : kIdleBatchesInFlight;
      while (!stop_ && batch_pending_ >= max_in_flight) changed_.Wait(&mu_);
      if (stop_) {
        lock.Unlock();
        drain();
        *finished = true;
        return next;
      }
      ++batch_pending_;
    }
    if (cache.Stats().resident_rows >= cache.capacity_rows()) {
      {
        MutexLock lock(&mu_);
        --batch_pending_;
      }
      drain();
      *finished = true;
      return next;
    }
    // The rows of at most `blocks` blocks: fewer while gathers are in flight.
    const size_t blocks = busy ? busy_blocks : idle_blocks;
    size_t end = next, blocks_taken = 0;
    for (uint64_t last_block = UINT64_MAX; end < chunk.size(); ++end) {
      const uint64_t block = g.BlockOfRow(chunk[end].row_id);
      if (block != last_block && ++blocks_taken > blocks) break;
      last_block = block;
    }
    std::span<const HotSetRow> batch(chunk.data() + next, end - next);
    std::vector<uint64_t> ids;
    for (const HotSetRow& r : batch) ids.push_back(r.row_id);
    ReadRowsVerified(
        store_, table, std::move(ids), "warm start",
        [&t, batch](uint64_t row, bool ok, std::span<const std::byte> bytes) {
          // batch is in row order.
          auto it = std::lower_bound(batch.begin(), batch.end(), row,
                                     [](const HotSetRow& r, uint64_t id) { return r.row_id < id; });
          const uint32_t estimate = it != batch.end() && it->row_id == row ? it->estimate : 0;
          const bool warmed = ok && t.cache->InsertIntoFreeWay(row, bytes, estimate);
          t.counters.Add(warmed ? t.counters.warm_rows : t.counters.warm_skipped_rows, 1);
        },
        [this] {
          MutexLock lock(&mu_);
          --batch_pending_;
          changed_.SignalAll();
        });
    next = end;
  }
  drain();
  return chunk_end - done;
}

void HotSetKeeper::SaveEvery(double interval_seconds) {
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(interval_seconds));
  for (;;) {
    {
      MutexLock lock(&mu_);
      const auto due = std::chrono::steady_clock::now() + interval;
      while (!stop_ && std::chrono::steady_clock::now() < due) changed_.WaitUntil(&mu_, due);
      if (stop_) return;
    }
    if (Status s = Save(); !s.ok()) log::Error("store: hot set not saved: {}", s.ToString());
  }
}

Status HotSetKeeper::Save() {
  MutexLock lock(&save_mu_);
  std::vector<HotSetTable> tables;
  for (size_t i = 0; i < store_->table_count(); ++i) {
    TableState& t = store_->table_state(i);
    HotSetTable e;
    e.fingerprint = t.file->fingerprint();
    e.row_count = t.file->row_count();
    e.record_bytes = t.file->record_bytes();
    e.policy = t.cache->config().ToSpec();
    e.capacity_rows = t.cache->capacity_rows();
    for (const RowCache::ResidentRow& r : t.cache->ResidentRowsByValue()) e.rows.push_back({r.row_id, r.estimate});
    tables.push_back(std::move(e));
  }
  return WriteHotSetFile(path_, tables);
}

}  // namespace engram
