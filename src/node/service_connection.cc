#include "src/node/service_connection.h"

#include <sys/socket.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include "src/node/messages.h"
#include "storage/log.h"

namespace engram::node {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// Messages one connection may hand the service before the others get a
// turn on its thread.
constexpr int kMessagesPerTurn = 32;

}  // namespace

ServiceConnection::ServiceConnection(asio::io_context& io, Socket socket, uint64_t id, const Limits& limits,
                                     std::shared_ptr<Handler> handler)
    : id_(id),
      limits_(limits),
      handler_(std::move(handler)),
      strand_(asio::make_strand(io)),
      socket_(std::move(socket)),
      hello_timer_(io),
      send_timer_(io),
      stall_timer_(io),
      reader_(kMaxHelloBytes, /*keep_descriptor=*/false),
      label_("a client") {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) pid_ = cred.pid;
  label_ = "a client (pid " + std::to_string(pid_) + ")";
  boost::system::error_code ignored;
  socket_.non_blocking(true, ignored);
}

ServiceConnection::~ServiceConnection() = default;

void ServiceConnection::Start() {
  auto self = shared_from_this();
  asio::post(strand_, [self] {
    self->hello_timer_.expires_after(self->limits_.hello_timeout);
    self->hello_timer_.async_wait(asio::bind_executor(self->strand_, [self](boost::system::error_code ec) {
      if (ec || self->greeted_ || self->closed_) return;
      const std::string why =
          "sent no complete hello within " + std::to_string(self->limits_.hello_timeout.count()) + " ms";
      log::Warn("engram-served: {} {}; disconnecting it", self->label_, why);
      self->stopped_reading_ = true;
      self->Enqueue(OutgoingMessage(MessageType::kError, 0, EncodeStatus(Status::DeadlineExceeded("engram-served: the client " + why))),
                    0, /*close_after=*/true);
    }));
    self->ArmRead();
  });
}

void ServiceConnection::Greeted(const std::string& label) {
  greeted_ = true;
  label_ = label;
  hello_timer_.cancel();
  reader_.set_max_payload(kMaxRequestBytes);
}

void ServiceConnection::Reserve(uint64_t bytes) { reserved_ += bytes; }

void ServiceConnection::Released(uint64_t bytes) {
  reserved_ -= std::min(reserved_, bytes);
  if (!closed_ && !reading_ && reserved_ <= limits_.max_reserved_answer_bytes) ArmRead();
}

void ServiceConnection::ArmRead() {
  if (closed_ || reading_ || stopped_reading_) return;
  reading_ = true;
  auto self = shared_from_this();
  socket_.async_wait(Socket::wait_read, asio::bind_executor(strand_, [self](boost::system::error_code ec) {
                       self->reading_ = false;
                       if (ec || self->closed_) return;
                       self->OnReadable();
                     }));
}

void ServiceConnection::OnReadable() {
  for (int n = 0; n < kMessagesPerTurn; ++n) {
    // Over its limit of answers not yet read: the client's requests wait
    // in its socket until its answers drain (Released re-arms the read).
    if (reserved_ > limits_.max_reserved_answer_bytes) return;
    auto progress = reader_.ReadFrom(socket_.native_handle());
    if (!progress.ok()) {
      const Status& why = progress.status();
      if (why.code() == StatusCode::kInvalidArgument) {
        // Garbage: say why before hanging up.
        log::Warn("engram-served: {} sent garbage: {}; disconnecting it", label_, why.ToString());
        stopped_reading_ = true;
        Enqueue(OutgoingMessage(MessageType::kError, 0, EncodeStatus(why)), 0, /*close_after=*/true);
        return;
      }
      CloseNow(why.code() == StatusCode::kIOError ? "" : why.ToString());
      return;
    }
    switch (*progress) {
      case MessageReader::Progress::kWouldBlock:
        ArmRead();
        return;
      case MessageReader::Progress::kClosed:
        CloseNow("");
        return;
      case MessageReader::Progress::kMessage:
        break;
    }
    try {
      handler_->OnMessage(shared_from_this(), reader_.Take());
    } catch (const std::bad_alloc&) {
      // A resource this client's request needed is not there: it loses its
      // connection, the service and the other clients go on.
      CloseNow("out of memory while serving its request");
      return;
    }
    if (closed_ || stopped_reading_) return;
  }
  // Its turn is over: the strand's other work, and other connections, run
  // before its next messages.
  reading_ = true;
  auto self = shared_from_this();
  asio::post(strand_, [self] {
    self->reading_ = false;
    if (!self->closed_ && !self->stopped_reading_) self->OnReadable();
  });
}

void ServiceConnection::Send(OutgoingMessage m, uint64_t reserved) {
  auto self = shared_from_this();
  auto moved = std::make_shared<OutgoingMessage>(std::move(m));
  asio::post(strand_, [self, moved, reserved] { self->Enqueue(std::move(*moved), reserved, false); });
}

void ServiceConnection::SendAndClose(OutgoingMessage m) {
  auto self = shared_from_this();
  auto moved = std::make_shared<OutgoingMessage>(std::move(m));
  asio::post(strand_, [self, moved] { self->Enqueue(std::move(*moved), 0, true); });
}

void ServiceConnection::Close(std::string why) {
  auto self = shared_from_this();
  asio::post(strand_, [self, why = std::move(why)] { self->CloseNow(why); });
}

void ServiceConnection::Enqueue(OutgoingMessage m, uint64_t reserved, bool close_after) {
  if (closed_) return;
  if (close_after) stopped_reading_ = true;
  if (queue_.empty()) last_progress_ = Clock::now();
  queue_.push_back({std::move(m), reserved, close_after});
  if (!writing_) Flush();
}

void ServiceConnection::Flush() {
  while (!queue_.empty() && !closed_) {
    Queued& q = queue_.front();
    const size_t before = q.message.sent_bytes();
    auto done = q.message.SendSome(socket_.native_handle());
    if (!done.ok()) {
      if (done.status().code() == StatusCode::kInvalidArgument) {
        // Refused before a byte went out: the answer fails, and the client
        // is told so rather than left waiting for it.
        if (limits_.failed_sends != nullptr) limits_.failed_sends->fetch_add(1, std::memory_order_relaxed);
        log::Warn("engram-served: an answer to {} could not be sent: {}", label_, done.status().ToString());
        const uint64_t id = q.message.request_id();
        const uint64_t reserved = q.reserved;
        queue_.pop_front();
        queue_.push_front({OutgoingMessage(MessageType::kError, id, EncodeStatus(done.status())), 0, false});
        Released(reserved);
        continue;
      }
      // The client is gone (EPIPE, ECONNRESET): nothing to tell it.
      CloseNow("");
      return;
    }
    if (q.message.sent_bytes() != before) {
      last_progress_ = Clock::now();
      if (stalled_) {
        stalled_ = false;
        if (handler_) handler_->OnStalled(*this, false);
      }
    }
    if (!*done) {
      writing_ = true;
      ArmSendTimer();
      ArmStallTimer();
      auto self = shared_from_this();
      socket_.async_wait(Socket::wait_write, asio::bind_executor(strand_, [self](boost::system::error_code ec) {
                           self->writing_ = false;
                           if (ec || self->closed_) return;
                           self->Flush();
                         }));
      return;
    }
    const bool close_after = q.close_after;
    const uint64_t reserved = q.reserved;
    queue_.pop_front();
    if (close_after) {
      CloseNow("");
      return;
    }
    Released(reserved);
  }
}

void ServiceConnection::ArmSendTimer() {
  if (send_timer_armed_) return;
  send_timer_armed_ = true;
  send_timer_.expires_at(last_progress_ + limits_.send_timeout);
  auto self = shared_from_this();
  send_timer_.async_wait(asio::bind_executor(strand_, [self](boost::system::error_code ec) {
    self->send_timer_armed_ = false;
    if (ec || self->closed_ || !self->writing_) return;
    if (Clock::now() - self->last_progress_ >= self->limits_.send_timeout) {
      self->CloseNow("read none of its answers for " + std::to_string(self->limits_.send_timeout.count()) + " ms");
      return;
    }
    self->ArmSendTimer();
  }));
}

void ServiceConnection::ArmStallTimer() {
  if (stall_timer_armed_ || stalled_) return;
  stall_timer_armed_ = true;
  stall_timer_.expires_at(last_progress_ + kStallTime);
  auto self = shared_from_this();
  stall_timer_.async_wait(asio::bind_executor(strand_, [self](boost::system::error_code ec) {
    self->stall_timer_armed_ = false;
    if (ec || self->closed_ || !self->writing_) return;
    if (Clock::now() - self->last_progress_ >= kStallTime) {
      self->stalled_ = true;
      if (self->handler_) self->handler_->OnStalled(*self, true);
      return;
    }
    self->ArmStallTimer();
  }));
}

void ServiceConnection::CloseNow(const std::string& why) {
  if (closed_) return;
  closed_ = true;
  if (!why.empty()) log::Warn("engram-served: {} {}; disconnecting it", label_, why);
  boost::system::error_code ignored;
  hello_timer_.cancel();
  send_timer_.cancel();
  stall_timer_.cancel();
  // Bytes the client sent that were never read would make its next read
  // fail with a reset instead of the end of the stream (which is what tells
  // it, after any last answer, that the service hung up): drop them first.
  char discard[4096];
  for (int i = 0; i < 256 && ::recv(socket_.native_handle(), discard, sizeof(discard), MSG_DONTWAIT) > 0; ++i) {
  }
  socket_.shutdown(Socket::shutdown_both, ignored);
  socket_.close(ignored);
  queue_.clear();
  std::shared_ptr<Handler> handler = std::move(handler_);
  handler->OnClosed(*this);
}

}  // namespace engram::node
