#include "storage/log.h"

#include <spdlog/spdlog.h>

namespace engram::log {
namespace {

spdlog::level::level_enum ToSpdlog(Level level) {
  switch (level) {
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
  }
  return spdlog::level::err;
}

}  // namespace

bool Enabled(Level level) { return spdlog::default_logger_raw()->should_log(ToSpdlog(level)); }

void Write(Level level, std::string_view line) { spdlog::default_logger_raw()->log(ToSpdlog(level), line); }

}  // namespace engram::log
