// InflightRows: rows the node service is reading for one table, so that
// clients missing the same rows at the same time cause one read.
//
// A request's rows that no other request is reading are its own: it gathers
// them through the store (which reads the missed blocks, verifies and caches
// them). Its rows that an earlier request is reading are that request's
// dependents: when the earlier gather completes, it copies those rows (or
// their failure) to the dependent before it lets the rows go. A request
// depends only on requests registered before it, so no cycle of waits can
// form, and nothing blocks a thread: the last of a request's parts to
// complete (its own gather, or the requests it depends on) answers it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engram/store.h"
#include "storage/mutex.h"
#include "storage/thread_annotations.h"

namespace engram::node {

class InflightRows {
 public:
  // Starts a gather of ids into dst (row i at dst + i * stride) and calls
  // done with its result: Store::StartGather's callback form.
  using StartFn = std::function<void(std::span<const uint64_t> ids, std::byte* dst, size_t stride,
                                     std::function<void(GatherResult)> done)>;
  // The request's result; its rows are in the request's `rows`.
  using AnswerFn = std::function<void(const GatherResult& result)>;

  // Gathers ids of `record` bytes each into `rows` (row i
  // at rows + i * record; the buffer must live until the answer) and
  // answers once. A row asked for twice is read once and copied. The result
  // counts rows taken from another request's read as hits; the positions
  // whose rows failed (theirs or the other's) are failed_positions.
  void Gather(std::vector<uint64_t> ids, uint32_t record, uint8_t* rows, const StartFn& start, AnswerFn answer);

  // Rows being read now (tests).
  size_t rows_in_flight() const;

 private:
  struct Request;
  // Where a row in flight is: the request reading it, and its position there.
  struct Owner {
    Request* request;
    uint32_t position;
  };

  void OwnGatherDone(const std::shared_ptr<Request>& r, GatherResult result);

  mutable Mutex mu_;
  std::unordered_map<uint64_t, Owner> rows_ GUARDED_BY(mu_);
};

}  // namespace engram::node
