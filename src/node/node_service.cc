#include "src/node/node_service.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <thread>
#include <unordered_map>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include "src/node/client_name.h"
#include "src/node/fair_miss_scheduler.h"
#include "src/node/inflight_rows.h"
#include "src/node/messages.h"
#include "src/node/service_connection.h"
#include "src/node/shared_cache_memory.h"
#include "src/node/socket_claim.h"
#include "src/node/wire.h"
#include "src/store/store_impl.h"
#include "src/store/table_state.h"
#include "storage/log.h"
#include "storage/mutex.h"
#include "storage/redis/redis_url.h"
#include "storage/thread_annotations.h"

namespace engram::node {
namespace {

namespace asio = boost::asio;
using Local = asio::local::stream_protocol;

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

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}

// Each field the larger of the two: a client's counters are cumulative, so
// a report lower than the last (a client that lies, or restarted its
// counting) never takes a series back.
void MergeMonotonic(ClientCounters& into, const ClientCounters& report) {
  for (uint64_t ClientCounters::*f : kClientCounterFields) into.*f = std::max(into.*f, report.*f);
}

void AddSaturating(ClientCounters& into, const ClientCounters& more) {
  for (uint64_t ClientCounters::*f : kClientCounterFields) into.*f = SaturatingAdd(into.*f, more.*f);
}

// A gather a client asked for, answered once all its units have landed:
// the rows go out as the answer's tail, straight from this buffer.
struct GatherAnswer {
  GatherAnswer(uint64_t request_id, std::vector<uint64_t> ids, uint32_t record)
      : request_id(request_id), ids(std::move(ids)), record(record) {}

  const uint64_t request_id;
  const std::vector<uint64_t> ids;
  const uint32_t record;
  std::atomic<uint32_t> units_left{0};

  Mutex mu;
  GatherResult result GUARDED_BY(mu);
  std::vector<size_t> failed GUARDED_BY(mu);

  // A unit of rows [begin, ...) has its result; true for the last one.
  bool UnitDone(size_t begin, const GatherResult& part) {
    {
      MutexLock lock(&mu);
      for (const GatherResultFieldInfo& f : kGatherResultFields) result.*f.member += part.*f.member;
      if (result.status.ok() && !part.status.ok()) result.status = part.status;
      for (size_t p : part.failed_positions) failed.push_back(begin + p);
    }
    return units_left.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }
  GatherResult Final() {
    MutexLock lock(&mu);
    GatherResult r = std::move(result);
    r.rows = ids.size();
    r.distinct_rows = ids.size();
    std::sort(failed.begin(), failed.end());
    r.failed_positions = std::move(failed);
    return r;
  }
};

// One unit's rows, read into this buffer and sent from it as a kGatherPart.
struct UnitRows {
  explicit UnitRows(size_t bytes) : bytes(bytes) {}
  UninitializedBytes bytes;
};

// What a client connection has that the service keeps: its tables, its
// name, its counters, and whether it is still there.
class Client;

class NodeServiceImpl final : public NodeService {
 public:
  ~NodeServiceImpl() override { Stop(); }

  static Result<std::unique_ptr<NodeService>> Start(const NodeServiceOptions& options);

  void Stop() override;
  size_t client_count() const override {
    MutexLock lock(&clients_mu_);
    return clients_.size();
  }
  uint16_t metrics_port() const override { return store_ ? store_->metrics_port() : 0; }
  std::string MetricsText() const override { return store_ ? store_->MetricsText() : std::string(); }

  // From the clients' connections (each in its strand).
  void OnMessage(Client& client, const std::shared_ptr<ServiceConnection>& conn, Message m);
  void OnClosed(Client& client);
  // A client that reads none of its answers: its queued reads wait.
  void OnStalled(Client& client, bool stalled);

 private:
  NodeServiceImpl() = default;

  Status TakeTables();
  void Accept();
  void Admit(Local::socket socket);
  void Greet(Client& client, const std::shared_ptr<ServiceConnection>& conn, const Message& m);
  // The hello's tables against the service's: the welcome, or why not.
  Result<Welcome> Match(Client& client, const Hello& hello);
  std::string UniqueLabel(const std::string& name, const Client& client) const REQUIRES(clients_mu_);
  // A request of a greeted client. A malformed request is an error that
  // ends the connection; bad row IDs are answered with an error.
  Status Request(Client& client, const std::shared_ptr<ServiceConnection>& conn, Message& m);
  void GatherRows(Client& client, const std::shared_ptr<ServiceConnection>& conn, uint64_t request_id,
                  uint32_t table, std::vector<uint64_t> ids);
  // One unit of a gather's rows, on a gather thread.
  void GatherUnit(const std::shared_ptr<GatherAnswer>& answer, const std::shared_ptr<ServiceConnection>& connection,
                  uint32_t table, size_t begin, size_t count);
  // A gather thread: takes the clients' units in the scheduler's order and
  // reads each to its end, until Stop.
  void GatherLoop();
  void ReadAhead(Client& client, uint32_t table, std::vector<uint64_t> ids);
  // Runs `call` on the blocking pool once every read-ahead the client asked
  // for before it has landed, then answers kDone.
  void AfterReadAheads(Client& client, const std::shared_ptr<ServiceConnection>& conn, uint64_t request_id,
                       std::function<void()> call);
  void AddClientMetrics(MetricsSnapshot& m) const;

  NodeServiceOptions options_;
  int gid_ = -1;
  std::unique_ptr<SocketClaim> claim_;
  std::unique_ptr<SharedCacheMemory> memory_;
  std::unique_ptr<StoreImpl> store_;
  std::vector<std::unique_ptr<InflightRows>> inflight_;  // per table
  std::unique_ptr<FairMissScheduler> scheduler_;
  std::vector<FileIdentity> table_ids_;
  std::vector<FileIdentity> manifest_ids_;  // per table; dev = ino = 0 when not by manifest
  std::vector<int> table_locks_;            // flock'd descriptors of the table files

  asio::io_context io_;
  std::unique_ptr<Local::acceptor> acceptor_;
  std::unique_ptr<asio::steady_timer> accept_retry_;
  std::vector<std::thread> threads_;
  // Store calls that wait (read-aheads landing, warm-up, cache memory, a
  // release): never on a connection's thread.
  std::unique_ptr<asio::thread_pool> waits_;
  // The threads that read the units of clients' misses (gather_threads).
  std::vector<std::thread> gather_threads_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> next_client_id_{1};
  std::atomic<uint64_t> failed_answers_{0};  // sends refused (over the limit), each failing its request

  Mutex stop_mu_;
  bool stopped_ GUARDED_BY(stop_mu_) = false;

  mutable Mutex clients_mu_;
  CondVar clients_gone_;
  std::unordered_map<uint64_t, std::shared_ptr<Client>> clients_ GUARDED_BY(clients_mu_);
  // Counters of clients that have gone, so node totals never go down.
  ClientCounters departed_ GUARDED_BY(clients_mu_);
  uint64_t departed_clients_ GUARDED_BY(clients_mu_) = 0;
};

class Client final : public ServiceConnection::Handler {
 public:
  Client(NodeServiceImpl* service, uint64_t id) : service_(service), id_(id) {}

  void OnMessage(const std::shared_ptr<ServiceConnection>& c, Message m) override {
    service_->OnMessage(*this, c, std::move(m));
  }
  void OnClosed(ServiceConnection&) override { service_->OnClosed(*this); }
  void OnStalled(ServiceConnection&, bool stalled) override { service_->OnStalled(*this, stalled); }

  uint64_t id() const { return id_; }  // also its read-ahead pin owner
  std::shared_ptr<ServiceConnection> conn;

  // In the connection's strand only.
  bool greeted = false;
  std::vector<uint32_t> tables;  // the client's table i is the service's tables[i]

  // Starts a unit of its work unless it has gone: the check and the start
  // are one step against OnClosed, so no read-ahead of a client that has
  // gone registers pins after its pins were released.
  template <typename Fn>
  bool StartIfPresent(Fn&& start) EXCLUDES(start_mu_) {
    MutexLock lock(&start_mu_);
    if (gone_) return false;
    start();
    return true;
  }
  void MarkGone() EXCLUDES(start_mu_) {
    MutexLock lock(&start_mu_);
    gone_ = true;
  }

  // Read-aheads asked for and not yet landed, and what waits for them.
  void ReadAheadQueued() EXCLUDES(read_ahead_mu_) {
    MutexLock lock(&read_ahead_mu_);
    ++read_aheads_;
  }
  void ReadAheadLanded() EXCLUDES(read_ahead_mu_) {
    std::vector<std::function<void()>> run;
    {
      MutexLock lock(&read_ahead_mu_);
      if (--read_aheads_ != 0) return;
      run.swap(after_read_aheads_);
    }
    for (auto& f : run) f();
  }
  void WhenReadAheadsLanded(std::function<void()> f) EXCLUDES(read_ahead_mu_) {
    {
      MutexLock lock(&read_ahead_mu_);
      if (read_aheads_ != 0) {
        after_read_aheads_.push_back(std::move(f));
        return;
      }
    }
    f();
  }

  mutable Mutex mu;
  std::string label GUARDED_BY(mu);  // its `client` label, unique among live clients; empty before the hello
  ClientCounters counters GUARDED_BY(mu);

 private:
  NodeServiceImpl* const service_;
  const uint64_t id_;
  Mutex start_mu_;
  bool gone_ GUARDED_BY(start_mu_) = false;
  Mutex read_ahead_mu_;
  uint64_t read_aheads_ GUARDED_BY(read_ahead_mu_) = 0;
  std::vector<std::function<void()>> after_read_aheads_ GUARDED_BY(read_ahead_mu_);
};

// What a gather's answer costs the client's connection besides its rows:
// the done message, and a part's header.
constexpr uint64_t kGatherDoneBytes = 4096;
constexpr uint64_t kPartOverheadBytes = 64;

OutgoingMessage ErrorAnswer(uint64_t request_id, const Status& s) {
  return OutgoingMessage(MessageType::kError, request_id, EncodeStatus(s));
}

// The row IDs of a request, checked before anything is done with them (see
// CheckRowIds): every one in the table. A row asked for twice (a client
// sends each once, but nothing makes it) is read once, by InflightRows.
Status CheckRows(const TableState& t, std::span<const uint64_t> ids) {
  return CheckRowIds(ids, t.file->row_count(), /*distinct=*/false, t.name);
}

Result<std::unique_ptr<NodeService>> NodeServiceImpl::Start(const NodeServiceOptions& options) {
  if (options.socket_path.empty()) return Status::InvalidArgument("engram-served: no socket path given");
  if (options.socket_path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return Status::InvalidArgument("engram-served: socket path longer than " +
                                   std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes: " +
                                   options.socket_path);
  }
  if (!options.store.node.empty()) return Status::InvalidArgument("engram-served: the service is not a client");
  if (options.threads == 0) return Status::InvalidArgument("engram-served: --threads must be at least 1");
  std::unique_ptr<NodeServiceImpl> s(new NodeServiceImpl());
  s->options_ = options;
  if (!options.group.empty()) {
    const group* g = ::getgrnam(options.group.c_str());
    if (g == nullptr) return Status::InvalidArgument("engram-served: no group named '" + options.group + "'");
    s->gid_ = static_cast<int>(g->gr_gid);
  }
  // The path first: a second service on it stops here, before it opens
  // anything or touches what the first one serves.
  ENGRAM_ASSIGN_OR_RETURN(s->claim_, SocketClaim::Take(options.socket_path));
  ENGRAM_ASSIGN_OR_RETURN(const int listen_fd, s->claim_->Bind(s->gid_));
  s->acceptor_ = std::make_unique<Local::acceptor>(s->io_);
  boost::system::error_code ec;
  s->acceptor_->assign(Local(), listen_fd, ec);
  if (ec) {
    ::close(listen_fd);
    return Status::Internal("engram-served: adopt the listening socket: " + ec.message());
  }
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
  // Every region is placed: from now on no client may map the memory
  // writable, nor may it change size under their mappings.
  ENGRAM_RETURN_IF_ERROR(s->memory_->Seal());
  ENGRAM_RETURN_IF_ERROR(s->TakeTables());
  for (size_t t = 0; t < s->store_->table_count(); ++t) s->inflight_.push_back(std::make_unique<InflightRows>());
  if (options.gather_threads == 0) return Status::InvalidArgument("engram-served: --gather-threads must be at least 1");
  s->scheduler_ = std::make_unique<FairMissScheduler>(options.miss_quantum_rows);
  s->waits_ = std::make_unique<asio::thread_pool>(2);
  for (uint32_t i = 0; i < options.gather_threads; ++i) s->gather_threads_.emplace_back([raw] { raw->GatherLoop(); });
  s->acceptor_->listen(128, ec);
  if (ec) return Status::IOError("engram-served: listen on " + options.socket_path + ": " + ec.message());
  s->accept_retry_ = std::make_unique<asio::steady_timer>(s->io_);
  s->Accept();
  for (uint32_t i = 0; i < options.threads; ++i) s->threads_.emplace_back([raw] { raw->io_.run(); });
  log::Info("engram-served: serving {} table(s) on {} ({} B of shared cache memory, {} threads)",
            s->store_->table_count(), options.socket_path, s->memory_->allocated(), options.threads);
  return std::unique_ptr<NodeService>(std::move(s));
}

Status NodeServiceImpl::TakeTables() {
  for (size_t t = 0; t < store_->table_count(); ++t) {
    const TableState& ts = store_->table_state(t);
    const std::string& path = ts.file->path();
    if (ts.remote) {
      // A table in a Redis Cluster: no file to identify or lock; clients
      // name it by its redis:// URL (matched by the table's name in the
      // cluster).
      table_ids_.push_back(FileIdentity{});
      manifest_ids_.push_back(FileIdentity{});
      continue;
    }
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
        return Status::Unavailable("engram-served: table '" + ts.name + "' (" + path +
                                   ") is already served by another running engram-served");
      }
      return Status::FromErrno("engram-served: lock " + path, err);
    }
  }
  return Status::OK();
}

void NodeServiceImpl::Accept() {
  acceptor_->async_accept([this](boost::system::error_code ec, Local::socket socket) {
    if (stopping_.load()) return;
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors (EMFILE), memory, ...: this connection is
      // refused, the service goes on, and tries again in a moment rather
      // than spinning on a queue it cannot take from.
      log::Warn("engram-served: could not accept a connection: {}", ec.message());
      accept_retry_->expires_after(std::chrono::milliseconds(50));
      accept_retry_->async_wait([this](boost::system::error_code e) {
        if (!e && !stopping_.load()) Accept();
      });
      return;
    }
    try {
      Admit(std::move(socket));
    } catch (const std::exception& e) {
      log::Warn("engram-served: refused a connection: {}", e.what());
    }
    Accept();
  });
}

void NodeServiceImpl::Admit(Local::socket socket) {
  ServiceConnection::Limits limits;
  limits.hello_timeout = std::chrono::milliseconds(options_.hello_timeout_ms);
  limits.send_timeout = std::chrono::milliseconds(options_.send_timeout_ms);
  limits.max_reserved_answer_bytes = options_.max_answer_bytes_per_client;
  limits.failed_sends = &failed_answers_;
  const uint64_t id = next_client_id_.fetch_add(1);
  auto client = std::make_shared<Client>(this, id);
  client->conn = std::make_shared<ServiceConnection>(io_, std::move(socket), id, limits, client);
  size_t live;
  {
    MutexLock lock(&clients_mu_);
    live = clients_.size();
    if (live < options_.max_clients) {
      clients_.emplace(id, client);
      client->conn->Start();
      return;
    }
  }
  log::Warn("engram-served: refusing a client (pid {}): {} clients connected already", client->conn->pid(), live);
  // Not one of the service's clients: it is told why, and its connection
  // ends (the connection holds `client` until then).
  client->conn->SendAndClose(ErrorAnswer(
      0, Status::ResourceExhausted("engram-served: " + std::to_string(live) +
                                   " clients are connected, the most it serves (--max-clients)")));
}

void NodeServiceImpl::OnMessage(Client& client, const std::shared_ptr<ServiceConnection>& conn, Message m) {
  if (!client.greeted) {
    Greet(client, conn, m);
    return;
  }
  if (Status s = Request(client, conn, m); !s.ok()) {
    std::string label;
    {
      MutexLock lock(&client.mu);
      label = client.label;
    }
    log::Warn("engram-served: client '{}' (pid {}) sent a bad request: {}; disconnecting it", label, conn->pid(),
              s.ToString());
    conn->SendAndClose(ErrorAnswer(m.request_id, s));
  }
}

void NodeServiceImpl::Greet(Client& client, const std::shared_ptr<ServiceConnection>& conn, const Message& m) {
  if (m.type != MessageType::kHello) {
    log::Warn("engram-served: a client (pid {}) sent no hello first; disconnecting it", conn->pid());
    conn->SendAndClose(
        ErrorAnswer(m.request_id, Status::InvalidArgument("node protocol: the first message must be a hello")));
    return;
  }
  Result<Welcome> welcome = [&]() -> Result<Welcome> {
    ENGRAM_ASSIGN_OR_RETURN(Hello hello, DecodeHello(m.payload));
    ENGRAM_RETURN_IF_ERROR(CheckClientName(hello.client_name));
    return Match(client, hello);
  }();
  if (!welcome.ok()) {
    log::Warn("engram-served: refused a client (pid {}): {}", conn->pid(), welcome.status().ToString());
    conn->SendAndClose(ErrorAnswer(m.request_id, welcome.status()));
    return;
  }
  auto memory_fd = memory_->OpenReadOnly();
  if (!memory_fd.ok()) {
    log::Warn("engram-served: refused a client (pid {}): {}", conn->pid(), memory_fd.status().ToString());
    conn->SendAndClose(ErrorAnswer(m.request_id, memory_fd.status()));
    return;
  }
  client.greeted = true;
  std::string label;
  {
    MutexLock lock(&client.mu);
    label = client.label;
  }
  conn->Greeted("client '" + label + "' (pid " + std::to_string(conn->pid()) + ")");
  conn->Send(OutgoingMessage(MessageType::kWelcome, m.request_id, Encode(*welcome), nullptr, {}, *memory_fd));
  log::Info("engram-served: client '{}' (pid {}) connected", label, conn->pid());
}

Result<Welcome> NodeServiceImpl::Match(Client& client, const Hello& hello) {
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
  std::vector<uint32_t> tables;
  for (const HelloTable& asked : hello.tables) {
    const bool by_manifest = !asked.manifest.empty();
    FileIdentity id{};
    const bool by_url = !by_manifest && redis::IsRedisUrl(asked.path);
    std::string remote_name;
    if (by_url) {
      auto url = redis::ParseRedisUrl(asked.path);
      if (!url.ok()) return url.status().WithContext("the client's table");
      remote_name = url->name;
    } else if (by_manifest || !asked.path.empty()) {
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
      const TableState& ts = store_->table_state(t);
      const bool same_file = by_url        ? ts.remote && ts.remote->table_name() == remote_name
                             : by_manifest ? manifest_ids_[t] == id && manifest_ids_[t] != FileIdentity{}
                                           : !ts.remote && table_ids_[t] == id;
      if (same_file && (asked.name.empty() || asked.name == store_->table_state(t).name)) match = t;
    }
    if (!match) {
      return Status::InvalidArgument("this engram-served does not serve the client's table " +
                                     (asked.name.empty() ? std::string() : "'" + asked.name + "' ") + "(" +
                                     (by_manifest ? "manifest " + asked.manifest : asked.path) +
                                     "); it serves: " + served());
    }
    taken[*match] = true;
    tables.push_back(*match);
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
  client.tables = std::move(tables);
  {
    MutexLock lock(&clients_mu_);
    const std::string name = hello.client_name.empty() ? std::to_string(client.conn->pid()) : hello.client_name;
    std::string label = UniqueLabel(name, client);
    MutexLock client_lock(&client.mu);
    client.label = std::move(label);
  }
  return w;
}

std::string NodeServiceImpl::UniqueLabel(const std::string& name, const Client& client) const {
  // Two clients of one name would make two series of one label set: the
  // later one is told apart by its connection number.
  for (const auto& [id, other] : clients_) {
    if (other.get() == &client) continue;
    MutexLock lock(&other->mu);
    if (other->label == name) return name + "#" + std::to_string(client.id());
  }
  return name;
}

Status NodeServiceImpl::Request(Client& client, const std::shared_ptr<ServiceConnection>& conn, Message& m) {
  auto table_of = [&client](uint32_t asked) -> Result<uint32_t> {
    if (asked >= client.tables.size()) {
      return Status::InvalidArgument("node protocol: no table " + std::to_string(asked));
    }
    return client.tables[asked];
  };
  switch (m.type) {
    case MessageType::kGather: {
      ENGRAM_ASSIGN_OR_RETURN(RowsRequest req, DecodeRowsRequest(m.payload));
      ENGRAM_ASSIGN_OR_RETURN(const uint32_t table, table_of(req.table));
      const TableState& ts = store_->table_state(table);
      const uint32_t record = ts.file->record_bytes();
      if (req.row_ids.size() > RowsPerMessage(record)) {
        return Status::InvalidArgument("node protocol: a gather of " + std::to_string(req.row_ids.size()) +
                                       " rows of " + std::to_string(record) + " B (at most " +
                                       std::to_string(RowsPerMessage(record)) + " per message)");
      }
      if (Status bad = CheckRows(ts, req.row_ids); !bad.ok()) {
        conn->Send(ErrorAnswer(m.request_id, bad));
        return Status::OK();
      }
      GatherRows(client, conn, m.request_id, table, std::move(req.row_ids));
      return Status::OK();
    }
    case MessageType::kReadAhead: {
      ENGRAM_ASSIGN_OR_RETURN(RowsRequest req, DecodeRowsRequest(m.payload));
      ENGRAM_ASSIGN_OR_RETURN(const uint32_t table, table_of(req.table));
      ENGRAM_RETURN_IF_ERROR(CheckRows(store_->table_state(table), req.row_ids));
      ReadAhead(client, table, std::move(req.row_ids));
      return Status::OK();
    }
    case MessageType::kRelease: {
      ENGRAM_ASSIGN_OR_RETURN(RowsRequest req, DecodeRowsRequest(m.payload));
      ENGRAM_ASSIGN_OR_RETURN(const uint32_t table, table_of(req.table));
      ENGRAM_RETURN_IF_ERROR(CheckRows(store_->table_state(table), req.row_ids));
      StoreImpl* store = store_.get();
      const uint64_t owner = client.id();
      AfterReadAheads(client, conn, m.request_id, [store, owner, table, ids = std::move(req.row_ids)] {
        store->ReleaseReadAheadFor(owner, table, ids);
      });
      return Status::OK();
    }
    case MessageType::kWaitReadAheads: {
      StoreImpl* store = store_.get();
      AfterReadAheads(client, conn, m.request_id, [store] { store->WaitForReadAheads(); });
      return Status::OK();
    }
    case MessageType::kWaitWarmUp: {
      StoreImpl* store = store_.get();
      AfterReadAheads(client, conn, m.request_id, [store] { store->WaitForWarmUp(); });
      return Status::OK();
    }
    case MessageType::kWaitCacheMemory: {
      StoreImpl* store = store_.get();
      AfterReadAheads(client, conn, m.request_id, [store] { store->WaitForCacheMemory(); });
      return Status::OK();
    }
    case MessageType::kHits: {
      ENGRAM_ASSIGN_OR_RETURN(HitsReport report, DecodeHitsReport(m.payload));
      ENGRAM_ASSIGN_OR_RETURN(const uint32_t table, table_of(report.table));
      ENGRAM_RETURN_IF_ERROR(CheckRows(store_->table_state(table), report.row_ids));
      if (!report.row_ids.empty()) {
        store_->table_state(table).cache->RecordHits(report.row_ids);
        // A row the client served from the cache is a row it consumed: a
        // pin of its read-ahead on it has done its job.
        store_->ConsumeReadAheadPins(table, client.id(), report.row_ids, /*served=*/true);
      }
      MutexLock lock(&client.mu);
      MergeMonotonic(client.counters, report.counters);
      return Status::OK();
    }
    case MessageType::kStats: {
      ENGRAM_ASSIGN_OR_RETURN(const uint32_t client_table, DecodeU32(m.payload));
      ENGRAM_ASSIGN_OR_RETURN(const uint32_t table, table_of(client_table));
      conn->Send(OutgoingMessage(MessageType::kStatsReply, m.request_id, Encode(store_->Stats(table))));
      return Status::OK();
    }
    case MessageType::kMetrics: {
      const std::string text = store_->MetricsText();
      conn->Send(OutgoingMessage(MessageType::kMetricsReply, m.request_id,
                                 std::vector<uint8_t>(text.begin(), text.end())));
      return Status::OK();
    }
    default:
      return Status::InvalidArgument("node protocol: unexpected message type " +
                                     std::to_string(static_cast<unsigned>(m.type)));
  }
}

void NodeServiceImpl::GatherRows(Client& client, const std::shared_ptr<ServiceConnection>& conn,
                                 uint64_t request_id, uint32_t table, std::vector<uint64_t> ids) {
  const uint32_t record = store_->record_bytes(table);
  // The client missed these rows: its pins of them (a read-ahead that
  // landed after its lookup) are no use to it now.
  store_->ConsumeReadAheadPins(table, client.id(), ids, /*served=*/false);
  auto answer = std::make_shared<GatherAnswer>(request_id, std::move(ids), record);
  const size_t n = answer->ids.size();
  // What the answer will take until the client reads it: its rows (in
  // parts) and their headers. Each part gives back its share once sent.
  conn->Reserve(kGatherDoneBytes + n * (uint64_t{record} + sizeof(uint64_t)) + (n / 16 + 1) * kPartOverheadBytes);
  if (n == 0) {
    WireWriter w;
    EncodeGatherResult(answer->Final(), &w);
    conn->Send(OutgoingMessage(MessageType::kGatherDone, request_id, std::move(w.bytes())), kGatherDoneBytes);
    return;
  }
  // Units of at most a quantum of rows, each ending at a block's end: a
  // client sends its misses in row order, so the rows of one block are
  // neighbours and one unit reads the block once for all of them.
  // (And at most 16 MiB of rows, so that a part's message is within the
  // protocol's limit whatever the record size.)
  const uint32_t quantum = std::min(scheduler_->quantum_rows(), RowsPerMessage(record));
  const TableState& ts = store_->table_state(table);
  const bool by_block = ts.shard_files.empty();  // a reference table's rows lie in its shards' blocks
  std::vector<std::pair<size_t, size_t>> units;  // (begin, count)
  for (size_t begin = 0; begin < n;) {
    size_t end = std::min<size_t>(begin + quantum, n);
    if (by_block && end < n) {
      // Back to the first row of the block the quantum would cut, unless
      // that block fills the whole unit.
      const uint64_t cut = ts.file->BlockOfRow(answer->ids[end]);
      size_t start = end;
      while (start > begin && ts.file->BlockOfRow(answer->ids[start - 1]) == cut) --start;
      if (start > begin) end = start;
    }
    units.emplace_back(begin, end - begin);
    begin = end;
  }
  answer->units_left.store(static_cast<uint32_t>(units.size()));
  std::shared_ptr<ServiceConnection> connection = conn;
  for (const auto& [begin, count] : units) {
    scheduler_->Submit(client.id(), static_cast<uint32_t>(count),
                       [this, answer, connection, table, begin = begin, count = count] {
                         GatherUnit(answer, connection, table, begin, count);
                       });
  }
}

void NodeServiceImpl::GatherLoop() {
  FairMissScheduler::Unit unit;
  while (scheduler_->Take(&unit)) {
    unit.work();
    scheduler_->Done(unit);
    unit = {};  // its request may be done with: let it go now
  }
}

void NodeServiceImpl::GatherUnit(const std::shared_ptr<GatherAnswer>& answer,
                                 const std::shared_ptr<ServiceConnection>& connection, uint32_t table, size_t begin,
                                 size_t count) {
  const uint32_t record = answer->record;
  auto rows = std::make_shared<UnitRows>(count * size_t{record});
  auto landed = [answer, connection, begin, count, rows, record](const GatherResult& part) {
    // The unit's rows go out now, as a part of the answer; a failed row as
    // zeros, never as whatever the buffer held.
    std::vector<uint64_t> failed(part.failed_positions.begin(), part.failed_positions.end());
    for (uint64_t p : failed) std::memset(rows->bytes.data() + p * record, 0, record);
    WireWriter w;
    EncodeGatherPart(begin, static_cast<uint32_t>(count), failed, &w);
    const std::span<const uint8_t> bytes(rows->bytes);
    connection->Send(
        OutgoingMessage(MessageType::kGatherPart, answer->request_id, std::move(w.bytes()), rows, bytes),
        bytes.size() + count * sizeof(uint64_t) + kPartOverheadBytes);
    if (!answer->UnitDone(begin, part)) return;
    WireWriter done;
    EncodeGatherResult(answer->Final(), &done);
    connection->Send(OutgoingMessage(MessageType::kGatherDone, answer->request_id, std::move(done.bytes())),
                     kGatherDoneBytes);
  };
  StoreImpl* store = store_.get();
  std::vector<uint64_t> ids(answer->ids.begin() + begin, answer->ids.begin() + begin + count);
  // Rows another unit is reading are taken from its read; the rest are
  // gathered here, on this thread.
  inflight_[table]->Gather(std::move(ids), record, rows->bytes.data(),
                           [store, table](std::span<const uint64_t> unit, std::byte* dst, size_t stride,
                                          std::function<void(GatherResult)> done) {
                             done(store->GatherLeavingPins(table, unit, dst, stride));
                           },
                           std::move(landed));
}

void NodeServiceImpl::ReadAhead(Client& client, uint32_t table, std::vector<uint64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  const uint32_t quantum = scheduler_->quantum_rows();
  std::shared_ptr<Client> self;
  {
    MutexLock lock(&clients_mu_);
    auto it = clients_.find(client.id());
    if (it == clients_.end()) return;
    self = it->second;
  }
  StoreImpl* store = store_.get();
  for (size_t begin = 0; begin < ids.size(); begin += quantum) {
    const size_t count = std::min<size_t>(quantum, ids.size() - begin);
    std::vector<uint64_t> unit(ids.begin() + begin, ids.begin() + begin + count);
    client.ReadAheadQueued();
    scheduler_->Submit(client.id(), static_cast<uint32_t>(count), [self, store, table, unit = std::move(unit)]() mutable {
      // The gather thread waits for the unit to land, as for a gather's
      // unit: read-ahead takes its turns like any miss.
      Mutex mu;
      CondVar cv;
      bool landed = false;
      auto on_landed = [&mu, &cv, &landed] {
        MutexLock lock(&mu);
        landed = true;
        cv.SignalAll();
      };
      if (self->StartIfPresent([&] { store->ReadAheadFor(self->id(), table, std::move(unit), on_landed); })) {
        MutexLock lock(&mu);
        while (!landed) cv.Wait(&mu);
      }
      self->ReadAheadLanded();
    });
  }
}

void NodeServiceImpl::AfterReadAheads(Client& client, const std::shared_ptr<ServiceConnection>& conn,
                                      uint64_t request_id, std::function<void()> call) {
  asio::thread_pool* waits = waits_.get();
  std::shared_ptr<ServiceConnection> connection = conn;
  client.WhenReadAheadsLanded([waits, connection, request_id, call = std::move(call)]() mutable {
    asio::post(*waits, [connection, request_id, call = std::move(call)] {
      call();
      connection->Send(OutgoingMessage(MessageType::kDone, request_id, {}));
    });
  });
}

void NodeServiceImpl::OnStalled(Client& client, bool stalled) {
  if (stalled) {
    scheduler_->Pause(client.id());
  } else {
    scheduler_->Resume(client.id());
  }
}

void NodeServiceImpl::OnClosed(Client& client) {
  // No unit of its work starts from here on; what it queued is dropped,
  // what it still pinned is released (only its own pins).
  client.MarkGone();
  scheduler_->Forget(client.id());
  if (store_) store_->ReleaseReadAheadOwner(client.id());
  std::shared_ptr<Client> keep;  // destroyed after the lock is released
  std::string label;
  {
    MutexLock lock(&clients_mu_);
    auto it = clients_.find(client.id());
    if (it != clients_.end()) {
      keep = std::move(it->second);
      clients_.erase(it);
    }
    if (client.greeted) {
      MutexLock client_lock(&client.mu);
      AddSaturating(departed_, client.counters);
      ++departed_clients_;
      label = client.label;
    }
    clients_gone_.SignalAll();
  }
  if (client.greeted && !stopping_.load()) {
    log::Info("engram-served: client '{}' (pid {}) disconnected", label, client.conn->pid());
  }
}

void NodeServiceImpl::AddClientMetrics(MetricsSnapshot& m) const {
  struct Live {
    std::string label;
    ClientCounters counters;
    uint64_t id;
  };
  std::vector<Live> live;
  ClientCounters departed;
  uint64_t departed_clients;
  {
    MutexLock lock(&clients_mu_);
    departed = departed_;
    departed_clients = departed_clients_;
    for (const auto& [id, c] : clients_) {
      MutexLock client_lock(&c->mu);
      if (c->label.empty()) continue;  // not yet greeted
      live.push_back({c->label, c->counters, id});
    }
  }
  std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) { return a.label < b.label; });
  m.AddGauge("engram_node_clients", "Clients connected to this engram-served.", {}, double(live.size()));
  m.AddCounter("engram_node_clients_departed_total", "Clients that have disconnected (or died).", {},
               double(departed_clients));
  m.AddGauge("engram_node_miss_rows_queued", "Missed and read-ahead rows of clients waiting for their turn.", {},
             double(scheduler_ ? scheduler_->rows_queued() : 0));
  m.AddGauge("engram_node_miss_rows_in_flight", "Missed and read-ahead rows of clients in the store now.", {},
             double(scheduler_ ? scheduler_->rows_in_flight() : 0));
  m.AddCounter("engram_node_failed_answers_total", "Answers the service could not send (each failed its request).",
               {}, double(failed_answers_.load(std::memory_order_relaxed)));
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
  bool first_pins = true;
  for (const Live& c : live) {
    m.AddGauge("engram_node_client_read_ahead_pins", first_pins ? "Read-ahead pins a client holds (over all tables)." : "",
               {{"client", c.label}}, double(store_ ? store_->ReadAheadPinsOf(c.id) : 0));
    first_pins = false;
  }
  for (const Field& f : kFields) {
    bool first = true;
    for (const Live& c : live) {
      const double v = double(c.counters.*f.member) * (f.seconds ? 1e-9 : 1.0);
      m.AddCounter(f.metric, first ? f.help : "", {{"client", c.label}}, v);
      first = false;
    }
    const double gone = double(departed.*f.member) * (f.seconds ? 1e-9 : 1.0);
    m.AddCounter(f.metric, first ? f.help : "", {{"client", "(departed)"}}, gone);
  }
}

void NodeServiceImpl::Stop() {
  MutexLock stop_lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  stopping_.store(true);
  asio::post(io_, [this] {
    boost::system::error_code ignored;
    if (acceptor_) acceptor_->close(ignored);
    if (accept_retry_) accept_retry_->cancel();
  });
  // Tell every client, then end the connections once that has gone out
  // (or, for a client that does not read, once the send timeout has passed).
  const std::vector<uint8_t> why = EncodeStatus(Status::Unavailable("engram-served is shutting down"));
  auto each_client = [this](const std::function<void(Client&)>& f) {
    std::vector<std::shared_ptr<Client>> clients;
    {
      MutexLock lock(&clients_mu_);
      for (auto& [id, c] : clients_) clients.push_back(c);
    }
    for (auto& c : clients) f(*c);
  };
  each_client([&why](Client& c) { c.conn->SendAndClose(OutgoingMessage(MessageType::kShutdown, 0, why)); });
  auto wait_for_clients = [this](std::chrono::milliseconds most) {
    const auto deadline = std::chrono::steady_clock::now() + most;
    MutexLock lock(&clients_mu_);
    while (!clients_.empty() && !threads_.empty() && std::chrono::steady_clock::now() < deadline) {
      clients_gone_.WaitUntil(&clients_mu_, deadline);
    }
  };
  wait_for_clients(std::chrono::milliseconds(options_.send_timeout_ms));
  each_client([](Client& c) { c.conn->Close(); });
  wait_for_clients(std::chrono::milliseconds(5000));
  // Waits that are running finish (a store call returns once its reads
  // land), and so do the units being read; their answers go nowhere.
  if (waits_) waits_->join();
  if (scheduler_) scheduler_->Stop();
  for (auto& t : gather_threads_) t.join();
  gather_threads_.clear();
  // Gathers still completing finish into their answers, which go nowhere;
  // the store finishes them before it closes (and saves the hot set).
  store_.reset();
  io_.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
  // A connection that never closed (no thread ran to close it) still holds
  // its client: let go of both.
  each_client([](Client& c) { c.conn->DropHandler(); });
  {
    MutexLock lock(&clients_mu_);
    clients_.clear();
  }
  for (int fd : table_locks_) ::close(fd);
  table_locks_.clear();
  acceptor_.reset();
  claim_.reset();  // removes the socket and the lock file
  log::Info("engram-served: stopped");
}

}  // namespace

Result<std::unique_ptr<NodeService>> NodeService::Start(const NodeServiceOptions& options) {
  return NodeServiceImpl::Start(options);
}

}  // namespace engram::node
