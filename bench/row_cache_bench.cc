// RowCache hot-path benchmarks.
//
//   BM_HitLookup/<preset>      Lookup() of resident rows in random order,
//                              copying each 264-B row out; items/s per thread.
//   BM_GatherVsFlat/<preset>   A gather of 4,096 cached rows into a
//                              destination buffer, timed next to the same
//                              gather from a flat in-memory array (the
//                              ceiling: no hashing, no locks). The counter
//                              cache_vs_flat = cache rate / flat rate
//                              (both in thread CPU time).
//   BM_MissInsert/<preset>     The miss path under pressure: Lookup(), and
//                              Insert() on a miss, of rows drawn uniformly
//                              from a pool 4x the capacity, on a full cache
//                              (~75 % misses for any policy; every insert
//                              evicts or is refused: admission rule, victim
//                              choice and, for "default", the ghost
//                              history); accesses/s per thread. The stream
//                              never repeats within a run (a shared cursor
//                              moves on), so repetitions do not re-read
//                              what the previous one inserted.
//   BM_InsertBatch/<preset>    A gather's misses inserted on the same full
//                              cache: 4,096 stream rows looked up, their
//                              misses inserted one Insert() at a time or by
//                              one InsertBatch(), alternating gathers. The
//                              counter batch_vs_loop = loop time / batch
//                              time (thread CPU time) per inserted row.
//
// Each cache gets a 256 MiB budget of 264-byte rows and is filled to ~60 % of
// its slots with rows that were admitted, so every lookup is a hit. All
// figures are relative within one run: compare presets and the flat ceiling,
// not absolute numbers across machines.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "src/cache/row_cache.h"

namespace engram {
namespace {

constexpr uint32_t kRowBytes = 264;
constexpr uint64_t kBudget = uint64_t{256} << 20;
constexpr size_t kGatherRows = 4096;

struct Fixture {
  std::unique_ptr<RowCache> cache;
  std::vector<uint64_t> resident;  // row IDs known to be cached
};

const char* const kPresets[] = {"legacy", "ways8", "two-choice", "default", "default,admission=gt"};

// One fixture of type F per preset, built on first use (benchmarks of one
// preset share it): a fresh cache of kBudget bytes, then fill(f).
template <typename F>
F& SharedFixture(int preset_index, void (*fill)(F&)) {
  static std::mutex mu;
  static std::map<int, F> fixtures;
  std::lock_guard<std::mutex> lock(mu);
  F& f = fixtures[preset_index];
  if (f.cache) return f;
  auto cache = RowCache::Create(RowCacheConfig::FromSpec(kPresets[preset_index]).value(), kBudget, kRowBytes);
  if (!cache.ok()) {
    fprintf(stderr, "%s\n", cache.status().ToString().c_str());
    std::abort();
  }
  f.cache = std::move(cache).value();
  fill(f);
  return f;
}

void FillResident(Fixture& f) {
  std::vector<std::byte> row(kRowBytes, std::byte{0x5a});
  const uint64_t target = f.cache->capacity_rows() * 6 / 10;
  std::mt19937_64 rng(42);
  for (uint64_t i = 0; i < target; ++i) {
    uint64_t id = rng() >> 24;  // sparse 40-bit row IDs
    std::memcpy(row.data(), &id, sizeof(id));
    f.cache->Lookup(id, {});
    InsertOutcome o = f.cache->Insert(id, row);
    if (o == InsertOutcome::kInserted || o == InsertOutcome::kInsertedEvicted) f.resident.push_back(id);
  }
  // Keep only rows still resident (later inserts may have evicted earlier ones).
  std::vector<uint64_t> still;
  std::vector<std::byte> buf(kRowBytes);
  for (uint64_t id : f.resident) {
    if (f.cache->Lookup(id, buf)) still.push_back(id);
  }
  f.resident.swap(still);
  std::shuffle(f.resident.begin(), f.resident.end(), rng);
}

Fixture& FixtureFor(int preset_index) { return SharedFixture<Fixture>(preset_index, &FillResident); }

void BM_HitLookup(benchmark::State& state) {
  Fixture& f = FixtureFor(int(state.range(0)));
  state.SetLabel(kPresets[state.range(0)]);
  std::vector<std::byte> buf(kRowBytes);
  const size_t n = f.resident.size();
  size_t i = (n / 7) * size_t(state.thread_index());  // threads start apart
  uint64_t misses = 0;
  for (auto _ : state) {
    misses += !f.cache->Lookup(f.resident[i], buf);
    benchmark::DoNotOptimize(buf.data());
    if (++i == n) i = 0;
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
  state.counters["misses"] = double(misses);
}

// Thread CPU time, not wall time: the two halves are compared on a shared,
// often oversubscribed host, where wall time mostly measures preemption.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

void BM_GatherVsFlat(benchmark::State& state) {
  Fixture& f = FixtureFor(int(state.range(0)));
  state.SetLabel(kPresets[state.range(0)]);
  // The ceiling: the same rows, densely packed, addressed by position.
  const size_t n = f.resident.size();
  std::vector<std::byte> flat(n * kRowBytes, std::byte{0x5a});
  std::vector<std::byte> dst(kGatherRows * kRowBytes);
  std::mt19937_64 rng(7);
  std::vector<uint32_t> positions(kGatherRows);
  std::vector<uint64_t> ids(kGatherRows);
  std::vector<std::byte*> dsts(kGatherRows);
  for (size_t k = 0; k < kGatherRows; ++k) dsts[k] = dst.data() + k * kRowBytes;
  std::vector<uint8_t> hit(kGatherRows);
  double cache_seconds = 0, batch_seconds = 0, flat_seconds = 0;
  uint64_t misses = 0;
  for (auto _ : state) {
    for (size_t k = 0; k < kGatherRows; ++k) {
      positions[k] = uint32_t(rng() % n);
      ids[k] = f.resident[positions[k]];
    }
    // Three gathers of the same rows, each starting cold in the CPU caches
    // (the rows are far beyond L3): one Lookup per row, the pipelined
    // LookupBatch, and the flat array.
    double t0 = ThreadCpuSeconds();
    for (size_t k = 0; k < kGatherRows; ++k) {
      misses += !f.cache->Lookup(ids[k], {dsts[k], kRowBytes});
    }
    double t1 = ThreadCpuSeconds();
    for (auto& p : positions) p = uint32_t(rng() % n);
    for (size_t k = 0; k < kGatherRows; ++k) ids[k] = f.resident[positions[k]];
    double t2 = ThreadCpuSeconds();
    misses += kGatherRows - f.cache->LookupBatch(ids, dsts, PinAction::kConsume, hit);
    double t3 = ThreadCpuSeconds();
    for (size_t k = 0; k < kGatherRows; ++k) {
      std::memcpy(dst.data() + k * kRowBytes, flat.data() + size_t(positions[k]) * kRowBytes, kRowBytes);
    }
    benchmark::DoNotOptimize(dst.data());
    double t4 = ThreadCpuSeconds();
    cache_seconds += t1 - t0;
    batch_seconds += t3 - t2;
    flat_seconds += t4 - t3;
  }
  const double rows = double(state.iterations()) * kGatherRows;
  state.counters["cache_rows_per_s"] = rows / cache_seconds;
  state.counters["batch_rows_per_s"] = rows / batch_seconds;
  state.counters["flat_rows_per_s"] = rows / flat_seconds;
  state.counters["cache_vs_flat"] = flat_seconds / cache_seconds;
  state.counters["batch_vs_flat"] = flat_seconds / batch_seconds;
  state.counters["misses"] = double(misses);
}

// A full cache per preset, its rows drawn from a pool 4x the capacity.
struct ChurnFixture {
  std::unique_ptr<RowCache> cache;
  std::vector<uint64_t> stream;  // row IDs in access order, cycled
  std::atomic<size_t> cursor{0};
};

void FillChurn(ChurnFixture& f) {
  const uint64_t pool = f.cache->capacity_rows() * 4;
  std::mt19937_64 rng(43);
  f.stream.resize(pool * 16);
  for (auto& id : f.stream) id = 1 + rng() % pool;
  std::vector<std::byte> row(kRowBytes, std::byte{0x5a});
  for (size_t k = 0; k < pool; ++k) {  // warm-up: the cache is full and the history warm
    if (!f.cache->Lookup(f.stream[k], {})) f.cache->Insert(f.stream[k], row);
  }
  f.cursor = pool;
}

ChurnFixture& ChurnFixtureFor(int preset_index) { return SharedFixture<ChurnFixture>(preset_index, &FillChurn); }

void BM_MissInsert(benchmark::State& state) {
  ChurnFixture& f = ChurnFixtureFor(int(state.range(0)));
  state.SetLabel(kPresets[state.range(0)]);
  std::vector<std::byte> buf(kRowBytes), row(kRowBytes, std::byte{0x5a});
  const size_t n = f.stream.size();
  constexpr size_t kChunk = 4096;  // stream positions claimed per cursor bump
  size_t i = 0, end = 0;
  uint64_t misses = 0;
  for (auto _ : state) {
    if (i == end) {
      i = f.cursor.fetch_add(kChunk) % n;
      end = std::min(n, i + kChunk);
    }
    const uint64_t id = f.stream[i++];
    if (!f.cache->Lookup(id, buf)) {
      ++misses;
      f.cache->Insert(id, row);
    }
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
  const RowCacheStats st = f.cache->Stats();
  state.counters["empty_slots"] = benchmark::Counter(double(st.capacity_rows - st.resident_rows),
                                                     benchmark::Counter::kAvgThreads);
  state.counters["miss_ratio"] = benchmark::Counter(
      double(misses) / double(std::max<int64_t>(1, state.iterations())), benchmark::Counter::kAvgThreads);
}

void BM_InsertBatch(benchmark::State& state) {
  ChurnFixture& f = ChurnFixtureFor(int(state.range(0)));
  state.SetLabel(kPresets[state.range(0)]);
  std::vector<std::byte> row(kRowBytes, std::byte{0x5a});
  std::vector<uint64_t> misses;
  std::vector<const std::byte*> rows;
  std::vector<InsertOutcome> outcomes;
  const size_t n = f.stream.size();
  double loop_seconds = 0, batch_seconds = 0;
  uint64_t loop_rows = 0, batch_rows = 0;
  bool batch = false;
  for (auto _ : state) {
    const size_t first = f.cursor.fetch_add(kGatherRows) % n;
    misses.clear();
    for (size_t i = first; i < std::min(n, first + kGatherRows); ++i) {
      if (!f.cache->Lookup(f.stream[i], {})) misses.push_back(f.stream[i]);
    }
    rows.assign(misses.size(), row.data());
    outcomes.resize(misses.size());
    const double t0 = ThreadCpuSeconds();
    if (batch) {
      f.cache->InsertBatch(misses, rows, outcomes);
    } else {
      for (size_t m = 0; m < misses.size(); ++m) outcomes[m] = f.cache->Insert(misses[m], row);
    }
    const double t = ThreadCpuSeconds() - t0;
    (batch ? batch_seconds : loop_seconds) += t;
    (batch ? batch_rows : loop_rows) += misses.size();
    batch = !batch;
  }
  if (loop_rows && batch_rows && batch_seconds > 0) {
    state.counters["loop_ns_per_row"] = loop_seconds * 1e9 / double(loop_rows);
    state.counters["batch_ns_per_row"] = batch_seconds * 1e9 / double(batch_rows);
    state.counters["batch_vs_loop"] = (loop_seconds / double(loop_rows)) / (batch_seconds / double(batch_rows));
  }
}

// The lookup's own CPU cost: gathers through LookupBatch of 4,096 rows held
// by a 4 MiB cache, so the rows, index and sketch stay in the CPU caches and
// what is left is instructions, not memory (BM_GatherVsFlat measures the
// memory-bound case). Run it under callgrind for instructions per row.
void BM_CachedRowGather(benchmark::State& state) {
  const size_t gather = size_t(state.range(0));
  constexpr size_t kRows = 4096;  // a power of two: the cursor wraps with a mask
  auto cache = RowCache::Create(RowCacheConfig::FromSpec("default").value(), uint64_t{4} << 20, kRowBytes).value();
  std::vector<std::byte> row(kRowBytes, std::byte{0x5a});
  std::vector<uint64_t> resident;
  std::mt19937_64 rng(42);
  while (resident.size() < kRows) {
    const uint64_t id = rng() >> 24;
    cache->Lookup(id, {});
    const InsertOutcome o = cache->Insert(id, row);
    if (o == InsertOutcome::kInserted || o == InsertOutcome::kInsertedEvicted) resident.push_back(id);
  }
  std::vector<std::byte> dst(gather * kRowBytes);
  std::vector<std::byte*> dsts(gather);
  for (size_t k = 0; k < gather; ++k) dsts[k] = dst.data() + k * kRowBytes;
  std::vector<uint64_t> ids(gather);
  std::vector<uint8_t> hit(gather);
  size_t cursor = 0;
  uint64_t hits = 0;
  for (auto _ : state) {
    for (size_t k = 0; k < gather; ++k) {
      ids[k] = resident[cursor];
      cursor = (cursor + 1) & (kRows - 1);
    }
    hits += cache->LookupBatch(ids, dsts, PinAction::kConsume, hit);
    benchmark::DoNotOptimize(dst.data());
  }
  const double rows = double(state.iterations()) * double(gather);
  state.SetItemsProcessed(int64_t(rows));
  state.counters["hit_fraction"] = double(hits) / rows;  // 1 unless a warm-up insert was later evicted
}

BENCHMARK(BM_HitLookup)->DenseRange(0, 4)->Threads(1)->Threads(2);
BENCHMARK(BM_InsertBatch)->DenseRange(0, 4)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MissInsert)->DenseRange(0, 4)->Threads(1)->Threads(2);
BENCHMARK(BM_GatherVsFlat)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CachedRowGather)->Arg(24)->Arg(4096);

}  // namespace
}  // namespace engram

BENCHMARK_MAIN();
