#include "src/node/fair_miss_scheduler.h"

#include <algorithm>
#include <utility>

namespace engram::node {

FairMissScheduler::FairMissScheduler(uint32_t quantum_rows) : quantum_rows_(std::max<uint32_t>(quantum_rows, 1)) {}

void FairMissScheduler::Submit(ClientId client, uint32_t rows, Work work) {
  rows = std::clamp<uint32_t>(rows, 1, quantum_rows_);
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    auto [it, added] = queues_.try_emplace(client);
    if (it->second.units.empty()) {
      // A client with nothing queued is not in the rotation; it joins at its
      // end, with no credit carried over from an earlier busy spell.
      it->second.credit = 0;
      it->second.turn_started = false;
      if (std::find(active_.begin(), active_.end(), client) == active_.end()) active_.push_back(client);
    }
    it->second.units.push_back({rows, std::move(work)});
    queued_ += rows;
  }
  queued_cv_.Signal();
}

bool FairMissScheduler::Take(Unit* unit) {
  MutexLock lock(&mu_);
  for (;;) {
    if (stopped_) return false;
    if (TakeNext(unit)) return true;
    queued_cv_.Wait(&mu_);
  }
}

void FairMissScheduler::Done(const Unit& unit) {
  MutexLock lock(&mu_);
  in_flight_ -= std::min<uint64_t>(in_flight_, unit.rows);
}

void FairMissScheduler::Stop() {
  std::unordered_map<ClientId, ClientQueue> dropped;
  {
    MutexLock lock(&mu_);
    stopped_ = true;
    dropped.swap(queues_);
    active_.clear();
    queued_ = 0;
  }
  queued_cv_.SignalAll();
  // The dropped units are destroyed here, unlocked: a unit's work may own
  // the last reference to its request.
}

void FairMissScheduler::Forget(ClientId client) {
  std::deque<Unit> dropped;
  {
    MutexLock lock(&mu_);
    auto it = queues_.find(client);
    if (it == queues_.end()) return;
    dropped.swap(it->second.units);
    for (const Unit& u : dropped) queued_ -= u.rows;
    queues_.erase(it);
    active_.erase(std::remove(active_.begin(), active_.end(), client), active_.end());
    paused_.erase(client);
  }
}

void FairMissScheduler::Pause(ClientId client) {
  MutexLock lock(&mu_);
  paused_.insert(client);
}

void FairMissScheduler::Resume(ClientId client) {
  {
    MutexLock lock(&mu_);
    if (paused_.erase(client) == 0) return;
  }
  queued_cv_.SignalAll();
}

uint64_t FairMissScheduler::rows_in_flight() const {
  MutexLock lock(&mu_);
  return in_flight_;
}

uint64_t FairMissScheduler::rows_queued() const {
  MutexLock lock(&mu_);
  return queued_;
}

bool FairMissScheduler::TakeNext(Unit* unit) {
  // Each client is looked at once per call at most: paused ones are passed
  // over (to the back of the rotation, their turn not begun).
  for (size_t looked = 0; !active_.empty() && looked <= active_.size(); ++looked) {
    const ClientId id = active_.front();
    if (!paused_.empty() && Paused(id)) {
      active_.pop_front();
      active_.push_back(id);
      continue;
    }
    auto it = queues_.find(id);
    if (it == queues_.end() || it->second.units.empty()) {
      active_.pop_front();
      if (it != queues_.end()) queues_.erase(it);
      continue;
    }
    ClientQueue& q = it->second;
    if (!q.turn_started) {
      q.credit += quantum_rows_;
      q.turn_started = true;
    }
    if (q.credit >= q.units.front().rows) {
      *unit = std::move(q.units.front());
      q.units.pop_front();
      q.credit -= unit->rows;
      in_flight_ += unit->rows;
      queued_ -= unit->rows;
      if (q.units.empty()) {
        active_.pop_front();
        queues_.erase(it);
      }
      return true;
    }
    // Its credit is spent: its turn ends, the next client's begins.
    q.turn_started = false;
    active_.pop_front();
    active_.push_back(id);
    looked = 0;  // a turn was passed on: every client may be looked at again
  }
  return false;
}

}  // namespace engram::node
