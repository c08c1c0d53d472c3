// Log level for the tools (and any embedding program that wants the same
// rules): spdlog's default logger, one line per notable event.
//
// Precedence: an explicit --log-level beats the SPDLOG_LEVEL environment
// variable (spdlog's own syntax, e.g. "debug" or "warn"), which beats the
// tool's default. The library never sets the level itself, nor where log
// lines go: an embedding runtime owns its logger configuration. A tool's log
// lines go to stderr (ConfigureLogging installs a stderr default logger), so
// stdout carries only the tool's output, and library warnings such as a
// metrics endpoint listening beyond loopback reach the operator's terminal.
#pragma once

#include <string>
#include <string_view>

#include "engram/status.h"

namespace engram {

// "trace", "debug", "info", "warn", "error", "critical" or "off".
inline constexpr const char* kLogLevelHelp =
    "log level: trace, debug, info, warn, error, critical, off (default: SPDLOG_LEVEL, else the tool's)";

// level: the --log-level value ("" = not given). InvalidArgument for a name
// spdlog does not know (spdlog itself would silently map it to "off").
Status ConfigureLogging(std::string_view level, std::string_view tool_default = "info");

// ConfigureLogging at the table tools' default ("warn"); a bad level is
// printed as "TOOL: message" on stderr. False means: exit 2.
bool ConfigureToolLogging(const char* tool, std::string_view level);

// Adds --log-level to a CLI11 app (a template so this header needs no CLI11).
template <typename App>
void AddLogLevelOption(App& app, std::string& level) {
  app.add_option("--log-level", level, kLogLevelHelp);
}

}  // namespace engram
