// engram-gen: writes a synthetic Engram table whose row r holds
// GenerateRow(seed, r) (src/tablegen/row_generator.h), so any reader can check
// any row byte for byte. --emit-rows prints generator bytes without writing a
// table (for scripts that check what a table returns).
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "src/common/logging.h"
#include "src/common/progress_meter.h"
#include "src/common/stdout_written.h"
#include "src/tablegen/row_generator.h"
#include "src/tablegen/table_generator.h"
#include "storage/embedded_hash_layout.h"
#include "storage/temp_file_cleanup.h"

namespace {

int Fail(const engram::Status& s) {
  std::fprintf(stderr, "engram-gen: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Write a synthetic Engram table: row r = GenerateRow(seed, r)."};
  uint64_t rows = 0;
  uint32_t record_bytes = 264;
  uint64_t seed = 0;
  std::string layout_file, out;
  int64_t layer_id = -1;
  bool progress = false;
  std::vector<uint64_t> emit_rows;
  uint64_t salt = 0;
  auto* rows_opt = app.add_option("--rows", rows, "number of rows (default with --layout: the layer's total_rows)");
  app.add_option("--record-bytes", record_bytes, "bytes per record (1..4088)")
      ->check(CLI::Range(1, 4088))
      ->capture_default_str();
  app.add_option("--seed", seed, "generator seed")->capture_default_str();
  auto* layout_opt = app.add_option("--layout", layout_file, "hash layout file to embed (e.g. layout-v41.json)");
  app.add_option("--layer", layer_id, "layer_id of the layout's layer to embed")->needs(layout_opt);
  auto* salt_opt = app.add_option("--checksum-salt", salt, "fixed block checksum salt (default: random)");
  app.add_flag("--progress", progress, "show a progress bar even when stderr is not a terminal");
  auto* emit_opt =
      app.add_option("--emit-rows", emit_rows, "print the generator bytes of these rows to stdout (raw) and exit")
          ->delimiter(',');
  auto* out_opt = app.add_option("OUT", out, "output table file");
  // --emit-rows writes no table: options that only shape a table are errors
  // with it, not silently ignored.
  emit_opt->excludes(out_opt)->excludes(rows_opt)->excludes(layout_opt)->excludes(salt_opt);
  std::string log_level;
  engram::AddLogLevelOption(app, log_level);
  CLI11_PARSE(app, argc, argv);
  // A table being written sits under a temporary name until it is complete;
  // Ctrl-C and SIGTERM must not leave it behind.
  engram::RemoveTempFilesOnTerminationSignals();
  if (!engram::ConfigureToolLogging("engram-gen", log_level)) return 2;

  if (!emit_rows.empty()) {
    std::vector<std::byte> row(record_bytes);
    for (uint64_t r : emit_rows) {
      engram::GenerateRow(seed, r, row);
      if (std::fwrite(row.data(), 1, row.size(), stdout) != row.size()) return Fail(engram::Status::IOError("stdout"));
    }
    if (!engram::StdoutWritten()) return Fail(engram::Status::IOError("write to stdout failed"));
    return 0;
  }
  if (out.empty()) return Fail(engram::Status::InvalidArgument("missing OUT (the table file to write)"));

  std::optional<nlohmann::json> layout;
  if (!layout_file.empty()) {
    if (layer_id < 0) return Fail(engram::Status::InvalidArgument("--layout needs --layer <layer_id>"));
    auto l = engram::LoadLayerHashLayout(layout_file, layer_id);
    if (!l.ok()) return Fail(l.status());
    layout = *l;
    if (rows_opt->count() == 0 && layout->contains("total_rows") && (*layout)["total_rows"].is_number_unsigned()) {
      rows = (*layout)["total_rows"].get<uint64_t>();
    }
    if (auto s = engram::ValidateHashLayout(*layout, rows); !s.ok()) return Fail(s);
  } else if (rows_opt->count() == 0) {
    return Fail(engram::Status::InvalidArgument("--rows is required (or --layout/--layer to take the layer's size)"));
  }

  nlohmann::json meta;
  meta["format"] = "engram-table/1";
  meta["record"] = {{"bytes", record_bytes},
                    {"fields", nlohmann::json::array({{{"name", "synthetic"},
                                                       {"dtype", "U8"},
                                                       {"offset", 0},
                                                       {"bytes", record_bytes},
                                                       {"row_shape", {record_bytes}}}})}};
  meta["rows"] = rows;
  meta["source"] = {{"kind", "engram-gen"}, {"generator", "xxh3-splitmix64/1"}, {"seed", seed}};
  meta["created_by"] = std::string("engram-gen ") + ENGRAM_VERSION;
  if (layout) meta["hash_layout"] = *layout;

  engram::GenerateTableOptions g;
  g.rows = rows;
  g.record_bytes = record_bytes;
  g.seed = seed;
  g.metadata = std::move(meta);
  if (salt_opt->count()) g.checksum_salt = salt;
  engram::ProgressMeter meter("engram-gen", rows * record_bytes, progress);
  if (auto s = engram::GenerateTable(out, g, [&](uint64_t done, uint64_t) { meter.Update(done); }); !s.ok()) {
    return Fail(s);
  }
  meter.Finish();
  return 0;
}
