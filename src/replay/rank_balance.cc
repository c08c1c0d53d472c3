#include "src/replay/rank_balance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "engram/hasher.h"
#include "src/ngram/scaled_layout.h"
#include "src/replay/gather_trace.h"
#include "src/replay/policy_runner.h"
#include "src/replay/trace_files.h"
#include "src/replay/trace_index.h"

namespace engram::replay {
namespace {

// The requests' tokens, read once and hashed for every rank.
struct Requests {
  std::vector<std::vector<uint32_t>> tokens;
  std::vector<SplitSpec> splits;
  std::vector<std::string> names;
};

Result<Requests> ReadRequests(const std::vector<RequestSpec>& specs) {
  Requests r;
  for (const RequestSpec& spec : specs) {
    ENGRAM_ASSIGN_OR_RETURN(std::vector<uint32_t> tokens, ReadTokenFile(spec.path));
    r.tokens.push_back(std::move(tokens));
    r.splits.push_back(spec.split);
    r.names.push_back(spec.path);
  }
  return r;
}

struct Layer {
  EngramHashLayout layout;
  uint64_t unsharded_capacity = 0;
};

// One rank of one split: its slots of every layer, replayed layer by layer,
// each through its own cache.
Result<RankMisses> ReplayRank(const std::vector<Layer>& layers, const std::shared_ptr<const TokenMap>& map,
                              const Requests& requests, const std::string& policy, SlotAssignment assignment,
                              uint32_t ranks, uint32_t rank) {
  RankMisses out;
  out.rank = rank;
  for (const Layer& layer : layers) {
    ENGRAM_ASSIGN_OR_RETURN(std::vector<uint32_t> slots,
                            AssignedSlots(assignment, layer.layout.rows_per_token(), ranks, rank));
    if (out.slots.empty()) out.slots = slots;
    ENGRAM_ASSIGN_OR_RETURN(NgramHasher hasher, NgramHasher::Create(layer.layout, map, std::move(slots)));
    ENGRAM_ASSIGN_OR_RETURN(GatherTrace trace,
                            BuildTraceFromTokens(hasher, requests.tokens, requests.splits, requests.names));
    // The rank's share of the layer's rows, so the ranks' caches add up to
    // the unsharded one.
    const double share = double(hasher.table_rows()) / double(layer.layout.total_rows);
    const uint64_t capacity = std::max<uint64_t>(1, std::llround(double(layer.unsharded_capacity) * share));
    const PolicyJob job{policy, capacity};
    RunOptions run;
    run.threads = 1;
    ENGRAM_ASSIGN_OR_RETURN(std::vector<PolicyRun> runs, RunPolicies({&job, 1}, trace, run));
    const RequestStats total = runs[0].Total();
    out.table_rows += hasher.table_rows();
    out.capacity_rows += capacity;
    out.lookups += total.cache.lookups;
    out.misses += total.cache.misses;
  }
  return out;
}

Result<RankSplit> ReplaySplit(const std::vector<Layer>& layers, const std::shared_ptr<const TokenMap>& map,
                              const Requests& requests, const std::string& policy, SlotAssignment assignment,
                              uint32_t ranks) {
  RankSplit split;
  split.ranks = ranks;
  split.assignment = assignment;
  for (uint32_t r = 0; r < ranks; ++r) {
    ENGRAM_ASSIGN_OR_RETURN(RankMisses m, ReplayRank(layers, map, requests, policy, assignment, ranks, r));
    split.per_rank.push_back(std::move(m));
  }
  return split;
}

}  // namespace

const char* SlotAssignmentName(SlotAssignment a) {
  return a == SlotAssignment::kStrided ? "strided" : "contiguous";
}

Result<std::vector<uint32_t>> AssignedSlots(SlotAssignment assignment, uint32_t slot_count, uint32_t ranks,
                                            uint32_t rank) {
  // The strided helper also checks ranks and rank for the contiguous split.
  ENGRAM_ASSIGN_OR_RETURN(std::vector<uint32_t> strided, StridedRankSlots(slot_count, ranks, rank));
  if (assignment == SlotAssignment::kStrided) return strided;
  const uint32_t base = slot_count / ranks, larger = slot_count % ranks;
  const uint32_t first = rank * base + std::min(rank, larger);
  std::vector<uint32_t> slots(base + (rank < larger ? 1 : 0));
  for (uint32_t j = 0; j < slots.size(); ++j) slots[j] = first + j;
  return slots;
}

uint64_t RankSplit::total_misses() const {
  uint64_t sum = 0;
  for (const RankMisses& m : per_rank) sum += m.misses;
  return sum;
}

double RankSplit::max_over_mean() const {
  if (per_rank.empty() || total_misses() == 0) return 1.0;
  uint64_t most = 0;
  for (const RankMisses& m : per_rank) most = std::max(most, m.misses);
  return double(most) * double(per_rank.size()) / double(total_misses());
}

Result<RankBalanceReport> RunRankBalance(const RankBalanceOptions& options) {
  if (options.requests.empty()) return Status::InvalidArgument("no requests to replay");
  if (options.layers.empty()) return Status::InvalidArgument("no layers to replay");
  if (!(options.pressure > 0) || !std::isfinite(options.pressure)) {
    return Status::InvalidArgument("pressure must be a positive number");
  }
  if (options.capacity_rows && *options.capacity_rows == 0) {
    return Status::InvalidArgument("capacity must be at least one row");
  }
  ENGRAM_RETURN_IF_ERROR(ValidatePolicy(options.policy));
  std::shared_ptr<const TokenMap> map;
  if (!options.token_map_path.empty()) {
    ENGRAM_ASSIGN_OR_RETURN(TokenMap m, TokenMap::FromFile(options.token_map_path));
    map = std::make_shared<TokenMap>(std::move(m));
  }
  ENGRAM_ASSIGN_OR_RETURN(Requests requests, ReadRequests(options.requests));

  RankBalanceReport report;
  report.policy = options.policy;
  report.requests = options.requests.size();
  report.layers = options.layers;
  std::vector<Layer> layers;
  for (uint32_t index : options.layers) {
    ENGRAM_ASSIGN_OR_RETURN(EngramHashLayout layout, EngramHashLayout::FromFile(options.layout_path, index));
    if (options.rows_per_table != 0) {
      ENGRAM_ASSIGN_OR_RETURN(layout, ScaleLayout(layout, options.rows_per_table));
    }
    Layer layer{std::move(layout), 0};
    if (options.capacity_rows) {
      layer.unsharded_capacity = *options.capacity_rows;
    } else {
      ENGRAM_ASSIGN_OR_RETURN(NgramHasher hasher, NgramHasher::Create(layer.layout, map));
      ENGRAM_ASSIGN_OR_RETURN(GatherTrace trace,
                              BuildTraceFromTokens(hasher, requests.tokens, requests.splits, requests.names));
      const uint64_t distinct = TraceIndex::Build(trace).distinct_rows;
      layer.unsharded_capacity = std::max<uint64_t>(1, std::llround(double(distinct) / options.pressure));
    }
    report.unsharded_capacity_rows.push_back(layer.unsharded_capacity);
    if (!layers.empty() && layer.layout.rows_per_token() != layers[0].layout.rows_per_token()) {
      return Status::InvalidArgument("layer " + std::to_string(index) + " has " +
                                     std::to_string(layer.layout.rows_per_token()) + " slots, layer " +
                                     std::to_string(options.layers[0]) + " has " +
                                     std::to_string(layers[0].layout.rows_per_token()));
    }
    layers.push_back(std::move(layer));
  }
  for (uint32_t ranks : options.rank_counts) {
    // Checked before any replay: a bad count fails at once.
    ENGRAM_RETURN_IF_ERROR(StridedRankSlots(layers[0].layout.rows_per_token(), ranks, 0).status());
  }
  ENGRAM_ASSIGN_OR_RETURN(report.unsharded,
                          ReplaySplit(layers, map, requests, options.policy, SlotAssignment::kStrided, 1));
  for (uint32_t ranks : options.rank_counts) {
    for (SlotAssignment a : {SlotAssignment::kStrided, SlotAssignment::kContiguous}) {
      ENGRAM_ASSIGN_OR_RETURN(RankSplit split, ReplaySplit(layers, map, requests, options.policy, a, ranks));
      report.splits.push_back(std::move(split));
    }
  }
  return report;
}

std::string FormatRankBalanceTable(const RankBalanceReport& report) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "missed rows (disk reads) per rank: %zu requests, %zu layers, policy %s\n",
                report.requests, report.layers.size(), report.policy.c_str());
  out += line;
  out += "unsharded cache per layer (rows):";
  for (uint64_t c : report.unsharded_capacity_rows) out.append(" ").append(std::to_string(c));
  out += "; rank r's cache = that x its share of the layer's rows\n";
  std::snprintf(line, sizeof line, "%5s  %-10s  %9s  %12s  %s\n", "ranks", "slots", "max/mean", "total",
                "missed rows per rank (rank 0, 1, ...)");
  out += line;
  auto add = [&](const RankSplit& s, const char* name) {
    std::snprintf(line, sizeof line, "%5u  %-10s  %9.3f  %12llu  ", s.ranks, name, s.max_over_mean(),
                  (unsigned long long)s.total_misses());
    out += line;
    for (size_t r = 0; r < s.per_rank.size(); ++r) {
      if (r != 0) out += ' ';
      out += std::to_string(s.per_rank[r].misses);
    }
    out += "\n";
  };
  add(report.unsharded, "all");
  for (const RankSplit& s : report.splits) add(s, SlotAssignmentName(s.assignment));
  return out;
}

std::string FormatRankBalanceJsonLines(const RankBalanceReport& report) {
  std::string out;
  auto add = [&](const RankSplit& s) {
    for (const RankMisses& m : s.per_rank) {
      nlohmann::ordered_json j;
      j["ranks"] = s.ranks;
      j["assignment"] = SlotAssignmentName(s.assignment);
      j["rank"] = m.rank;
      j["slots"] = m.slots;
      j["table_rows"] = m.table_rows;
      j["capacity_rows"] = m.capacity_rows;
      j["lookups"] = m.lookups;
      j["misses"] = m.misses;
      j["max_over_mean"] = s.max_over_mean();
      out += j.dump() + "\n";
    }
  };
  add(report.unsharded);
  for (const RankSplit& s : report.splits) add(s);
  return out;
}

}  // namespace engram::replay
