// engram-convert: turns checkpoint tensors (safetensors shards or .npy files)
// into one Engram table file (storage/table_converter.h), or -- with
// --ranks R -- a layer's rows, from those tensors or from an existing table,
// into R rank tables and their manifest (storage/rank_converter.h).
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "src/common/exit_codes.h"
#include "src/common/logging.h"
#include "src/common/progress_meter.h"
#include "storage/embedded_hash_layout.h"
#include "storage/rank_converter.h"
#include "storage/reference_writer.h"
#include "storage/table_converter.h"
#include "storage/temp_file_cleanup.h"

namespace {

// Exit status of a failure (src/common/exit_codes.h): 2 for bad input (a
// usage error, a missing shard or tensor, a wrong dtype or shape, a bad
// layout file), 1 for a failure of the conversion itself (an I/O error, no
// memory). The same for a rewritten and an in-place table.
int Fail(const engram::Status& s) {
  std::fprintf(stderr, "engram-convert: %s\n", s.ToString().c_str());
  return engram::ExitCodeFor(s);
}

int ReportRanks(const engram::RankManifest& m, const std::string& out) {
  for (const engram::RankFile& f : m.rank_files) {
    std::fprintf(stderr, "engram-convert: wrote %s: rank %u of %u, %zu slots, %llu rows\n", f.path.c_str(), f.rank,
                 m.ranks, f.slots.size(), static_cast<unsigned long long>(f.rows));
  }
  std::fprintf(stderr, "engram-convert: wrote %s: manifest of %u rank tables (%llu source rows)\n", out.c_str(),
               m.ranks, static_cast<unsigned long long>(m.source_rows));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Convert an Engram embedding tensor into an Engram table file.\n"
      "Each record is one weight row followed by the same row of the scale tensor (if any);\n"
      "several shards are concatenated in the order given."};
  std::vector<std::string> st_files, npy_files, npy_scale_files;
  std::string weight, scale, layout_file, out, table_in;
  int64_t ranks = 0;
  int64_t layer_id = -1;
  bool progress = false, in_place = false;
  size_t chunk_mib = 8;
  uint64_t salt = 0;
  auto* st = app.add_option("--safetensors", st_files, "safetensors shard(s), comma separated, in row order")
                 ->delimiter(',');
  auto* npy = app.add_option("--npy", npy_files, ".npy weight shard(s), comma separated, in row order")
                  ->delimiter(',')
                  ->excludes(st);
  app.add_option("--npy-scale", npy_scale_files, ".npy scale shard(s), one per --npy file")
      ->delimiter(',')
      ->needs(npy);
  app.add_option("--weight", weight, "weight tensor name in each safetensors shard")->needs(st);
  app.add_option("--scale", scale, "scale tensor name in each safetensors shard (appended to each row)")->needs(st);
  auto* layout_opt = app.add_option("--layout", layout_file, "hash layout file to embed (e.g. layout-v41.json)");
  app.add_option("--layer", layer_id, "layer_id of the layout's layer to embed")->needs(layout_opt);
  app.add_option("--chunk-mib", chunk_mib, "read chunk size in MiB (1..4096)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  auto* salt_opt = app.add_option("--checksum-salt", salt, "fixed block checksum salt (default: random)");
  app.add_flag("--in-place", in_place,
               "write a small reference table that serves the rows from the safetensors shards where they lie "
               "(block checksums, shard sizes, times and fingerprints) instead of a rewritten table")
      ->needs(st);
  app.add_flag("--progress", progress, "show a progress bar even when stderr is not a terminal");
  // Rank tables: a layer split over tensor-parallel ranks by slot.
  auto* ranks_opt = app.add_option("--ranks", ranks,
                                   "write R rank tables (rank r holds the slots s with s % R == r) and a manifest: "
                                   "OUT names the manifest (OUT.json), the tables are <stem>.rank<r>-of-<R>.engram "
                                   "beside it; R in 1..24");
  app.add_option("--table", table_in, "an existing Engram table to split into rank tables (needs --ranks)")
      ->excludes(st)
      ->excludes(npy)
      ->needs(ranks_opt);
  app.add_option("OUT", out, "output table file (with --ranks: the manifest)")->required();
  std::string log_level;
  engram::AddLogLevelOption(app, log_level);
  CLI11_PARSE(app, argc, argv);
  // A table being written sits under a temporary name until it is complete;
  // Ctrl-C and SIGTERM must not leave it behind.
  engram::RemoveTempFilesOnTerminationSignals();
  if (!engram::ConfigureToolLogging("engram-convert", log_level)) return 2;

  if (ranks_opt->count() && (ranks < 1 || ranks > engram::kMaxRanks)) {
    return Fail(engram::Status::InvalidArgument("--ranks " + std::to_string(ranks) + " is outside 1.." +
                                                std::to_string(engram::kMaxRanks)));
  }
  // The output must not be an input (the --layout file too) or a directory:
  // refuse before reading anything.
  {
    std::vector<std::string> inputs = st_files;
    if (!table_in.empty()) inputs.push_back(table_in);
    if (!layout_file.empty()) inputs.push_back(layout_file);
    inputs.insert(inputs.end(), npy_files.begin(), npy_files.end());
    inputs.insert(inputs.end(), npy_scale_files.begin(), npy_scale_files.end());
    if (engram::Status s = engram::CheckConvertOutput(out, inputs); !s.ok()) return Fail(s);
  }

  engram::ConvertOptions opt;
  opt.created_by = std::string("engram-convert ") + ENGRAM_VERSION;
  opt.chunk_bytes = chunk_mib << 20;
  if (salt_opt->count()) opt.writer.checksum_salt = salt;
  if (!layout_file.empty()) {
    if (layer_id < 0) return Fail(engram::Status::InvalidArgument("--layout needs --layer <layer_id>"));
    auto l = engram::LoadLayerHashLayout(layout_file, layer_id);
    if (!l.ok()) return Fail(l.status());
    opt.hash_layout = *l;
  }
  engram::RankConvertOptions rank_opt;
  rank_opt.ranks = static_cast<uint32_t>(ranks);
  rank_opt.in_place = in_place;
  if (!table_in.empty()) {
    rank_opt.convert = opt;
    auto manifest = engram::ConvertTableToRanks(table_in, out, rank_opt);
    if (!manifest.ok()) return Fail(manifest.status());
    return ReportRanks(*manifest, out);
  }

  engram::Result<engram::ConvertSpec> spec = engram::Status::InvalidArgument("give --safetensors or --npy (or --table with --ranks)");
  if (!st_files.empty()) {
    if (weight.empty()) return Fail(engram::Status::InvalidArgument("--safetensors needs --weight NAME"));
    spec = engram::SafetensorsConvertSpec(st_files, weight, scale);
  } else if (!npy_files.empty()) {
    spec = engram::NpyConvertSpec(npy_files, npy_scale_files);
  }
  if (!spec.ok()) return Fail(spec.status());
  auto record_bytes = engram::ConvertRecordBytes(*spec);
  if (!record_bytes.ok()) return Fail(record_bytes.status());

  uint64_t total_rows = 0;
  for (const auto& w : spec->weight) total_rows += w.tensor.rows();
  engram::ProgressMeter meter("engram-convert", total_rows * *record_bytes, progress);
  opt.progress = [&](uint64_t done, uint64_t) { meter.Update(done * *record_bytes); };
  if (ranks_opt->count()) {
    rank_opt.convert = opt;
    auto manifest = engram::ConvertSpecToRanks(*spec, out, rank_opt);
    if (!manifest.ok()) return Fail(manifest.status());
    meter.Finish();
    return ReportRanks(*manifest, out);
  }
  auto header = in_place ? engram::WriteReferenceTable(*spec, out, opt) : engram::ConvertToTable(*spec, out, opt);
  if (!header.ok()) return Fail(header.status());
  meter.Finish();
  std::fprintf(stderr, "engram-convert: wrote %s: %llu rows of %u bytes%s\n", out.c_str(),
               static_cast<unsigned long long>(header->row_count), header->record_bytes,
               in_place ? " (in place: a reference to the shards)" : "");
  return 0;
}
