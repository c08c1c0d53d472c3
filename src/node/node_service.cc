#include "src/node/node_service.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "src/node/inflight_rows.h"
#include "src/node/messages.h"
#include "src/node/shared_cache_memory.h"
#include "src/node/wire.h"
#include "src/store/store_impl.h"
#include "src/store/table_state.h"
#include "storage/log.h"

namespace engram::node {
namespace {

struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FileIdentity&) const = default;
};

Result<FileIdentity> IdentityOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno("stat " + path, errno);
  return FileIdentity{st.st_dev, st.st_ino};
}

// One connected client.
struct Connection {
  explicit Connection(int socket) : fd(socket) {}
  ~Connection() { ::close(fd); }

  const int fd;
  pid_t pid = 0;
  std::string name;
  std::vector<uint32_t> tables;  // the client's table i is the service's tables[i]
  std::mutex send_mu;
  std::atomic<bool> finished{false};  // its thread has ended
  std::thread thread;

  // Read-ahead pins it holds, per service table: released when it ends.
  std::mutex pins_mu;
  std::unordered_map<uint32_t, std::unordered_set<uint64_t>> pins;

  std::mutex counters_mu;
  ClientCounters counters;

  // Answers go out from gather completions on the store's threads as well as
  // from this connection's thread.
  void Send(MessageType type, uint64_t id, std::span<const uint8_t> payload, std::span<const uint8_t> tail = {}) {
    std::lock_guard lock(send_mu);
    Status s = SendMessage(fd, type, id, payload, tail);
    if (!s.ok()) {
      // A client that is gone or stopped reading: end its connection (the
      // reader sees the end of the stream and cleans up).
      ::shutdown(fd, SHUT_RDWR);
    }
  }
};

class NodeServiceImpl final : public NodeService {
 public:
  ~NodeServiceImpl() override { Stop(); }

  static Result<std::unique_ptr<NodeService>> Start(const NodeServiceOptions& options);

  void Stop() override;
  size_t client_count() const override {
    std::lock_guard lock(connections_mu_);
    return LiveConnections();
  }
  uint16_t metrics_port() const override { return store_ ? store_->metrics_port() : 0; }
  std::string MetricsText() const override { return store_->MetricsText(); }

 private:
  NodeServiceImpl() = default;

  Status TakeTables();
  Status Listen();
  void AcceptLoop();
  void Serve(const std::shared_ptr<Connection>& c);
  // The hello: the client's tables against the service's. Answers kWelcome
  // (with the memory) or kError.
  Status Greet(Connection& c, const Message& hello);
  Status Handle(const std::shared_ptr<Connection>& c, Message& m);
  void HandleGather(const std::shared_ptr<Connection>& c, uint64_t request_id, RowsRequest req);
  void Disconnected(Connection& c);
  void ReapFinished();
  void AddClientMetrics(MetricsSnapshot& m) const;
  // Connections not yet ended (ended ones wait to be reaped); connections_mu_ held.
  size_t LiveConnections() const {
    return static_cast<size_t>(
        std::count_if(connections_.begin(), connections_.end(), [](const auto& c) { return !c->finished.load(); }));
  }
  Result<uint32_t> ServiceTable(const Connection& c, uint32_t client_table) const {
    if (client_table >= c.tables.size()) {
      return Status::InvalidArgument("node protocol: no table " + std::to_string(client_table));
    }
    return c.tables[client_table];
  }

  NodeServiceOptions options_;
  int gid_ = -1;
  std::unique_ptr<SharedCacheMemory> memory_;
  std::unique_ptr<StoreImpl> store_;
  std::vector<std::unique_ptr<InflightRows>> inflight_;  // per table
  std::vector<FileIdentity> table_ids_;
  std::vector<FileIdentity> manifest_ids_;  // per table; dev = ino = 0 when not by manifest
  std::vector<int> table_locks_;            // flock'd descriptors of the table files
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: wakes the accept loop
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
  std::mutex stop_mu_;

  mutable std::mutex connections_mu_;
  std::list<std::shared_ptr<Connection>> connections_;
  // Counters of clients that have gone, so node totals never go down.
  struct Departed {
    ClientCounters counters;
    uint64_t clients = 0;
  };
  Departed departed_;
};

Result<std::unique_ptr<NodeService>> NodeServiceImpl::Start(const NodeServiceOptions& options) {
  if (options.socket_path.empty()) return Status::InvalidArgument("engram-served: no socket path given");
  if (options.socket_path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return Status::InvalidArgument("engram-served: socket path longer than " +
                                   std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes: " +
                                   options.socket_path);
  }
  if (!options.store.node.empty()) return Status::InvalidArgument("engram-served: the service is not a client");
  std::unique_ptr<NodeServiceImpl> s(new NodeServiceImpl());
  s->options_ = options;
  if (!options.group.empty()) {
    const group* g = ::getgrnam(options.group.c_str());
    if (g == nullptr) return Status::InvalidArgument("engram-served: no group named '" + options.group + "'");
    s->gid_ = static_cast<int>(g->gr_gid);
  }
  // Refuse a live service on this socket before opening anything.
  ENGRAM_RETURN_IF_ERROR(s->Listen());
  // The cache memory: the whole budget, sized sparsely; the caches take
  // their regions from it in Open, each on a 2 MiB boundary.
  // A budget is never more than the host's memory (cache_bytes may be
  // UINT64_MAX with a cache_memory_fraction): the file need not be larger.
  const uint64_t host_bytes = uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGESIZE));
  const uint64_t reserve = std::min(options.store.cache_bytes, host_bytes) +
                           4 * kHugePageBytes * (options.store.tables.size() + 1);
  auto memory = SharedCacheMemory::Create(reserve, s->gid_);
  if (!memory.ok()) return memory.status();
  s->memory_ = std::move(memory).value();
  NodeServiceImpl* raw = s.get();
  StoreHooks hooks;
  hooks.cache_regions = [raw](uint64_t bytes, const char* what) { return raw->memory_->Allocate(bytes, what); };
  hooks.extra_metrics = [raw](MetricsSnapshot& m) { raw->AddClientMetrics(m); };
  auto store = StoreImpl::Open(options.store, hooks);
  if (!store.ok()) return store.status();
  s->store_ = std::move(store).value();
  ENGRAM_RETURN_IF_ERROR(s->TakeTables());
  for (size_t t = 0; t < s->store_->table_count(); ++t) s->inflight_.push_back(std::make_unique<InflightRows>());
  s->stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (s->stop_fd_ < 0) return Status::FromErrno("engram-served: eventfd", errno);
  if (::listen(s->listen_fd_, 128) != 0) return Status::FromErrno("engram-served: listen", errno);
  s->acceptor_ = std::thread([raw] { raw->AcceptLoop(); });
  log::Info("engram-served: serving {} table(s) on {} ({} B of shared cache memory)", s->store_->table_count(),
            options.socket_path, s->memory_->allocated());
  return std::unique_ptr<NodeService>(std::move(s));
}

Status NodeServiceImpl::Listen() {
  const std::string& path = options_.socket_path;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::InvalidArgument("engram-served: " + path + " exists and is not a socket; not removing it");
    }
    const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool live = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (probe >= 0) ::close(probe);
    if (live) {
      return Status::InvalidArgument("engram-served: another service is running on " + path +
                                     " (stop it first, or use another socket path)");
    }
    // Nobody answers: the socket of a service that died. Remove it.
    log::Info("engram-served: removing the stale socket {}", path);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Status::FromErrno("remove stale socket " + path, errno);
  }
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Status::FromErrno("engram-served: socket", errno);
  // Created 0660 from the start: no moment when others may connect.
  const mode_t old_mask = ::umask(0117);
  const int bound = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  ::umask(old_mask);
  if (bound != 0) return Status::FromErrno("engram-served: bind " + path, bind_errno);
  if (gid_ >= 0 && ::chown(path.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(gid_)) != 0) {
    return Status::FromErrno("engram-served: chown " + path + " to group " + options_.group, errno);
  }
  return Status::OK();
}

Status NodeServiceImpl::TakeTables() {
  for (size_t t = 0; t < store_->table_count(); ++t) {
    const TableState& ts = store_->table_state(t);
    const std::string& path = ts.file->path();
    ENGRAM_ASSIGN_OR_RETURN(FileIdentity id, IdentityOf(path));
    table_ids_.push_back(id);
    FileIdentity manifest{};
    if (!options_.store.tables[t].manifest.empty()) {
      ENGRAM_ASSIGN_OR_RETURN(manifest, IdentityOf(options_.store.tables[t].manifest));
    }
    manifest_ids_.push_back(manifest);
    // An advisory lock on the table file, held while the service runs (the
    // kernel drops it when the process ends, however it ends): a second
    // service for the same file is refused rather than doubling the
    // node's cache and reads. Private stores take no lock and are not hindered.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("engram-served: open " + path, errno);
    table_locks_.push_back(fd);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err == EWOULDBLOCK) {
        return Status::InvalidArgument("engram-served: table '" + ts.name + "' (" + path +
                                       ") is already served by another running engram-served");
      }
      return Status::FromErrno("engram-served: lock " + path, err);
    }
  }
  return Status::OK();
}

void NodeServiceImpl::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    const int n = ::poll(fds, 2, 200);
    ReapFinished();
    if (n <= 0 || (fds[1].revents & POLLIN) != 0) continue;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        log::Warn("engram-served: accept: {}", std::strerror(errno));
        // EMFILE and friends: do not spin.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      continue;
    }
    timeval tv{static_cast<time_t>(options_.send_timeout_ms / 1000),
               static_cast<suseconds_t>(options_.send_timeout_ms % 1000) * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    auto c = std::make_shared<Connection>(fd);
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) c->pid = cred.pid;
    std::lock_guard lock(connections_mu_);
    if (stopping_.load()) break;  // the connection closes with c
    const size_t live = LiveConnections();
    if (live >= options_.max_clients) {
      log::Warn("engram-served: refusing a client (pid {}): {} clients connected already", c->pid, live);
      c->Send(MessageType::kError, 0,
              EncodeStatus(Status::ResourceExhausted("engram-served: " + std::to_string(live) +
                                                     " clients are connected, the most it serves (--max-clients)")));
      continue;
    }
    connections_.push_back(c);
    c->thread = std::thread([this, c] { Serve(c); });
  }
}

void NodeServiceImpl::ReapFinished() {
  std::vector<std::shared_ptr<Connection>> done;
  {
    std::lock_guard lock(connections_mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if ((*it)->finished.load()) {
        done.push_back(*it);
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : done) {
    if (c->thread.joinable()) c->thread.join();
  }
}

void NodeServiceImpl::Serve(const std::shared_ptr<Connection>& c) {
  auto receive_timeout = [&c](uint32_t ms) {
    timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000) * 1000};
    ::setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  };
  receive_timeout(options_.hello_timeout_ms);
  auto first = ReceiveMessage(c->fd);
  receive_timeout(0);  // after the hello, a client may stay quiet as long as it likes
  bool greeted = false;
  if (first.ok() && first->type == MessageType::kHello) {
    Status s = Greet(*c, *first);
    greeted = s.ok();
    if (!s.ok()) {
      log::Warn("engram-served: refused client pid {}: {}", c->pid, s.ToString());
      c->Send(MessageType::kError, first->request_id, EncodeStatus(s));
    }
  } else if (first.ok()) {
    c->Send(MessageType::kError, first->request_id,
            EncodeStatus(Status::InvalidArgument("node protocol: the first message must be a hello")));
  } else if (first.status().code() != StatusCode::kCancelled) {
    log::Warn("engram-served: a client (pid {}) sent garbage: {}; disconnecting it", c->pid,
              first.status().ToString());
    c->Send(MessageType::kError, 0, EncodeStatus(first.status()));
  }
  if (first.ok() && first->fd >= 0) ::close(first->fd);
  // Runs until the client goes or Stop ends the connection. Not on
  // stopping_: Stop tells the client why before it shuts the socket, and a
  // thread that shut it on seeing the flag could beat that message out.
  while (greeted) {
    auto m = ReceiveMessage(c->fd);
    if (!m.ok()) {
      if (m.status().code() != StatusCode::kCancelled && !stopping_.load()) {
        log::Warn("engram-served: client '{}' (pid {}): {}; disconnecting it", c->name, c->pid,
                  m.status().ToString());
        c->Send(MessageType::kError, 0, EncodeStatus(m.status()));
      }
      break;
    }
    if (m->fd >= 0) {
      ::close(m->fd);
      m->fd = -1;
    }
    if (Status s = Handle(c, *m); !s.ok()) {
      log::Warn("engram-served: client '{}' (pid {}) sent a bad request: {}; disconnecting it", c->name, c->pid,
                s.ToString());
      c->Send(MessageType::kError, m->request_id, EncodeStatus(s));
      break;
    }
  }
  ::shutdown(c->fd, SHUT_RDWR);
  if (greeted) Disconnected(*c);
  c->finished.store(true);
}

Status NodeServiceImpl::Greet(Connection& c, const Message& hello_message) {
  ENGRAM_ASSIGN_OR_RETURN(Hello hello, DecodeHello(hello_message.payload));
  c.name = hello.client_name.empty() ? std::to_string(c.pid) : hello.client_name;
  auto served = [this] {
    std::string list;
    for (size_t t = 0; t < store_->table_count(); ++t) {
      const TableState& ts = store_->table_state(t);
      list += (t ? ", " : "") + ts.name + " (" + ts.file->path() + ")";
    }
    return list;
  };
  if (hello.tables.size() != store_->table_count()) {
    return Status::InvalidArgument("this engram-served serves " + std::to_string(store_->table_count()) +
                                   " table(s): " + served() + "; the client asked for " +
                                   std::to_string(hello.tables.size()));
  }
  Welcome w;
  w.service_pid = static_cast<uint64_t>(::getpid());
  w.memory_bytes = memory_->size();
  w.io_description = store_->io_description();
  w.metrics_port = store_->metrics_port();
  std::vector<bool> taken(store_->table_count(), false);
  for (const HelloTable& asked : hello.tables) {
    const bool by_manifest = !asked.manifest.empty();
    FileIdentity id{};
    if (by_manifest || !asked.path.empty()) {
      auto got = IdentityOf(by_manifest ? asked.manifest : asked.path);
      if (!got.ok()) return got.status().WithContext("the client's table");
      id = *got;
    }
    if (by_manifest && hello.rank != options_.store.rank) {
      return Status::InvalidArgument("this engram-served serves rank " + std::to_string(options_.store.rank) +
                                     " of its rank tables; the client asked for rank " + std::to_string(hello.rank));
    }
    std::optional<uint32_t> match;
    for (uint32_t t = 0; t < store_->table_count() && !match; ++t) {
      if (taken[t]) continue;
      const bool same_file = by_manifest ? manifest_ids_[t] == id && manifest_ids_[t] != FileIdentity{}
                                         : table_ids_[t] == id;
      if (same_file && (asked.name.empty() || asked.name == store_->table_state(t).name)) match = t;
    }
    if (!match) {
      return Status::InvalidArgument("this engram-served does not serve the client's table " +
                                     (asked.name.empty() ? std::string() : "'" + asked.name + "' ") + "(" +
                                     (by_manifest ? "manifest " + asked.manifest : asked.path) +
                                     "); it serves: " + served());
    }
    taken[*match] = true;
    c.tables.push_back(*match);
    const TableState& ts = store_->table_state(*match);
    WelcomeTable wt;
    wt.name = ts.name;
    wt.path = ts.file->path();
    wt.row_count = ts.file->row_count();
    wt.record_bytes = ts.file->record_bytes();
    wt.cache_budget_bytes = ts.cache_budget_bytes;
    wt.metadata_json = ts.file->metadata_text();
    auto geometry = ts.cache->SharedGeometry();
    if (!geometry) return Status::Internal("engram-served: table " + ts.name + "'s cache cannot be shared");
    wt.geometry = *geometry;
    wt.index_offset = memory_->OffsetOf(ts.cache->index_data());
    wt.slab_offset = memory_->OffsetOf(ts.cache->slab_data());
    w.tables.push_back(std::move(wt));
  }
  ENGRAM_ASSIGN_OR_RETURN(int ro, memory_->OpenReadOnly());
  std::vector<uint8_t> payload = Encode(w);
  Status sent;
  {
    std::lock_guard lock(c.send_mu);
    sent = SendMessage(c.fd, MessageType::kWelcome, hello_message.request_id, payload, {}, ro);
  }
  ::close(ro);
  if (sent.ok()) log::Info("engram-served: client '{}' (pid {}) connected", c.name, c.pid);
  return sent;
}

Status NodeServiceImpl::Handle(const std::shared_ptr<Connection>& c, Message& m) {
  switch (m.type) {
    case MessageType::kGather: {
      ENGRAM_ASSIGN_OR_RETURN(RowsRequest req, DecodeRowsRequest(m.payload));
      ENGRAM_ASSIGN_OR_RETURN(req.table, ServiceTable(*c, req.table));
      HandleGather(c, m.request_id, std::move(req));
      return Status::OK();
    }
    case MessageType::kReadAhead: {
      ENGRAM_ASSIGN_OR_RETURN(RowsRequest req, DecodeRowsRequest(m.payload));
      ENGRAM_ASSIGN_OR_RETURN(req.table, ServiceTable(*c, req.table));
      ENGRAM_RETURN_IF_ERROR(store_->ReadAhead(req.table, req.row_ids));
      std::lock_guard lock(c->pins_mu);
      c->pins[req.table].insert(req.row_ids.begin(), req.row_ids.end());
      return Status::OK();
    }
    case MessageType::kRelease: {
      ENGRAM_ASSIGN_OR_RETURN(RowsRequest req, DecodeRowsRequest(m.payload));
      ENGRAM_ASSIGN_OR_RETURN(req.table, ServiceTable(*c, req.table));
      store_->ReleaseReadAhead(req.table, req.row_ids);
      {
        std::lock_guard lock(c->pins_mu);
        auto& pins = c->pins[req.table];
        for (uint64_t id : req.row_ids) pins.erase(id);
      }
      c->Send(MessageType::kDone, m.request_id, {});
      return Status::OK();
    }
    case MessageType::kWaitReadAheads:
      store_->WaitForReadAheads();
      c->Send(MessageType::kDone, m.request_id, {});
      return Status::OK();
    case MessageType::kWaitWarmUp:
      store_->WaitForWarmUp();
      c->Send(MessageType::kDone, m.request_id, {});
      return Status::OK();
    case MessageType::kWaitCacheMemory:
      store_->WaitForCacheMemory();
      c->Send(MessageType::kDone, m.request_id, {});
      return Status::OK();
    case MessageType::kHits: {
      ENGRAM_ASSIGN_OR_RETURN(HitsReport report, DecodeHitsReport(m.payload));
      ENGRAM_ASSIGN_OR_RETURN(uint32_t table, ServiceTable(*c, report.table));
      if (!report.row_ids.empty()) store_->table_state(table).cache->RecordHits(report.row_ids);
      std::lock_guard lock(c->counters_mu);
      c->counters = report.counters;
      return Status::OK();
    }
    case MessageType::kStats: {
      ENGRAM_ASSIGN_OR_RETURN(uint32_t client_table, DecodeU32(m.payload));
      ENGRAM_ASSIGN_OR_RETURN(uint32_t table, ServiceTable(*c, client_table));
      c->Send(MessageType::kStatsReply, m.request_id, Encode(store_->Stats(table)));
      return Status::OK();
    }
    case MessageType::kMetrics: {
      const std::string text = store_->MetricsText();
      c->Send(MessageType::kMetricsReply, m.request_id,
              {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
      return Status::OK();
    }
    default:
      return Status::InvalidArgument("node protocol: unexpected message type " +
                                     std::to_string(static_cast<unsigned>(m.type)));
  }
}

void NodeServiceImpl::HandleGather(const std::shared_ptr<Connection>& c, uint64_t request_id, RowsRequest req) {
  const uint32_t table = req.table;
  const uint32_t record = store_->record_bytes(table);
  std::shared_ptr<Connection> conn = c;
  auto answer = [conn, request_id](const GatherResult& r, std::span<const uint8_t> rows) {
    WireWriter w;
    EncodeGatherResult(r, &w);
    conn->Send(MessageType::kGatherDone, request_id, w.bytes(), rows);
  };
  StoreImpl* store = store_.get();
  inflight_[table]->Gather(std::move(req.row_ids), record,
                           [store, table](std::span<const uint64_t> ids, std::byte* dst, size_t stride,
                                          std::function<void(GatherResult)> done) {
                             store->StartGather(table, ids, dst, stride, std::move(done));
                           },
                           std::move(answer));
}

void NodeServiceImpl::Disconnected(Connection& c) {
  std::unordered_map<uint32_t, std::unordered_set<uint64_t>> pins;
  {
    std::lock_guard lock(c.pins_mu);
    pins.swap(c.pins);
  }
  for (auto& [table, rows] : pins) {
    if (rows.empty()) continue;
    std::vector<uint64_t> list(rows.begin(), rows.end());
    store_->ReleaseReadAhead(table, list);
  }
  {
    std::lock_guard lock(connections_mu_);
    std::lock_guard counters_lock(c.counters_mu);
    departed_.counters += c.counters;
    ++departed_.clients;
  }
  if (!stopping_.load()) log::Info("engram-served: client '{}' (pid {}) disconnected", c.name, c.pid);
}

void NodeServiceImpl::AddClientMetrics(MetricsSnapshot& m) const {
  std::vector<std::pair<std::string, ClientCounters>> live;
  Departed departed;
  {
    std::lock_guard lock(connections_mu_);
    departed = departed_;
    for (const auto& c : connections_) {
      if (c->finished.load() || c->name.empty()) continue;
      std::lock_guard counters_lock(c->counters_mu);
      live.emplace_back(c->name, c->counters);
    }
  }
  m.AddGauge("engram_node_clients", "Clients connected to this engram-served.", {}, double(live.size()));
  m.AddCounter("engram_node_clients_departed_total", "Clients that have disconnected (or died).", {},
               double(departed.clients));
  struct Field {
    const char* metric;
    const char* help;
    uint64_t ClientCounters::*member;
    bool seconds;
  };
  static constexpr Field kFields[] = {
      {"engram_node_client_gathers_total", "Gathers a client made (reported with its hits, every 20 ms).",
       &ClientCounters::gathers, false},
      {"engram_node_client_failed_gathers_total", "Gathers of a client that failed.", &ClientCounters::failed_gathers,
       false},
      {"engram_node_client_rows_total", "Rows a client asked for.", &ClientCounters::rows, false},
      {"engram_node_client_hits_total", "Distinct rows a client served from the shared cache itself.",
       &ClientCounters::hits, false},
      {"engram_node_client_misses_total", "Distinct rows a client missed and had the service gather.",
       &ClientCounters::misses, false},
      {"engram_node_client_wait_seconds_total", "A client's readiness wait, summed over its gathers.",
       &ClientCounters::wait_nanoseconds, true},
      {"engram_node_client_cache_wait_seconds_total", "The cache part of a client's readiness wait.",
       &ClientCounters::cache_nanoseconds, true},
      {"engram_node_client_disk_wait_seconds_total",
       "The disk part of a client's readiness wait (the round trip to the service included).",
       &ClientCounters::disk_nanoseconds, true},
  };
  for (const Field& f : kFields) {
    bool first = true;
    for (const auto& [name, counters] : live) {
      const double v = double(counters.*f.member) * (f.seconds ? 1e-9 : 1.0);
      m.AddCounter(f.metric, first ? f.help : "", {{"client", name}}, v);
      first = false;
    }
    const double gone = double(departed.counters.*f.member) * (f.seconds ? 1e-9 : 1.0);
    m.AddCounter(f.metric, first ? f.help : "", {{"client", "(departed)"}}, gone);
  }
}

void NodeServiceImpl::Stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  stopping_.store(true);
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(stop_fd_, &one, sizeof(one));
  }
  if (acceptor_.joinable()) acceptor_.join();
  std::list<std::shared_ptr<Connection>> connections;
  {
    std::lock_guard lock(connections_mu_);
    connections.swap(connections_);
  }
  // Tell every client, then end the connections: their threads see the end
  // of the stream.
  const std::vector<uint8_t> why = EncodeStatus(Status::Unavailable("engram-served is shutting down"));
  for (auto& c : connections) {
    c->Send(MessageType::kShutdown, 0, why);
    ::shutdown(c->fd, SHUT_RDWR);
  }
  for (auto& c : connections) {
    if (c->thread.joinable()) c->thread.join();
  }
  connections.clear();
  // Gathers still completing hold their connections until they answer
  // (into a closed socket); the store finishes them before it closes.
  store_.reset();
  for (int fd : table_locks_) ::close(fd);
  table_locks_.clear();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(options_.socket_path.c_str());
    listen_fd_ = -1;
  }
  if (stop_fd_ >= 0) ::close(stop_fd_);
  stop_fd_ = -1;
  log::Info("engram-served: stopped");
}

}  // namespace

Result<std::unique_ptr<NodeService>> NodeService::Start(const NodeServiceOptions& options) {
  return NodeServiceImpl::Start(options);
}

}  // namespace engram::node
