#include "storage/log.h"

#include <spdlog/spdlog.h>

#include <string>

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

// spdlog builds its registry on first use, inside libspdlog, which the
// sanitizers do not instrument: two threads whose first lines race would
// meet the registry with no ordering TSan can see. Building it while the
// program starts, before any thread of ours, gives every thread one.
[[maybe_unused]] const bool kRegistryBuilt = spdlog::default_logger_raw() != nullptr;

}  // namespace

bool Enabled(Level level) { return spdlog::default_logger_raw()->should_log(ToSpdlog(level)); }

// spdlog's log() catches what its sinks throw and reports it on stderr.
void Write(Level level, std::string_view line) noexcept { spdlog::default_logger_raw()->log(ToSpdlog(level), line); }

void WriteUnformatted(Level level, fmt::string_view format, const std::exception& why) noexcept {
  try {
    Write(level,
          std::string("log line not formatted (") + why.what() + "): " + std::string(format.data(), format.size()));
  } catch (...) {
    // Out of memory for the message too: the line is lost, the caller goes on.
  }
}

}  // namespace engram::log
