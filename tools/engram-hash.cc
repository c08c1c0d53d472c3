// engram-hash: token IDs -> Engram row IDs for one layer.
//   engram-hash --layout FILE [--layer I] [--token-map FILE] TOKENS.u32 OUT
// OUT holds little-endian uint64 row IDs, [position][order][head].
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "src/common/logging.h"
#include "engram/hasher.h"
#include "src/replay/trace_files.h"

namespace {

engram::Status Run(const std::string& layout_path, uint32_t layer, const std::string& map_path,
                   const std::string& tokens_path, const std::string& out_path) {
  ENGRAM_ASSIGN_OR_RETURN(engram::EngramHashLayout layout, engram::EngramHashLayout::FromFile(layout_path, layer));
  std::shared_ptr<const engram::TokenMap> map;
  if (!map_path.empty()) {
    ENGRAM_ASSIGN_OR_RETURN(engram::TokenMap m, engram::TokenMap::FromFile(map_path));
    map = std::make_shared<engram::TokenMap>(std::move(m));
  }
  ENGRAM_ASSIGN_OR_RETURN(engram::NgramHasher hasher, engram::NgramHasher::Create(std::move(layout), map));
  ENGRAM_ASSIGN_OR_RETURN(std::vector<uint32_t> tokens, engram::replay::ReadTokenFile(tokens_path));
  auto rows = hasher.Hash(tokens);
  if (!rows.ok()) return rows.status().WithContext(tokens_path);
  return engram::replay::WriteU64File(out_path, *rows);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Hash token IDs into Engram row IDs (little-endian uint64, [position][order][head])"};
  std::string layout_path, map_path, tokens_path, out_path;
  uint32_t layer = 0;
  app.add_option("--layout", layout_path, "hash layout JSON (e.g. layout-v41.json)")->required();
  app.add_option("--layer", layer, "layer index in the layout's 'layers' (default 0)");
  app.add_option("--token-map", map_path, "compressed-token map (LE uint32); omitted = identity");
  app.add_option("tokens", tokens_path, "token IDs, little-endian uint32")->required();
  app.add_option("out", out_path, "output row IDs, little-endian uint64")->required();
  std::string log_level;
  engram::AddLogLevelOption(app, log_level);
  CLI11_PARSE(app, argc, argv);
  if (engram::Status log_status = engram::ConfigureLogging(log_level, "warn"); !log_status.ok()) {
    std::fprintf(stderr, "engram-hash: %s\n", log_status.ToString().c_str());
    return 2;
  }
  engram::Status st = Run(layout_path, layer, map_path, tokens_path, out_path);
  if (!st.ok()) {
    std::fprintf(stderr, "engram-hash: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
