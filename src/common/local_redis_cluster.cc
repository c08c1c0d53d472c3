#include "src/common/local_redis_cluster.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "storage/redis/slot_map.h"

namespace engram {
namespace {

std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  dirs += ":/usr/bin:/usr/sbin";
  for (size_t begin = 0; begin <= dirs.size();) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = dirs.substr(begin, end - begin) + "/" + program;
    if (end > begin && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return "";
}

// `count` distinct loopback ports nobody listens on now: all bound at once
// (so distinct), then released for the servers.
Result<std::vector<uint16_t>> FreePorts(size_t count) {
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  Status failed;
  for (size_t i = 0; i < count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      failed = Status::FromErrno("free port", errno);
      if (fd >= 0) ::close(fd);
      break;
    }
    fds.push_back(fd);
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : fds) ::close(fd);
  if (!failed.ok()) return failed;
  return ports;
}

std::string ReplyText(const redisReply& r) { return std::string(r.str != nullptr ? r.str : "", r.len); }

}  // namespace

Result<std::unique_ptr<LocalRedisCluster>> LocalRedisCluster::Start(const LocalRedisClusterOptions& options) {
  const std::string server = FindOnPath("redis-server");
  std::unique_ptr<LocalRedisCluster> c(new LocalRedisCluster());
  c->cli_ = FindOnPath("redis-cli");
  if (server.empty() || c->cli_.empty()) {
    return Status::NotFound("redis-server / redis-cli not found on PATH: install the Debian packages redis-server and "
                            "redis-tools (scripts/install-deps.sh)");
  }
  c->options_ = options;
  const size_t nodes = size_t(options.masters) * (1 + options.replicas_per_master);
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/engram-redis-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return Status::FromErrno("mkdtemp " + tmpl, errno);
  c->dir_ = tmpl;
  // Client ports and cluster bus ports (cluster-port), all picked free: the
  // default bus port, port + 10000, may be taken or past 65535.
  ENGRAM_ASSIGN_OR_RETURN(std::vector<uint16_t> ports, FreePorts(nodes * 2));
  c->ports_.assign(ports.begin(), ports.begin() + nodes);
  for (size_t i = 0; i < nodes; ++i) {
    const std::string node_dir = c->dir_ + "/" + std::to_string(c->ports_[i]);
    std::filesystem::create_directories(node_dir);
    const std::string conf = node_dir + "/redis.conf";
    std::ofstream f(conf);
    f << "port " << c->ports_[i] << "\ncluster-port " << ports[nodes + i] << "\nbind 127.0.0.1\n"
      << "dir " << node_dir << "\ncluster-enabled yes\ncluster-config-file nodes.conf\n"
      << "cluster-node-timeout " << options.node_timeout_ms << "\n"
      // Masters that live keep serving their slots while another fails over.
      << "cluster-require-full-coverage no\n"
      // Stop at once on SIGTERM, without waiting for replicas to catch up.
      << "shutdown-timeout 0\n"
      << "save \"\"\nappendonly no\nlogfile " << node_dir << "/redis.log\nloglevel warning\n";
    if (!options.password.empty()) f << "requirepass " << options.password << "\nmasterauth " << options.password << "\n";
    f.close();
    if (!f) return Status::IOError("cannot write " + conf);
    c->servers_.push_back(ChildProcess::Start({server, conf}));
    c->killed_.push_back(false);
    if (c->servers_.back().pid() <= 0) return Status::IOError("cannot start " + server);
  }
  // Every node answers before the cluster is made.
  for (uint16_t port : c->ports_) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      auto r = c->Command(port, {"PING"});
      if (r.ok()) break;
      if (std::chrono::steady_clock::now() > deadline) return r.status().WithContext("redis-server did not start");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::vector<std::string> create = {"--cluster", "create"};
  for (uint16_t port : c->ports_) create.push_back("127.0.0.1:" + std::to_string(port));
  create.insert(create.end(), {"--cluster-replicas", std::to_string(options.replicas_per_master), "--cluster-yes"});
  ENGRAM_RETURN_IF_ERROR(c->RedisCli(create).status());
  ENGRAM_RETURN_IF_ERROR(c->WaitUntilHealthy());
  return c;
}

LocalRedisCluster::~LocalRedisCluster() {
  for (ChildProcess& s : servers_) {
    s.Kill(SIGTERM);
    if (!s.Wait(std::chrono::seconds(5))) s.Kill(SIGKILL);
    s.Wait(std::chrono::seconds(5));
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string LocalRedisCluster::Seeds() const {
  std::string out;
  for (int i = 0; i < options_.masters && size_t(i) < ports_.size(); ++i) {
    if (i != 0) out += ',';
    out.append("127.0.0.1:").append(std::to_string(ports_[i]));
  }
  return out;
}

size_t LocalRedisCluster::IndexOf(uint16_t port) const {
  for (size_t i = 0; i < ports_.size(); ++i) {
    if (ports_[i] == port) return i;
  }
  return ports_.size();
}

bool LocalRedisCluster::alive(uint16_t port) const {
  const size_t i = IndexOf(port);
  return i < ports_.size() && !killed_[i];
}

pid_t LocalRedisCluster::pid(uint16_t port) const {
  const size_t i = IndexOf(port);
  return i < ports_.size() ? servers_[i].pid() : -1;
}

Result<redis::Reply> LocalRedisCluster::Command(uint16_t port, const std::vector<std::string>& words) const {
  std::vector<std::string_view> views(words.begin(), words.end());
  ENGRAM_ASSIGN_OR_RETURN(std::vector<redis::Reply> replies,
                          redis::RunCommands(redis::NodeAddress{"127.0.0.1", port}, "", options_.password,
                                             std::span(&views, 1), 5000));
  return std::move(replies.front());
}

Result<std::string> LocalRedisCluster::NodeId(uint16_t port) const {
  ENGRAM_ASSIGN_OR_RETURN(redis::Reply r, Command(port, {"CLUSTER", "MYID"}));
  if (r->type != REDIS_REPLY_STRING) return Status::IOError("CLUSTER MYID: " + ReplyText(*r));
  return ReplyText(*r);
}

Result<uint16_t> LocalRedisCluster::MasterOfSlot(uint16_t slot) const {
  Status last = Status::Unavailable("no live node");
  for (uint16_t port : ports_) {
    if (!alive(port)) continue;
    auto r = Command(port, {"CLUSTER", "SLOTS"});
    if (!r.ok()) {
      last = r.status();
      continue;
    }
    ENGRAM_ASSIGN_OR_RETURN(auto ranges, redis::ParseClusterSlots(**r, {"127.0.0.1", port}));
    for (const auto& range : ranges) {
      if (slot >= range.first && slot <= range.last) return range.master.port;
    }
    return Status::NotFound("slot " + std::to_string(slot) + " is served by no master");
  }
  return last;
}

Result<std::string> LocalRedisCluster::RedisCli(const std::vector<std::string>& args, int timeout_s) const {
  std::vector<std::string> argv = {cli_};
  if (!options_.password.empty()) argv.insert(argv.end(), {"-a", options_.password, "--no-auth-warning"});
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess p = ChildProcess::Start(argv, /*merge_stderr=*/true);
  std::string out;
  // Read everything it prints, until it ends.
  p.WaitForLineWhere([&out](const std::string& line) {
    out += line + "\n";
    return false;
  }, std::chrono::seconds(timeout_s));
  auto st = p.Wait(std::chrono::seconds(5));
  if (!st || !WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
    return Status::IOError("redis-cli " + (args.empty() ? std::string() : args[0] + " " + (args.size() > 1 ? args[1] : "")) +
                           " failed: " + out);
  }
  return out;
}

Status LocalRedisCluster::WaitUntilHealthy(uint32_t timeout_ms) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string last;
  for (;;) {
    bool ok = true;
    for (uint16_t port : ports_) {
      if (!alive(port)) continue;
      auto r = Command(port, {"CLUSTER", "INFO"});
      const std::string info = r.ok() ? ReplyText(**r) : r.status().ToString();
      if (info.find("cluster_state:ok") == std::string::npos || info.find("cluster_slots_ok:16384") == std::string::npos) {
        ok = false;
        last = std::to_string(port) + ": " + info.substr(0, 200);
        break;
      }
    }
    if (ok) return Status::OK();
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::DeadlineExceeded("redis cluster not healthy within " + std::to_string(timeout_ms) + " ms: " + last);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status LocalRedisCluster::WaitForReplicas(uint32_t timeout_ms) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    bool synced = true;
    for (uint16_t port : ports_) {
      if (!alive(port)) continue;
      auto r = Command(port, {"INFO", "replication"});
      if (!r.ok()) return r.status();
      const std::string info = ReplyText(**r);
      if (info.find("role:master") == std::string::npos) continue;
      const size_t at = info.find("master_repl_offset:");
      const std::string offset = at == std::string::npos ? "" : info.substr(at + 19, info.find('\r', at) - at - 19);
      // slaveN:ip=...,port=...,state=online,offset=O,lag=...
      for (size_t s = info.find("slave"); s != std::string::npos; s = info.find("slave", s + 1)) {
        const size_t line_end = info.find('\r', s);
        const std::string line = info.substr(s, line_end - s);
        const size_t o = line.find("offset=");
        if (line.find("ip=") == std::string::npos || o == std::string::npos) continue;
        const std::string replica_offset = line.substr(o + 7, line.find(',', o) - o - 7);
        if (replica_offset != offset || line.find("state=online") == std::string::npos) synced = false;
      }
    }
    if (synced) return Status::OK();
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::DeadlineExceeded("redis replicas did not catch up within " + std::to_string(timeout_ms) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status LocalRedisCluster::Kill(uint16_t port) {
  const size_t i = IndexOf(port);
  if (i >= ports_.size()) return Status::InvalidArgument("no redis node on port " + std::to_string(port));
  servers_[i].Kill(SIGKILL);
  if (!servers_[i].Wait(std::chrono::seconds(10))) return Status::Internal("redis node did not die");
  killed_[i] = true;
  return Status::OK();
}

}  // namespace engram
