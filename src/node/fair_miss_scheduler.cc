#include "src/node/fair_miss_scheduler.h"

#include <algorithm>
#include <utility>

namespace engram::node {

FairMissScheduler::FairMissScheduler(Options options)
    : options_{std::max<uint64_t>(options.window_rows, 1), std::max<uint32_t>(options.quantum_rows, 1)} {}

void FairMissScheduler::Submit(ClientId client, uint32_t rows, Start start) {
  rows = std::clamp<uint32_t>(rows, 1, options_.quantum_rows);
  {
    MutexLock lock(&mu_);
    auto [it, added] = queues_.try_emplace(client);
    if (it->second.units.empty()) {
      // A client with nothing queued is not in the rotation; it joins at its
      // end, with no credit carried over from an earlier busy spell.
      it->second.credit = 0;
      it->second.turn_started = false;
      if (std::find(active_.begin(), active_.end(), client) == active_.end()) active_.push_back(client);
    }
    it->second.units.push_back({rows, std::move(start)});
    queued_ += rows;
  }
  Dispatch();
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
  }
  // Destroyed here, unlocked: a unit's start function may own the last
  // reference to its request.
}

uint64_t FairMissScheduler::rows_in_flight() const {
  MutexLock lock(&mu_);
  return in_flight_;
}

uint64_t FairMissScheduler::rows_queued() const {
  MutexLock lock(&mu_);
  return queued_;
}

void FairMissScheduler::Dispatch() {
  MutexLock lock(&mu_);
  if (dispatching_) {
    more_ = true;
    return;
  }
  dispatching_ = true;
  do {
    more_ = false;
    Unit unit;
    while (TakeNext(&unit)) {
      lock.Unlock();
      const uint32_t rows = unit.rows;
      Start start = std::move(unit.start);
      start([this, rows] { UnitFinished(rows); });
      start = nullptr;
      lock.Lock();
    }
  } while (more_);
  dispatching_ = false;
}

bool FairMissScheduler::TakeNext(Unit* unit) {
  if (in_flight_ >= options_.window_rows) return false;
  while (!active_.empty()) {
    const ClientId id = active_.front();
    auto it = queues_.find(id);
    if (it == queues_.end() || it->second.units.empty()) {
      active_.pop_front();
      if (it != queues_.end()) queues_.erase(it);
      continue;
    }
    ClientQueue& q = it->second;
    if (!q.turn_started) {
      q.credit += options_.quantum_rows;
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
  }
  return false;
}

void FairMissScheduler::UnitFinished(uint32_t rows) {
  {
    MutexLock lock(&mu_);
    in_flight_ -= rows;
  }
  Dispatch();
}

}  // namespace engram::node
