// RedisUrl: where a table in a Redis Cluster lives, as users write it:
//
//   redis://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/NAME
//
// The HOST:PORT list names seed nodes: any reachable one is enough, the
// client learns the rest of the cluster from it (CLUSTER SLOTS). NAME is the
// table's name in the cluster (letters, digits, '.', '_', '-': it is part of
// every key, and a brace would change which slot a key hashes to). USER and
// PASSWORD may be percent-encoded; a URL without them takes
// ENGRAM_REDIS_USER / ENGRAM_REDIS_PASSWORD from the environment, so a
// password need never be on a command line. A password never appears in
// Display() or in any message.
//
// Pure (no I/O besides reading the two environment variables in Parse).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engram/status.h"

namespace engram::redis {

// The environment variables that hold the credentials a URL leaves out.
inline constexpr const char* kUserEnv = "ENGRAM_REDIS_USER";
inline constexpr const char* kPasswordEnv = "ENGRAM_REDIS_PASSWORD";

struct NodeAddress {
  std::string host;  // a name, an IPv4 address, or an IPv6 address (without brackets)
  uint16_t port = 0;

  // "host:port" ("[v6]:port" for an IPv6 address): how nodes are named in
  // messages, metrics and redirects.
  std::string ToString() const;
  bool operator==(const NodeAddress& o) const { return port == o.port && host == o.host; }
};

// "HOST:PORT" or "[V6]:PORT". InvalidArgument names the text.
Result<NodeAddress> ParseNodeAddress(std::string_view text);

struct RedisUrl {
  std::vector<NodeAddress> seeds;
  std::string user;      // empty: the default user
  std::string password;  // empty: no AUTH
  std::string name;      // the table's name in the cluster

  // The URL without credentials: "redis://h:p,h:p/NAME". What the store
  // reports as the table's path.
  std::string Display() const;
};

// True when `path` is meant as a table in a Redis Cluster ("redis://...").
bool IsRedisUrl(std::string_view path);

// Checks a table name: 1..200 of [A-Za-z0-9._-].
Status CheckTableName(std::string_view name);

// Parses `url`; credentials missing from it are taken from the environment.
// InvalidArgument says what is wrong, never echoing the password.
Result<RedisUrl> ParseRedisUrl(std::string_view url);

}  // namespace engram::redis
