// One store per node, shared safely: what one client of engram-served can
// and cannot do to the others. The service is the engram-served binary
// (fork/exec); well-behaved clients are client stores in this process or
// node_test_client processes; hostile clients are raw connections that speak
// (or break) the protocol themselves.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>
#include <thread>

#include "engram/store.h"
#include "src/cache/set_layout.h"
#include "src/common/child_process.h"
#include "src/node/messages.h"
#include "src/node/node_service.h"
#include "src/node/wire.h"
#include "tests/testing/captured_log.h"
#include "tests/testing/node_service_fixture.h"

namespace engram {
namespace {

using namespace std::chrono_literals;
using namespace engram::testing::node_fixture;

uint64_t MonotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// The value of the first series in a Prometheus exposition whose line starts
// with `series` (name and labels, as printed); -1 if there is none.
double MetricValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series, 0) == 0 && line.size() > series.size() && line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return -1;
}

// A raw client that has said hello for the fixture's two tables; -1 if the
// service did not welcome it.
int HelloRaw(const std::string& socket, const std::string& table_a, const std::string& table_b,
             const std::string& name = "") {
  const int fd = ConnectRaw(socket);
  if (fd < 0) return -1;
  node::Hello hello;
  hello.client_name = name;
  hello.tables = {{"", table_a, ""}, {"", table_b, ""}};
  if (!node::SendMessage(fd, node::MessageType::kHello, 1, node::Encode(hello)).ok()) {
    ::close(fd);
    return -1;
  }
  auto welcome = node::ReceiveMessage(fd);
  if (!welcome.ok() || welcome->type != node::MessageType::kWelcome) {
    if (welcome.ok() && welcome->fd >= 0) ::close(welcome->fd);
    ::close(fd);
    return -1;
  }
  if (welcome->fd >= 0) ::close(welcome->fd);
  return fd;
}

// Reads a raw connection's answer to gather `request_id` (its parts, then
// its end) into `rows` (record bytes each); answers to other requests are
// skipped.
GatherResult ReceiveGatherAnswer(int fd, uint64_t request_id, std::vector<std::byte>& rows) {
  const size_t n = rows.size() / kRecord;
  for (;;) {
    auto m = node::ReceiveMessage(fd);
    GatherResult r;
    if (!m.ok()) {
      r.status = m.status();
      return r;
    }
    if (m->request_id != request_id) continue;
    if (m->type == node::MessageType::kError) {
      r.status = node::DecodeStatus(m->payload);
      return r;
    }
    if (m->type == node::MessageType::kGatherPart) {
      auto part = node::DecodeGatherPart(m->payload, n, kRecord);
      if (!part.ok()) {
        r.status = part.status();
        return r;
      }
      std::memcpy(rows.data() + part->first * kRecord, part->rows, size_t{part->count} * kRecord);
      continue;
    }
    if (Status s = node::DecodeGatherDone(m->payload, n, &r); !s.ok()) r.status = s;
    return r;
  }
}

// ---- One rank does not stall the others ----

// A decode step's few hundred missed rows, asked for after another client
// has put a prefill of 300,000 missed rows in flight, are read long before
// the prefill's second gather is done: the service takes each client's misses in
// turn, not in the order they came. Even rows the prefill asked for too:
// only rows whose reads have started are shared, so the decode step waits
// for a unit of the prefill at most, never for a whole prefill gather.
TEST_F(NodeServiceTest, ASmallGatherFinishesBeforeAnotherClientsBulkThatCameFirst) {
  constexpr uint64_t kBigRows = 330000;
  const std::string big = dir_.File("big.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(big, kBigRows, kRecord, kSeedA).ok());
  // One gather thread: the prefill takes long enough to be caught with most
  // of its rows still queued, however loaded the machine.
  ChildProcess service = StartServiceOf(big, "8MiB", {"--gather-threads", "1"});
  StoreOptions o;
  o.node = socket_;
  o.tables = {{big, "", 0}};
  auto decode = Store::Open(o);
  ASSERT_TRUE(decode.ok()) << decode.status().ToString();
  ChildProcess bulk = ChildProcess::Start({Tool("tests/node_test_client"), socket_, "bulk", "0", "100000", "3",
                                           std::to_string(kSeedA), big});
  // The decode step asks while the service has a good part of the prefill
  // queued (a client keeps at most 48 MiB of answers outstanding: about
  // three of its messages of 63,550 rows), long before the prefill's second
  // gather can be done.
  const std::string queued = "engram_node_miss_rows_queued";
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (MetricValue((*decode)->MetricsText(), queued) < 60000 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
  }
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 256; ++i) ids.push_back(200000 + i * 390);  // rows of the prefill's last gather
  std::vector<std::byte> out(ids.size() * kRecord);
  GatherResult r = (*decode)->Gather(0, ids, out.data(), kRecord);
  const uint64_t decoded_at = MonotonicNs();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.misses, ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto expected = testing::ExpectedRow(kSeedA, ids[i], kRecord);
    ASSERT_EQ(std::memcmp(out.data() + i * kRecord, expected.data(), kRecord), 0) << "row " << ids[i];
  }
  ASSERT_TRUE(bulk.WaitForLine("done ", 120s)) << "the bulk client's gathers did not finish";
  auto second_done = bulk.WaitForLine("done ", 120s);
  ASSERT_TRUE(second_done) << "the bulk client's gathers did not finish";
  const uint64_t bulk_done_at = std::stoull(second_done->substr(5));
  EXPECT_LT(decoded_at, bulk_done_at) << "the 256-row gather waited for a whole 100,000-row gather of another client";
  auto status = bulk.Wait(120s);
  ASSERT_TRUE(status);
  EXPECT_EQ(WEXITSTATUS(*status), 0) << "the bulk client saw a failed gather or a wrong row";
}

// A client stopped (SIGSTOP) with answers pending holds up only itself: its
// answers wait in its own queue, and another client's gathers go on.
TEST_F(NodeServiceTest, AStoppedClientWithAnswersPendingDoesNotStallAnother) {
  // A cache far smaller than the tables, so both clients miss; and a long
  // send timeout: a service that waited on the stopped client's socket
  // would stall the other client for all of it.
  ChildProcess service = ChildProcess::Start({Tool("engram-served"), "--socket", socket_, "--table", "a=" + table_a_,
                                              "--table", "b=" + table_b_, "--cache-bytes", "1MiB",
                                              "--send-timeout-ms", "120000", "--log-level", "warn"});
  ASSERT_TRUE(service.WaitForLine("engram-served: ready", 30s));
  ChildProcess stopped = StartClient("bulk-loop", {"4096", "4"});
  ASSERT_TRUE(stopped.WaitForLine("ready", 60s));
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(StopProcess(stopped.pid()));
  std::this_thread::sleep_for(300ms);  // its answers fill its socket and wait
  StoreOptions o = ClientOptions("measured");
  o.node_call_timeout_ms = 60000;
  auto client = Store::Open(o);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t misses = 0;
  for (int g = 0; g < 20; ++g) {
    std::vector<uint64_t> ids;
    for (uint64_t i = 0; i < 256; ++i) ids.push_back((uint64_t(g) * 4099 + i * 13) % kRowsA);
    GatherResult r = GatherChecked(**client, ids);
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    misses += r.misses;
  }
  EXPECT_GT(misses, 0u) << "the gathers never reached the service";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s) << "a stopped client stalled another's gathers";
  ::kill(stopped.pid(), SIGCONT);
  stopped.Kill(SIGKILL);
  EXPECT_FALSE(service.Wait(0ms)) << "the service ended";
}

// A stopped service (SIGSTOP) never hangs a client: opening fails at the
// open deadline and a call at the call deadline, with DeadlineExceeded; once
// the service goes on, so do the calls.
TEST_F(NodeServiceTest, AStoppedServiceGivesDeadlineExceededNeverAHang) {
  ChildProcess service = StartService();
  StoreOptions o = ClientOptions("patient");
  o.node_open_timeout_ms = 300;
  o.node_call_timeout_ms = 300;
  auto client = Store::Open(o);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE(StopProcess(service.pid()));
  auto t0 = std::chrono::steady_clock::now();
  auto opened = Store::Open(o);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kDeadlineExceeded) << opened.status().ToString();
  t0 = std::chrono::steady_clock::now();
  std::vector<uint64_t> ids = Range(7000, 64, 3);  // never read: misses, sent to the service
  std::vector<std::byte> out(ids.size() * kRecord);
  GatherResult r = (*client)->Gather(0, ids, out.data(), kRecord);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(r.status.code(), StatusCode::kDeadlineExceeded) << r.status.ToString();
  ASSERT_EQ(::kill(service.pid(), SIGCONT), 0);
  EXPECT_TRUE(GatherChecked(**client, Range(9000, 64, 3)).status.ok());
}

// ---- A misbehaving process on the node cannot hurt the others ----

// A header that claims a large payload allocates nothing until the bytes
// come, and before a hello no message may be larger than a hello.
TEST_F(NodeServiceTest, HeadersClaimingLargePayloadsCostTheServiceNothing) {
  ChildProcess service = StartService();
  const size_t rss_before = FootprintOf(service.pid()).rss_kib;
  std::vector<int> claims;
  for (int i = 0; i < 200; ++i) {
    const int fd = ConnectRaw(socket_);
    ASSERT_GE(fd, 0);
    node::FrameHeader h{node::kWireMagic, uint16_t(node::MessageType::kHello), 0, 1, node::kMaxHelloBytes, 0};
    ASSERT_EQ(::send(fd, &h, sizeof(h), MSG_NOSIGNAL), ssize_t(sizeof(h)));
    claims.push_back(fd);
  }
  std::this_thread::sleep_for(300ms);
  const size_t rss_after = FootprintOf(service.pid()).rss_kib;
  EXPECT_LT(rss_after, rss_before + 32 * 1024) << "200 claims of 1 MiB cost " << (rss_after - rss_before) << " KiB";
  {
    const int fd = ConnectRaw(socket_);
    node::FrameHeader h{node::kWireMagic, uint16_t(node::MessageType::kHello), 0, 1, 64u << 20, 0};
    ASSERT_EQ(::send(fd, &h, sizeof(h), MSG_NOSIGNAL), ssize_t(sizeof(h)));
    EXPECT_NE(ErrorAnswer(fd).find("over the limit"), std::string::npos);
    ::close(fd);
  }
  auto client = OpenClient("after-claims");
  ASSERT_TRUE(client);
  EXPECT_TRUE(GatherChecked(*client, Range(50, 100, 9)).status.ok());
  for (int fd : claims) ::close(fd);
}

// However many clients connect, the same threads serve them all.
TEST_F(NodeServiceTest, ConnectionsAreServedByAFixedSetOfThreads) {
  ChildProcess service = StartService({"--threads", "2"});
  auto first = OpenClient("first");
  ASSERT_TRUE(first);
  std::this_thread::sleep_for(100ms);
  const size_t threads_before = FootprintOf(service.pid()).threads;
  std::vector<int> raw;
  for (int i = 0; i < 60; ++i) raw.push_back(HelloRaw(socket_, table_a_, table_b_));
  for (int i = 0; i < 60; ++i) raw.push_back(ConnectRaw(socket_));
  std::vector<std::unique_ptr<Store>> clients;
  for (int i = 0; i < 8; ++i) clients.push_back(OpenClient("c" + std::to_string(i)));
  for (auto& c : clients) ASSERT_TRUE(c && GatherChecked(*c, Range(uint64_t(11), 40, 13)).status.ok());
  EXPECT_EQ(FootprintOf(service.pid()).threads, threads_before) << "connections got threads of their own";
  for (int fd : raw) {
    if (fd >= 0) ::close(fd);
  }
}

// The hello has one deadline for all of it: a client that trickles it a
// byte at a time is cut off when the deadline passes.
TEST_F(NodeServiceTest, AHelloTrickledByteByByteIsCutOffAtItsDeadline) {
  ChildProcess service = ChildProcess::Start(ServiceArgs(socket_, {"--hello-timeout-ms", "300"}), true);
  ASSERT_TRUE(service.WaitForLine("engram-served: ready", 30s));
  const int fd = ConnectRaw(socket_);
  ASSERT_GE(fd, 0);
  node::Hello hello;
  hello.tables = {{"", table_a_, ""}, {"", table_b_, ""}};
  std::vector<uint8_t> payload = node::Encode(hello);
  node::FrameHeader h{node::kWireMagic, uint16_t(node::MessageType::kHello), 0, 1, uint32_t(payload.size()), 0};
  std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(&h), reinterpret_cast<uint8_t*>(&h) + sizeof(h));
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  const auto t0 = std::chrono::steady_clock::now();
  bool cut_off = false;
  for (size_t i = 0; i < bytes.size() && std::chrono::steady_clock::now() - t0 < 10s; ++i) {
    if (::send(fd, &bytes[i], 1, MSG_NOSIGNAL) != 1) {
      cut_off = true;
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(cut_off) << "a hello trickled over " << bytes.size() * 50 << " ms was still being read";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  ::close(fd);
  auto logged = service.WaitForLineContaining("hello", 5s);
  ASSERT_TRUE(logged);
  EXPECT_NE(logged->find("sent no complete hello within 300 ms"), std::string::npos) << *logged;
  EXPECT_EQ(logged->find("garbage"), std::string::npos) << *logged;
}

// Row IDs are checked before anything is registered as in flight: a
// client's bad row fails only its own request, never another client's
// gather of the rows they share; a row asked for twice is read once.
TEST_F(NodeServiceTest, BadRowIDsFailOnlyTheRequestThatSentThem) {
  ChildProcess service = StartService();
  auto victim = OpenClient("victim");
  ASSERT_TRUE(victim);
  const int hostile = HelloRaw(socket_, table_a_, table_b_, "hostile");
  ASSERT_GE(hostile, 0);
  std::atomic<bool> stop{false};
  std::atomic<int> hostile_errors{0};
  std::thread attacker([&] {
    for (uint64_t round = 0; !stop.load(); ++round) {
      node::RowsRequest req{0, {}};
      for (uint64_t i = 0; i < 32; ++i) req.row_ids.push_back((round * 64 + i) % kRowsA);
      req.row_ids.push_back(uint64_t{1} << 62);
      if (!node::SendMessage(hostile, node::MessageType::kGather, 100 + round, node::Encode(req)).ok()) return;
      auto answer = node::ReceiveMessage(hostile);
      if (!answer.ok()) return;
      if (answer->type == node::MessageType::kError) hostile_errors.fetch_add(1);
    }
  });
  int victim_failures = 0;
  for (uint64_t round = 0; round < 150; ++round) {
    // The same rows the attacker asks for, at the same moment: they may be
    // in flight for either.
    std::vector<uint64_t> ids;
    for (uint64_t i = 0; i < 32; ++i) ids.push_back((round * 64 + i) % kRowsA);
    GatherResult r = GatherChecked(*victim, ids);
    if (!r.status.ok()) {
      ++victim_failures;
      ADD_FAILURE() << "the victim's gather failed: " << r.status.ToString();
    }
  }
  stop.store(true);
  attacker.join();
  EXPECT_EQ(victim_failures, 0);
  EXPECT_GT(hostile_errors.load(), 0) << "the bad row was not refused";
  // A row asked for twice in one request (a client never does, but nothing
  // makes it) is read once and answered twice; the connection goes on.
  node::RowsRequest twice{0, {15005, 15009, 15005}};
  ASSERT_TRUE(node::SendMessage(hostile, node::MessageType::kGather, 9999, node::Encode(twice)).ok());
  std::vector<std::byte> rows(3 * kRecord);
  GatherResult result = ReceiveGatherAnswer(hostile, 9999, rows);
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  for (size_t i = 0; i < 3; ++i) {
    auto expected = testing::ExpectedRow(kSeedA, twice.row_ids[i], kRecord);
    EXPECT_EQ(std::memcmp(rows.data() + i * kRecord, expected.data(), kRecord), 0) << "position " << i;
  }
  node::RowsRequest fine{0, {5, 9}};
  ASSERT_TRUE(node::SendMessage(hostile, node::MessageType::kGather, 10000, node::Encode(fine)).ok());
  rows.assign(2 * kRecord, std::byte{0});
  EXPECT_TRUE(ReceiveGatherAnswer(hostile, 10000, rows).status.ok());
  ::close(hostile);
}

// Descriptors a client attaches to its messages are closed as they arrive,
// however many come with one message.
TEST_F(NodeServiceTest, DescriptorsSentWithMessagesAreAllClosed) {
  ChildProcess service = StartService();
  const int fd = HelloRaw(socket_, table_a_, table_b_, "fd-sender");
  ASSERT_GE(fd, 0);
  std::this_thread::sleep_for(100ms);
  const size_t fds_before = FootprintOf(service.pid()).fds;
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  node::HitsReport report{0, {}, {}};
  const std::vector<uint8_t> payload = node::Encode(report);
  for (int i = 0; i < 300; ++i) {
    node::FrameHeader h{node::kWireMagic, uint16_t(node::MessageType::kHits), 0, 0, uint32_t(payload.size()), 0};
    iovec iov[2] = {{&h, sizeof(h)}, {const_cast<uint8_t*>(payload.data()), payload.size()}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(2 * sizeof(int));
    const int two[2] = {devnull, devnull};
    std::memcpy(CMSG_DATA(c), two, sizeof(two));
    ASSERT_EQ(::sendmsg(fd, &msg, MSG_NOSIGNAL), ssize_t(sizeof(h) + payload.size()));
  }
  ::close(devnull);
  // A round trip after them: they have all been read.
  ASSERT_TRUE(node::SendMessage(fd, node::MessageType::kStats, 7, node::EncodeU32(0)).ok());
  auto answer = node::ReceiveMessage(fd);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->type, node::MessageType::kStatsReply);
  const size_t fds_after = FootprintOf(service.pid()).fds;
  EXPECT_LE(fds_after, fds_before + 2) << "the service kept descriptors a client sent";
  ::close(fd);
  auto client = OpenClient("after-fds");
  ASSERT_TRUE(client);
  EXPECT_TRUE(GatherChecked(*client, Range(3, 40, 5)).status.ok());
}

// Read-ahead pins count their owners: a client that exits takes only its
// own pins with it, a client releases only its own, and a client's pins go
// as it consumes them (nothing is kept per read-ahead served).
TEST_F(NodeServiceTest, ReadAheadPinsBelongToTheClientThatMadeThem) {
  ChildProcess service = StartService();
  auto mine = OpenClient("mine");
  ASSERT_TRUE(mine);
  const std::vector<uint64_t> rows = Range(1000, 256);
  ASSERT_TRUE(mine->ReadAhead(0, rows).ok());
  mine->WaitForReadAheads();
  ChildProcess other = StartClient("pin-range", {"1000", "256"});
  ASSERT_TRUE(other.WaitForLine("pinned", 60s));
  std::string metrics = mine->MetricsText();
  EXPECT_EQ(MetricValue(metrics, "engram_node_client_read_ahead_pins{client=\"mine\"}"), 256) << metrics;
  // The other client goes: this one's pins of the same rows stay.
  other.Kill(SIGKILL);
  for (int i = 0; i < 100 && mine->Stats(0).cache.pinned_rows == 0; ++i) std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(mine->Stats(0).cache.pinned_rows, 256u) << "a departing client released another's pins";
  metrics = mine->MetricsText();
  EXPECT_EQ(MetricValue(metrics, "engram_node_client_read_ahead_pins{client=\"mine\"}"), 256) << metrics;
  // Another client releasing the same rows releases nothing of this one's.
  auto releaser = OpenClient("releaser");
  ASSERT_TRUE(releaser);
  releaser->ReleaseReadAhead(0, rows);
  EXPECT_EQ(mine->Stats(0).cache.pinned_rows, 256u) << "a client released another's pins";
  // Served from the cache, the rows consume this client's pins.
  GatherResult served = GatherChecked(*mine, rows);
  ASSERT_TRUE(served.status.ok());
  EXPECT_EQ(served.hits, rows.size());
  for (int i = 0; i < 200 && mine->Stats(0).cache.pinned_rows != 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(mine->Stats(0).cache.pinned_rows, 0u);
  // Many read-aheads, each consumed: nothing piles up.
  for (uint64_t round = 0; round < 30; ++round) {
    const std::vector<uint64_t> batch = Range(2000 + round * 64, 64);
    ASSERT_TRUE(mine->ReadAhead(0, batch).ok());
    mine->WaitForReadAheads();
    ASSERT_TRUE(GatherChecked(*mine, batch).status.ok());
  }
  for (int i = 0; i < 200 && mine->Stats(0).cache.pinned_rows != 0; ++i) std::this_thread::sleep_for(10ms);
  metrics = mine->MetricsText();
  EXPECT_EQ(MetricValue(metrics, "engram_node_client_read_ahead_pins{client=\"mine\"}"), 0) << metrics;
  EXPECT_EQ(mine->Stats(0).cache.pinned_rows, 0u);
}

// The cache memory a client receives is read-only for good: reopening the
// descriptor read-write (as its owner could, through /proc/self/fd) gives no
// way to write it, and the rows every client reads stay exact.
TEST_F(NodeServiceTest, TheCacheMemoryCannotBeWrittenThroughAReopenedDescriptor) {
  ChildProcess service = StartService();
  auto reader = OpenClient("reader");
  ASSERT_TRUE(reader);
  const std::vector<uint64_t> ids = Range(0, 200, 17);
  ASSERT_TRUE(GatherChecked(*reader, ids).status.ok());
  const int fd = ConnectRaw(socket_);
  node::Hello hello;
  hello.tables = {{"", table_a_, ""}, {"", table_b_, ""}};
  ASSERT_TRUE(node::SendMessage(fd, node::MessageType::kHello, 1, node::Encode(hello)).ok());
  auto welcome = node::ReceiveMessage(fd);
  ASSERT_TRUE(welcome.ok());
  ASSERT_EQ(welcome->type, node::MessageType::kWelcome);
  ASSERT_GE(welcome->fd, 0);
  const int memory = welcome->fd;
  struct stat st {};
  ASSERT_EQ(::fstat(memory, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  const int seals = ::fcntl(memory, F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE);
  const std::string proc = "/proc/self/fd/" + std::to_string(memory);
  const int rw = ::open(proc.c_str(), O_RDWR | O_CLOEXEC);
  if (rw < 0) {
    // Not its owner (a member of its group): may not open it for writing.
    EXPECT_EQ(errno, EACCES);
  } else {
    // Its owner (or root) may open it, and still write nothing.
    const char junk[16] = "overwritten row";
    EXPECT_EQ(::pwrite(rw, junk, sizeof(junk), 0), -1);
    EXPECT_EQ(errno, EPERM);
    void* p = ::mmap(nullptr, size_t(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
    EXPECT_EQ(p, MAP_FAILED) << "a writable shared mapping of the cache memory";
    if (p != MAP_FAILED) ::munmap(p, size_t(st.st_size));
    EXPECT_NE(::ftruncate(rw, 0), 0) << "the cache memory could be shrunk under its readers";
    EXPECT_NE(::fallocate(rw, 0, st.st_size, 4096), 0) << "the cache memory could grow";
    ::close(rw);
  }
  ::close(memory);
  ::close(fd);
  GatherResult again = GatherChecked(*reader, ids);
  ASSERT_TRUE(again.status.ok());
  EXPECT_EQ(again.hits, ids.size());
}

// A client's name must be text a scraper and a terminal can take, and two
// clients of one name are two series, not one series twice.
TEST_F(NodeServiceTest, ClientNamesAreCheckedAndEachLabelIsUnique) {
  ChildProcess service = StartService();
  for (const auto& [name, says] : std::vector<std::pair<std::string, std::string>>{
           {"bad\xff\xfe", "not valid UTF-8"}, {"line\nbreak", "control character"},
           {std::string(200, 'n'), "200 bytes long"}}) {
    auto refused = Store::Open(ClientOptions(name));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find(says), std::string::npos) << refused.status().ToString();
    // The service checks it too, for a client that does not.
    const int fd = ConnectRaw(socket_);
    node::Hello hello;
    hello.client_name = name;
    hello.tables = {{"", table_a_, ""}, {"", table_b_, ""}};
    ASSERT_TRUE(node::SendMessage(fd, node::MessageType::kHello, 1, node::Encode(hello)).ok());
    EXPECT_NE(ErrorAnswer(fd).find(says), std::string::npos);
    ::close(fd);
  }
  auto first = OpenClient("rank");
  auto second = OpenClient("rank");
  ASSERT_TRUE(first && second);
  ASSERT_TRUE(GatherChecked(*first, Range(1, 10)).status.ok());
  ASSERT_TRUE(GatherChecked(*second, Range(1, 10)).status.ok());
  const std::string metrics = first->MetricsText();
  std::istringstream in(metrics);
  std::set<std::string> series;
  int rank_series = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::string key = line.substr(0, line.rfind(' '));
    EXPECT_TRUE(series.insert(key).second) << "the series " << key << " appears twice";
    if (key.rfind("engram_node_client_gathers_total{client=\"rank", 0) == 0) ++rank_series;
  }
  EXPECT_EQ(rank_series, 2) << metrics;
}

// A client's counters are its own to report, but the node's totals never go
// back: a client that reports nonsense (counters near 2^64) and leaves
// cannot wrap the departed clients' totals around.
TEST_F(NodeServiceTest, DepartedTotalsNeverGoBackwards) {
  ChildProcess service = StartService();
  auto watcher = OpenClient("watcher");
  ASSERT_TRUE(watcher);
  const std::string series = "engram_node_client_rows_total{client=\"(departed)\"}";
  auto departed = [&] { return MetricValue(watcher->MetricsText(), series); };
  {
    auto honest = OpenClient("honest");
    ASSERT_TRUE(GatherChecked(*honest, Range(0, 100)).status.ok());
  }
  for (int i = 0; i < 100 && departed() < 100; ++i) std::this_thread::sleep_for(10ms);
  const double after_honest = departed();
  EXPECT_GE(after_honest, 100);
  const int liar = HelloRaw(socket_, table_a_, table_b_, "liar");
  ASSERT_GE(liar, 0);
  node::HitsReport report{0, {}, {}};
  for (uint64_t node::ClientCounters::*f : node::kClientCounterFields) {
    report.counters.*f = std::numeric_limits<uint64_t>::max() - 5;
  }
  ASSERT_TRUE(node::SendMessage(liar, node::MessageType::kHits, 0, node::Encode(report)).ok());
  report.counters = {};  // and then lower: a live series never goes back either
  ASSERT_TRUE(node::SendMessage(liar, node::MessageType::kHits, 0, node::Encode(report)).ok());
  std::this_thread::sleep_for(100ms);
  const double live = MetricValue(watcher->MetricsText(), "engram_node_client_rows_total{client=\"liar\"}");
  EXPECT_GT(live, 1e18);
  ::close(liar);
  for (int i = 0; i < 100 && departed() < 1e18; ++i) std::this_thread::sleep_for(10ms);
  const double after_liar = departed();
  EXPECT_GE(after_liar, after_honest);
  {
    auto another = OpenClient("another");
    ASSERT_TRUE(GatherChecked(*another, Range(200, 100)).status.ok());
  }
  std::this_thread::sleep_for(200ms);
  EXPECT_GE(departed(), after_liar) << "the departed total went backwards";
}

// In this process, so that ThreadSanitizer sees the service's threads and
// the client's: a client's name is written by its hello while scrapes read
// every client's labels, and a client's view of the metrics port is written
// when it reconnects to a restarted service while its owner reads it.
TEST_F(NodeServiceTest, HellosScrapesAndReconnectsRaceNothing) {
  node::NodeServiceOptions so;
  so.socket_path = dir_.File("inproc.sock");
  so.store.tables = {{table_a_, "a", 0}, {table_b_, "b", 0}};
  so.store.cache_bytes = 8u << 20;
  so.store.io_backend = "pread";
  so.store.metrics_listen = "127.0.0.1:0";
  auto service = node::NodeService::Start(so);
  ASSERT_TRUE(service.ok()) << service.status().ToString();
  socket_ = so.socket_path;
  auto watcher = OpenClient("watcher");
  ASSERT_TRUE(watcher);
  std::atomic<bool> stop{false}, stop_scraping{false};
  std::thread scraper([&] {
    while (!stop_scraping.load()) (void)(*service)->MetricsText();
  });
  std::thread port_reader([&] {
    uint64_t sum = 0;
    while (!stop.load()) sum += watcher->metrics_port();
    EXPECT_GE(sum, 0u);
  });
  for (int i = 0; i < 40; ++i) {
    auto c = OpenClient("named-" + std::to_string(i % 4));
    ASSERT_TRUE(c);
    ASSERT_TRUE(GatherChecked(*c, Range(uint64_t(i), 8, 31)).status.ok());
  }
  stop_scraping.store(true);
  scraper.join();
  // The service restarts; the watcher reconnects (and learns the port).
  (*service)->Stop();
  service = node::NodeService::Start(so);
  ASSERT_TRUE(service.ok()) << service.status().ToString();
  GatherResult r;
  for (int i = 0; i < 300; ++i) {
    r = GatherChecked(*watcher, Range(100, 16));
    if (r.status.ok()) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(watcher->metrics_port(), (*service)->metrics_port());
  stop.store(true);
  port_reader.join();
  (*service)->Stop();
}

// ---- Correctness at the edges ----

// Messages are bounded in bytes: a gather of 40,000 distinct missed rows of
// 2,048-B records (80 MB) travels in several messages and returns every row.
TEST_F(NodeServiceTest, AGatherOfManyLargeRecordsReturnsEveryRow) {
  constexpr uint32_t kWide = 2048;
  constexpr uint64_t kWideRows = 40000;
  const std::string wide = dir_.File("wide.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(wide, kWideRows, kWide, kSeedB).ok());
  ChildProcess service = StartServiceOf(wide, "16MiB");
  StoreOptions o;
  o.node = socket_;
  o.tables = {{wide, "", 0}};
  auto client = Store::Open(o);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::vector<uint64_t> ids(kWideRows);
  for (uint64_t i = 0; i < kWideRows; ++i) ids[i] = (i * 7919) % kWideRows;  // a permutation
  std::vector<std::byte> out(ids.size() * kWide);
  // Another gather of the same client at the same time.
  std::vector<uint64_t> small = {1, 2, 3, 39999};
  std::vector<std::byte> small_out(small.size() * kWide);
  GatherTicket concurrent = (*client)->StartGather(0, small, small_out.data(), kWide);
  GatherResult r = (*client)->Gather(0, ids, out.data(), kWide);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.rows, kWideRows);
  for (size_t i = 0; i < ids.size(); ++i) {
    auto expected = testing::ExpectedRow(kSeedB, ids[i], kWide);
    ASSERT_EQ(std::memcmp(out.data() + i * kWide, expected.data(), kWide), 0) << "row " << ids[i];
  }
  GatherResult s = std::move(concurrent).Wait();
  ASSERT_TRUE(s.status.ok()) << s.status.ToString();
  for (size_t i = 0; i < small.size(); ++i) {
    auto expected = testing::ExpectedRow(kSeedB, small[i], kWide);
    ASSERT_EQ(std::memcmp(small_out.data() + i * kWide, expected.data(), kWide), 0) << "row " << small[i];
  }
}

// Twenty services started at the same moment on one socket and table: one
// serves, and stays reachable; every other exits 1 naming it.
TEST_F(NodeServiceTest, TwentyServicesStartedAtOnceLeaveExactlyOneServing) {
  std::vector<ChildProcess> services;
  for (int i = 0; i < 20; ++i) services.push_back(ChildProcess::Start(ServiceArgs(socket_), /*merge_stderr=*/true));
  int serving = -1;
  std::vector<int> refused;
  for (int i = 0; i < 20; ++i) {
    auto line = services[i].WaitForLineWhere(
        [](const std::string& l) {
          return l.rfind("engram-served: ready", 0) == 0 || l.find("another engram-served") != std::string::npos ||
                 l.rfind("engram-served: ", 0) == 0;
        },
        60s);
    ASSERT_TRUE(line) << "service " << i << " neither served nor said why not";
    if (line->rfind("engram-served: ready", 0) == 0) {
      EXPECT_EQ(serving, -1) << "two services serve one socket";
      serving = i;
    } else {
      refused.push_back(i);
      services[i].WaitForLine("", 0ms);
      EXPECT_NE(line->find("another engram-served (pid"), std::string::npos) << *line;
    }
  }
  ASSERT_NE(serving, -1);
  ASSERT_EQ(refused.size(), 19u);
  for (int i : refused) {
    auto status = services[i].Wait(30s);
    ASSERT_TRUE(status);
    EXPECT_EQ(WEXITSTATUS(*status), 1);
  }
  // Every refusal named the one that serves (its line was checked above for
  // the form; its pid is that of the service still running).
  EXPECT_FALSE(services[serving].Wait(0ms));
  auto client = OpenClient("after-the-race");
  ASSERT_TRUE(client);
  EXPECT_TRUE(GatherChecked(*client, Range(5, 50, 3)).status.ok());
}

// A socket at the path that is not a stale one of a service is never
// removed: another program's live datagram socket, or a stream socket
// something listens on.
TEST_F(NodeServiceTest, AnotherProgramsSocketAtThePathIsNeverRemoved) {
  const int dgram = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(dgram, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  struct stat before {};
  ASSERT_EQ(::stat(socket_.c_str(), &before), 0);
  ChildProcess service = ChildProcess::Start(ServiceArgs(socket_), /*merge_stderr=*/true);
  auto said = service.WaitForLineContaining("engram-served:", 30s);
  ASSERT_TRUE(said);
  EXPECT_NE(said->find("another program's socket"), std::string::npos) << *said;
  auto status = service.Wait(30s);
  ASSERT_TRUE(status);
  EXPECT_EQ(WEXITSTATUS(*status), 2);
  struct stat after {};
  ASSERT_EQ(::stat(socket_.c_str(), &after), 0) << "the datagram socket was removed";
  EXPECT_EQ(after.st_ino, before.st_ino);
  ::close(dgram);
  ::unlink(socket_.c_str());
  // A live stream socket of another program.
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ChildProcess second = ChildProcess::Start(ServiceArgs(socket_), /*merge_stderr=*/true);
  said = second.WaitForLineContaining("engram-served:", 30s);
  ASSERT_TRUE(said);
  EXPECT_NE(said->find("listens on"), std::string::npos) << *said;
  status = second.Wait(30s);
  ASSERT_TRUE(status);
  EXPECT_EQ(WEXITSTATUS(*status), 2);
  EXPECT_TRUE(std::filesystem::exists(socket_));
  ::close(listener);
}

// A welcome whose cache rows are not the table's records is refused before a
// row is copied with it (a client trusts its service's memory, not its
// arithmetic).
TEST(NodeClientTest, AWelcomeWhoseRowSizeIsNotTheRecordSizeIsRefused) {
  testing::TempDir dir;
  const std::string table = dir.File("t.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(table, 1000, kRecord, kSeedA).ok());
  const std::string path = dir.File("fake.sock");
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  // A fake service: welcomes with a cache of 512-B rows for 264-B records.
  std::thread fake([listener] {
    const int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    auto hello = node::ReceiveMessage(c);
    constexpr uint64_t kMemory = uint64_t{4} << 20;
    const int memory = ::memfd_create("fake-cache", MFD_CLOEXEC);
    if (memory < 0 || ::ftruncate(memory, kMemory) != 0) return;
    node::Welcome w;
    w.memory_bytes = kMemory;
    node::WelcomeTable t;
    t.name = "t";
    t.row_count = 1000;
    t.record_bytes = kRecord;
    t.geometry.ways = 4;
    t.geometry.num_sets = 1;
    t.geometry.candidate_sets = 1;
    t.geometry.row_bytes = 512;
    t.geometry.index_bytes = cache::SetLayout::For(4).stride;
    t.geometry.slab_bytes = 4 * 512;
    t.index_offset = 0;
    t.slab_offset = uint64_t{2} << 20;
    w.tables.push_back(t);
    (void)node::SendMessage(c, node::MessageType::kWelcome, hello.ok() ? hello->request_id : 0, node::Encode(w), {},
                            memory);
    ::close(memory);
    char byte;
    (void)::recv(c, &byte, 1, 0);  // until the client hangs up
    ::close(c);
  });
  StoreOptions o;
  o.node = path;
  o.tables = {{table, "", 0}};
  auto opened = Store::Open(o);
  fake.join();
  ::close(listener);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("inconsistently"), std::string::npos) << opened.status().ToString();
}

// ---- A narrower, quieter API ----

TEST_F(NodeServiceTest, TheServicesOptionsAreRefusedToAClientNotIgnored) {
  ChildProcess service = StartService();
  StoreOptions o = ClientOptions();
  o.cache_bytes = 1 << 20;
  auto refused = Store::Open(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("cache_bytes"), std::string::npos) << refused.status().ToString();
  o = ClientOptions();
  o.hot_set_path = dir_.File("hot");
  refused = Store::Open(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("hot_set_path"), std::string::npos);
  o = ClientOptions();
  o.tables[1].cache_bytes = 4096;
  refused = Store::Open(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("cache_bytes"), std::string::npos);
  auto fine = OpenClient("fine");
  ASSERT_TRUE(fine);
  EXPECT_EQ(fine->table_name(0), "a");
  EXPECT_EQ(fine->table_name(1), "b");
  EXPECT_EQ(fine->table_name(2), "");
}

TEST_F(NodeServiceTest, ANormalCloseLogsNothingAboveDebug) {
  ChildProcess service = StartService();
  testing::CapturedLog log;
  {
    auto client = OpenClient("quiet");
    ASSERT_TRUE(client);
    ASSERT_TRUE(GatherChecked(*client, Range(0, 30)).status.ok());
  }
  const std::string text = log.text();
  EXPECT_EQ(text.find("[warning]"), std::string::npos) << text;
  EXPECT_EQ(text.find("[error]"), std::string::npos) << text;
}

}  // namespace
}  // namespace engram
