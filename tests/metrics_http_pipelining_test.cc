// The metrics endpoint against clients that pipeline requests and never read
// the answers: their connections stall on unread answers, and must not hold
// the connection cap against ordinary scrapers. Real loopback sockets,
// bounded in time.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "src/common/sanitizers.h"
#include "src/metrics/http_endpoint.h"
#include "src/metrics/metrics_snapshot.h"
#include "tests/testing/http_client.h"
#include "src/common/http_flood.h"

namespace engram {
namespace {

// A scrape's deadline; sanitizer builds get headroom (see metrics_http_test).
#if ENGRAM_UNDER_SANITIZER
constexpr std::chrono::milliseconds kScrapeDeadline{3000};
#else
constexpr std::chrono::milliseconds kScrapeDeadline{1000};
#endif

// A /metrics body of ~30 KiB, like a store with a few tables.
std::string Body() {
  MetricsSnapshot m;
  for (int t = 0; t < 200; ++t) {
    m.AddCounter("engram_row_cache_hits_total", "Hits.", {{"table", "layer" + std::to_string(t)}}, 42.0 * t);
  }
  return m.ToPrometheusText();
}

// As many pipelining, never-reading connections as the endpoint's cap,
// given time to stall on their unread answers; then every one of 60
// ordinary scrapes (3 at a time, fresh connections) gets a complete 200
// within the deadline.
TEST(HttpEndpointPipelining, ScrapesSucceedWhileTheCapIsFullOfConnectionsThatNeverReadTheirAnswers) {
  HttpEndpointOptions o;  // the defaults are what is tested
  o.port = 0;
  auto e = MetricsHttpEndpoint::Start(o, [] { return Body(); });
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const uint16_t port = (*e)->port();

  testing::ConnectionFlood flood(port, o.max_connections, testing::FloodMode::kPipelineNeverRead);
  const auto warmup_end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (flood.connects() < o.max_connections && std::chrono::steady_clock::now() < warmup_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(flood.connects(), o.max_connections);
  // Long enough for every connection's socket buffers to fill with answers.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));

  testing::ScrapePlan plan;
  plan.threads = 3;
  plan.scrapes_per_thread = 20;
  plan.deadline = kScrapeDeadline;
  plan.give_up_after_failures = 1;  // every scrape must succeed: stop at the first failure
  plan.max_time = std::chrono::seconds(60);
  const testing::ScrapeStats stats = testing::ScrapeConcurrently(port, plan);
  const std::string after = testing::Get(port, "/metrics");
  flood.Stop();

  std::printf("%zu of %zu scrapes succeeded within %lld ms (p50 %.1f ms, p99 %.1f ms); the flood opened %llu "
              "connections; served %llu, rejected %llu, evicted %llu\n",
              stats.succeeded, stats.attempts, (long long)kScrapeDeadline.count(), stats.p50_seconds * 1e3,
              stats.p99_seconds * 1e3, (unsigned long long)flood.connects(),
              (unsigned long long)(*e)->requests_served(), (unsigned long long)(*e)->requests_rejected(),
              (unsigned long long)(*e)->connections_evicted());
  EXPECT_EQ(stats.attempts, plan.threads * plan.scrapes_per_thread)
      << "gave up after a failed scrape (" << stats.succeeded << " succeeded)";
  EXPECT_EQ(stats.succeeded, stats.attempts);
  EXPECT_EQ(after.rfind("HTTP/1.1 200", 0), 0u) << after;
}

// The cap is full of connections whose answer is stuck in the socket because
// their client does not read it (a 4 MiB body cannot fit the sockets'
// buffers): a new scrape evicts one of them, and is served.
TEST(HttpEndpointPipelining, ConnectionStalledOnAnUnreadAnswerIsEvictedForANewScrape) {
  HttpEndpointOptions o;
  o.port = 0;
  o.max_connections = 2;
  o.io_timeout = std::chrono::seconds(60);  // no stalled write ends by itself during the test
  const std::string big(4u << 20, 'x');
  auto e = MetricsHttpEndpoint::Start(o, [&big] { return "# " + big + "\n"; });
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const uint16_t port = (*e)->port();
  int stalled[2];
  for (int& fd : stalled) {
    fd = testing::Connect(port);
    ASSERT_GE(fd, 0);
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(write(fd, request.data(), request.size()), ssize_t(request.size()));
  }
  // Both answers are being written (the renders ran), neither can finish.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*e)->requests_served() < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ((*e)->requests_served(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));

  EXPECT_EQ(testing::Get(port, "/healthz").rfind("HTTP/1.1 200", 0), 0u) << "a scrape was locked out";
  EXPECT_EQ((*e)->connections_evicted(), 1u);
  for (int fd : stalled) close(fd);
}

// One client pipelines far more requests than the bound: it gets
// max_pipelined_answers answers (rendered once each), then the connection
// reads nothing more and is closed at io_timeout.
TEST(HttpEndpointPipelining, AConnectionAnswersABoundedRunOfPipelinedRequests) {
  HttpEndpointOptions o;
  o.port = 0;
  o.io_timeout = std::chrono::milliseconds(300);
  std::atomic<size_t> renders{0};
  auto e = MetricsHttpEndpoint::Start(o, [&renders] {
    ++renders;
    return std::string("x 1\n");
  });
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  std::string requests;
  for (size_t i = 0; i < 10 * o.max_pipelined_answers; ++i) requests += "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string answers = testing::Exchange((*e)->port(), requests);
  size_t count = 0;
  for (size_t at = answers.find("HTTP/1.1 200"); at != std::string::npos; at = answers.find("HTTP/1.1 200", at + 1)) {
    ++count;
  }
  EXPECT_GE(count, 2u) << "pipelined requests are still answered";
  EXPECT_LE(count, o.max_pipelined_answers);
  EXPECT_EQ(renders.load(), count);
}

}  // namespace
}  // namespace engram
