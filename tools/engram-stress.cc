// engram-stress: a concurrent stress test of the real Store under injected
// I/O faults (src/stress/stress_run.h says what it runs and checks). Prints
// one JSON object; exits 1 if a row was wrong or a check failed, 2 if the run
// could not start.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "src/common/cli_checks.h"
#include "src/common/stdout_written.h"
#include "src/stress/stress_run.h"
#include "storage/temp_file_cleanup.h"

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "engram-stress: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Concurrent stress test of the Engram store under injected I/O faults: every served row is "
               "checked byte for byte against the generator. Prints one JSON object; exits 1 on a wrong row "
               "or a failed invariant."};
  engram::stress::StressConfig config;
  bool json = false, verbose = false;
  std::string work_dir;
  // At most a week: the deadline is steady_clock nanoseconds (a NaN or an
  // out-of-range count would be an undefined conversion).
  app.add_option("--seconds", config.seconds, "how long the threads run")
      ->capture_default_str()
      ->check(engram::FiniteRange(0.0, 7 * 86400.0));
  app.add_option("--threads", config.threads, "gathering threads")->capture_default_str()->check(CLI::Range(1u, 256u));
  app.add_flag("--faults", config.faults, "inject EIO, short reads, EAGAIN, delays/reorders and bit flips");
  app.add_option("--seed", config.seed, "seed of the workload, the faults and the generated table")
      ->capture_default_str();
  app.add_flag("--json", json, "print only the JSON report on stdout (default: JSON plus a summary on stderr)");
  auto* table_opt = app.add_option("--table", config.table,
                                   "an existing engram-gen table (its metadata gives the generator seed)");
  app.add_option("--rows", config.rows, "rows of the generated table (264-byte records)")
      ->capture_default_str()
      ->excludes(table_opt);
  app.add_option("--cache-bytes", config.cache_bytes, "the store's cache budget (small: constant evictions)")
      ->capture_default_str();
  app.add_option("--backend", config.backend, "I/O backend")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "io_uring", "pread", "mmap"}));
  app.add_option("--io-rings", config.io_rings, "io_uring rings of the store, sharing its 64 reads in flight")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  app.add_option("--policy", config.policy, "cache policy spec")->capture_default_str();
  app.add_flag("--fail-registration", config.fail_registration,
               "io_uring: make buffer/file registration fail with ENOMEM");
  app.add_flag("--fail-ring-setup", config.fail_ring_setup,
               "make io_uring setup fail (--backend auto must fall back to pread)");
  app.add_flag("--truncate", config.truncate,
               "also truncate a second store's table while it serves gathers: they must fail cleanly and "
               "another table of that store must keep serving");
  app.add_option("--work-dir", work_dir, "directory for the generated table (default: a new temp dir)");
  app.add_flag("--verbose", verbose, "keep the store's log output");
  CLI11_PARSE(app, argc, argv);
  engram::RemoveTempFilesOnTerminationSignals();  // the generated tables
  spdlog::set_level(verbose ? spdlog::level::info : spdlog::level::off);

  auto outcome = engram::stress::RunStress(config, work_dir);
  if (!outcome.ok()) return Fail(outcome.status().ToString());
  std::printf("%s\n", outcome->report.dump(json ? -1 : 2).c_str());
  // A report that never arrived must not look like a passed run.
  if (!engram::StdoutWritten()) return Fail("write to stdout failed");
  if (!json) {
    std::fprintf(stderr, "engram-stress: %s: %llu gathers, %llu rows verified, %llu wrong, %llu faults injected\n",
                 outcome->ok ? "OK" : "FAILED", static_cast<unsigned long long>(outcome->gathers),
                 static_cast<unsigned long long>(outcome->rows_verified),
                 static_cast<unsigned long long>(outcome->wrong_rows),
                 static_cast<unsigned long long>(outcome->faults_injected));
  }
  return outcome->ok ? 0 : 1;
}
