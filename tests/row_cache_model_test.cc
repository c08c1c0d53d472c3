// RowCache against a small, obviously-correct reference model.
//
// The model keeps the policy in plain containers: a vector of ways per set,
// exact access counts in a map (the sketch is sized so that, for the few
// thousand rows here, its estimate equals the exact saturated count), 64-bit
// ticks, and a textbook BFS for relocation. The ghost history of
// reuse-distance admission is approximate by design (tested on its own in
// ghost_history_test), so the model drives its own GhostHistory with the same
// calls the policy prescribes and checks what the cache decides from it. Random operations in the store's
// protocol (lookup; insert on a miss; read-ahead; unpins) must give the same
// outcome from both, op by op, and the same resident rows at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/common/sanitizers.h"
#include "src/cache/row_cache.h"
#include "src/cache/set_associative_cache.h"

namespace engram {
namespace {

using cache::CandidateSets;
using cache::SetHasher;

constexpr uint32_t kRowBytes = 24;

std::vector<std::byte> RowFor(uint64_t id) {
  std::vector<std::byte> r(kRowBytes);
  for (uint32_t i = 0; i < kRowBytes; ++i) r[i] = std::byte((id * 131 + i * 17 + (id >> 8)) & 0xff);
  return r;
}

class ReferenceCache {
 public:
  ReferenceCache(const RowCacheConfig& c, uint64_t num_sets)
      : c_(c), hasher_(c.seed, num_sets, c.candidate_sets), sets_(num_sets, std::vector<std::optional<Entry>>(c.ways)) {
    const double capacity = double(num_sets * c.ways);
    halving_ = c.halving_per_capacity > 0 ? std::max<uint64_t>(RowCacheConfig::kMinHalvingTicks, uint64_t(std::ceil(c.halving_per_capacity * capacity)))
                                          : c.halving_period;
    stale_ = c.stale_after > 0 ? std::max<uint64_t>(1, uint64_t(std::ceil(c.stale_after * capacity))) : 0;
    if (c.admission == AdmissionRule::kReuseDistance) {
      ghost_ = std::make_unique<cache::GhostHistory>(
          cache::FootprintFor(c, num_sets, kRowBytes).ghost_bytes, c.ghost_epoch_bits,
          std::max<uint64_t>(1, num_sets * c.ways / c.ghost_epochs), c.seed);
    }
  }

  bool Lookup(uint64_t id, PinAction pin) {
    uint32_t& n = counts_[id];
    if (n < Max()) ++n;
    uint64_t now = Tick();
    Entry* e = Find(id);
    if (!e) return false;
    e->stamp = now;
    if (pin == PinAction::kConsume) e->pinned = false;
    return true;
  }

  InsertOutcome Insert(uint64_t id, bool pinned) {
    uint64_t now = Tick();
    if (Entry* e = Find(id)) {
      if (pinned) e->pinned = true;
      return InsertOutcome::kAlreadyPresent;
    }
    // Reuse distance: an (unpinned) insert of an absent row looks up the
    // row's previous access and records this one; the sweep follows the insert.
    uint64_t cand_age = cache::GhostHistory::kNever;
    if (ghost_ && !pinned) cand_age = ghost_->Touch(hasher_.Hash(id), now);
    const InsertOutcome out = Place(id, now, pinned, cand_age);
    if (ghost_ && !pinned) ghost_->Sweep(now);
    return out;
  }

  InsertOutcome Place(uint64_t id, uint64_t now, bool pinned, uint64_t cand_age) {
    std::vector<uint64_t> cands = Candidates(id);
    // Free way in the emptier set, the first on a tie.
    int best = -1;
    size_t best_free = 0;
    for (size_t i = 0; i < cands.size(); ++i) {
      size_t f = FreeWays(cands[i]);
      if (f > best_free) best_free = f, best = int(i);
    }
    if (best >= 0) {
      Put(cands[best], LowestFree(cands[best]), {id, now, pinned});
      return InsertOutcome::kInserted;
    }
    // Relocation only while >= capacity / 1024 (at least 1) slots are empty.
    const uint64_t capacity = sets_.size() * c_.ways;
    if (c_.relocation_depth > 0 && cands.size() == 2 && EmptySlots() >= std::max<uint64_t>(1, capacity / 1024)) {
      if (auto slot = Relocate(cands)) {
        Put(slot->first, slot->second, {id, now, pinned});
        return InsertOutcome::kInserted;
      }
    }
    // Victim: the oldest stale resident (recency guard), else the lowest
    // (estimate, last access) or the oldest, among unpinned.
    std::optional<std::pair<uint64_t, uint32_t>> victim;
    uint32_t v_est = 0;
    uint64_t v_stamp = 0;
    bool v_stale = false;
    for (uint64_t s : cands) {
      for (uint32_t w = 0; w < c_.ways; ++w) {
        const Entry& e = *sets_[s][w];
        if (e.pinned) continue;
        const bool stale = stale_ != 0 && now - e.stamp > stale_;
        uint32_t est = c_.victim_order == VictimOrder::kOldest || stale ? 0 : Count(e.id);
        bool better = !victim || (stale && !v_stale) ||
                      (stale == v_stale && (est < v_est || (est == v_est && e.stamp < v_stamp)));
        if (better) {
          victim = {s, w};
          v_est = est;
          v_stamp = e.stamp;
          v_stale = stale;
        }
      }
    }
    if (!victim) return InsertOutcome::kRefusedAllPinned;
    const uint64_t victim_id = sets_[victim->first][victim->second]->id;
    if (!pinned && !v_stale && ghost_) {
      // Admitted only if its previous access is newer than the victim's last.
      if (!(cand_age < now - v_stamp)) return InsertOutcome::kRefusedLostAdmission;
    } else if (!pinned && !v_stale) {
      uint32_t cand = Count(id), vic = Count(sets_[victim->first][victim->second]->id);
      bool admit = c_.admission == AdmissionRule::kAlways ||
                   (c_.admission == AdmissionRule::kEstimateAtLeast && cand >= vic) ||
                   (c_.admission == AdmissionRule::kEstimateGreater && cand > vic);
      // The tests use warm_p 0 or 1 only: no randomness to reproduce.
      if (!admit && c_.warm_admit_probability >= 1.0 && cand >= c_.warm_threshold) admit = true;
      if (!admit) return InsertOutcome::kRefusedLostAdmission;
    }
    Put(victim->first, victim->second, {id, now, pinned});
    // The evicted row's last access goes to the history.
    if (ghost_ && !pinned) ghost_->Record(hasher_.Hash(victim_id), v_stamp, now);
    return InsertOutcome::kInsertedEvicted;
  }

  bool Unpin(uint64_t id) {
    Entry* e = Find(id);
    if (!e || !e->pinned) return false;
    e->pinned = false;
    return true;
  }

  std::vector<uint64_t> ResidentsOf(uint64_t s) const {
    std::vector<uint64_t> r;
    for (const auto& e : sets_[s]) {
      if (e) r.push_back(e->id);
    }
    return r;
  }
  uint64_t relocations() const { return relocations_; }

 private:
  struct Entry {
    uint64_t id;
    uint64_t stamp;
    bool pinned;
  };

  // The operation whose tick is a multiple of the halving period halves
  // every count first.
  uint64_t Tick() {
    const uint64_t now = tick_++;
    if (halving_ && now % halving_ == 0) {
      for (auto& [k, v] : counts_) v /= 2;
    }
    // The cache's clock upkeep: every power of two of ticks up to 1/64 of the
    // capacity (at most 4096) the ghost history is swept up to date. (Its
    // stamp clamping needs 2^30 ticks; the model's are 64-bit.)
    const uint64_t capacity = sets_.size() * c_.ways;
    const uint64_t upkeep = std::bit_floor(std::clamp<uint64_t>(capacity / 64, 1, 4096));
    if (ghost_ && now % upkeep == 0) ghost_->Sweep(now, cache::GhostHistory::kSweepAllDue);
    return now;
  }
  uint32_t Max() const { return (1u << c_.counter_bits) - 1; }
  uint32_t Count(uint64_t id) const {
    auto it = counts_.find(id);
    return it == counts_.end() ? 0 : it->second;
  }
  std::vector<uint64_t> Candidates(uint64_t id) const {
    CandidateSets cs = hasher_.CandidatesOf(id);
    if (cs.first == cs.second) return {cs.first};
    return {cs.first, cs.second};
  }
  Entry* Find(uint64_t id) {
    for (uint64_t s : Candidates(id)) {
      for (auto& e : sets_[s]) {
        if (e && e->id == id) return &*e;
      }
    }
    return nullptr;
  }
  uint64_t EmptySlots() const {
    uint64_t n = 0;
    for (uint64_t s = 0; s < sets_.size(); ++s) n += FreeWays(s);
    return n;
  }
  size_t FreeWays(uint64_t s) const {
    return std::count_if(sets_[s].begin(), sets_[s].end(), [](const auto& e) { return !e; });
  }
  uint32_t LowestFree(uint64_t s) const {
    for (uint32_t w = 0; w < c_.ways; ++w) {
      if (!sets_[s][w]) return w;
    }
    ADD_FAILURE() << "no free way";
    return 0;
  }
  void Put(uint64_t s, uint32_t w, Entry e) { sets_[s][w] = e; }

  // Shortest chain of moves (BFS over sets, ways in order, at most 64 sets
  // visited) ending in a set with a free way.
  std::optional<std::pair<uint64_t, uint32_t>> Relocate(const std::vector<uint64_t>& roots) {
    struct Node {
      uint64_t set;
      int parent;
      uint32_t way;
      uint32_t depth;
    };
    std::vector<Node> nodes;
    for (uint64_t r : roots) nodes.push_back({r, -1, 0, 0});
    auto seen = [&](uint64_t s) {
      return std::any_of(nodes.begin(), nodes.end(), [&](const Node& n) { return n.set == s; });
    };
    for (size_t i = 0; i < nodes.size() && nodes.size() < 64; ++i) {
      if (nodes[i].depth >= c_.relocation_depth) break;
      for (uint32_t w = 0; w < c_.ways && nodes.size() < 64; ++w) {
        const Entry& e = *sets_[nodes[i].set][w];
        if (e.pinned) continue;
        uint64_t alt = hasher_.OtherSet(e.id, nodes[i].set);
        if (seen(alt)) continue;
        nodes.push_back({alt, int(i), w, nodes[i].depth + 1});
        if (FreeWays(alt) > 0) {
          // Walk back: each row on the path moves one step towards the free set.
          int child = int(nodes.size()) - 1;
          uint32_t freed = 0;
          while (nodes[child].parent >= 0) {
            const Node& n = nodes[child];
            uint64_t from = nodes[n.parent].set;
            sets_[n.set][LowestFree(n.set)] = sets_[from][n.way];
            sets_[from][n.way].reset();
            freed = n.way;
            child = n.parent;
            ++relocations_;
          }
          return std::make_pair(nodes[child].set, freed);
        }
      }
    }
    return std::nullopt;
  }

  RowCacheConfig c_;
  SetHasher hasher_;
  std::vector<std::vector<std::optional<Entry>>> sets_;
  std::unordered_map<uint64_t, uint32_t> counts_;
  uint64_t halving_ = 0;  // effective halving period (ticks)
  uint64_t stale_ = 0;    // effective stale age (ticks)
  uint64_t tick_ = 1;  // the cache's clock starts at 1 (epochs of the history count from it)
  uint64_t relocations_ = 0;
  std::unique_ptr<cache::GhostHistory> ghost_;
};

struct ModelCase {
  std::string spec;
  uint64_t num_sets;
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << "'" << c.spec << "' over " << c.num_sets << " sets"; }

class RowCacheModelTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(RowCacheModelTest, MatchesTheReferenceModelOpByOp) {
  auto config = RowCacheConfig::FromSpec(GetParam().spec);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  // The model counts exactly; a sketch sized from these few slots would not.
  if (config->sketch_bytes == 0) config->sketch_bytes = 1u << 20;
  const uint64_t num_sets = GetParam().num_sets;
  auto made = cache::SetAssociativeRowCache::Make(*config, num_sets, kRowBytes);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  cache::SetAssociativeRowCache& cache = **made;
  ReferenceCache model(*config, num_sets);

  // Skewed row popularity over ~4x more rows than slots, so sets fill, rows
  // get refused, evicted and relocated, and counters grow unequal.
  const uint64_t distinct = num_sets * config->ways * 4;
  std::mt19937_64 rng(config->seed * 1000003 + num_sets);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto draw = [&] { return 1 + uint64_t(std::pow(u(rng), 2.5) * double(distinct)); };
  std::vector<std::byte> buf(kRowBytes);
  std::deque<uint64_t> pinned;

#if ENGRAM_UNDER_SANITIZER
  const int ops = 6000;  // sanitizers run ~10-20x slower
#else
  const int ops = 20000;
#endif
  for (int op = 0; op < ops; ++op) {
    SCOPED_TRACE("op " + std::to_string(op));
    double kind = u(rng);
    if (kind < 0.04) {
      // Read-ahead, consumed or released later; at most a few outstanding.
      uint64_t id = draw();
      InsertOutcome got = cache.InsertPinned(id, RowFor(id));
      ASSERT_EQ(got, model.Insert(id, /*pinned=*/true)) << "InsertPinned " << id;
      if (got != InsertOutcome::kRefusedAllPinned) pinned.push_back(id);
      if (pinned.size() > 3) {
        uint64_t old = pinned.front();
        pinned.pop_front();
        ASSERT_EQ(cache.Unpin(old), model.Unpin(old)) << "Unpin " << old;
      }
      continue;
    }
    uint64_t id = (kind < 0.10 && !pinned.empty()) ? pinned.back() : draw();
    PinAction pin = u(rng) < 0.5 ? PinAction::kConsume : PinAction::kKeep;
    std::fill(buf.begin(), buf.end(), std::byte{0});
    bool hit = cache.Lookup(id, buf, pin);
    ASSERT_EQ(hit, model.Lookup(id, pin)) << "Lookup " << id;
    if (hit) {
      ASSERT_EQ(buf, RowFor(id)) << "row " << id;
    } else {
      InsertOutcome got = cache.Insert(id, RowFor(id));
      ASSERT_EQ(got, model.Insert(id, /*pinned=*/false)) << "Insert " << id;
    }
  }
  for (uint64_t s = 0; s < num_sets; ++s) ASSERT_EQ(cache.ResidentsOf(s), model.ResidentsOf(s)) << "set " << s;
  RowCacheStats st = cache.Stats();
  EXPECT_EQ(st.misses, st.inserts + st.total_refusals());
  EXPECT_EQ(st.relocations, model.relocations());
  uint64_t resident = 0;
  for (uint64_t s = 0; s < num_sets; ++s) resident += cache.ResidentsOf(s).size();
  EXPECT_EQ(st.resident_rows, resident);
  // The workload must have exercised the policy, or the comparison is empty.
  EXPECT_GT(st.hits, 1000u);
  EXPECT_GT(st.evictions + st.total_refusals(), 100u);
  if (config->relocation_depth > 0) {
    EXPECT_GT(st.relocations, 10u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Presets, RowCacheModelTest,
    ::testing::Values(ModelCase{"legacy", 32}, ModelCase{"ways8", 16}, ModelCase{"ways16", 8},
                      ModelCase{"two-choice", 32}, ModelCase{"lru", 32}, ModelCase{"default", 32},
                      ModelCase{"default,admission=gt", 32},
                      ModelCase{"default,ghost_x=0.25,ghost_bits=2,ghost_epochs=16", 32},
                      ModelCase{"legacy,seed=99", 7},
                      ModelCase{"legacy,ways=1", 61},
                      ModelCase{"ways=3,sets=2,relocate=3,seed=5", 40},
                      ModelCase{"ways=32,sets=1,relocate=0,admission=gt", 4},
                      ModelCase{"ways=4,sets=2,relocate=8,victim=oldest,admission=ge", 50},
                      ModelCase{"legacy,counter_bits=4,halving=300,admission=gt,warm_p=1,warm_threshold=3", 32},
                      ModelCase{"two-choice,halving=1000,sketch_depth=2,seed=3", 32},
                      ModelCase{"ways=2,sets=2,relocate=1", 100},
                      ModelCase{"two-choice,stale=0.5,admission=gt", 32},
                      ModelCase{"ways=4,sets=2,relocate=2,stale=2,halving_x=1.5,update=conservative", 32},
                      ModelCase{"legacy,stale=0.25,victim=oldest", 16}),
    [](const ::testing::TestParamInfo<ModelCase>& info) {
      std::string n = std::to_string(info.index);
      return n;
    });

}  // namespace
}  // namespace engram
