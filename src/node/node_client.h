// NodeClient: the Store a process gets from Store::Open when
// StoreOptions::node names an engram-served (node_service.h).
//
// It holds a session with the service: the socket, a read-only mapping of
// the service's cache memory, one SharedRowCacheReader per table, and a
// thread that receives the service's answers. A gather looks its distinct
// rows up in the mapping and copies the hits itself -- no system call, no
// lock, no write to shared memory -- and sends only its misses; the rows it
// served are reported to the service in batches by a thread of its own
// (with its counters, every 20 ms), so the cache's policy sees the accesses
// and a gather never makes a system call for them.
//
// When the service goes away (stopped, killed, restarting), every call
// fails with StatusCode::kUnavailable, pending gathers included: nothing
// hangs, and no row is written from a cache nobody maintains. The next call
// at least 100 ms after the last attempt tries to connect again, and
// succeeds once the service is back with the same tables.
#pragma once

#include <memory>

#include "engram/options.h"
#include "engram/status.h"
#include "engram/store.h"

namespace engram::node {

class NodeClient {
 public:
  // Connects to options.node and checks the tables; fails with Unavailable
  // when no service answers there, InvalidArgument when it serves other
  // tables.
  static Result<std::unique_ptr<Store>> Open(const StoreOptions& options);
};

}  // namespace engram::node
