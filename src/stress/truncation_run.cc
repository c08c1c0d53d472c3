#include "src/stress/truncation_run.h"

#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "engram/store.h"
#include "src/tablegen/row_generator.h"

namespace engram::stress {
namespace {

using Clock = std::chrono::steady_clock;

// Gathers `ids` from `table`; returns the status, counting wrong rows.
Status GatherChecked(Store& store, size_t table, const std::vector<uint64_t>& ids, uint64_t data_seed,
                     TruncationRun& run) {
  const uint32_t record = store.record_bytes(table);
  std::vector<std::byte> dst(ids.size() * record), expected(record);
  GatherResult r = store.Gather(table, ids, dst.data(), record);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!r.RowWritten(i)) continue;
    GenerateRow(data_seed, ids[i], expected);
    if (std::memcmp(dst.data() + i * record, expected.data(), record) != 0) {
      ++run.wrong_rows;
      run.Problem("WRONG ROW " + std::to_string(ids[i]) + " of table " + std::to_string(table));
    }
  }
  return r.status;
}

}  // namespace

void RunTruncation(const std::string& victim, const std::string& witness, uint64_t data_seed,
                   const std::string& backend, Clock::time_point deadline, TruncationRun& run) {
  StoreOptions options;
  options.tables = {{victim, "victim", 0}, {witness, "witness", 0}};
  options.cache_bytes = 1ull << 20;
  options.io_backend = backend;
  auto opened = Store::Open(options);
  if (!opened.ok()) return run.Problem("truncation store: " + opened.status().ToString());
  Store& store = **opened;
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
}  // namespace engram::stress
