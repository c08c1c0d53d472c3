// StressWorker: one thread of an engram-stress run. It runs random gathers
// (varied sizes, duplicates, strides, overlapping tickets, bad row IDs that
// must fail) and read-aheads (some consumed, some released, some raced by
// another thread's gather) against a Store, and checks every row it is
// served against the generator, and the stride padding around it.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engram/store.h"
#include "src/stress/observations.h"
#include "src/stress/stress_config.h"
#include "src/tablegen/row_generator.h"

namespace engram::stress {

using Clock = std::chrono::steady_clock;

// Written around every gathered row; a gather must never touch it.
inline constexpr std::byte kCanary{0xA5};

class StressWorker {
 public:
  StressWorker(Store& store, const StressConfig& config, uint64_t data_seed, unsigned index, Observations& obs)
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
      } else if (!pending_read_ahead_.empty() && p < 25) {
        ids.push_back(pending_read_ahead_[Uniform(pending_read_ahead_.size())]);  // consume a read-ahead
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
    if (p < 8) return DoReadAhead();
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
    Status s = store_.ReadAhead(0, ids);
    Inc(obs_.read_aheads);
    if (!s.ok()) {
      Inc(obs_.read_ahead_errors);
      obs_.Problem("Read-ahead of valid rows failed: " + s.ToString());
      return {};
    }
    Inc(obs_.read_ahead_rows, ids.size());
    return ids;
  }

  void DoReadAhead() {
    std::vector<uint64_t> ids = ReadAheadRandomRows(32);
    pending_read_ahead_.insert(pending_read_ahead_.end(), ids.begin(), ids.end());
    if (pending_read_ahead_.size() > 256) DoRelease();
  }

  void DoRelease() {
    if (pending_read_ahead_.empty()) return;
    // A row whose read-ahead lands after ReleaseReadAhead stays pinned, so let
    // ours land first.
    store_.WaitForReadAheads();
    store_.ReleaseReadAhead(0, pending_read_ahead_);
    Inc(obs_.releases);
    pending_read_ahead_.clear();
  }

  // Read-ahead of rows that some thread (usually another) gathers next
  // without waiting for it: the gather may run before, during or after the
  // read-ahead lands, and none of these orders may leave a pin behind.
  void DoRacingReadAhead() {
    std::vector<uint64_t> ids = ReadAheadRandomRows(64);
    if (ids.empty()) return;
    Inc(obs_.racing_read_aheads);
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
    GatherResult rb = tb.Wait();
    GatherResult ra = ta.Wait();
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

  Store& store_;
  const StressConfig& config_;
  const uint64_t data_seed_;
  Observations& obs_;
  std::mt19937_64 rng_;
  const uint64_t rows_;
  const uint32_t record_;
  std::vector<std::byte> expected_;
  std::vector<uint64_t> pending_read_ahead_;
};

}  // namespace engram::stress
