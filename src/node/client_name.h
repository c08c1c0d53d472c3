// What a client may call itself: its name is the `client` label of the
// service's per-client metrics and appears in its log, so it must be text a
// Prometheus scraper and a terminal take as it is.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "engram/status.h"

namespace engram::node {

inline constexpr size_t kMaxClientNameBytes = 128;

// OK for 1..kMaxClientNameBytes bytes of valid UTF-8 with no control
// character (C0, DEL, C1); else InvalidArgument saying which rule it breaks.
// An empty name is allowed: the service names such a client by its process
// ID.
Status CheckClientName(std::string_view name);

}  // namespace engram::node
