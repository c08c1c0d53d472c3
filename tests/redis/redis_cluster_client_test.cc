// The cluster client (storage/redis/cluster_client.h) on its own, against a
// real Redis Cluster of 3 masters and 3 replicas: slot hashing as the server
// computes it, routing, pipelined batches, MOVED while slots are resharded,
// ASK during a slot migration, a node that stops answering, a killed master
// and its replica's takeover, and a cluster nobody answers for.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "src/common/child_process.h"
#include "storage/redis/cluster_client.h"
#include "storage/redis/remote_table_keys.h"
#include "storage/redis/slot_map.h"
#include "tests/redis/redis_test_support.h"

namespace engram::testing {
namespace {

using redis::ClusterClient;
using redis::ClusterCommand;
using namespace std::chrono_literals;

class ClusterClientTest : public SharedRedisCluster {
 protected:
  static void SetUpTestSuite() { StartCluster(); }

  static std::unique_ptr<ClusterClient> Client(uint32_t timeout_ms = 2000) {
    redis::ClusterOptions o;
    for (uint16_t p : std::vector<uint16_t>(cluster().ports().begin(), cluster().ports().begin() + 3)) {
      o.seeds.push_back({"127.0.0.1", p});
    }
    o.timeout_ms = timeout_ms;
    auto c = ClusterClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  // SETs key -> value for every pair, pipelined; all must succeed.
  static void SetAll(ClusterClient& client, const std::vector<std::pair<std::string, std::string>>& kv) {
    std::vector<ClusterCommand> cmds;
    for (const auto& [k, v] : kv) cmds.push_back(ClusterCommand::Set(k, v));
    client.Run(cmds);
    for (const ClusterCommand& c : cmds) ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  }

  // GETs every key; returns how many came back wrong or failed.
  static size_t CountWrong(ClusterClient& client, const std::vector<std::pair<std::string, std::string>>& kv,
                           std::string* first_failure = nullptr) {
    std::vector<ClusterCommand> cmds;
    for (const auto& [k, v] : kv) cmds.push_back(ClusterCommand::Get(k));
    client.Run(cmds);
    size_t wrong = 0;
    for (size_t i = 0; i < cmds.size(); ++i) {
      const ClusterCommand& c = cmds[i];
      const bool right = c.status.ok() && c.reply->type == REDIS_REPLY_STRING &&
                         std::string(c.reply->str, c.reply->len) == kv[i].second;
      if (!right && wrong++ == 0 && first_failure) {
        *first_failure = c.status.ok() ? "wrong value for " + kv[i].first + ": type " + std::to_string(c.reply->type) +
                                             " '" + std::string(c.reply->str ? c.reply->str : "", c.reply->len) + "'"
                                       : c.status.ToString();
      }
    }
    return wrong;
  }

  static std::vector<std::pair<std::string, std::string>> Pairs(const std::string& prefix, size_t n) {
    std::vector<std::pair<std::string, std::string>> kv;
    for (size_t i = 0; i < n; ++i) kv.push_back({prefix + ":" + std::to_string(i), "value-" + prefix + "-" + std::to_string(i)});
    return kv;
  }

  static uint64_t Sum(const std::vector<redis::ClusterNodeStats>& stats, uint64_t redis::ClusterNodeStats::*field) {
    uint64_t s = 0;
    for (const auto& n : stats) s += n.*field;
    return s;
  }
};

TEST_F(ClusterClientTest, KeySlotsAgreeWithTheServersClusterKeyslot) {
  std::vector<std::string> keys = {"", "a", "foo", "{user1000}.following", "{user1000}.followers", "foo{}{bar}",
                                   "foo{{bar}}zap", "foo{bar}{zap}", "{}", "}{", "{a", "engram:t:0123456789abcdef:{12345}"};
  std::mt19937_64 rng(7);
  const std::string alphabet = "ab{}:xyz019";
  for (int i = 0; i < 300; ++i) {
    std::string k;
    for (size_t n = rng() % 12; n > 0; --n) k.push_back(alphabet[rng() % alphabet.size()]);
    keys.push_back(k);
  }
  std::vector<std::vector<std::string_view>> cmds;
  for (const std::string& k : keys) cmds.push_back({"CLUSTER", "KEYSLOT", k});
  auto replies = redis::RunCommands({"127.0.0.1", cluster().ports()[0]}, "", "", cmds, 5000);
  ASSERT_TRUE(replies.ok()) << replies.status().ToString();
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ((*replies)[i]->type, REDIS_REPLY_INTEGER);
    EXPECT_EQ(redis::KeySlot(keys[i]), (*replies)[i]->integer) << "key '" << keys[i] << "'";
  }
}

TEST_F(ClusterClientTest, ATablesBlockKeysSpreadOverEveryMaster) {
  auto slots = cluster().Command(cluster().ports()[0], {"CLUSTER", "SLOTS"});
  ASSERT_TRUE(slots.ok());
  auto ranges = redis::ParseClusterSlots(**slots, {"127.0.0.1", cluster().ports()[0]});
  ASSERT_TRUE(ranges.ok());
  std::map<uint16_t, size_t> per_master;
  const redis::RemoteTableKeys keys("layer1", 0x0123456789abcdefull);
  const size_t blocks = 3000;
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint16_t slot = redis::KeySlot(keys.Block(b));
    for (const auto& r : *ranges) {
      if (slot >= r.first && slot <= r.last) ++per_master[r.master.port];
    }
  }
  ASSERT_EQ(per_master.size(), 3u);
  for (const auto& [port, n] : per_master) {
    EXPECT_GT(n, blocks / 4) << "master " << port;
    EXPECT_LT(n, blocks * 5 / 12) << "master " << port;
  }
}

TEST_F(ClusterClientTest, RoutesEachKeyStraightToTheMasterOfItsSlot) {
  auto client = Client();
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->Masters().size(), 3u);
  const auto kv = Pairs("route", 600);
  SetAll(*client, kv);
  EXPECT_EQ(CountWrong(*client, kv), 0u);
  // Each key is on the master CLUSTER SLOTS names for it: asked directly,
  // with no redirect to follow, that master has it.
  for (size_t i = 0; i < kv.size(); i += 37) {
    auto master = cluster().MasterOfSlot(redis::KeySlot(kv[i].first));
    ASSERT_TRUE(master.ok());
    auto got = cluster().Command(*master, {"GET", kv[i].first});
    ASSERT_TRUE(got.ok());
    ASSERT_EQ((*got)->type, REDIS_REPLY_STRING) << kv[i].first;
    EXPECT_EQ(std::string((*got)->str, (*got)->len), kv[i].second);
  }
  const auto stats = client->Stats();
  EXPECT_EQ(Sum(stats, &redis::ClusterNodeStats::moved), 0u);
  EXPECT_EQ(Sum(stats, &redis::ClusterNodeStats::errors), 0u);
  EXPECT_EQ(Sum(stats, &redis::ClusterNodeStats::requests), 2 * kv.size());
  size_t masters_used = 0;
  for (const auto& n : stats) masters_used += n.requests > 0;
  EXPECT_EQ(masters_used, 3u);
}

TEST_F(ClusterClientTest, AGetIntoABufferTellsAMissingKeyFromAValueOfTheWrongSize) {
  auto client = Client();
  ASSERT_NE(client, nullptr);
  SetAll(*client, {{"sized:short", "0123456789"}, {"sized:exact", std::string(16, 'x')}});
  std::vector<std::byte> a(16), b(16), c(16);
  std::vector<ClusterCommand> cmds;
  cmds.push_back(ClusterCommand::Get("sized:missing", a));
  cmds.push_back(ClusterCommand::Get("sized:short", b));
  cmds.push_back(ClusterCommand::Get("sized:exact", c));
  client->Run(cmds);
  EXPECT_EQ(cmds[0].status.code(), StatusCode::kNotFound) << cmds[0].status.ToString();
  EXPECT_EQ(cmds[1].status.code(), StatusCode::kCorruption) << cmds[1].status.ToString();
  ASSERT_TRUE(cmds[2].status.ok()) << cmds[2].status.ToString();
  EXPECT_EQ(c, std::vector<std::byte>(16, std::byte{'x'}));
}

TEST_F(ClusterClientTest, AClusterNobodyAnswersForNamesEveryNodeTried) {
  // A port nothing listens on: bound, then released.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  const uint16_t gone = ntohs(a.sin_port);
  redis::ClusterOptions o;
  o.seeds = {{"127.0.0.1", gone}, {"localhost", gone}};
  o.timeout_ms = 500;
  auto c = ClusterClient::Connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable) << c.status().ToString();
  EXPECT_NE(c.status().message().find("127.0.0.1:" + std::to_string(gone)), std::string::npos) << c.status().ToString();
  EXPECT_NE(c.status().message().find("localhost:" + std::to_string(gone)), std::string::npos) << c.status().ToString();
}

TEST_F(ClusterClientTest, FollowsMovedWhileSlotsAreReshardedUnderReads) {
  auto client = Client();
  ASSERT_NE(client, nullptr);
  const auto kv = Pairs("reshard", 3000);
  SetAll(*client, kv);
  const uint16_t from = *cluster().MasterOfSlot(0);
  uint16_t to = 0;
  for (uint16_t p : {cluster().ports()[0], cluster().ports()[1], cluster().ports()[2]}) {
    if (p != from && *cluster().MasterOfSlot(redis::KeySlot("x")) != p) to = p;
  }
  if (to == 0) to = from == cluster().ports()[0] ? cluster().ports()[1] : cluster().ports()[0];
  const auto from_id = cluster().NodeId(from), to_id = cluster().NodeId(to);
  ASSERT_TRUE(from_id.ok() && to_id.ok());
  // Reads go on, and must all succeed, while redis-cli moves 1000 slots.
  std::atomic<bool> stop{false};
  std::atomic<size_t> wrong{0}, rounds{0};
  std::string failure;
  std::thread reader([&] {
    while (!stop.load()) {
      wrong += CountWrong(*client, kv, &failure);
      ++rounds;
    }
  });
  auto out = cluster().RedisCli({"--cluster", "reshard", "127.0.0.1:" + std::to_string(from), "--cluster-from", *from_id,
                                 "--cluster-to", *to_id, "--cluster-slots", "1000", "--cluster-yes"});
  // One more full round after the move: every moved slot is asked for.
  const size_t after = rounds.load() + 2;
  while (rounds.load() < after) std::this_thread::sleep_for(1ms);
  stop = true;
  reader.join();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(wrong.load(), 0u) << failure;
  EXPECT_GT(Sum(client->Stats(), &redis::ClusterNodeStats::moved), 0u);
  EXPECT_GT(client->refreshes(), 1u);
  EXPECT_TRUE(cluster().WaitUntilHealthy().ok());
}

TEST_F(ClusterClientTest, FollowsAskForTheKeysAlreadyMigratedOfASlotBeingMigrated) {
  auto client = Client();
  ASSERT_NE(client, nullptr);
  const uint16_t slot = 4242;
  const std::string tag = TagForSlot(slot);
  std::vector<std::pair<std::string, std::string>> kv;
  for (int i = 0; i < 20; ++i) kv.push_back({"{" + tag + "}:" + std::to_string(i), "migrating-" + std::to_string(i)});
  SetAll(*client, kv);
  const uint16_t source = *cluster().MasterOfSlot(slot);
  uint16_t target = 0;
  for (uint16_t p : cluster().ports()) {
    auto r = cluster().Command(p, {"ROLE"});
    if (p != source && r.ok() && (*r)->element[0]->len == 6 && std::string((*r)->element[0]->str, 6) == "master") target = p;
  }
  ASSERT_NE(target, 0);
  const std::string source_id = *cluster().NodeId(source), target_id = *cluster().NodeId(target);
  ASSERT_TRUE(cluster().Command(target, {"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", source_id}).ok());
  ASSERT_TRUE(cluster().Command(source, {"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", target_id}).ok());
  std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(target), "", "0", "5000", "KEYS"};
  for (int i = 0; i < 10; ++i) migrate.push_back(kv[i].first);
  auto moved = cluster().Command(source, migrate);
  ASSERT_TRUE(moved.ok());
  ASSERT_NE((*moved)->type, REDIS_REPLY_ERROR) << (*moved)->str;

  std::string failure;
  EXPECT_EQ(CountWrong(*client, kv, &failure), 0u) << failure;
  uint64_t asks = 0;
  for (const auto& n : client->Stats()) {
    if (n.node == "127.0.0.1:" + std::to_string(source)) asks = n.asks;
  }
  EXPECT_EQ(asks, 10u);  // each migrated key once; the slot stays the source's

  // Finish the migration, as redis-cli would.
  std::vector<std::string> rest = {"MIGRATE", "127.0.0.1", std::to_string(target), "", "0", "5000", "KEYS"};
  for (int i = 10; i < 20; ++i) rest.push_back(kv[i].first);
  ASSERT_TRUE(cluster().Command(source, rest).ok());
  for (uint16_t p : cluster().ports()) {
    (void)cluster().Command(p, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", target_id});
  }
  EXPECT_EQ(CountWrong(*client, kv, &failure), 0u) << failure;
  EXPECT_TRUE(cluster().WaitUntilHealthy().ok());
}

TEST_F(ClusterClientTest, ANodeThatStopsAnsweringFailsItsCommandsWithUnavailableWithinTheTimeout) {
  auto client = Client(/*timeout_ms=*/200);
  ASSERT_NE(client, nullptr);
  const auto kv = Pairs("stopped", 300);
  SetAll(*client, kv);
  const uint16_t stopped = *cluster().MasterOfSlot(redis::KeySlot(kv[0].first));
  ASSERT_TRUE(StopProcess(cluster().pid(stopped)));
  std::vector<ClusterCommand> cmds;
  for (const auto& [k, v] : kv) cmds.push_back(ClusterCommand::Get(k));
  const auto start = std::chrono::steady_clock::now();
  client->Run(cmds);
  const auto took = std::chrono::steady_clock::now() - start;
  ::kill(cluster().pid(stopped), SIGCONT);
  EXPECT_LT(took, 2s);
  size_t failed = 0;
  for (size_t i = 0; i < cmds.size(); ++i) {
    const bool on_stopped = *cluster().MasterOfSlot(redis::KeySlot(kv[i].first)) == stopped;
    if (on_stopped) {
      EXPECT_EQ(cmds[i].status.code(), StatusCode::kUnavailable) << cmds[i].status.ToString();
      ++failed;
    } else {
      EXPECT_TRUE(cmds[i].status.ok()) << cmds[i].status.ToString();
    }
  }
  EXPECT_GT(failed, 0u);
  // It answers again: so do its keys, on the same client.
  std::string failure;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (CountWrong(*client, kv, &failure) != 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(CountWrong(*client, kv, &failure), 0u) << failure;
}

TEST_F(ClusterClientTest, AKilledMastersKeysFailWithUnavailableUntilItsReplicaTakesOverThenSucceed) {
  auto client = Client(/*timeout_ms=*/1000);
  ASSERT_NE(client, nullptr);
  const auto kv = Pairs("failover", 300);
  SetAll(*client, kv);
  ASSERT_TRUE(cluster().WaitForReplicas().ok());
  const uint16_t victim = *cluster().MasterOfSlot(redis::KeySlot(kv[0].first));
  ASSERT_TRUE(cluster().Kill(victim).ok());
  const auto killed = std::chrono::steady_clock::now();
  size_t failed_rounds = 0;
  for (;;) {
    std::vector<ClusterCommand> cmds;
    for (const auto& [k, v] : kv) cmds.push_back(ClusterCommand::Get(k));
    const auto start = std::chrono::steady_clock::now();
    client->Run(cmds);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);  // never a hang
    bool all_ok = true;
    for (size_t i = 0; i < cmds.size(); ++i) {
      if (cmds[i].status.ok()) {
        ASSERT_EQ(std::string(cmds[i].reply->str, cmds[i].reply->len), kv[i].second);
      } else {
        all_ok = false;
        EXPECT_EQ(cmds[i].status.code(), StatusCode::kUnavailable) << cmds[i].status.ToString();
      }
    }
    if (all_ok) break;
    ++failed_rounds;
    ASSERT_LT(std::chrono::steady_clock::now() - killed, 30s) << "no replica took over";
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_GT(failed_rounds, 0u);
  EXPECT_EQ(client->Masters().size(), 3u);
  bool victim_still_master = false;
  for (const std::string& m : client->Masters()) victim_still_master |= m == "127.0.0.1:" + std::to_string(victim);
  EXPECT_FALSE(victim_still_master);
}

}  // namespace
}  // namespace engram::testing
