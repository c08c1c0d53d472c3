#include "bench/step_command.h"

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "src/common/cli_checks.h"
#include "src/common/stdout_written.h"

namespace engram::bench {

CLI::App* RegisterStepCommand(CLI::App& app, StepArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "step", "A runtime's step (tokens or row IDs in, [tokens, layers, slots, record] out) through the step path, "
              "ns per row beside one flat gather per layer of the same rows and beside hash + gather per layer");
  cmd->add_option("--dir", a.config.dir, "Where the two layers' tables are (generated there when missing)")
      ->capture_default_str();
  cmd->add_option("--rows-per-table", a.config.rows_per_table, "Rows of each generated layer table")
      ->check(CLI::Range(uint64_t{10000}, uint64_t{1} << 32))
      ->capture_default_str();
  cmd->add_option("--fixtures", a.fixtures, "Folder with engram-hash/ (layout and token map)")->capture_default_str();
  auto* map = cmd->add_option("--token-map", a.config.token_map_path,
                              "Token map (default: fixtures/engram-hash/token-map.u32)");
  cmd->add_flag("--identity", a.identity, "Hash raw token IDs instead of the token map")->excludes(map);
  cmd->add_option("--tokens", a.config.step_tokens, "Tokens per step, one measurement each")
      ->delimiter(',')
      ->check(CLI::Range(uint32_t{1}, uint32_t{65536}))
      ->capture_default_str();
  cmd->add_option("--cases", a.config.cases, "hit (warm store), miss (fresh store, new tokens)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--modes", a.config.modes, "Modes to run (default: all; see the header of step_benchmark.h)")
      ->delimiter(',');
  cmd->add_option("--history", a.config.history, "Tokens of history passed with each step")
      ->check(CLI::Range(uint32_t{0}, uint32_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--seconds", a.config.seconds, "Time per mode, step size and round (hits)")
      ->check(FiniteRange(0.001, 3600.0))
      ->capture_default_str();
  cmd->add_option("--rounds", a.config.rounds, "Rounds; every mode runs once per round")
      ->check(CLI::Range(uint32_t{1}, uint32_t{1000}))
      ->capture_default_str();
  cmd->add_option("--miss-rows", a.config.miss_rows, "Rows an all-miss round of one mode stages")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--word-steps", a.config.word_steps,
                  "Steps whose completion words' latency is measured per case and step size (0: none)")
      ->capture_default_str();
  cmd->add_option("--backend", a.config.io_backend, "I/O backend: auto, io_uring, pread, mmap")->capture_default_str();
  cmd->add_option("--seed", a.config.seed, "Token seed")->capture_default_str();
  cmd->add_flag("--json", a.json, "One JSON object per line");
  return cmd;
}

int RunStepCommand(const StepArgs& args) {
  StepBenchConfig c = args.config;
  c.layout_path = args.fixtures + "/engram-hash/layout-v41.json";
  if (args.identity) {
    c.token_map_path.clear();
  } else if (c.token_map_path.empty()) {
    c.token_map_path = args.fixtures + "/engram-hash/token-map.u32";
  }
  auto report = RunStepBenchmark(c, [](const std::string& l) { std::fprintf(stderr, "%s\n", l.c_str()); });
  if (!report.ok()) {
    std::fprintf(stderr, "engram-bench step: %s\n", report.status().ToString().c_str());
    const StatusCode code = report.status().code();
    return code == StatusCode::kInvalidArgument || code == StatusCode::kNotFound ? 2 : 1;
  }
  std::fprintf(stderr, "step: %s, history %u tokens, %u rounds\n", report->io_description.c_str(), c.history,
               c.rounds);
  for (const StepBenchPoint& p : report->points) {
    const double median = StepMedian(p.ns_per_row);
    const double lo = p.ns_per_row.empty() ? 0 : *std::min_element(p.ns_per_row.begin(), p.ns_per_row.end());
    const double hi = p.ns_per_row.empty() ? 0 : *std::max_element(p.ns_per_row.begin(), p.ns_per_row.end());
    const double hit_rate = p.distinct_rows ? double(p.hits) / double(p.distinct_rows) : 0;
    if (args.json) {
      std::printf("%s\n", nlohmann::json({{"case", p.case_name},
                                           {"tokens", p.tokens},
                                           {"mode", p.mode},
                                           {"ns_per_row_median", median},
                                           {"ns_per_row_min", lo},
                                           {"ns_per_row_max", hi},
                                           {"ns_per_row", p.ns_per_row},
                                           {"ratio_to_flat", StepMedian(p.ratio_to_flat)},
                                           {"ratio_to_hash_gather", StepMedian(p.ratio_to_hash_gather)},
                                           {"rows", p.rows},
                                           {"distinct_rows", p.distinct_rows},
                                           {"hit_rate", hit_rate}})
                              .dump()
                              .c_str());
    } else {
      std::printf("step %-4s tokens=%-4u %-16s ns_per_row=%9.1f (%.1f-%.1f) x_flat=%6.3f x_hash_gather=%6.3f "
                  "hit_rate=%.3f\n",
                  p.case_name.c_str(), p.tokens, p.mode.c_str(), median, lo, hi, StepMedian(p.ratio_to_flat),
                  StepMedian(p.ratio_to_hash_gather), hit_rate);
    }
  }
  for (const WordLatency& w : report->word_latency) {
    if (args.json) {
      std::printf("%s\n", nlohmann::json({{"case", w.case_name},
                                           {"tokens", w.tokens},
                                           {"mode", "word_latency"},
                                           {"samples", w.samples},
                                           {"p50_ns", w.p50_ns},
                                           {"p90_ns", w.p90_ns},
                                           {"p99_ns", w.p99_ns},
                                           {"max_ns", w.max_ns}})
                              .dump()
                              .c_str());
    } else {
      std::printf("step %-4s tokens=%-4u word_latency     samples=%zu p50_ns=%.0f p90_ns=%.0f p99_ns=%.0f max_ns=%.0f\n",
                  w.case_name.c_str(), w.tokens, w.samples, w.p50_ns, w.p90_ns, w.p99_ns, w.max_ns);
    }
  }
  if (StdoutWritten()) return 0;
  std::fprintf(stderr, "engram-bench step: write to stdout failed\n");
  return 1;
}

}  // namespace engram::bench
