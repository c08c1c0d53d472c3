#include "python/src/log_level.h"

#include <memory>

#include <pybind11/pybind11.h>
#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace py = pybind11;

namespace engram::python {
namespace {

constexpr const char* kLoggerName = "engram_store";

}  // namespace

void InstallLibraryLogger() {
  // Only spdlog's own stdout logger (named "") is replaced: a host program
  // that installed a default logger of its own keeps it, and its level.
  if (!spdlog::default_logger()->name().empty()) return;
  auto logger = std::make_shared<spdlog::logger>(kLoggerName, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_level(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
  spdlog::cfg::load_env_levels();
}

void SetLibraryLogLevel(const std::string& level) {
  // from_str maps every unknown name to "off": a typo must not silence logs.
  const spdlog::level::level_enum l = spdlog::level::from_str(level);
  if (l == spdlog::level::off && level != "off") {
    throw py::value_error("unknown log level '" + level + "' (trace, debug, info, warning, error, critical, off)");
  }
  spdlog::default_logger()->set_level(l);
}

std::string LibraryLogLevel() {
  const spdlog::string_view_t name = spdlog::level::to_string_view(spdlog::default_logger()->level());
  return std::string(name.data(), name.size());
}

}  // namespace engram::python
