#include "src/node/inflight_rows.h"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace engram::node {

struct InflightRows::Request {
  std::vector<uint64_t> ids;
  uint32_t record = 0;
  uint8_t* rows = nullptr;  // ids.size() * record, the caller's
  // Positions of ids this request reads itself.
  std::vector<uint32_t> own;
  // Positions whose row appears earlier in ids (position, its first):
  // filled from the first once it lands.
  std::vector<std::pair<uint32_t, uint32_t>> repeats;
  AnswerFn answer;
  // Own gather + requests depended on, still to complete.
  std::atomic<uint32_t> pending{1};

  // Rows of this request that later requests take: (request, its position,
  // our position). Written under InflightRows::mu_ while our rows are in
  // flight; taken (under it) when they land.
  struct Dependent {
    std::shared_ptr<Request> request;
    uint32_t their_position;
    uint32_t our_position;
  };
  std::vector<Dependent> dependents;

  Mutex mu;
  GatherResult result GUARDED_BY(mu);
  std::vector<size_t> failed GUARDED_BY(mu);  // positions in ids
  Status borrowed_status GUARDED_BY(mu);     // the first failure of a row taken from another
  uint64_t borrowed_rows GUARDED_BY(mu) = 0;

  // One part done; the last answers.
  void Release() {
    if (pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    GatherResult out;
    {
      MutexLock lock(&mu);
      out = std::move(result);
      out.rows = ids.size();
      out.distinct_rows = ids.size();
      out.hits += borrowed_rows;
      if (out.status.ok() && !borrowed_status.ok()) out.status = borrowed_status;
      std::sort(failed.begin(), failed.end());
      out.failed_positions = std::move(failed);
    }
    answer(out);
  }
};

void InflightRows::Gather(std::vector<uint64_t> ids, uint32_t record, uint8_t* rows, const StartFn& start,
                          AnswerFn answer) {
  auto r = std::make_shared<Request>();
  r->ids = std::move(ids);
  r->record = record;
  r->rows = rows;
  r->answer = std::move(answer);
  {
    MutexLock lock(&mu_);
    std::vector<Request*> owners;
    for (uint32_t pos = 0; pos < r->ids.size(); ++pos) {
      auto [it, inserted] = rows_.try_emplace(r->ids[pos], Owner{r.get(), pos});
      if (inserted) {
        r->own.push_back(pos);
        continue;
      }
      Request* owner = it->second.request;
      if (owner == r.get()) {
        r->repeats.emplace_back(pos, it->second.position);
        continue;
      }
      owner->dependents.push_back({r, pos, it->second.position});
      if (std::find(owners.begin(), owners.end(), owner) == owners.end()) owners.push_back(owner);
    }
    r->pending.fetch_add(static_cast<uint32_t>(owners.size()), std::memory_order_relaxed);
  }
  if (r->own.empty()) {
    OwnGatherDone(r, GatherResult{});
    return;
  }
  if (r->own.size() == r->ids.size()) {
    // The usual case: nothing in flight elsewhere; the store writes the
    // answer's rows in place.
    start(r->ids, reinterpret_cast<std::byte*>(r->rows), record,
          [this, r](GatherResult result) { OwnGatherDone(r, std::move(result)); });
    return;
  }
  // Gather only our own rows, into a side buffer, then place them.
  auto own_ids = std::make_shared<std::vector<uint64_t>>();
  for (uint32_t pos : r->own) own_ids->push_back(r->ids[pos]);
  auto own_rows = std::make_shared<std::vector<uint8_t>>(own_ids->size() * size_t{record});
  start(*own_ids, reinterpret_cast<std::byte*>(own_rows->data()), record,
        [this, r, own_ids, own_rows](GatherResult result) {
          for (size_t k = 0; k < r->own.size(); ++k) {
            std::memcpy(r->rows + size_t{r->own[k]} * r->record, own_rows->data() + k * r->record, r->record);
          }
          // Failed positions index own_ids: translate them to ours.
          for (size_t& p : result.failed_positions) p = r->own[p];
          OwnGatherDone(r, std::move(result));
        });
}

void InflightRows::OwnGatherDone(const std::shared_ptr<Request>& r, GatherResult result) {
  // Which of our own rows failed. A result that failed with no positions
  // listed failed as a whole (nothing was written).
  std::vector<uint8_t> own_failed(r->ids.size(), 0);
  if (!result.status.ok()) {
    if (result.failed_positions.empty()) {
      for (uint32_t pos : r->own) own_failed[pos] = 1;
      result.failed_positions.assign(r->own.begin(), r->own.end());
    } else {
      for (size_t p : result.failed_positions) own_failed[p] = 1;
    }
  }
  for (const auto& [pos, first] : r->repeats) {
    if (own_failed[first]) {
      own_failed[pos] = 1;
      result.failed_positions.push_back(pos);
    } else {
      std::memcpy(r->rows + size_t{pos} * r->record, r->rows + size_t{first} * r->record, r->record);
    }
  }
  std::vector<Request::Dependent> dependents;
  {
    MutexLock lock(&mu_);
    for (uint32_t pos : r->own) rows_.erase(r->ids[pos]);
    dependents.swap(r->dependents);
  }
  std::vector<Request*> released;
  for (const Request::Dependent& d : dependents) {
    Request& other = *d.request;
    if (own_failed[d.our_position]) {
      MutexLock lock(&other.mu);
      other.failed.push_back(d.their_position);
      if (other.borrowed_status.ok()) other.borrowed_status = result.status;
    } else {
      std::memcpy(other.rows + size_t{d.their_position} * other.record,
                  r->rows + size_t{d.our_position} * r->record, r->record);
      MutexLock lock(&other.mu);
      ++other.borrowed_rows;
    }
  }
  {
    MutexLock lock(&r->mu);
    std::vector<size_t> borrowed_failures = std::move(r->failed);
    r->result = std::move(result);
    r->failed = std::move(r->result.failed_positions);
    r->failed.insert(r->failed.end(), borrowed_failures.begin(), borrowed_failures.end());
  }
  // Each dependent counted us once, however many of our rows it takes.
  for (const Request::Dependent& d : dependents) {
    if (std::find(released.begin(), released.end(), d.request.get()) != released.end()) continue;
    released.push_back(d.request.get());
    d.request->Release();
  }
  r->Release();
}

size_t InflightRows::rows_in_flight() const {
  MutexLock lock(&mu_);
  return rows_.size();
}

}  // namespace engram::node
