// --log-level and SPDLOG_LEVEL: the flag wins, then the environment, then the
// tool's default; a misspelt level is an error, not silence.
#include "src/common/logging.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "storage/log.h"
#include "tests/testing/captured_log.h"

namespace engram {
namespace {

class LoggingTest : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("SPDLOG_LEVEL");
    spdlog::set_level(spdlog::level::info);
  }
};

TEST_F(LoggingTest, ExplicitLevelIsApplied) {
  ASSERT_TRUE(ConfigureLogging("debug").ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
  ASSERT_TRUE(ConfigureLogging("off").ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::off);
}

TEST_F(LoggingTest, UnknownLevelIsRejectedAndLeavesTheLevelAlone) {
  spdlog::set_level(spdlog::level::warn);
  Status s = ConfigureLogging("verbose");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.ToString().find("verbose"), std::string::npos);
  EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);
}

TEST_F(LoggingTest, EnvironmentBeatsToolDefaultAndFlagBeatsEnvironment) {
  setenv("SPDLOG_LEVEL", "error", 1);
  ASSERT_TRUE(ConfigureLogging("", "info").ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::err);
  ASSERT_TRUE(ConfigureLogging("trace", "info").ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::trace);
  unsetenv("SPDLOG_LEVEL");
  ASSERT_TRUE(ConfigureLogging("", "warn").ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);
}

// A type that counts how often it is formatted: a line below the logger's
// level must not be formatted at all (as with spdlog's own calls).
struct CountsFormatting {
  int* count;
};

// A type whose formatting throws, as formatting does when memory runs out.
struct FailsToFormat {};

}  // namespace
}  // namespace engram

template <>
struct fmt::formatter<engram::CountsFormatting> : fmt::formatter<int> {
  auto format(const engram::CountsFormatting& c, fmt::format_context& ctx) const {
    return fmt::formatter<int>::format(++*c.count, ctx);
  }
};

template <>
struct fmt::formatter<engram::FailsToFormat> : fmt::formatter<int> {
  auto format(const engram::FailsToFormat&, fmt::format_context&) const -> fmt::format_context::iterator {
    throw std::runtime_error("no memory");
  }
};

namespace engram {
namespace {

TEST(LogLineTest, ALineAtTheLevelReachesTheDefaultLoggerFormattedWithItsLevel) {
  testing::CapturedLog captured;  // level info
  log::Warn("table {}: {} blocks", "t", 3);
  log::Info("opened {}", std::string("x.engram"));
  const std::string text = captured.text();
  EXPECT_NE(text.find("[warning] table t: 3 blocks"), std::string::npos) << text;
  EXPECT_NE(text.find("[info] opened x.engram"), std::string::npos) << text;
}

TEST(LogLineTest, ALineBelowTheLevelIsNeitherWrittenNorFormatted) {
  testing::CapturedLog captured;  // level info
  int formatted = 0;
  log::Debug("hidden {}", CountsFormatting{&formatted});
  EXPECT_EQ(formatted, 0);
  EXPECT_EQ(captured.text(), "");
  log::Error("shown {}", CountsFormatting{&formatted});
  EXPECT_EQ(formatted, 1);
  EXPECT_NE(captured.text().find("[error] shown 1"), std::string::npos) << captured.text();
}

TEST(LogLineTest, ALineThatCannotBeFormattedIsReportedNotThrown) {
  testing::CapturedLog captured;
  log::Warn("table {}: {}", "t", FailsToFormat{});  // must not throw
  EXPECT_NE(captured.text().find("[warning] log line not formatted (no memory): table {}: {}"), std::string::npos)
      << captured.text();
}

}  // namespace
}  // namespace engram
