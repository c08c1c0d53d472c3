// LocalRedisCluster: a real Redis Cluster on loopback for tests and
// benchmarks: `masters` masters and as many replicas each, every node a
// redis-server child process (Debian's, found on PATH) on ports picked free,
// joined with `redis-cli --cluster create`. Every process dies with the
// process that started it (ChildProcess: SIGKILL on parent death), so a
// crashed test leaves none behind; the destructor stops them and removes
// their directory. scripts/redis_cluster.sh starts the same cluster for
// people (README, benchmarks by hand).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engram/status.h"
#include "src/common/child_process.h"
#include "storage/redis/redis_connection.h"

namespace engram {

struct LocalRedisClusterOptions {
  int masters = 3;
  int replicas_per_master = 1;
  std::string password;  // requirepass/masterauth on every node; empty: none
  // cluster-node-timeout: how soon a silent master is failed over.
  uint32_t node_timeout_ms = 1000;
};

class LocalRedisCluster {
 public:
  // NotFound (naming the package) when redis-server or redis-cli is missing.
  static Result<std::unique_ptr<LocalRedisCluster>> Start(const LocalRedisClusterOptions& options = {});
  ~LocalRedisCluster();
  LocalRedisCluster(const LocalRedisCluster&) = delete;
  LocalRedisCluster& operator=(const LocalRedisCluster&) = delete;

  // "127.0.0.1:P,..." of the first `masters` nodes (the masters at start).
  std::string Seeds() const;
  // redis://SEEDS/NAME (credentials not included).
  std::string Url(const std::string& name) const { return "redis://" + Seeds() + "/" + name; }
  const std::vector<uint16_t>& ports() const { return ports_; }
  const std::string& dir() const { return dir_; }

  // Runs one command on the node at `port` (with the cluster's password).
  Result<redis::Reply> Command(uint16_t port, const std::vector<std::string>& words) const;
  // The port of the master serving `slot`, as the node at `ask_port` (or
  // the first live node) sees it.
  Result<uint16_t> MasterOfSlot(uint16_t slot) const;
  // The node ID of the node at `port`.
  Result<std::string> NodeId(uint16_t port) const;
  // Runs redis-cli with `args` (and -a PASSWORD); its output, or why it failed.
  Result<std::string> RedisCli(const std::vector<std::string>& args, int timeout_s = 60) const;

  // Returns once every node reports cluster_state:ok and all slots served,
  // or DeadlineExceeded.
  Status WaitUntilHealthy(uint32_t timeout_ms = 30000) const;
  // Returns once every live master's replicas have its replication offset
  // (what was written is on the replicas), or DeadlineExceeded.
  Status WaitForReplicas(uint32_t timeout_ms = 30000) const;
  // kill -9 of the node at `port`; returns once it is gone.
  Status Kill(uint16_t port);
  bool alive(uint16_t port) const;
  // The process of the node at `port` (for SIGSTOP / SIGCONT), or -1.
  pid_t pid(uint16_t port) const;

 private:
  LocalRedisCluster() = default;
  size_t IndexOf(uint16_t port) const;

  LocalRedisClusterOptions options_;
  std::string dir_;
  std::string cli_;
  std::vector<uint16_t> ports_;
  std::vector<ChildProcess> servers_;
  std::vector<bool> killed_;
};

}  // namespace engram
