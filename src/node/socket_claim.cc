#include "src/node/socket_claim.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "storage/log.h"

namespace engram::node {
namespace {

// What the lock file holds: "pid=P dev=D ino=I\n" (dev and ino 0 until the
// holder has bound its socket).
struct ClaimRecord {
  long long pid = 0;
  unsigned long long dev = 0, ino = 0;
};

ClaimRecord ReadRecord(int fd) {
  char buf[128] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  ClaimRecord r;
  if (n > 0 && std::sscanf(buf, "pid=%lld dev=%llu ino=%llu", &r.pid, &r.dev, &r.ino) != 3) r = ClaimRecord{};
  return r;
}

sockaddr_un AddressOf(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// Whether a stream socket listens at `path`: 0 if one answers,
// ECONNREFUSED if nobody does, another errno if it is not a stream socket
// (EPROTOTYPE) or cannot be tried.
int ProbeStreamSocket(const std::string& path) {
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return errno;
  const sockaddr_un addr = AddressOf(path);
  const int err = ::connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 ? 0 : errno;
  ::close(probe);
  return err;
}

}  // namespace

Result<std::unique_ptr<SocketClaim>> SocketClaim::Take(const std::string& socket_path) {
  std::unique_ptr<SocketClaim> claim(new SocketClaim());
  claim->socket_path_ = socket_path;
  claim->lock_path_ = socket_path + ".lock";
  const std::string& lock_path = claim->lock_path_;
  ClaimRecord last;
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0) return Status::FromErrno("engram-served: open the socket's lock file " + lock_path, errno);
    struct stat held {};
    if (::fstat(fd, &held) != 0 || !S_ISREG(held.st_mode)) {
      ::close(fd);
      return Status::InvalidArgument("engram-served: " + lock_path + " is not a regular file; not using it");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      // The holder writes its record right after it locks: give it a moment,
      // so that the refusal can name it.
      ClaimRecord holder = ReadRecord(fd);
      for (int i = 0; i < 100 && holder.pid == 0 && err == EWOULDBLOCK; ++i) {
        ::usleep(1000);
        holder = ReadRecord(fd);
      }
      ::close(fd);
      if (err == EWOULDBLOCK) {
        return Status::Unavailable("engram-served: another engram-served" +
                                       (holder.pid > 0 ? " (pid " + std::to_string(holder.pid) + ")" : std::string()) +
                                       " is running on " + socket_path + " (it holds " + lock_path +
                                       "); stop it first, or use another socket path");
      }
      return Status::FromErrno("engram-served: lock " + lock_path, err);
    }
    // Locked; but a holder that was exiting may have unlinked the file
    // after we opened it: then the lock is on a file nobody else will open.
    struct stat now {};
    if (::stat(lock_path.c_str(), &now) == 0 && now.st_dev == held.st_dev && now.st_ino == held.st_ino) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      claim->lock_fd_ = fd;
      last = ReadRecord(fd);
      // Name this process as the holder at once (keeping the socket the
      // last holder bound, until ours replaces it): a claimant that fails
      // from now on says who runs here.
      claim->socket_dev_ = dev_t(last.dev);
      claim->socket_ino_ = ino_t(last.ino);
      ENGRAM_RETURN_IF_ERROR(claim->Record());
      break;
    }
    ::close(fd);
    if (attempt == 100) return Status::Internal("engram-served: could not claim " + lock_path + " (it keeps changing)");
  }
  // The path is ours to serve. What is at it now?
  struct stat st {};
  if (::lstat(socket_path.c_str(), &st) == 0) {
    const bool recorded = last.ino != 0 && st.st_dev == dev_t(last.dev) && st.st_ino == ino_t(last.ino);
    if (!S_ISSOCK(st.st_mode)) {
      return Status::InvalidArgument("engram-served: " + socket_path + " exists and is not a socket; not removing it");
    }
    const int probe = ProbeStreamSocket(socket_path);
    if (probe == 0) {
      return Status::InvalidArgument("engram-served: something other than an engram-served listens on " +
                                     socket_path + "; not removing it");
    }
    if (probe == EPROTOTYPE) {
      return Status::InvalidArgument("engram-served: " + socket_path +
                                     " is another program's socket (not a stream socket); not removing it");
    }
    if (probe != ECONNREFUSED) {
      return Status::InvalidArgument("engram-served: cannot tell whether the socket " + socket_path +
                                     " is in use (" + std::strerror(probe) + "); not removing it");
    }
    // A stream socket nobody listens on, at a path nobody else has claimed:
    // a service's that died (or, before claims, one that was bound and not
    // yet listening -- the claim now rules that out for services).
    if (recorded) {
      log::Info("engram-served: removing the stale socket {} (left by pid {})", socket_path, last.pid);
    } else {
      log::Info("engram-served: removing the stale socket {} (nobody listens on it)", socket_path);
    }
    if (::unlink(socket_path.c_str()) != 0 && errno != ENOENT) {
      return Status::FromErrno("engram-served: remove the stale socket " + socket_path, errno);
    }
  }
  return claim;
}

Status SocketClaim::Record() const {
  char buf[128];
  const int n = std::snprintf(buf, sizeof(buf), "pid=%lld dev=%llu ino=%llu\n", static_cast<long long>(::getpid()),
                              static_cast<unsigned long long>(socket_dev_),
                              static_cast<unsigned long long>(socket_ino_));
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, buf, size_t(n), 0) != n) {
    return Status::FromErrno("engram-served: write " + lock_path_, errno);
  }
  return Status::OK();
}

Result<int> SocketClaim::Bind(int gid) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("engram-served: socket", errno);
  const sockaddr_un addr = AddressOf(socket_path_);
  // Created 0660 from the start: no moment when others may connect.
  const mode_t old_mask = ::umask(0117);
  const int bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  ::umask(old_mask);
  if (bound != 0) {
    ::close(fd);
    return Status::FromErrno("engram-served: bind " + socket_path_, bind_errno);
  }
  struct stat st {};
  if (::lstat(socket_path_.c_str(), &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno("engram-served: stat " + socket_path_, err);
  }
  socket_dev_ = st.st_dev;
  socket_ino_ = st.st_ino;
  bound_ = true;
  if (gid >= 0 && ::chown(socket_path_.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(gid)) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno("engram-served: chown " + socket_path_ + " to group " + std::to_string(gid), err);
  }
  if (Status s = Record(); !s.ok()) {
    ::close(fd);
    return s;
  }
  return fd;
}

SocketClaim::~SocketClaim() {
  if (bound_) {
    struct stat st {};
    if (::lstat(socket_path_.c_str(), &st) == 0 && st.st_dev == socket_dev_ && st.st_ino == socket_ino_) {
      ::unlink(socket_path_.c_str());
    }
  }
  if (lock_fd_ >= 0) {
    ::unlink(lock_path_.c_str());
    ::close(lock_fd_);
  }
}

}  // namespace engram::node
