#include "bench/step_benchmark.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <thread>

#include <nlohmann/json.hpp>

#include "engram/engram.h"
#include "engram/hasher.h"
#include "engram/step_ring.h"
#include "engram/step_stager.h"
#include "engram/store.h"
#include "src/ngram/scaled_layout.h"
#include "src/tablegen/table_generator.h"

namespace engram::bench {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The two layers' tables with their scaled layouts embedded, generated once
// per (dir, rows) and kept.
Result<std::vector<std::string>> EnsureTables(const StepBenchConfig& c, const StepProgressLog& log) {
  const std::string dir = c.dir + "/scaled-" + std::to_string(c.rows_per_table);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError("step: cannot create '" + dir + "': " + ec.message());
  std::vector<std::string> paths;
  for (uint32_t layer : {0u, 1u}) {
    ENGRAM_ASSIGN_OR_RETURN(EngramHashLayout full, EngramHashLayout::FromFile(c.layout_path, layer));
    ENGRAM_ASSIGN_OR_RETURN(EngramHashLayout scaled, ScaleLayout(full, c.rows_per_table));
    const std::string path = dir + "/layer" + std::to_string(layer) + ".engram";
    paths.push_back(path);
    if (std::filesystem::exists(path)) continue;
    if (log) log("step: generating " + path + " (" + std::to_string(scaled.total_rows) + " rows)");
    GenerateTableOptions g;
    g.rows = scaled.total_rows;
    g.seed = 11 + layer;
    g.sync = false;
    g.metadata["hash_layout"] = nlohmann::json::parse(scaled.ToJson());
    ENGRAM_RETURN_IF_ERROR(GenerateTable(path, g));
  }
  return paths;
}

// Whether the tables' filesystem takes O_DIRECT (tmpfs does on Linux >= 6.6):
// then misses bypass the page cache, as in production.
bool AcceptsDirectIo(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

struct Step {
  std::span<const uint32_t> history, tokens;
  // Per layer, the step's row IDs [token][slot] (flat gathers), and all of
  // them [token][layer][slot] (the modes given IDs).
  std::vector<std::vector<uint64_t>> layer_ids;
  std::vector<uint64_t> step_ids;
};

// What one mode did over a run of steps.
struct Tally {
  uint64_t rows = 0, distinct = 0, hits = 0, misses = 0;
  Status failed;
  void Add(const GatherResult& r) {
    rows += r.rows;
    distinct += r.distinct_rows;
    hits += r.hits;
    misses += r.misses;
    if (failed.ok() && !r.status.ok()) failed = r.status;
  }  // A step through the C API: its status and its result's counts.
  void AddC(engram_status status, const engram_stage_result& r) {
    rows += r.rows;
    distinct += r.distinct_rows;
    hits += r.hits;
    misses += r.misses;
    if (failed.ok() && status != ENGRAM_OK) failed = Status::Internal(std::string("C API: ") + engram_last_error());
  }

  void Add(const StageResult& r) {
    rows += r.rows;
    distinct += r.distinct_rows;
    hits += r.hits;
    misses += r.misses;
    if (failed.ok() && !r.status.ok()) failed = r.status;
  }
};

// One store and its stager, and the buffers every mode writes into.
struct Bench {
  std::unique_ptr<Store> store;
  std::unique_ptr<StepStager> stager;
  engram_store* c_store = nullptr;  // the same tables through the C API (only for the c_ modes)
  engram_stager* c_stager = nullptr;
  std::vector<std::byte> out;                      // [tokens, layers, slots, record]
  std::vector<std::vector<std::byte>> layer_rows;  // per layer [tokens * slots, record]
  std::vector<uint64_t> ids;                       // hash_gather's scratch
  std::unique_ptr<StepRing> ring;                  // the ring mode's

  ~Bench() {
    ring.reset();
    engram_stager_destroy(c_stager);
    engram_store_close(c_store);
  }
};

using Mode = std::function<void(Bench&, const Step&, Tally&)>;

std::map<std::string, Mode> Modes() {
  std::map<std::string, Mode> modes;
  modes["flat"] = [](Bench& b, const Step& s, Tally& t) {
    for (size_t l = 0; l < b.stager->layers(); ++l) {
      t.Add(b.store->Gather(b.stager->tables()[l], s.layer_ids[l], b.layer_rows[l].data(), b.stager->record_bytes()));
    }
  };
  modes["hash_gather"] = [](Bench& b, const Step& s, Tally& t) {
    for (size_t l = 0; l < b.stager->layers(); ++l) {
      b.ids.resize(s.tokens.size() * b.stager->rows_per_token());
      if (Status st = b.stager->hasher(l).Hash(s.history, s.tokens, b.ids); !st.ok() && t.failed.ok()) t.failed = st;
      t.Add(b.store->Gather(b.stager->tables()[l], b.ids, b.layer_rows[l].data(), b.stager->record_bytes()));
    }
  };
  modes["stage"] = [](Bench& b, const Step& s, Tally& t) { t.Add(b.stager->Stage(s.history, s.tokens, b.out.data())); };
  modes["stage_start"] = [](Bench& b, const Step& s, Tally& t) {
    t.Add(b.stager->Start(s.history, s.tokens, b.out.data()).Wait());
  };
  modes["gather_step"] = [](Bench& b, const Step& s, Tally& t) {
    t.Add(b.stager->GatherStep(s.step_ids, b.out.data()));
  };
  modes["gather_step_start"] = [](Bench& b, const Step& s, Tally& t) {
    t.Add(b.stager->StartGatherStep(s.step_ids, b.out.data()).Wait());
  };
  // Start, then wait as a GPU stream would: spinning on the slot's words.
  modes["ring"] = [](Bench& b, const Step& s, Tally& t) {
    auto started = b.ring->StartGatherStep(s.step_ids);
    if (!started.ok()) {
      if (t.failed.ok()) t.failed = started.status();
      return;
    }
    const uint32_t* words = b.ring->words(started->slot);
    for (size_t l = 0; l < b.ring->layers(); ++l) {
      while ((std::atomic_ref<const uint32_t>(words[l]).load(std::memory_order_acquire) & ~kStepWordFailed) !=
             started->sequence) {
      }
    }
    t.Add(b.ring->Wait(started->slot));
    if (Status st = b.ring->Release(started->slot); !st.ok() && t.failed.ok()) t.failed = st;
  };
  modes["c_stage_rows"] = [](Bench& b, const Step& s, Tally& t) {
    engram_stage_result r{};
    r.size = sizeof r;
    t.AddC(engram_stage_rows(b.c_stager, s.history.data(), s.history.size(), s.tokens.data(), s.tokens.size(),
                             b.out.data(), nullptr, &r),
           r);
  };
  modes["c_gather_step"] = [](Bench& b, const Step& s, Tally& t) {
    engram_stage_result r{};
    r.size = sizeof r;
    t.AddC(engram_gather_step(b.c_stager, s.step_ids.data(), s.step_ids.size(), b.out.data(), nullptr, &r), r);
  };
  modes["c_stage"] = [](Bench& b, const Step& s, Tally& t) {
    engram_stage* stage = nullptr;
    engram_stage_result r{};
    r.size = sizeof r;
    engram_status st = engram_stage_start(b.c_stager, s.history.data(), s.history.size(), s.tokens.data(),
                                          s.tokens.size(), b.out.data(), &stage);
    if (st == ENGRAM_OK) st = engram_stage_wait(stage, &r);
    t.AddC(st, r);
  };
  return modes;
}

bool IsCMode(const std::string& mode) { return mode.rfind("c_", 0) == 0; }

Result<std::unique_ptr<Bench>> OpenBench(const StepBenchConfig& c, const std::vector<std::string>& tables,
                                         uint64_t cache_bytes, bool direct_io, bool with_c, uint32_t max_tokens) {
  auto b = std::make_unique<Bench>();
  StoreOptions o;
  for (const std::string& path : tables) o.tables.push_back({path, "", 0});
  o.cache_bytes = cache_bytes;
  o.io_backend = c.io_backend;
  o.direct_io = direct_io;
  ENGRAM_ASSIGN_OR_RETURN(b->store, Store::Open(o));
  b->store->WaitForCacheMemory();  // opening is not timed
  std::shared_ptr<const TokenMap> map;
  if (!c.token_map_path.empty()) {
    ENGRAM_ASSIGN_OR_RETURN(TokenMap m, TokenMap::FromFile(c.token_map_path));
    map = std::make_shared<const TokenMap>(std::move(m));
  }
  ENGRAM_ASSIGN_OR_RETURN(b->stager, StepStager::Create(*b->store, {0, 1}, map));
  if (with_c) {
    std::vector<const char*> paths;
    for (const std::string& p : tables) paths.push_back(p.c_str());
    engram_store_options co{};
    co.size = sizeof co;
    co.table_paths = paths.data();
    co.table_count = paths.size();
    co.cache_bytes = cache_bytes;
    co.io_backend = c.io_backend.c_str();
    if (engram_store_open(&co, &b->c_store) != ENGRAM_OK) {
      return Status::Internal(std::string("C API open: ") + engram_last_error());
    }
    engram_cache_memory_wait(b->c_store);
    const size_t layers[] = {0, 1};
    if (engram_stager_create(b->c_store, layers, 2, c.token_map_path.empty() ? nullptr : c.token_map_path.c_str(),
                             &b->c_stager) != ENGRAM_OK) {
      return Status::Internal(std::string("C API stager: ") + engram_last_error());
    }
  }
  StepRingOptions ro;
  ro.slots = 2;
  ro.max_tokens = max_tokens;
  ENGRAM_ASSIGN_OR_RETURN(b->ring, StepRing::Create(*b->stager, ro));
  b->out.resize(b->stager->OutputBytes(max_tokens));
  const size_t layer_bytes = size_t(max_tokens) * b->stager->rows_per_token() * b->stager->record_bytes();
  b->layer_rows.assign(b->stager->layers(), std::vector<std::byte>(layer_bytes));
  return b;
}

// `count` steps of `tokens` tokens cut from `text`, each with up to
// `history` tokens before it, and their row IDs per layer.
std::vector<Step> CutSteps(const StepStager& stager, std::span<const uint32_t> text, uint32_t history, uint32_t tokens,
                           size_t count) {
  std::vector<Step> steps;
  for (size_t k = 0; k < count; ++k) {
    const size_t begin = history + k * tokens;
    Step s;
    s.history = text.subspan(begin - history, history);
    s.tokens = text.subspan(begin, tokens);
    const size_t slots = stager.rows_per_token(), layers = stager.layers();
    s.step_ids.resize(size_t(tokens) * layers * slots);
    for (size_t l = 0; l < layers; ++l) {
      std::vector<uint64_t> ids(size_t(tokens) * slots);
      (void)stager.hasher(l).Hash(s.history, s.tokens, ids);
      for (size_t t = 0; t < tokens; ++t) std::copy_n(&ids[t * slots], slots, &s.step_ids[(t * layers + l) * slots]);
      s.layer_ids.push_back(std::move(ids));
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

std::vector<uint32_t> RandomTokens(size_t n, uint32_t vocabulary, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> t(n);
  for (uint32_t& x : t) x = static_cast<uint32_t>(rng() % vocabulary);
  return t;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// Stages `count` steps (cycling over `steps`) with GatherStep on this thread
// while another spins on the words; each sample is the time from a layer's
// rows being in out to the spinning thread seeing its word.
Result<WordLatency> MeasureWordLatency(Bench& b, const std::vector<Step>& steps, size_t count) {
  const size_t layers = b.stager->layers();
  std::vector<uint32_t> words(layers, 0);
  std::vector<std::atomic<int64_t>> landed(layers);
  std::vector<double> samples;
  samples.reserve(count * layers);
  std::atomic<uint32_t> seen{0};
  std::atomic<bool> failed{false};
  std::thread reader([&] {
    for (uint32_t seq = 1; seq <= count; ++seq) {
      for (size_t l = 0; l < layers; ++l) {
        uint32_t w;
        while (((w = std::atomic_ref<uint32_t>(words[l]).load(std::memory_order_acquire)) & ~kStepWordFailed) != seq) {
        }
        const int64_t now = NowNs();
        if (w != seq) failed = true;
        samples.push_back(double(now - landed[l].load(std::memory_order_relaxed)));
      }
      seen.store(seq, std::memory_order_release);
    }
  });
  Status status;
  for (uint32_t seq = 1; seq <= count; ++seq) {
    StepCompletion c;
    c.words = words;
    c.sequence = seq;
    c.layer_done = [&](size_t layer, const StageLayerResult&) {
      landed[layer].store(NowNs(), std::memory_order_relaxed);  // the word's release store publishes it
    };
    StageResult r = b.stager->GatherStep(steps[(seq - 1) % steps.size()].step_ids, b.out.data(), c);
    if (!r.status.ok() && status.ok()) status = r.status;
    // The reader is spinning again before the next word changes.
    while (seen.load(std::memory_order_acquire) != seq) {
    }
  }
  reader.join();
  ENGRAM_RETURN_IF_ERROR(status);
  if (failed) return Status::Internal("step: a word told a failed layer");
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) { return samples[std::min(samples.size() - 1, size_t(q * double(samples.size())))]; };
  WordLatency w;
  w.samples = samples.size();
  w.p50_ns = at(0.5);
  w.p90_ns = at(0.9);
  w.p99_ns = at(0.99);
  w.max_ns = samples.back();
  return w;
}

}  // namespace

double StepMedian(std::vector<double> r) {
  if (r.empty()) return 0;
  std::sort(r.begin(), r.end());
  const size_t m = r.size() / 2;
  return r.size() % 2 ? r[m] : (r[m - 1] + r[m]) / 2;
}

Result<StepBenchReport> RunStepBenchmark(const StepBenchConfig& c, const StepProgressLog& log) {
  if (c.step_tokens.empty()) return Status::InvalidArgument("step: no --tokens");
  if (c.rounds == 0 || !(c.seconds > 0)) return Status::InvalidArgument("step: --rounds and --seconds must be > 0");
  const std::map<std::string, Mode> all = Modes();
  std::vector<std::string> modes = c.modes;
  if (modes.empty()) {
    for (const auto& [name, mode] : all) modes.push_back(name);
  }
  for (const std::string& m : modes) {
    if (!all.count(m)) return Status::InvalidArgument("step: no mode '" + m + "'");
  }
  // flat first: the others' ratios pair with it.
  std::stable_sort(modes.begin(), modes.end(), [](const std::string& a, const std::string& b) {
    return (a == "flat") > (b == "flat");
  });
  for (const std::string& k : c.cases) {
    if (k != "hit" && k != "miss") return Status::InvalidArgument("step: case '" + k + "' is not hit or miss");
  }
  ENGRAM_ASSIGN_OR_RETURN(std::vector<std::string> tables, EnsureTables(c, log));
  const bool direct_io = AcceptsDirectIo(tables[0]);
  const bool with_c = std::any_of(modes.begin(), modes.end(), IsCMode);
  uint32_t vocabulary = 100000;
  if (!c.token_map_path.empty()) {
    ENGRAM_ASSIGN_OR_RETURN(TokenMap m, TokenMap::FromFile(c.token_map_path));
    vocabulary = static_cast<uint32_t>(m.size());
  }
  const uint32_t max_tokens = *std::max_element(c.step_tokens.begin(), c.step_tokens.end());
  StepBenchReport report;
  for (const std::string& kind : c.cases) {
    const bool hit = kind == "hit";
    for (uint32_t tokens : c.step_tokens) {
      const uint64_t step_rows = uint64_t(tokens) * 2 * 24;
      const size_t count = std::max<size_t>(4, c.miss_rows / step_rows);
      std::map<std::string, StepBenchPoint> points;
      for (const std::string& m : modes) {
        points[m].case_name = kind;
        points[m].tokens = tokens;
        points[m].mode = m;
      }
      // Hits: one warm store, its steps staged once before timing.
      std::unique_ptr<Bench> warm;
      std::vector<uint32_t> text;
      std::vector<Step> steps;
      if (hit) {
        ENGRAM_ASSIGN_OR_RETURN(warm, OpenBench(c, tables, 1ull << 30, direct_io, with_c, max_tokens));
        report.io_description = warm->store->io_description();
        text = RandomTokens(c.history + count * tokens, vocabulary, c.seed);
        steps = CutSteps(*warm->stager, text, c.history, tokens, count);
        // Every mode once over the steps: the C API's store has a cache of
        // its own, and each mode's first pass allocates its buffers.
        for (const std::string& m : modes) {
          Tally t;
          for (const Step& s : steps) all.at(m)(*warm, s, t);
          if (!t.failed.ok()) return t.failed.WithContext("step: mode " + m);
        }
      }
      for (uint32_t round = 0; round < c.rounds; ++round) {
        std::map<std::string, double> ns;
        // Misses: new tokens each round, the same for every mode.
        if (!hit) text = RandomTokens(c.history + count * tokens, vocabulary, c.seed * 1000 + round);
        for (size_t i = 0; i < modes.size(); ++i) {
          // Rotate the order each round but keep flat first.
          const std::string& m = i == 0 ? modes[0] : modes[1 + (i - 1 + round) % (modes.size() - 1)];
          std::unique_ptr<Bench> fresh;
          Bench* b = warm.get();
          if (!hit) {
            ENGRAM_ASSIGN_OR_RETURN(fresh, OpenBench(c, tables, 256ull << 20, direct_io, IsCMode(m), max_tokens));
            report.io_description = fresh->store->io_description();
            b = fresh.get();
            steps = CutSteps(*b->stager, text, c.history, tokens, count);
          }
          Tally t;
          size_t done = 0;
          const auto start = Clock::now();
          if (hit) {
            do {
              all.at(m)(*b, steps[done % steps.size()], t);
              ++done;
            } while (done % steps.size() != 0 || SecondsSince(start) < c.seconds);
          } else {
            for (const Step& s : steps) all.at(m)(*b, s, t);
            done = steps.size();
          }
          const double seconds = SecondsSince(start);
          if (!t.failed.ok()) return t.failed.WithContext("step: mode " + m);
          StepBenchPoint& p = points[m];
          const uint64_t rows = done * step_rows;
          ns[m] = seconds * 1e9 / double(rows);
          p.ns_per_row.push_back(ns[m]);
          p.rows += t.rows;
          p.distinct_rows += t.distinct;
          p.hits += t.hits;
          p.misses += t.misses;
        }
        for (const std::string& m : modes) {
          if (ns.count("flat")) points[m].ratio_to_flat.push_back(ns[m] / ns["flat"]);
          if (ns.count("hash_gather")) points[m].ratio_to_hash_gather.push_back(ns[m] / ns["hash_gather"]);
        }
      }
      for (const std::string& m : modes) report.points.push_back(std::move(points[m]));
      if (c.word_steps > 0) {
        std::unique_ptr<Bench> fresh;
        Bench* b = warm.get();
        if (!hit) {
          ENGRAM_ASSIGN_OR_RETURN(fresh, OpenBench(c, tables, 256ull << 20, direct_io, false, max_tokens));
          b = fresh.get();
          text = RandomTokens(c.history + count * tokens, vocabulary, c.seed * 1000 + c.rounds);
          steps = CutSteps(*b->stager, text, c.history, tokens, count);
        }
        ENGRAM_ASSIGN_OR_RETURN(WordLatency w,
                                MeasureWordLatency(*b, steps, hit ? c.word_steps : std::min(c.word_steps, count)));
        w.case_name = kind;
        w.tokens = tokens;
        report.word_latency.push_back(w);
      }
      if (log) log("step: " + kind + " " + std::to_string(tokens) + " tokens done");
    }
  }
  return report;
}

}  // namespace engram::bench
