#include "storage/redis/slot_map.h"

#include <string>

#include "storage/redis/redis_connection.h"

namespace engram::redis {
namespace {

Result<NodeAddress> NodeOf(const redisReply& entry, const NodeAddress& asked) {
  if (entry.type != REDIS_REPLY_ARRAY || entry.elements < 2 || entry.element[0]->type != REDIS_REPLY_STRING ||
      entry.element[1]->type != REDIS_REPLY_INTEGER) {
    return Status::Corruption("CLUSTER SLOTS from " + asked.ToString() + ": a node entry is not [host, port, ...]");
  }
  NodeAddress a;
  a.host.assign(entry.element[0]->str, entry.element[0]->len);
  if (a.host.empty() || a.host == "?") a.host = asked.host;
  const long long port = entry.element[1]->integer;
  if (port <= 0 || port > 65535) {
    return Status::Corruption("CLUSTER SLOTS from " + asked.ToString() + ": port " + std::to_string(port));
  }
  a.port = static_cast<uint16_t>(port);
  return a;
}

}  // namespace

Result<std::vector<SlotRange>> ParseClusterSlots(const redisReply& reply, const NodeAddress& asked) {
  if (reply.type == REDIS_REPLY_ERROR) {
    Status refused = ErrorReplyStatus(asked, std::string_view(reply.str, reply.len));
    if (refused.code() == StatusCode::kInvalidArgument) return refused;  // credentials
    return Status::InvalidArgument("redis node " + asked.ToString() + " answered CLUSTER SLOTS with '" +
                                   std::string(reply.str, reply.len) + "' (a Redis Cluster node is needed)");
  }
  if (reply.type != REDIS_REPLY_ARRAY) {
    return Status::Corruption("CLUSTER SLOTS from " + asked.ToString() + " is not an array");
  }
  std::vector<SlotRange> ranges;
  for (size_t i = 0; i < reply.elements; ++i) {
    const redisReply& r = *reply.element[i];
    if (r.type != REDIS_REPLY_ARRAY || r.elements < 3 || r.element[0]->type != REDIS_REPLY_INTEGER ||
        r.element[1]->type != REDIS_REPLY_INTEGER) {
      return Status::Corruption("CLUSTER SLOTS from " + asked.ToString() + ": a range is not [first, last, master, ...]");
    }
    const long long first = r.element[0]->integer, last = r.element[1]->integer;
    if (first < 0 || last < first || last >= kSlotCount) {
      return Status::Corruption("CLUSTER SLOTS from " + asked.ToString() + ": slot range " + std::to_string(first) +
                                ".." + std::to_string(last));
    }
    SlotRange range;
    range.first = static_cast<uint16_t>(first);
    range.last = static_cast<uint16_t>(last);
    ENGRAM_ASSIGN_OR_RETURN(range.master, NodeOf(*r.element[2], asked));
    for (size_t k = 3; k < r.elements; ++k) {
      ENGRAM_ASSIGN_OR_RETURN(NodeAddress replica, NodeOf(*r.element[k], asked));
      range.replicas.push_back(std::move(replica));
    }
    ranges.push_back(std::move(range));
  }
  return ranges;
}

}  // namespace engram::redis
