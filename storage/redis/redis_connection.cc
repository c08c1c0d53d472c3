#include "storage/redis/redis_connection.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace engram::redis {
namespace {

uint64_t NowMs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

const redisReply* LandedReply() {
  static const redisReply landed = [] {
    redisReply r{};
    r.type = REDIS_REPLY_STRING;
    return r;
  }();
  return &landed;
}

// hiredis's reply objects, built as its own (static) functions build them,
// except that a top-level string the connection has a landing for is copied
// there instead of into a new allocation.
struct ReplyBuilder {
  static redisReply* Make(const redisReadTask* task, int type) {
    auto* r = static_cast<redisReply*>(std::calloc(1, sizeof(redisReply)));
    if (r == nullptr) return nullptr;
    r->type = type;
    if (task->parent != nullptr) {
      auto* parent = static_cast<redisReply*>(task->parent->obj);
      parent->element[task->idx] = r;
    }
    return r;
  }
  static void* String(const redisReadTask* task, char* str, size_t len) {
    auto* c = static_cast<RedisConnection*>(task->privdata);
    if (task->parent == nullptr && task->type == REDIS_REPLY_STRING && c != nullptr && !c->landing_.empty() &&
        c->landing_.size() == len) {
      std::memcpy(c->landing_.data(), str, len);
      c->landing_ = {};
      return const_cast<redisReply*>(LandedReply());
    }
    char* buf = static_cast<char*>(std::malloc(len + 1));
    if (buf == nullptr) return nullptr;
    redisReply* r = Make(task, task->type);
    if (r == nullptr) {
      std::free(buf);
      return nullptr;
    }
    std::memcpy(buf, str, len);
    buf[len] = '\0';
    r->str = buf;
    r->len = len;
    return r;
  }
  static void* Array(const redisReadTask* task, int elements) {
    redisReply* r = Make(task, REDIS_REPLY_ARRAY);
    if (r == nullptr) return nullptr;
    if (elements > 0) {
      r->element = static_cast<redisReply**>(std::calloc(size_t(elements), sizeof(redisReply*)));
      if (r->element == nullptr) {
        freeReplyObject(r);
        return nullptr;
      }
    }
    r->elements = size_t(elements);
    return r;
  }
  static void* Integer(const redisReadTask* task, long long value) {
    redisReply* r = Make(task, REDIS_REPLY_INTEGER);
    if (r != nullptr) r->integer = value;
    return r;
  }
  static void* Nil(const redisReadTask* task) { return Make(task, REDIS_REPLY_NIL); }
  static void Free(void* reply) {
    if (reply != LandedReply()) freeReplyObject(reply);
  }
};

namespace {
redisReplyObjectFunctions kReplyFunctions = {ReplyBuilder::String, ReplyBuilder::Array, ReplyBuilder::Integer,
                                             ReplyBuilder::Nil, ReplyBuilder::Free};
}  // namespace

Result<std::unique_ptr<RedisConnection>> RedisConnection::Start(const NodeAddress& node) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(node.port);
  const int rc = ::getaddrinfo(node.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    return Status::Unavailable("redis node " + node.ToString() + ": cannot resolve the host: " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> hold(found, ::freeaddrinfo);
  int last_error = 0;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = errno;
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      return std::unique_ptr<RedisConnection>(new RedisConnection(node, fd, /*connecting=*/false));
    }
    if (errno == EINPROGRESS) return std::unique_ptr<RedisConnection>(new RedisConnection(node, fd, true));
    last_error = errno;
    ::close(fd);
  }
  return Status::Unavailable("redis node " + node.ToString() + ": connect: " + std::strerror(last_error));
}

RedisConnection::RedisConnection(NodeAddress node, int fd, bool connecting)
    : node_(std::move(node)),
      fd_(fd),
      connecting_(connecting),
      reader_(redisReaderCreateWithFunctions(&kReplyFunctions)),
      in_(256 * 1024) {
  if (reader_ != nullptr) {
    // Keep the reader's buffer between replies: the block replies are 4 KiB
    // each, and a buffer freed whenever it empties is allocated again at once.
    reader_->maxbuf = 0;
    reader_->privdata = this;
  }
}

RedisConnection::~RedisConnection() {
  if (fd_ >= 0) ::close(fd_);
  if (reader_ != nullptr) redisReaderFree(reader_);
}

Status RedisConnection::Broken(const std::string& what, int err) const {
  return Status::Unavailable("redis node " + node_.ToString() + ": " + what + (err ? std::string(": ") + std::strerror(err) : ""));
}

Status RedisConnection::FinishConnect() {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) return Broken("connect", err);
  connecting_ = false;
  return Status::OK();
}

size_t RedisConnection::Append(CommandWords words) {
  // The cluster client's commands have at most 4 words: no allocation for them.
  const char* small_argv[8];
  size_t small_lens[8];
  std::vector<const char*> big_argv;
  std::vector<size_t> big_lens;
  const char** argv = small_argv;
  size_t* lens = small_lens;
  if (words.size() > 8) {
    big_argv.resize(words.size());
    big_lens.resize(words.size());
    argv = big_argv.data();
    lens = big_lens.data();
  }
  const size_t n = words.size();
  for (size_t i = 0; i < n; ++i) {
    argv[i] = words[i].data();
    lens[i] = words[i].size();
  }
  char* cmd = nullptr;
  const int len = redisFormatCommandArgv(&cmd, static_cast<int>(n), argv, lens);
  if (len < 0 || cmd == nullptr) return 0;
  if (sent_ == out_.size()) {
    out_.clear();
    sent_ = 0;
  }
  out_.append(cmd, static_cast<size_t>(len));
  redisFreeCommand(cmd);
  return static_cast<size_t>(len);
}

Status RedisConnection::Write() {
  while (sent_ < out_.size()) {
    const ssize_t n = ::send(fd_, out_.data() + sent_, out_.size() - sent_, MSG_NOSIGNAL);
    if (n > 0) {
      sent_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return Broken("send", n < 0 ? errno : 0);
  }
  if (sent_ == out_.size()) {
    out_.clear();
    sent_ = 0;
  } else if (sent_ > (size_t{1} << 20)) {
    out_.erase(0, sent_);
    sent_ = 0;
  }
  return Status::OK();
}

Status RedisConnection::Read() {
  if (in_pos_ == in_end_) in_pos_ = in_end_ = 0;
  while (in_end_ < in_.size()) {
    const ssize_t n = ::recv(fd_, in_.data() + in_end_, in_.size() - in_end_, 0);
    if (n > 0) {
      received_ += static_cast<uint64_t>(n);
      in_end_ += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Broken("the node closed the connection", 0);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::OK();
    return Broken("recv", errno);
  }
  // The buffer is full: the rest is read once these replies are taken (the
  // socket stays readable).
  return Status::OK();
}

Result<Reply> RedisConnection::NextReply() {
  // A block reply is a little over 4 KiB: feeding 8 KiB at a time keeps what
  // the reader moves after each reply under that.
  constexpr size_t kFeed = 8 * 1024;
  for (;;) {
    void* r = nullptr;
    if (redisReaderGetReply(reader_, &r) != REDIS_OK) {
      return Status::IOError("redis node " + node_.ToString() + ": protocol error: " + reader_->errstr);
    }
    if (r != nullptr || in_pos_ == in_end_) return Reply(static_cast<redisReply*>(r));
    const size_t n = std::min(kFeed, in_end_ - in_pos_);
    if (redisReaderFeed(reader_, in_.data() + in_pos_, n) != REDIS_OK) {
      return Status::IOError("redis node " + node_.ToString() + ": reply buffer: " + reader_->errstr);
    }
    in_pos_ += n;
  }
}

Status ErrorReplyStatus(const NodeAddress& node, std::string_view error) {
  const std::string quoted = "redis node " + node.ToString() + " answered '" + std::string(error) + "'";
  if (StartsWith(error, "NOAUTH") || StartsWith(error, "WRONGPASS") || StartsWith(error, "NOPERM") ||
      StartsWith(error, "ERR AUTH") || StartsWith(error, "ERR invalid password") ||
      StartsWith(error, "ERR Client sent AUTH")) {
    return Status::InvalidArgument(quoted + ": check the credentials (redis://USER:PASSWORD@..., or " +
                                   kPasswordEnv + ")");
  }
  if (StartsWith(error, "CLUSTERDOWN") || StartsWith(error, "LOADING") || StartsWith(error, "TRYAGAIN") ||
      StartsWith(error, "MASTERDOWN")) {
    return Status::Unavailable(quoted);
  }
  return Status::IOError(quoted);
}

std::vector<std::string_view> AuthWords(const std::string& user, const std::string& password) {
  if (user.empty()) return {"AUTH", password};
  return {"AUTH", user, password};
}

Result<std::vector<Reply>> RunCommands(const NodeAddress& node, const std::string& user, const std::string& password,
                                       std::span<const std::vector<std::string_view>> commands, uint32_t timeout_ms) {
  const uint64_t deadline = NowMs() + timeout_ms;
  ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> c, RedisConnection::Start(node));
  const bool auth = !password.empty();
  if (auth) {
    const std::vector<std::string_view> words = AuthWords(user, password);
    c->Append(words);
  }
  for (const auto& words : commands) c->Append(words);
  std::vector<Reply> replies;
  const size_t expected = commands.size() + (auth ? 1 : 0);
  bool got_auth = !auth;
  while (replies.size() + (auth && got_auth ? 1 : 0) < expected) {
    const uint64_t now = NowMs();
    if (now >= deadline) {
      return Status::Unavailable("redis node " + node.ToString() + ": no answer within " + std::to_string(timeout_ms) +
                                 " ms");
    }
    pollfd p{c->fd(), static_cast<short>(POLLIN | (c->connecting() || c->wants_write() ? POLLOUT : 0)), 0};
    const int n = ::poll(&p, 1, static_cast<int>(deadline - now));
    if (n < 0 && errno != EINTR) return Status::IOError(std::string("poll: ") + std::strerror(errno));
    if (n <= 0) continue;
    if (c->connecting()) {
      if (!(p.revents & (POLLOUT | POLLERR | POLLHUP))) continue;
      ENGRAM_RETURN_IF_ERROR(c->FinishConnect());
    }
    if (c->wants_write()) ENGRAM_RETURN_IF_ERROR(c->Write());
    if (p.revents & (POLLIN | POLLERR | POLLHUP)) {
      Status read = c->Read();
      for (;;) {
        ENGRAM_ASSIGN_OR_RETURN(Reply r, c->NextReply());
        if (r == nullptr) break;
        if (!got_auth) {
          got_auth = true;
          if (r->type == REDIS_REPLY_ERROR) return ErrorReplyStatus(node, std::string_view(r->str, r->len));
          continue;
        }
        replies.push_back(std::move(r));
      }
      if (!read.ok() && replies.size() + (auth ? 1 : 0) < expected) return read;
    }
  }
  return replies;
}

}  // namespace engram::redis
