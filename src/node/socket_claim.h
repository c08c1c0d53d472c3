// SocketClaim: the one engram-served that serves a socket path.
//
// Binding the socket's path is not enough to own it. A service binds
// before it opens its tables (seconds) and listens only then; a second
// service that probed the path meanwhile saw a socket nobody answered, took
// it for the stale socket of a dead service, deleted it and bound its own,
// and whichever lost the race on the tables' locks exited, leaving the
// other serving on a path that no longer led to it. So a service first
// claims the path: an exclusive flock on "SOCKET.lock" beside it, taken
// before anything else and held for its whole life (the kernel drops it
// however the process ends). The lock file records the holder's process ID
// and the identity (device, inode) of the socket it bound. Hence:
//   - one claim per path: every other service fails at once, naming the
//     process that holds it;
//   - a socket at the path is removed only when it is a stream socket that
//     nothing answers on (a service that died left it; the log says which,
//     when the lock file recorded it). Anything else found there (a file, a
//     socket of another kind, a live one) is left alone and the service
//     refuses to start, saying what is there.
// At exit the socket (if still the one it bound) and the lock file are
// removed, the lock file while still locked; a claimant that opened the old
// lock file sees it unlinked after locking it, and tries again.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "engram/status.h"

namespace engram::node {

class SocketClaim {
 public:
  // Claims `socket_path` (see above) and clears a stale socket of the last
  // holder. Fails with Unavailable naming the running service, or
  // InvalidArgument saying what else occupies the path.
  static Result<std::unique_ptr<SocketClaim>> Take(const std::string& socket_path);
  ~SocketClaim();
  SocketClaim(const SocketClaim&) = delete;
  SocketClaim& operator=(const SocketClaim&) = delete;

  // Binds a new stream socket at the path, 0660 from the start (owned by
  // group `gid` when gid >= 0), and records it in the lock file. Returns its
  // descriptor (the caller owns it and listens on it).
  Result<int> Bind(int gid);

  const std::string& lock_path() const { return lock_path_; }

 private:
  SocketClaim() = default;
  Status Record() const;

  std::string socket_path_;
  std::string lock_path_;
  int lock_fd_ = -1;
  // The socket recorded in the lock file: the last holder's until Bind
  // makes ours.
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  bool bound_ = false;
};

}  // namespace engram::node
