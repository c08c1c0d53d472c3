#include "src/node/wire.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace engram::node {
namespace {

// A read takes at most this much of a payload at once.
constexpr size_t kReadStep = 256u << 10;
// Room for the descriptors a hostile peer may attach to one read: the kernel
// closes those that do not fit (MSG_CTRUNC), we close those that do.
constexpr size_t kMaxDescriptorsPerRead = 64;

uint64_t NowMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

// Sends, from `skip` bytes into the header + payload + tail, what one
// sendmsg takes (the descriptor rides with the first byte). Returns the
// bytes sent, or -1 with errno.
ssize_t SendPart(int socket, const FrameHeader& h, std::span<const uint8_t> payload, std::span<const uint8_t> tail,
                 size_t skip, int fd) {
  const iovec parts[3] = {{const_cast<FrameHeader*>(&h), sizeof(h)},
                          {const_cast<uint8_t*>(payload.data()), payload.size()},
                          {const_cast<uint8_t*>(tail.data()), tail.size()}};
  iovec rest[3];
  int n = 0;
  for (const iovec& v : parts) {
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
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  return ::sendmsg(socket, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

Status CheckLength(uint64_t bytes) {
  if (bytes > kMaxPayloadBytes) {
    return Status::InvalidArgument("node socket: a message of " + std::to_string(bytes) + " B is over the limit of " +
                                   std::to_string(kMaxPayloadBytes) + " B");
  }
  return Status::OK();
}

}  // namespace

Status SendMessage(int socket, MessageType type, uint64_t request_id, std::span<const uint8_t> payload,
                   std::span<const uint8_t> tail, int fd, uint64_t deadline_ms) {
  const uint64_t bytes = payload.size() + tail.size();
  ENGRAM_RETURN_IF_ERROR(CheckLength(bytes));
  const FrameHeader h{kWireMagic, static_cast<uint16_t>(type), 0, request_id, static_cast<uint32_t>(bytes), 0};
  const size_t total = sizeof(h) + bytes;
  size_t sent = 0;
  while (sent < total) {
    const ssize_t r = SendPart(socket, h, payload, tail, sent, sent == 0 ? fd : -1);
    if (r >= 0) {
      sent += static_cast<size_t>(r);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Status::FromErrno("node socket: send", errno);
    // The peer is not reading: wait for room, until the deadline.
    int wait_ms = -1;
    if (deadline_ms != 0) {
      const uint64_t now = NowMs();
      if (now >= deadline_ms) {
        return Status(StatusCode::kDeadlineExceeded,
                      "node socket: the peer took no data for the whole deadline (" + std::to_string(sent) + " of " +
                          std::to_string(total) + " B of a message sent)");
      }
      wait_ms = static_cast<int>(std::min<uint64_t>(deadline_ms - now, 60000));
    }
    pollfd p{socket, POLLOUT, 0};
    if (::poll(&p, 1, wait_ms) < 0 && errno != EINTR) return Status::FromErrno("node socket: poll", errno);
  }
  return Status::OK();
}

MessageReader::~MessageReader() {
  if (fd_ >= 0) ::close(fd_);
}

void MessageReader::TakeDescriptors(msghdr& msg) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int received;
      std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (keep_descriptor_ && fd_ < 0) {
        fd_ = received;
      } else {
        ::close(received);
      }
    }
  }
}

Result<MessageReader::Progress> MessageReader::ReadFrom(int socket) {
  if (complete_) return Progress::kMessage;
  for (;;) {
    uint8_t* dst;
    size_t want;
    if (header_got_ < sizeof(FrameHeader)) {
      dst = reinterpret_cast<uint8_t*>(&header_) + header_got_;
      want = sizeof(FrameHeader) - header_got_;
    } else {
      const size_t left = header_.payload_bytes - payload_got_;
      if (growth_ == Growth::kWholePayloadAtOnce) {
        if (payload_.size() < header_.payload_bytes) payload_.resize(header_.payload_bytes);
        want = left;
      } else {
        // Room for what has arrived (at most a step), never for what the
        // header only claims.
        int available = 0;
        if (::ioctl(socket, FIONREAD, &available) != 0) available = 0;
        want = std::min({left, kReadStep, std::max<size_t>(size_t(std::max(available, 0)), 1)});
        if (payload_.size() < payload_got_ + want) payload_.resize(payload_got_ + want);
      }
      dst = payload_.data() + payload_got_;
    }
    iovec iov{dst, want};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(kMaxDescriptorsPerRead * sizeof(int))];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t r = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Progress::kWouldBlock;
      return Status::FromErrno("node socket: receive", errno);
    }
    TakeDescriptors(msg);
    if (r == 0) {
      if (buffered_bytes() == 0) return Progress::kClosed;
      return Status::IOError("node socket: the peer closed the connection inside a message");
    }
    if (header_got_ < sizeof(FrameHeader)) {
      header_got_ += static_cast<size_t>(r);
      if (header_got_ < sizeof(FrameHeader)) continue;
      if (header_.magic != kWireMagic) {
        return Status::InvalidArgument("node socket: not an Engram node message (bad magic)");
      }
      if (header_.payload_bytes > max_payload_) {
        return Status::InvalidArgument("node socket: a message of " + std::to_string(header_.payload_bytes) +
                                       " B is over the limit of " + std::to_string(max_payload_) + " B");
      }
    } else {
      payload_got_ += static_cast<size_t>(r);
    }
    if (header_got_ == sizeof(FrameHeader) && payload_got_ == header_.payload_bytes) {
      complete_ = true;
      return Progress::kMessage;
    }
  }
}

Message MessageReader::Take() {
  Message m;
  m.type = static_cast<MessageType>(header_.type);
  m.request_id = header_.request_id;
  payload_.resize(payload_got_);
  m.payload = std::move(payload_);
  m.fd = fd_;
  fd_ = -1;
  payload_ = {};
  header_ = {};
  header_got_ = payload_got_ = 0;
  complete_ = false;
  return m;
}

Result<Message> ReceiveMessage(int socket) {
  MessageReader reader(kMaxPayloadBytes, /*keep_descriptor=*/true, MessageReader::Growth::kWholePayloadAtOnce);
  for (;;) {
    ENGRAM_ASSIGN_OR_RETURN(MessageReader::Progress p, reader.ReadFrom(socket));
    if (p == MessageReader::Progress::kMessage) return reader.Take();
    if (p == MessageReader::Progress::kClosed) return Status::Cancelled("node socket: closed by the peer");
    // A non-blocking socket with nothing yet: wait for it.
    pollfd w{socket, POLLIN, 0};
    if (::poll(&w, 1, -1) < 0 && errno != EINTR) return Status::FromErrno("node socket: poll", errno);
  }
}

OutgoingMessage::OutgoingMessage(MessageType type, uint64_t request_id, std::vector<uint8_t> payload,
                                 std::shared_ptr<const void> tail_owner, std::span<const uint8_t> tail, int fd)
    : header_{kWireMagic, static_cast<uint16_t>(type), 0, request_id,
              static_cast<uint32_t>(payload.size() + tail.size()), 0},
      payload_(std::move(payload)),
      tail_owner_(std::move(tail_owner)),
      tail_(tail),
      fd_(fd) {}

OutgoingMessage::~OutgoingMessage() {
  if (fd_ >= 0) ::close(fd_);
}

OutgoingMessage::OutgoingMessage(OutgoingMessage&& other) noexcept
    : header_(other.header_),
      payload_(std::move(other.payload_)),
      tail_owner_(std::move(other.tail_owner_)),
      tail_(other.tail_),
      fd_(std::exchange(other.fd_, -1)),
      sent_(other.sent_) {}

Result<bool> OutgoingMessage::SendSome(int socket) {
  if (sent_ == 0) ENGRAM_RETURN_IF_ERROR(CheckLength(uint64_t{payload_.size()} + tail_.size()));
  const size_t total = total_bytes();
  while (sent_ < total) {
    const ssize_t r = SendPart(socket, header_, payload_, tail_, sent_, sent_ == 0 ? fd_ : -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      return Status::FromErrno("node socket: send", errno);
    }
    if (sent_ == 0 && r > 0 && fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
    sent_ += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace engram::node
