// RowCacheConfig: validation, named presets and the "preset,key=value" spec.
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "engram/cache_config.h"

namespace engram {
namespace {

constexpr uint32_t kMaxWays = 32;
constexpr uint32_t kMaxRelocationDepth = 8;
constexpr uint64_t kMinSketchBytes = 64;
constexpr uint64_t kMaxSketchBytes = uint64_t{1} << 32;

// ---- presets --------------------------------------------------------------
// Every preset is built from the reported cache ("legacy") by changing only
// what its name says, so emulated differences are attributable.

RowCacheConfig Legacy() {
  RowCacheConfig c;
  c.name = "legacy";
  c.ways = 4;
  c.candidate_sets = 1;
  c.relocation_depth = 0;
  c.admission = AdmissionRule::kEstimateAtLeast;
  c.warm_admit_probability = 0.0;
  c.warm_threshold = 6;
  c.victim_order = VictimOrder::kLowestEstimateThenOldest;
  c.sketch_bytes = 1u << 20;  // "1 MiB of counters per table"
  c.sketch_depth = 4;         // "the minimum of four 8-bit counters"
  c.counter_bits = 8;
  c.halving_period = 0;  // the reported trace saw no halving: never is exact for it
  c.seed = 0;
  return c;
}

// THE DEFAULT POLICY. The one place that defines what Engram Store runs when
// nothing is configured (measurements in bench/RESULTS.md, "Default
// policy"):
//  - two candidate sets of 5 ways plus cuckoo relocation (depth 2): a row is
//    evicted only when both of its sets and their residents' other sets are
//    full, so at the report's fill the cache keeps every row (= Belady). Five
//    ways, not four, because a 5-way set is exactly one 64-byte line (lock,
//    masks, stamps, keys: set_layout.h), i.e. 12.8 B of index per row
//    instead of 16 at the same one-line probe;
//  - under pressure the victim is the lowest (estimate, last access) of the
//    10 candidates, and it is replaced only if the candidate's previous
//    access is more recent than the victim's last one (reuse distance,
//    LIRS's test; AdmissionRule::kReuseDistance). Previous accesses of rows
//    not in the cache come from a ghost history of 1 B per cached row
//    (half an entry per slot, 13-bit fingerprints): rows missed or evicted
//    within the last ~1.5 cache-fulls of operations, as many as fit. A
//    first-seen row is refused, so a once-used scan never displaces anyone
//    and a working set larger than the cache stays put instead of
//    thrashing; a row that comes back sooner than the victim has been idle
//    gets in. Counts alone (TinyLFU's rule, the previous default) cannot
//    tell a row about to be re-read from an old popular one: at half and a
//    quarter of the matched capacity this rule has 1.07-1.22x the optimum's
//    avoidable misses where TinyLFU had 1.27-1.36x (bench/RESULTS.md,
//    "Default policy": reuse-distance admission);
//  - a count-min sketch, which picks the victim (the least used of the
//    candidates), sized from the capacity: two 8-bit counters per slot, and
//    a row's two counters in one 64-byte block (one sketch cache line per
//    lookup; 2 B per cached row at any cache size). A fixed-size sketch
//    either wastes memory on small caches or, on large ones, shares each
//    counter among many rows, so hot rows look cold and get evicted.
//    Conservative update (only a row's lowest counters are bumped) keeps
//    rows that share a counter from inflating each other;
//  - counters are halved every 4 cache-fulls of operations, so a working
//    set that was popular once (request A, before a long request B) does
//    not outrank the rows in use now for longer than that. With Caffeine's
//    10 (and plain updates) A stayed resident through B: 0.2-1.7 % more
//    avoidable misses at a quarter of the capacity, for 0.1-0.6 % fewer at
//    half (bench/RESULTS.md, "Default policy");
//  - recency guard: a resident untouched for 16 cache-fulls of operations is
//    stale and loses to any candidate, so neither saturated counters nor a
//    flooded sketch can lock new rows out for good.
RowCacheConfig Default() {
  RowCacheConfig c = Legacy();
  c.name = "default";
  c.ways = 5;
  c.candidate_sets = 2;
  c.relocation_depth = 2;
  c.admission = AdmissionRule::kReuseDistance;
  c.ghost_per_row = 1.0;
  c.ghost_epoch_bits = 3;
  c.ghost_epochs = 4;
  c.sketch_bytes = 0;
  c.sketch_depth = 2;
  c.sketch_blocked = true;
  c.conservative_update = true;
  c.halving_per_capacity = 4.0;
  c.stale_after = 16.0;
  return c;
}

struct PresetEntry {
  const char* name;
  RowCacheConfig (*make)();
};

const PresetEntry kPresets[] = {
    {"legacy", &Legacy},
    {"ways8",
     [] {
       RowCacheConfig c = Legacy();
       c.name = "ways8";
       c.ways = 8;
       return c;
     }},
    {"ways16",
     [] {
       RowCacheConfig c = Legacy();
       c.name = "ways16";
       c.ways = 16;
       return c;
     }},
    {"two-choice",
     [] {
       RowCacheConfig c = Legacy();
       c.name = "two-choice";
       c.candidate_sets = 2;
       return c;
     }},
    {"lru",
     [] {
       RowCacheConfig c = Legacy();
       c.name = "lru";
       c.admission = AdmissionRule::kAlways;
       c.victim_order = VictimOrder::kOldest;
       return c;
     }},
    {"default", &Default},
};

std::string PresetNames() {
  std::string s;
  for (const auto& p : kPresets) {
    if (!s.empty()) s += ", ";
    s += p.name;
  }
  return s;
}

const PresetEntry* FindPreset(std::string_view name) {
  for (const auto& p : kPresets) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

// ---- spec parsing ---------------------------------------------------------

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status BadValue(std::string_view spec, std::string_view key, std::string_view value, std::string_view want) {
  return Status::InvalidArgument("row cache spec '" + std::string(spec) + "': " + std::string(key) + "='" +
                                 std::string(value) + "' is not " + std::string(want));
}

template <typename T>
Status ParseUnsigned(std::string_view spec, std::string_view key, std::string_view v, T* out) {
  T x{};
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size()) {
    return BadValue(spec, key, v, "an unsigned integer in range");
  }
  *out = x;
  return Status::OK();
}

Status ParseDouble(std::string_view spec, std::string_view key, std::string_view v, double* out) {
  double x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size()) return BadValue(spec, key, v, "a number");
  *out = x;
  return Status::OK();
}

const char* AdmissionName(AdmissionRule a) {
  switch (a) {
    case AdmissionRule::kAlways: return "always";
    case AdmissionRule::kEstimateAtLeast: return "ge";
    case AdmissionRule::kEstimateGreater: return "gt";
    case AdmissionRule::kReuseDistance: return "reuse";
  }
  return "?";
}

const char* VictimName(VictimOrder v) {
  switch (v) {
    case VictimOrder::kLowestEstimateThenOldest: return "estimate";
    case VictimOrder::kOldest: return "oldest";
  }
  return "?";
}

Status ApplyOverride(std::string_view spec, std::string_view key, std::string_view v, RowCacheConfig* c) {
  if (key == "ways") return ParseUnsigned(spec, key, v, &c->ways);
  if (key == "sets") return ParseUnsigned(spec, key, v, &c->candidate_sets);
  if (key == "relocate") return ParseUnsigned(spec, key, v, &c->relocation_depth);
  if (key == "admission") {
    if (v == "always") c->admission = AdmissionRule::kAlways;
    else if (v == "ge" || v == ">=") c->admission = AdmissionRule::kEstimateAtLeast;
    else if (v == "gt" || v == ">") c->admission = AdmissionRule::kEstimateGreater;
    else if (v == "reuse") c->admission = AdmissionRule::kReuseDistance;
    else return BadValue(spec, key, v, "one of always, ge, gt, reuse");
    return Status::OK();
  }
  if (key == "warm_p") return ParseDouble(spec, key, v, &c->warm_admit_probability);
  if (key == "stale") return ParseDouble(spec, key, v, &c->stale_after);
  if (key == "warm_threshold") return ParseUnsigned(spec, key, v, &c->warm_threshold);
  if (key == "victim") {
    if (v == "estimate") c->victim_order = VictimOrder::kLowestEstimateThenOldest;
    else if (v == "oldest" || v == "lru") c->victim_order = VictimOrder::kOldest;
    else return BadValue(spec, key, v, "one of estimate, oldest");
    return Status::OK();
  }
  if (key == "sketch_bytes") return ParseUnsigned(spec, key, v, &c->sketch_bytes);
  if (key == "sketch_depth") return ParseUnsigned(spec, key, v, &c->sketch_depth);
  if (key == "update") {
    if (v == "all") c->conservative_update = false;
    else if (v == "conservative") c->conservative_update = true;
    else return BadValue(spec, key, v, "one of all, conservative");
    return Status::OK();
  }
  if (key == "sketch_layout") {
    if (v == "rows") c->sketch_blocked = false;
    else if (v == "blocked") c->sketch_blocked = true;
    else return BadValue(spec, key, v, "one of rows, blocked");
    return Status::OK();
  }
  if (key == "counter_bits") return ParseUnsigned(spec, key, v, &c->counter_bits);
  if (key == "halving") return ParseUnsigned(spec, key, v, &c->halving_period);
  if (key == "halving_x") return ParseDouble(spec, key, v, &c->halving_per_capacity);
  if (key == "seed") return ParseUnsigned(spec, key, v, &c->seed);
  if (key == "ghost_x") return ParseDouble(spec, key, v, &c->ghost_per_row);
  if (key == "ghost_bits") return ParseUnsigned(spec, key, v, &c->ghost_epoch_bits);
  if (key == "ghost_epochs") return ParseUnsigned(spec, key, v, &c->ghost_epochs);
  return Status::InvalidArgument("row cache spec '" + std::string(spec) + "': unknown key '" + std::string(key) +
                                 "' (known: ways, sets, relocate, admission, warm_p, warm_threshold, stale, victim, "
                                 "sketch_bytes, sketch_depth, sketch_layout, counter_bits, update, halving, halving_x, ghost_x, ghost_bits, ghost_epochs, seed)");
}

}  // namespace

const char* RefusalReasonName(RefusalReason r) {
  switch (r) {
    case RefusalReason::kLostAdmission: return "lost_admission";
    case RefusalReason::kAllPinned: return "all_pinned";
    case RefusalReason::kCount: break;
  }
  return "unknown";
}

Status RowCacheConfig::Validate() const {
  auto bad = [this](const std::string& what) {
    return Status::InvalidArgument("row cache config '" + name + "': " + what);
  };
  if (ways < 1 || ways > kMaxWays) return bad("ways=" + std::to_string(ways) + " must be in 1..32");
  if (candidate_sets < 1 || candidate_sets > 2) {
    return bad("sets=" + std::to_string(candidate_sets) + " must be 1 or 2");
  }
  if (relocation_depth > kMaxRelocationDepth) {
    return bad("relocate=" + std::to_string(relocation_depth) + " must be at most 8 (bounded work per insert)");
  }
  if (relocation_depth > 0 && candidate_sets != 2) {
    return bad("relocate=" + std::to_string(relocation_depth) + " needs sets=2 (a row has no other set to move to)");
  }
  if (admission != AdmissionRule::kAlways && admission != AdmissionRule::kEstimateAtLeast &&
      admission != AdmissionRule::kEstimateGreater && admission != AdmissionRule::kReuseDistance) {
    return bad("admission rule " + std::to_string(int(admission)) + " is unknown");
  }
  if (victim_order != VictimOrder::kLowestEstimateThenOldest && victim_order != VictimOrder::kOldest) {
    return bad("victim order " + std::to_string(int(victim_order)) + " is unknown");
  }
  if (!(warm_admit_probability >= 0.0 && warm_admit_probability <= 1.0)) {  // also rejects NaN
    return bad("warm_p=" + std::to_string(warm_admit_probability) + " must be in [0, 1]");
  }
  if (!(stale_after >= 0.0 && stale_after <= 1024.0)) {  // also rejects NaN
    return bad("stale=" + std::to_string(stale_after) + " must be 0 (off) or a multiple of the capacity in (0, 1024]");
  }
  // Each halving walks the whole sketch, so a period of a handful of
  // operations turns every lookup into a sketch-sized scan: bound it below.
  if (!(halving_per_capacity == 0.0 ||
        (halving_per_capacity >= kMinHalvingPerCapacity && halving_per_capacity <= 1024.0))) {  // rejects NaN
    return bad("halving_x=" + std::to_string(halving_per_capacity) +
               " must be 0 (off) or a multiple of the capacity in [0.01, 1024]");
  }
  if (halving_period != 0 && halving_period < kMinHalvingTicks) {
    return bad("halving=" + std::to_string(halving_period) + " must be 0 (never) or at least " +
               std::to_string(kMinHalvingTicks) + " operations (each halving walks the whole sketch)");
  }
  if (halving_per_capacity > 0.0 && halving_period != 0) {
    return bad("halving=" + std::to_string(halving_period) + " and halving_x=" + std::to_string(halving_per_capacity) +
               " are exclusive (give the period in lookups or as a multiple of the capacity)");
  }
  if (counter_bits != 4 && counter_bits != 8) {
    return bad("counter_bits=" + std::to_string(counter_bits) + " must be 4 or 8");
  }
  const uint32_t counter_max = (1u << counter_bits) - 1;
  if (warm_threshold > counter_max) {
    return bad("warm_threshold=" + std::to_string(warm_threshold) + " exceeds the counter maximum " +
               std::to_string(counter_max));
  }
  if (sketch_depth < 1 || sketch_depth > 8) {
    return bad("sketch_depth=" + std::to_string(sketch_depth) + " must be in 1..8");
  }
  if (sketch_bytes != 0 && (sketch_bytes < kMinSketchBytes || sketch_bytes > kMaxSketchBytes)) {
    return bad("sketch_bytes=" + std::to_string(sketch_bytes) + " must be 0 (size from capacity) or in 64..4 GiB");
  }
  if (!(ghost_per_row > 0.0 && ghost_per_row <= 1024.0)) {  // also rejects NaN
    return bad("ghost_x=" + std::to_string(ghost_per_row) + " must be in (0, 1024] bytes per cached row");
  }
  if (ghost_epoch_bits < 2 || ghost_epoch_bits > 8) {
    return bad("ghost_bits=" + std::to_string(ghost_epoch_bits) + " must be in 2..8");
  }
  if (ghost_epochs < 1 || ghost_epochs > 1024) {
    return bad("ghost_epochs=" + std::to_string(ghost_epochs) + " must be in 1..1024");
  }
  return Status::OK();
}

Result<RowCacheConfig> RowCacheConfig::Preset(std::string_view name) {
  const PresetEntry* p = FindPreset(name);
  if (p == nullptr) {
    return Status::InvalidArgument("unknown row cache preset '" + std::string(name) + "' (known: " + PresetNames() +
                                   ")");
  }
  return p->make();
}

Result<RowCacheConfig> RowCacheConfig::FromSpec(std::string_view spec) {
  std::vector<std::string_view> tokens;
  for (std::string_view rest = spec;;) {
    size_t comma = rest.find(',');
    tokens.push_back(Trim(rest.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  size_t first_override = 0;
  RowCacheConfig config;
  std::string preset_name;
  if (!tokens.empty() && tokens[0].find('=') == std::string_view::npos) {
    if (tokens[0].empty() && tokens.size() == 1) {
      return Status::InvalidArgument("empty row cache spec (give a preset: " + PresetNames() + ")");
    }
    ENGRAM_ASSIGN_OR_RETURN(config, Preset(tokens[0]));
    preset_name = tokens[0];
    first_override = 1;
  } else {
    config = Default();
  }
  for (size_t i = first_override; i < tokens.size(); ++i) {
    std::string_view t = tokens[i];
    size_t eq = t.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument("row cache spec '" + std::string(spec) + "': '" + std::string(t) +
                                     "' is not key=value (only the first item may be a preset name)");
    }
    ENGRAM_RETURN_IF_ERROR(ApplyOverride(spec, Trim(t.substr(0, eq)), Trim(t.substr(eq + 1)), &config));
  }
  // The name says which preset this is only while it still is that preset.
  config.name = "custom";
  if (!preset_name.empty()) {
    RowCacheConfig preset = FindPreset(preset_name)->make();
    config.name = preset.name;
    if (!(config == preset)) config.name = "custom";
  }
  ENGRAM_RETURN_IF_ERROR(config.Validate().WithContext("row cache spec '" + std::string(spec) + "'"));
  return config;
}

std::string RowCacheConfig::ToSpec() const {
  std::string s;
  if (const PresetEntry* p = FindPreset(name); p != nullptr && p->make() == *this) {
    s = name;
    s += ',';
  }
  char warm[64];
  auto r = std::to_chars(warm, warm + sizeof(warm), warm_admit_probability);  // shortest round-trip form
  char stale[64];
  auto rs = std::to_chars(stale, stale + sizeof(stale), stale_after);
  char halving_x[64];
  auto rh = std::to_chars(halving_x, halving_x + sizeof(halving_x), halving_per_capacity);
  char ghost_x[64];
  auto rg = std::to_chars(ghost_x, ghost_x + sizeof(ghost_x), ghost_per_row);
  s += "ways=" + std::to_string(ways) + ",sets=" + std::to_string(candidate_sets) +
       ",relocate=" + std::to_string(relocation_depth) + ",admission=" + AdmissionName(admission) +
       ",warm_p=" + std::string(warm, r.ptr) + ",warm_threshold=" + std::to_string(warm_threshold) +
       ",stale=" + std::string(stale, rs.ptr) + ",victim=" + VictimName(victim_order) +
       ",sketch_bytes=" + std::to_string(sketch_bytes) + ",sketch_depth=" + std::to_string(sketch_depth) +
       ",sketch_layout=" + (sketch_blocked ? "blocked" : "rows") + ",counter_bits=" + std::to_string(counter_bits) + ",update=" + (conservative_update ? "conservative" : "all") +
       ",halving=" + std::to_string(halving_period) + ",halving_x=" + std::string(halving_x, rh.ptr) +
       ",ghost_x=" + std::string(ghost_x, rg.ptr) + ",ghost_bits=" + std::to_string(ghost_epoch_bits) +
       ",ghost_epochs=" + std::to_string(ghost_epochs) + ",seed=" + std::to_string(seed);
  return s;
}

}  // namespace engram
