// `engram-bench node-client`: one process of the node benchmarks, a client
// of engram-served or a private store, started by the drivers
// (bench/node_benchmark.h, bench/node_fairness_benchmark.h) as this program
// re-executed, so that every client and private store is a real process.
//
// It opens its store (and waits for the cache memory), gathers its working
// set, prints "ready", then obeys lines on stdin, one at a time, each
// answered by one line on stdout:
//
//   miss       gathers its share of never-read rows (the --miss-* options) on
//              --threads threads; "missed ROWS SECONDS[ failed]"
//   bulk FIRST COUNT ROWS_PER_GATHER IN_FLIGHT GATHERS SEED
//              the bulk client: GATHERS gathers of ROWS_PER_GATHER rows drawn
//              from a seeded permutation of rows [FIRST, FIRST + COUNT), kept
//              IN_FLIGHT at a time (one thread each, Store::Gather back to
//              back); "bulk ROWS SECONDS HIT_ROWS FAILED"
//   decode FIRST COUNT ROWS_PER_GATHER INTERVAL_US MAX_GATHERS SEED
//              the latency client: one gather of ROWS_PER_GATHER rows of such a
//              permutation every INTERVAL_US (the next starts at once if one
//              took longer), on a thread of its own, until MAX_GATHERS, the
//              rows run out, or a "stop" line; then "decoded GATHERS HIT_ROWS
//              FAILED RAN_OUT LATENCIES_US" (comma-separated, in order). While
//              it runs, "stats" and "stop" are still obeyed.
//   hold FIRST COUNT ROWS_PER_GATHER IN_FLIGHT SEED
//              starts IN_FLIGHT gathers at once (Store::StartGather), prints
//              "holding ANSWERED" (those already answered: 0 unless the
//              service was quicker than the sending) and stops itself
//              (SIGSTOP) before it can read their answers; once continued,
//              waits for them: "held ROWS MISSES OK|STATUS"
//   stats      "stats ROWS_REQUESTED" (the table's counter, from its store)
//   exit       ends the process
//
// Rows are "never read" when the driver hands every command its own range:
// a permutation of a range is drawn from the front, so no row repeats.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engram/status.h"
#include "engram/store.h"
#include "src/common/child_process.h"

namespace engram::bench {

struct NodeClientRole {
  std::string file;
  std::string socket;         // empty: a private store
  uint64_t cache_bytes = 0;   // a private store's
  uint64_t warm_rows = 0;     // the working set: this many rows of the table's seeded permutation
  uint64_t seed = 1;
  uint32_t threads = 1;       // gathering threads for "miss"
  uint64_t miss_first = 0;    // its never-read rows: miss_first + k * miss_stride, k < miss_count
  uint64_t miss_count = 0;
  uint64_t miss_stride = 1;
  uint32_t miss_rows_per_gather = 4096;
};

// The command line that starts `role` as `self node-client ...`.
std::vector<std::string> NodeClientArgs(const std::string& self, const NodeClientRole& role);

int RunNodeClientRole(const NodeClientRole& role);

// The driver's side.

// A started engram-served serving `file` at `socket`, ready; Unavailable if
// it did not start (not built, or refused).
Result<ChildProcess> StartNodeService(const std::string& served, const std::string& file, const std::string& socket,
                                      uint64_t cache_bytes);
// Waits for every process's "ready"; Internal if one ended or took 10 min.
Status WaitReady(std::vector<ChildProcess>& procs);
// Tells each process to exit and reaps it; one that has not ended after 30 s
// is killed (SIGKILL) and reaped.
void EndAll(std::vector<ChildProcess>& procs);
// Ends `service` with SIGTERM and reaps it; SIGKILL after 60 s.
void StopNodeService(ChildProcess& service);

// A temporary directory under /tmp (short: a Unix socket path has at most
// 107 bytes), removed with its contents when this is destroyed.
class BenchTempDir {
 public:
  static Result<BenchTempDir> Make(const std::string& prefix);
  BenchTempDir(BenchTempDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  BenchTempDir& operator=(BenchTempDir&&) = delete;
  ~BenchTempDir();
  const std::string& path() const { return path_; }

 private:
  explicit BenchTempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Both sides.

// Opens a store on one table: a client of the service at `socket`, or a
// private store of `cache_bytes` when `socket` is empty; its cache memory is
// committed before it returns.
Result<std::unique_ptr<Store>> OpenBenchStore(const std::string& file, const std::string& socket,
                                              uint64_t cache_bytes);

// The first `count` rows of a seeded permutation of [0, rows): the same set
// in every process that asks with the same seed.
std::vector<uint64_t> WorkingSet(uint64_t rows, uint64_t count, uint64_t seed);

// Gathers `rows` (sorted, in chunks) until a whole pass hits, at most 4
// passes; returns the last pass's hits.
Result<uint64_t> Warm(Store& store, std::vector<uint64_t> rows);

}  // namespace engram::bench
