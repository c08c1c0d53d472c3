#include "bench/in_place_command.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "src/common/stdout_written.h"

namespace engram::bench {

CLI::App* RegisterInPlaceCommand(CLI::App& app, InPlaceArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "inplace",
      "In-place (reference) table vs the converted table from the same generated safetensors shards: "
      "conversion, open time, miss-path rows/s and read amplification; ratios in-place / converted");
  cmd->add_option("--dir", a.config.dir, "Directory for the shards and both tables (e.g. /dev/shm/x or /work/x)")
      ->required();
  cmd->add_option("--rows", a.config.rows, "Rows of the table (264 B each)")->capture_default_str();
  cmd->add_option("--shards", a.config.shards, "Shards the rows are split over")->capture_default_str();
  cmd->add_option("--rows-per-gather", a.config.rows_per_gather, "Rows per gather")->capture_default_str();
  cmd->add_option("--backend", a.config.io_backend, "I/O backend: auto, io_uring, pread, mmap")->capture_default_str();
  cmd->add_option("--cache-mib", a.cache_mib, "Row cache of each store (small: nearly every row misses)")
      ->capture_default_str();
  cmd->add_option("--seconds", a.config.seconds, "Miss-path time per kind")->capture_default_str();
  cmd->add_option("--opens", a.config.opens, "Store opens timed per kind (median)")->capture_default_str();
  cmd->add_flag("--json", a.json, "One JSON object per line");
  return cmd;
}

int RunInPlaceCommand(const InPlaceArgs& args) {
  InPlaceBenchConfig c = args.config;
  c.cache_bytes = static_cast<uint64_t>(args.cache_mib * (1 << 20));
  auto report = RunInPlaceBenchmark(c, [](const std::string& l) { std::fprintf(stderr, "%s\n", l.c_str()); });
  if (!report.ok()) {
    std::fprintf(stderr, "engram-bench inplace: %s\n", report.status().ToString().c_str());
    const StatusCode code = report.status().code();
    return code == StatusCode::kInvalidArgument || code == StatusCode::kNotFound ? 2 : 1;
  }
  const InPlaceBenchReport& r = *report;
  const InPlaceKind& conv = r.kinds[0];
  std::fprintf(stderr, "inplace: %s\n", r.io_description.c_str());
  const double disk = r.shard_bytes ? double(r.reference_bytes) / double(r.shard_bytes) : 0;
  if (args.json) {
    std::printf("%s\n", nlohmann::json({{"kind", "inplace_files"},
                                         {"shard_bytes", r.shard_bytes},
                                         {"converted_bytes", r.converted_bytes},
                                         {"reference_bytes", r.reference_bytes},
                                         {"reference_disk_share", disk},
                                         {"convert_seconds", r.convert_seconds},
                                         {"reference_seconds", r.reference_seconds}})
                            .dump()
                            .c_str());
  } else {
    std::printf("inplace files shard_bytes=%llu converted_bytes=%llu reference_bytes=%llu reference_disk_share=%.5f "
                "convert_s=%.2f reference_s=%.2f\n",
                static_cast<unsigned long long>(r.shard_bytes), static_cast<unsigned long long>(r.converted_bytes),
                static_cast<unsigned long long>(r.reference_bytes), disk, r.convert_seconds, r.reference_seconds);
  }
  for (const InPlaceKind& k : r.kinds) {
    const double ratio = conv.rows_per_s() > 0 ? k.rows_per_s() / conv.rows_per_s() : 0;
    const double open_ratio = conv.open_ms > 0 ? k.open_ms / conv.open_ms : 0;
    if (args.json) {
      std::printf("%s\n", nlohmann::json({{"kind", "inplace"},
                                           {"table", k.name},
                                           {"open_ms", k.open_ms},
                                           {"rows", k.rows},
                                           {"misses", k.misses},
                                           {"rows_per_s", k.rows_per_s()},
                                           {"reads_per_miss", k.reads_per_miss()},
                                           {"read_amplification", k.read_amplification(r.record_bytes)},
                                           {"rows_per_s_ratio", ratio},
                                           {"open_ratio", open_ratio}})
                              .dump()
                              .c_str());
    } else {
      std::printf("inplace table=%s open_ms=%.2f rows=%llu misses=%llu rows_per_s=%.0f reads_per_miss=%.3f "
                  "read_amplification=%.2f rows_per_s_ratio=%.3f open_ratio=%.2f\n",
                  k.name.c_str(), k.open_ms, static_cast<unsigned long long>(k.rows),
                  static_cast<unsigned long long>(k.misses), k.rows_per_s(), k.reads_per_miss(),
                  k.read_amplification(r.record_bytes), ratio, open_ratio);
    }
  }
  if (StdoutWritten()) return 0;
  std::fprintf(stderr, "engram-bench inplace: write to stdout failed\n");
  return 1;
}

}  // namespace engram::bench
