// SlotMap: which master serves each of the 16384 hash slots, and which
// replicas each master has, as a node's CLUSTER SLOTS reply tells it.
//
// Pure: parsing and lookup, no I/O.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <hiredis/hiredis.h>

#include "engram/status.h"
#include "storage/redis/cluster_slot.h"
#include "storage/redis/redis_url.h"

namespace engram::redis {

struct SlotRange {
  uint16_t first = 0;
  uint16_t last = 0;  // inclusive
  NodeAddress master;
  std::vector<NodeAddress> replicas;
};

// Parses a CLUSTER SLOTS reply obtained from `asked` (a node that reports
// its own address as "" or "?" is `asked`'s host). Corruption names what
// is malformed.
Result<std::vector<SlotRange>> ParseClusterSlots(const redisReply& reply, const NodeAddress& asked);

}  // namespace engram::redis
