#include "bench/remote_command.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "engram/store.h"
#include "src/common/child_process.h"
#include "src/common/exit_codes.h"
#include "src/common/gnuplot.h"
#include "src/common/local_redis_cluster.h"
#include "src/tablegen/row_generator.h"
#include "src/tablegen/table_generator.h"
#include "storage/redis/cluster_client.h"
#include "storage/redis/cluster_slot.h"
#include "storage/redis/remote_table_keys.h"
#include "storage/redis/remote_table.h"
#include "storage/redis/remote_table_loader.h"
#include "storage/redis/slot_map.h"
#include "storage/table_file.h"

namespace engram::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kRecord = 264;
constexpr uint64_t kSeed = 42;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// CPU seconds used so far by this process, and by the cluster's servers.
double OwnCpu() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
double ChildrenCpu() {
  rusage u{};
  ::getrusage(RUSAGE_CHILDREN, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
double ProcessCpu(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields;
  for (size_t i = close + 2, j; i < s.size(); i = j + 1) {
    j = s.find(' ', i);
    if (j == std::string::npos) j = s.size();
    fields.push_back(s.substr(i, j - i));
  }
  if (fields.size() < 13) return 0;
  return double(std::stoull(fields[11]) + std::stoull(fields[12])) / double(::sysconf(_SC_CLK_TCK));
}
double ServersCpu(const LocalRedisCluster& c) {
  double sum = 0;
  for (uint16_t p : c.ports()) {
    if (c.alive(p)) sum += ProcessCpu(c.pid(p));
  }
  return sum;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

struct Rate {
  double per_second = 0;
  double own_cpu = 0;      // CPU seconds of the client side per second of wall time
  double servers_cpu = 0;  // the same, of the redis-servers
};

// Blocks read per second by `gathers` 4096-row gathers of random rows.
Result<Rate> GatherRate(Store& store, uint64_t rows, uint32_t gathers, std::mt19937_64& rng, const LocalRedisCluster* c) {
  std::vector<uint64_t> ids(4096);
  std::vector<std::byte> dst(ids.size() * kRecord);
  uint64_t blocks = 0;
  const double cpu0 = OwnCpu(), srv0 = c ? ServersCpu(*c) : 0;
  const auto t0 = Clock::now();
  for (uint32_t g = 0; g < gathers; ++g) {
    for (uint64_t& id : ids) id = rng() % rows;
    GatherResult r = store.Gather(0, ids, dst.data(), kRecord);
    if (!r.status.ok()) return r.status;
    blocks += r.blocks_read;
  }
  const double wall = Seconds(Clock::now() - t0);
  return Rate{double(blocks) / wall, (OwnCpu() - cpu0) / wall, c ? (ServersCpu(*c) - srv0) / wall : 0};
}

// 24-row gathers' readiness waits, in microseconds.
Result<std::vector<double>> SmallGatherLatencies(Store& store, uint64_t rows, uint32_t gathers, std::mt19937_64& rng) {
  std::vector<uint64_t> ids(24);
  std::vector<std::byte> dst(ids.size() * kRecord);
  std::vector<double> us;
  for (uint32_t g = 0; g < gathers; ++g) {
    for (uint64_t& id : ids) id = rng() % rows;
    const auto t0 = Clock::now();
    GatherResult r = store.Gather(0, ids, dst.data(), kRecord);
    const double took = Seconds(Clock::now() - t0) * 1e6;
    if (!r.status.ok()) return r.status;
    if (r.misses == ids.size()) us.push_back(took);  // all-miss gathers only
  }
  return us;
}

struct RedisBenchmarkResult {
  double rps = 0, p50_ms = 0, p99_ms = 0;
  Rate rate;
};

// redis-benchmark's GET of 4 KiB values on the same cluster, parsed from its
// CSV line. keys_per_master 0: the one key its SET wrote on each master (its
// default); else random keys of that many per master (-r), which a SET with
// the same range wrote first (PopulateRandomKeys).
Result<RedisBenchmarkResult> RunRedisBenchmark(const LocalRedisCluster& c, uint32_t pipeline, uint32_t clients,
                                               uint64_t requests, uint64_t keys_per_master = 0) {
  const std::string bin = "/usr/bin/redis-benchmark";
  if (::access(bin.c_str(), X_OK) != 0) return Status::NotFound("redis-benchmark not found (Debian's redis-tools)");
  const std::string port = std::to_string(c.ports()[0]);
  const double cpu0 = ChildrenCpu(), srv0 = ServersCpu(c);
  const auto t0 = Clock::now();
  std::vector<std::string> args = {bin, "-h", "127.0.0.1", "-p", port, "--cluster", "-t", "get", "-d", "4096", "-P",
                                   std::to_string(pipeline), "-c", std::to_string(clients), "-n",
                                   std::to_string(requests), "--csv"};
  if (keys_per_master != 0) {
    args.push_back("-r");
    args.push_back(std::to_string(keys_per_master));
  }
  ChildProcess p = ChildProcess::Start(args, /*merge_stderr=*/true);
  auto line = p.WaitForLine("\"GET\"", std::chrono::seconds(300));
  auto st = p.Wait(std::chrono::seconds(30));
  const double wall = Seconds(Clock::now() - t0);
  if (!line || !st) return Status::IOError("redis-benchmark gave no GET line");
  // "GET","rps","avg","min","p50","p95","p99","max"
  std::vector<std::string> f;
  for (size_t i = 0; i < line->size();) {
    const size_t a = line->find('"', i);
    if (a == std::string::npos) break;
    const size_t b = line->find('"', a + 1);
    f.push_back(line->substr(a + 1, b - a - 1));
    i = b + 1;
  }
  if (f.size() < 7) return Status::IOError("redis-benchmark line: " + *line);
  RedisBenchmarkResult r;
  r.rps = std::stod(f[1]);
  r.p50_ms = std::stod(f[4]);
  r.p99_ms = std::stod(f[6]);
  r.rate = Rate{r.rps, (ChildrenCpu() - cpu0) / wall, (ServersCpu(c) - srv0) / wall};
  return r;
}

// The cluster client alone (no store): GETs of random blocks into buffers,
// `batch` per Run, as many as `gathers` 4096-row gathers read.
Result<Rate> ClientRate(redis::ClusterClient& client, const redis::RemoteTableKeys& keys, uint64_t blocks,
                        uint32_t gathers, std::mt19937_64& rng, const LocalRedisCluster& c) {
  constexpr size_t kBatch = 3500;
  std::vector<std::string> names(kBatch);
  std::vector<std::byte> buffer(kBatch * 4096);
  std::vector<redis::ClusterCommand> cmds;
  uint64_t done = 0;
  const double cpu0 = OwnCpu(), srv0 = ServersCpu(c);
  const auto t0 = Clock::now();
  for (uint32_t g = 0; g < gathers; ++g) {
    cmds.clear();
    for (size_t i = 0; i < kBatch; ++i) {
      keys.Block(rng() % blocks, &names[i]);
      cmds.push_back(redis::ClusterCommand::Get(names[i], std::span(buffer.data() + i * 4096, 4096)));
    }
    client.Run(cmds);
    for (const auto& cmd : cmds) {
      if (!cmd.status.ok()) return cmd.status;
    }
    done += kBatch;
  }
  const double wall = Seconds(Clock::now() - t0);
  return Rate{double(done) / wall, (OwnCpu() - cpu0) / wall, (ServersCpu(c) - srv0) / wall};
}

// The keys on the cluster's masters (those at start): DBSIZE summed.
Result<uint64_t> KeysOnMasters(const LocalRedisCluster& c) {
  uint64_t keys = 0;
  for (size_t m = 0; m < 3 && m < c.ports().size(); ++m) {
    auto reply = c.Command(c.ports()[m], {"DBSIZE"});
    if (!reply.ok()) return reply.status();
    if ((*reply)->type != REDIS_REPLY_INTEGER) return Status::IOError("DBSIZE gave no integer");
    keys += static_cast<uint64_t>((*reply)->integer);
  }
  return keys;
}

// Writes redis-benchmark's random keys (-r keys_per_master on each master)
// with 4 KiB values: SETs of random keys in that range, 12 per key, so that
// a key is left unwritten with odds of about e^-12. Returns the fraction of
// them that is present.
Result<double> PopulateRandomKeys(const LocalRedisCluster& c, uint64_t keys_per_master) {
  const uint64_t masters = 3;
  auto before = KeysOnMasters(c);
  if (!before.ok()) return before.status();
  ChildProcess set = ChildProcess::Start(
      {"/usr/bin/redis-benchmark", "-h", "127.0.0.1", "-p", std::to_string(c.ports()[0]), "--cluster", "-t", "set",
       "-d", "4096", "-r", std::to_string(keys_per_master), "-n", std::to_string(12 * masters * keys_per_master), "-c",
       "3", "-P", "64", "-q"},
      /*merge_stderr=*/true);
  if (!set.Wait(std::chrono::seconds(120))) return Status::IOError("redis-benchmark SET of random keys did not finish");
  auto after = KeysOnMasters(c);
  if (!after.ok()) return after.status();
  return double(*after - *before) / double(masters * keys_per_master);
}

std::string Spread(const std::vector<double>& v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.0f..%.0f", *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
  return b;
}

Result<std::unique_ptr<Store>> OpenStore(const std::string& path, uint32_t queue_depth) {
  StoreOptions o;
  o.tables.push_back({path, "t", 0});
  o.cache_bytes = 1 << 20;  // ~4,000 rows of 264 B: nearly every row misses
  o.queue_depth = queue_depth;
  auto s = Store::Open(o);
  if (s.ok()) (*s)->WaitForCacheMemory();
  return s;
}

}  // namespace

CLI::App* RegisterRemoteCommand(CLI::App& app, RemoteArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "remote",
      "A table in a local Redis Cluster (3 masters + 3 replicas, started here): block GET rate of 4096-row "
      "all-miss gathers against redis-benchmark's GET rate (4 KiB, same pipeline depth and connections), 24-row "
      "all-miss gather latency against a pipelined redis-benchmark round trip of 24 GETs, both against the same "
      "table as a local file, and a master killed while 4 threads gather");
  cmd->add_option("--dir", a.dir, "Directory for the table file (e.g. /dev/shm/x)")->required();
  cmd->add_option("--rows", a.rows, "Rows of the table (264 B each)")->capture_default_str();
  cmd->add_option("--queue-depth", a.queue_depth, "Store queue depth = GETs in flight per master")->capture_default_str();
  cmd->add_option("--repeats", a.repeats, "Rounds of each rate (median, spread)")->capture_default_str();
  cmd->add_option("--large-gathers", a.large_gathers, "4096-row gathers per round")->capture_default_str();
  cmd->add_option("--small-gathers", a.small_gathers, "24-row gathers for the latencies")->capture_default_str();
  cmd->add_option("--benchmark-requests", a.benchmark_requests,
                  "redis-benchmark GETs per round at least (its time is rounded up to 250 ms)")
      ->capture_default_str();
  cmd->add_option("--failover-seconds", a.failover_seconds, "Gathering before the master is killed")->capture_default_str();
  cmd->add_option("--chart", a.chart, "Draw the failover timeline to this PNG (data in PNG.dat)");
  return cmd;
}

int RunRemoteCommand(const RemoteArgs& a) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "engram-bench remote: %s\n", s.ToString().c_str());
    return ExitCodeFor(s);
  };
  if (a.rows < 4096 || a.repeats < 1) return fail(Status::InvalidArgument("--rows >= 4096 and --repeats >= 1"));
  auto started = LocalRedisCluster::Start();
  if (!started.ok()) return fail(started.status());
  LocalRedisCluster& cluster = **started;
  const std::string file = a.dir + "/remote-bench.engram";
  GenerateTableOptions g;
  g.rows = a.rows;
  g.seed = kSeed;
  g.sync = false;
  if (Status s = GenerateTable(file, g); !s.ok()) return fail(s);
  auto url = redis::ParseRedisUrl(cluster.Url("bench"));
  auto source = redis::OpenFileBlockSource(file);
  if (!url.ok() || !source.ok()) return fail(url.ok() ? source.status() : url.status());
  const auto load0 = Clock::now();
  auto loaded = redis::LoadTable(*url, **source, {});
  if (!loaded.ok()) return fail(loaded.status());
  const double load_s = Seconds(Clock::now() - load0);
  std::printf("cluster: 3 masters + 3 replicas on loopback (%s); table %llu rows, %llu blocks, loaded in %.2f s "
              "(%.0f MB/s)\n",
              cluster.Seeds().c_str(), (unsigned long long)a.rows, (unsigned long long)loaded->blocks, load_s,
              double(loaded->blocks) * 4096 / load_s / 1e6);
  if (Status s = cluster.WaitForReplicas(); !s.ok()) return fail(s);
  auto remote = OpenStore(cluster.Url("bench"), a.queue_depth);
  auto local = OpenStore(file, a.queue_depth);
  if (!remote.ok() || !local.ok()) return fail(remote.ok() ? local.status() : remote.status());
  std::printf("local file: %s\n", (*local)->io_description().c_str());

  // redis-benchmark's GETs read the key its SETs write on each master (no
  // -r: one key per node), 4 KiB like a block.
  {
    ChildProcess set = ChildProcess::Start({"/usr/bin/redis-benchmark", "-h", "127.0.0.1", "-p",
                                            std::to_string(cluster.ports()[0]), "--cluster", "-t", "set", "-d", "4096",
                                            "-n", "3000", "-c", "3", "-q"},
                                           /*merge_stderr=*/true);
    if (!set.Wait(std::chrono::seconds(60))) return fail(Status::IOError("redis-benchmark SET did not finish"));
  }
  // The like-for-like baseline: random keys over as many 4 KiB values as the
  // table has blocks (a third on each master), as the store's GETs are; the
  // one key of redis-benchmark's default is read from the server's CPU caches.
  const uint64_t random_keys_per_master = (loaded->blocks + 2) / 3;
  auto populated = PopulateRandomKeys(cluster, random_keys_per_master);
  if (!populated.ok()) return fail(populated.status());
  // 1. Client cost: block GETs/s of 4096-row gathers vs redis-benchmark GETs/s.
  std::mt19937_64 rng(1);
  // In cluster mode redis-benchmark runs a thread per node and its main loop
  // notices the end only on its 250 ms throughput tick, so its time (and GET
  // rate) is rounded up to a multiple of 250 ms: it runs long enough here that
  // the rounding is a few percent (it makes redis-benchmark look slower).
  const uint64_t bench_requests = std::max<uint64_t>(uint64_t(a.large_gathers) * 3500, a.benchmark_requests);
  std::vector<double> theirs_hot, ratios_hot, rb_hot_srv_cpu;
  std::vector<double> ours, theirs, ratios, local_rates, own_cpu, srv_cpu, rb_cpu, rb_srv_cpu, alone, alone_ratios,
      alone_cpu;
  auto file_table = TableFile::Open(file);
  if (!file_table.ok()) return fail(file_table.status());
  const redis::RemoteTableKeys keys("bench", (*file_table)->fingerprint());
  redis::ClusterOptions client_options = redis::ClusterOptionsFor(*url);
  client_options.pipeline_depth = a.queue_depth;
  auto client = redis::ClusterClient::Connect(client_options);
  if (!client.ok()) return fail(client.status());
  for (uint32_t r = 0; r < a.repeats; ++r) {
    auto bare = ClientRate(**client, keys, loaded->blocks, a.large_gathers, rng, cluster);
    if (!bare.ok()) return fail(bare.status());
    auto mine = GatherRate(**remote, a.rows, a.large_gathers, rng, &cluster);
    if (!mine.ok()) return fail(mine.status());
    auto rb = RunRedisBenchmark(cluster, a.queue_depth, 3, bench_requests, random_keys_per_master);
    if (!rb.ok()) return fail(rb.status());
    auto rb_hot = RunRedisBenchmark(cluster, a.queue_depth, 3, bench_requests);
    if (!rb_hot.ok()) return fail(rb_hot.status());
    theirs_hot.push_back(rb_hot->rps);
    ratios_hot.push_back(mine->per_second / rb_hot->rps);
    rb_hot_srv_cpu.push_back(rb_hot->rate.servers_cpu);
    auto disk = GatherRate(**local, a.rows, a.large_gathers, rng, nullptr);
    if (!disk.ok()) return fail(disk.status());
    ours.push_back(mine->per_second);
    theirs.push_back(rb->rps);
    alone.push_back(bare->per_second);
    alone_ratios.push_back(bare->per_second / rb->rps);
    alone_cpu.push_back(bare->own_cpu);
    ratios.push_back(mine->per_second / rb->rps);
    local_rates.push_back(disk->per_second);
    own_cpu.push_back(mine->own_cpu);
    srv_cpu.push_back(mine->servers_cpu);
    rb_cpu.push_back(rb->rate.own_cpu);
    rb_srv_cpu.push_back(rb->rate.servers_cpu);
  }
  std::printf("4096-row all-miss gathers (block GETs/s, median of %u, spread): store %.0f (%s), redis-benchmark GET "
              "-d 4096 -P %u -c 3 -r %llu (random keys over the table's size, %.4f of them written) %.0f (%s); ratio "
              "store/redis-benchmark %.2f (%.2f..%.2f)\n",
              a.repeats, Median(ours), Spread(ours).c_str(), a.queue_depth,
              (unsigned long long)random_keys_per_master, *populated, Median(theirs), Spread(theirs).c_str(),
              Median(ratios), *std::min_element(ratios.begin(), ratios.end()),
              *std::max_element(ratios.begin(), ratios.end()));
  std::printf("  redis-benchmark's default (one key per master, read from the servers' CPU caches): %.0f GETs/s (%s), "
              "servers %.2f cores; ratio store/it %.2f (%.2f..%.2f)\n",
              Median(theirs_hot), Spread(theirs_hot).c_str(), Median(rb_hot_srv_cpu), Median(ratios_hot),
              *std::min_element(ratios_hot.begin(), ratios_hot.end()),
              *std::max_element(ratios_hot.begin(), ratios_hot.end()));
  std::printf("  CPU (cores busy, median): store process %.2f + redis-servers %.2f; redis-benchmark %.2f + "
              "redis-servers %.2f\n",
              Median(own_cpu), Median(srv_cpu), Median(rb_cpu), Median(rb_srv_cpu));
  std::printf("  the cluster client alone (3,500 block GETs a batch, no store): %.0f GETs/s (%s), %.2f cores; ratio "
              "client/redis-benchmark %.2f (%.2f..%.2f)\n",
              Median(alone), Spread(alone).c_str(), Median(alone_cpu), Median(alone_ratios),
              *std::min_element(alone_ratios.begin(), alone_ratios.end()),
              *std::max_element(alone_ratios.begin(), alone_ratios.end()));
  std::printf("  the same gathers from the local file: %.0f blocks/s (%s); remote/local %.2f\n", Median(local_rates),
              Spread(local_rates).c_str(), Median(ours) / Median(local_rates));

  // 2. Latency of 24-row all-miss gathers vs one pipelined round trip of 24 GETs.
  auto remote_us = SmallGatherLatencies(**remote, a.rows, a.small_gathers, rng);
  auto local_us = SmallGatherLatencies(**local, a.rows, a.small_gathers, rng);
  auto rb24 = RunRedisBenchmark(cluster, 24, 1, uint64_t(a.small_gathers) * 24);
  if (!remote_us.ok() || !local_us.ok() || !rb24.ok()) {
    return fail(!remote_us.ok() ? remote_us.status() : !local_us.ok() ? local_us.status() : rb24.status());
  }
  std::printf("24-row all-miss gathers (readiness wait, us): remote p50 %.0f p99 %.0f (%zu gathers); local file p50 "
              "%.0f p99 %.0f; redis-benchmark GET -P 24 -c 1 (one pipelined round trip of 24 GETs to one master) "
              "p50 %.0f p99 %.0f\n",
              Quantile(*remote_us, 0.5), Quantile(*remote_us, 0.99), remote_us->size(), Quantile(*local_us, 0.5),
              Quantile(*local_us, 0.99), rb24->p50_ms * 1000, rb24->p99_ms * 1000);

  // 3. Failover: 4 threads gather 24 rows while block 0's master is killed,
  // 4 of them from blocks that master serves. Not one fixed row: a row every
  // gather asks for stays in the 1 MiB cache, and a gather whose other rows
  // all avoid the dead master would then succeed during the failover; 4 rows
  // of the ~66,000 on its blocks all in the ~4,000-row cache is unlikely.
  client->reset();
  const std::string key0 = keys.Block(0);
  auto victim = cluster.MasterOfSlot(redis::KeySlot(key0));
  if (!victim.ok()) return fail(victim.status());
  auto slots_reply = cluster.Command(cluster.ports()[0], {"CLUSTER", "SLOTS"});
  if (!slots_reply.ok()) return fail(slots_reply.status());
  auto slot_ranges = redis::ParseClusterSlots(**slots_reply, {"127.0.0.1", cluster.ports()[0]});
  if (!slot_ranges.ok()) return fail(slot_ranges.status());
  const uint64_t rows_per_block = (*file_table)->header().rows_per_block;
  std::vector<uint64_t> victim_blocks;  // whole blocks only: each of their rows exists
  for (uint64_t b = 0; b < a.rows / rows_per_block; ++b) {
    const uint16_t slot = redis::KeySlot(keys.Block(b));
    for (const redis::SlotRange& range : *slot_ranges) {
      if (slot >= range.first && slot <= range.last && range.master.port == *victim) victim_blocks.push_back(b);
    }
  }
  if (victim_blocks.empty()) return fail(Status::Internal("no block is on the killed master"));
  std::atomic<bool> stop{false};
  std::atomic<int64_t> kill_ns{-1};
  std::atomic<uint64_t> gathers{0}, failed{0}, not_unavailable{0}, wrong_rows{0}, lost_rows{0};
  std::mutex mu;
  std::vector<std::pair<double, bool>> timeline;  // (seconds since the kill, ok)
  double first_ok_after = -1;
  const auto t_start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 r(100 + t);
      std::vector<uint64_t> ids(24);
      std::vector<std::byte> dst(ids.size() * kRecord), want(kRecord);
      while (!stop.load()) {
        for (uint64_t& id : ids) id = r() % a.rows;
        for (size_t k = 0; k < 4; ++k) {
          ids[k] = victim_blocks[r() % victim_blocks.size()] * rows_per_block + r() % rows_per_block;
        }
        std::fill(dst.begin(), dst.end(), std::byte{0});
        GatherResult g = (*remote)->Gather(0, ids, dst.data(), kRecord);
        const double at = Seconds(Clock::now() - t_start) - (kill_ns.load() < 0 ? 1e9 : double(kill_ns.load()) * 1e-9);
        ++gathers;
        if (!g.status.ok()) {
          ++failed;
          if (g.status.code() != StatusCode::kUnavailable) ++not_unavailable;
        }
        for (size_t i = 0; i < ids.size(); ++i) {
          if (!g.RowWritten(i)) continue;
          GenerateRow(kSeed, ids[i], want);
          if (std::memcmp(dst.data() + i * kRecord, want.data(), kRecord) == 0) continue;
          bool zero = true;
          for (size_t b = 0; b < kRecord; ++b) zero &= dst[i * kRecord + b] == std::byte{0};
          ++(zero ? lost_rows : wrong_rows);
        }
        if (kill_ns.load() >= 0) {
          std::lock_guard<std::mutex> lock(mu);
          timeline.push_back({at, g.status.ok()});
          if (g.status.ok() && first_ok_after < 0) first_ok_after = at;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(a.failover_seconds));
  if (Status s = cluster.Kill(*victim); !s.ok()) return fail(s);
  kill_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t_start).count();
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard<std::mutex> lock(mu);
    if ((first_ok_after >= 0 && !timeline.empty() && timeline.back().first > first_ok_after + 1.0) ||
        Clock::now() > deadline) {
      break;
    }
  }
  stop = true;
  for (auto& th : threads) th.join();
  std::printf("failover (kill -9 of master 127.0.0.1:%u, 4 threads of 24-row gathers, 4 rows always on its "
              "slots): %llu gathers, %llu failed (%llu not Unavailable), rows wrong %llu, rows lost %llu; first "
              "successful gather %.2f s after the kill\n",
              *victim, (unsigned long long)gathers.load(), (unsigned long long)failed.load(),
              (unsigned long long)not_unavailable.load(), (unsigned long long)wrong_rows.load(),
              (unsigned long long)lost_rows.load(), first_ok_after);
  if (!a.chart.empty()) {
    // Gathers per 100 ms after the kill, ok and failed.
    std::vector<std::pair<uint64_t, uint64_t>> buckets;
    for (const auto& [at, ok] : timeline) {
      const size_t b = size_t(std::max(0.0, at) / 0.1);
      if (buckets.size() <= b) buckets.resize(b + 1);
      ++(ok ? buckets[b].first : buckets[b].second);
    }
    const std::string dat = a.chart + ".dat";
    std::ofstream out(dat);
    out << "# seconds_after_kill ok_gathers failed_gathers (per 100 ms)\n";
    for (size_t b = 0; b < buckets.size(); ++b) out << b * 0.1 << " " << buckets[b].first << " " << buckets[b].second << "\n";
    out.close();
    Status s = RunGnuplot(
        "set terminal pngcairo size 900,420\nset output ARG1\nset title ARG3\nset xlabel 'seconds after kill -9 of a "
        "master'\nset ylabel 'gathers per 100 ms'\nset style fill solid 0.6\nset key outside bottom center horizontal\n"
        "plot ARG2 using 1:2 with boxes title 'succeeded', ARG2 using 1:3 with boxes title 'failed (Unavailable)'\n",
        {a.chart, dat, "engram-bench remote: 4 threads of 24-row gathers through a master's failover"}, a.chart);
    if (!s.ok()) return fail(s);
    std::printf("chart: %s (data %s)\n", a.chart.c_str(), dat.c_str());
  }
  std::fflush(stdout);
  return wrong_rows.load() == 0 && lost_rows.load() == 0 && not_unavailable.load() == 0 && first_ok_after >= 0 ? 0 : 1;
}

}  // namespace engram::bench
