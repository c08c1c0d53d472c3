// RedisConnection: one TCP connection to one Redis node, driven by a caller's
// poll loop (ClusterClient's I/O thread) or run to completion (RunCommands).
//
// hiredis does the protocol: it formats commands (redisFormatCommandArgv)
// and parses replies (its redisReader). The socket is this class's own and
// always non-blocking, so one thread can keep several nodes' connections
// busy at once and bound every wait by a deadline; hiredis's blocking
// context would wait on one node at a time.
//
// Not thread-safe: one thread drives a connection.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <hiredis/hiredis.h>

#include "engram/status.h"
#include "storage/redis/redis_url.h"

namespace engram::redis {

// The reply of a command whose value landed in the buffer it gave
// (RedisConnection::SetLanding): a string reply with no bytes of its own.
const redisReply* LandedReply();

struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r != LandedReply()) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// A command as its words: the command name, then its arguments (binary-safe).
using CommandWords = std::span<const std::string_view>;

class RedisConnection {
 public:
  // Starts a non-blocking connect to `node` (name resolution, which may
  // block, first). Unavailable names the node and the reason.
  static Result<std::unique_ptr<RedisConnection>> Start(const NodeAddress& node);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  int fd() const { return fd_; }
  const NodeAddress& node() const { return node_; }
  // The connect has not completed yet: wait for the socket to be writable,
  // then call FinishConnect.
  bool connecting() const { return connecting_; }
  Status FinishConnect();

  // Formats `words` onto the output buffer (sent by Write). Returns the
  // formatted command's size.
  size_t Append(CommandWords words);
  bool wants_write() const { return sent_ < out_.size(); }
  size_t unsent_bytes() const { return out_.size() - sent_; }
  // Sends what the socket takes now. Unavailable if the connection broke.
  Status Write();
  // Reads what has arrived (up to a buffer's worth; take the replies with
  // NextReply until it has none, then Read again). Unavailable on end of
  // stream or a broken connection; the replies already read stay available.
  Status Read();
  // The next complete reply, or nullptr if none is complete yet. IOError on
  // a protocol error (the connection is then unusable).
  Result<Reply> NextReply();
  // Where the next reply's value goes if it is a string of exactly
  // landing.size() bytes: copied there straight from the reader's buffer,
  // and the reply is LandedReply() (no allocation, no second copy: a block
  // GET's 4 KiB). Anything else is an ordinary reply. Set before each
  // NextReply (empty: none).
  void SetLanding(std::span<std::byte> landing) { landing_ = landing; }
  // Bytes received since the last call (for statistics).
  uint64_t TakeReceivedBytes() {
    const uint64_t n = received_;
    received_ = 0;
    return n;
  }

 private:
  friend struct ReplyBuilder;
  RedisConnection(NodeAddress node, int fd, bool connecting);
  Status Broken(const std::string& what, int err) const;

  NodeAddress node_;
  int fd_ = -1;
  bool connecting_ = false;
  redisReader* reader_ = nullptr;
  std::span<std::byte> landing_;
  // Bytes received; [in_pos_, in_end_) not yet fed to the reader. They are
  // fed a little at a time (NextReply): hiredis's reader moves what follows
  // a reply to the front of its buffer whenever it has consumed 1 KiB, so
  // many 4 KiB replies fed at once would be moved once per reply.
  std::vector<char> in_;
  size_t in_pos_ = 0;
  size_t in_end_ = 0;
  std::string out_;   // formatted commands not yet (fully) sent
  size_t sent_ = 0;   // bytes of out_ already sent
  uint64_t received_ = 0;
};

// The replies to `commands`, sent pipelined to `node` on a new connection
// (after AUTH when `password` is set), or the first failure: the connect,
// the credentials (InvalidArgument), or `timeout_ms` passing (Unavailable).
// Error replies to the commands themselves are returned as replies. For
// cluster discovery and for tools; the cluster client's reads go through its
// own loop.
Result<std::vector<Reply>> RunCommands(const NodeAddress& node, const std::string& user, const std::string& password,
                                       std::span<const std::vector<std::string_view>> commands, uint32_t timeout_ms);

// The Status an error reply from `node` stands for: credentials missing or
// refused (NOAUTH, WRONGPASS) are InvalidArgument, a cluster or node that
// cannot serve now (CLUSTERDOWN, LOADING, TRYAGAIN, MASTERDOWN) Unavailable,
// anything else IOError; the message names the node and quotes the error.
Status ErrorReplyStatus(const NodeAddress& node, std::string_view error);

// The AUTH command for the credentials (AUTH PASSWORD, or AUTH USER PASSWORD).
std::vector<std::string_view> AuthWords(const std::string& user, const std::string& password);

}  // namespace engram::redis
