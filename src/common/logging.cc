#include "src/common/logging.h"

#include <cstdio>
#include <cstdlib>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace engram {
namespace {

Result<spdlog::level::level_enum> ParseLevel(std::string_view name) {
  // from_str maps unknown names to "off"; a typo must not silence the logs.
  static constexpr std::string_view kNames[] = {"trace", "debug", "info", "warn", "warning",
                                                "error", "err",   "critical", "off"};
  for (std::string_view n : kNames) {
    if (n == name) return spdlog::level::from_str(std::string(name));
  }
  return Status::InvalidArgument("unknown log level '" + std::string(name) +
                                 "' (trace, debug, info, warn, error, critical, off)");
}

// spdlog's own default logger writes to stdout, where a tool's report or
// JSON goes; log lines (the library's warnings among them: a metrics
// endpoint on a non-loopback address, an io_uring fallback) belong on
// stderr. Replaced once; the level is set after, on the new logger.
void LogToStderr() {
  static constexpr const char* kName = "engram-tool";
  if (spdlog::default_logger()->name() == kName) return;
  auto logger = std::make_shared<spdlog::logger>(kName, std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_level(spdlog::default_logger()->level());
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace

Status ConfigureLogging(std::string_view level, std::string_view tool_default) {
  LogToStderr();
  if (!level.empty()) {
    ENGRAM_ASSIGN_OR_RETURN(spdlog::level::level_enum l, ParseLevel(level));
    spdlog::set_level(l);
    return Status::OK();
  }
  if (const char* env = std::getenv("SPDLOG_LEVEL"); env != nullptr && *env != '\0') {
    spdlog::cfg::load_env_levels();
    return Status::OK();
  }
  ENGRAM_ASSIGN_OR_RETURN(spdlog::level::level_enum l, ParseLevel(tool_default));
  spdlog::set_level(l);
  return Status::OK();
}

bool ConfigureToolLogging(const char* tool, std::string_view level) {
  const Status s = ConfigureLogging(level, "warn");
  if (!s.ok()) std::fprintf(stderr, "%s: %s\n", tool, s.ToString().c_str());
  return s.ok();
}

}  // namespace engram
