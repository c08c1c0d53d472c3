// Warm start (StoreOptions::hot_set_path): HotSetKeeper saves each table's
// resident rows to the hot-set file (src/store/hot_set.h) at close and every
// hot_set_interval_seconds, and at open reads the saved rows back into the
// caches in the background.
//
// Warming yields to gathers: while gathers are in flight it has one batch of
// reads in flight, of at most an eighth of queue_depth blocks (16 at most);
// while none are, up to 4 batches of half of it (64 at most); before each batch it
// waits while gathers are in flight (for a millisecond at most, then issues a
// small batch, so that it still advances under constant load). It takes the
// saved rows most valuable first, 4,096 at a time, each group read in row
// order so that rows of one block share a read; and it places rows only into free ways
// (RowCache::InsertIntoFreeWay): it never evicts a row a gather brought in,
// and stops for a table once its cache is full. Rows are read through the
// verified block path (ReadRowsVerified), so the hot set names rows, never
// bytes: a wrong or stale hot set can cost reads, never a wrong row.
//
// A hot set that does not fit -- unreadable, truncated or corrupt, or saved
// from another table, policy or capacity -- is ignored with one warning
// naming every reason; a missing file is the first start and only logged at
// info level.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "engram/status.h"
#include "src/store/hot_set.h"
#include "storage/mutex.h"
#include "storage/thread_annotations.h"

namespace engram {

class StoreImpl;

class HotSetKeeper {
 public:
  // Reads the hot set and starts warming and the periodic saves (interval
  // 0: none). Never waits for the reads.
  HotSetKeeper(StoreImpl* store, std::string path, double interval_seconds);
  HotSetKeeper(const HotSetKeeper&) = delete;
  HotSetKeeper& operator=(const HotSetKeeper&) = delete;
  ~HotSetKeeper();

  // Blocks until warming has finished (every saved row warmed or skipped),
  // or was stopped.
  void WaitForWarmUp() EXCLUDES(mu_);
  // Stops warming (the batch in flight lands first) and the periodic saves.
  void Stop() EXCLUDES(mu_);
  // Writes the hot set now; one save at a time.
  Status Save() EXCLUDES(save_mu_);

 private:
  // The saved rows of each table (by store index) that may warm it.
  std::vector<std::vector<HotSetRow>> Load();
  void Warm(std::vector<std::vector<HotSetRow>> rows) EXCLUDES(mu_);
  // Warms the next chunk of `table`'s rows from `done` on; returns how many
  // of them it reached, and sets *finished when the table is done early (the
  // store stops, or its cache is full).
  size_t WarmChunk(size_t table, const std::vector<HotSetRow>& rows, size_t done, bool* finished) EXCLUDES(mu_);
  void SaveEvery(double interval_seconds) EXCLUDES(mu_);
  bool stopping() EXCLUDES(mu_);

  StoreImpl* const store_;
  const std::string path_;

  // mu_ guards the flags the warming and saving threads and their callers
  // share; the threads wait on changed_ for stop_ (and a batch's landing),
  // WaitForWarmUp for warm_done_.
  Mutex mu_;
  CondVar changed_;
  bool stop_ GUARDED_BY(mu_) = false;
  bool warm_done_ GUARDED_BY(mu_) = false;
  // Warming batches issued and not yet landed.
  size_t batch_pending_ GUARDED_BY(mu_) = 0;

  Mutex save_mu_;  // serializes Save (the periodic thread and close)

  std::thread warm_thread_;
  std::thread save_thread_;
};

}  // namespace engram
