#include "src/workload/restart_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "storage/file_util.h"

namespace engram {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Runs every gather of the traces (gather g of every table at once) through
// `store`; records them in *curve (if given) from gather `record_from` on,
// and stops after `limit` gathers.
Status RunPass(Store& store, const ReportWorkload& w, Clock::time_point t0, RestartCurve* curve, size_t limit,
               double compute_ms = 0) {
  const size_t tables = w.traces.size();
  const size_t gathers = std::min(limit, w.traces[0].gathers());
  std::vector<std::vector<std::byte>> bufs(tables);
  std::vector<GatherTicket> tickets(tables);
  for (size_t g = 0; g < gathers; ++g) {
    for (size_t t = 0; t < tables; ++t) {
      const auto& tr = w.traces[t];
      std::span<const uint64_t> ids(tr.rows.data() + tr.gather_begin(g), tr.gather_end[g] - tr.gather_begin(g));
      bufs[t].resize(std::max<size_t>(1, ids.size()) * w.record_bytes);
      tickets[t] = store.StartGather(t, ids, bufs[t].data(), w.record_bytes);
    }
    uint64_t hits = 0, lookups = 0;
    for (auto& ticket : tickets) {
      GatherResult r = ticket.Wait();
      if (!r.status.ok()) return r.status.WithContext("gather " + std::to_string(g));
      hits += r.hits;
      lookups += r.hits + r.misses;
    }
    if (curve) {
      curve->hits.push_back(hits);
      curve->lookups.push_back(lookups);
      curve->seconds.push_back(SecondsSince(t0));
    }
    if (compute_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(compute_ms));
  }
  return Status::OK();
}

void DropPageCache(const ReportWorkload& w, bool drop) {
  if (!drop) return;
  for (const auto& p : w.table_paths) fileutil::DropFromPageCache(p);
}

void AddWarmCounts(const Store& store, RestartCurve* c) {
  for (size_t t = 0; t < store.table_count(); ++t) {
    TableStats s = store.Stats(t);
    c->warm_rows += s.warm_rows;
    c->warm_skipped_rows += s.warm_skipped_rows;
  }
}

}  // namespace

double RestartCurve::HitRate(size_t begin, size_t end) const {
  end = std::min(end, hits.size());
  uint64_t h = 0, l = 0;
  for (size_t g = begin; g < end; ++g) h += hits[g], l += lookups[g];
  return l ? double(h) / double(l) : 0.0;
}

size_t RestartReport::GathersToReach(const RestartCurve& c) const {
  const size_t n = std::min(c.hits.size(), before.hits.size());
  for (size_t g = 0; g < n; ++g) {
    const size_t begin = g + 1 >= window ? g + 1 - window : 0;
    if (c.HitRate(begin, g + 1) >= reach * before.HitRate(begin, g + 1)) return g + 1;
  }
  return 0;
}

std::string RestartReport::Format() const {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "reference (no restart): hit rate of the first %zu gathers %.4f, of the whole pass %.4f (%zu gathers)\n",
                first_gathers, before.HitRate(0, first_gathers), before.HitRate(0, before.hits.size()),
                before.hits.size());
  out += line;
  std::snprintf(line, sizeof line, "%-16s %10s %7s %14s %16s %18s %10s %10s\n", "after restart", "first hits",
                "x ref", "gathers to 95%", "s to 95% (open)", "s to 95% (1st gather)", "warm rows", "warm-up s");
  out += line;
  const size_t cold_reach = after.empty() ? 0 : GathersToReach(after[0]);
  for (const RestartCurve& c : after) {
    const double first = c.HitRate(0, first_gathers);
    const double ref = before.HitRate(0, first_gathers);
    const size_t reach_g = GathersToReach(c);
    std::snprintf(line, sizeof line, "%-16s %10.4f %7.3f %14s %16s %18s %10llu %10.3f\n", c.name.c_str(), first,
                  ref > 0 ? first / ref : 0.0, reach_g ? std::to_string(reach_g).c_str() : "never",
                  reach_g ? std::to_string(c.seconds[reach_g - 1]).c_str() : "-",
                  reach_g ? std::to_string(c.seconds[reach_g - 1] - c.warm_up_seconds).c_str() : "-",
                  (unsigned long long)c.warm_rows, c.warm_up_seconds);
    out += line;
    if (&c != &after[0] && reach_g && cold_reach) {
      std::snprintf(line, sizeof line,
                    "  %s reaches 95%% %.1fx sooner than cold in gathers, %.2fx in seconds since open, %.1fx in "
                    "seconds since its first gather\n",
                    c.name.c_str(), double(cold_reach) / double(reach_g),
                    after[0].seconds[cold_reach - 1] / c.seconds[reach_g - 1],
                    after[0].seconds[cold_reach - 1] / std::max(1e-9, c.seconds[reach_g - 1] - c.warm_up_seconds));
      out += line;
    }
  }
  return out;
}

Result<RestartReport> RunRestart(const ReportWorkload& w, const RestartRunOptions& o) {
  if (o.hot_set_path.empty()) return Status::InvalidArgument("restart: a hot-set path is required");
  if (o.window == 0 || o.first_gathers == 0) return Status::InvalidArgument("restart: window and first gathers >= 1");
  RestartReport report;
  report.first_gathers = o.first_gathers;
  report.window = o.window;
  report.reach = o.reach;
  const std::string saved = o.hot_set_path + ".saved";
  std::error_code ec;
  std::filesystem::remove(o.hot_set_path, ec);
  StoreOptions base = WorkloadStoreOptions(w, o.policy, o.budget_per_table, o.io_backend);

  // 1. Two passes without a restart; the close saves the hot set.
  {
    DropPageCache(w, o.drop_page_cache);
    StoreOptions so = base;
    so.hot_set_path = o.hot_set_path;
    ENGRAM_ASSIGN_OR_RETURN(auto store, Store::Open(so));
    store->WaitForCacheMemory();
    const auto t0 = Clock::now();
    ENGRAM_RETURN_IF_ERROR(RunPass(*store, w, t0, nullptr, SIZE_MAX));
    report.before.name = "no restart";
    ENGRAM_RETURN_IF_ERROR(RunPass(*store, w, Clock::now(), &report.before, SIZE_MAX));
  }
  std::filesystem::copy_file(o.hot_set_path, saved, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return Status::IOError("restart: copy the hot set to " + saved + ": " + ec.message());

  // 2-4. Restarts.
  struct Variant {
    const char* name;
    bool hot_set;
    bool wait;
  };
  for (const Variant v : {Variant{"cold", false, false}, Variant{"warm", true, false},
                          Variant{"warm (waited)", true, true}}) {
    if (v.hot_set) {
      std::filesystem::copy_file(saved, o.hot_set_path, std::filesystem::copy_options::overwrite_existing, ec);
      if (ec) return Status::IOError("restart: restore the hot set: " + ec.message());
    }
    DropPageCache(w, o.drop_page_cache);
    StoreOptions so = base;
    if (v.hot_set) so.hot_set_path = o.hot_set_path;
    RestartCurve c;
    c.name = v.name;
    const auto t0 = Clock::now();
    ENGRAM_ASSIGN_OR_RETURN(auto store, Store::Open(so));
    if (v.wait) {
      store->WaitForWarmUp();
      c.warm_up_seconds = SecondsSince(t0);
    }
    ENGRAM_RETURN_IF_ERROR(RunPass(*store, w, t0, &c, SIZE_MAX, o.compute_ms));
    store->WaitForWarmUp();
    AddWarmCounts(*store, &c);
    report.after.push_back(std::move(c));
  }
  std::filesystem::copy_file(saved, o.hot_set_path, std::filesystem::copy_options::overwrite_existing, ec);
  return report;
}

}  // namespace engram
