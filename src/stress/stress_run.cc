#include "src/stress/stress_run.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "src/store/store_impl.h"
#include "src/stress/observations.h"
#include "src/stress/stress_worker.h"
#include "src/stress/truncation_run.h"
#include "src/tablegen/row_generator.h"
#include "src/tablegen/table_generator.h"
#include "storage/io/fault_injection_engine.h"
#include "storage/table_file.h"

namespace engram::stress {

Result<StressOutcome> RunStress(const StressConfig& config, const std::string& work_dir) {
  if (config.rows == 0) return Status::InvalidArgument("--rows must be > 0");
  // --- the table ---------------------------------------------------------
  std::string table_path = config.table;
  std::string temp_dir;
  uint64_t data_seed = config.seed;
  if (table_path.empty() || config.truncate) {
    std::string base = work_dir.empty() ? std::filesystem::temp_directory_path().string() : work_dir;
    std::string templ = base + "/engram-stress-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) return Status::IOError("mkdtemp in " + base + ": " + std::strerror(errno));
    temp_dir = templ;
  }
  if (table_path.empty()) {
    table_path = temp_dir + "/stress.engram";
    GenerateTableOptions gen;
    gen.rows = config.rows;
    gen.record_bytes = 264;
    gen.seed = data_seed;
    gen.sync = false;
    if (Status s = GenerateTable(table_path, gen); !s.ok()) return s;
  } else {
    auto file = TableFile::Open(table_path);
    if (!file.ok()) return file.status();
    static constexpr std::string_view kGenerator[] = {"generator"};
    auto meta = (*file)->MetadataMembers(kGenerator);
    const std::optional<uint64_t> seed = meta.ok() ? GeneratorSeed(*meta) : std::nullopt;
    if (!seed) {
      return Status::InvalidArgument(table_path + " has no generator seed in its metadata (only engram-gen tables can be checked)");
    }
    data_seed = *seed;
  }
  std::string victim_path, witness_path;
  if (config.truncate) {
    GenerateTableOptions gen;
    gen.rows = 20000;  // ~1300 blocks: most of the victim's rows are not cached when it is cut
    gen.record_bytes = 264;
    gen.seed = data_seed;
    gen.sync = false;
    victim_path = temp_dir + "/victim.engram";
    witness_path = temp_dir + "/witness.engram";
    if (Status s = GenerateTable(victim_path, gen); !s.ok()) return s;
    if (Status s = GenerateTable(witness_path, gen); !s.ok()) return s;
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
  io::FaultOptions faults;
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
  auto injector = std::make_shared<io::FaultInjector>(faults);
  io::IoEngine* engine = nullptr;  // owned by the store
  StoreOptions options;
  TableOptions table_options;
  table_options.path = table_path;
  options.tables = {table_options};
  options.cache_bytes = config.cache_bytes;
  options.cache_policy = config.policy;
  options.io_backend = config.backend;
  options.queue_depth = 64;
  options.io_rings = config.io_rings;
  options.io_threads = 4;
  // One slab of read buffers: prefill-sized gathers (256+ missed blocks)
  // stream through half of it, and gathers at once run it out, so the
  // streamed path and the heap fallback are both under the faults.
  options.read_buffer_bytes = 2u << 20;
  auto opened = OpenStoreWithEngineFactory(
      options, [&](const io::IoOptions& io) -> Result<std::unique_ptr<io::IoEngine>> {
        io::IoOptions with_faults = io;
        with_faults.fault_injector = injector;
        ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<io::IoEngine> inner, io::CreateIoEngine(with_faults));
        auto wrapped = std::make_unique<io::FaultInjectionEngine>(std::move(inner), injector);
        engine = wrapped.get();
        return std::unique_ptr<io::IoEngine>(std::move(wrapped));
      });
  if (!opened.ok()) return opened.status();
  std::unique_ptr<Store> store = std::move(opened).value();
  const uint64_t rows = store->row_count(0);

  // --- the run -------------------------------------------------------------
  Observations obs;
  std::vector<std::unique_ptr<StressWorker>> workers;
  for (unsigned i = 0; i < config.threads; ++i) {
    workers.push_back(std::make_unique<StressWorker>(*store, config, data_seed, i, obs));
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
  store->WaitForReadAheads();
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
  store->WaitForReadAheads();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();

  // --- the report ----------------------------------------------------------
  const TableStats st = store->Stats(0);
  const io::IoStatsSnapshot io = engine->Stats();
  using io::FaultKind;
  auto injected = [&](FaultKind k) { return injector->count(k); };
  nlohmann::json fault_counts = nlohmann::json::object();
  uint64_t faults_injected = 0;
  for (int k = 0; k < io::kFaultKindCount; ++k) {
    const uint64_t n = injector->count(static_cast<FaultKind>(k));
    fault_counts[io::FaultKindName(static_cast<FaultKind>(k))] = n;
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
  check("read_ahead_of_valid_rows_accepted", Get(obs.read_ahead_errors) == 0);
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
  check("read_ahead_rows_used_or_wasted", st.read_ahead_rows == st.read_ahead_used_rows + st.read_ahead_wasted_rows);
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
      {"read_aheads", Get(obs.read_aheads)},
      {"read_ahead_rows", Get(obs.read_ahead_rows)},
      {"releases", Get(obs.releases)},
      {"racing_read_aheads", Get(obs.racing_read_aheads)},
      {"racing_gathers", Get(obs.racing_gathers)},
      {"sweep", {{"rows_served", Get(obs.sweep_rows)}, {"retries", Get(obs.sweep_retries)},
                 {"unservable_rows", Get(obs.sweep_unservable)}}},
      {"faults_injected", faults_injected},
      {"faults_injected_by_kind", fault_counts},
      {"store", {{"gathers", st.gathers}, {"failed_gathers", st.failed_gathers}, {"failed_rows", st.failed_rows},
                 {"io_reads", st.io_reads}, {"io_errors", st.io_errors},
                 {"checksum_failures", st.checksum_failures}, {"read_ahead_rows", st.read_ahead_rows},
                 {"read_ahead_used_rows", st.read_ahead_used_rows}, {"read_ahead_wasted_rows", st.read_ahead_wasted_rows}}},
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
  StressOutcome outcome;
  outcome.report = std::move(report);
  outcome.ok = all_ok;
  outcome.gathers = Get(obs.gathers);
  outcome.rows_verified = Get(obs.rows_verified);
  outcome.wrong_rows = Get(obs.wrong_rows);
  outcome.faults_injected = faults_injected;
  // The store is closed before the generated tables are removed.
  store.reset();
  return outcome;
}

}  // namespace engram::stress
