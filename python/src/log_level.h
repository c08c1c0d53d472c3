// Where the store's log lines go in a Python process, and how many.
//
// The library logs through spdlog's default logger, which writes to stdout:
// in a serving process stdout may carry the program's own output (a JSON
// response, a pipe), so on import the package installs a stderr logger in its
// place. Its level is warning unless the SPDLOG_LEVEL environment variable
// (spdlog's syntax, e.g. "debug" or "engram_store=info") says otherwise;
// engram_store.set_log_level() changes it at any time. Log lines are never
// routed through Python's logging module: the store's I/O threads log
// without the GIL, and taking it there could deadlock against a Python
// thread that waits for the store with the GIL held.
#pragma once

#include <string>

namespace engram::python {

// Once, at import (before any Store exists: the default logger is swapped).
// Leaves a default logger that the host program installed alone.
void InstallLibraryLogger();

// level: spdlog's names, "trace" ... "off" ("warn" and "warning" alike).
// ValueError for any other name.
void SetLibraryLogLevel(const std::string& level);

// The current level's name ("warning", "off", ...).
std::string LibraryLogLevel();

}  // namespace engram::python
