#include "src/node/node_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>

#include "src/cache/shared_row_cache_reader.h"
#include "src/node/client_name.h"
#include "src/node/messages.h"
#include "src/node/shared_cache_memory.h"
#include "src/node/wire.h"
#include "src/store/gather_arguments.h"
#include "src/store/gather_plan.h"
#include "src/store/row_placement.h"
#include "src/store/gather_ticket_access.h"
#include "storage/io/io_stats.h"
#include "storage/log.h"
#include "storage/mutex.h"
#include "storage/redis/redis_url.h"
#include "storage/thread_annotations.h"

namespace engram::node {
namespace {

// A client's reporting thread sends its hits (and counters) every
// kReportPeriod: a gather never makes a system call for them. A table's
// buffer keeps at most kMaxBufferedHits between reports; hits beyond are not
// reported (the policy then sees fewer of them, as with any sampled
// frequency count; the rows were served all the same).
constexpr auto kReportPeriod = std::chrono::milliseconds(20);
constexpr size_t kMaxBufferedHits = size_t{1} << 20;
// After a failed connection, the next attempt waits at least this long.
constexpr auto kReconnectInterval = std::chrono::milliseconds(100);
// Answer bytes a session has asked for and not yet received: below the
// service's limit per client (64 MiB), so the service always keeps reading
// this client's requests; further requests wait here, and go out as answers
// come in. Each request's deadline starts when it goes out.
constexpr uint64_t kMaxOutstandingAnswerBytes = uint64_t{48} << 20;
// What an answer with no rows may take (a status, a stats reply).
constexpr uint64_t kSmallAnswerBytes = 4096;

uint64_t NowMs() { return io::MonotonicNanos() / 1000000; }

using Reply = std::function<void(Result<Message>)>;
// A kGatherPart of a request's answer, before its end.
using Part = std::function<void(const Message&)>;

// One connection to the service.
class Session {
 public:
  ~Session() {
    closing_.store(true);
    ::shutdown(fd_, SHUT_RDWR);
    if (receiver_.joinable()) receiver_.join();
    ::close(fd_);
  }

  // Connects and says hello, within options.node_open_timeout_ms; fails
  // with the service's refusal.
  static Result<std::unique_ptr<Session>> Connect(const StoreOptions& options);

  bool alive() const { return alive_.load(std::memory_order_acquire); }
  Status why_dead() const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return why_dead_;
  }
  const Welcome& welcome() const { return welcome_; }
  const cache::SharedRowCacheReader& reader(size_t table) const { return readers_[table]; }

  // Sends a request whose answer (at most answer_bytes) goes to `reply` (on
  // the receiving thread), or that fails: Unavailable if the session dies
  // first, DeadlineExceeded if nothing of its answer comes within the call
  // deadline (of its going out, or of the last part of its answer). The
  // parts of a gather's answer go to `part` as they come.
  void Call(MessageType type, std::vector<uint8_t> payload, uint64_t answer_bytes, Reply reply, Part part = nullptr)
      EXCLUDES(mu_);
  // A request, waited for.
  Result<Message> CallAndWait(MessageType type, std::vector<uint8_t> payload) {
    Mutex m;
    CondVar cv;
    std::optional<Result<Message>> answer;
    Call(type, std::move(payload), kSmallAnswerBytes, [&](Result<Message> r) {
      MutexLock lock(&m);
      answer.emplace(std::move(r));
      cv.SignalAll();
    });
    MutexLock lock(&m);
    while (!answer.has_value()) cv.Wait(&m);
    return std::move(*answer);
  }
  // A message with no answer.
  Status Post(MessageType type, std::span<const uint8_t> payload) {
    if (!alive()) return why_dead();
    Status s = Send(type, 0, payload);
    if (s.ok()) return Status::OK();
    SendFailed(s);
    // The service's own reason, if the receiving thread has read it already.
    return alive() ? CouldNotSend(s) : why_dead();
  }

 private:
  struct Pending {
    Reply reply;
    Part part;
    uint64_t answer_bytes;
    uint64_t deadline_ms = 0;  // 0 until it goes out
  };
  struct Unsent {
    MessageType type;
    uint64_t id;
    std::vector<uint8_t> payload;
  };

  Session() = default;

  Status Unavailable(const std::string& what) const {
    return Status::Unavailable("engram-served at " + socket_path_ + ": " + what);
  }
  Status CouldNotSend(const Status& s) const { return Unavailable("sending to it failed: " + s.ToString()); }
  Status Send(MessageType type, uint64_t id, std::span<const uint8_t> payload) {
    MutexLock lock(&send_mu_);
    return SendMessage(fd_, type, id, payload, {}, -1, NowMs() + call_timeout_ms_);
  }
  // Sends requests that were waiting for room, while there is room.
  void SendWaiting() EXCLUDES(mu_);
  void Receive() EXCLUDES(mu_);
  void Dispatch(Message m) EXCLUDES(mu_);
  // Fails the requests whose deadline has passed; returns the milliseconds
  // to wait for the next deadline. With none pending, the call timeout: a
  // request sent while the receiving thread waits has a deadline no sooner
  // than that, so it is never expired late.
  int ExpireDeadlines() EXCLUDES(mu_);
  // A send fails when the service has ended the connection, and its last
  // words (why it did) may be waiting unread: the receiving thread ends the
  // session once it has read them, or the end of the stream.
  void SendFailed(const Status& s) EXCLUDES(mu_);
  // Ends the session: every pending request fails with `why`.
  void Die(Status why) EXCLUDES(mu_);

  std::string socket_path_;
  int fd_ = -1;
  uint32_t call_timeout_ms_ = 30000;
  SharedMapping memory_;
  Welcome welcome_;
  std::vector<cache::SharedRowCacheReader> readers_;
  std::thread receiver_;
  Mutex send_mu_;  // one message at a time on the socket
  std::atomic<uint64_t> next_id_{1};
  std::atomic<bool> alive_{true};
  std::atomic<bool> closing_{false};  // the store is closing it: its end is no news
  mutable Mutex mu_;
  Status why_dead_ GUARDED_BY(mu_);
  Status send_failure_ GUARDED_BY(mu_);  // the first, if a send failed
  std::unordered_map<uint64_t, Pending> pending_ GUARDED_BY(mu_);
  uint64_t outstanding_ GUARDED_BY(mu_) = 0;  // answer bytes of the requests sent
  std::deque<Unsent> waiting_ GUARDED_BY(mu_);  // requests not yet sent, for room
  // Deadlines of the requests sent: deadline in ms -> ID. A part of an
  // answer moves its request's deadline (the entry of the old one is then
  // stale: its deadline is not the request's).
  std::multimap<uint64_t, uint64_t> deadlines_ GUARDED_BY(mu_);
};

// Connects to the socket, retrying while its backlog is full, until the
// deadline.
Result<int> ConnectUntil(const std::string& path, uint64_t deadline_ms) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("node: socket path longer than " + std::to_string(sizeof(addr.sun_path) - 1) +
                                   " bytes: " + path);
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::FromErrno("node: socket", errno);
  for (;;) {
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN && NowMs() < deadline_ms) {
      // The service's backlog is full (it is busy, stopped or wedged).
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    ::close(fd);
    if (err == EACCES || err == EPERM) {
      return Status::InvalidArgument("node: may not connect to engram-served at " + path + ": " +
                                     std::strerror(err) +
                                     " (the socket is 0660: run as its owner or a member of its group)");
    }
    if (err == EAGAIN) {
      return Status::DeadlineExceeded("node: engram-served at " + path +
                                      " accepted no connection within the open deadline (is it stopped?)");
    }
    return Status::Unavailable("node: no engram-served answers at " + path + ": " + std::strerror(err));
  }
}

// Receives one message on a non-blocking socket by the deadline.
Result<Message> ReceiveUntil(int fd, uint64_t deadline_ms) {
  MessageReader reader(kMaxPayloadBytes, /*keep_descriptor=*/true, MessageReader::Growth::kWholePayloadAtOnce);
  for (;;) {
    ENGRAM_ASSIGN_OR_RETURN(MessageReader::Progress p, reader.ReadFrom(fd));
    if (p == MessageReader::Progress::kMessage) return reader.Take();
    if (p == MessageReader::Progress::kClosed) return Status::Cancelled("node socket: closed by the peer");
    const uint64_t now = NowMs();
    if (now >= deadline_ms) return Status::DeadlineExceeded("no answer within the deadline");
    pollfd w{fd, POLLIN, 0};
    if (::poll(&w, 1, static_cast<int>(std::min<uint64_t>(deadline_ms - now, 1000))) < 0 && errno != EINTR) {
      return Status::FromErrno("node socket: poll", errno);
    }
  }
}

Result<std::unique_ptr<Session>> Session::Connect(const StoreOptions& options) {
  std::unique_ptr<Session> s(new Session());
  s->socket_path_ = options.node;
  s->call_timeout_ms_ = options.node_call_timeout_ms;
  const uint64_t deadline = NowMs() + options.node_open_timeout_ms;
  ENGRAM_ASSIGN_OR_RETURN(s->fd_, ConnectUntil(options.node, deadline));
  Hello hello;
  hello.client_name = options.node_client_name;
  hello.rank = options.rank;
  for (const TableOptions& t : options.tables) {
    HelloTable h;
    h.name = t.name;
    // The service resolves paths itself, from its own working directory.
    std::error_code ec;
    if (redis::IsRedisUrl(t.path)) {
      // A table in a Redis Cluster: its URL, without credentials.
      auto url = redis::ParseRedisUrl(t.path);
      h.path = url.ok() ? url->Display() : t.path;
    } else if (!t.path.empty()) {
      h.path = std::filesystem::absolute(t.path, ec).string();
    }
    if (!t.manifest.empty()) h.manifest = std::filesystem::absolute(t.manifest, ec).string();
    hello.tables.push_back(std::move(h));
  }
  // A service that refuses this client (too many clients) may have said why
  // and closed before the hello arrived: its answer is read either way.
  const Status sent = SendMessage(s->fd_, MessageType::kHello, 0, Encode(hello), {}, -1, deadline);
  auto answer = ReceiveUntil(s->fd_, deadline);
  if (!answer.ok()) {
    const Status& why = sent.ok() ? answer.status() : sent;
    if (why.code() == StatusCode::kDeadlineExceeded) {
      return Status::DeadlineExceeded("node: engram-served at " + options.node + " did not welcome this client within " +
                                      std::to_string(options.node_open_timeout_ms) + " ms (is it stopped or wedged?)");
    }
    return Status::Unavailable("node: engram-served at " + options.node + " did not answer the hello: " +
                               why.ToString());
  }
  Message& m = *answer;
  if (m.type == MessageType::kError) {
    if (m.fd >= 0) ::close(m.fd);
    return DecodeStatus(m.payload).WithContext("node: engram-served at " + options.node + " refused this client");
  }
  if (m.type != MessageType::kWelcome || m.fd < 0) {
    if (m.fd >= 0) ::close(m.fd);
    return Status::Internal("node: engram-served at " + options.node + " answered the hello with no welcome");
  }
  const int memory_fd = m.fd;
  auto welcome = DecodeWelcome(m.payload);
  auto mapping = welcome.ok() ? SharedMapping::Map(memory_fd, welcome->memory_bytes, /*writable=*/false)
                              : Result<SharedMapping>(welcome.status());
  ::close(memory_fd);
  if (!mapping.ok()) return mapping.status().WithContext("node: the cache memory of " + options.node);
  s->welcome_ = std::move(welcome).value();
  s->memory_ = std::move(mapping).value();
  if (s->welcome_.tables.size() != options.tables.size()) {
    return Status::Internal("node: the welcome lists another number of tables than the hello");
  }
  // Rows are copied with the cache's row size into buffers of the table's
  // record size, from the offsets it gives: all checked before anything is.
  ENGRAM_RETURN_IF_ERROR(CheckWelcome(s->welcome_, s->memory_.size()).WithContext("engram-served at " + options.node));
  for (const WelcomeTable& t : s->welcome_.tables) {
    auto reader = cache::SharedRowCacheReader::Attach(t.geometry, s->memory_.data() + t.index_offset,
                                                      s->memory_.data() + t.slab_offset);
    if (!reader.ok()) return reader.status().WithContext("node: table " + t.name);
    s->readers_.push_back(std::move(reader).value());
  }
  Session* raw = s.get();
  s->receiver_ = std::thread([raw] { raw->Receive(); });
  return s;
}

void Session::Call(MessageType type, std::vector<uint8_t> payload, uint64_t answer_bytes, Reply reply, Part part) {
  const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  {
    MutexLock lock(&mu_);
    if (!alive_.load()) {
      Status why = why_dead_;
      lock.Unlock();
      reply(why);
      return;
    }
    Pending& p = pending_.emplace(id, Pending{std::move(reply), std::move(part), answer_bytes}).first->second;
    if (outstanding_ != 0 && outstanding_ + answer_bytes > kMaxOutstandingAnswerBytes) {
      waiting_.push_back({type, id, std::move(payload)});
      return;
    }
    outstanding_ += answer_bytes;
    p.deadline_ms = NowMs() + call_timeout_ms_;
    deadlines_.emplace(p.deadline_ms, id);
  }
  if (Status s = Send(type, id, payload); !s.ok()) SendFailed(s);
}

void Session::SendWaiting() {
  for (;;) {
    Unsent next;
    {
      MutexLock lock(&mu_);
      if (waiting_.empty() || !alive_.load()) return;
      auto it = pending_.find(waiting_.front().id);
      const uint64_t bytes = it == pending_.end() ? 0 : it->second.answer_bytes;
      if (outstanding_ != 0 && outstanding_ + bytes > kMaxOutstandingAnswerBytes) return;
      next = std::move(waiting_.front());
      waiting_.pop_front();
      if (it == pending_.end()) continue;  // failed meanwhile
      outstanding_ += bytes;
      it->second.deadline_ms = NowMs() + call_timeout_ms_;
      deadlines_.emplace(it->second.deadline_ms, next.id);
    }
    if (Status s = Send(next.type, next.id, next.payload); !s.ok()) {
      SendFailed(s);
      return;
    }
  }
}

int Session::ExpireDeadlines() {
  std::vector<Reply> expired;
  int next_ms = static_cast<int>(std::min<uint32_t>(call_timeout_ms_, 1000));
  {
    MutexLock lock(&mu_);
    const uint64_t now = NowMs();
    while (!deadlines_.empty()) {
      const auto [deadline, id] = *deadlines_.begin();
      auto it = pending_.find(id);
      if (it == pending_.end() || it->second.deadline_ms != deadline) {  // answered, or moved on
        deadlines_.erase(deadlines_.begin());
        continue;
      }
      if (deadline > now) {
        next_ms = static_cast<int>(std::min<uint64_t>(deadline - now, 1000));
        break;
      }
      outstanding_ -= std::min(outstanding_, it->second.answer_bytes);
      expired.push_back(std::move(it->second.reply));
      pending_.erase(it);
      deadlines_.erase(deadlines_.begin());
    }
  }
  if (!expired.empty()) {
    const Status why = Status::DeadlineExceeded("engram-served at " + socket_path_ + " did not answer within " +
                                                std::to_string(call_timeout_ms_) + " ms (is it stopped or wedged?)");
    for (Reply& r : expired) r(why);
    SendWaiting();
  }
  return next_ms;
}

void Session::Receive() {
  MessageReader reader(kMaxPayloadBytes, /*keep_descriptor=*/false, MessageReader::Growth::kWholePayloadAtOnce);
  for (;;) {
    const int wait_ms = ExpireDeadlines();
    pollfd p{fd_, POLLIN, 0};
    const int n = ::poll(&p, 1, wait_ms);
    if (n < 0 && errno != EINTR) {
      Die(Unavailable(Status::FromErrno("poll", errno).ToString()));
      return;
    }
    if (n <= 0) continue;
    for (;;) {
      auto progress = reader.ReadFrom(fd_);
      if (progress.ok() && *progress == MessageReader::Progress::kMessage) {
        Dispatch(reader.Take());
        if (!alive()) return;
        continue;
      }
      if (progress.ok() && *progress == MessageReader::Progress::kWouldBlock) break;
      Status send_failure;
      {
        MutexLock lock(&mu_);
        send_failure = send_failure_;
      }
      if (!send_failure.ok()) return Die(CouldNotSend(send_failure));
      Die(Unavailable(progress.ok() ? "the service closed the connection" : progress.status().ToString()));
      return;
    }
  }
}

void Session::Dispatch(Message m) {
  if (m.type == MessageType::kShutdown || (m.type == MessageType::kError && m.request_id == 0)) {
    Die(Unavailable(DecodeStatus(m.payload).ToString()));
    return;
  }
  if (m.type == MessageType::kGatherPart) {
    Part part;
    {
      MutexLock lock(&mu_);
      auto it = pending_.find(m.request_id);
      if (it == pending_.end()) return;  // its deadline passed: the part comes too late
      part = it->second.part;
      // Progress: the request's deadline starts again.
      it->second.deadline_ms = NowMs() + call_timeout_ms_;
      deadlines_.emplace(it->second.deadline_ms, m.request_id);
    }
    // Only this thread dispatches, and a request's end comes after its
    // parts: the request cannot end while its part is copied.
    if (part) part(m);
    return;
  }
  Reply reply;
  {
    MutexLock lock(&mu_);
    auto it = pending_.find(m.request_id);
    if (it != pending_.end()) {
      reply = std::move(it->second.reply);
      outstanding_ -= std::min(outstanding_, it->second.answer_bytes);
      pending_.erase(it);
    }
  }
  if (!reply) return;  // its deadline passed: the answer comes too late
  if (m.type == MessageType::kError) {
    reply(DecodeStatus(m.payload));
  } else {
    reply(std::move(m));
  }
  SendWaiting();
}

void Session::SendFailed(const Status& s) {
  {
    MutexLock lock(&mu_);
    if (send_failure_.ok()) send_failure_ = s;
  }
  // Shutting down our reading side leaves what was received readable and
  // then reads as the end of the stream (waking a blocked read), so the
  // receiving thread always ends. Not SHUT_RDWR: some 5.15 kernels made a
  // socket shut both ways unreadable at once, queued data and all.
  ::shutdown(fd_, SHUT_RD);
}

void Session::Die(Status why) {
  std::unordered_map<uint64_t, Pending> pending;
  {
    MutexLock lock(&mu_);
    if (!alive_.load()) return;
    why_dead_ = why;
    alive_.store(false, std::memory_order_release);
    pending.swap(pending_);
    waiting_.clear();
    deadlines_.clear();
    outstanding_ = 0;
  }
  if (closing_.load()) {
    log::Debug("node: {}", why.ToString());
  } else {
    log::Warn("node: {}", why.ToString());
  }
  ::shutdown(fd_, SHUT_RDWR);
  for (auto& [id, p] : pending) p.reply(why);
}

// A gather's state, what its GatherTicket refers to. Each thread reuses its
// last one once nobody holds it, as a private store's gathers do.
struct RemoteGather final : GatherTicket::State {
  // The gather.
  RowPlacement dst;  // where each position's row goes
  uint32_t record = 0;
  GatherPlan plan;
  std::vector<std::byte*> outs;
  std::vector<uint8_t> hit;
  std::vector<uint64_t> missed;           // distinct rows sent to the service
  std::vector<uint32_t> missed_distinct;  // their distinct indexes
  std::function<void(GatherResult)> done;
  uint64_t t0 = 0, t1 = 0;
  std::atomic<uint32_t> chunks_left{0};
  std::function<void(const GatherResult&)> account;  // counts the result for the client's metrics

  Mutex mu;
  CondVar cv;
  bool complete GUARDED_BY(mu) = false;
  // Written by one thread at a time: the starting thread before any answer
  // can come, then each answer's callback under mu, then the last one.
  GatherResult result;

  static std::shared_ptr<RemoteGather> Acquire() {
    thread_local std::shared_ptr<RemoteGather> spare;
    if (spare && spare.use_count() == 1 && spare->plan.capacity() <= (size_t{1} << 16)) {
      spare->Reset();
      return spare;
    }
    spare = std::make_shared<RemoteGather>();
    return spare;
  }
  void Reset() {
    MutexLock lock(&mu);
    complete = false;
    result = GatherResult{};
    missed.clear();
    missed_distinct.clear();
    done = nullptr;
    account = nullptr;
  }

  // Publishes the result: to the callback, or to Wait().
  void Finish() {
    result.wait_nanoseconds = io::MonotonicNanos() - t0;
    if (account) account(result);
    if (done) {
      auto callback = std::move(done);
      done = nullptr;
      GatherResult r = std::move(result);
      {
        MutexLock lock(&mu);
        complete = true;
      }
      callback(std::move(r));
      return;
    }
    MutexLock lock(&mu);
    complete = true;
    cv.SignalAll();
  }

  GatherResult Wait() override {
    MutexLock lock(&mu);
    while (!complete) cv.Wait(&mu);
    return std::move(result);
  }
};

// Options that are the service's: a client refuses them rather than
// silently ignore them. Each is compared with its default.
Status CheckClientOptions(const StoreOptions& o) {
  const StoreOptions d;
  auto refuse = [](const std::string& option, const std::string& flag) {
    return Status::InvalidArgument("node: " + option + " is the service's to set (engram-served " + flag +
                                   "); a client of a node (StoreOptions::node) does not set it");
  };
  if (o.cache_bytes != d.cache_bytes) return refuse("cache_bytes", "--cache-bytes");
  if (o.commit_cache_memory != d.commit_cache_memory) return refuse("commit_cache_memory", "(always on)");
  if (o.cache_memory_fraction != d.cache_memory_fraction) return refuse("cache_memory_fraction", "--cache-fraction");
  if (o.cache_policy != d.cache_policy) return refuse("cache_policy", "--policy");
  if (o.io_backend != d.io_backend) return refuse("io_backend", "--backend");
  if (o.queue_depth != d.queue_depth) return refuse("queue_depth", "--queue-depth");
  if (o.io_rings != d.io_rings) return refuse("io_rings", "--io-rings");
  if (o.io_threads != d.io_threads) return refuse("io_threads", "--backend");
  if (o.direct_io != d.direct_io) return refuse("direct_io", "--buffered-io");
  if (o.completion_threads != d.completion_threads) return refuse("completion_threads", "--completion-threads");
  if (o.read_buffer_bytes != d.read_buffer_bytes) return refuse("read_buffer_bytes", "(its default)");
  if (o.in_place_scale_share != d.in_place_scale_share) return refuse("in_place_scale_share", "(its default)");
  if (o.verify_shard_fingerprints != d.verify_shard_fingerprints) {
    return refuse("verify_shard_fingerprints", "(its default)");
  }
  if (!o.trace_path.empty()) return refuse("trace_path", "(not supported by the service)");
  if (!o.hot_set_path.empty()) return refuse("hot_set_path", "--hot-set");
  if (o.hot_set_interval_seconds != d.hot_set_interval_seconds) return refuse("hot_set_interval_seconds", "--hot-set-interval");
  if (!o.metrics_listen.empty()) return refuse("metrics_listen", "--metrics-listen");
  for (const TableOptions& t : o.tables) {
    if (t.cache_bytes != 0) return refuse("a table's cache_bytes", "(its share of --cache-bytes)");
  }
  auto in_range = [](uint32_t ms) { return ms >= 1 && ms <= 3600000; };
  if (!in_range(o.node_open_timeout_ms) || !in_range(o.node_call_timeout_ms)) {
    return Status::InvalidArgument("node: node_open_timeout_ms and node_call_timeout_ms must be in 1..3600000 ms");
  }
  return CheckClientName(o.node_client_name);
}

// Sorts a gather's missed rows (and their distinct indexes with them) by
// row ID.
void SortMissedByRow(RemoteGather& g) {
  const size_t n = g.missed.size();
  if (std::is_sorted(g.missed.begin(), g.missed.end())) return;
  std::vector<std::pair<uint64_t, uint32_t>> pairs(n);
  for (size_t i = 0; i < n; ++i) pairs[i] = {g.missed[i], g.missed_distinct[i]};
  std::sort(pairs.begin(), pairs.end());
  for (size_t i = 0; i < n; ++i) {
    g.missed[i] = pairs[i].first;
    g.missed_distinct[i] = pairs[i].second;
  }
}

class NodeClientStore final : public Store {
 public:
  ~NodeClientStore() override {
    {
      MutexLock lock(&reporter_mu_);
      stopping_ = true;
      reporter_cv_.SignalAll();
    }
    if (reporter_.joinable()) reporter_.join();
    // Every gather started is finished first (its answer, its deadline, or
    // the session's end completes it).
    {
      MutexLock lock(&in_flight_mu_);
      while (in_flight_ != 0) in_flight_cv_.Wait(&in_flight_mu_);
    }
    ReportHits();
    std::atomic_store(&session_, std::shared_ptr<Session>());
  }

  static Result<std::unique_ptr<Store>> Open(const StoreOptions& options);

  size_t table_count() const override { return tables_.size(); }
  Result<size_t> FindTable(const std::string& name) const override {
    for (size_t i = 0; i < tables_.size(); ++i) {
      if (tables_[i].name == name) return i;
    }
    return Status::NotFound("no table named '" + name + "'");
  }
  std::string table_name(size_t table) const override {
    return table < tables_.size() ? tables_[table].name : std::string();
  }
  uint32_t record_bytes(size_t table) const override {
    return table < tables_.size() ? tables_[table].record_bytes : 0;
  }
  uint64_t row_count(size_t table) const override { return table < tables_.size() ? tables_[table].row_count : 0; }
  std::string metadata_json(size_t table) const override {
    return table < tables_.size() ? tables_[table].metadata_json : std::string();
  }
  std::string io_description() const override { return "node(" + options_.node + ": " + io_description_ + ")"; }

  using Store::StartGather;
  GatherTicket StartGather(size_t table, std::span<const uint64_t> row_ids, const RowDestination& dst) override {
    std::shared_ptr<RemoteGather> g = RemoteGather::Acquire();
    Begin(g, table, row_ids, dst);
    return GatherTicketAccess::Make(std::move(g));
  }
  void StartGather(size_t table, std::span<const uint64_t> row_ids, const RowDestination& dst,
                   std::function<void(GatherResult)> done) override {
    auto g = std::make_shared<RemoteGather>();
    g->done = done ? std::move(done) : [](GatherResult) {};
    Begin(g, table, row_ids, dst);
  }

  Status ReadAhead(size_t table, std::span<const uint64_t> row_ids) override {
    if (table >= tables_.size()) return Status::InvalidArgument("read-ahead: no table " + std::to_string(table));
    for (uint64_t id : row_ids) {
      if (id >= tables_[table].row_count) {
        return Status::OutOfRange("read-ahead on table " + tables_[table].name + ": row " + std::to_string(id) +
                                  " is past the end of the table (" + std::to_string(tables_[table].row_count) +
                                  " rows)");
      }
    }
    ENGRAM_ASSIGN_OR_RETURN(std::shared_ptr<Session> s, Current());
    for (size_t at = 0; at < row_ids.size(); at += kMaxRowsPerMessage) {
      RowsRequest req{static_cast<uint32_t>(table), {}};
      req.row_ids.assign(row_ids.begin() + at, row_ids.begin() + std::min(row_ids.size(), at + kMaxRowsPerMessage));
      ENGRAM_RETURN_IF_ERROR(s->Post(MessageType::kReadAhead, Encode(req)));
    }
    return Status::OK();
  }
  void WaitForReadAheads() override { WaitFor(MessageType::kWaitReadAheads); }
  void WaitForCacheMemory() override { WaitFor(MessageType::kWaitCacheMemory); }
  void WaitForWarmUp() override { WaitFor(MessageType::kWaitWarmUp); }
  void ReleaseReadAhead(size_t table, std::span<const uint64_t> row_ids) override {
    if (table >= tables_.size()) return;
    auto s = Current();
    if (!s.ok()) return;
    // The rows this client served from the cache go first: a row it served
    // has consumed its pin, and is not released (as in a private store).
    ReportHits();
    for (size_t at = 0; at < row_ids.size(); at += kMaxRowsPerMessage) {
      RowsRequest req{static_cast<uint32_t>(table), {}};
      req.row_ids.assign(row_ids.begin() + at, row_ids.begin() + std::min(row_ids.size(), at + kMaxRowsPerMessage));
      (void)(*s)->CallAndWait(MessageType::kRelease, Encode(req));
    }
  }

  TableStats Stats(size_t table) const override {
    TableStats stats;
    if (table >= tables_.size()) return stats;
    stats.name = tables_[table].name;
    stats.path = tables_[table].path;
    stats.row_count = tables_[table].row_count;
    stats.record_bytes = tables_[table].record_bytes;
    stats.cache_budget_bytes = tables_[table].cache_budget_bytes;
    auto s = const_cast<NodeClientStore*>(this)->Current();
    if (!s.ok()) {
      stats.status = s.status();
      return stats;
    }
    // This client's hits so far go first (the service answers a connection's
    // messages in order), so the stats include them.
    const_cast<NodeClientStore*>(this)->ReportHits();
    auto answer = (*s)->CallAndWait(MessageType::kStats, EncodeU32(static_cast<uint32_t>(table)));
    if (!answer.ok()) {
      stats.status = answer.status();
      return stats;
    }
    auto decoded = DecodeTableStats(answer->payload);
    if (!decoded.ok()) {
      stats.status = decoded.status();
      return stats;
    }
    return std::move(decoded).value();
  }
  std::string MetricsText() const override {
    auto s = const_cast<NodeClientStore*>(this)->Current();
    if (!s.ok()) return "# " + s.status().ToString() + "\n";
    const_cast<NodeClientStore*>(this)->ReportHits();
    auto answer = (*s)->CallAndWait(MessageType::kMetrics, {});
    if (!answer.ok()) return "# " + answer.status().ToString() + "\n";
    return std::string(answer->payload.begin(), answer->payload.end());
  }
  uint16_t metrics_port() const override { return metrics_port_.load(std::memory_order_relaxed); }

 private:
  struct TableInfo {
    std::string name, path, metadata_json;
    uint64_t row_count = 0, cache_budget_bytes = 0;
    uint32_t record_bytes = 0;
  };
  // Hits served, not yet reported to the service.
  struct HitBuffer {
    Mutex mu;
    std::vector<uint64_t> rows GUARDED_BY(mu);
  };

  NodeClientStore() = default;

  // The live session, or a new one if the last died and the last attempt
  // was long enough ago.
  Result<std::shared_ptr<Session>> Current() EXCLUDES(connect_mu_);
  Status Adopt(std::unique_ptr<Session> s);
  void Begin(const std::shared_ptr<RemoteGather>& g, size_t table, std::span<const uint64_t> row_ids,
             const RowDestination& dst);
  void Account(const GatherResult& r) EXCLUDES(counters_mu_);
  void ReportHits() EXCLUDES(counters_mu_);
  void ReporterLoop() EXCLUDES(reporter_mu_);
  void WaitFor(MessageType type) {
    auto s = Current();
    if (!s.ok()) return;
    auto answer = (*s)->CallAndWait(type, {});
    if (!answer.ok() && answer.status().code() == StatusCode::kDeadlineExceeded) {
      log::Warn("node: a wait for the service ended at its deadline: {}", answer.status().ToString());
    }
  }
  void GatherEnded() EXCLUDES(in_flight_mu_) {
    MutexLock lock(&in_flight_mu_);
    if (--in_flight_ == 0) in_flight_cv_.SignalAll();
  }

  StoreOptions options_;
  std::vector<TableInfo> tables_;
  std::string io_description_;
  std::atomic<uint16_t> metrics_port_{0};  // the service's; it may change when it restarts
  std::shared_ptr<Session> session_;       // std::atomic_load / atomic_store
  Mutex connect_mu_;
  std::chrono::steady_clock::time_point last_attempt_ GUARDED_BY(connect_mu_);
  // Dead sessions, destroyed here on a caller's thread once no gather holds
  // them -- never on their own receiving thread, which a session's end joins
  // (a gather callback there may hold the last reference).
  std::vector<std::shared_ptr<Session>> retired_ GUARDED_BY(connect_mu_);
  Status last_why_ GUARDED_BY(connect_mu_);  // why the last session ended
  std::vector<std::unique_ptr<HitBuffer>> hits_;

  Mutex counters_mu_;
  ClientCounters counters_ GUARDED_BY(counters_mu_);

  Mutex in_flight_mu_;
  CondVar in_flight_cv_;
  size_t in_flight_ GUARDED_BY(in_flight_mu_) = 0;

  Mutex reporter_mu_;
  CondVar reporter_cv_;
  bool stopping_ GUARDED_BY(reporter_mu_) = false;
  std::thread reporter_;
};

Result<std::unique_ptr<Store>> NodeClientStore::Open(const StoreOptions& options) {
  if (options.tables.empty()) return Status::InvalidArgument("store: no tables given");
  ENGRAM_RETURN_IF_ERROR(CheckClientOptions(options));
  std::unique_ptr<NodeClientStore> store(new NodeClientStore());
  store->options_ = options;
  ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, Session::Connect(options));
  for (const WelcomeTable& t : s->welcome().tables) {
    store->tables_.push_back({t.name, t.path, t.metadata_json, t.row_count, t.cache_budget_bytes, t.record_bytes});
    store->hits_.push_back(std::make_unique<HitBuffer>());
  }
  store->io_description_ = s->welcome().io_description;
  store->metrics_port_.store(s->welcome().metrics_port);
  std::atomic_store(&store->session_, std::shared_ptr<Session>(std::move(s)));
  NodeClientStore* raw = store.get();
  store->reporter_ = std::thread([raw] { raw->ReporterLoop(); });
  return std::unique_ptr<Store>(std::move(store));
}

Status NodeClientStore::Adopt(std::unique_ptr<Session> s) {
  // A service back with other tables is not the one this client opened.
  const auto& tables = s->welcome().tables;
  for (size_t i = 0; i < tables_.size(); ++i) {
    if (tables[i].name != tables_[i].name || tables[i].row_count != tables_[i].row_count ||
        tables[i].record_bytes != tables_[i].record_bytes) {
      return Status::Unavailable("node: engram-served at " + options_.node +
                                 " came back with other tables than this client opened");
    }
  }
  metrics_port_.store(s->welcome().metrics_port);
  std::atomic_store(&session_, std::shared_ptr<Session>(std::move(s)));
  log::Info("node: reconnected to engram-served at {}", options_.node);
  return Status::OK();
}

Result<std::shared_ptr<Session>> NodeClientStore::Current() {
  std::shared_ptr<Session> s = std::atomic_load(&session_);
  if (s && s->alive()) return s;
  MutexLock lock(&connect_mu_);
  s = std::atomic_load(&session_);
  if (s && s->alive()) return s;
  const auto now = std::chrono::steady_clock::now();
  if (s) {
    // Dead: let it go (its mapping of the service's memory with it) as soon
    // as no gather holds it.
    last_why_ = s->why_dead();
    retired_.push_back(std::move(s));
    std::atomic_store(&session_, std::shared_ptr<Session>());
  }
  Status why = last_why_;
  std::erase_if(retired_, [](const std::shared_ptr<Session>& r) { return r.use_count() == 1; });
  if (now - last_attempt_ < kReconnectInterval) return why;
  last_attempt_ = now;
  auto fresh = Session::Connect(options_);
  if (!fresh.ok()) {
    const StatusCode code = fresh.status().code();
    if (code == StatusCode::kUnavailable) return why;
    if (code == StatusCode::kDeadlineExceeded) last_why_ = fresh.status();
    return fresh.status();
  }
  ENGRAM_RETURN_IF_ERROR(Adopt(std::move(fresh).value()));
  return std::atomic_load(&session_);
}

void NodeClientStore::Begin(const std::shared_ptr<RemoteGather>& g, size_t table, std::span<const uint64_t> row_ids,
                            const RowDestination& dst) {
  g->t0 = io::MonotonicNanos();
  g->account = [this](const GatherResult& r) { Account(r); };
  GatherResult& result = g->result;
  result.rows = row_ids.size();
  GatherTarget target{tables_.size()};
  if (table < tables_.size()) {
    target.record_bytes = tables_[table].record_bytes;
    target.row_count = tables_[table].row_count;
    target.name = &tables_[table].name;
  }
  result.status = CheckGatherArguments(target, table, row_ids, dst);
  if (!result.status.ok()) return g->Finish();
  auto session = Current();
  if (!session.ok()) {
    result.status = session.status();
    return g->Finish();
  }
  Session& s = **session;
  g->dst = RowPlacement(dst);
  g->record = tables_[table].record_bytes;
  // The cache phase: distinct rows, looked up in the shared cache.
  g->plan.Build(row_ids);
  const size_t n = g->plan.distinct.size();
  result.distinct_rows = n;
  g->outs.resize(n);
  g->hit.resize(n);
  for (size_t d = 0; d < n; ++d) g->outs[d] = g->dst.At(g->plan.first_pos[d]);
  const size_t hits = s.reader(table).LookupBatch(g->plan.distinct, g->outs, g->hit);
  result.hits = hits;
  HitBuffer& buffer = *hits_[table];
  {
    MutexLock lock(&buffer.mu);
    const bool room = buffer.rows.size() + hits <= kMaxBufferedHits;
    for (size_t d = 0; d < n; ++d) {
      if (g->hit[d]) {
        if (room) buffer.rows.push_back(g->plan.distinct[d]);
        if (g->plan.has_duplicates()) {
          g->plan.ForEachDuplicate(
              d, [&](uint32_t p) { std::memcpy(g->dst.At(p), g->outs[d], g->record); });
        }
      } else {
        g->missed.push_back(g->plan.distinct[d]);
        g->missed_distinct.push_back(static_cast<uint32_t>(d));
      }
    }
  }
  g->t1 = io::MonotonicNanos();
  result.cache_nanoseconds = g->t1 - g->t0;
  if (g->missed.empty()) return g->Finish();
  // The misses in row order: rows of one block are then neighbours, and the
  // service reads each block once for the unit that holds them (in the
  // gather's order, a block's rows would fall into different units).
  if (g->missed.size() > 1) SortMissedByRow(*g);

  // The misses: to the service, in messages of at most RowsPerMessage rows
  // (bounded in bytes: a message's answer carries its rows).
  result.misses = 0;
  const size_t per_message = RowsPerMessage(g->record);
  const size_t chunks = (g->missed.size() + per_message - 1) / per_message;
  g->chunks_left.store(static_cast<uint32_t>(chunks));
  {
    MutexLock lock(&in_flight_mu_);
    ++in_flight_;
  }
  for (size_t c = 0; c < chunks; ++c) {
    const size_t begin = c * per_message;
    const size_t count = std::min<size_t>(per_message, g->missed.size() - begin);
    RowsRequest req{static_cast<uint32_t>(table), {g->missed.begin() + begin, g->missed.begin() + begin + count}};
    const uint64_t answer_bytes = kSmallAnswerBytes + count * (uint64_t{g->record} + sizeof(uint64_t));
    // Which of the chunk's rows arrived whole, as the answer's parts come.
    auto arrived = std::make_shared<std::vector<uint8_t>>(count, 0);
    auto part = [g, begin, count, arrived](const Message& m) {
      auto decoded = DecodeGatherPart(m.payload, count, g->record);
      if (!decoded.ok()) return;  // a malformed part: its rows count as failed at the end
      const GatherPart& p = *decoded;
      std::vector<uint8_t> failed(p.count, 0);
      for (uint64_t f : p.failed) failed[f] = 1;
      for (uint32_t k = 0; k < p.count; ++k) {
        if (failed[k]) continue;
        const size_t at = p.first + k;
        const uint32_t d = g->missed_distinct[begin + at];
        const uint8_t* row = p.rows + size_t{k} * g->record;
        std::memcpy(g->dst.At(g->plan.first_pos[d]), row, g->record);
        g->plan.ForEachDuplicate(d, [&](uint32_t q) { std::memcpy(g->dst.At(q), row, g->record); });
        (*arrived)[at] = 1;
      }
    };
    auto done = [this, g, begin, count, arrived](Result<Message> answer) {
      GatherResult part;
      if (!answer.ok()) {
        part.status = answer.status();
      } else if (Status decoded = DecodeGatherDone(answer->payload, count, &part); !decoded.ok()) {
        part = GatherResult{};
        part.status = decoded;
      }
      {
        MutexLock lock(&g->mu);
        GatherResult& r = g->result;
        r.hits += part.hits;
        r.misses += part.misses;
        r.inserts += part.inserts;
        r.refusals += part.refusals;
        r.read_ahead_used += part.read_ahead_used;
        r.blocks_read += part.blocks_read;
        r.bytes_read += part.bytes_read;
        // Rows that did not arrive (a failed block, a part or the whole answer
        // missing) are failed, whatever the result says.
        for (size_t p : part.failed_positions) (*arrived)[p] = 0;
        bool missing = false;
        for (size_t k = 0; k < count; ++k) {
          if ((*arrived)[k]) continue;
          missing = true;
          const uint32_t d = g->missed_distinct[begin + k];
          r.failed_positions.push_back(g->plan.first_pos[d]);
          g->plan.ForEachDuplicate(d, [&](uint32_t q) { r.failed_positions.push_back(q); });
        }
        if (part.status.ok() && missing) {
          part.status = Status::Internal("node: engram-served answered a gather without some of its rows");
        }
        if (r.status.ok() && !part.status.ok()) r.status = part.status;
      }
      if (g->chunks_left.fetch_sub(1) != 1) return;
      GatherResult& r = g->result;
      std::sort(r.failed_positions.begin(), r.failed_positions.end());
      // Failed positions are listed only when some rows were written.
      if (r.status.ok()) r.failed_positions.clear();
      r.disk_nanoseconds = io::MonotonicNanos() - g->t1;
      g->Finish();
      GatherEnded();
    };
    s.Call(MessageType::kGather, Encode(req), answer_bytes, std::move(done), std::move(part));
  }
}

void NodeClientStore::Account(const GatherResult& r) {
  const ClientCounters one{1,           r.status.ok() ? 0u : 1u, r.rows, r.hits, r.misses, r.wait_nanoseconds,
                           r.cache_nanoseconds, r.disk_nanoseconds};
  MutexLock lock(&counters_mu_);
  counters_ += one;
}

void NodeClientStore::ReportHits() {
  std::shared_ptr<Session> s = std::atomic_load(&session_);
  if (!s || !s->alive()) return;
  ClientCounters counters;
  {
    MutexLock lock(&counters_mu_);
    counters = counters_;
  }
  for (size_t t = 0; t < hits_.size(); ++t) {
    std::vector<uint64_t> rows;
    {
      MutexLock lock(&hits_[t]->mu);
      rows.swap(hits_[t]->rows);
    }
    // Table 0's report also carries the counters when no table has hits.
    for (size_t at = 0; at < rows.size() || (at == 0 && t == 0); at += kMaxRowsPerMessage) {
      HitsReport report{static_cast<uint32_t>(t), {}, counters};
      report.row_ids.assign(rows.begin() + at, rows.begin() + std::min(rows.size(), at + kMaxRowsPerMessage));
      if (!s->Post(MessageType::kHits, Encode(report)).ok()) return;
      if (rows.empty()) break;
    }
  }
}

void NodeClientStore::ReporterLoop() {
  MutexLock lock(&reporter_mu_);
  while (!stopping_) {
    reporter_cv_.WaitUntil(&reporter_mu_, std::chrono::steady_clock::now() + kReportPeriod);
    if (stopping_) break;
    lock.Unlock();
    ReportHits();
    lock.Lock();
  }
}

}  // namespace

Result<std::unique_ptr<Store>> NodeClient::Open(const StoreOptions& options) { return NodeClientStore::Open(options); }

}  // namespace engram::node
