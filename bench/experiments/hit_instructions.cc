// hit_instructions: instructions per row of all-hit gathers through the
// public Store API, with a fixed number of gathers, so that callgrind's count
// does not depend on how fast the machine is (bench/gather_instructions.sh
// times two runs and subtracts them, which goes wrong while other work loads
// the machine). An experiment, built with -DENGRAM_BUILD_EXPERIMENTS=ON; its
// figures are in docs/lab-notes/2026-12-03-row-cache-peer-comparison-on-eight-texts-and-a-default-with-one.md.
//   cmake --build build --target hit_instructions
//   valgrind --tool=callgrind --toggle-collect='TimedHits*' build/hit_instructions TABLE 24 20000
// then instructions per row = callgrind's "refs" / (24 * 20000). TABLE is a
// block table (engram-gen); up to 65,536 of its rows are made resident first
// (the pread backend: valgrind does not emulate io_uring).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include "engram/store.h"
using namespace engram;
__attribute__((noinline)) uint64_t TimedHits(Store& s, const std::vector<uint64_t>& order, size_t n, int gathers, std::byte* dst) {
  uint64_t hits = 0;
  const size_t windows = order.size() / n;
  for (int g = 0; g < gathers; ++g) {
    std::span<const uint64_t> w(order.data() + (g % windows) * n, n);
    GatherResult r = s.Gather(0, w, dst, 264);
    hits += r.hits;
  }
  return hits;
}
int main(int argc, char** argv) {
  if (argc != 4 || atoi(argv[2]) <= 0 || atoi(argv[3]) <= 0) {
    std::fprintf(stderr, "usage: %s TABLE ROWS_PER_GATHER GATHERS\n", argv[0]);
    return 2;
  }
  const size_t n = atoi(argv[2]); const int gathers = atoi(argv[3]);
  StoreOptions o; TableOptions t; t.path = argv[1]; o.tables = {t}; o.cache_bytes = 70ull << 20;
  o.cache_policy = "default";
  o.io_backend = "pread"; o.queue_depth = 128; o.direct_io = true;
  auto store = Store::Open(o).value();
  store->WaitForCacheMemory();
  std::mt19937_64 rng(1);
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < 65536; ++i) ids.push_back(rng() % 2000000);
  std::sort(ids.begin(), ids.end()); ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<std::byte> buf(4096 * 264);
  for (int pass = 0; pass < 3; ++pass)
    for (size_t b = 0; b < ids.size(); b += 4096) {
      std::span<const uint64_t> c(ids.data() + b, std::min<size_t>(4096, ids.size() - b));
      store->Gather(0, c, buf.data(), 264);
    }
  std::vector<uint64_t> kept;
  for (size_t b = 0; b < ids.size(); b += 1) { GatherResult r = store->Gather(0, std::span<const uint64_t>(&ids[b], 1), buf.data(), 264); if (r.hits == 1) kept.push_back(ids[b]); }
  std::shuffle(kept.begin(), kept.end(), rng);
  uint64_t h = TimedHits(*store, kept, n, gathers, buf.data());
  std::printf("resident=%zu hits=%lu of %lu\n", kept.size(), h, uint64_t(n) * gathers);
}
