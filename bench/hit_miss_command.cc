#include "bench/hit_miss_command.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "src/common/cli_checks.h"
#include "src/common/exit_codes.h"
#include "src/common/stdout_written.h"

namespace engram::bench {
namespace {

int Fail(const char* command, const Status& s, int code) {
  std::fprintf(stderr, "engram-bench %s: %s\n", command, s.ToString().c_str());
  return code;
}

// printf's %.Nf, or "n/a" for a figure that was not measured (<= 0).
std::string OrNa(double v, const char* format) {
  if (!(v > 0)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

int Flushed(const char* command) {
  if (StdoutWritten()) return 0;
  std::fprintf(stderr, "engram-bench %s: write to stdout failed\n", command);
  return 1;
}

ProgressLog StderrLog() {
  return [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
}

nlohmann::json PercentilesJson(const Percentiles& p) {
  return {{"p50_us", p.p50_us}, {"p90_us", p.p90_us}, {"p99_us", p.p99_us}, {"p999_us", p.p999_us}};
}

void AddCommonOptions(CLI::App* cmd, std::string& file, std::vector<uint32_t>& sizes, double& seconds,
                      uint64_t& seed, bool& json) {
  cmd->add_option("--file", file, "Engram table to serve (engram-gen makes one)")->required();
  cmd->add_option("--rows-per-gather", sizes, "Rows per gather, one measurement each")
      ->delimiter(',')
      ->check(CLI::Range(uint32_t{1}, uint32_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--seconds", seconds, "Time per measurement")
      ->check(FiniteRange(0.001, 86400.0))
      ->capture_default_str();
  cmd->add_option("--seed", seed, "Row choice seed")->capture_default_str();
  cmd->add_flag("--json", json, "One JSON object per line instead of key=value lines");
}

}  // namespace

CLI::App* RegisterHitCommand(CLI::App& app, HitArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "hit", "Gathers of rows resident in the row cache vs a flat memcpy gather of the same rows (hit_ratio)");
  AddCommonOptions(cmd, a.config.file, a.config.rows_per_gather, a.config.seconds, a.config.seed, a.json);
  cmd->add_option("--resident-rows", a.config.resident_rows,
                  "Distinct rows made resident and cycled through (at least the largest gather)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32))
      ->capture_default_str();
  cmd->add_option("--cache-mib", a.cache_mib, "Cache budget (default: 4x the resident rows, at least 64 MiB)")
      ->check(FiniteRange(1.0, double(uint64_t{1} << 30)));
  cmd->add_option("--policy", a.config.cache_policy, "Cache policy spec")->capture_default_str();
  cmd->add_option("--io-backend", a.config.io_backend, "auto, io_uring, pread or mmap (only warming reads)")
      ->capture_default_str();
  cmd->add_option("--rounds", a.config.rounds, "Store and memcpy alternate this many times")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  return cmd;
}

CLI::App* RegisterMissCommand(CLI::App& app, MissArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "miss",
      "Gathers of rows from never-read blocks on a fresh store vs raw engine reads and fio io_uring at the same "
      "depth (miss_ratio_raw, miss_ratio_fio), and the latency of one all-miss gather vs one read at QD 1");
  AddCommonOptions(cmd, a.config.file, a.config.rows_per_gather, a.config.seconds, a.config.seed, a.json);
  cmd->add_option("--queue-depth", a.config.queue_depth,
                  "The store's reads in flight; raw and fio run at min(rows per gather, this)")
      ->check(CLI::Range(uint32_t{1}, uint32_t{4096}))
      ->capture_default_str();
  cmd->add_option("--io-rings", a.config.io_rings,
                  "io_uring rings of the store and of the raw engine, sharing the depth (fio: one ring)")
      ->check(CLI::Range(uint32_t{1}, uint32_t{64}))
      ->capture_default_str();
  cmd->add_option("--gathers-in-flight", a.config.gathers_in_flight,
                  "Store gathers in flight at once, each from its own thread (raw and fio then run at min(rows per "
                  "gather x this, queue depth)); the latency gather is always alone")
      ->check(CLI::Range(uint32_t{1}, uint32_t{64}))
      ->capture_default_str();
  cmd->add_option("--latency-rows", a.config.latency_rows, "Rows of the all-miss gather whose latency is reported")
      ->check(CLI::Range(uint32_t{1}, uint32_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--io-backend", a.config.io_backend, "io_uring or pread (the raw reads use the same)")
      ->check(CLI::IsMember({"io_uring", "pread"}))
      ->capture_default_str();
  cmd->add_option("--cache-mib", a.cache_mib, "Cache budget of each fresh store")
      ->check(FiniteRange(1.0, double(uint64_t{1} << 30)))
      ->capture_default_str();
  cmd->add_option("--fio", a.config.fio, "fio executable; '' skips the fio comparison")->capture_default_str();
  cmd->add_option("--rounds", a.config.rounds,
                  "Store, raw engine and fio alternate this many times per gather size (ratios: median of the rounds)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  return cmd;
}

int RunHitCommand(const HitArgs& args) {
  HitBenchConfig c = args.config;
  if (auto shape = CheckBenchTable(c.file); !shape.ok()) return Fail("hit", shape.status(), 2);
  if (args.cache_mib > 0) c.cache_bytes = uint64_t(args.cache_mib * 1048576.0);
  auto report = RunHitBenchmark(c, StderrLog());
  if (!report.ok()) return Fail("hit", report.status(), engram::ExitCodeFor(report.status()));
  std::fprintf(stderr, "hit: %s, cache %.0f MiB\n", report->io_description.c_str(),
               double(report->cache_bytes) / 1048576.0);
  for (const HitBenchPoint& p : report->points) {
    if (args.json) {
      nlohmann::json j = {{"kind", "hit"},
                          {"rows_per_gather", p.rows_per_gather},
                          {"resident_rows", p.resident_rows},
                          {"store_rows", p.store_rows},
                          {"store_seconds", p.store_seconds},
                          {"store_rows_per_s", p.store_rows_per_s()},
                          {"store_ns_per_row", p.store_ns_per_row()},
                          {"store_cpu_ns_per_row", p.store_cpu_ns_per_row()},
                          {"memcpy_rows", p.memcpy_rows},
                          {"memcpy_seconds", p.memcpy_seconds},
                          {"memcpy_rows_per_s", p.memcpy_rows_per_s()},
                          {"memcpy_ns_per_row", p.memcpy_ns_per_row()},
                          {"memcpy_cpu_ns_per_row", p.memcpy_cpu_ns_per_row()},
                          {"hit_ratio", p.hit_ratio()},
                          {"total_ratio", p.total_ratio()},
                          {"round_ratios", p.round_ratios},
                          {"io", report->io_description}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf(
          "hit rows_per_gather=%u resident_rows=%llu store_rows_per_s=%.0f memcpy_rows_per_s=%.0f "
          "store_ns_per_row=%.1f memcpy_ns_per_row=%.1f store_cpu_ns_per_row=%.1f memcpy_cpu_ns_per_row=%.1f "
          "total_ratio=%.3f hit_ratio=%.3f\n",
          p.rows_per_gather, (unsigned long long)p.resident_rows, p.store_rows_per_s(), p.memcpy_rows_per_s(),
          p.store_ns_per_row(), p.memcpy_ns_per_row(), p.store_cpu_ns_per_row(), p.memcpy_cpu_ns_per_row(),
          p.total_ratio(), p.hit_ratio());
    }
  }
  return Flushed("hit");
}

int RunMissCommand(const MissArgs& args) {
  MissBenchConfig c = args.config;
  if (auto shape = CheckBenchTable(c.file); !shape.ok()) return Fail("miss", shape.status(), 2);
  if (Status s = CheckDirectIo(c.file); !s.ok()) return Fail("miss", s, 2);
  c.cache_bytes = uint64_t(args.cache_mib * 1048576.0);
  auto report = RunMissBenchmark(c, StderrLog());
  if (!report.ok()) return Fail("miss", report.status(), engram::ExitCodeFor(report.status()));
  std::fprintf(stderr, "miss: %s; fio %s\n", report->io_description.c_str(),
               report->fio_version.empty() ? "not run" : report->fio_version.c_str());
  for (const MissBenchPoint& p : report->points) {
    if (!p.fio_note.empty()) std::fprintf(stderr, "miss: note: %s: miss_ratio_fio skipped\n", p.fio_note.c_str());
    if (args.json) {
      nlohmann::json j = {{"kind", "miss"},
                          {"rows_per_gather", p.rows_per_gather},
                          {"gathers_in_flight", p.gathers_in_flight},
                          {"depth", p.depth},
                          {"gathers", p.gathers},
                          {"rows", p.rows},
                          {"fresh_stores", p.fresh_stores},
                          {"store_seconds", p.store_seconds},
                          {"store_rows_per_s", p.store_rows_per_s()},
                          {"store_ns_per_row", p.store_ns_per_row()},
                          {"store_cpu_ns_per_row", p.store_cpu_ns_per_row()},
                          {"raw_iops", p.raw_iops},
                          {"raw_cpu_ns_per_read", p.raw_cpu_ns_per_read()},
                          {"rounds", p.round_ratios_raw.size()},
                          {"miss_ratio_raw", p.miss_ratio_raw()},
                          {"total_ratio_raw", p.total_ratio_raw()},
                          {"round_ratios_raw", p.round_ratios_raw},
                          {"io", report->io_description}};
      if (p.raw_batch_rows_per_s > 0) {
        j["raw_batch_rows_per_s"] = p.raw_batch_rows_per_s;
        j["miss_ratio_raw_batch"] = p.miss_ratio_raw_batch();
        j["round_ratios_raw_batch"] = p.round_ratios_raw_batch;
      }
      if (p.fio_iops > 0) {
        j["fio_iops"] = p.fio_iops;
        j["fio_cpu_ns_per_read"] = p.fio_cpu_ns_per_read();
        j["miss_ratio_fio"] = p.miss_ratio_fio();
        j["total_ratio_fio"] = p.total_ratio_fio();
        j["round_ratios_fio"] = p.round_ratios_fio;
        if (p.fio_batch_iops > 0) {
          j["fio_batch_iops"] = p.fio_batch_iops;
          j["miss_ratio_fio_batch"] = p.miss_ratio_fio_batch();
          j["round_ratios_fio_batch"] = p.round_ratios_fio_batch;
        }
      } else {
        j["fio_note"] = p.fio_note;
      }
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf(
          "miss rows_per_gather=%u depth=%u store_rows_per_s=%.0f raw_iops=%.0f fio_iops=%s store_ns_per_row=%.1f "
          "store_cpu_ns_per_row=%.1f raw_cpu_ns_per_read=%.1f fio_cpu_ns_per_read=%s fresh_stores=%u gathers_in_flight=%u rounds=%zu total_ratio_raw=%.3f "
          "total_ratio_fio=%s raw_batch_rows_per_s=%s miss_ratio_raw_batch=%s miss_ratio_raw=%.3f miss_ratio_fio=%s "
          "fio_batch_iops=%s miss_ratio_fio_batch=%s\n",
          p.rows_per_gather, p.depth, p.store_rows_per_s(), p.raw_iops, OrNa(p.fio_iops, "%.0f").c_str(),
          p.store_ns_per_row(), p.store_cpu_ns_per_row(), p.raw_cpu_ns_per_read(),
          OrNa(p.fio_iops > 0 ? p.fio_cpu_ns_per_read() : 0, "%.1f").c_str(), p.fresh_stores, p.gathers_in_flight, p.round_ratios_raw.size(),
          p.total_ratio_raw(), OrNa(p.total_ratio_fio(), "%.3f").c_str(), OrNa(p.raw_batch_rows_per_s, "%.0f").c_str(),
          OrNa(p.raw_batch_rows_per_s > 0 ? p.miss_ratio_raw_batch() : 0, "%.3f").c_str(), p.miss_ratio_raw(),
          OrNa(p.miss_ratio_fio(), "%.3f").c_str(), OrNa(p.fio_batch_iops, "%.0f").c_str(),
          OrNa(p.miss_ratio_fio_batch(), "%.3f").c_str());
    }
  }
  const MissLatency& l = report->latency;
  if (args.json) {
    nlohmann::json j = {{"kind", "miss_latency"},
                        {"rows_per_gather", l.rows_per_gather},
                        {"gathers", l.gathers},
                        {"gather", PercentilesJson(l.gather)},
                        {"raw_read", PercentilesJson(l.raw_read)},
                        {"raw_batch", PercentilesJson(l.raw_batch)},
                        {"gather_cdf", l.gather_cdf}};
    if (l.fio_note.empty()) {
      j["fio_read"] = PercentilesJson(l.fio_read);
      j["fio_read_cdf"] = l.fio_read_cdf;
    } else {
      j["fio_note"] = l.fio_note;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "miss_latency rows_per_gather=%u gathers=%llu gather_p50_us=%.1f gather_p99_us=%.1f raw_read_p50_us=%.1f "
        "raw_read_p99_us=%.1f raw_batch_p50_us=%.1f raw_batch_p99_us=%.1f fio_read_p50_us=%s fio_read_p99_us=%s\n",
        l.rows_per_gather, (unsigned long long)l.gathers, l.gather.p50_us, l.gather.p99_us, l.raw_read.p50_us,
        l.raw_read.p99_us, l.raw_batch.p50_us, l.raw_batch.p99_us, OrNa(l.fio_read.p50_us, "%.1f").c_str(), OrNa(l.fio_read.p99_us, "%.1f").c_str());
  }
  return Flushed("miss");
}

}  // namespace engram::bench
