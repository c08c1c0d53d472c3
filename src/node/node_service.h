// NodeService: one store for every process of a node (engram-served).
//
// The service opens the tables, the row caches (in SharedCacheMemory) and
// the metrics endpoint, and listens on a Unix socket. A client (NodeClient,
// what Store::Open returns for StoreOptions::node) says hello with the
// tables it expects; the service checks them against its own and answers
// with each table's cache geometry and a read-only descriptor of the cache
// memory. From then on the client serves its hits from its read-only
// mapping and sends the service only:
//   - its misses (kGather): the service gathers them through its store, as a
//     private store would (read, verify, admit to the cache) and answers with
//     the rows;
//   - the rows it served, in batches (kHits), so the policy sees every hit;
//   - read-aheads, releases, stats and waits.
// Each connection has a thread that reads its requests; a gather's answer is
// sent by whichever thread completes it. A connection's read-ahead pins are
// its own: when it ends (the client exited or was killed), the pins it still
// holds are released. The caches are written only here, so a client that
// dies mid-gather leaves no lock held and no row half-written.
//
// Concurrent misses of the same row by several clients cause one read: a row
// in flight for one request is waited for by the others (InflightRows).
//
// Access: the socket is created 0660 (group: NodeServiceOptions::group), the
// memory too; nothing listens on a network address but the metrics
// endpoint, when StoreOptions::metrics_listen asks for it.
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
  // Longest a client may take to read an answer before it is disconnected:
  // a client that stops reading must not hold up the threads that answer
  // the others.
  uint32_t send_timeout_ms = 5000;
  // Longest a new connection may take to say hello; and the most clients
  // connected at once (each has a thread here): a process that opens
  // connections and says nothing cannot use up the service.
  uint32_t hello_timeout_ms = 10000;
  uint32_t max_clients = 1024;
};

class NodeService {
 public:
  // Opens the store, takes the tables (another running service serving one
  // of the same files is refused), removes a stale socket (refusing a live
  // one), and starts serving.
  static Result<std::unique_ptr<NodeService>> Start(const NodeServiceOptions& options);
  // Stop().
  virtual ~NodeService() = default;

  // Tells every client the service is stopping, closes every connection,
  // waits for their threads, closes the store (which saves the hot set, if
  // any) and removes the socket. Idempotent.
  virtual void Stop() = 0;

  virtual size_t client_count() const = 0;
  virtual uint16_t metrics_port() const = 0;
  virtual std::string MetricsText() const = 0;
};

}  // namespace engram::node
