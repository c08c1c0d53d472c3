// small_gather_latency: a 24-row all-miss gather through the public Store API
// against the raw I/O engine's batch of 24 reads of the same kind, in one
// process, the two sides alternating pass by pass, so a device whose latency
// drifts by tens of percent from minute to minute (this VM's virtio disk)
// moves both alike. engram-bench miss measures the two one after the other.
// Also prints the store's readiness split (cache and disk parts of the wait).
// An experiment, built with -DENGRAM_BUILD_EXPERIMENTS=ON; its figures are in
// docs/lab-notes/2026-12-03-fast-device-where-the-rest-goes-on-the-amd-host-measured.md.
//   cmake --build build --target small_gather_latency
//   build/small_gather_latency TABLE [ROWS] [PASSES]
// TABLE is a block table (engram-gen); each pass opens a fresh store (an
// empty cache) and reads blocks no pass has read before.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <vector>

#include "engram/store.h"
#include "storage/io/aligned_buffer.h"
#include "storage/io/io_engine.h"
#include "storage/table_file.h"

using namespace engram;
using Clock = std::chrono::steady_clock;

namespace {

double P50Micros(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2] / 1000.0;
}

uint64_t Nanos(Clock::time_point a, Clock::time_point b) {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TABLE [ROWS] [PASSES]\n", argv[0]);
    return 2;
  }
  const char* path = argv[1];
  const size_t n = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 24;
  const int passes = argc > 3 ? std::atoi(argv[3]) : 6;
  constexpr int kGathersPerPass = 400;

  auto table = TableFile::Open(path);
  if (!table.ok()) {
    std::fprintf(stderr, "%s\n", table.status().ToString().c_str());
    return 2;
  }
  const TableGeometry& g = (*table)->geometry();
  const uint32_t record = (*table)->record_bytes();
  const uint64_t blocks = g.block_count();
  if (blocks < uint64_t(passes) * kGathersPerPass * n * 2) {
    std::fprintf(stderr, "table too small for %d passes of %d gathers of %zu rows\n", passes, kGathersPerPass, n);
    return 2;
  }

  // One shuffled order of the data blocks: every block is read once, by one side.
  std::mt19937_64 rng(7);
  std::vector<uint64_t> order(blocks);
  for (uint64_t b = 0; b < blocks; ++b) order[b] = b;
  std::shuffle(order.begin(), order.end(), rng);
  size_t next = 0;

  io::IoOptions io;
  io.backend = io::IoBackend::kIoUring;
  io.queue_depth = 128;
  auto engine = io::CreateIoEngine(io).value();
  const io::FileId file = engine->OpenFile(path).value();
  auto arena = io::AlignedBuffer::Allocate(n * io::kBlockSize).value();
  (void)engine->RegisterBuffer(arena.span());

  std::vector<uint64_t> store_ns, cache_ns, disk_ns, raw_ns;
  std::vector<std::byte> dst(n * record);
  std::vector<io::BlockRead> reads(n);
  std::mutex mu;
  std::condition_variable cv;
  for (int pass = 0; pass < passes; ++pass) {
    {
      StoreOptions o;
      TableOptions t;
      t.path = path;
      o.tables = {t};
      o.cache_bytes = uint64_t{64} << 20;
      o.io_backend = "io_uring";
      o.queue_depth = 128;
      auto store = Store::Open(o).value();
      store->WaitForCacheMemory();
      std::vector<uint64_t> ids(n);
      for (int k = 0; k < kGathersPerPass; ++k) {
        for (size_t i = 0; i < n; ++i) ids[i] = g.FirstRowOfBlock(order[next++]);
        const auto t0 = Clock::now();
        GatherResult r = store->Gather(0, ids, dst.data(), record);
        const auto t1 = Clock::now();
        if (!r.status.ok() || r.misses != n) {
          std::fprintf(stderr, "gather: %s, %lu misses\n", r.status.ToString().c_str(), (unsigned long)r.misses);
          return 1;
        }
        store_ns.push_back(Nanos(t0, t1));
        cache_ns.push_back(r.cache_nanoseconds);
        disk_ns.push_back(r.disk_nanoseconds);
      }
    }
    for (int k = 0; k < kGathersPerPass; ++k) {
      for (size_t i = 0; i < n; ++i) {
        reads[i] = io::BlockRead{file, g.BlockOffset(order[next++]), uint32_t(io::kBlockSize),
                                 arena.data() + i * io::kBlockSize, Status()};
      }
      bool done = false;
      const auto t0 = Clock::now();
      engine->SubmitBatch(reads, [&] {
        std::lock_guard lock(mu);
        done = true;
        cv.notify_all();
      });
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return done; });
      raw_ns.push_back(Nanos(t0, Clock::now()));
    }
  }
  engine->Shutdown();
  const double store = P50Micros(store_ns), raw = P50Micros(raw_ns);
  std::printf("rows=%zu gathers=%zu store_p50_us=%.1f cache_p50_us=%.1f disk_p50_us=%.1f raw_batch_p50_us=%.1f ratio=%.2f\n",
              n, store_ns.size(), store, P50Micros(cache_ns), P50Micros(disk_ns), raw, store / raw);
}
