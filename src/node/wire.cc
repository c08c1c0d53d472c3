#include "src/node/wire.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

namespace engram::node {
namespace {

// Reads exactly n bytes; the first read may also take a descriptor.
Status ReadFully(int socket, void* dst, size_t n, int* fd, bool* clean_eof) {
  auto* p = static_cast<uint8_t*>(dst);
  size_t got = 0;
  while (got < n) {
    iovec iov{p + got, n - got};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (fd != nullptr) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
    }
    const ssize_t r = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("node socket: receive", errno);
    }
    if (r == 0) {
      if (got == 0 && clean_eof != nullptr) *clean_eof = true;
      return Status::IOError("node socket: the peer closed the connection inside a message");
    }
    if (fd != nullptr) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
          int received;
          std::memcpy(&received, CMSG_DATA(c), sizeof(int));
          if (*fd >= 0) ::close(*fd);
          *fd = received;
        }
      }
    }
    got += static_cast<size_t>(r);
  }
  return Status::OK();
}

}  // namespace

Status SendMessage(int socket, MessageType type, uint64_t request_id, std::span<const uint8_t> payload,
                   std::span<const uint8_t> tail, int fd) {
  const uint64_t bytes = payload.size() + tail.size();
  if (bytes > kMaxPayloadBytes) {
    return Status::InvalidArgument("node socket: a message of " + std::to_string(bytes) +
                                   " B is over the limit of " + std::to_string(kMaxPayloadBytes) + " B");
  }
  FrameHeader h{kWireMagic, static_cast<uint16_t>(type), 0, request_id, static_cast<uint32_t>(bytes), 0};
  iovec iov[3] = {{&h, sizeof(h)},
                  {const_cast<uint8_t*>(payload.data()), payload.size()},
                  {const_cast<uint8_t*>(tail.data()), tail.size()}};
  size_t total = sizeof(h) + bytes;
  size_t sent = 0;
  bool fd_sent = fd < 0;
  while (sent < total) {
    // Skip what was sent already.
    iovec rest[3];
    int n = 0;
    size_t skip = sent;
    for (const iovec& v : iov) {
      if (skip >= v.iov_len) {
        skip -= v.iov_len;
        continue;
      }
      rest[n++] = {static_cast<uint8_t*>(v.iov_base) + skip, v.iov_len - skip};
      skip = 0;
    }
    msghdr msg{};
    msg.msg_iov = rest;
    msg.msg_iovlen = n;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (!fd_sent) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    const ssize_t r = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("node socket: send", errno);
    }
    fd_sent = true;
    sent += static_cast<size_t>(r);
  }
  return Status::OK();
}

Result<Message> ReceiveMessage(int socket) {
  Message m;
  FrameHeader h{};
  bool clean_eof = false;
  if (Status s = ReadFully(socket, &h, sizeof(h), &m.fd, &clean_eof); !s.ok()) {
    if (m.fd >= 0) ::close(m.fd);
    if (clean_eof) return Status::Cancelled("node socket: closed by the peer");
    return s;
  }
  auto fail = [&m](Status s) -> Result<Message> {
    if (m.fd >= 0) ::close(m.fd);
    return s;
  };
  if (h.magic != kWireMagic) return fail(Status::InvalidArgument("node socket: not an Engram node message (bad magic)"));
  if (h.payload_bytes > kMaxPayloadBytes) {
    return fail(Status::InvalidArgument("node socket: a message of " + std::to_string(h.payload_bytes) +
                                        " B is over the limit of " + std::to_string(kMaxPayloadBytes) + " B"));
  }
  m.type = static_cast<MessageType>(h.type);
  m.request_id = h.request_id;
  m.payload.resize(h.payload_bytes);
  if (h.payload_bytes != 0) {
    if (Status s = ReadFully(socket, m.payload.data(), h.payload_bytes, nullptr, nullptr); !s.ok()) return fail(s);
  }
  return m;
}

}  // namespace engram::node
