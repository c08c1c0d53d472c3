#include "src/replay/replay_command.h"

#include <cerrno>
#include <cstdio>
#include <memory>

#include "engram/hasher.h"
#include "src/replay/cli_values.h"
#include "src/replay/gather_trace.h"
#include "src/replay/policy_runner.h"
#include "src/replay/replay_output.h"
#include "src/replay/request_spec.h"
#include "src/replay/trace_files.h"
#include "src/replay/trace_index.h"
#include "storage/input_files.h"

namespace engram::replay {
namespace {

Result<GatherTrace> LoadTrace(const ReplayArgs& args) {
  if (args.requests.empty() == args.rows_path.empty())
    return Status::InvalidArgument("give either --request (one or more) or --rows, not both");
  if (!args.rows_path.empty()) {
    ENGRAM_ASSIGN_OR_RETURN(std::vector<uint64_t> rows, ReadRowTrace(args.rows_path));
    return TraceFromRows(rows, args.rows_path);
  }
  if (args.layout_path.empty()) return Status::InvalidArgument("--request needs --layout");
  std::vector<RequestSpec> specs;
  for (const std::string& r : args.requests) {
    ENGRAM_ASSIGN_OR_RETURN(RequestSpec spec, RequestSpec::Parse(r));
    specs.push_back(std::move(spec));
  }
  ENGRAM_ASSIGN_OR_RETURN(EngramHashLayout layout, EngramHashLayout::FromFile(args.layout_path, args.layer));
  std::shared_ptr<const TokenMap> map;
  if (!args.token_map_path.empty()) {
    ENGRAM_ASSIGN_OR_RETURN(TokenMap m, TokenMap::FromFile(args.token_map_path));
    map = std::make_shared<TokenMap>(std::move(m));
  }
  ENGRAM_ASSIGN_OR_RETURN(NgramHasher hasher, NgramHasher::Create(std::move(layout), map));
  return BuildTraceFromRequests(hasher, specs);
}

// The capacity in rows that sweeps scale and tables group by; with
// --cache-bytes it is budget / row_bytes (the bounds' capacity).
Result<uint64_t> BaseCapacity(const ReplayArgs& args) {
  if (args.capacity_rows && args.cache_bytes)
    return Status::InvalidArgument("give --capacity-rows or --cache-bytes, not both");
  if (args.capacity_rows) {
    if (*args.capacity_rows == 0) return Status::InvalidArgument("--capacity-rows must be > 0");
    return *args.capacity_rows;
  }
  if (args.cache_bytes) {
    if (args.row_bytes == 0) return Status::InvalidArgument("--row-bytes must be > 0");
    auto bytes = ParseSize(*args.cache_bytes);
    if (!bytes.ok()) return bytes.status().WithContext("--cache-bytes");
    const uint64_t rows = *bytes / args.row_bytes;
    if (rows == 0) return Status::InvalidArgument("--cache-bytes " + *args.cache_bytes + " holds no row");
    return rows;
  }
  return 0;  // only valid with an explicit-rows sweep
}

}  // namespace

Result<std::string> RunReplay(const ReplayArgs& args) {
  if (args.policies.empty()) return Status::InvalidArgument("no --policy given");
  for (const std::string& p : args.policies) ENGRAM_RETURN_IF_ERROR(ValidatePolicy(p));
  ENGRAM_ASSIGN_OR_RETURN(uint64_t base, BaseCapacity(args));
  std::vector<uint64_t> capacities;
  if (!args.sweep.empty()) {
    ENGRAM_ASSIGN_OR_RETURN(capacities, ParseSweep(args.sweep, base));
  } else {
    if (base == 0) return Status::InvalidArgument("give --capacity-rows or --cache-bytes");
    capacities.push_back(base);
  }
  if ((!args.csv_path.empty() || !args.plot_path.empty()) && args.sweep.empty())
    return Status::InvalidArgument("--csv and --plot need --sweep");

  RunOptions options;
  options.threads = args.threads;
  if (args.sketch_bytes) {
    auto s = ParseSize(*args.sketch_bytes);
    if (!s.ok()) return s.status().WithContext("--sketch-bytes");
    options.sketch_bytes = *s;
  }

  ENGRAM_ASSIGN_OR_RETURN(GatherTrace trace, LoadTrace(args));
  if (!args.export_rows_path.empty()) ENGRAM_RETURN_IF_ERROR(WriteRowTrace(args.export_rows_path, trace.rows));
  const TraceIndex index = TraceIndex::Build(trace);

  std::vector<PolicyJob> jobs;
  for (uint64_t c : capacities) {
    for (const std::string& p : args.policies) {
      PolicyJob job{p, c};
      if (args.cache_bytes) {
        // A budget: RowCache policies pay for their index out of it.
        job.budget_bytes = c * args.row_bytes;
        job.row_bytes = args.row_bytes;
      }
      jobs.push_back(job);
    }
  }
  ENGRAM_ASSIGN_OR_RETURN(std::vector<PolicyRun> runs, RunPolicies(jobs, trace, options, &index));

  std::string out;
  if (args.json) {
    out = FormatJsonLines(runs, trace);
  } else {
    for (size_t c = 0; c < capacities.size(); ++c) {
      if (c) out += "\n";
      if (capacities.size() > 1) out += "== capacity " + std::to_string(capacities[c]) + " rows ==\n";
      std::span<const PolicyRun> group(runs.data() + c * args.policies.size(), args.policies.size());
      out += FormatTable(group, trace, index.distinct_rows);
    }
  }
  if (!args.sweep.empty()) {
    const std::string csv = FormatSweepCsv(runs);
    std::string csv_path = args.csv_path;
    if (csv_path.empty() && !args.plot_path.empty()) csv_path = args.plot_path + ".csv";
    if (csv_path.empty()) {
      out += "\n" + csv;
    } else {
      ENGRAM_RETURN_IF_ERROR(CheckNotAnInput(csv_path, "--csv"));
      std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(csv_path.c_str(), "w"), &std::fclose);
      if (!f) return Status::FromErrno("--csv " + csv_path, errno);
      if (std::fwrite(csv.data(), 1, csv.size(), f.get()) != csv.size() || std::fclose(f.release()) != 0)
        return Status::FromErrno("write " + csv_path, errno);
    }
    if (!args.plot_path.empty()) {
      std::string title = "engram-replay miss ratio: " + std::to_string(trace.requests()) + " requests, " +
                          std::to_string(index.distinct_rows) + " distinct rows";
      ENGRAM_RETURN_IF_ERROR(PlotSweep(csv_path, args.plot_path, args.policies.size(), title));
    }
  }
  return out;
}

}  // namespace engram::replay
