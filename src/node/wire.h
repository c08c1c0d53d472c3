// The node protocol's framing and encoding: messages between engram-served
// and its clients over a Unix stream socket.
//
// A message is a 24-byte header (magic, type, request ID, payload length)
// then its payload. Payloads are built with WireWriter and read with
// WireReader, which checks every read against the payload's end: a message
// from a client is untrusted, and a short or malformed one is an error, never
// a read past the buffer. Both ends are the same build on the same host, so
// integers are in host byte order. A file descriptor (the cache's shared
// memory) travels beside a message as SCM_RIGHTS ancillary data.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engram/status.h"

namespace engram::node {

inline constexpr uint32_t kWireMagic = 0x4d524745;  // "EGRM"
// Bumped whenever a message's layout changes: a client and a service of
// different builds refuse each other at the hello.
inline constexpr uint32_t kProtocolVersion = 2;
// No message may be longer: a larger length in a header is garbage (and
// could not be a request a client of this build sends: it splits gathers).
inline constexpr uint32_t kMaxPayloadBytes = 64u << 20;
// What the service accepts from a client: a hello (its tables' names and
// paths), and after it requests of at most kMaxRowsPerMessage row IDs
// (512 KiB). Anything longer is garbage.
inline constexpr uint32_t kMaxHelloBytes = 1u << 20;
inline constexpr uint32_t kMaxRequestBytes = 1u << 20;

enum class MessageType : uint16_t {
  kHello = 1,          // client -> service: who it is, the tables it expects
  kWelcome,            // service -> client: the tables and caches (+ the cache memory's fd)
  kError,              // service -> client: why it refuses; the connection then closes
  kGather,             // client -> service: rows the client missed
  kGatherDone,         // service -> client: their result (after every kGatherPart)
  kReadAhead,          // client -> service: rows to read ahead and pin (no answer)
  kRelease,            // client -> service: ReleaseReadAhead; answered with kDone
  kWaitReadAheads,     // answered with kDone
  kWaitWarmUp,         // answered with kDone
  kWaitCacheMemory,    // answered with kDone
  kDone,               // service -> client: the request named by its ID is done
  kHits,               // client -> service: hits it served, and its counters (no answer)
  kStats,              // client -> service: one table's stats; answered with kStatsReply
  kStatsReply,
  kMetrics,            // answered with kMetricsReply (the service's exposition)
  kMetricsReply,
  kShutdown,           // service -> client: the service is stopping
  kGatherPart,         // service -> client: some of a gather's rows, as soon as they are read
};

struct FrameHeader {
  uint32_t magic;
  uint16_t type;
  uint16_t reserved;
  uint64_t request_id;
  uint32_t payload_bytes;
  uint32_t reserved2;
};
static_assert(sizeof(FrameHeader) == 24);

class WireWriter {
 public:
  void U8(uint8_t v) { buf_.push_back(v); }
  void U32(uint32_t v) { Raw(&v, sizeof(v)); }
  void U64(uint64_t v) { Raw(&v, sizeof(v)); }
  void I32(int32_t v) { Raw(&v, sizeof(v)); }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    Raw(s.data(), s.size());
  }
  void U64s(std::span<const uint64_t> v) {
    U32(static_cast<uint32_t>(v.size()));
    Raw(v.data(), v.size_bytes());
  }
  void Raw(const void* p, size_t n) {
    if (n == 0) return;
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  std::vector<uint8_t>& bytes() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

// Reads a payload front to back. A read past its end sets failed() and
// returns zeros; callers check failed() (or Done()) once at the end.
class WireReader {
 public:
  explicit WireReader(std::span<const uint8_t> payload) : p_(payload) {}

  uint8_t U8() { return Fixed<uint8_t>(); }
  uint32_t U32() { return Fixed<uint32_t>(); }
  uint64_t U64() { return Fixed<uint64_t>(); }
  int32_t I32() { return Fixed<int32_t>(); }
  // A string of at most max_bytes.
  std::string Str(size_t max_bytes = 1u << 20) {
    const uint32_t n = U32();
    if (failed_ || n > max_bytes || n > p_.size() - pos_) return Fail<std::string>();
    std::string s(reinterpret_cast<const char*>(p_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  // A counted array of at most max_count uint64s.
  std::vector<uint64_t> U64s(size_t max_count) {
    const uint32_t n = U32();
    if (failed_ || n > max_count || uint64_t{n} * 8 > p_.size() - pos_) return Fail<std::vector<uint64_t>>();
    std::vector<uint64_t> v(n);
    if (n != 0) std::memcpy(v.data(), p_.data() + pos_, size_t{n} * 8);
    pos_ += size_t{n} * 8;
    return v;
  }
  // n raw bytes, in place.
  const uint8_t* Raw(size_t n) {
    if (failed_ || n > p_.size() - pos_) return Fail<const uint8_t*>();
    const uint8_t* at = p_.data() + pos_;
    pos_ += n;
    return at;
  }
  bool failed() const { return failed_; }
  // Everything read, nothing left over.
  bool Done() const { return !failed_ && pos_ == p_.size(); }

 private:
  template <typename T>
  T Fixed() {
    if (failed_ || sizeof(T) > p_.size() - pos_) return Fail<T>();
    T v;
    std::memcpy(&v, p_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <typename T>
  T Fail() {
    failed_ = true;
    pos_ = p_.size();
    return T{};
  }

  std::span<const uint8_t> p_;
  size_t pos_ = 0;
  bool failed_ = false;
};

// An allocator that leaves a vector's new elements uninitialized: a received
// payload is written by recv, a gather's answer by the gather, so zeroing
// either first would only cost time.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using UninitializedBytes = std::vector<uint8_t, UninitializedAllocator<uint8_t>>;

struct Message {
  MessageType type{};
  uint64_t request_id = 0;
  UninitializedBytes payload;
  int fd = -1;  // a descriptor that came with it (the receiver owns it), or -1
};

// Sends one message whose payload is `payload` then `tail` (and `fd`, if
// >= 0, beside it). Never raises SIGPIPE: a peer that is gone is an error
// status. On a non-blocking socket it waits (poll) for room until
// `deadline_ms` (CLOCK_MONOTONIC, io::MonotonicNanos() / 1e6), then fails
// with DeadlineExceeded; 0: no deadline.
Status SendMessage(int socket, MessageType type, uint64_t request_id, std::span<const uint8_t> payload,
                   std::span<const uint8_t> tail = {}, int fd = -1, uint64_t deadline_ms = 0);

// Reads messages from a socket as their bytes arrive, one at a time. The
// payload buffer grows with the bytes that have arrived (FIONREAD), never
// with what a header claims, so a header that claims a large payload costs
// nothing until the payload comes. At most one descriptor per message is
// kept (and only when `keep_descriptor`); every other one a peer sends is
// closed at once, so no message can leave descriptors behind.
class MessageReader {
 public:
  enum class Progress {
    kMessage,     // a whole message is ready: Take() it
    kWouldBlock,  // the socket has nothing more now (non-blocking sockets)
    kClosed,      // the peer closed the stream between messages
  };

  // How the payload buffer grows: as its bytes arrive (from an untrusted
  // peer: the service reading a client), or to the whole payload the header
  // announces at once (from the service: a client reading an answer of up to
  // 64 MiB, which would otherwise be copied as it grew).
  enum class Growth { kAsBytesArrive, kWholePayloadAtOnce };

  MessageReader(uint32_t max_payload, bool keep_descriptor, Growth growth = Growth::kAsBytesArrive)
      : max_payload_(max_payload), keep_descriptor_(keep_descriptor), growth_(growth) {}
  ~MessageReader();
  MessageReader(const MessageReader&) = delete;
  MessageReader& operator=(const MessageReader&) = delete;

  // Reads until a message is whole, the socket has no more bytes, or the
  // stream ends. Malformed input (bad magic, a payload over the limit, a
  // stream cut inside a message) is InvalidArgument or IOError.
  Result<Progress> ReadFrom(int socket);
  // The message ReadFrom completed; the reader starts on the next one.
  Message Take();
  // A later message may be longer (the limit before a hello is lower).
  void set_max_payload(uint32_t bytes) { max_payload_ = bytes; }
  // Bytes buffered for the message being read.
  size_t buffered_bytes() const { return header_got_ + payload_got_; }

 private:
  void TakeDescriptors(::msghdr& msg);

  uint32_t max_payload_;
  const bool keep_descriptor_;
  const Growth growth_;
  FrameHeader header_{};
  size_t header_got_ = 0;
  UninitializedBytes payload_;
  size_t payload_got_ = 0;
  bool complete_ = false;
  int fd_ = -1;
};

// Receives one message from a blocking socket (a MessageReader of one
// message, at most kMaxPayloadBytes). A clean end of the stream before a
// header is Cancelled ("closed"); anything malformed (bad magic, an
// oversized length, a stream cut inside a message) is InvalidArgument or
// IOError.
Result<Message> ReceiveMessage(int socket);

// A message queued for a non-blocking socket, sent as the socket takes it.
// The tail's bytes belong to `tail_owner` (a gather's answer rows, sent
// without a copy); the descriptor, if any, is closed once sent or dropped.
class OutgoingMessage {
 public:
  OutgoingMessage(MessageType type, uint64_t request_id, std::vector<uint8_t> payload,
                  std::shared_ptr<const void> tail_owner = nullptr, std::span<const uint8_t> tail = {}, int fd = -1);
  ~OutgoingMessage();
  OutgoingMessage(OutgoingMessage&& other) noexcept;
  OutgoingMessage& operator=(OutgoingMessage&&) = delete;
  OutgoingMessage(const OutgoingMessage&) = delete;

  // Sends what the socket takes now: true once the whole message is out,
  // false if the socket is full (wait until writable and call again).
  Result<bool> SendSome(int socket);
  size_t total_bytes() const { return sizeof(FrameHeader) + payload_.size() + tail_.size(); }
  uint64_t request_id() const { return header_.request_id; }
  size_t sent_bytes() const { return sent_; }

 private:
  FrameHeader header_;
  std::vector<uint8_t> payload_;
  std::shared_ptr<const void> tail_owner_;
  std::span<const uint8_t> tail_;
  int fd_;
  size_t sent_ = 0;
};

}  // namespace engram::node
