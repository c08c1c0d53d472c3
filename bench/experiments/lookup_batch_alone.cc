// lookup_batch_alone: RowCache::LookupBatch with no store around it (no
// gather plan, ticket or counters) against a flat memcpy gather, in
// engram-bench hit's default geometry (a 66 MiB `default` cache holding
// 65,536 rows of a 2 M-row table; the flat array is the whole table). An
// experiment, built with -DENGRAM_BUILD_EXPERIMENTS=ON; its figures are in
// docs/lab-notes/2026-12-02-fast-device-the-hit-path-s-ceiling-measured.md.
//   cmake --build build --target lookup_batch_alone && build/lookup_batch_alone
#include <sys/mman.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "src/cache/row_cache.h"
using namespace engram;
int main() {
  constexpr uint64_t kRec = 264, kTableRows = 2000000, kResident = 65536;
  auto cache = RowCache::Create(RowCacheConfig::FromSpec("default").value(), uint64_t{66} << 20, kRec).value();
  void* fp = mmap(nullptr, kTableRows * kRec, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  madvise(fp, kTableRows * kRec, MADV_HUGEPAGE);
  uint8_t* flat = static_cast<uint8_t*>(fp);
  std::mt19937_64 rng(1);
  std::vector<uint64_t> all(kTableRows);
  for (uint64_t i = 0; i < kTableRows; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<uint64_t> ids(all.begin(), all.begin() + kResident), kept;
  std::vector<std::byte> row(kRec);
  for (int pass = 0; pass < 3; ++pass)
    for (uint64_t id : ids) {
      for (uint64_t b = 0; b < kRec; ++b) row[b] = std::byte(id * 31 + b);
      std::memcpy(flat + id * kRec, row.data(), kRec);
      if (!cache->Lookup(id, {})) cache->Insert(id, row);
    }
  for (uint64_t id : ids) if (cache->Lookup(id, {})) kept.push_back(id);
  ids = kept;
  std::shuffle(ids.begin(), ids.end(), rng);
  std::printf("resident %zu\n", ids.size());
  using Clock = std::chrono::steady_clock;
  for (size_t n : {size_t(24), size_t(4096)}) {
    std::vector<std::byte> dst(n * kRec);
    std::vector<std::byte*> dsts(n);
    for (size_t i = 0; i < n; ++i) dsts[i] = dst.data() + i * kRec;
    std::vector<uint8_t> hit(n);
    const size_t windows = ids.size() / n;
    auto run = [&](auto&& g, double secs) {
      size_t w = 0, rows = 0;
      const auto t0 = Clock::now();
      while (true) {
        for (int k = 0; k < 16; ++k, ++w) rows += g(ids.data() + (w % windows) * n);
        asm volatile("" : : "r"(dst.data()) : "memory");
        if (Clock::now() - t0 >= std::chrono::duration<double>(secs)) break;
      }
      return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(rows);
    };
    auto mem = [&](const uint64_t* r) { for (size_t i = 0; i < n; ++i) std::memcpy(dsts[i], flat + r[i] * kRec, kRec); return n; };
    auto batch = [&](const uint64_t* r) { return cache->LookupBatch({r, n}, dsts, PinAction::kKeep, hit); };
    for (int round = 0; round < 3; ++round) {
      double m = run(mem, 0.5), b = run(batch, 0.5);
      std::printf("N=%zu memcpy %.1f ns/row, LookupBatch %.1f (%.3f)\n", n, m, b, m / b);
    }
  }
}
