// NodeService: one store for every process of a node (engram-served).
//
// The service opens the tables, the row caches (in SharedCacheMemory) and
// the metrics endpoint, and listens on a Unix socket it has claimed
// (SocketClaim: one service per path). A client (NodeClient, what
// Store::Open returns for StoreOptions::node) says hello with the tables it
// expects; the service checks them against its own and answers with each
// table's cache geometry and a read-only, sealed descriptor of the cache
// memory. From then on the client serves its hits from its read-only
// mapping and sends the service only:
//   - its misses (kGather): the service checks the row IDs, then gathers
//     them through its store, as a private store would (read, verify, admit
//     to the cache) and answers with the rows;
//   - the rows it served, in batches (kHits), so the policy sees every hit
//     and the read-ahead pins it consumed are released;
//   - read-aheads, releases, stats and waits.
//
// Sharing is fair and bounded:
//   - Connections are served by a fixed set of threads (Boost.Asio); each
//     connection's requests and answers run in its own strand and its
//     answers go out through its own queue (ServiceConnection), so a client
//     that stops reading holds up only itself; waits run on a small pool of
//     their own and never block a connection's reads.
//   - Misses and read-aheads of every client go to the store through one
//     FairMissScheduler (per-client queues of units, deficit round-robin,
//     read by a fixed set of gather threads), so a decode step's few
//     hundred rows never wait behind another client's prefill.
//   - Read-ahead pins belong to their client (ReadAheadTracker owners): a
//     client consumes or releases only its own, and a client that goes
//     releases what it still held.
//
// Concurrent misses of the same row by several clients cause one read: a row
// in flight for one request is waited for by the others (InflightRows).
// The caches are written only here, so a client that dies mid-gather leaves
// no lock held and no row half-written.
//
// Access: the socket is created 0660 (group: NodeServiceOptions::group), the
// memory 0640 and sealed against writes; nothing listens on a network
// address but the metrics endpoint, when StoreOptions::metrics_listen asks
// for it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engram/options.h"
#include "engram/status.h"

namespace engram::node {

struct NodeServiceOptions {
  std::string socket_path;
  // The group that may connect (socket and memory are 0660, owned by it);
  // empty: the service's own group.
  std::string group;
  // The tables, cache, I/O, warm start and metrics endpoint, as for a
  // private store (StoreOptions::node must be empty).
  StoreOptions store;
  // Longest a client's answers may wait with none of their bytes read before
  // it is disconnected (a stopped or wedged client). After 20 ms already its
  // queued reads are passed over until it reads again.
  uint32_t send_timeout_ms = 5000;
  // Longest a new connection may take to send its whole hello; and the most
  // clients connected at once: a process that opens connections and says
  // nothing cannot use up the service.
  uint32_t hello_timeout_ms = 10000;
  uint32_t max_clients = 1024;
  // Threads that serve every connection (reading requests, writing answers).
  uint32_t threads = 2;
  // Threads that read clients' missed rows and read-aheads: each takes the
  // next unit from the fair scheduler and reads it to its end on its own
  // ring, as a private store's caller does (no hand-off between threads per
  // read). A small gather waits for at most the units these threads are
  // reading and one unit of each other busy client.
  uint32_t gather_threads = 4;
  // Answer bytes one client may have asked for and not yet read; its
  // requests are not read while it has more (64 MiB: four of the largest
  // answers).
  uint64_t max_answer_bytes_per_client = uint64_t{64} << 20;
  // The fair scheduler's unit (fair_miss_scheduler.h): each busy client's
  // share of missed rows per turn.
  uint32_t miss_quantum_rows = 128;
};

class NodeService {
 public:
  // Claims the socket path (another service on it is refused), opens the
  // store, takes the tables (another running service serving one of the
  // same files is refused), and starts serving.
  static Result<std::unique_ptr<NodeService>> Start(const NodeServiceOptions& options);
  // Stop().
  virtual ~NodeService() = default;

  // Tells every client the service is stopping, closes every connection,
  // closes the store (which saves the hot set, if any), stops the threads
  // and removes the socket. Idempotent.
  virtual void Stop() = 0;

  virtual size_t client_count() const = 0;
  virtual uint16_t metrics_port() const = 0;
  virtual std::string MetricsText() const = 0;
};

}  // namespace engram::node
