#include "src/store/log_rate_limiter.h"

#include <gtest/gtest.h>

namespace engram {
namespace {

using std::chrono::seconds;

TEST(LogRateLimiter, LogsTheBurstThenOneLinePerIntervalWithTheSuppressedCount) {
  LogRateLimiter limiter(3, seconds(10));
  const auto t0 = LogRateLimiter::Clock::time_point() + seconds(1000);
  for (int i = 0; i < 3; ++i) {
    auto d = limiter.Admit(t0);
    EXPECT_TRUE(d.log);
    EXPECT_EQ(d.suppressed, 0u);
  }
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(limiter.Admit(t0 + seconds(5)).log);
  auto summary = limiter.Admit(t0 + seconds(10));
  EXPECT_TRUE(summary.log);
  EXPECT_EQ(summary.suppressed, 100u);
  EXPECT_FALSE(limiter.Admit(t0 + seconds(11)).log);  // the interval restarts at the summary
  auto next = limiter.Admit(t0 + seconds(20));
  EXPECT_TRUE(next.log);
  EXPECT_EQ(next.suppressed, 1u);
}

TEST(LogRateLimiter, RareEventsAreAllLogged) {
  LogRateLimiter limiter(2, seconds(10));
  auto t = LogRateLimiter::Clock::time_point() + seconds(1000);
  for (int i = 0; i < 10; ++i, t += seconds(10)) EXPECT_TRUE(limiter.Admit(t).log) << i;
}

}  // namespace
}  // namespace engram
