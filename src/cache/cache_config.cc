// RowCacheConfig: validation, named presets and the "preset,key=value" spec.
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "engram/cache_policy.h"
#include "src/cache/cache_config.h"

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

// The default policy: what Engram Store runs when nothing is configured.
// Why each choice, and what it was measured against: docs/cache-policy.md.
RowCacheConfig Default() {
  RowCacheConfig c = Legacy();
  c.name = "default";
  c.ways = 5;
  c.candidate_sets = 2;
  c.relocation_depth = 2;
  c.admission = AdmissionRule::kReuseDistance;
  c.ghost_per_row = 2.0;
  c.ghost_epoch_bits = 3;
  c.ghost_epochs = 3;
  c.sketch_bytes = 0;
  c.sketch_depth = 2;
  c.counter_bits = 4;
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

// ---- the spec's keys -----------------------------------------------------
// Every key is one row of kSpecKeys: the parser, the unknown-key message and
// ToSpec (in the table's order) all read it.

template <typename T>
struct Choice {
  const char* name;
  T value;
  bool alias = false;  // accepted, never written (the canonical name comes first)
};

constexpr Choice<AdmissionRule> kAdmissionChoices[] = {
    {"always", AdmissionRule::kAlways},          {"ge", AdmissionRule::kEstimateAtLeast},
    {">=", AdmissionRule::kEstimateAtLeast, true}, {"gt", AdmissionRule::kEstimateGreater},
    {">", AdmissionRule::kEstimateGreater, true},  {"reuse", AdmissionRule::kReuseDistance},
    {"adaptive", AdmissionRule::kAdaptiveReuse},
};
constexpr Choice<VictimOrder> kVictimChoices[] = {
    {"estimate", VictimOrder::kLowestEstimateThenOldest},
    {"oldest", VictimOrder::kOldest},
    {"lru", VictimOrder::kOldest, true},
};
constexpr Choice<bool> kUpdateChoices[] = {{"all", false}, {"conservative", true}};
constexpr Choice<bool> kSketchLayoutChoices[] = {{"rows", false}, {"blocked", true}};

template <auto Field>
Status ParseUnsignedField(std::string_view spec, std::string_view key, std::string_view v, RowCacheConfig* c) {
  return ParseUnsigned(spec, key, v, &(c->*Field));
}
template <auto Field>
std::string FormatUnsignedField(const RowCacheConfig& c) {
  return std::to_string(c.*Field);
}

template <auto Field>
Status ParseDoubleField(std::string_view spec, std::string_view key, std::string_view v, RowCacheConfig* c) {
  return ParseDouble(spec, key, v, &(c->*Field));
}
template <auto Field>
std::string FormatDoubleField(const RowCacheConfig& c) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), c.*Field);  // shortest round-trip form
  return std::string(buf, r.ptr);
}

template <auto Field, const auto& kChoices>
Status ParseChoiceField(std::string_view spec, std::string_view key, std::string_view v, RowCacheConfig* c) {
  std::string want = "one of ";
  for (const auto& choice : kChoices) {
    if (v == choice.name) {
      c->*Field = choice.value;
      return Status::OK();
    }
    if (!choice.alias) want += std::string(want.size() > 7 ? ", " : "") + choice.name;
  }
  return BadValue(spec, key, v, want);
}
template <auto Field, const auto& kChoices>
std::string FormatChoiceField(const RowCacheConfig& c) {
  for (const auto& choice : kChoices) {
    if (!choice.alias && choice.value == c.*Field) return choice.name;
  }
  return "?";
}

struct SpecKey {
  const char* key;
  Status (*parse)(std::string_view spec, std::string_view key, std::string_view value, RowCacheConfig* c);
  std::string (*format)(const RowCacheConfig& c);
};

template <auto Field>
constexpr SpecKey UnsignedKey(const char* key) {
  return {key, &ParseUnsignedField<Field>, &FormatUnsignedField<Field>};
}
template <auto Field>
constexpr SpecKey DoubleKey(const char* key) {
  return {key, &ParseDoubleField<Field>, &FormatDoubleField<Field>};
}
template <auto Field, const auto& kChoices>
constexpr SpecKey ChoiceKey(const char* key) {
  return {key, &ParseChoiceField<Field, kChoices>, &FormatChoiceField<Field, kChoices>};
}

using C = RowCacheConfig;
constexpr SpecKey kSpecKeys[] = {
    UnsignedKey<&C::ways>("ways"),
    UnsignedKey<&C::candidate_sets>("sets"),
    UnsignedKey<&C::relocation_depth>("relocate"),
    ChoiceKey<&C::admission, kAdmissionChoices>("admission"),
    DoubleKey<&C::warm_admit_probability>("warm_p"),
    UnsignedKey<&C::warm_threshold>("warm_threshold"),
    DoubleKey<&C::stale_after>("stale"),
    ChoiceKey<&C::victim_order, kVictimChoices>("victim"),
    UnsignedKey<&C::sketch_bytes>("sketch_bytes"),
    UnsignedKey<&C::sketch_depth>("sketch_depth"),
    ChoiceKey<&C::sketch_blocked, kSketchLayoutChoices>("sketch_layout"),
    UnsignedKey<&C::counter_bits>("counter_bits"),
    ChoiceKey<&C::conservative_update, kUpdateChoices>("update"),
    UnsignedKey<&C::halving_period>("halving"),
    DoubleKey<&C::halving_per_capacity>("halving_x"),
    DoubleKey<&C::ghost_per_row>("ghost_x"),
    UnsignedKey<&C::ghost_epoch_bits>("ghost_bits"),
    UnsignedKey<&C::ghost_epochs>("ghost_epochs"),
    UnsignedKey<&C::seed>("seed"),
};

Status ApplyOverride(std::string_view spec, std::string_view key, std::string_view v, RowCacheConfig* c) {
  for (const SpecKey& k : kSpecKeys) {
    if (key == k.key) return k.parse(spec, key, v, c);
  }
  std::string known;
  for (const SpecKey& k : kSpecKeys) known += std::string(known.empty() ? "" : ", ") + k.key;
  return Status::InvalidArgument("row cache spec '" + std::string(spec) + "': unknown key '" + std::string(key) +
                                 "' (known: " + known + ")");
}

}  // namespace

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
      admission != AdmissionRule::kEstimateGreater && admission != AdmissionRule::kReuseDistance &&
      admission != AdmissionRule::kAdaptiveReuse) {
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
  for (const SpecKey& k : kSpecKeys) {
    if (&k != &kSpecKeys[0]) s += ',';
    s += k.key;
    s += '=';
    s += k.format(*this);
  }
  return s;
}

Result<std::string> CanonicalCachePolicy(std::string_view spec) {
  ENGRAM_ASSIGN_OR_RETURN(RowCacheConfig config, RowCacheConfig::FromSpec(spec));
  return config.ToSpec();
}

}  // namespace engram
