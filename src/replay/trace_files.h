// Reading and writing the emulator's trace files.
//
// Token files are little-endian uint32 token IDs (as in tests/fixtures/traces);
// row traces are text, one decimal row ID per line. Both are read whole, from
// a regular file of at most 4 GiB (a FIFO, a device or a directory is
// InvalidArgument, never waited on or read).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engram/status.h"

namespace engram::replay {

// A little-endian uint32 file; its size must be a multiple of 4.
Result<std::vector<uint32_t>> ReadTokenFile(const std::string& path);
// Little-endian uint64 values, e.g. engram-hash output.
Status WriteU64File(const std::string& path, std::span<const uint64_t> values);
// One decimal row ID per line. Blank lines are not allowed: each line is one
// gather, and a silently skipped line would shift every count.
Result<std::vector<uint64_t>> ReadRowTrace(const std::string& path);
Status WriteRowTrace(const std::string& path, std::span<const uint64_t> rows);

}  // namespace engram::replay
