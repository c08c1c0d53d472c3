// Log lines of the library and tools: formatted by fmt here, written by
// spdlog's default logger in log.cc.
//
// Why not spdlog::info(fmt, args...) at each call: spdlog's formatting
// logger is a template instantiated per call site for its argument types,
// and each one cost a file ~6 s of compile under ASan+UBSan (~3 s at -O2),
// about half of a typical file's build; fmt::format is a fraction of that.
// A line below the logger's level is not formatted, as with spdlog's own
// calls. Where log lines go and at which level is still spdlog's
// configuration (src/common/logging.h for the tools).
#pragma once

#include <fmt/format.h>

#include <exception>
#include <string_view>
#include <utility>

namespace engram::log {

enum class Level { kDebug, kInfo, kWarn, kError };

// Whether spdlog's default logger writes lines of `level`.
bool Enabled(Level level);
// Writes one preformatted line through spdlog's default logger.
void Write(Level level, std::string_view line) noexcept;
// Writes the format string of a line that could not be formatted, and why.
void WriteUnformatted(Level level, fmt::string_view format, const std::exception& why) noexcept;

// Never throws, as spdlog's own calls never do (a destructor logs a failed
// save): a line that cannot be formatted (out of memory) is reported as such.
template <typename... Args>
void At(Level level, fmt::format_string<Args...> format, Args&&... args) noexcept {
  if (!Enabled(level)) return;
  try {
    Write(level, fmt::format(format, std::forward<Args>(args)...));
  } catch (const std::exception& e) {
    WriteUnformatted(level, fmt::string_view(format), e);
  }
}
template <typename... Args>
void Debug(fmt::format_string<Args...> format, Args&&... args) {
  At(Level::kDebug, format, std::forward<Args>(args)...);
}
template <typename... Args>
void Info(fmt::format_string<Args...> format, Args&&... args) {
  At(Level::kInfo, format, std::forward<Args>(args)...);
}
template <typename... Args>
void Warn(fmt::format_string<Args...> format, Args&&... args) {
  At(Level::kWarn, format, std::forward<Args>(args)...);
}
template <typename... Args>
void Error(fmt::format_string<Args...> format, Args&&... args) {
  At(Level::kError, format, std::forward<Args>(args)...);
}

}  // namespace engram::log
