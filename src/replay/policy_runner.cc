#include "src/replay/policy_runner.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "src/cache/cache_config.h"
#include "src/cache/row_cache.h"
#include "src/replay/reference_policies.h"
#include "src/replay/side_area.h"
#include "src/replay/trace_index.h"

namespace engram::replay {
namespace {

Result<RowCacheConfig> CacheConfig(std::string_view policy, const RunOptions& options) {
  ENGRAM_ASSIGN_OR_RETURN(SideAreaPolicy side, ParseSideAreaPolicy(policy));
  auto config = RowCacheConfig::FromSpec(side.cache_spec);
  if (!config.ok()) return config.status().WithContext("policy '" + std::string(policy) + "'");
  if (options.sketch_bytes) config->sketch_bytes = *options.sketch_bytes;
  Status st = config->Validate();
  if (!st.ok()) return st.WithContext("policy '" + std::string(policy) + "'");
  return config;
}

Result<PolicyRun> ReplayRowCache(const PolicyJob& job, const GatherTrace& trace, const RunOptions& options) {
  ENGRAM_ASSIGN_OR_RETURN(RowCacheConfig config, CacheConfig(job.policy, options));
  ENGRAM_ASSIGN_OR_RETURN(SideAreaPolicy side_policy, ParseSideAreaPolicy(job.policy));
  uint64_t capacity = job.capacity_rows;
  if (job.budget_bytes) {
    auto fit = RowCache::CapacityForBudget(config, job.budget_bytes, job.row_bytes, job.table_rows);
    if (!fit.ok()) return fit.status().WithContext("policy '" + job.policy + "'");
    capacity = *fit;
  }
  const uint64_t side_rows = static_cast<uint64_t>(side_policy.fraction * static_cast<double>(capacity));
  SideArea side(side_rows);
  auto created = RowCache::CreateWithCapacity(config, std::max<uint64_t>(1, capacity - side_rows), /*row_bytes=*/0,
                                             job.table_rows);
  if (!created.ok()) return created.status().WithContext("policy '" + job.policy + "'");
  std::unique_ptr<RowCache> cache = std::move(*created);
  RequestRecorder recorder;
  std::vector<uint64_t> misses;
  std::vector<InsertOutcome> outcomes;
  uint64_t side_hits = 0;  // cache misses the side area served
  for (size_t r = 0; r < trace.requests(); ++r) {
    for (uint64_t g = trace.request_begin(r); g < trace.request_end[r]; ++g) {
      misses.clear();
      for (uint64_t i = trace.gather_begin(g); i < trace.gather_end[g]; ++i) {
        if (!cache->Lookup(trace.rows[i], {})) misses.push_back(trace.rows[i]);
      }
      // The same batched insert the store makes of a gather's verified misses.
      outcomes.resize(misses.size());
      cache->InsertBatch(misses, {}, outcomes);
      for (size_t m = 0; m < misses.size(); ++m) {
        const uint64_t id = misses[m];
        const InsertOutcome outcome = outcomes[m];
        const bool in_side = side.Contains(id);
        side_hits += in_side;
        const bool kept = outcome != InsertOutcome::kRefusedLostAdmission && outcome != InsertOutcome::kRefusedAllPinned;
        if (kept && in_side) side.Remove(id);
        if (!kept && !in_side) side.Add(id);
      }
    }
    RowCacheStats stats = cache->Stats();
    stats.hits += side_hits;
    stats.misses -= side_hits;
    recorder.EndRequest(stats, trace.request_end[r] - trace.request_begin(r));
  }
  PolicyRun run;
  run.policy = job.policy;
  run.spec = cache->config().ToSpec() + (side_rows ? "+side=" + std::to_string(side_rows) + " rows" : "");
  run.capacity_rows = cache->capacity_rows() + side_rows;
  run.requests = recorder.Take();
  return run;
}

}  // namespace

bool IsReferencePolicy(std::string_view policy) {
  return policy == "full-lru" || policy == "belady" || policy == "belady-bypass";
}

Status ValidatePolicy(std::string_view policy) {
  if (IsReferencePolicy(policy)) return Status::OK();
  return CacheConfig(policy, RunOptions{}).status();
}

Result<std::vector<PolicyRun>> RunPolicies(std::span<const PolicyJob> jobs, const GatherTrace& trace,
                                           const RunOptions& options, const TraceIndex* given_index) {
  for (const PolicyJob& job : jobs) {
    ENGRAM_RETURN_IF_ERROR(ValidatePolicy(job.policy));
    if (job.capacity_rows == 0) return Status::InvalidArgument("policy '" + job.policy + "': capacity of 0 rows");
  }
  // The reference simulators share one index (dense numbering, next uses).
  std::unique_ptr<TraceIndex> built;
  const TraceIndex* index = given_index;
  for (const PolicyJob& job : jobs) {
    if (IsReferencePolicy(job.policy) && !index) {
      built = std::make_unique<TraceIndex>(TraceIndex::Build(trace));
      index = built.get();
    }
  }

  std::vector<std::optional<Result<PolicyRun>>> results(jobs.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t j; (j = next.fetch_add(1)) < jobs.size();) {
      const PolicyJob& job = jobs[j];
      if (job.policy == "full-lru") {
        results[j] = SimulateFullLru(trace, *index, job.capacity_rows);
      } else if (job.policy == "belady") {
        results[j] = SimulateBelady(trace, *index, job.capacity_rows);
      } else if (job.policy == "belady-bypass") {
        results[j] = SimulateBeladyBypass(trace, *index, job.capacity_rows);
      } else {
        results[j] = ReplayRowCache(job, trace, options);
      }
    }
  };
  const unsigned threads = std::max(1u, std::min<unsigned>(options.threads, jobs.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();

  std::vector<PolicyRun> runs;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (!results[j]->ok()) return results[j]->status();
    runs.push_back(std::move(**results[j]));
    runs.back().requested_capacity_rows = jobs[j].capacity_rows;
  }
  return runs;
}

}  // namespace engram::replay
