// ServiceConnection: one client's connection to engram-served, as the
// service's fixed set of threads serve it (Boost.Asio, no thread of its own).
//
// Everything a connection does runs in its strand: reading its requests,
// handing them to the service, and writing its answers. Answers come from
// anywhere (a gather completes on the store's threads) and are queued here,
// then written as the socket takes them; a client that stops reading fills
// only its own queue, and is disconnected once nothing of its queue has gone
// out for the send timeout. Nobody else ever waits on its socket.
//
// What a client can make the service hold is bounded:
//   - before its hello, a message of at most kMaxHelloBytes, and the hello
//     must be whole within the hello deadline (all of it, not each read);
//   - after it, requests of at most kMaxRequestBytes, read as their bytes
//     arrive (a header's claim allocates nothing);
//   - the answers it has asked for and not yet read: the service reserves
//     each request's answer size when it takes the request, and while the
//     reserved bytes are over the connection's limit the connection's
//     requests are not read (the client waits, the service holds no more).
// Descriptors a client sends are closed as they arrive.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "src/node/wire.h"

namespace engram::node {

class ServiceConnection : public std::enable_shared_from_this<ServiceConnection> {
 public:
  using Socket = boost::asio::local::stream_protocol::socket;
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  struct Limits {
    std::chrono::milliseconds hello_timeout{10000};
    std::chrono::milliseconds send_timeout{5000};
    uint64_t max_reserved_answer_bytes = uint64_t{64} << 20;
    // Counts answers that could not be sent for a reason of the service's
    // (a message over the protocol's limit), not the client's going away.
    std::atomic<uint64_t>* failed_sends = nullptr;
  };

  // What the service does with the connection's messages. Both run in the
  // connection's strand.
  class Handler {
   public:
    virtual ~Handler() = default;
    // One whole message; may call Send, Reserve, Greeted or Close.
    virtual void OnMessage(const std::shared_ptr<ServiceConnection>& c, Message m) = 0;
    // The connection has ended (once): the client went, or was sent away.
    virtual void OnClosed(ServiceConnection& c) = 0;
    // The client has read none of its answers for kStallTime (true), or has
    // started reading again (false).
    virtual void OnStalled(ServiceConnection& c, bool stalled) {
      (void)c;
      (void)stalled;
    }
  };

  // How long answers may wait with none of their bytes read before the
  // client counts as stalled (its queued reads are then passed over; it is
  // disconnected only after Limits::send_timeout).
  static constexpr std::chrono::milliseconds kStallTime{20};

  // The connection holds `handler` until it has told it it ended.
  ServiceConnection(boost::asio::io_context& io, Socket socket, uint64_t id, const Limits& limits,
                    std::shared_ptr<Handler> handler);
  ~ServiceConnection();

  uint64_t id() const { return id_; }
  pid_t pid() const { return pid_; }
  Strand& strand() { return strand_; }

  // Arms the hello deadline and starts reading. Once.
  void Start();

  // From any thread: queues `m`, releasing `reserved` answer bytes once it
  // has gone out. After Close, the message is dropped.
  void Send(OutgoingMessage m, uint64_t reserved = 0);
  // From any thread: queues `m`, then ends the connection once it has gone
  // out (or after a short grace, if the client does not read it).
  void SendAndClose(OutgoingMessage m);
  // From any thread: ends the connection; `why` is logged at `warn` when
  // non-empty.
  void Close(std::string why = {});

  // In the strand: the hello was accepted; requests may now be up to
  // kMaxRequestBytes, and the hello deadline is off. `label` names the
  // client in the log from now on.
  void Greeted(const std::string& label);
  // In the strand: holds `bytes` of answer the client asked for; reading
  // pauses while the connection holds more than its limit.
  void Reserve(uint64_t bytes);

  bool closed() const { return closed_; }  // in the strand
  // Lets go of the handler without telling it; only once no thread runs
  // the connection's work (the service's threads have stopped).
  void DropHandler() { handler_.reset(); }

 private:
  void ArmRead();
  void OnReadable();
  void Enqueue(OutgoingMessage m, uint64_t reserved, bool close_after);
  void Flush();
  void ArmSendTimer();
  void ArmStallTimer();
  void CloseNow(const std::string& why);
  void Released(uint64_t bytes);

  const uint64_t id_;
  const Limits limits_;
  std::shared_ptr<Handler> handler_;  // until OnClosed; in the strand
  Strand strand_;
  Socket socket_;
  pid_t pid_ = 0;
  boost::asio::steady_timer hello_timer_;
  boost::asio::steady_timer send_timer_;
  boost::asio::steady_timer stall_timer_;
  MessageReader reader_;

  // All below: in the strand only.
  struct Queued {
    OutgoingMessage message;
    uint64_t reserved;
    bool close_after;
  };
  std::deque<Queued> queue_;
  bool reading_ = false;     // a wait for readability is armed
  bool writing_ = false;     // a wait for writability is armed
  bool send_timer_armed_ = false;
  bool stall_timer_armed_ = false;
  bool stalled_ = false;
  bool greeted_ = false;
  bool closed_ = false;
  bool stopped_reading_ = false;  // an answer that ends the connection is queued
  std::string label_;             // "a client (pid N)", then "client 'NAME' (pid N)"
  uint64_t reserved_ = 0;
  std::chrono::steady_clock::time_point last_progress_{};
};

}  // namespace engram::node
