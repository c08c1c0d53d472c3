// engram-hash: token IDs -> Engram row IDs for one layer.
//   engram-hash --layout FILE [--layer I] [--token-map FILE] TOKENS.u32 OUT
// OUT holds little-endian uint64 row IDs, [position][order][head].
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "src/common/logging.h"
#include "engram/hasher.h"
#include "src/replay/trace_files.h"
#include "storage/input_files.h"

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
  // The row IDs take 48 times the tokens' bytes: hash and write them a chunk
  // at a time (the tokens before a chunk are its history), so memory does not
  // grow with the output. A failure removes the partial output.
  constexpr size_t kChunkTokens = size_t(1) << 16;
  std::vector<uint64_t> rows(std::min(tokens.size(), kChunkTokens) * hasher.rows_per_token());
  // Not an input: the layout and token map were recorded as read.
  ENGRAM_RETURN_IF_ERROR(engram::CheckNotAnInput(out_path, "output"));
  std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(out_path.c_str(), "wb"), &std::fclose);
  if (!out) return engram::Status::FromErrno("output " + out_path, errno);
  auto failed = [&](engram::Status s) {
    out.reset();
    std::remove(out_path.c_str());
    return s;
  };
  const std::span<const uint32_t> all(tokens);
  for (size_t begin = 0; begin < all.size(); begin += kChunkTokens) {
    const std::span<const uint32_t> chunk = all.subspan(begin, std::min(kChunkTokens, all.size() - begin));
    const size_t n = chunk.size() * hasher.rows_per_token();
    engram::Status st = hasher.Hash(all.first(begin), chunk, std::span<uint64_t>(rows).first(n));
    if (!st.ok()) return failed(st.WithContext(tokens_path + " (chunk at token " + std::to_string(begin) + ")"));
    if (std::fwrite(rows.data(), 8, n, out.get()) != n) return failed(engram::Status::FromErrno("write " + out_path, errno));
  }
  if (std::fclose(out.release()) != 0) {
    const int e = errno;
    std::remove(out_path.c_str());
    return engram::Status::FromErrno("close " + out_path, e);
  }
  return engram::Status::OK();
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
  if (!engram::ConfigureToolLogging("engram-hash", log_level)) return 2;
  engram::Status st = Run(layout_path, layer, map_path, tokens_path, out_path);
  if (!st.ok()) {
    std::fprintf(stderr, "engram-hash: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
