// engram-bench: performance measurements of Engram Store components.
//
// Subcommands, one section each below (add a new one as a Register*Command
// function plus one line in main; put its driver in the library, like
// storage/io/read_benchmark.h, so this file stays a thin CLI):
//   read   random 4 KiB block reads through the I/O backends (issue 7)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "storage/io/read_benchmark.h"

namespace {

// ============================================================================
// read: raw block reads
// ============================================================================

struct ReadArgs {
  std::string file;
  uint64_t create_mib = 0;
  std::vector<std::string> backends{"io_uring", "pread"};
  std::vector<uint32_t> depths{1, 4, 16, 32, 64, 128, 256};
  std::vector<uint32_t> threads{1, 2, 4};
  std::string mode = "auto";
  std::string cache = "cold";
  double seconds = 2;
  bool json = false;
  bool no_register_buffers = false;
  uint64_t seed = 1;
};

// Writes `mib` MiB of non-repeating bytes to `path` (if it does not exist).
bool CreateFileIfMissing(const std::string& path, uint64_t mib) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return true;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror(("engram-bench: create " + path).c_str());
    return false;
  }
  std::vector<uint64_t> chunk((1 << 20) / sizeof(uint64_t));
  uint64_t x = 88172645463325252ull;
  for (uint64_t m = 0; m < mib; ++m) {
    for (uint64_t& v : chunk) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      v = x;
    }
    if (::write(fd, chunk.data(), 1 << 20) != (1 << 20)) {
      std::perror(("engram-bench: write " + path).c_str());
      ::close(fd);
      return false;
    }
  }
  ::fsync(fd);
  ::close(fd);
  return true;
}

int RunRead(const ReadArgs& a) {
  using namespace engram::io;
  if (a.create_mib > 0 && !CreateFileIfMissing(a.file, a.create_mib)) return 1;
  struct Point {
    IoBackend backend;
    ReadBenchMode mode;
    bool cold;
    uint32_t depth;
    uint32_t threads;
  };
  std::vector<Point> points;
  std::vector<bool> caches;
  if (a.cache == "cold" || a.cache == "both") caches.push_back(true);
  if (a.cache == "warm" || a.cache == "both") caches.push_back(false);
  if (caches.empty()) {
    std::cerr << "engram-bench read: --cache must be cold, warm or both\n";
    return 2;
  }
  for (const std::string& name : a.backends) {
    auto backend = ParseIoBackend(name);
    if (!backend.ok() || *backend == IoBackend::kAuto) {
      std::cerr << "engram-bench read: bad backend '" << name << "' (io_uring|pread|mmap)\n";
      return 2;
    }
    ReadBenchMode mode;
    if (a.mode == "sync") {
      mode = ReadBenchMode::kSync;
    } else if (a.mode == "async") {
      mode = ReadBenchMode::kAsync;
    } else if (a.mode == "auto") {
      // io_uring's strength is depth from one thread; pread/mmap get their
      // parallelism from threads, as fio's psync does.
      mode = *backend == IoBackend::kIoUring ? ReadBenchMode::kAsync : ReadBenchMode::kSync;
    } else {
      std::cerr << "engram-bench read: --mode must be auto, sync or async\n";
      return 2;
    }
    for (bool cold : caches) {
      if (mode == ReadBenchMode::kAsync) {
        for (uint32_t d : a.depths) points.push_back({*backend, mode, cold, d, a.threads.front()});
      } else {
        for (uint32_t t : a.threads) points.push_back({*backend, mode, cold, 1, t});
      }
    }
  }

  nlohmann::json out = nlohmann::json::array();
  std::ostringstream table;
  char line[256];
  std::snprintf(line, sizeof line, "%-9s %-5s %-5s %5s %4s %11s %9s %9s %9s %9s %9s\n", "backend", "mode", "cache",
                "qd", "thr", "iops", "MiB/s", "p50_us", "p90_us", "p99_us", "p99.9_us");
  table << line;
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    const char* mode_name = p.mode == ReadBenchMode::kAsync ? "async" : "sync";
    std::fprintf(stderr, "\r[%zu/%zu] %s %s %s qd=%u threads=%u ...          ", i + 1, points.size(),
                 IoBackendName(p.backend), mode_name, p.cold ? "cold" : "warm", p.depth, p.threads);
    std::fflush(stderr);
    ReadBenchConfig config;
    config.path = a.file;
    config.backend = p.backend;
    config.mode = p.mode;
    config.cold = p.cold;
    config.queue_depth = p.depth;
    config.threads = p.threads;
    config.seconds = a.seconds;
    config.seed = a.seed;
    config.register_buffers = !a.no_register_buffers;
    auto r = RunReadBenchmark(config);
    if (!r.ok()) {
      std::fprintf(stderr, "\n");
      std::cerr << "engram-bench read: " << r.status().ToString() << "\n";
      return 1;
    }
    std::snprintf(line, sizeof line, "%-9s %-5s %-5s %5u %4u %11.0f %9.1f %9.1f %9.1f %9.1f %9.1f\n",
                  IoBackendName(p.backend), mode_name, p.cold ? "cold" : "warm", p.depth, p.threads, r->iops,
                  r->mb_per_s, r->p50_us, r->p90_us, r->p99_us, r->p999_us);
    table << line;
    out.push_back({{"backend", IoBackendName(p.backend)}, {"mode", mode_name}, {"cache", p.cold ? "cold" : "warm"},
                   {"queue_depth", p.depth}, {"threads", p.threads}, {"engine", r->engine}, {"reads", r->reads},
                   {"errors", r->errors}, {"seconds", r->seconds}, {"iops", r->iops}, {"mib_per_s", r->mb_per_s},
                   {"p50_us", r->p50_us}, {"p90_us", r->p90_us}, {"p99_us", r->p99_us}, {"p999_us", r->p999_us}});
    if (r->errors > 0) std::cerr << "\nengram-bench read: " << r->errors << " reads failed\n";
  }
  std::fprintf(stderr, "\r%80s\r", "");
  if (a.json) {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << table.str();
  }
  return 0;
}

void RegisterReadCommand(CLI::App& app, ReadArgs& a, int& rc) {
  CLI::App* cmd = app.add_subcommand("read", "Random 4 KiB block reads from a file through the I/O backends");
  cmd->add_option("--file", a.file, "File to read (use --create-mib to create it)")->required();
  cmd->add_option("--create-mib", a.create_mib, "Create the file with this many MiB if it does not exist");
  cmd->add_option("--backends", a.backends, "Backends to measure: io_uring, pread, mmap")->delimiter(',');
  cmd->add_option("--depths", a.depths, "Queue depths (async mode)")->delimiter(',');
  cmd->add_option("--threads", a.threads, "Thread counts (sync mode; first one sizes the async worker pool)")
      ->delimiter(',');
  cmd->add_option("--mode", a.mode, "auto (io_uring async, others sync), sync or async");
  cmd->add_option("--cache", a.cache, "cold (O_DIRECT, cache dropped), warm (buffered, prewarmed) or both");
  cmd->add_option("--seconds", a.seconds, "Duration of each point");
  cmd->add_option("--seed", a.seed, "Random offset seed");
  cmd->add_flag("--json", a.json, "Print JSON instead of a table");
  cmd->add_flag("--no-register-buffers", a.no_register_buffers, "Do not register the destination arena (io_uring)");
  cmd->callback([&] { rc = RunRead(a); });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"engram-bench: Engram Store performance measurements"};
  app.require_subcommand(1);
  int rc = 0;
  ReadArgs read_args;
  RegisterReadCommand(app, read_args, rc);
  CLI11_PARSE(app, argc, argv);
  return rc;
}
