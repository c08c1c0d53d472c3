// engram-served: one Engram store for every process of a node.
//
// Opens the tables, the row cache (in memory shared read-only with the
// clients) and the metrics endpoint, and serves the processes that open a
// Store with StoreOptions::node / Store(node=...) naming its socket
// (src/node/node_service.h). Runs until SIGTERM or SIGINT, then tells its
// clients and exits 0. When it cannot start it exits 2 for a bad argument or
// input (a missing table, a socket path something else occupies) and 1 for
// a conflict at run time (another engram-served already serves the socket
// or a table), with a message either way.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "src/common/cli_checks.h"
#include "src/common/exit_codes.h"
#include "src/common/logging.h"
#include "src/node/node_service.h"
#include "src/replay/cli_values.h"
#include "storage/log.h"

namespace {

int Fail(const std::string& message, int code = 2) {
  std::fprintf(stderr, "engram-served: %s\n", message.c_str());
  return code;
}



}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Serve Engram tables to every process of this node: one row cache in shared memory, one I/O "
               "path, hits served inside each client. Clients open Store(node=SOCKET). Stops on SIGTERM."};
  engram::node::NodeServiceOptions options;
  engram::StoreOptions& store = options.store;
  std::vector<std::string> tables, manifests;
  std::string cache_size = "1GiB", log_level;
  app.add_option("--socket", options.socket_path, "the Unix socket to serve on (a stale one is removed)")
      ->required();
  app.add_option("--table", tables, "a table to serve: PATH or NAME=PATH (repeatable)");
  app.add_option("--manifest", manifests, "a rank manifest whose --rank file to serve: PATH or NAME=PATH");
  app.add_option("--rank", store.rank, "the rank of the --manifest tables")->check(CLI::Range(0, 1 << 20));
  app.add_option("--cache-bytes", cache_size, "the cache budget of all tables (e.g. 16GiB)")->capture_default_str();
  app.add_option("--cache-fraction", store.cache_memory_fraction,
                 "or at most this share of MemAvailable (unified-memory hosts)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--policy", store.cache_policy, "cache policy spec")->capture_default_str();
  app.add_option("--backend", store.io_backend, "I/O backend")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "io_uring", "pread", "mmap"}));
  app.add_option("--queue-depth", store.queue_depth, "io_uring reads in flight")
      ->capture_default_str()
      ->check(CLI::Range(1u, 65536u));
  app.add_option("--io-rings", store.io_rings, "io_uring rings")->capture_default_str()->check(CLI::Range(1u, 64u));
  app.add_option("--completion-threads", store.completion_threads, "threads that finish gathers")
      ->capture_default_str()
      ->check(CLI::Range(1u, 256u));
  bool buffered = false;
  app.add_flag("--buffered-io", buffered, "read through the page cache instead of O_DIRECT");
  app.add_option("--metrics-listen", store.metrics_listen, "serve GET /metrics here (e.g. 127.0.0.1:9464)");
  app.add_option("--hot-set", store.hot_set_path, "save the resident rows here and warm up from them at start");
  app.add_option("--hot-set-interval", store.hot_set_interval_seconds, "also save every this many seconds")
      ->check(engram::FiniteRange(0.0, 1e9));
  app.add_option("--group", options.group,
                 "the group allowed to connect (the socket is 0660, the memory 0640 and sealed read-only)");
  app.add_option("--send-timeout-ms", options.send_timeout_ms,
                 "disconnect a client whose answers wait this long with none of their bytes read")
      ->capture_default_str()
      ->check(CLI::Range(1u, 3600000u));
  app.add_option("--hello-timeout-ms", options.hello_timeout_ms, "close a connection that says no hello by then")
      ->capture_default_str()
      ->check(CLI::Range(1u, 3600000u));
  app.add_option("--max-clients", options.max_clients, "the most clients connected at once")
      ->capture_default_str()
      ->check(CLI::Range(1u, 65536u));
  app.add_option("--threads", options.threads, "threads that serve every client connection")
      ->capture_default_str()
      ->check(CLI::Range(1u, 256u));
  app.add_option("--gather-threads", options.gather_threads,
                 "threads that read clients' missed rows and read-aheads, each on its own io_uring ring")
      ->capture_default_str()
      ->check(CLI::Range(1u, 256u));
  app.add_option("--miss-quantum-rows", options.miss_quantum_rows,
                 "each busy client's share of missed rows per turn")
      ->capture_default_str()
      ->check(CLI::Range(1u, 65536u));
  engram::AddLogLevelOption(app, log_level);
  CLI11_PARSE(app, argc, argv);
  if (auto s = engram::ConfigureLogging(log_level, "info"); !s.ok()) return Fail(s.ToString());

  auto bytes = engram::replay::ParseSize(cache_size);
  if (!bytes.ok()) return Fail("--cache-bytes: " + bytes.status().ToString());
  store.cache_bytes = *bytes;
  store.direct_io = !buffered;
  auto split = [](const std::string& spec, engram::TableOptions* t, std::string engram::TableOptions::*field) {
    const size_t eq = spec.find('=');
    if (eq != std::string::npos && spec.find('/') > eq) {
      t->name = spec.substr(0, eq);
      t->*field = spec.substr(eq + 1);
    } else {
      t->*field = spec;
    }
  };
  for (const std::string& spec : tables) {
    engram::TableOptions t;
    split(spec, &t, &engram::TableOptions::path);
    store.tables.push_back(t);
  }
  for (const std::string& spec : manifests) {
    engram::TableOptions t;
    split(spec, &t, &engram::TableOptions::manifest);
    store.tables.push_back(t);
  }
  if (store.tables.empty()) return Fail("no tables: give --table or --manifest");

  // The signals are taken by sigwait below: blocked before any thread
  // starts, so every thread inherits the mask and none is interrupted.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto service = engram::node::NodeService::Start(options);
  if (!service.ok()) return Fail(service.status().ToString(), engram::ExitCodeFor(service.status()));
  if ((*service)->metrics_port() != 0) engram::log::Info("engram-served: metrics on port {}", (*service)->metrics_port());
  // Readiness for scripts and service managers: one line on stdout.
  std::printf("engram-served: ready on %s\n", options.socket_path.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  engram::log::Info("engram-served: {} received; stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*service)->Stop();
  return 0;
}
