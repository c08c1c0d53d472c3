// Options for opening a Store. Plain structs with defaults that serve a
// V4.1-shaped deployment; every field is validated by Store::Open.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace engram {

struct TableOptions {
  // An Engram table file or reference table (storage/FORMAT.md), or a table
  // loaded into a Redis Cluster (engram-convert --to):
  // redis://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/NAME, whose misses are
  // fetched from the cluster (credentials missing from the URL are taken
  // from ENGRAM_REDIS_USER / ENGRAM_REDIS_PASSWORD).
  std::string path;
  // Name used in stats and metrics (label `table`); default: the file's
  // stem ("layer1" for /data/layer1.engram), or a cluster table's NAME.
  std::string name;
  // Bytes of the store's cache budget reserved for this table; 0 = a share of
  // what is left, proportional to table size. Either way a table gets at
  // most what a cache of all its rows takes; the rest goes to the others.
  uint64_t cache_bytes = 0;
  // Or a rank manifest (engram-convert --ranks R OUT.json; path must then be
  // empty): the store opens the file the manifest names for
  // StoreOptions::rank, after checking that it is that rank's file of this
  // manifest (fingerprint, manifest_id, rank). Default name: the manifest's.
  std::string manifest = {};
};

struct StoreOptions {
  std::vector<TableOptions> tables;
  // The tensor-parallel rank whose rank tables to open, 0..R-1: required
  // when a table is given by manifest, refused otherwise; -1 = none.
  int32_t rank = -1;

  // One budget for every table's row cache (rows, index, metadata, sketch).
  // A table's cache never exceeds what holds all its rows; what a small
  // table cannot use goes to the other tables. When its memory is committed
  // is commit_cache_memory's choice.
  uint64_t cache_bytes = 1ull << 30;
  // true: each table's cache memory (its rows and index) is committed right
  // after open, by a background thread, in huge pages where the kernel
  // allows; Open does not wait for it. The first rows then cost no page
  // fault (on a fresh cache a fault per insert cost more than the miss's
  // own work), and the resident memory is the whole budget from the start.
  // false: memory is committed page by page as rows arrive.
  bool commit_cache_memory = true;
  // A budget relative to the host's free memory, for unified-memory hosts
  // (GB10 / DGX Spark) where the cache competes with GPU memory and the page
  // cache. 0 = unused (the budget is cache_bytes). In (0, 1]: the budget is
  // the smaller of cache_bytes and this share of MemAvailable
  // (/proc/meminfo), read once at open; cache_bytes is then a ceiling (set
  // it to UINT64_MAX to size by the share alone). Outside [0, 1] (or NaN),
  // or with no MemAvailable to read, Open fails.
  double cache_memory_fraction = 0.0;
  // The row cache's policy: a preset ("default", "legacy", "two-choice", ...)
  // optionally followed by key=value overrides (grammar: engram/cache_policy.h).
  std::string cache_policy = "default";

  // I/O backend: "auto" (io_uring, falling back to pread with one warning),
  // "io_uring", "pread" or "mmap". mmap serves from the page cache: do not use
  // it on unified-memory hosts (GB10 / DGX Spark), where page cache competes
  // with GPU memory, nor when tables are much larger than RAM.
  std::string io_backend = "auto";
  uint32_t queue_depth = 128;   // io_uring reads in flight
  // io_uring rings, each with its own submitting and completing thread,
  // sharing queue_depth. One ring thread serves a few hundred thousand reads
  // per second; a drive that serves 1-2 M (PCIe Gen4/5 NVMe) needs several,
  // on a host with the cores for them. 1..64, at most queue_depth.
  uint32_t io_rings = 1;
  uint32_t io_threads = 4;      // pread / mmap worker threads
  bool direct_io = true;        // O_DIRECT: misses really go to the device
  // Threads that finish gathers and read-ahead once their blocks have landed
  // (verify checksums, copy rows out, fill the cache), 1..256. A thread
  // waiting on a ticket does its own gather's share instead; these take
  // callback-form gathers, tickets nobody waits on yet, and read-ahead, so
  // the I/O engine's completion thread only hands results off.
  uint32_t completion_threads = 2;
  // Memory for missed blocks in flight, allocated once and registered with
  // io_uring (fixed-buffer reads); reused by every gather, so a miss costs no
  // allocation. A gather of up to an eighth of its blocks (1,024 rows at
  // 32 MiB) reads while it is still looking its rows up and holds its blocks
  // until it ends; a larger one reads through a few buffers (twice what
  // queue_depth reads fill), each reused once its block is verified and its
  // rows copied out. Gathers that need more at once than it holds take the
  // rest from the heap. 0 = always the heap.
  size_t read_buffer_bytes = 32u << 20;

  // Reference tables (engram-convert --in-place; rows served from the
  // safetensors shards): their scale rows are held in memory when they need
  // at most this share of the table's cache budget, and their bytes then come
  // out of it; otherwise (or 0) each missed row reads its scale as well. In
  // [0, 1].
  double in_place_scale_share = 0.25;
  // Reference tables: also check each shard's fingerprint at open (a few MiB
  // read per shard); its size and modification time are always checked.
  bool verify_shard_fingerprints = false;

  // If set, every gather (table index and row IDs) is recorded in this file
  // for engram-replay --store-trace (format in src/store/trace_writer.h).
  // The trace is written to a temporary file beside it and renamed over the
  // path when the store is destroyed, so an existing file is never truncated
  // and is replaced only by a complete trace; a character device (/dev/null)
  // is written directly. Open (and the close, before the rename) refuses a
  // path that is (also through a symlink or hard link) a file the process
  // reads -- a table, shard or rank manifest, a layout or token map -- and
  // anything but a regular file, a missing one or a character device. A write error never
  // fails a gather: it is logged, the gathers it drops are counted
  // (engram_store_trace_gathers_total{outcome="lost"}), and the failed
  // trace's temporary file is removed at shutdown, with an error in the log.
  std::string trace_path;

  // Warm start. If set, the store saves each table's resident rows (their
  // IDs, most valuable first, with the table's fingerprint and the cache's
  // policy and capacity) to this file when it is destroyed, and every
  // hot_set_interval_seconds (0 = only then); the file is replaced
  // atomically (temporary file, fsync, rename), so a crash leaves the
  // previous one whole. At open the store reads the saved rows back into
  // the caches in the background, at a small share of the I/O, yielding to
  // gathers and only into free cache ways; Open never waits for it
  // (Store::WaitForWarmUp does). The rows are read and verified like any
  // miss. A hot set that does not fit (another table, policy or capacity; a
  // truncated or corrupt file) is ignored with one warning; a missing file
  // is a cold start. Format: src/store/hot_set.h. Open refuses a path that
  // is not a regular file or missing (a FIFO, a device, a directory), or
  // that is (also through a symlink or hard link) a file the process reads
  // -- a table, shard or rank manifest, a layout or token map -- and a save
  // never replaces one; a temporary file a killed save left beside the path
  // is removed at open.
  std::string hot_set_path;
  double hot_set_interval_seconds = 0.0;

  // If set ("127.0.0.1:9464"), the store serves GET /metrics and /healthz.
  std::string metrics_listen;

  // One store per node: the path of the Unix socket of an engram-served
  // (tools/engram-served) to be a client of, instead of opening a store of
  // this process's own. The service owns the caches and the reads; the
  // client maps the caches read-only and serves its hits itself (no system
  // call), and sends its misses, read-aheads and stats to the service. The
  // tables (and rank) must be those the service serves, by name and file.
  // The cache, I/O, warm-start, trace and metrics options (and a table's
  // cache_bytes) are the service's: Open refuses them with a client, rather
  // than ignore them. If the service goes away, the client's calls fail
  // with StatusCode::kUnavailable until it is back, and it reconnects by
  // itself. What a client may rely on (fairness, deadlines, pins, limits):
  // README, "One store per node".
  std::string node;
  // The client's name in the service's /metrics (label `client`), at most
  // 128 bytes of UTF-8 with no control characters; default: its process ID.
  // Two clients of one name are told apart there by a "#N" suffix.
  std::string node_client_name;
  // A client's deadlines. Opening it (connecting and the service's welcome)
  // fails after node_open_timeout_ms; every later call to the service (a
  // gather's misses, which travel in messages of at most 16 MiB of rows,
  // each with its own deadline; a read-ahead release, a wait, stats) fails
  // after node_call_timeout_ms without its answer. Either way the status is
  // StatusCode::kDeadlineExceeded (Python: TimeoutError): a stopped or
  // wedged service never hangs its clients. 1..3,600,000.
  uint32_t node_open_timeout_ms = 5000;
  uint32_t node_call_timeout_ms = 30000;
};

}  // namespace engram
