// engram-metrics-flood: how well a metrics endpoint on this machine keeps
// serving scrapes while one client holds many connections to it open.
//
//   engram-metrics-flood --port P [--connections 1000] [--mode idle|slowloris|pipeline] [--json]
//
// Holds --connections sockets to 127.0.0.1:P open (reopening each as the
// server closes it; "slowloris" sends one byte of an endless request header
// per second on each, "pipeline" sends GET requests back to back and never
// reads an answer), waits --warmup-ms, then scrapes /metrics on fresh
// connections from --threads threads and reports the share that got a
// complete 200 within --deadline-ms, with p50/p99 latency. Loopback only,
// and bounded: at most --max-seconds of scraping, then the flood stops.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "src/common/http_flood.h"
#include "src/common/stdout_written.h"

int main(int argc, char** argv) {
  CLI::App app{"engram-metrics-flood: scrape success and latency while a client floods a metrics endpoint "
               "(127.0.0.1 only)"};
  int port = 0;
  size_t connections = 1000;
  std::string mode = "idle";
  size_t threads = 3;
  size_t scrapes_per_thread = 100;
  int gap_ms = 50;
  int deadline_ms = 1000;
  int warmup_ms = 1500;
  int max_seconds = 60;
  bool json = false;
  app.add_option("--port", port, "The endpoint's port on 127.0.0.1")->required()->check(CLI::Range(1, 65535));
  app.add_option("--connections", connections, "Connections the flood holds open")
      ->capture_default_str()->check(CLI::Range(size_t(0), size_t(100000)));
  app.add_option("--mode", mode,
                 "idle: send nothing; slowloris: one header byte per second; pipeline: requests back to back, "
                 "answers never read")
      ->capture_default_str()->check(CLI::IsMember({"idle", "slowloris", "pipeline"}));
  app.add_option("--threads", threads, "Concurrent scrapers")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--scrapes-per-thread", scrapes_per_thread, "Scrapes by each scraper")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--gap-ms", gap_ms, "Pause between one scraper's scrapes")->capture_default_str()->check(CLI::Range(0, 60000));
  app.add_option("--deadline-ms", deadline_ms, "A scrape succeeds with a complete 200 within this")
      ->capture_default_str()->check(CLI::Range(1, 600000));
  app.add_option("--warmup-ms", warmup_ms, "Flood alone before scraping starts")
      ->capture_default_str()->check(CLI::Range(0, 600000));
  app.add_option("--max-seconds", max_seconds, "Stop scraping after this long in any case")
      ->capture_default_str()->check(CLI::Range(1, 3600));
  app.add_flag("--json", json, "One JSON object instead of a line of text");
  CLI11_PARSE(app, argc, argv);

  // The flood's sockets plus the scrapers' and a margin.
  rlimit lim{};
  const rlim_t needed = rlim_t(connections) + 256;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < needed) {
    lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? needed : std::min(needed, lim.rlim_max);
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur < needed) {
      std::fprintf(stderr, "engram-metrics-flood: needs %llu descriptors; ulimit -Hn is lower\n",
                   (unsigned long long)needed);
      return 2;
    }
  }

  const auto flood_mode = mode == "slowloris" ? engram::testing::FloodMode::kSlowloris
                          : mode == "pipeline" ? engram::testing::FloodMode::kPipelineNeverRead
                                               : engram::testing::FloodMode::kIdle;
  engram::testing::ConnectionFlood flood(uint16_t(port), connections, flood_mode);
  std::this_thread::sleep_for(std::chrono::milliseconds(warmup_ms));
  engram::testing::ScrapePlan plan;
  plan.threads = threads;
  plan.scrapes_per_thread = scrapes_per_thread;
  plan.gap = std::chrono::milliseconds(gap_ms);
  plan.deadline = std::chrono::milliseconds(deadline_ms);
  plan.max_time = std::chrono::seconds(max_seconds);
  const engram::testing::ScrapeStats stats = engram::testing::ScrapeConcurrently(uint16_t(port), plan);
  const size_t held = flood.open();
  flood.Stop();

  if (json) {
    nlohmann::json j = {{"mode", mode},
                        {"connections", connections},
                        {"scrapes", stats.attempts},
                        {"succeeded", stats.succeeded},
                        {"success_rate", stats.success_rate()},
                        {"p50_ms", stats.p50_seconds * 1e3},
                        {"p99_ms", stats.p99_seconds * 1e3},
                        {"flood_connects", flood.connects()},
                        {"flood_open_at_end", held}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s flood of %zu connections: %zu of %zu scrapes succeeded within %d ms (%.1f %%); "
                "p50 %.1f ms, p99 %.1f ms (of the successes); the flood opened %llu connections\n",
                mode.c_str(), connections, stats.succeeded, stats.attempts, deadline_ms,
                stats.success_rate() * 100, stats.p50_seconds * 1e3, stats.p99_seconds * 1e3,
                (unsigned long long)flood.connects());
  }
  if (!engram::StdoutWritten()) {
    std::fprintf(stderr, "engram-metrics-flood: write to stdout failed\n");
    return 1;
  }
  return 0;
}
