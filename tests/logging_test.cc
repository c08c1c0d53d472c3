// --log-level and SPDLOG_LEVEL: the flag wins, then the environment, then the
// tool's default; a misspelt level is an error, not silence.
#include "src/common/logging.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

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

}  // namespace
}  // namespace engram
