// ClusterClient: a Redis Cluster client for single-key commands, with the
// routing Debian's hiredis 0.14 does not have (hiredis formats commands and
// parses replies; redis_connection.h).
//
//   - Routing: a command goes to the master that serves its key's hash slot
//     (cluster_slot.h), from a slot map learned with CLUSTER SLOTS from any
//     reachable node (the seeds first).
//   - Redirects: MOVED updates the slot's owner and resends there; ASK sends
//     ASKING and the command to the node named, once, leaving the map as it
//     is (a slot being migrated). At most max_redirects per command.
//   - Topology refresh: after a MOVED, a lost connection or a slot nobody
//     serves, the map is asked for again (at most every
//     refresh_interval_ms), so a replica promoted after its master failed
//     takes over its slots without anyone reopening anything.
//   - One connection per master, made when first needed (AUTH first when
//     there are credentials), pipelined: at most pipeline_depth commands in
//     flight on it; the rest wait their turn, and are sent once half of the
//     window has been answered (so a node reads and answers many at a time).
//   - Timeouts: a command not answered within timeout_ms of its submission
//     fails, and the connection it waited on is closed (its other commands
//     fail too: their answers can no longer be told apart).
//
// Failures are per command: Unavailable for a node that cannot be reached,
// has closed the connection, did not answer in time, or whose cluster is down
// (nothing is retried but redirects: a gather's rows on a failed master fail,
// and the next gather goes to whoever serves the slot by then);
// InvalidArgument for refused credentials; IOError for other error replies.
// An error reply is a command's status; its other replies are its own.
//
// One I/O thread per client runs every connection (poll), so submitters
// never block on the network: Submit hands a batch over and returns, and the
// batch's `done` runs on the I/O thread once every command of it has its
// reply or its failure. It must only hand off and return.
//
// Thread safety: Submit, Run, Stats may be called from any thread; `done`
// callbacks must not call Shutdown or destroy the client.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engram/status.h"
#include "storage/mutex.h"
#include "storage/redis/redis_connection.h"
#include "storage/redis/redis_url.h"
#include "storage/thread_annotations.h"

namespace engram::redis {

struct ClusterOptions {
  std::vector<NodeAddress> seeds;
  std::string user;
  std::string password;  // empty: no AUTH
  // A command not answered this long after its submission fails with
  // Unavailable; so does a connect or a discovery that takes longer.
  uint32_t timeout_ms = 2000;
  // Commands in flight on one connection at most (1..65536).
  uint32_t pipeline_depth = 256;
  // Redirects (MOVED, ASK) one command may follow before it fails.
  uint32_t max_redirects = 5;
  // Topology refreshes at most this often (0: whenever one is wanted).
  uint32_t refresh_interval_ms = 100;
  // After a node failed (refused, broke, timed out), commands for it fail at
  // once for this long instead of each trying to connect again.
  uint32_t reconnect_backoff_ms = 20;
};

// One single-key command. words[0] is the command, words[1] the key it is
// routed by; the views must stay valid until the batch's done has run.
struct ClusterCommand {
  std::array<std::string_view, 4> words{};
  uint8_t word_count = 0;
  // For a GET: where its value goes. A value of exactly into.size() bytes is
  // copied here and no reply is kept; a missing key is NotFound, a value of
  // another size Corruption.
  std::span<std::byte> into;

  // Filled by the client.
  Status status;
  Reply reply;  // the reply (not an error), unless the value went to `into`
  // Internal: redirects followed so far.
  uint8_t redirects = 0;

  static ClusterCommand Get(std::string_view key, std::span<std::byte> into = {}) {
    ClusterCommand c;
    c.words = {"GET", key};
    c.word_count = 2;
    c.into = into;
    return c;
  }
  static ClusterCommand Set(std::string_view key, std::string_view value) {
    ClusterCommand c;
    c.words = {"SET", key, value};
    c.word_count = 3;
    return c;
  }
  static ClusterCommand Del(std::string_view key) {
    ClusterCommand c;
    c.words = {"DEL", key};
    c.word_count = 2;
    return c;
  }
  static ClusterCommand Exists(std::string_view key) {
    ClusterCommand c;
    c.words = {"EXISTS", key};
    c.word_count = 2;
    return c;
  }
  std::string_view key() const { return words[1]; }
};

// What the client did with one node (a master it sent commands to).
struct ClusterNodeStats {
  std::string node;              // host:port
  uint64_t requests = 0;         // commands answered or failed on this node
  uint64_t bytes_sent = 0;       // formatted commands written
  uint64_t bytes_received = 0;   // reply bytes read
  uint64_t moved = 0;            // MOVED redirects it answered
  uint64_t asks = 0;             // ASK redirects it answered
  uint64_t errors = 0;           // commands that failed here (error replies, lost connections, timeouts)
  uint64_t latency_sum_ns = 0;   // submission-to-reply time of the answered commands
  uint64_t answered = 0;         // commands whose latency is in latency_sum_ns
};

class ClusterClient {
 public:
  // Learns the slot map from the first seed that answers CLUSTER SLOTS and
  // starts the I/O thread. Unavailable names every node tried and why it
  // failed; InvalidArgument for refused credentials or a node that is not in
  // cluster mode.
  static Result<std::unique_ptr<ClusterClient>> Connect(ClusterOptions options);
  ~ClusterClient();  // Shutdown()
  ClusterClient(const ClusterClient&) = delete;
  ClusterClient& operator=(const ClusterClient&) = delete;

  // Starts every command of `commands` (which must stay valid until `done`
  // has run); `done` runs once, on the I/O thread (or here, if the client is
  // shut down: every command then fails with Cancelled).
  void Submit(std::span<ClusterCommand> commands, std::function<void()> done);
  // Submit and wait. Per-command results are in the commands.
  void Run(std::span<ClusterCommand> commands);

  // The masters the slot map names now, and the nodes it knows of (masters
  // and replicas), as host:port.
  std::vector<std::string> Masters() const;
  // Per node the client has talked to (in the order it first did).
  std::vector<ClusterNodeStats> Stats() const;
  // Topology refreshes that succeeded.
  uint64_t refreshes() const { return refreshes_.load(std::memory_order_relaxed); }
  const ClusterOptions& options() const { return options_; }

  // Fails every pending command with Cancelled, runs their batches' done,
  // stops the I/O thread. Idempotent. Not from a done callback.
  void Shutdown();

 private:
  class Loop;  // the I/O thread's state (cluster_client.cc)
  explicit ClusterClient(ClusterOptions options);

  const ClusterOptions options_;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  std::atomic<uint64_t> refreshes_{0};
};

}  // namespace engram::redis
