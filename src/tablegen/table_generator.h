// GenerateTable: writes a synthetic table whose row r is GenerateRow(seed, r)
// (src/tablegen/row_generator.h), in large sequential batches with bounded memory.
// Used by engram-gen, the demo, benchmarks and tests.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engram/status.h"

namespace engram {

struct GenerateTableOptions {
  uint64_t rows = 0;
  uint32_t record_bytes = 264;
  uint64_t seed = 0;
  // Extra metadata (e.g. {"hash_layout": ...}); "generator" is added.
  nlohmann::json metadata = nlohmann::json::object();
  bool sync = true;
  std::optional<uint64_t> checksum_salt;  // default: random (see TableWriterOptions)
};

// progress(bytes_done, bytes_total) now and then.
Status GenerateTable(const std::string& path, const GenerateTableOptions& options,
                     const std::function<void(uint64_t, uint64_t)>& progress = {});

// The seed GenerateTable recorded in a table's metadata, or nullopt when the
// metadata (which any writer may have made) has no unsigned seed there.
// Reads without typed access, so another shape never throws.
std::optional<uint64_t> GeneratorSeed(const nlohmann::json& metadata);

}  // namespace engram
