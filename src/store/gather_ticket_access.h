// GatherTicketAccess: the store implementation's way into the opaque
// GatherTicket of the public API (include/engram/store.h).
#pragma once

#include <memory>
#include <utility>

#include "engram/store.h"

namespace engram {

struct GatherTicketAccess {
  using State = GatherTicket::State;

  static GatherTicket Make(std::shared_ptr<State> state) { return GatherTicket(std::move(state)); }
  static State& Get(GatherTicket& ticket) { return *ticket.state_; }
};

}  // namespace engram

// What a GatherTicket refers to: a gather in flight, whoever runs it -- a
// store's GatherOperation (gather_operation.h), or a node client's gather
// whose misses the node service reads (src/node/node_client.h).
struct engram::GatherTicket::State {
  virtual ~State() = default;
  // Waits for the gather and returns its result; called once.
  virtual GatherResult Wait() = 0;
};
