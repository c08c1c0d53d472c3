// GatherTicketAccess: the store implementation's way into the opaque
// GatherTicket of the public API (include/engram/store.h).
#pragma once

#include <memory>
#include <utility>

#include "engram/store.h"

namespace engram {

struct GatherTicketAccess {
  // The gather in flight a ticket refers to; defined in gather_operation.h.
  using State = GatherTicket::State;

  static GatherTicket Make(std::shared_ptr<State> state) { return GatherTicket(std::move(state)); }
  static State& Get(GatherTicket& ticket) { return *ticket.state_; }
};

using GatherState = GatherTicketAccess::State;

}  // namespace engram
