#include "storage/redis/cluster_client.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <utility>

#include "storage/log.h"
#include "storage/redis/cluster_slot.h"
#include "storage/redis/slot_map.h"

namespace engram::redis {
namespace {

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

constexpr uint64_t kMs = 1'000'000;

// A statistic only the I/O thread writes: a plain load and store (no locked
// instruction per command), read by Stats() from any thread.
inline void Bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381": the slot and the node.
bool ParseRedirect(std::string_view error, uint16_t* slot, NodeAddress* node) {
  const size_t a = error.find(' ');
  if (a == std::string_view::npos) return false;
  const size_t b = error.find(' ', a + 1);
  if (b == std::string_view::npos) return false;
  uint32_t s = 0;
  const std::string_view digits = error.substr(a + 1, b - a - 1);
  if (digits.empty() || digits.size() > 5) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    s = s * 10 + uint32_t(c - '0');
  }
  if (s >= kSlotCount) return false;
  auto parsed = ParseNodeAddress(error.substr(b + 1));
  if (!parsed.ok()) return false;
  *slot = static_cast<uint16_t>(s);
  *node = std::move(parsed).value();
  return true;
}

}  // namespace

class ClusterClient::Loop {
 public:
  Loop(ClusterClient& owner) : owner_(owner), options_(owner.options_) { slot_owner_.fill(-1); }
  ~Loop() {
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }

  Status Init() {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) return Status::IOError(std::string("eventfd: ") + std::strerror(errno));
    for (const NodeAddress& s : options_.seeds) Know(s);
    return Status::OK();
  }

  // The first map, before the thread starts: from the seeds in order.
  Status Discover() {
    std::string tried;
    Status credentials;
    for (const NodeAddress& seed : options_.seeds) {
      Status s = RefreshFrom(seed);
      if (s.ok()) return s;
      if (s.code() == StatusCode::kInvalidArgument && credentials.ok()) credentials = s;
      tried += (tried.empty() ? "" : "; ") + s.message();
    }
    if (!credentials.ok()) return credentials;
    return Status::Unavailable("no node of the Redis Cluster answered (tried " + std::to_string(options_.seeds.size()) +
                               "): " + tried);
  }

  void Submit(std::span<ClusterCommand> commands, std::function<void()> done) {
    {
      MutexLock lock(&submit_mu_);
      if (!stopping_) {
        submitted_.push_back({commands, std::move(done)});
        const uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
        return;
      }
    }
    for (ClusterCommand& c : commands) c.status = Status::Cancelled("redis cluster client is shut down");
    done();
  }

  void Stop() {
    MutexLock lock(&submit_mu_);
    stopping_ = true;
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  }

  std::vector<std::string> Masters() const {
    MutexLock lock(&published_mu_);
    return masters_;
  }

  std::vector<ClusterNodeStats> Stats() const {
    MutexLock lock(&published_mu_);
    std::vector<ClusterNodeStats> out;
    for (const NodeState* n : published_) {
      ClusterNodeStats s;
      s.node = n->name;
      s.requests = n->requests.load(std::memory_order_relaxed);
      s.bytes_sent = n->bytes_sent.load(std::memory_order_relaxed);
      s.bytes_received = n->bytes_received.load(std::memory_order_relaxed);
      s.moved = n->moved.load(std::memory_order_relaxed);
      s.asks = n->asks.load(std::memory_order_relaxed);
      s.errors = n->errors.load(std::memory_order_relaxed);
      s.latency_sum_ns = n->latency_sum_ns.load(std::memory_order_relaxed);
      s.answered = n->answered.load(std::memory_order_relaxed);
      out.push_back(std::move(s));
    }
    return out;
  }

  void Run() {
    std::vector<pollfd> fds;
    std::vector<NodeState*> polled;
    for (;;) {
      if (!TakeSubmissions()) break;
      uint64_t now = NowNs();
      if (want_refresh_ && now >= next_refresh_ns_) {
        (void)Refresh();
        now = NowNs();
      }
      for (auto& n : nodes_) Pump(*n, now);
      fds.clear();
      polled.clear();
      fds.push_back({wake_fd_, POLLIN, 0});
      uint64_t wake_at = UINT64_MAX;
      if (want_refresh_) wake_at = next_refresh_ns_;
      for (auto& n : nodes_) {
        if (!n->queue.empty()) wake_at = std::min(wake_at, n->queue.front().deadline_ns);
        if (!n->conn) continue;
        if (!n->in_flight.empty()) wake_at = std::min(wake_at, n->in_flight.front().deadline_ns);
        if (n->conn->connecting()) wake_at = std::min(wake_at, n->connect_deadline_ns);
        short events = POLLIN;
        if (n->conn->connecting() || n->conn->wants_write()) events |= POLLOUT;
        fds.push_back({n->conn->fd(), events, 0});
        polled.push_back(n.get());
      }
      int timeout_ms = -1;
      if (wake_at != UINT64_MAX) {
        now = NowNs();
        timeout_ms = wake_at <= now ? 0 : static_cast<int>(std::min<uint64_t>((wake_at - now + kMs - 1) / kMs, 60'000));
      }
      const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
      if (ready < 0 && errno != EINTR) {
        log::Error("redis cluster client: poll: {}", std::strerror(errno));
        break;
      }
      if (ready > 0) {
        if (fds[0].revents & POLLIN) {
          uint64_t count;
          [[maybe_unused]] ssize_t n = ::read(wake_fd_, &count, sizeof(count));
        }
        for (size_t i = 0; i < polled.size(); ++i) {
          if (fds[i + 1].revents != 0) OnEvents(*polled[i], fds[i + 1].revents);
        }
      }
      CheckDeadlines(NowNs());
    }
    const Status cancelled = Status::Cancelled("redis cluster client is shut down");
    for (auto& n : nodes_) {
      n->conn.reset();
      FailAll(*n, cancelled);
    }
    // Batches submitted after the last look but before stopping_.
    std::vector<Submission> rest;
    {
      MutexLock lock(&submit_mu_);
      rest.swap(submitted_);
    }
    for (Submission& s : rest) {
      for (ClusterCommand& c : s.commands) c.status = cancelled;
      s.done();
    }
  }

 private:
  struct Batch {
    size_t remaining = 0;
    std::function<void()> done;
  };
  enum class Kind : uint8_t { kCommand, kAsking, kAuth };
  struct Pending {
    ClusterCommand* cmd = nullptr;
    Batch* batch = nullptr;
    uint64_t submitted_ns = 0;
    uint64_t deadline_ns = 0;
    Kind kind = Kind::kCommand;
    bool asking = false;  // queued: send ASKING before it
  };
  struct NodeState {
    NodeAddress address;
    std::string name;
    std::unique_ptr<RedisConnection> conn;
    uint64_t connect_deadline_ns = 0;
    std::deque<Pending> queue;      // routed here, not sent yet
    std::deque<Pending> in_flight;  // sent, answered in this order
    size_t commands_in_flight = 0;
    uint64_t failed_at_ns = 0;
    Status last_failure;
    std::atomic<uint64_t> requests{0}, bytes_sent{0}, bytes_received{0}, moved{0}, asks{0}, errors{0},
        latency_sum_ns{0}, answered{0};
  };
  struct Submission {
    std::span<ClusterCommand> commands;
    std::function<void()> done;
  };

  // Returns false once stopping.
  bool TakeSubmissions() {
    std::vector<Submission> taken;
    {
      MutexLock lock(&submit_mu_);
      if (stopping_) return false;
      taken.swap(submitted_);
    }
    if (taken.empty()) return true;
    const uint64_t now = NowNs();
    for (Submission& s : taken) {
      if (s.commands.empty()) {
        s.done();
        continue;
      }
      auto* batch = new Batch{s.commands.size(), std::move(s.done)};
      for (ClusterCommand& c : s.commands) {
        c.status = Status::OK();
        c.reply.reset();
        c.redirects = 0;
        Route(Pending{&c, batch, now, now + options_.timeout_ms * kMs, Kind::kCommand, false}, -1);
      }
    }
    return true;
  }

  int NodeIndex(const NodeAddress& a) {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]->address == a) return static_cast<int>(i);
    }
    auto n = std::make_unique<NodeState>();
    n->address = a;
    n->name = a.ToString();
    {
      MutexLock lock(&published_mu_);
      published_.push_back(n.get());
    }
    nodes_.push_back(std::move(n));
    Know(a);
    return static_cast<int>(nodes_.size() - 1);
  }

  void Know(const NodeAddress& a) {
    if (std::find(known_.begin(), known_.end(), a) == known_.end()) known_.push_back(a);
  }

  void Route(Pending p, int target) {
    if (target < 0) {
      const uint16_t slot = KeySlot(p.cmd->key());
      target = slot_owner_[slot];
      if (target < 0) {
        want_refresh_ = true;
        Finish(nullptr, p,
               Status::Unavailable("hash slot " + std::to_string(slot) +
                                   " is served by no master the client knows of (cluster down or being resharded)"));
        return;
      }
    }
    nodes_[target]->queue.push_back(p);
  }

  void Finish(NodeState* node, const Pending& p, Status status) {
    if (node != nullptr) {
      Bump(node->requests);
      if (!status.ok()) Bump(node->errors);
    }
    p.cmd->status = std::move(status);
    if (--p.batch->remaining == 0) {
      std::function<void()> done = std::move(p.batch->done);
      delete p.batch;
      done();
    }
  }

  void FailAll(NodeState& n, const Status& why) {
    std::deque<Pending> in_flight, queue;
    in_flight.swap(n.in_flight);
    queue.swap(n.queue);
    n.commands_in_flight = 0;
    for (const Pending& p : in_flight) {
      if (p.kind == Kind::kCommand) Finish(&n, p, why);
    }
    for (const Pending& p : queue) Finish(&n, p, why);
  }

  void NodeFailed(NodeState& n, const Status& why) {
    n.conn.reset();
    n.failed_at_ns = NowNs();
    n.last_failure = why;
    want_refresh_ = true;
    FailAll(n, why);
  }

  void Pump(NodeState& n, uint64_t now) {
    if (n.queue.empty()) return;
    if (!n.conn) {
      if (n.failed_at_ns != 0 && now - n.failed_at_ns < options_.reconnect_backoff_ms * kMs) {
        FailAll(n, n.last_failure);
        return;
      }
      auto c = RedisConnection::Start(n.address);
      if (!c.ok()) return NodeFailed(n, c.status());
      n.conn = std::move(c).value();
      n.connect_deadline_ns = now + options_.timeout_ms * kMs;
      if (!options_.password.empty()) {
        const std::vector<std::string_view> auth = AuthWords(options_.user, options_.password);
        Bump(n.bytes_sent, n.conn->Append(auth));
        n.in_flight.push_back(Pending{nullptr, nullptr, now, n.connect_deadline_ns, Kind::kAuth, false});
      }
    }
    if (n.conn->connecting()) return;
    // The window is refilled once half of it has been answered, not reply by
    // reply: a node then reads many commands a call and writes their replies
    // together, where a few commands a round trip cost it a read and a write
    // each time.
    const bool refill = n.commands_in_flight <= options_.pipeline_depth / 2;
    while (refill && !n.queue.empty() && n.commands_in_flight < options_.pipeline_depth) {
      Pending p = n.queue.front();
      n.queue.pop_front();
      if (p.asking) {
        static constexpr std::string_view kAsking[] = {"ASKING"};
        Bump(n.bytes_sent, n.conn->Append(kAsking));
        n.in_flight.push_back(Pending{nullptr, nullptr, now, p.deadline_ns, Kind::kAsking, false});
      }
      Bump(n.bytes_sent, n.conn->Append(CommandWords(p.cmd->words.data(), p.cmd->word_count)));
      n.in_flight.push_back(p);
      ++n.commands_in_flight;
    }
    if (n.conn->wants_write()) {
      Status s = n.conn->Write();
      if (!s.ok()) NodeFailed(n, s);
    }
  }

  void OnEvents(NodeState& n, short revents) {
    if (!n.conn) return;
    if (n.conn->connecting()) {
      if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return;
      Status s = n.conn->FinishConnect();
      if (!s.ok()) return NodeFailed(n, s);
      Pump(n, NowNs());
      if (!n.conn) return;
    }
    if ((revents & POLLOUT) && n.conn->wants_write()) {
      Status s = n.conn->Write();
      if (!s.ok()) return NodeFailed(n, s);
    }
    if (!(revents & (POLLIN | POLLERR | POLLHUP))) return;
    const Status read = n.conn->Read();
    Bump(n.bytes_received, n.conn->TakeReceivedBytes());
    const uint64_t now = NowNs();
    for (;;) {
      // A GET into a buffer: its value lands there straight from the reader.
      const Pending* next = n.in_flight.empty() ? nullptr : &n.in_flight.front();
      n.conn->SetLanding(next != nullptr && next->kind == Kind::kCommand ? next->cmd->into : std::span<std::byte>());
      auto reply = n.conn->NextReply();
      if (!reply.ok()) return NodeFailed(n, reply.status());
      if (*reply == nullptr) break;
      if (n.in_flight.empty()) {
        return NodeFailed(n, Status::IOError("redis node " + n.name + " sent a reply nobody asked for"));
      }
      Pending p = n.in_flight.front();
      n.in_flight.pop_front();
      if (p.kind == Kind::kCommand) --n.commands_in_flight;
      OnReply(n, p, std::move(reply).value(), now);
      if (!n.conn) return;  // the reply failed the connection (refused credentials)
    }
    if (!read.ok()) NodeFailed(n, read);
  }

  void OnReply(NodeState& n, const Pending& p, Reply reply, uint64_t now) {
    if (p.kind == Kind::kAuth) {
      if (reply->type == REDIS_REPLY_ERROR) NodeFailed(n, ErrorReplyStatus(n.address, std::string_view(reply->str, reply->len)));
      return;
    }
    if (p.kind == Kind::kAsking) return;  // an error shows in the command's own reply
    ClusterCommand& cmd = *p.cmd;
    if (reply->type == REDIS_REPLY_ERROR) {
      const std::string_view error(reply->str, reply->len);
      const bool moved = StartsWith(error, "MOVED "), ask = StartsWith(error, "ASK ");
      uint16_t slot = 0;
      NodeAddress to;
      if ((moved || ask) && ParseRedirect(error, &slot, &to)) {
        Bump(moved ? n.moved : n.asks);
        if (++cmd.redirects > options_.max_redirects) {
          return Finish(&n, p, Status::Unavailable("redis key '" + std::string(cmd.key()) + "' redirected " +
                                                   std::to_string(cmd.redirects) + " times, last by " + n.name +
                                                   " ('" + std::string(error) + "')"));
        }
        const int target = NodeIndex(to);
        if (moved) {
          slot_owner_[slot] = target;
          want_refresh_ = true;
        }
        Pending again = p;
        again.asking = ask;
        Route(again, target);
        return;
      }
      Status s = ErrorReplyStatus(n.address, error);
      if (s.code() == StatusCode::kUnavailable) want_refresh_ = true;
      return Finish(&n, p, std::move(s));
    }
    Bump(n.latency_sum_ns, now - p.submitted_ns);
    Bump(n.answered);
    if (reply.get() == LandedReply()) return Finish(&n, p, Status::OK());  // the value is in cmd.into
    if (cmd.into.empty()) {
      cmd.reply = std::move(reply);
      return Finish(&n, p, Status::OK());
    }
    if (reply->type == REDIS_REPLY_NIL) {
      return Finish(&n, p, Status::NotFound("redis key '" + std::string(cmd.key()) + "' does not exist (node " + n.name + ")"));
    }
    if (reply->type != REDIS_REPLY_STRING) {
      return Finish(&n, p, Status::Corruption("redis key '" + std::string(cmd.key()) + "' on node " + n.name +
                                             " is not a string value"));
    }
    if (reply->len != cmd.into.size()) {
      return Finish(&n, p, Status::Corruption("redis key '" + std::string(cmd.key()) + "' on node " + n.name + " holds " +
                                             std::to_string(reply->len) + " bytes, expected " +
                                             std::to_string(cmd.into.size())));
    }
    std::memcpy(cmd.into.data(), reply->str, reply->len);
    Finish(&n, p, Status::OK());
  }

  void CheckDeadlines(uint64_t now) {
    for (auto& np : nodes_) {
      NodeState& n = *np;
      if (n.conn && n.conn->connecting() && now >= n.connect_deadline_ns) {
        NodeFailed(n, Status::Unavailable("redis node " + n.name + ": connect did not complete within " +
                                          std::to_string(options_.timeout_ms) + " ms"));
        continue;
      }
      if (!n.in_flight.empty() && now >= n.in_flight.front().deadline_ns) {
        NodeFailed(n, Status::Unavailable("redis node " + n.name + " did not answer within " +
                                          std::to_string(options_.timeout_ms) + " ms"));
        continue;
      }
      while (!n.queue.empty() && now >= n.queue.front().deadline_ns) {
        Pending p = n.queue.front();
        n.queue.pop_front();
        Finish(&n, p, Status::Unavailable("redis node " + n.name + ": no answer within " +
                                           std::to_string(options_.timeout_ms) + " ms (the command waited its turn)"));
      }
    }
  }

  // Asks one node for the slot map and installs it.
  Status RefreshFrom(const NodeAddress& node) {
    static const std::vector<std::string_view> kSlots = {"CLUSTER", "SLOTS"};
    const uint32_t timeout = std::min<uint32_t>(options_.timeout_ms, 1000);
    auto replies = RunCommands(node, options_.user, options_.password, std::span(&kSlots, 1), timeout);
    if (!replies.ok()) return replies.status();
    ENGRAM_ASSIGN_OR_RETURN(std::vector<SlotRange> ranges, ParseClusterSlots(*replies->front(), node));
    if (ranges.empty()) return Status::Unavailable("redis node " + node.ToString() + " serves no slot (cluster not set up)");
    slot_owner_.fill(-1);
    std::vector<std::string> masters;
    for (const SlotRange& r : ranges) {
      const int m = NodeIndex(r.master);
      for (uint32_t s = r.first; s <= r.last; ++s) slot_owner_[s] = m;
      if (std::find(masters.begin(), masters.end(), nodes_[m]->name) == masters.end()) masters.push_back(nodes_[m]->name);
      for (const NodeAddress& replica : r.replicas) Know(replica);
    }
    {
      MutexLock lock(&published_mu_);
      masters_ = std::move(masters);
    }
    owner_.refreshes_.fetch_add(1, std::memory_order_relaxed);
    return Status::OK();
  }

  // A refresh from any node that answers: those with a working connection
  // first, recently failed ones last.
  Status Refresh() {
    const uint64_t now = NowNs();
    next_refresh_ns_ = now + options_.refresh_interval_ms * kMs;
    std::vector<NodeAddress> order, later;
    for (const auto& n : nodes_) {
      if (n->conn && !n->conn->connecting()) order.push_back(n->address);
    }
    for (const NodeAddress& a : known_) {
      if (std::find(order.begin(), order.end(), a) != order.end()) continue;
      bool failed_lately = false;
      for (const auto& n : nodes_) {
        if (n->address == a && n->failed_at_ns != 0 && now - n->failed_at_ns < 1000 * kMs) failed_lately = true;
      }
      (failed_lately ? later : order).push_back(a);
    }
    order.insert(order.end(), later.begin(), later.end());
    Status last = Status::Unavailable("no node known");
    for (const NodeAddress& a : order) {
      last = RefreshFrom(a);
      if (last.ok()) {
        want_refresh_ = false;
        return last;
      }
    }
    log::Warn("redis cluster client: topology refresh failed: {}", last.ToString());
    return last;
  }

  ClusterClient& owner_;
  const ClusterOptions& options_;
  int wake_fd_ = -1;

  // The I/O thread's own state.
  std::vector<std::unique_ptr<NodeState>> nodes_;
  std::vector<NodeAddress> known_;  // every node heard of: seeds, masters, replicas
  std::array<int, kSlotCount> slot_owner_;
  bool want_refresh_ = false;
  uint64_t next_refresh_ns_ = 0;

  mutable Mutex submit_mu_;
  std::vector<Submission> submitted_ GUARDED_BY(submit_mu_);
  bool stopping_ GUARDED_BY(submit_mu_) = false;

  mutable Mutex published_mu_;
  std::vector<const NodeState*> published_ GUARDED_BY(published_mu_);
  std::vector<std::string> masters_ GUARDED_BY(published_mu_);
};

ClusterClient::ClusterClient(ClusterOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<ClusterClient>> ClusterClient::Connect(ClusterOptions options) {
  if (options.seeds.empty()) return Status::InvalidArgument("redis cluster: no seed node given");
  if (options.pipeline_depth < 1 || options.pipeline_depth > 65536) {
    return Status::InvalidArgument("redis cluster: pipeline_depth must be in 1..65536");
  }
  if (options.timeout_ms < 1) return Status::InvalidArgument("redis cluster: timeout_ms must be at least 1");
  std::unique_ptr<ClusterClient> c(new ClusterClient(std::move(options)));
  c->loop_ = std::make_unique<Loop>(*c);
  ENGRAM_RETURN_IF_ERROR(c->loop_->Init());
  ENGRAM_RETURN_IF_ERROR(c->loop_->Discover());
  c->thread_ = std::thread([loop = c->loop_.get()] { loop->Run(); });
  return c;
}

ClusterClient::~ClusterClient() { Shutdown(); }

void ClusterClient::Shutdown() {
  if (!loop_) return;
  loop_->Stop();
  if (thread_.joinable()) thread_.join();
}

void ClusterClient::Submit(std::span<ClusterCommand> commands, std::function<void()> done) {
  loop_->Submit(commands, std::move(done));
}

void ClusterClient::Run(std::span<ClusterCommand> commands) {
  Mutex mu;
  CondVar cv;
  bool finished = false;
  Submit(commands, [&] {
    MutexLock lock(&mu);
    finished = true;
    cv.Signal();
  });
  MutexLock lock(&mu);
  while (!finished) cv.Wait(&mu);
}

std::vector<std::string> ClusterClient::Masters() const { return loop_->Masters(); }
std::vector<ClusterNodeStats> ClusterClient::Stats() const { return loop_->Stats(); }

}  // namespace engram::redis
