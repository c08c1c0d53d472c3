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

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engram/status.h"

namespace engram::node {

inline constexpr uint32_t kWireMagic = 0x4d524745;  // "EGRM"
// Bumped whenever a message's layout changes: a client and a service of
// different builds refuse each other at the hello.
inline constexpr uint32_t kProtocolVersion = 1;
// No message may be longer: a larger length in a header is garbage (and
// could not be a request a client of this build sends: it splits gathers).
inline constexpr uint32_t kMaxPayloadBytes = 64u << 20;

enum class MessageType : uint16_t {
  kHello = 1,          // client -> service: who it is, the tables it expects
  kWelcome,            // service -> client: the tables and caches (+ the cache memory's fd)
  kError,              // service -> client: why it refuses; the connection then closes
  kGather,             // client -> service: rows the client missed
  kGatherDone,         // service -> client: their result and bytes
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

struct Message {
  MessageType type{};
  uint64_t request_id = 0;
  std::vector<uint8_t> payload;
  int fd = -1;  // a descriptor that came with it (the receiver owns it), or -1
};

// Sends one message whose payload is `payload` then `tail` (and `fd`, if
// >= 0, beside it). Never raises SIGPIPE: a peer that is gone is an error
// status.
Status SendMessage(int socket, MessageType type, uint64_t request_id, std::span<const uint8_t> payload,
                   std::span<const uint8_t> tail = {}, int fd = -1);
// Receives one message. A clean end of the stream before a header is
// Cancelled ("closed"); anything malformed (bad magic, an oversized length,
// a stream cut inside a message) is InvalidArgument or IOError.
Result<Message> ReceiveMessage(int socket);

}  // namespace engram::node
