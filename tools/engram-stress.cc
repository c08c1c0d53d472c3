// engram-stress: a concurrent stress test of the real Store under injected I/O
// faults, proving the store's promise: every row it serves is byte-exact, or
// the gather fails with a clear status; faults never poison the cache; the
// store keeps serving other rows.
//
// It generates a small synthetic table (row r = GenerateRow(seed, r), see
// storage/row_generator.h) in a temporary directory on the real disk (or uses
// --table), opens a Store with a small cache (so evictions and relocations
// never stop) over an I/O engine wrapped in io::FaultInjectionEngine, and runs
// T threads of random gathers (varied sizes, duplicates, strides, overlapping
// tickets, some with bad row IDs that must fail) and read-aheads
// (Prefetch / ReleasePrefetch / gathers that consume them, and read-aheads
// whose rows another thread gathers at once, without waiting for them to
// land: no pin may be left behind). Every row of every
// successful gather is compared with the generator; the bytes between rows
// (stride padding) must be untouched. At the end a sweep gathers sample rows
// until they succeed, and the store's counters are checked against the
// injected fault counts:
//   store checksum_failures == injected bit flips (every flipped block is caught)
//   store io_errors         == injected EIO (EAGAIN / short reads are absorbed)
//   cache misses == cache inserts + refusals + store failed_rows (rows of a
//                   failed block are never offered to the cache)
//   store gathers / failed_gathers == what the threads saw
//   no row is left pinned, and read-ahead rows == used + wasted
// With --truncate a second store (same backend, no injected faults) serves
// a victim table and a witness table while a thread truncates the victim
// under it: its gathers must fail with a clear status (never a signal or a
// wrong row) while the witness table keeps serving exact rows.
// It prints one JSON object and exits 1 if a row was wrong or a check failed.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "src/common/cli_checks.h"
#include "src/common/stdout_written.h"
#include "src/store/store_impl.h"
#include "storage/io/fault_injection_engine.h"
#include "storage/row_generator.h"
#include "storage/table_file.h"
#include "storage/table_generator.h"
#include "storage/temp_file_cleanup.h"

namespace {

using engram::GatherResult;
using engram::Status;
using engram::StatusCode;
using Clock = std::chrono::steady_clock;

constexpr std::byte kCanary{0xA5};

struct Config {
  double seconds = 10;
  unsigned threads = 4;
  bool faults = false;
  uint64_t seed = 1;
  std::string table;
  uint64_t rows = 100000;
  uint64_t cache_bytes = 4ull << 20;
  std::string backend = "auto";
  std::string policy = "default";
  bool fail_registration = false;
  bool fail_ring_setup = false;
  bool truncate = false;
};

// Everything the worker threads observe; summed into the report.
struct Observed {
  std::atomic<uint64_t> gathers{0}, ok_gathers{0}, failed_gathers{0};
  std::atomic<uint64_t> failed_io{0}, failed_checksum{0}, failed_unexpected{0};
  std::atomic<uint64_t> bad_id_gathers{0}, bad_id_accepted{0}, bad_id_wrong_code{0};
  std::atomic<uint64_t> overlapped_gathers{0};
  std::atomic<uint64_t> rows_requested{0}, rows_verified{0}, wrong_rows{0}, canary_violations{0};
  std::atomic<uint64_t> result_inconsistencies{0};
  std::atomic<uint64_t> hits{0}, misses{0};
  std::atomic<uint64_t> prefetches{0}, prefetch_rows{0}, prefetch_errors{0}, releases{0};
  std::atomic<uint64_t> sweep_rows{0}, sweep_retries{0}, sweep_unservable{0};
  std::atomic<uint64_t> racing_readaheads{0}, racing_gathers{0};
  std::string first_problem;  // guarded by mu
  std::mutex mu;

  // Rows one thread read ahead and another gathers next, with no wait for
  // the read-ahead to land (guarded by race_mu).
  std::mutex race_mu;
  std::deque<std::vector<uint64_t>> racing;

  void Problem(const std::string& what) {
    std::lock_guard lock(mu);
    if (first_problem.empty()) first_problem = what;
  }
};

void Inc(std::atomic<uint64_t>& a, uint64_t v = 1) { a.fetch_add(v, std::memory_order_relaxed); }
uint64_t Get(const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); }

class Worker {
 public:
  Worker(engram::Store& store, const Config& config, uint64_t data_seed, unsigned index, Observed& obs)
      : store_(store),
        config_(config),
        data_seed_(data_seed),
        obs_(obs),
        rng_(config.seed * 0x9E3779B97F4A7C15ull + index + 1),
        rows_(store.row_count(0)),
        record_(store.record_bytes(0)),
        expected_(record_) {}

  void Run(Clock::time_point deadline) {
    while (Clock::now() < deadline) Step();
    DoRelease();
    while (DoRacingGather()) {
    }
  }

  // Gathers `rows` in gathers of up to 16 rows, retrying each until it
  // succeeds (faults are still on): the store must keep serving every row.
  void Sweep(const std::vector<uint64_t>& rows) {
    for (size_t i = 0; i < rows.size(); i += 16) {
      std::vector<uint64_t> ids(rows.begin() + i, rows.begin() + std::min(rows.size(), i + 16));
      bool served = false;
      for (int attempt = 0; attempt < 200 && !served; ++attempt) {
        if (attempt > 0) Inc(obs_.sweep_retries);
        served = GatherAndVerify(ids, record_, /*count_failure_kinds=*/true);
      }
      if (served) {
        Inc(obs_.sweep_rows, ids.size());
      } else {
        Inc(obs_.sweep_unservable, ids.size());
        obs_.Problem("sweep: rows starting at " + std::to_string(ids.front()) + " never served in 200 attempts");
      }
    }
  }

 private:
  uint64_t Uniform(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }

  // A row ID: a small hot set (hits, duplicates across threads), a warm set
  // (constant evictions and relocations) and the whole table (misses).
  uint64_t RandomRow() {
    const uint64_t p = Uniform(100);
    if (p < 40) return Uniform(std::max<uint64_t>(1, rows_ / 200));
    if (p < 70) return Uniform(std::max<uint64_t>(1, rows_ / 10));
    return Uniform(rows_);
  }

  size_t RandomGatherSize() {
    const uint64_t p = Uniform(100);
    if (p < 35) return 1 + Uniform(8);
    if (p < 60) return 48;  // one V4.1 token
    if (p < 90) return 9 + Uniform(120);
    return 256 + Uniform(769);  // a prefill chunk
  }

  std::vector<uint64_t> RandomIds(size_t n) {
    std::vector<uint64_t> ids;
    ids.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t p = Uniform(100);
      if (!ids.empty() && p < 10) {
        ids.push_back(ids[Uniform(ids.size())]);  // duplicate within the gather
      } else if (!ids.empty() && p < 15) {
        ids.push_back(std::min(rows_ - 1, ids.back() + 1));  // same block, coalesced
      } else if (!pending_prefetch_.empty() && p < 25) {
        ids.push_back(pending_prefetch_[Uniform(pending_prefetch_.size())]);  // consume a read-ahead
      } else {
        ids.push_back(RandomRow());
      }
    }
    return ids;
  }

  size_t RandomStride() {
    static constexpr size_t kPads[] = {0, 0, 8, 56};
    return record_ + kPads[Uniform(4)];
  }

  void Step() {
    const uint64_t p = Uniform(100);
    if (p < 8) return DoPrefetch();
    if (p < 11) return DoRelease();
    if (p < 15) return DoBadGather();
    if (p < 23) return DoOverlapped();
    if (p < 28) return DoRacingReadAhead();
    if (p < 33) {
      DoRacingGather();
      return;
    }
    GatherAndVerify(RandomIds(RandomGatherSize()), RandomStride(), true);
  }

  // Reads ahead 1..max_rows random rows; returns them, or nothing if the
  // store refused (a problem: they are valid).
  std::vector<uint64_t> ReadAheadRandomRows(size_t max_rows) {
    std::vector<uint64_t> ids;
    const size_t n = 1 + Uniform(max_rows);
    for (size_t i = 0; i < n; ++i) ids.push_back(RandomRow());
    Status s = store_.Prefetch(0, ids);
    Inc(obs_.prefetches);
    if (!s.ok()) {
      Inc(obs_.prefetch_errors);
      obs_.Problem("Prefetch of valid rows failed: " + s.ToString());
      return {};
    }
    Inc(obs_.prefetch_rows, ids.size());
    return ids;
  }

  void DoPrefetch() {
    std::vector<uint64_t> ids = ReadAheadRandomRows(32);
    pending_prefetch_.insert(pending_prefetch_.end(), ids.begin(), ids.end());
    if (pending_prefetch_.size() > 256) DoRelease();
  }

  void DoRelease() {
    if (pending_prefetch_.empty()) return;
    // A row whose read-ahead lands after ReleasePrefetch stays pinned, so let
    // ours land first.
    store_.WaitForPrefetches();
    store_.ReleasePrefetch(0, pending_prefetch_);
    Inc(obs_.releases);
    pending_prefetch_.clear();
  }

  // Read-ahead of rows that some thread (usually another) gathers next
  // without waiting for it: the gather may run before, during or after the
  // read-ahead lands, and none of these orders may leave a pin behind.
  void DoRacingReadAhead() {
    std::vector<uint64_t> ids = ReadAheadRandomRows(64);
    if (ids.empty()) return;
    Inc(obs_.racing_readaheads);
    std::lock_guard lock(obs_.race_mu);
    obs_.racing.push_back(std::move(ids));
  }

  // Gathers the oldest racing read-ahead's rows; false if there was none.
  bool DoRacingGather() {
    std::vector<uint64_t> ids;
    {
      std::lock_guard lock(obs_.race_mu);
      if (obs_.racing.empty()) return false;
      ids = std::move(obs_.racing.front());
      obs_.racing.pop_front();
    }
    Inc(obs_.racing_gathers);
    GatherAndVerify(ids, record_, true);
    return true;
  }

  // A gather with a row ID past the end (or absurd): must fail, as a whole,
  // with InvalidArgument / OutOfRange, before any I/O.
  void DoBadGather() {
    std::vector<uint64_t> ids = RandomIds(1 + Uniform(48));
    const uint64_t bad = Uniform(3) == 0 ? ~uint64_t{0} : rows_ + Uniform(1000);
    ids[Uniform(ids.size())] = bad;
    std::vector<std::byte> dst(ids.size() * record_);
    GatherResult r = store_.Gather(0, ids, dst.data(), record_);
    Inc(obs_.gathers);
    Inc(obs_.bad_id_gathers);
    Inc(obs_.rows_requested, ids.size());
    if (r.status.ok()) {
      Inc(obs_.ok_gathers);
      Inc(obs_.bad_id_accepted);
      obs_.Problem("a gather of row " + std::to_string(bad) + " succeeded");
      return;
    }
    Inc(obs_.failed_gathers);
    if (r.status.code() != StatusCode::kOutOfRange && r.status.code() != StatusCode::kInvalidArgument) {
      Inc(obs_.bad_id_wrong_code);
      obs_.Problem("bad row ID gather failed with " + r.status.ToString());
    }
  }

  // Two gathers in flight from one thread at once, waited in reverse order.
  void DoOverlapped() {
    std::vector<uint64_t> a = RandomIds(RandomGatherSize()), b = RandomIds(RandomGatherSize());
    const size_t sa = RandomStride(), sb = RandomStride();
    std::vector<std::byte> da(a.size() * sa, kCanary), db(b.size() * sb, kCanary);
    engram::GatherTicket ta = store_.StartGather(0, a, da.data(), sa);
    engram::GatherTicket tb = store_.StartGather(0, b, db.data(), sb);
    GatherResult rb = store_.Wait(std::move(tb));
    GatherResult ra = store_.Wait(std::move(ta));
    Inc(obs_.overlapped_gathers, 2);
    Check(a, sa, da, ra, true);
    Check(b, sb, db, rb, true);
  }

  bool GatherAndVerify(const std::vector<uint64_t>& ids, size_t stride, bool count_failure_kinds) {
    std::vector<std::byte> dst(ids.size() * stride, kCanary);
    GatherResult r = store_.Gather(0, ids, dst.data(), stride);
    return Check(ids, stride, dst, r, count_failure_kinds);
  }

  bool Check(const std::vector<uint64_t>& ids, size_t stride, const std::vector<std::byte>& dst,
             const GatherResult& r, bool count_failure_kinds) {
    Inc(obs_.gathers);
    Inc(obs_.rows_requested, ids.size());
    if (r.rows != ids.size() || r.distinct_rows > r.rows || r.hits + r.misses != r.distinct_rows ||
        (r.status.ok() && r.cache_nanoseconds + r.disk_nanoseconds > r.wait_nanoseconds)) {
      Inc(obs_.result_inconsistencies);
      obs_.Problem("inconsistent GatherResult: rows " + std::to_string(r.rows) + " distinct " +
                   std::to_string(r.distinct_rows) + " hits " + std::to_string(r.hits) + " misses " +
                   std::to_string(r.misses));
    }
    Inc(obs_.hits, r.hits);
    Inc(obs_.misses, r.misses);
    if (!r.status.ok()) {
      Inc(obs_.failed_gathers);
      if (!count_failure_kinds) return false;
      const std::string& m = r.status.message();
      if (config_.faults && r.status.code() == StatusCode::kIOError && m.find("injected EIO") != std::string::npos) {
        Inc(obs_.failed_io);
      } else if (config_.faults && r.status.code() == StatusCode::kCorruption &&
                 m.find("checksum") != std::string::npos) {
        Inc(obs_.failed_checksum);
      } else {
        Inc(obs_.failed_unexpected);
        obs_.Problem("gather of valid rows failed unexpectedly: " + r.status.ToString());
      }
      return false;
    }
    Inc(obs_.ok_gathers);
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::byte* got = dst.data() + i * stride;
      engram::GenerateRow(data_seed_, ids[i], expected_);
      if (std::memcmp(got, expected_.data(), record_) != 0) {
        Inc(obs_.wrong_rows);
        obs_.Problem("WRONG ROW: row " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                     " differs from the generator");
      }
      for (size_t j = record_; j < stride; ++j) {
        if (got[j] != kCanary) {
          Inc(obs_.canary_violations);
          obs_.Problem("gather wrote past a row into the stride padding at position " + std::to_string(i));
          break;
        }
      }
    }
    Inc(obs_.rows_verified, ids.size());
    return true;
  }

  engram::Store& store_;
  const Config& config_;
  const uint64_t data_seed_;
  Observed& obs_;
  std::mt19937_64 rng_;
  const uint64_t rows_;
  const uint32_t record_;
  std::vector<std::byte> expected_;
  std::vector<uint64_t> pending_prefetch_;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "engram-stress: %s\n", message.c_str());
  return 2;
}

// The truncation mode: a store over a victim and a witness table; the victim
// file is cut to half its size while the store has it open.
struct TruncationRun {
  uint64_t gathers_before = 0, victim_ok = 0, victim_failed = 0, witness_ok = 0;
  uint64_t wrong_rows = 0, unexpected_failures = 0;
  std::string first_problem;
  std::string first_failure;

  void Problem(const std::string& what) {
    if (first_problem.empty()) first_problem = what;
  }

  nlohmann::json ToJson() const {
    nlohmann::json j = {{"gathers_before_truncation", gathers_before},
                        {"victim_ok_gathers", victim_ok},
                        {"victim_failed_gathers", victim_failed},
                        {"witness_ok_gathers", witness_ok},
                        {"wrong_rows", wrong_rows},
                        {"unexpected_failures", unexpected_failures}};
    if (!first_failure.empty()) j["first_failure"] = first_failure;
    if (!first_problem.empty()) j["first_problem"] = first_problem;
    return j;
  }
};

// Gathers `ids` from `table`; returns the status, counting wrong rows.
Status GatherChecked(engram::Store& store, size_t table, const std::vector<uint64_t>& ids, uint64_t data_seed,
                     TruncationRun& run) {
  const uint32_t record = store.record_bytes(table);
  std::vector<std::byte> dst(ids.size() * record), expected(record);
  GatherResult r = store.Gather(table, ids, dst.data(), record);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!r.RowWritten(i)) continue;
    engram::GenerateRow(data_seed, ids[i], expected);
    if (std::memcmp(dst.data() + i * record, expected.data(), record) != 0) {
      ++run.wrong_rows;
      run.Problem("WRONG ROW " + std::to_string(ids[i]) + " of table " + std::to_string(table));
    }
  }
  return r.status;
}

void RunTruncation(const std::string& victim, const std::string& witness, uint64_t data_seed,
                   const std::string& backend, Clock::time_point deadline, TruncationRun& run) {
  engram::StoreOptions options;
  options.tables = {{victim, "victim", 0}, {witness, "witness", 0}};
  options.cache_bytes = 1ull << 20;
  options.io_backend = backend;
  auto opened = engram::Store::Open(options);
  if (!opened.ok()) return run.Problem("truncation store: " + opened.status().ToString());
  engram::Store& store = **opened;
  std::mt19937_64 rng(data_seed ^ 0x7A11ull);
  auto random_ids = [&](size_t table) {
    std::vector<uint64_t> ids(16);
    for (auto& id : ids) id = rng() % store.row_count(table);
    return ids;
  };
  const auto start = Clock::now();
  const auto cut_at = start + (deadline - start) / 3;
  while (Clock::now() < cut_at) {
    for (size_t table : {0, 1}) {
      Status s = GatherChecked(store, table, random_ids(table), data_seed, run);
      if (!s.ok()) run.Problem("gather before truncation failed: " + s.ToString());
      ++run.gathers_before;
    }
  }
  std::error_code ec;
  std::filesystem::resize_file(victim, std::filesystem::file_size(victim) / 2, ec);
  if (ec) return run.Problem("truncate " + victim + ": " + ec.message());
  do {
    Status s = GatherChecked(store, 0, random_ids(0), data_seed, run);
    if (s.ok()) {
      ++run.victim_ok;  // rows cached before the cut, or in the half that is left
    } else if (s.code() == StatusCode::kIOError || s.code() == StatusCode::kCorruption) {
      ++run.victim_failed;
      if (run.first_failure.empty()) run.first_failure = s.ToString();
    } else {
      ++run.unexpected_failures;
      run.Problem("truncated table failed with " + s.ToString());
    }
    Status w = GatherChecked(store, 1, random_ids(1), data_seed, run);
    if (w.ok()) {
      ++run.witness_ok;
    } else {
      ++run.unexpected_failures;
      run.Problem("witness table failed after the victim was truncated: " + w.ToString());
    }
  } while (Clock::now() < deadline);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Concurrent stress test of the Engram store under injected I/O faults: every served row is "
               "checked byte for byte against the generator. Prints one JSON object; exits 1 on a wrong row "
               "or a failed invariant."};
  Config config;
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
  if (config.rows == 0) return Fail("--rows must be > 0");

  // --- the table ---------------------------------------------------------
  std::string table_path = config.table;
  std::string temp_dir;
  uint64_t data_seed = config.seed;
  if (table_path.empty() || config.truncate) {
    std::string base = work_dir.empty() ? std::filesystem::temp_directory_path().string() : work_dir;
    std::string templ = base + "/engram-stress-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) return Fail("mkdtemp in " + base + ": " + std::strerror(errno));
    temp_dir = templ;
  }
  if (table_path.empty()) {
    table_path = temp_dir + "/stress.engram";
    engram::GenerateTableOptions gen;
    gen.rows = config.rows;
    gen.record_bytes = 264;
    gen.seed = data_seed;
    gen.sync = false;
    if (Status s = engram::GenerateTable(table_path, gen); !s.ok()) return Fail(s.ToString());
  } else {
    auto file = engram::TableFile::Open(table_path);
    if (!file.ok()) return Fail(file.status().ToString());
    static constexpr std::string_view kGenerator[] = {"generator"};
    auto meta = (*file)->MetadataMembers(kGenerator);
    const std::optional<uint64_t> seed = meta.ok() ? engram::GeneratorSeed(*meta) : std::nullopt;
    if (!seed) {
      return Fail(table_path + " has no generator seed in its metadata (only engram-gen tables can be checked)");
    }
    data_seed = *seed;
  }
  std::string victim_path, witness_path;
  if (config.truncate) {
    engram::GenerateTableOptions gen;
    gen.rows = 20000;  // ~1300 blocks: most of the victim's rows are not cached when it is cut
    gen.record_bytes = 264;
    gen.seed = data_seed;
    gen.sync = false;
    victim_path = temp_dir + "/victim.engram";
    witness_path = temp_dir + "/witness.engram";
    if (Status s = engram::GenerateTable(victim_path, gen); !s.ok()) return Fail(s.ToString());
    if (Status s = engram::GenerateTable(witness_path, gen); !s.ok()) return Fail(s.ToString());
  }
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      if (!dir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      }
    }
  } cleanup{temp_dir};

  // --- the store, over a fault-injecting engine ----------------------------
  engram::io::FaultOptions faults;
  faults.seed = config.seed;
  if (config.faults) {
    faults.eio_rate = 0.002;
    faults.bitflip_rate = 0.002;
    faults.short_read_rate = 0.02;
    faults.eagain_rate = 0.02;
    faults.delay_rate = 0.02;
    faults.reorder_rate = 0.02;
    faults.delay = std::chrono::microseconds(300);
    faults.reorder_hold = std::chrono::microseconds(1500);
  }
  faults.fail_registration = config.fail_registration;
  faults.fail_ring_setup = config.fail_ring_setup;
  auto injector = std::make_shared<engram::io::FaultInjector>(faults);
  engram::io::IoEngine* engine = nullptr;  // owned by the store
  engram::StoreOptions options;
  engram::TableOptions table_options;
  table_options.path = table_path;
  options.tables = {table_options};
  options.cache_bytes = config.cache_bytes;
  options.cache_policy = config.policy;
  options.io_backend = config.backend;
  options.queue_depth = 64;
  options.io_threads = 4;
  auto opened = engram::OpenStoreWithEngineFactory(
      options, [&](const engram::io::IoOptions& io) -> engram::Result<std::unique_ptr<engram::io::IoEngine>> {
        engram::io::IoOptions with_faults = io;
        with_faults.fault_injector = injector;
        ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<engram::io::IoEngine> inner, engram::io::CreateIoEngine(with_faults));
        auto wrapped = std::make_unique<engram::io::FaultInjectionEngine>(std::move(inner), injector);
        engine = wrapped.get();
        return std::unique_ptr<engram::io::IoEngine>(std::move(wrapped));
      });
  if (!opened.ok()) return Fail(opened.status().ToString());
  std::unique_ptr<engram::Store> store = std::move(opened).value();
  const uint64_t rows = store->row_count(0);

  // --- the run -------------------------------------------------------------
  Observed obs;
  std::vector<std::unique_ptr<Worker>> workers;
  for (unsigned i = 0; i < config.threads; ++i) {
    workers.push_back(std::make_unique<Worker>(*store, config, data_seed, i, obs));
  }
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config.seconds));
  TruncationRun truncation;
  {
    std::vector<std::thread> threads;
    for (auto& w : workers) threads.emplace_back([&w, deadline] { w->Run(deadline); });
    if (config.truncate) {
      threads.emplace_back([&] {
        RunTruncation(victim_path, witness_path, data_seed, config.backend, deadline, truncation);
      });
    }
    for (auto& t : threads) t.join();
  }
  store->WaitForPrefetches();
  // Sweep: hot rows plus a sample of the table, spread over the threads.
  {
    std::mt19937_64 rng(config.seed ^ 0x5EEDull);
    std::vector<uint64_t> sample;
    for (uint64_t r = 0; r < std::min<uint64_t>(rows, 256); ++r) sample.push_back(r);
    for (int i = 0; i < 1024; ++i) sample.push_back(rng() % rows);
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < config.threads; ++i) {
      std::vector<uint64_t> part;
      for (size_t j = i; j < sample.size(); j += config.threads) part.push_back(sample[j]);
      threads.emplace_back([&w = workers[i], part = std::move(part)] { w->Sweep(part); });
    }
    for (auto& t : threads) t.join();
  }
  store->WaitForPrefetches();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();

  // --- the report ----------------------------------------------------------
  const engram::TableStats st = store->Stats(0);
  const engram::io::IoStatsSnapshot io = engine->Stats();
  using engram::io::FaultKind;
  auto injected = [&](FaultKind k) { return injector->count(k); };
  nlohmann::json fault_counts = nlohmann::json::object();
  uint64_t faults_injected = 0;
  for (int k = 0; k < engram::io::kFaultKindCount; ++k) {
    const uint64_t n = injector->count(static_cast<FaultKind>(k));
    fault_counts[engram::io::FaultKindName(static_cast<FaultKind>(k))] = n;
    faults_injected += n;
  }

  nlohmann::json checks = nlohmann::json::object();
  bool all_ok = true;
  auto check = [&](const char* name, bool ok) {
    checks[name] = ok;
    if (!ok) all_ok = false;
  };
  check("no_wrong_rows", Get(obs.wrong_rows) == 0);
  check("stride_padding_untouched", Get(obs.canary_violations) == 0);
  check("gather_results_consistent", Get(obs.result_inconsistencies) == 0);
  check("bad_row_ids_rejected", Get(obs.bad_id_accepted) == 0 && Get(obs.bad_id_wrong_code) == 0);
  check("failures_only_from_injected_faults", Get(obs.failed_unexpected) == 0);
  check("prefetch_of_valid_rows_accepted", Get(obs.prefetch_errors) == 0);
  check("store_gathers_match", st.gathers == Get(obs.gathers) && st.failed_gathers == Get(obs.failed_gathers));
  check("checksum_failures_equal_injected_bit_flips", st.checksum_failures == injected(FaultKind::kBitFlip));
  check("io_errors_equal_injected_eio", st.io_errors == injected(FaultKind::kEio));
  check("engine_absorbed_eagain_and_short_reads",
        io.errors == 0 && io.cancelled == 0 && io.retries >= injected(FaultKind::kEagain) &&
            io.short_reads >= injected(FaultKind::kShortRead));
  check("failed_blocks_never_offered_to_cache",
        st.cache.misses == st.cache.inserts + st.cache.total_refusals() + st.failed_rows);
  check("failed_gathers_explained_by_faults",
        Get(obs.failed_io) <= injected(FaultKind::kEio) && Get(obs.failed_checksum) <= injected(FaultKind::kBitFlip));
  check("every_sampled_row_still_served", Get(obs.sweep_unservable) == 0);
  check("rows_were_verified", Get(obs.rows_verified) > 0);
  check("no_read_ahead_pin_left", st.cache.pinned_rows == 0);
  check("read_ahead_rows_used_or_wasted", st.prefetch_rows == st.prefetch_used_rows + st.prefetch_wasted_rows);
  if (config.truncate) {
    check("truncated_table_failed_cleanly", truncation.victim_failed > 0 && truncation.unexpected_failures == 0 &&
                                                truncation.wrong_rows == 0 && truncation.first_problem.empty());
    check("other_table_kept_serving", truncation.witness_ok > 0);
  }

  nlohmann::json report = {
      {"tool", "engram-stress"},
      {"seconds", config.seconds},
      {"elapsed_seconds", elapsed},
      {"threads", config.threads},
      {"seed", config.seed},
      {"faults_enabled", config.faults},
      {"backend", store->io_description()},
      {"table", {{"rows", rows}, {"record_bytes", store->record_bytes(0)}, {"generated", config.table.empty()}}},
      {"cache", {{"policy", config.policy}, {"budget_bytes", st.cache_budget_bytes},
                 {"capacity_rows", st.cache.capacity_rows}, {"hits", st.cache.hits}, {"misses", st.cache.misses},
                 {"inserts", st.cache.inserts}, {"refusals", st.cache.total_refusals()},
                 {"evictions", st.cache.evictions}, {"relocations", st.cache.relocations},
                 {"pinned_inserts", st.cache.pinned_inserts}, {"pinned_refusals", st.cache.pinned_refusals},
                 {"pinned_rows_at_end", st.cache.pinned_rows}}},
      {"gathers", Get(obs.gathers)},
      {"ok_gathers", Get(obs.ok_gathers)},
      {"failed_gathers", Get(obs.failed_gathers)},
      {"failed_gathers_by_cause", {{"injected_eio", Get(obs.failed_io)}, {"checksum", Get(obs.failed_checksum)},
                                   {"bad_row_id", Get(obs.bad_id_gathers) - Get(obs.bad_id_accepted)},
                                   {"unexpected", Get(obs.failed_unexpected)}}},
      {"overlapped_gathers", Get(obs.overlapped_gathers)},
      {"rows_requested", Get(obs.rows_requested)},
      {"rows_verified", Get(obs.rows_verified)},
      {"wrong_rows", Get(obs.wrong_rows)},
      {"stride_padding_violations", Get(obs.canary_violations)},
      {"prefetches", Get(obs.prefetches)},
      {"prefetch_rows", Get(obs.prefetch_rows)},
      {"releases", Get(obs.releases)},
      {"racing_read_aheads", Get(obs.racing_readaheads)},
      {"racing_gathers", Get(obs.racing_gathers)},
      {"sweep", {{"rows_served", Get(obs.sweep_rows)}, {"retries", Get(obs.sweep_retries)},
                 {"unservable_rows", Get(obs.sweep_unservable)}}},
      {"faults_injected", faults_injected},
      {"faults_injected_by_kind", fault_counts},
      {"store", {{"gathers", st.gathers}, {"failed_gathers", st.failed_gathers}, {"failed_rows", st.failed_rows},
                 {"io_reads", st.io_reads}, {"io_errors", st.io_errors},
                 {"checksum_failures", st.checksum_failures}, {"prefetch_rows", st.prefetch_rows},
                 {"prefetch_used_rows", st.prefetch_used_rows}, {"prefetch_wasted_rows", st.prefetch_wasted_rows}}},
      {"engine", {{"reads", io.reads}, {"errors", io.errors}, {"cancelled", io.cancelled},
                  {"retries", io.retries}, {"short_reads", io.short_reads}}},
      {"checks", checks},
      {"ok", all_ok},
  };
  if (config.truncate) report["truncation"] = truncation.ToJson();
  {
    std::lock_guard lock(obs.mu);
    if (!obs.first_problem.empty()) report["first_problem"] = obs.first_problem;
  }
  store.reset();
  std::printf("%s\n", report.dump(json ? -1 : 2).c_str());
  // A report that never arrived must not look like a passed run.
  if (!engram::StdoutWritten()) return Fail("write to stdout failed");
  if (!json) {
    std::fprintf(stderr, "engram-stress: %s: %llu gathers, %llu rows verified, %llu wrong, %llu faults injected\n",
                 all_ok ? "OK" : "FAILED", static_cast<unsigned long long>(Get(obs.gathers)),
                 static_cast<unsigned long long>(Get(obs.rows_verified)),
                 static_cast<unsigned long long>(Get(obs.wrong_rows)),
                 static_cast<unsigned long long>(faults_injected));
  }
  return all_ok ? 0 : 1;
}
