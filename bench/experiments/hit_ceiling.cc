// hit_ceiling: how close can ANY cache of the row cache's shape come to a flat
// memcpy gather? An experiment, built with -DENGRAM_BUILD_EXPERIMENTS=ON.
//
// It rebuilds, in ~200 lines and without statistics, pins, clock upkeep or a
// store around it, only what a hit of the `default` preset must touch:
//   - the row's 64-byte index line (5 keys; sets chosen by XXH3 % sets),
//   - its 264-byte payload in a slab beside the index,
//   - optionally one sketch line (two 8-bit counters bumped),
//   - optionally the way's 32-bit stamp, written in the index line,
//   - optionally the set's lock (an exchange on its first byte, and a release).
// The memory geometry is engram-bench hit's default: a 66 MiB budget split as
// the store splits it (index + slab, sketch two bytes per row of capacity), 65,536
// resident rows chosen from a 2 M-row table, and a flat array of the whole table
// (huge pages) as the memcpy baseline. Lookups are software-pipelined as
// LookupBatch was when this was written (index 8 rows ahead, payload 4
// ahead; LookupBatch now runs its stages over groups of rows, set_probe.h).
//
// Build and run (the figures are in
// docs/lab-notes/2026-12-02-fast-device-the-hit-path-s-ceiling-measured.md):
//   cmake --build build --target hit_ceiling && build/hit_ceiling
// or on its own, without the library:
//   g++ -O2 -std=c++20 -DXXH_INLINE_ALL bench/experiments/hit_ceiling.cc -o /tmp/hit_ceiling
// RESIDENT=500000 BUDGET_MIB=400 is a cache far larger than the CPU's caches
// (the hit path of a deployment, whose table is far larger still).
// -DEXTRA_HASHES=K adds K XXH3s of 8 bytes per row (no memory touched), to
// see what extra instructions per row cost when the lines are in flight.
// SECONDS_EACH=S runs one round of S seconds per variant (for callgrind;
// build without -march=native there, valgrind lacks AVX-512).
#include <sys/mman.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

constexpr uint64_t kRec = 264;
constexpr uint64_t kTableRows = 2'000'000;
constexpr uint32_t kWays = 5;
// RESIDENT=rows and BUDGET_MIB=MiB change the geometry (default: engram-bench
// hit's, 65,536 rows in 66 MiB).
uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}
const uint64_t kResident = EnvOr("RESIDENT", 65'536);
const uint64_t kBudget = EnvOr("BUDGET_MIB", 66) << 20;

void* MapHuge(uint64_t bytes, bool huge = true) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) std::abort();
  madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  return p;
}

struct Set {  // one 64-byte index line: 5 keys, 5 stamps, an occupied mask
  uint64_t keys[kWays];
  uint32_t stamps[kWays];
  uint8_t occupied;
  uint8_t pad[64 - kWays * 8 - kWays * 4 - 1];
};
static_assert(sizeof(Set) == 64);

struct Cache {
  uint64_t sets;
  Set* index;
  uint8_t* slab;
  uint8_t* sketch;
  uint64_t sketch_blocks;

  uint64_t Hash(uint64_t id) const { return XXH3_64bits_withSeed(&id, sizeof(id), 7); }
  uint8_t* Payload(uint64_t set, uint32_t way) const { return slab + (set * kWays + way) * kRec; }
  uint64_t Second(uint64_t h, uint64_t first) const {
    uint64_t x = h ^ 0x9e3779b97f4a7c15ULL;
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33;
    uint64_t s = first + 1 + x % (sets - 1);
    return s >= sets ? s - sets : s;
  }
  bool Insert(uint64_t id, const uint8_t* row) {
    const uint64_t h = Hash(id);
    for (uint64_t set : {h % sets, Second(h, h % sets)}) {
      Set& s = index[set];
      for (uint32_t w = 0; w < kWays; ++w) {
        if (!(s.occupied >> w & 1)) {
          s.keys[w] = id;
          s.occupied |= 1u << w;
          std::memcpy(Payload(set, w), row, kRec);
          return true;
        }
      }
    }
    return false;
  }
};

// The row size as the store has it: a run-time value, so the copy is the C
// library's memcpy call, as in the store and in the memcpy baseline.
volatile size_t g_row_bytes = kRec;

#ifndef EXTRA_HASHES
#define EXTRA_HASHES 0
#endif

template <bool kSketch, bool kStamp, bool kLock = false>
size_t Gather(const Cache& c, const uint64_t* ids, size_t n, uint8_t* dst, uint32_t now) {
  const size_t rec = g_row_bytes;
  constexpr size_t kRing = 16, kIndexAhead = 8, kPayloadAhead = 4;
  uint64_t hashes[kRing], sets[kRing];
  int ways[kRing];
  auto prepare = [&](size_t j) {
    const uint64_t h = c.Hash(ids[j]);
    hashes[j % kRing] = h;
    sets[j % kRing] = h % c.sets;
    __builtin_prefetch(&c.index[sets[j % kRing]], 0, 3);
    if constexpr (kSketch) __builtin_prefetch(c.sketch + ((h >> 20) % c.sketch_blocks) * 64, 1, 3);
  };
  auto find = [&](size_t j) {
    uint64_t set = sets[j % kRing];
    const Set* s = &c.index[set];
    int way = -1;
    for (uint32_t w = 0; w < kWays; ++w) way = (s->occupied >> w & 1) && s->keys[w] == ids[j] ? int(w) : way;
    if (way < 0) {  // the second candidate set, at once (rare)
      set = c.Second(hashes[j % kRing], set);
      s = &c.index[set];
      for (uint32_t w = 0; w < kWays; ++w) way = (s->occupied >> w & 1) && s->keys[w] == ids[j] ? int(w) : way;
      sets[j % kRing] = set;
    }
    ways[j % kRing] = way;
    if (way >= 0) {
      const uintptr_t p = reinterpret_cast<uintptr_t>(c.Payload(set, uint32_t(way)));
      for (uintptr_t l = p & ~uintptr_t{63}; l < p + kRec; l += 64) __builtin_prefetch(reinterpret_cast<void*>(l), 0, 3);
    }
  };
  for (size_t j = 0; j < std::min(n, kIndexAhead); ++j) prepare(j);
  for (size_t j = 0; j < std::min(n, kPayloadAhead); ++j) find(j);
  size_t hits = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i + kIndexAhead < n) prepare(i + kIndexAhead);
    if (i + kPayloadAhead < n) find(i + kPayloadAhead);
    const int way = ways[i % kRing];
    if (way < 0) continue;
    const uint64_t set = sets[i % kRing];
    if constexpr (kLock) {
      while (__atomic_exchange_n(&c.index[set].pad[0], uint8_t{1}, __ATOMIC_ACQUIRE)) {
      }
    }
    std::memcpy(dst + i * rec, c.Payload(set, uint32_t(way)), rec);
    if constexpr (kStamp) c.index[set].stamps[way] = now;
    if constexpr (kSketch) {
      const uint64_t h = hashes[i % kRing];
      uint8_t* block = c.sketch + ((h >> 20) % c.sketch_blocks) * 64;
      uint8_t& a = block[h & 63];
      uint8_t& b = block[(h >> 6) & 63];
      const uint8_t m = std::min(a, b);
      if (m < 255) { a = std::max<uint8_t>(a, m + 1); b = std::max<uint8_t>(b, m + 1); }
    }
    if constexpr (kLock) __atomic_store_n(&c.index[set].pad[0], uint8_t{0}, __ATOMIC_RELEASE);
    if constexpr (EXTRA_HASHES > 0) {
      // Stand-in work with no memory access: EXTRA_HASHES more XXH3s of 8
      // bytes (~22 instructions each), to price instructions per row.
      uint64_t acc = 0;
      for (int k = 0; k < EXTRA_HASHES; ++k) {
        const uint64_t v = ids[i] + uint64_t(k);
        acc += XXH3_64bits_withSeed(&v, sizeof(v), hashes[i % kRing]);
      }
      asm volatile("" : "+r"(acc));
    }
    ++hits;
  }
  return hits;
}

}  // namespace

int main() {
  // The store's split of a budget: per row 264 B of payload, 64/5 B of index,
  // ~2 B of sketch.
  const uint64_t capacity = kBudget / (kRec + 64 / kWays + 2);
  Cache c;
  c.sets = capacity / kWays;
  c.index = static_cast<Set*>(MapHuge(c.sets * 64));
  c.slab = static_cast<uint8_t*>(MapHuge(c.sets * kWays * kRec));
  // The default preset's sketch: depth 2 of 8-bit counters, one per slot in
  // each row (2 bytes per row of capacity), in 64-byte blocks.
  c.sketch_blocks = std::max<uint64_t>(1, capacity * 2 / 64);
  c.sketch = static_cast<uint8_t*>(MapHuge(c.sketch_blocks * 64, std::getenv("SKETCH_SMALL_PAGES") == nullptr));
  std::memset(c.index, 0, c.sets * 64);
  std::memset(c.sketch, 0, c.sketch_blocks * 64);
  uint8_t* flat = static_cast<uint8_t*>(MapHuge(kTableRows * kRec));

  std::mt19937_64 rng(1);
  std::vector<uint64_t> ids;
  {
    std::vector<uint64_t> all(kTableRows);
    for (uint64_t i = 0; i < kTableRows; ++i) all[i] = i;
    std::shuffle(all.begin(), all.end(), rng);
    ids.assign(all.begin(), all.begin() + kResident);
  }
  uint8_t row[kRec];
  std::vector<uint64_t> kept;
  for (size_t k = 0; k < ids.size(); ++k) {
    const uint64_t id = ids[k];
    for (uint64_t b = 0; b < kRec; ++b) row[b] = uint8_t(id * 31 + b);
    std::memcpy(flat + id * kRec, row, kRec);
    if (c.Insert(id, row)) kept.push_back(id);  // the store would relocate; here the row is left out
  }
  ids = kept;
  std::shuffle(ids.begin(), ids.end(), rng);

  using Clock = std::chrono::steady_clock;
  for (size_t n : {size_t(24), size_t(4096)}) {
    std::vector<uint8_t> dst(n * kRec);
    const size_t windows = ids.size() / n;
    auto run = [&](auto&& gather, double secs) {
      size_t w = 0, rows = 0;
      const auto t0 = Clock::now();
      const auto end = t0 + std::chrono::duration<double>(secs);
      while (true) {
        for (int k = 0; k < 16; ++k, ++w) rows += gather(ids.data() + (w % windows) * n);
        asm volatile("" : : "r"(dst.data()) : "memory");
        if (Clock::now() >= end) break;
      }
      return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(rows);
    };
    auto memcpy_g = [&](const uint64_t* r) {
      for (size_t i = 0; i < n; ++i) std::memcpy(dst.data() + i * kRec, flat + r[i] * kRec, kRec);
      return n;
    };
    uint32_t now = 1;
    auto bare = [&](const uint64_t* r) { return Gather<false, false>(c, r, n, dst.data(), now++); };
    auto sketch = [&](const uint64_t* r) { return Gather<true, false>(c, r, n, dst.data(), now++); };
    auto both = [&](const uint64_t* r) { return Gather<true, true>(c, r, n, dst.data(), now++); };
    auto locked = [&](const uint64_t* r) { return Gather<true, true, true>(c, r, n, dst.data(), now++); };
    const double secs = std::getenv("SECONDS_EACH") ? std::atof(std::getenv("SECONDS_EACH")) : 0.5;
    const int rounds = std::getenv("SECONDS_EACH") ? 1 : 5;
    for (int round = 0; round < rounds; ++round) {
      const double m = run(memcpy_g, secs), b = run(bare, secs), s = run(sketch, secs), t = run(both, secs),
                   l = run(locked, secs);
      std::printf("N=%zu memcpy %.1f ns/row | lookup+copy %.1f (%.3f) | +sketch %.1f (%.3f) | +sketch+stamp %.1f (%.3f)"
                  " | +lock %.1f (%.3f)\n", n, m, b, m / b, s, m / s, t, m / t, l, m / l);
    }
  }
  return 0;
}
