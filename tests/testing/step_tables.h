// Tables for the step path's tests: two V4.1-shaped layers scaled down
// (their hash layouts embedded, as StepStager needs), generated with seeds
// 100 and 101, the fixture's token map, and what a step's `out` must hold.
#pragma once

#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engram/hasher.h"
#include "engram/step_stager.h"
#include "engram/store.h"
#include "src/ngram/scaled_layout.h"
#include "src/tablegen/table_generator.h"
#include "tests/testing/temp_table.h"

namespace engram::testing {

inline constexpr uint32_t kStepRecordBytes = 264;
inline uint64_t StepTableSeed(size_t layer) { return 100 + layer; }

struct StepTables {
  std::vector<std::string> paths;  // layer0.engram, layer1.engram
  std::shared_ptr<const TokenMap> map;
};

// Writes the two layers into `dir` (rows about base_rows and base_rows + 3000).
inline StepTables WriteStepTables(const TempDir& dir, uint64_t base_rows = 20000) {
  const std::string hash_dir = std::string(ENGRAM_FIXTURE_DIR) + "/engram-hash";
  StepTables t;
  for (uint32_t layer : {0u, 1u}) {
    auto full = EngramHashLayout::FromFile(hash_dir + "/layout-v41.json", layer);
    EXPECT_TRUE(full.ok()) << full.status().ToString();
    auto scaled = ScaleLayout(*full, base_rows + layer * 3000);
    EXPECT_TRUE(scaled.ok()) << scaled.status().ToString();
    GenerateTableOptions g;
    g.rows = scaled->total_rows;
    g.record_bytes = kStepRecordBytes;
    g.seed = StepTableSeed(layer);
    g.sync = false;
    g.metadata["hash_layout"] = nlohmann::json::parse(scaled->ToJson());
    const std::string path = dir.File("layer" + std::to_string(layer) + ".engram");
    EXPECT_TRUE(GenerateTable(path, g).ok());
    t.paths.push_back(path);
  }
  auto map = TokenMap::FromFile(hash_dir + "/token-map.u32");
  EXPECT_TRUE(map.ok());
  t.map = std::make_shared<const TokenMap>(std::move(map).value());
  return t;
}

// `n` tokens from a small vocabulary (so n-grams repeat), seeded.
inline std::vector<uint32_t> StepTokens(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> tokens(n);
  for (uint32_t& x : tokens) x = 3 + rng() % 400;
  return tokens;
}

// A step's row IDs as a GPU hash kernel writes them: [token][layer][slot].
inline std::vector<uint64_t> StepIds(const StepStager& stager, std::span<const uint32_t> history,
                                     std::span<const uint32_t> tokens) {
  const size_t slots = stager.rows_per_token(), layers = stager.layers();
  std::vector<uint64_t> ids(tokens.size() * layers * slots);
  std::vector<uint64_t> layer_ids(tokens.size() * slots);
  for (size_t l = 0; l < layers; ++l) {
    EXPECT_TRUE(stager.hasher(l).Hash(history, tokens, layer_ids).ok());
    for (size_t t = 0; t < tokens.size(); ++t) {
      std::memcpy(&ids[(t * layers + l) * slots], &layer_ids[t * slots], slots * sizeof(uint64_t));
    }
  }
  return ids;
}

// Whether layer `layer` of `out` holds the rows `ids` ([token][layer][slot],
// IDs of tables written by WriteStepTables) name.
inline bool LayerHoldsRows(const std::byte* out, std::span<const uint64_t> ids, size_t layers, size_t slots,
                           size_t layer) {
  const size_t tokens = ids.size() / (layers * slots);
  for (size_t t = 0; t < tokens; ++t) {
    for (size_t s = 0; s < slots; ++s) {
      const size_t at = (t * layers + layer) * slots + s;
      const auto want = ExpectedRow(StepTableSeed(layer), ids[at], kStepRecordBytes);
      if (std::memcmp(out + at * kStepRecordBytes, want.data(), kStepRecordBytes) != 0) return false;
    }
  }
  return true;
}

}  // namespace engram::testing
