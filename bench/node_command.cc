#include "bench/node_command.h"

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "src/common/cli_checks.h"
#include "src/common/stdout_written.h"

namespace engram::bench {

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
  return cmd;
}

int RunNodeCommand(const NodeArgs& args) {
  NodeBenchConfig c = args.config;
  c.memory_cache_bytes = uint64_t(args.memory_cache_mib * 1048576.0);
  auto report = RunNodeBenchmark(c, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
  if (!report.ok()) {
    std::fprintf(stderr, "engram-bench node: %s\n", report.status().ToString().c_str());
    const StatusCode code = report.status().code();
    return code == StatusCode::kInvalidArgument || code == StatusCode::kNotFound ||
                   code == StatusCode::kUnsupported
               ? 2
               : 1;
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
