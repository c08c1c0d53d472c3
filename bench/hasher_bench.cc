// NgramHasher vs a plain loop over the same arithmetic, in the same run.
//
// The plain loop is the straightforward transcription of the reference:
// for every (position, order, head) it recomputes the n-gram mix and takes
// int64 % prime with a floor correction (a hardware 64-bit division).
// NgramHasher computes each order's mix once for all heads (incrementally
// across orders) and replaces the division with a precomputed exact
// multiply-shift (src/ngram/floor_mod.h). Both are checked equal before
// timing. Compare items_per_second (tokens/s) of the pairs.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

#include "engram/hasher.h"

namespace {

const std::string kDir = std::string(ENGRAM_FIXTURE_DIR);

std::vector<uint32_t> ReadU32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<uint32_t> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

struct Fixture {
  engram::EngramHashLayout layout;
  std::shared_ptr<const engram::TokenMap> map;
  std::vector<uint32_t> tokens;  // 20,000 tokens of real documentation text
};

const Fixture& Get() {
  static Fixture* f = [] {
    auto* fx = new Fixture;
    fx->layout = *engram::EngramHashLayout::FromFile(kDir + "/engram-hash/layout-v41.json", 0);
    fx->map = std::make_shared<engram::TokenMap>(*engram::TokenMap::FromFile(kDir + "/engram-hash/token-map.u32"));
    fx->tokens = ReadU32(kDir + "/traces/deepspeed/req1.u32");
    return fx;
  }();
  return *f;
}

// The straightforward loop.
void PlainHash(const engram::EngramHashLayout& layout, const engram::TokenMap* map, const std::vector<uint32_t>& raw,
               std::vector<uint64_t>& out) {
  const size_t T = raw.size();
  out.resize(T * layout.rows_per_token());
  size_t o = 0;
  for (size_t t = 0; t < T; ++t) {
    for (size_t oi = 0; oi < layout.orders.size(); ++oi) {
      for (uint32_t h = 0; h < layout.heads; ++h) {
        uint64_t mix = 0;
        for (uint32_t k = 0; k < layout.orders[oi]; ++k) {
          uint64_t tok = t >= k ? (map ? map->ids()[raw[t - k]] : raw[t - k]) : layout.pad_id;
          mix ^= tok * static_cast<uint64_t>(layout.multipliers[k]);
        }
        const int64_t p = static_cast<int64_t>(layout.primes[oi][h]);
        int64_t r = static_cast<int64_t>(mix) % p;
        if (r < 0) r += p;
        out[o++] = static_cast<uint64_t>(r) + layout.offsets[oi][h];
      }
    }
  }
}

// The middle step, to attribute the gain: mixes shared across heads and
// orders as in NgramHasher, but still the hardware int64 %.
void SharedMixHash(const engram::EngramHashLayout& layout, const engram::TokenMap* map,
                   const std::vector<uint32_t>& raw, std::vector<uint64_t>& out) {
  const size_t T = raw.size();
  out.resize(T * layout.rows_per_token());
  size_t o = 0;
  for (size_t t = 0; t < T; ++t) {
    uint64_t mix = 0;
    uint32_t k = 0;
    for (size_t oi = 0; oi < layout.orders.size(); ++oi) {
      for (; k < layout.orders[oi]; ++k) {
        uint64_t tok = t >= k ? (map ? map->ids()[raw[t - k]] : raw[t - k]) : layout.pad_id;
        mix ^= tok * static_cast<uint64_t>(layout.multipliers[k]);
      }
      for (uint32_t h = 0; h < layout.heads; ++h) {
        const int64_t p = static_cast<int64_t>(layout.primes[oi][h]);
        int64_t r = static_cast<int64_t>(mix) % p;
        if (r < 0) r += p;
        out[o++] = static_cast<uint64_t>(r) + layout.offsets[oi][h];
      }
    }
  }
}

void CheckEqual(bool mapped) {
  const Fixture& f = Get();
  auto hasher = *engram::NgramHasher::Create(f.layout, mapped ? f.map : nullptr);
  std::vector<uint64_t> plain;
  PlainHash(f.layout, mapped ? f.map.get() : nullptr, f.tokens, plain);
  std::vector<uint64_t> shared;
  SharedMixHash(f.layout, mapped ? f.map.get() : nullptr, f.tokens, shared);
  if (*hasher.Hash(f.tokens) != plain || shared != plain) {
    std::fprintf(stderr, "hasher_bench: NgramHasher and the plain loop disagree (%s)\n", mapped ? "mapped" : "identity");
    std::abort();
  }
}

void BM_PlainLoop(benchmark::State& state) {
  const bool mapped = state.range(0);
  CheckEqual(mapped);
  const Fixture& f = Get();
  std::vector<uint64_t> out;
  for (auto _ : state) {
    PlainHash(f.layout, mapped ? f.map.get() : nullptr, f.tokens, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * f.tokens.size());
  state.SetLabel(mapped ? "mapped" : "identity");
}

void BM_SharedMixHardwareMod(benchmark::State& state) {
  const bool mapped = state.range(0);
  CheckEqual(mapped);
  const Fixture& f = Get();
  std::vector<uint64_t> out;
  for (auto _ : state) {
    SharedMixHash(f.layout, mapped ? f.map.get() : nullptr, f.tokens, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * f.tokens.size());
  state.SetLabel(mapped ? "mapped" : "identity");
}

void BM_NgramHasher(benchmark::State& state) {
  const bool mapped = state.range(0);
  CheckEqual(mapped);
  const Fixture& f = Get();
  auto hasher = *engram::NgramHasher::Create(f.layout, mapped ? f.map : nullptr);
  std::vector<uint64_t> out(f.tokens.size() * hasher.rows_per_token());
  for (auto _ : state) {
    benchmark::DoNotOptimize(hasher.Hash({}, f.tokens, out).ok());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * f.tokens.size());
  state.SetLabel(mapped ? "mapped" : "identity");
}

BENCHMARK(BM_PlainLoop)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SharedMixHardwareMod)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NgramHasher)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
