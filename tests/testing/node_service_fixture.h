// The node tests' fixture: two generated tables in a temporary directory,
// engram-served started as a real process (fork/exec) on a socket there,
// client stores in the test process, node_test_client processes, and raw
// connections for the tests that play a hostile client.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "engram/store.h"
#include "src/common/child_process.h"
#include "src/node/messages.h"
#include "src/node/wire.h"
#include "tests/testing/temp_table.h"

namespace engram::testing::node_fixture {

using namespace std::chrono_literals;

constexpr uint32_t kRecord = 264;
constexpr uint64_t kSeedA = 11, kSeedB = 12;
constexpr uint64_t kRowsA = 20000, kRowsB = 5000;

inline std::string Tool(const std::string& name) { return std::string(ENGRAM_TOOLS_DIR) + "/" + name; }

class NodeServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    table_a_ = dir_.File("a.engram");
    table_b_ = dir_.File("b.engram");
    ASSERT_TRUE(testing::WriteGeneratedTable(table_a_, kRowsA, kRecord, kSeedA).ok());
    ASSERT_TRUE(testing::WriteGeneratedTable(table_b_, kRowsB, kRecord, kSeedB).ok());
    socket_ = dir_.File("node.sock");
  }

  std::vector<std::string> ServiceArgs(const std::string& socket, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {Tool("engram-served"), "--socket", socket, "--table", "a=" + table_a_,
                                     "--table", "b=" + table_b_, "--cache-bytes", "32MiB", "--log-level", "warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  // Starts engram-served serving one table (another than the fixture's two)
  // with a cache of `cache` and `extra` arguments, and waits for its ready
  // line.
  ChildProcess StartServiceOf(const std::string& table, const std::string& cache,
                              std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {Tool("engram-served"), "--socket", socket_,     "--table",
                                     table,                 "--cache-bytes", cache, "--log-level", "warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    ChildProcess service = ChildProcess::Start(args);
    EXPECT_TRUE(service.WaitForLine("engram-served: ready", 30s)) << "engram-served did not start";
    return service;
  }
  // Starts engram-served and waits for its ready line.
  ChildProcess StartService(std::vector<std::string> extra = {}) {
    ChildProcess service = ChildProcess::Start(ServiceArgs(socket_, std::move(extra)));
    EXPECT_TRUE(service.WaitForLine("engram-served: ready", 30s)) << "engram-served did not start";
    return service;
  }

  StoreOptions ClientOptions(const std::string& name = "") {
    StoreOptions o;
    o.node = socket_;
    o.node_client_name = name;
    o.tables = {{table_a_, "", 0}, {table_b_, "", 0}};
    return o;
  }
  std::unique_ptr<Store> OpenClient(const std::string& name = "") {
    auto store = Store::Open(ClientOptions(name));
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Gathers ids from table 0 and checks every row; returns the result.
  static GatherResult GatherChecked(Store& store, const std::vector<uint64_t>& ids, size_t table = 0) {
    std::vector<std::byte> out(ids.size() * kRecord);
    GatherResult r = store.Gather(table, ids, out.data(), kRecord);
    if (!r.status.ok()) return r;
    const uint64_t seed = table == 0 ? kSeedA : kSeedB;
    for (size_t i = 0; i < ids.size(); ++i) {
      auto expected = testing::ExpectedRow(seed, ids[i], kRecord);
      EXPECT_EQ(std::memcmp(out.data() + i * kRecord, expected.data(), kRecord), 0) << "row " << ids[i];
    }
    return r;
  }

  ChildProcess StartClient(const std::string& mode, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {Tool("tests/node_test_client"), socket_, mode};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(std::to_string(kSeedA));
    args.push_back(table_a_);
    args.push_back(table_b_);
    return ChildProcess::Start(args);
  }

  testing::TempDir dir_;
  std::string table_a_, table_b_, socket_;
};

inline std::vector<uint64_t> Range(uint64_t first, uint64_t count, uint64_t step = 1) {
  std::vector<uint64_t> v;
  for (uint64_t i = 0; i < count; ++i) v.push_back(first + i * step);
  return v;
}

// After the service has gone: a client learns of it when its receiving
// thread reads the service's last words (or the end of the stream); until
// then a gather of cached rows may still be served, exactly, from the memory
// it maps. Gathers (checked) until one fails, within moments; returns it.
inline GatherResult GatherUntilItFails(Store& store, const std::vector<uint64_t>& ids) {
  GatherResult r;
  for (int i = 0; i < 500; ++i) {
    std::vector<std::byte> out(ids.size() * kRecord);
    r = store.Gather(0, ids, out.data(), kRecord);
    if (!r.status.ok()) return r;
    for (size_t k = 0; k < ids.size(); ++k) {
      auto expected = testing::ExpectedRow(kSeedA, ids[k], kRecord);
      EXPECT_EQ(std::memcmp(out.data() + k * kRecord, expected.data(), kRecord), 0) << "row " << ids[k];
    }
    std::this_thread::sleep_for(10ms);
  }
  return r;
}

// A raw connection to the service.
inline int ConnectRaw(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Reads what the service answers until it closes: the error's message if it
// sent one.
inline std::string ErrorAnswer(int fd) {
  auto m = node::ReceiveMessage(fd);
  if (!m.ok() || m->type != node::MessageType::kError) return "";
  return node::DecodeStatus(m->payload).ToString();
}

}  // namespace engram::testing::node_fixture
