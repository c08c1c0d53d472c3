#include "bench/node_command.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "src/common/cli_checks.h"
#include "src/common/gnuplot.h"
#include "src/common/stdout_written.h"

namespace engram::bench {
namespace {

// The targets of the fairness benchmark (service / private pair, and
// beside a stopped A / A absent).
constexpr double kBP99AtMost = 1.5, kBMaxAtMost = 2.0, kARowsPerSAtLeast = 0.9, kStoppedMaxAtMost = 2.0;

int ExitCodeOf(const Status& s) {
  const StatusCode code = s.code();
  return code == StatusCode::kInvalidArgument || code == StatusCode::kNotFound || code == StatusCode::kUnsupported
             ? 2
             : 1;
}

nlohmann::json SeriesJson(const LatencySeries& s) {
  return {{"gathers", s.latencies_us.size()}, {"p50_ms", s.percentile_ms(50)}, {"p99_ms", s.percentile_ms(99)},
          {"max_ms", s.max_ms()},         {"hit_rows", s.hit_rows},          {"failed", s.failed},
          {"ran_out", s.ran_out},         {"latencies_us", s.latencies_us}};
}

nlohmann::json BulkJson(const BulkRun& a) {
  return {{"rows", a.rows},
          {"seconds", a.seconds},
          {"rows_per_s", a.rows_per_s()},
          {"hit_rows", a.hit_rows},
          {"failed", a.failed}};
}

std::string SeriesLine(const LatencySeries& s) {
  char line[256];
  std::snprintf(line, sizeof(line), "gathers=%zu p50=%.2f ms p99=%.2f ms max=%.2f ms%s%s", s.latencies_us.size(),
                s.percentile_ms(50), s.percentile_ms(99), s.max_ms(), s.failed ? " (some FAILED)" : "",
                s.ran_out ? " (ran out of rows)" : "");
  return line;
}

// One line per gather: side,gather,latency_us.
Status WriteLatencyCsv(const std::string& path, const NodeFairnessReport& r) {
  std::ofstream out(path);
  out << "side,gather,latency_us\n";
  const std::pair<const char*, const LatencySeries*> sides[] = {{"private", &r.private_pair.b},
                                                                {"service", &r.service_pair.b},
                                                                {"alone", &r.alone},
                                                                {"beside_stopped", &r.beside_stopped}};
  char v[32];
  for (const auto& [side, series] : sides) {
    for (size_t i = 0; i < series->latencies_us.size(); ++i) {
      std::snprintf(v, sizeof(v), "%.1f", series->latencies_us[i]);
      out << side << ',' << i << ',' << v << '\n';
    }
  }
  out.flush();
  if (!out) return Status::IOError("node --mixed: could not write " + path);
  return Status::OK();
}

// B's latency CDFs from the CSV: beside A's bulk (service and private pair)
// and beside a stopped A (and A absent). Paths and title are ARG1..ARG3.
Status PlotLatencyCdf(const std::string& png, const std::string& csv, const std::string& title) {
  const std::string script = R"gp(set terminal pngcairo size 1300,600 noenhanced
set output ARG1
set datafile separator ","
set multiplot layout 1,2 title ARG3
set grid
set logscale x 10
set xlabel "B's gather latency (ms)"
set ylabel "fraction of B's gathers"
set yrange [0:1]
set key bottom right
set title "B beside A's bulk"
plot ARG2 using (strcol(1) eq "private" ? $3/1000 : NaN):(1) smooth cnormal with steps lw 2 \
       title "two private stores", \
     ARG2 using (strcol(1) eq "service" ? $3/1000 : NaN):(1) smooth cnormal with steps lw 2 \
       title "two clients of one engram-served"
set title "B beside A stopped with its answers unread (one engram-served)"
plot ARG2 using (strcol(1) eq "alone" ? $3/1000 : NaN):(1) smooth cnormal with steps lw 2 title "A absent", \
     ARG2 using (strcol(1) eq "beside_stopped" ? $3/1000 : NaN):(1) smooth cnormal with steps lw 2 title "A stopped"
unset multiplot
)gp";
  return RunGnuplot(script, {png, csv, title}, png);
}

int RunMixed(const NodeArgs& args) {
  NodeFairnessConfig c = args.mixed_config;
  c.file = args.config.file;
  c.served = args.config.served;
  c.cache_bytes = uint64_t(args.mixed_cache_mib * 1048576.0);
  auto report =
      RunNodeFairnessBenchmark(c, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
  if (!report.ok()) {
    std::fprintf(stderr, "engram-bench node --mixed: %s\n", report.status().ToString().c_str());
    return ExitCodeOf(report.status());
  }
  const NodeFairnessReport& r = *report;
  if (!args.csv.empty() || !args.plot.empty()) {
    std::string csv = args.csv;
    if (csv.empty()) {  // beside the chart: x.png -> x.csv
      const std::string& p = args.plot;
      csv = (p.size() > 4 && p.compare(p.size() - 4, 4, ".png") == 0 ? p.substr(0, p.size() - 4) : p) + ".csv";
    }
    Status s = WriteLatencyCsv(csv, r);
    const std::string title = !args.plot_title.empty() ? args.plot_title : "engram-bench node --mixed: " + c.file;
    if (s.ok() && !args.plot.empty()) s = PlotLatencyCdf(args.plot, csv, title);
    if (!s.ok()) {
      std::fprintf(stderr, "engram-bench node --mixed: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  const double interval = c.decode_interval_ms;
  nlohmann::json j = {
      {"mode", "mixed"},
      {"table_rows", r.table_rows},
      {"fairness",
       {{"b",
         {{"rows_per_gather", c.decode_rows_per_gather},
          {"interval_ms", interval},
          {"shares_bulk_rows", c.decode_shares_bulk_rows},
          {"private", SeriesJson(r.private_pair.b)},
          {"service", SeriesJson(r.service_pair.b)}}},
        {"a",
         {{"rows_per_gather", c.bulk_rows_per_gather},
          {"in_flight", c.bulk_in_flight},
          {"gathers", c.bulk_gathers},
          {"private", BulkJson(r.private_pair.a)},
          {"service", BulkJson(r.service_pair.a)}}},
        {"cache_bytes",
         {{"private_a", r.private_a_cache_bytes},
          {"private_b", r.private_b_cache_bytes},
          {"service", r.service_cache_bytes}}},
        {"service_over_private",
         {{"b_p50", r.b_p50_ratio()},
          {"b_p99", r.b_p99_ratio()},
          {"b_max", r.b_max_ratio()},
          {"a_rows_per_s", r.a_rows_per_s_ratio()}}},
        {"targets",
         {{"b_p99_at_most", kBP99AtMost},
          {"b_max_at_most", kBMaxAtMost},
          {"a_rows_per_s_at_least", kARowsPerSAtLeast},
          {"met",
           r.b_p99_ratio() <= kBP99AtMost && r.b_max_ratio() <= kBMaxAtMost &&
               r.a_rows_per_s_ratio() >= kARowsPerSAtLeast}}}}},
      {"stopped_neighbour",
       {{"b", {{"rows_per_gather", c.decode_rows_per_gather}, {"interval_ms", interval}}},
        {"alone", SeriesJson(r.alone)},
        {"beside_stopped", SeriesJson(r.beside_stopped)},
        {"held_rows", r.held_rows},
        {"held_answered_before_stop", r.held_answered_before_stop},
        {"held_reads_seconds", r.held_reads_seconds >= 0 ? nlohmann::json(r.held_reads_seconds) : nlohmann::json()},
        {"held_outcome", r.held_outcome},
        {"cache_bytes", r.stopped_cache_bytes},
        {"beside_stopped_over_alone",
         {{"b_p50", r.beside_stopped.percentile_ms(50) / std::max(1e-9, r.alone.percentile_ms(50))},
          {"b_p99", r.beside_stopped.percentile_ms(99) / std::max(1e-9, r.alone.percentile_ms(99))},
          {"b_max", r.stopped_max_ratio()}}},
        {"targets", {{"b_max_at_most", kStoppedMaxAtMost}, {"met", r.stopped_max_ratio() <= kStoppedMaxAtMost}}}}}};
  if (args.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("fairness: B (%u %s rows a gather, every %.1f ms) beside A (%u x %u never-read rows in flight, %u "
                "gathers)\n",
                c.decode_rows_per_gather, c.decode_shares_bulk_rows ? "of A's" : "never-read", interval,
                c.bulk_in_flight, c.bulk_rows_per_gather, c.bulk_gathers);
    std::printf("  private pair: B %s; A %.0f rows/s\n", SeriesLine(r.private_pair.b).c_str(),
                r.private_pair.a.rows_per_s());
    std::printf("  service pair: B %s; A %.0f rows/s\n", SeriesLine(r.service_pair.b).c_str(),
                r.service_pair.a.rows_per_s());
    std::printf("  service/private: B p50 %.2fx, B p99 %.2fx (target <= %.1f), B slowest %.2fx (<= %.1f), "
                "A rows/s %.3fx (>= %.1f)\n",
                r.b_p50_ratio(), r.b_p99_ratio(), kBP99AtMost, r.b_max_ratio(), kBMaxAtMost, r.a_rows_per_s_ratio(),
                kARowsPerSAtLeast);
    char held_reads[64] = "not while B ran";
    if (r.held_reads_seconds >= 0) {
      std::snprintf(held_reads, sizeof(held_reads), "%.2f s after A stopped", r.held_reads_seconds);
    }
    std::printf("stopped neighbour: A stopped with %u gathers (%llu rows) in flight, %llu answered before the stop; "
                "the service had read them: %s; A once continued: %s\n",
                c.bulk_in_flight, static_cast<unsigned long long>(r.held_rows),
                static_cast<unsigned long long>(r.held_answered_before_stop), held_reads, r.held_outcome.c_str());
    std::printf("  B, A absent:  %s\n", SeriesLine(r.alone).c_str());
    std::printf("  B, A stopped: %s\n", SeriesLine(r.beside_stopped).c_str());
    std::printf("  stopped/absent: B slowest %.2fx (target <= %.1f)\n", r.stopped_max_ratio(), kStoppedMaxAtMost);
  }
  if (!StdoutWritten()) return 1;
  return 0;
}

}  // namespace

CLI::App* RegisterNodeCommand(CLI::App& app, NodeArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "node", "One engram-served and N client processes against N private stores: memory (PSS), hit cost, "
              "missed rows/s, in the same run");
  cmd->add_option("--file", a.config.file, "Engram table (engram-gen makes one; on /dev/shm for the CPU path)")
      ->required();
  cmd->add_option("--clients", a.config.clients, "client processes (and private stores)")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str();
  cmd->add_option("--resident-rows", a.config.resident_rows, "hit phase: resident rows (each value a point)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--rows-per-gather", a.config.rows_per_gather, "hit phase: rows per gather (each value a point)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--seconds", a.config.seconds, "hit phase: seconds per side and point")
      ->check(FiniteRange(0.01, 3600.0))
      ->capture_default_str();
  cmd->add_option("--rounds", a.config.rounds, "hit phase: client and private store alternate this many times")
      ->check(CLI::Range(1u, 1000u))
      ->capture_default_str();
  cmd->add_option("--cache-bytes", a.config.hit_cache_bytes,
                  "hit phase: the service's and the private store's cache (0: 4x the most resident rows)")
      ->capture_default_str();
  cmd->add_option("--memory-cache-mib", a.memory_cache_mib, "memory phase: each store's cache budget")
      ->check(FiniteRange(1.0, double(uint64_t{1} << 30)))
      ->capture_default_str();
  cmd->add_option("--miss-rows", a.config.miss_rows_per_client, "miss phase: never-read rows per client")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--miss-rows-per-gather", a.config.miss_rows_per_gather, "miss phase: rows per gather")
      ->check(CLI::Range(1u, 65536u))
      ->capture_default_str();
  cmd->add_option("--miss-rounds", a.config.miss_rounds, "miss phase: rounds (fresh service and stores each)")
      ->check(CLI::Range(1u, 100u))
      ->capture_default_str();
  cmd->add_option("--served", a.config.served, "engram-served (default: beside engram-bench)");
  cmd->add_flag("--json", a.json, "print one JSON object");

  // --mixed and its options.
  NodeFairnessConfig& m = a.mixed_config;
  const std::string g = "Mixed (--mixed)";
  cmd->add_flag("--mixed", a.mixed,
                "instead of the phases above: client B's latency beside client A's bulk (one engram-served against "
                "two private stores) and beside A stopped with its answers unread (against A absent)")
      ->group(g);
  cmd->add_option("--bulk-rows-per-gather", m.bulk_rows_per_gather, "A: never-read rows per gather")
      ->check(CLI::Range(1u, 65536u))
      ->capture_default_str()
      ->group(g);
  cmd->add_option("--bulk-in-flight", m.bulk_in_flight, "A: gathers in flight (one thread each)")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str()
      ->group(g);
  cmd->add_option("--bulk-gathers", m.bulk_gathers, "A: gathers per side (B runs as long as A does)")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str()
      ->group(g);
  cmd->add_option("--decode-rows-per-gather", m.decode_rows_per_gather, "B: never-read rows per gather")
      ->check(CLI::Range(1u, 65536u))
      ->capture_default_str()
      ->group(g);
  cmd->add_option("--decode-interval-ms", m.decode_interval_ms,
                  "B: from one gather's start to the next's (the next starts at once if one took longer)")
      ->check(FiniteRange(0.0, 60000.0))
      ->capture_default_str()
      ->group(g);
  cmd->add_option("--decode-max-gathers", m.decode_max_gathers, "B: its row supply beside A, in gathers per side")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str()
      ->group(g);
  cmd->add_option("--stopped-decode-gathers", m.stopped_decode_gathers,
                  "B's gathers beside the stopped A, and with A absent")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str()
      ->group(g);
  cmd->add_flag("--decode-shares-bulk-rows", m.decode_shares_bulk_rows,
                "B draws its rows from A's range: in the service it then waits on A's reads of rows they share, and "
                "rows A has read are hits (a variant: not all misses)")
      ->group(g);
  cmd->add_option("--mixed-cache-mib", a.mixed_cache_mib, "each store's cache (0: twice the rows it will read)")
      ->check(FiniteRange(0.0, double(uint64_t{1} << 30)))
      ->capture_default_str()
      ->group(g);
  cmd->add_option("--csv", a.csv, "write B's latencies here (side,gather,latency_us)")->group(g);
  cmd->add_option("--plot", a.plot,
                  "draw B's latency CDFs into this PNG (gnuplot; without --csv the CSV goes beside it, .png -> .csv)")
      ->group(g);
  cmd->add_option("--plot-title", a.plot_title, "the chart's title (default: the command and the table)")->group(g);
  return cmd;
}

int RunNodeCommand(const NodeArgs& args) {
  if (args.mixed) return RunMixed(args);
  NodeBenchConfig c = args.config;
  c.memory_cache_bytes = uint64_t(args.memory_cache_mib * 1048576.0);
  auto report = RunNodeBenchmark(c, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
  if (!report.ok()) {
    std::fprintf(stderr, "engram-bench node: %s\n", report.status().ToString().c_str());
    return ExitCodeOf(report.status());
  }
  const NodeBenchReport& r = *report;
  nlohmann::json hits = nlohmann::json::array();
  for (const NodeHitPoint& p : r.hits) {
    hits.push_back({{"resident_rows", p.resident_rows},
                    {"rows_per_gather", p.rows_per_gather},
                    {"client_ns_per_row", p.client_ns_per_row},
                    {"private_ns_per_row", p.private_ns_per_row},
                    {"client_over_private", p.ratio()},
                    {"round_ratios", p.round_ratios}});
  }
  nlohmann::json j = {
      {"clients", r.clients},
      {"memory",
       {{"rows_per_process", r.memory_rows},
        {"cache_bytes", c.memory_cache_bytes},
        {"service_pss_kib", r.service_pss_kib},
        {"clients_pss_kib", r.clients_pss_kib},
        {"node_pss_kib", r.service_pss_kib + r.clients_pss_kib},
        {"one_private_pss_kib", r.private_pss_kib},
        {"all_privates_pss_kib", r.privates_pss_kib},
        {"node_over_one_private", r.node_over_one_private()},
        {"all_privates_over_node", r.all_privates_over_node()}}},
      {"hits", hits},
      {"misses",
       {{"rows", r.miss_rows},
        {"client_rows_per_s", r.client_miss_rows_per_s},
        {"private_rows_per_s", r.private_miss_rows_per_s},
        {"clients_over_private", r.miss_ratio()}}}};
  if (args.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("memory: service + %u clients %.1f MiB PSS; one private store %.1f MiB, %u private stores %.1f MiB; "
                "node / one private = %.3f, %u private / node = %.3f\n",
                r.clients, double(r.service_pss_kib + r.clients_pss_kib) / 1024, double(r.private_pss_kib) / 1024,
                r.clients, double(r.privates_pss_kib) / 1024, r.node_over_one_private(), r.clients,
                r.all_privates_over_node());
    for (const NodeHitPoint& p : r.hits) {
      std::printf("hit resident_rows=%llu rows_per_gather=%u client_ns_per_row=%.1f private_ns_per_row=%.1f "
                  "client/private=%.3f\n",
                  static_cast<unsigned long long>(p.resident_rows), p.rows_per_gather, p.client_ns_per_row,
                  p.private_ns_per_row, p.ratio());
    }
    std::printf("miss rows=%llu clients_rows_per_s=%s private_rows_per_s=%s clients/private=%.3f\n",
                static_cast<unsigned long long>(r.miss_rows), j["misses"]["client_rows_per_s"].dump().c_str(),
                j["misses"]["private_rows_per_s"].dump().c_str(), r.miss_ratio());
  }
  if (!StdoutWritten()) return 1;
  return 0;
}

CLI::App* RegisterNodeClientCommand(CLI::App& app, NodeClientRole& role) {
  CLI::App* cmd = app.add_subcommand("node-client", "");  // the benchmark's own client processes
  cmd->group("");  // hidden from --help
  cmd->add_option("--file", role.file)->required();
  cmd->add_option("--socket", role.socket);
  cmd->add_option("--cache-bytes", role.cache_bytes);
  cmd->add_option("--warm-rows", role.warm_rows);
  cmd->add_option("--seed", role.seed);
  cmd->add_option("--threads", role.threads)->check(CLI::Range(1u, 256u));
  cmd->add_option("--miss-first", role.miss_first);
  cmd->add_option("--miss-count", role.miss_count);
  cmd->add_option("--miss-stride", role.miss_stride)->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  cmd->add_option("--miss-rows-per-gather", role.miss_rows_per_gather)->check(CLI::Range(1u, 65536u));
  return cmd;
}

}  // namespace engram::bench
