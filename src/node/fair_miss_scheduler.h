// FairMissScheduler: the order in which the node service sends its clients'
// missed rows to the store, so that one client's bulk never stalls another's
// small gather.
//
// On a node the clients are ranks with different jobs at the same moment:
// one prefills (tens of thousands of rows per gather), the others decode
// (hundreds of rows per step, on a latency budget). Handed to the store as
// they arrive, a prefill's rows fill the I/O engine's queue and a decode
// step's rows wait behind all of them. So the service cuts every client's
// misses into units of at most `quantum_rows` rows and keeps at most about
// `window_rows` rows in the store at once (enough to keep the device's
// queue full, no more); the rest wait here, one queue per client, and are
// released by deficit round-robin over the clients with work queued: each
// turn credits a client `quantum_rows` rows, and its units are started while
// its credit covers them. A small gather therefore waits for the window
// ahead of it and at most one quantum of each other busy client, however
// much those clients have queued; a client alone gets the whole window.
//
// Units start outside the scheduler's lock, on the thread that submitted or
// finished the unit that made room (a unit may finish inside its own start,
// when all its rows hit): one thread at a time runs the dispatch loop, and
// the others only hand it their changes, so starts never nest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <unordered_map>

#include "storage/mutex.h"
#include "storage/thread_annotations.h"

namespace engram::node {

class FairMissScheduler {
 public:
  using ClientId = uint64_t;
  // Tells the scheduler a started unit's rows are done (read, failed or
  // cancelled). Call it exactly once, from any thread, possibly before the
  // start function returns.
  using Finished = std::function<void()>;
  // Starts a unit: hands its rows to the store.
  using Start = std::function<void(Finished finished)>;

  struct Options {
    uint64_t window_rows = 256;
    uint32_t quantum_rows = 128;
  };

  explicit FairMissScheduler(Options options);
  FairMissScheduler(const FairMissScheduler&) = delete;
  FairMissScheduler& operator=(const FairMissScheduler&) = delete;

  const Options& options() const { return options_; }

  // Queues a unit of `rows` rows (1..quantum_rows) of `client`, behind that
  // client's earlier units, and starts whatever the window has room for.
  void Submit(ClientId client, uint32_t rows, Start start) EXCLUDES(mu_);

  // Drops the client's units not yet started (it disconnected): they are
  // destroyed unstarted. Units already started finish as usual.
  void Forget(ClientId client) EXCLUDES(mu_);

  uint64_t rows_in_flight() const EXCLUDES(mu_);
  uint64_t rows_queued() const EXCLUDES(mu_);

 private:
  struct Unit {
    uint32_t rows;
    Start start;
  };
  struct ClientQueue {
    std::deque<Unit> units;
    int64_t credit = 0;        // rows it may still start in its current turn
    bool turn_started = false;  // credited for the turn it is in
  };

  // Runs the dispatch loop unless another thread does; returns when no
  // unit can start.
  void Dispatch() EXCLUDES(mu_);
  // Takes the next unit the window and the round-robin allow, or returns
  // false.
  bool TakeNext(Unit* unit) REQUIRES(mu_);
  void UnitFinished(uint32_t rows) EXCLUDES(mu_);

  const Options options_;
  mutable Mutex mu_;
  std::unordered_map<ClientId, ClientQueue> queues_ GUARDED_BY(mu_);
  // Clients with units queued, in round-robin order; the front one's turn
  // is the current one.
  std::deque<ClientId> active_ GUARDED_BY(mu_);
  uint64_t in_flight_ GUARDED_BY(mu_) = 0;
  uint64_t queued_ GUARDED_BY(mu_) = 0;
  // A thread is in the dispatch loop; `more_` asks it for another pass.
  bool dispatching_ GUARDED_BY(mu_) = false;
  bool more_ GUARDED_BY(mu_) = false;
};

}  // namespace engram::node
