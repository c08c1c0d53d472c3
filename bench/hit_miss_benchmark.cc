#include "bench/hit_miss_benchmark.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "engram/store.h"
#include "src/iobench/read_benchmark.h"
#include "storage/io/aligned_buffer.h"
#include "storage/io/io_engine.h"
#include "storage/table_file.h"

extern char** environ;

namespace engram::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// User + system time of every thread of this process.
double ProcessCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

// Keeps the compiler from dropping or merging copies whose result is never
// read: the memcpy baseline must really copy every row, every time.
inline void ClobberMemory(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

Percentiles PercentilesOf(std::vector<uint64_t>& ns) {
  Percentiles p;
  if (ns.empty()) return p;
  std::sort(ns.begin(), ns.end());
  auto at = [&](double q) {
    size_t k = std::min(ns.size() - 1, size_t(q * double(ns.size())));
    return double(ns[k]) / 1000.0;
  };
  p.p50_us = at(0.50);
  p.p90_us = at(0.90);
  p.p99_us = at(0.99);
  p.p999_us = at(0.999);
  return p;
}

// Sorted samples -> (percentile, us) every percent, plus the tail.
std::vector<std::pair<double, double>> CdfOf(const std::vector<uint64_t>& sorted_ns) {
  std::vector<std::pair<double, double>> cdf;
  if (sorted_ns.empty()) return cdf;
  std::vector<double> qs;
  for (int q = 1; q <= 99; ++q) qs.push_back(q);
  for (double q : {99.5, 99.9, 100.0}) qs.push_back(q);
  for (double q : qs) {
    size_t k = std::min(sorted_ns.size() - 1, size_t(q / 100.0 * double(sorted_ns.size())));
    cdf.emplace_back(q, double(sorted_ns[k]) / 1000.0);
  }
  return cdf;
}

// k -> (a * k + c) mod n with gcd(a, n) = 1: a permutation of [0, n) spread
// over the whole range, chosen at random, in O(1) memory however large n is.
class AffinePermutation {
 public:
  AffinePermutation(uint64_t n, std::mt19937_64& rng) : n_(n) {
    c_ = rng() % n;
    a_ = 1;
    if (n > 2) {
      do {
        a_ = rng() % (n - 1) + 1;
      } while (std::gcd(a_, n) != 1);
    }
  }
  uint64_t operator()(uint64_t k) const {
    return uint64_t((static_cast<unsigned __int128>(a_) * (k % n_) + c_) % n_);
  }

 private:
  uint64_t n_, a_ = 1, c_ = 0;
};

// The memcpy baseline's flat array of the whole table, reserved but not
// committed: only the pages of resident rows are ever touched, so a table
// larger than RAM still works. Huge pages only when the resident rows would
// touch most of them anyway (then the baseline pays no more TLB misses than
// the store's huge-page cache); otherwise each touched row would commit 2 MiB.
class FlatArray {
 public:
  static Result<FlatArray> Map(uint64_t bytes, uint64_t rows_touched) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return Status::FromErrno("hit: map the " + std::to_string(bytes >> 20) + " MiB flat array", errno);
    const uint64_t huge_pages = (bytes + (2u << 20) - 1) / (2u << 20);
    (void)::madvise(p, bytes, rows_touched >= huge_pages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    FlatArray f;
    f.data_ = static_cast<std::byte*>(p);
    f.bytes_ = bytes;
    return f;
  }
  FlatArray() = default;
  FlatArray(FlatArray&& o) noexcept : data_(std::exchange(o.data_, nullptr)), bytes_(o.bytes_) {}
  FlatArray& operator=(FlatArray&&) = delete;
  ~FlatArray() {
    if (data_) ::munmap(data_, bytes_);
  }
  std::byte* data() const { return data_; }

 private:
  std::byte* data_ = nullptr;
  uint64_t bytes_ = 0;
};

Result<std::unique_ptr<Store>> OpenStore(const std::string& file, uint64_t cache_bytes, const std::string& policy,
                                         const std::string& backend, uint32_t queue_depth, uint32_t io_rings = 1) {
  StoreOptions o;
  TableOptions table;
  table.path = file;
  o.tables = {table};
  o.cache_bytes = cache_bytes;
  o.cache_policy = policy;
  o.io_backend = backend;
  o.queue_depth = queue_depth;
  o.io_rings = io_rings;
  o.direct_io = true;
  ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(o));
  // Part of opening, which is not timed: the cache's memory, committed in the
  // background after Open, would otherwise take a core from the first
  // gathers (the miss benchmark opens a fresh store every pass).
  store->WaitForCacheMemory();
  return store;
}

// ---------------------------------------------------------------------------
// fio, run as a child process (no shell: the path is an argument, not code).
// ---------------------------------------------------------------------------

struct FioResult {
  std::string version;
  double iops = 0;
  // fio's whole process (its io_uring workers included, as the store's CPU
  // figure includes the store's): user + system seconds, from wait4.
  double cpu_seconds = 0;
  uint64_t ios = 0;
  Percentiles lat;
  std::vector<std::pair<double, double>> cdf;
};

struct TempFile {
  std::string path;
  TempFile() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "engram-bench-fio-XXXXXX").string();
    int fd = ::mkstemp(tmpl.data());
    if (fd >= 0) {
      ::close(fd);
      path = tmpl;
    }
  }
  ~TempFile() {
    if (!path.empty()) ::unlink(path.c_str());
  }
  std::string Read() const {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

// fio's io_uring engine as tuned as it gets: registered file and buffers,
// the whole depth submitted in one call, completions reaped in batches.
// `complete_min` is the completions fio waits for before it submits again:
// 1 keeps `depth` reads in flight all the time; `depth` makes fio read in
// batches of `depth`, each started after the last one finished (the shape of
// one gather at a time, though fio then waits for the whole batch in one call).
Result<FioResult> RunFio(const std::string& fio, const std::string& file, uint64_t size, uint32_t depth,
                         uint32_t complete_min, double seconds) {
  TempFile json_out, log_out;
  if (json_out.path.empty() || log_out.path.empty()) return Status::IOError("fio: cannot create a temporary file");
  const std::string d = std::to_string(depth);
  std::vector<std::string> args = {fio,
                                   "--name=engram-miss",
                                   "--filename=" + file,
                                   "--readonly",
                                   "--size=" + std::to_string(size / 4096 * 4096),
                                   "--rw=randread",
                                   "--bs=4k",
                                   "--direct=1",
                                   "--ioengine=io_uring",
                                   "--fixedbufs=1",
                                   "--registerfiles=1",
                                   "--iodepth=" + d,
                                   "--iodepth_batch_submit=" + d,
                                   "--iodepth_batch_complete_min=" + std::to_string(complete_min),
                                   "--iodepth_batch_complete_max=" + d,
                                   "--time_based",
                                   "--runtime=" + std::to_string(std::max<long long>(50, std::llround(seconds * 1e3))) +
                                       "ms",
                                   "--norandommap",
                                   "--randrepeat=0",
                                   "--thread",
                                   "--lat_percentiles=1",
                                   "--percentile_list=1:5:10:20:30:40:50:60:70:80:90:95:99:99.5:99.9:100",
                                   "--output-format=json",
                                   "--output=" + json_out.path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_out.path.c_str(), O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, fio.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc == ENOENT) return Status::NotFound("fio not found ('" + fio + "'); install fio or pass --fio PATH");
  if (rc != 0) return Status::FromErrno("spawn " + fio, rc);
  // fio stops itself after --runtime; the margin covers its setup. A fio that
  // does not is killed rather than hanging the benchmark.
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds + 60);
  int wstatus = 0;
  struct rusage usage {};
  for (;;) {
    pid_t w = ::wait4(pid, &wstatus, WNOHANG, &usage);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return Status::FromErrno("waitpid fio", errno);
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &wstatus, 0);
      return Status::IOError("fio did not finish within " + std::to_string(int(seconds + 60)) + " s; killed");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string log = log_out.Read();
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return Status::IOError("fio failed (status " + std::to_string(wstatus) + "): " + log.substr(0, 800));
  }
  nlohmann::json j = nlohmann::json::parse(json_out.Read(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("jobs") || j["jobs"].empty()) {
    return Status::IOError("fio wrote no JSON result: " + log.substr(0, 800));
  }
  const nlohmann::json& job = j["jobs"][0];
  if (job.value("error", 0) != 0) return Status::IOError("fio job error " + std::to_string(job.value("error", 0)));
  FioResult r;
  r.version = j.value("fio version", std::string());
  r.iops = job["read"].value("iops", 0.0);
  r.ios = job["read"].value("total_ios", uint64_t{0});
  r.cpu_seconds = double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  if (job["read"].contains("lat_ns") && job["read"]["lat_ns"].contains("percentile")) {
    for (const auto& [key, value] : job["read"]["lat_ns"]["percentile"].items()) {
      r.cdf.emplace_back(std::stod(key), value.get<double>() / 1000.0);
    }
    std::sort(r.cdf.begin(), r.cdf.end());
    auto at = [&](double q) {
      for (const auto& [pct, us] : r.cdf) {
        if (pct >= q - 1e-9) return us;
      }
      return 0.0;
    };
    r.lat = {at(50), at(90), at(99), at(99.9)};
  }
  if (r.iops <= 0) return Status::IOError("fio measured no reads: " + log.substr(0, 800));
  return r;
}

}  // namespace

Result<TableShape> CheckBenchTable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno("table '" + path + "'", errno);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("'" + path + "' is not a regular file");
  auto table = TableFile::Open(path);
  if (!table.ok()) return table.status().WithContext("'" + path + "' is not a usable Engram table (engram-gen makes one)");
  TableShape s;
  s.rows = (*table)->row_count();
  s.record_bytes = (*table)->record_bytes();
  s.rows_per_block = (*table)->rows_per_block();
  s.file_bytes = uint64_t(st.st_size);
  if (s.rows == 0 || s.rows_per_block == 0) return Status::InvalidArgument("'" + path + "' holds no rows");
  s.blocks = (s.rows + s.rows_per_block - 1) / s.rows_per_block;
  return s;
}

Status CheckDirectIo(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (fd >= 0) {
    ::close(fd);
    return Status::OK();
  }
  if (errno == EINVAL) {
    return Status::Unsupported("the filesystem of '" + path +
                               "' refuses O_DIRECT: the store would read through the page cache and the misses "
                               "would not reach the device; put the table on a filesystem that accepts O_DIRECT "
                               "(ext4, xfs, or tmpfs on Linux >= 6.6)");
  }
  return Status::FromErrno("open '" + path + "' with O_DIRECT", errno);
}

// ===========================================================================
// hit
// ===========================================================================

double MedianOf(std::vector<double> r) {
  if (r.empty()) return 0;
  std::sort(r.begin(), r.end());
  const size_t m = r.size() / 2;
  return r.size() % 2 ? r[m] : (r[m - 1] + r[m]) / 2;
}

double HitBenchPoint::hit_ratio() const { return MedianOf(round_ratios); }

Result<HitBenchReport> RunHitBenchmark(const HitBenchConfig& c, const ProgressLog& log) {
  ENGRAM_ASSIGN_OR_RETURN(TableShape shape, CheckBenchTable(c.file));
  if (c.rows_per_gather.empty()) return Status::InvalidArgument("hit: no --rows-per-gather");
  if (!(c.seconds > 0) || c.rounds == 0) return Status::InvalidArgument("hit: seconds and rounds must be > 0");
  uint32_t max_n = 0;
  for (uint32_t n : c.rows_per_gather) {
    if (n == 0) return Status::InvalidArgument("hit: --rows-per-gather must be >= 1");
    max_n = std::max(max_n, n);
  }
  if (shape.rows < max_n) {
    return Status::InvalidArgument("hit: '" + c.file + "' has " + std::to_string(shape.rows) +
                                   " rows; a gather of " + std::to_string(max_n) + " distinct rows needs at least " +
                                   std::to_string(max_n));
  }
  const uint64_t resident = std::clamp<uint64_t>(c.resident_rows, max_n, shape.rows);
  const size_t rec = shape.record_bytes;

  // A random spread of distinct rows over the whole table, in memory
  // proportional to the sample, not to the table.
  std::mt19937_64 rng(c.seed);
  std::vector<uint64_t> ids;
  {
    AffinePermutation perm(shape.rows, rng);
    for (uint64_t k = 0; ids.size() < resident; ++k) ids.push_back(perm(k));
  }

  // Room for every resident row several times over, so neither placement
  // conflicts nor admission under pressure can refuse one.
  const uint64_t cache_bytes = c.cache_bytes ? c.cache_bytes : std::max<uint64_t>(64ull << 20, 4 * resident * rec);
  ENGRAM_ASSIGN_OR_RETURN(auto store, OpenStore(c.file, cache_bytes, c.cache_policy, c.io_backend, 128));
  HitBenchReport report;
  report.io_description = store->io_description();
  report.cache_bytes = cache_bytes;

  // The baseline's flat array: the table's rows at row * record_bytes, as if
  // the whole table were in RAM. Left uninitialized: only the resident rows
  // are written (and so ever touched).
  ENGRAM_ASSIGN_OR_RETURN(FlatArray flat, FlatArray::Map(shape.rows * rec, resident));

  // Warm: gather the resident rows (sorted, so rows sharing a block are read
  // once) until a whole pass is served from the cache.
  {
    std::vector<uint64_t> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    constexpr size_t kChunk = 4096;
    std::vector<std::byte> buf(kChunk * rec);
    uint64_t hits_in_pass = 0;
    for (int pass = 0; pass < 4 && hits_in_pass < resident; ++pass) {
      hits_in_pass = 0;
      for (size_t b = 0; b < sorted.size(); b += kChunk) {
        std::span<const uint64_t> chunk(sorted.data() + b, std::min(kChunk, sorted.size() - b));
        GatherResult r = store->Gather(0, chunk, buf.data(), rec);
        if (!r.status.ok()) return r.status.WithContext("hit: warming gather");
        hits_in_pass += r.hits;
        if (pass == 0) {
          for (size_t i = 0; i < chunk.size(); ++i) std::memcpy(flat.data() + chunk[i] * rec, &buf[i * rec], rec);
        }
      }
      if (log) log("hit: warm pass " + std::to_string(pass + 1) + ": " + std::to_string(hits_in_pass) + " of " +
                   std::to_string(resident) + " rows were hits");
    }
    if (hits_in_pass < resident) {
      return Status::ResourceExhausted("hit: only " + std::to_string(hits_in_pass) + " of " + std::to_string(resident) +
                                       " rows stayed resident after 4 warm passes (cache " +
                                       std::to_string(cache_bytes >> 20) + " MiB, policy '" + c.cache_policy +
                                       "'); raise --cache-mib or lower --resident-rows");
    }
  }

  // Gathers cycle through windows of N consecutive entries of a shuffled
  // order, so every gather asks for N distinct rows spread over the table.
  std::vector<uint64_t> order = ids;
  std::shuffle(order.begin(), order.end(), rng);

  for (uint32_t n : c.rows_per_gather) {
    const size_t windows = std::max<size_t>(1, order.size() / n);
    std::vector<std::byte> dst(size_t(n) * rec), check(size_t(n) * rec);
    auto window = [&](size_t w) { return std::span<const uint64_t>(order.data() + (w % windows) * n, n); };
    uint64_t not_hits = 0;
    Status failed;
    auto store_gather = [&](size_t w) {
      GatherResult r = store->Gather(0, window(w), dst.data(), rec);
      if (!r.status.ok() && failed.ok()) failed = r.status;
      not_hits += r.distinct_rows - r.hits;
      ClobberMemory(dst.data());
    };
    auto memcpy_gather = [&](size_t w) {
      std::span<const uint64_t> rows = window(w);
      std::byte* out = dst.data();
      const std::byte* base = flat.data();
      for (size_t i = 0; i < rows.size(); ++i) std::memcpy(out + i * rec, base + rows[i] * rec, rec);
      ClobberMemory(out);
    };
    // Runs `gather` back to back for `secs`, reading the clock every 16
    // gathers so the clock costs the fast side little.
    auto timed = [&](auto&& gather, double secs, size_t& cursor, uint64_t& rows, double& wall, double& cpu) {
      const double cpu0 = ProcessCpuSeconds();
      const auto t0 = Clock::now();
      const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(secs));
      auto now = t0;
      uint64_t gathers = 0;
      do {
        for (int k = 0; k < 16; ++k) gather(cursor++);
        gathers += 16;
        now = Clock::now();
      } while (now < deadline);
      wall += Seconds(now - t0);
      cpu += ProcessCpuSeconds() - cpu0;
      rows += gathers * n;
    };
    HitBenchPoint p;
    p.rows_per_gather = n;
    p.resident_rows = resident;
    size_t store_cursor = 0, memcpy_cursor = 0;
    const double slice = c.seconds / c.rounds;
    for (uint32_t round = 0; round < c.rounds; ++round) {
      uint64_t store_rows = 0, memcpy_rows = 0;
      double store_s = 0, memcpy_s = 0;
      timed(store_gather, slice, store_cursor, store_rows, store_s, p.store_cpu_seconds);
      timed(memcpy_gather, slice, memcpy_cursor, memcpy_rows, memcpy_s, p.memcpy_cpu_seconds);
      p.store_rows += store_rows;
      p.store_seconds += store_s;
      p.memcpy_rows += memcpy_rows;
      p.memcpy_seconds += memcpy_s;
      p.round_ratios.push_back((double(store_rows) / store_s) / (double(memcpy_rows) / memcpy_s));
    }
    if (!failed.ok()) return failed.WithContext("hit: timed gather");
    if (not_hits > 0) {
      return Status::Internal("hit: " + std::to_string(not_hits) +
                              " rows were not hits during the timed loop: the figure would include disk reads");
    }
    // Both sides must have produced the same bytes.
    store_gather(0);
    check = dst;
    memcpy_gather(0);
    if (check != dst) return Status::Internal("hit: the store and the memcpy baseline returned different bytes");
    report.points.push_back(p);
  }
  return report;
}

// ===========================================================================
// miss
// ===========================================================================

namespace {

struct StoreMissRun {
  uint64_t gathers = 0, rows = 0;
  uint32_t fresh_stores = 0;
  double seconds = 0, cpu_seconds = 0;
  std::vector<uint64_t> gather_ns;
  std::string io_description;
};

// Gathers of n rows, each from a block no store has read before: a pass
// visits the table's blocks in a random order, takes one random row of each, and is
// served by a freshly opened store (its cache empty); when a pass runs out of
// blocks, the next pass gets a new store. A session lasts over several timed
// slices (the rounds), so a store is fresh once per pass, not once per slice.
// Opening and closing stores is not timed.
class StoreMissSession {
 public:
  StoreMissSession(const MissBenchConfig& c, const TableShape& shape, uint32_t n, uint64_t seed)
      : c_(c), shape_(shape), n_(n), rng_(seed), dst_(size_t(n) * shape.record_bytes),
        // A pass covers every block, or 4M of them on a huge table (32 MiB of IDs).
        ids_(std::min<uint64_t>(shape.blocks, uint64_t{1} << 22)) {}

  // Gathers for `seconds` of timed work.
  Result<StoreMissRun> Measure(double seconds) {
    if (c_.gathers_in_flight > 1) return MeasureConcurrent(seconds);
    StoreMissRun run;
    const auto budget = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    Clock::duration spent{};
    while (spent < budget) {
      if (store_ == nullptr || (next_ + 1) * n_ > ids_.size()) {
        ENGRAM_RETURN_IF_ERROR(NewPass());
        ++run.fresh_stores;
      }
      if (run.io_description.empty()) run.io_description = store_->io_description();
      const double cpu0 = ProcessCpuSeconds();
      const auto t0 = Clock::now();
      auto now = t0;
      for (; (next_ + 1) * n_ <= ids_.size() && spent + (now - t0) < budget; ++next_) {
        std::span<const uint64_t> rows(ids_.data() + next_ * n_, n_);
        GatherResult r = store_->Gather(0, rows, dst_.data(), shape_.record_bytes);
        const auto end = Clock::now();
        if (!r.status.ok()) return r.status.WithContext("miss: gather");
        if (r.misses != n_ || r.hits != 0) {
          return Status::Internal("miss: a gather of " + std::to_string(n_) + " rows from untouched blocks had " +
                                  std::to_string(r.hits) + " hits and " + std::to_string(r.misses) + " misses");
        }
        run.gather_ns.push_back(uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(end - now).count()));
        ++run.gathers;
        run.rows += n_;
        now = end;
      }
      spent += now - t0;
      run.cpu_seconds += ProcessCpuSeconds() - cpu0;
    }
    run.seconds = Seconds(spent);
    return run;
  }

 private:
  // Measure with gathers_in_flight threads taking the pass's gathers in turn
  // (no latency samples: a gather's time then includes its neighbours'). At
  // a pass's end fewer gathers are in flight for a moment, and that time is
  // counted: a small table, whose passes are short, reads a little low.
  Result<StoreMissRun> MeasureConcurrent(double seconds) {
    StoreMissRun run;
    const auto budget = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    const size_t windows = ids_.size() / n_;
    std::vector<std::vector<std::byte>> dsts(c_.gathers_in_flight, std::vector<std::byte>(dst_.size()));
    Clock::duration spent{};
    while (spent < budget) {
      if (store_ == nullptr || next_ >= windows) {
        ENGRAM_RETURN_IF_ERROR(NewPass());
        ++run.fresh_stores;
      }
      if (run.io_description.empty()) run.io_description = store_->io_description();
      const double cpu0 = ProcessCpuSeconds();
      const auto t0 = Clock::now();
      const auto stop_at = t0 + (budget - spent);
      std::atomic<size_t> next{next_};
      std::atomic<uint64_t> gathers{0};
      std::atomic<bool> stop{false};  // a gather failed: the others stop too
      std::mutex mu;
      Status failed;
      // A window is claimed only before the deadline and inside the pass, so
      // every claimed window in range is gathered.
      auto gather_until_done = [&](std::vector<std::byte>& dst) {
        while (!stop.load(std::memory_order_relaxed) && Clock::now() < stop_at) {
          const size_t w = next.fetch_add(1);
          if (w >= windows) return;
          GatherResult r = store_->Gather(0, std::span<const uint64_t>(ids_.data() + w * n_, n_), dst.data(),
                                          shape_.record_bytes);
          Status bad = !r.status.ok() ? r.status.WithContext("miss: gather")
                       : (r.misses != n_ || r.hits != 0)
                           ? Status::Internal("miss: a gather of " + std::to_string(n_) +
                                              " rows from untouched blocks had " + std::to_string(r.hits) +
                                              " hits and " + std::to_string(r.misses) + " misses")
                           : Status::OK();
          if (!bad.ok()) {
            std::lock_guard lock(mu);
            if (failed.ok()) failed = bad;
            stop = true;
            return;
          }
          gathers.fetch_add(1, std::memory_order_relaxed);
        }
      };
      std::vector<std::thread> threads;
      for (uint32_t k = 1; k < c_.gathers_in_flight; ++k) threads.emplace_back(gather_until_done, std::ref(dsts[k]));
      gather_until_done(dsts[0]);
      for (std::thread& t : threads) t.join();
      const auto end = Clock::now();
      ENGRAM_RETURN_IF_ERROR(failed);
      next_ = std::min(next.load(), windows);
      run.gathers += gathers.load();
      run.rows += gathers.load() * n_;
      spent += end - t0;
      run.cpu_seconds += ProcessCpuSeconds() - cpu0;
    }
    run.seconds = Seconds(spent);
    return run;
  }

  Status NewPass() {
    store_.reset();
    AffinePermutation blocks(shape_.blocks, rng_);
    for (size_t i = 0; i < ids_.size(); ++i) {
      const uint64_t first = blocks(i) * shape_.rows_per_block;
      const uint64_t in_block = std::min<uint64_t>(shape_.rows_per_block, shape_.rows - first);
      ids_[i] = first + rng_() % in_block;
    }
    // O_DIRECT bypasses the page cache; dropping it too makes the benchmark
    // honest on a filesystem where the store's reads might still land there.
    if (int fd = ::open(c_.file.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
      (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
    ENGRAM_ASSIGN_OR_RETURN(store_, OpenStore(c_.file, c_.cache_bytes, "default", c_.io_backend, c_.queue_depth,
                                             std::min(c_.io_rings, c_.queue_depth)));
    next_ = 0;
    return Status::OK();
  }

  const MissBenchConfig& c_;
  const TableShape& shape_;
  const uint32_t n_;
  std::mt19937_64 rng_;
  std::vector<std::byte> dst_;
  std::vector<uint64_t> ids_;
  std::unique_ptr<Store> store_;
  size_t next_ = 0;  // the pass's next gather
};

Result<io::ReadBenchResult> MeasureRawReads(const MissBenchConfig& c, uint32_t depth) {
  io::ReadBenchConfig r;
  r.path = c.file;
  ENGRAM_ASSIGN_OR_RETURN(r.backend, io::ParseIoBackend(c.io_backend));
  if (r.backend == io::IoBackend::kAuto) r.backend = io::IoBackend::kIoUring;
  r.mode = io::ReadBenchMode::kAsync;
  r.queue_depth = depth;
  r.threads = r.backend == io::IoBackend::kIoUring ? 1 : 4;  // the store's default pread pool
  r.rings = c.io_rings;
  r.cold = true;
  r.seconds = c.seconds;
  r.seed = c.seed;
  return io::RunReadBenchmark(r);
}

// Every read of a batch, started as soon as the engine has room, with nothing
// done as each lands.
class BatchStream final : public io::ReadStream {
 public:
  explicit BatchStream(std::span<io::BlockRead> reads) : reads_(reads) {}
  io::BlockRead* NextRead() override { return next_ < reads_.size() ? &reads_[next_++] : nullptr; }
  void Finished(io::BlockRead*) override {}

 private:
  std::span<io::BlockRead> reads_;
  size_t next_ = 0;
};

// Batches of n reads of distinct random blocks through the raw engine (the
// store's backend and options), each submitted at once and waited for whole,
// for c.seconds: the latency floor of an n-row all-miss gather.
Result<std::vector<uint64_t>> MeasureRawBatches(const MissBenchConfig& c, const TableShape& shape, uint32_t n) {
  io::IoOptions options;
  ENGRAM_ASSIGN_OR_RETURN(options.backend, io::ParseIoBackend(c.io_backend));
  options.queue_depth = c.queue_depth;
  options.rings = std::min(c.io_rings, c.queue_depth);
  ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<io::IoEngine> engine, io::CreateIoEngine(options));
  ENGRAM_ASSIGN_OR_RETURN(io::FileId file, engine->OpenFile(c.file));
  ENGRAM_ASSIGN_OR_RETURN(io::AlignedBuffer arena, io::AlignedBuffer::Allocate(size_t{n} * io::kBlockSize));
  (void)engine->RegisterBuffer(arena.span());  // as the store's read buffers are
  std::vector<io::BlockRead> reads(n);
  std::mt19937_64 rng(c.seed + 2000);
  std::vector<uint64_t> samples;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c.seconds));
  while (Clock::now() < deadline) {
    AffinePermutation blocks(shape.blocks, rng);  // n distinct blocks
    for (uint32_t i = 0; i < n; ++i) {
      reads[i] = io::BlockRead{file, blocks(i) * io::kBlockSize, static_cast<uint32_t>(io::kBlockSize),
                               arena.data() + size_t{i} * io::kBlockSize, Status()};
    }
    const auto t0 = Clock::now();
    // On this thread's own ring where the engine can (as Store::Gather reads
    // its misses), else through the engine's threads.
    BatchStream stream(reads);
    if (!engine->RunReadStream(stream)) (void)engine->ReadBlocks(reads);  // each read's status is checked below
    samples.push_back(uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()));
    for (const io::BlockRead& r : reads) {
      if (!r.status.ok()) return r.status.WithContext("miss: raw batch read");
    }
  }
  engine->Shutdown();
  return samples;
}

// A baseline's mean rate over the rounds, or 0 with its ratios dropped
// unless every round measured it (fio missing, or failing in a round, gives
// no fio figure rather than one from fewer rounds).
double MeanIfEveryRound(double sum, std::vector<double>& round_ratios, uint32_t rounds) {
  if (round_ratios.size() == rounds) return sum / rounds;
  round_ratios.clear();
  return 0;
}

}  // namespace

Result<MissBenchReport> RunMissBenchmark(const MissBenchConfig& c, const ProgressLog& log) {
  ENGRAM_ASSIGN_OR_RETURN(TableShape shape, CheckBenchTable(c.file));
  ENGRAM_RETURN_IF_ERROR(CheckDirectIo(c.file));
  if (c.io_backend != "io_uring" && c.io_backend != "pread") {
    return Status::InvalidArgument("miss: --io-backend must be io_uring or pread (misses must reach the device)");
  }
  if (c.queue_depth == 0) return Status::InvalidArgument("miss: --queue-depth must be >= 1");
  if (c.gathers_in_flight == 0) return Status::InvalidArgument("miss: --gathers-in-flight must be >= 1");
  if (c.latency_rows == 0) return Status::InvalidArgument("miss: --latency-rows must be >= 1");
  if (!(c.seconds > 0)) return Status::InvalidArgument("miss: --seconds must be > 0");
  if (c.rounds == 0) return Status::InvalidArgument("miss: --rounds must be >= 1");
  std::vector<uint32_t> sizes = c.rows_per_gather;
  sizes.push_back(c.latency_rows);
  for (uint32_t n : sizes) {
    if (n == 0) return Status::InvalidArgument("miss: --rows-per-gather must be >= 1");
    if (n > shape.blocks) {
      return Status::InvalidArgument("miss: a gather of " + std::to_string(n) + " rows from distinct blocks needs " +
                                     std::to_string(n) + " blocks; '" + c.file + "' has " +
                                     std::to_string(shape.blocks) + " (make a larger table with engram-gen)");
    }
  }
  auto say = [&](const std::string& s) {
    if (log) log(s);
  };
  MissBenchReport report;
  std::string fio_skipped;  // why fio is not run any more (set once it is missing)
  auto fio_at = [&](uint32_t depth, uint32_t complete_min, double seconds) -> Result<FioResult> {
    if (c.fio.empty()) return Status::Unsupported("fio not run (--fio '')");
    if (!fio_skipped.empty()) return Status::Unsupported(fio_skipped);
    say("miss: fio io_uring at depth " + std::to_string(depth) +
        (complete_min > 1 ? ", in batches of " + std::to_string(depth) : std::string()));
    auto f = RunFio(c.fio, c.file, shape.file_bytes, depth, complete_min, seconds);
    if (!f.ok() && f.status().code() == StatusCode::kNotFound) fio_skipped = f.status().message();
    if (f.ok() && report.fio_version.empty()) report.fio_version = f->version;
    return f;
  };

  std::vector<uint64_t> latency_samples, raw_batch_latency_samples;
  // The first gather size equal to the latency gather's supplies its samples
  // (the store's, and the raw engine's batches where it reads them).
  const size_t first_latency_point =
      std::find(c.rows_per_gather.begin(), c.rows_per_gather.end(), c.latency_rows) - c.rows_per_gather.begin();
  for (size_t i = 0; i < c.rows_per_gather.size(); ++i) {
    const uint32_t n = c.rows_per_gather[i];
    MissBenchPoint p;
    p.rows_per_gather = n;
    p.gathers_in_flight = c.gathers_in_flight;
    p.depth = std::min(uint64_t{n} * c.gathers_in_flight, uint64_t{c.queue_depth});
    // Each round: the store, then the raw engine, then fio (and, in the batch
    // shape, the raw engine's and fio's batches), a slice each.
    MissBenchConfig slice = c;
    slice.seconds = c.seconds / c.rounds;
    double raw_sum = 0, fio_sum = 0, fio_batch_sum = 0, raw_batch_sum = 0;
    // One gather at a time of at most the queue depth's rows reads them as
    // one batch: the raw engine and fio are also run in that shape.
    const bool batch_shape = c.gathers_in_flight == 1 && n <= c.queue_depth && n > 1;
    StoreMissSession session(c, shape, n, c.seed + i);
    for (uint32_t r = 0; r < c.rounds; ++r) {
      say("miss: store, gathers of " + std::to_string(n) + " rows from untouched blocks");
      ENGRAM_ASSIGN_OR_RETURN(StoreMissRun s, session.Measure(slice.seconds));
      report.io_description = s.io_description;
      p.gathers += s.gathers;
      p.rows += s.rows;
      p.fresh_stores += s.fresh_stores;
      p.store_seconds += s.seconds;
      p.store_cpu_seconds += s.cpu_seconds;
      if (n == c.latency_rows && i == first_latency_point && c.gathers_in_flight == 1) {
        latency_samples.insert(latency_samples.end(), s.gather_ns.begin(), s.gather_ns.end());
      }
      const double store_rate = s.seconds > 0 ? double(s.rows) / s.seconds : 0;
      say("miss: raw engine reads at depth " + std::to_string(p.depth));
      const double raw_cpu0 = ProcessCpuSeconds();
      ENGRAM_ASSIGN_OR_RETURN(io::ReadBenchResult raw, MeasureRawReads(slice, p.depth));
      // Engine set-up and shutdown included, as fio's start-up is in its figure.
      p.raw_cpu_seconds += ProcessCpuSeconds() - raw_cpu0;
      p.raw_reads += raw.reads;
      if (raw.errors > 0) return Status::IOError("miss: " + std::to_string(raw.errors) + " raw reads failed");
      raw_sum += raw.iops;
      if (raw.iops > 0) p.round_ratios_raw.push_back(store_rate / raw.iops);
      auto f = fio_at(p.depth, 1, slice.seconds);
      if (f.ok()) {
        fio_sum += f->iops;
        p.fio_cpu_seconds += f->cpu_seconds;
        p.fio_ios += f->ios;
        p.round_ratios_fio.push_back(store_rate / f->iops);
      } else {
        p.fio_note = f.status().message();
      }
      if (batch_shape) {
        say("miss: raw engine, batches of " + std::to_string(n) + " reads");
        ENGRAM_ASSIGN_OR_RETURN(std::vector<uint64_t> batches, MeasureRawBatches(slice, shape, n));
        const double batch_ns = std::accumulate(batches.begin(), batches.end(), 0.0);
        if (batch_ns > 0) {
          const double rate = double(n) * double(batches.size()) * 1e9 / batch_ns;
          raw_batch_sum += rate;
          p.round_ratios_raw_batch.push_back(store_rate / rate);
        }
        if (n == c.latency_rows && i == first_latency_point) {
          raw_batch_latency_samples.insert(raw_batch_latency_samples.end(), batches.begin(), batches.end());
        }
      }
      if (batch_shape && f.ok()) {
        auto fb = fio_at(p.depth, p.depth, slice.seconds);
        if (fb.ok() && fb->iops > 0) {
          fio_batch_sum += fb->iops;
          p.round_ratios_fio_batch.push_back(store_rate / fb->iops);
        }
      }
    }
    p.raw_iops = raw_sum / c.rounds;
    p.fio_iops = MeanIfEveryRound(fio_sum, p.round_ratios_fio, c.rounds);
    p.raw_batch_rows_per_s = MeanIfEveryRound(raw_batch_sum, p.round_ratios_raw_batch, c.rounds);
    p.fio_batch_iops = MeanIfEveryRound(fio_batch_sum, p.round_ratios_fio_batch, c.rounds);
    report.points.push_back(p);
  }

  // Latency of one all-miss gather, next to one read at QD 1.
  MissLatency& lat = report.latency;
  lat.rows_per_gather = c.latency_rows;
  if (latency_samples.empty()) {
    say("miss: store, latency of gathers of " + std::to_string(c.latency_rows) + " rows");
    MissBenchConfig alone = c;
    alone.gathers_in_flight = 1;
    StoreMissSession session(alone, shape, c.latency_rows, c.seed + 1000);
    ENGRAM_ASSIGN_OR_RETURN(StoreMissRun s, session.Measure(c.seconds));
    latency_samples = std::move(s.gather_ns);
  }
  lat.gathers = latency_samples.size();
  lat.gather = PercentilesOf(latency_samples);  // sorts
  lat.gather_cdf = CdfOf(latency_samples);
  say("miss: raw engine reads at QD 1");
  ENGRAM_ASSIGN_OR_RETURN(io::ReadBenchResult raw1, MeasureRawReads(c, 1));
  lat.raw_read = {raw1.p50_us, raw1.p90_us, raw1.p99_us, raw1.p999_us};
  if (raw_batch_latency_samples.empty()) {
    say("miss: raw engine, batches of " + std::to_string(c.latency_rows) + " reads");
    ENGRAM_ASSIGN_OR_RETURN(raw_batch_latency_samples, MeasureRawBatches(c, shape, c.latency_rows));
  }
  lat.raw_batch = PercentilesOf(raw_batch_latency_samples);
  auto f1 = fio_at(1, 1, c.seconds);
  if (f1.ok()) {
    lat.fio_read = f1->lat;
    lat.fio_read_cdf = f1->cdf;
  } else {
    lat.fio_note = f1.status().message();
  }
  return report;
}

}  // namespace engram::bench
