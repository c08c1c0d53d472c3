// FairMissScheduler: the order in which the node service reads its clients'
// missed rows, so that one client's bulk never stalls another's small
// gather.
//
// On a node the clients are ranks with different jobs at the same moment:
// one prefills (tens of thousands of rows per gather), the others decode
// (hundreds of rows per step, on a latency budget). Handed to the store as
// they arrive, a prefill's rows fill the I/O queue and a decode step's rows
// wait behind all of them. So the service cuts every client's misses into
// units of at most `quantum_rows` rows, queues them per client, and a fixed
// set of gather threads takes them one at a time (Take), each reading its
// unit to the end before it takes the next. The next unit is chosen by
// deficit round-robin over the clients with units queued: each turn credits
// a client `quantum_rows` rows, and its units are taken while its credit
// covers them. A small gather therefore waits for the units the gather
// threads are reading and at most one unit of each other busy client,
// however much those clients have queued; a client alone keeps every gather
// thread busy.
//
// The gather threads pull: a thread that finishes a unit takes the next
// itself, with no hand-off to another thread, and sleeps only while nothing
// is queued.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "storage/mutex.h"
#include "storage/thread_annotations.h"

namespace engram::node {

class FairMissScheduler {
 public:
  using ClientId = uint64_t;
  // Reads a unit's rows, on the gather thread that took it.
  using Work = std::function<void()>;
  struct Unit {
    uint32_t rows = 0;
    Work work;
  };

  explicit FairMissScheduler(uint32_t quantum_rows);
  FairMissScheduler(const FairMissScheduler&) = delete;
  FairMissScheduler& operator=(const FairMissScheduler&) = delete;

  uint32_t quantum_rows() const { return quantum_rows_; }

  // Queues a unit of `rows` rows (1..quantum_rows) of `client`, behind that
  // client's earlier units, and wakes a gather thread.
  void Submit(ClientId client, uint32_t rows, Work work) EXCLUDES(mu_);

  // The next unit in round-robin order, waiting while none is queued; false
  // once Stop has been called (the queued units are then dropped).
  bool Take(Unit* unit) EXCLUDES(mu_);
  // The unit a Take returned has been read (for rows_in_flight).
  void Done(const Unit& unit) EXCLUDES(mu_);
  // Ends every Take.
  void Stop() EXCLUDES(mu_);

  // Drops the client's units not yet taken (it disconnected): they are
  // destroyed unread. Units already taken finish as usual.
  void Forget(ClientId client) EXCLUDES(mu_);

  // A client that reads none of its answers (stopped, wedged) is paused:
  // its queued units are passed over, so the device works for the others
  // rather than for answers nobody takes, until it is resumed.
  void Pause(ClientId client) EXCLUDES(mu_);
  void Resume(ClientId client) EXCLUDES(mu_);

  uint64_t rows_in_flight() const EXCLUDES(mu_);
  uint64_t rows_queued() const EXCLUDES(mu_);

 private:
  struct ClientQueue {
    std::deque<Unit> units;
    int64_t credit = 0;         // rows it may still be given in its current turn
    bool turn_started = false;  // credited for the turn it is in
  };
  bool Paused(ClientId client) const REQUIRES(mu_) { return paused_.count(client) != 0; }

  // Takes the next unit the round-robin allows, or returns false.
  bool TakeNext(Unit* unit) REQUIRES(mu_);

  const uint32_t quantum_rows_;
  mutable Mutex mu_;
  CondVar queued_cv_;
  std::unordered_map<ClientId, ClientQueue> queues_ GUARDED_BY(mu_);
  // Clients with units queued, in round-robin order; the front one's turn
  // is the current one.
  std::deque<ClientId> active_ GUARDED_BY(mu_);
  std::unordered_set<ClientId> paused_ GUARDED_BY(mu_);
  uint64_t in_flight_ GUARDED_BY(mu_) = 0;
  uint64_t queued_ GUARDED_BY(mu_) = 0;
  bool stopped_ GUARDED_BY(mu_) = false;
};

}  // namespace engram::node
