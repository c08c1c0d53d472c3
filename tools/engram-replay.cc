// engram-replay: trace-driven emulation of the row cache (and of its fully
// associative bounds) on Engram row-ID traces. See src/replay/replay_command.h.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "src/common/logging.h"
#include "src/common/stdout_written.h"
#include "src/replay/replay_command.h"

int main(int argc, char** argv) {
  engram::replay::ReplayArgs a;
  CLI::App app{"Replay Engram row lookups through row-cache policies and report hit rates"};
  app.add_option("--layout", a.layout_path, "hash layout JSON (layout-v41.json)");
  app.add_option("--layer", a.layer, "layer index in the layout (default 0)");
  app.add_option("--token-map", a.token_map_path, "compressed-token map (LE uint32); omitted = identity");
  app.add_option("--request", a.requests,
                 "FILE[@SPLIT], repeated in order: LE uint32 token IDs; SPLIT = N tokens per chunk (default 4096) "
                 "or xK equal chunks; each chunk is one gather");
  app.add_option("--rows", a.rows_path, "plain row-ID trace: one decimal row ID per line, each line one gather");
  app.add_option("--capacity-rows", a.capacity_rows, "cache capacity in rows");
  app.add_option("--cache-bytes", a.cache_bytes, "cache size (K/M/G/KiB/MiB/GiB); capacity = SIZE / --row-bytes");
  app.add_option("--row-bytes", a.row_bytes, "bytes per row for --cache-bytes (default 264)");
  app.add_option("--sketch-bytes", a.sketch_bytes, "frequency-sketch size for every RowCache policy");
  app.add_option("--policy", a.policies,
                 "repeated: legacy, ways8, ways16, two-choice, lru, default, full-lru, belady, belady-bypass, or key=value specs "
                 "(default: all of these); SPEC+side=F emulates a FIFO of refused rows beside the cache, F of the capacity")
      ->take_all();
  app.add_flag("--json", a.json, "one JSON object per line per (policy, request)");
  app.add_option("--export-rows", a.export_rows_path, "write the lookups (after per-gather dedup), one per line");
  app.add_option("--sweep", a.sweep, "capacities: multiples of the capacity (0.25,0.5,1,2 or 1.5x) or rows (>= 1000)");
  app.add_option("--csv", a.csv_path, "with --sweep: write the miss-ratio curve as CSV");
  app.add_option("--plot", a.plot_path, "with --sweep: plot the miss-ratio curve to a PNG (gnuplot)");
  app.add_option("--threads", a.threads, "policies replayed in parallel (default 2)");
  std::string log_level;
  engram::AddLogLevelOption(app, log_level);
  CLI11_PARSE(app, argc, argv);
  if (!engram::ConfigureToolLogging("engram-replay", log_level)) return 2;

  auto out = engram::replay::RunReplay(a);
  if (!out.ok()) {
    std::fprintf(stderr, "engram-replay: %s\n", out.status().ToString().c_str());
    return 1;
  }
  // A full disk or a closed pipe must not look like success.
  if (std::fwrite(out->data(), 1, out->size(), stdout) != out->size() || !engram::StdoutWritten()) {
    std::fprintf(stderr, "engram-replay: write to stdout failed\n");
    return 1;
  }
  return 0;
}
