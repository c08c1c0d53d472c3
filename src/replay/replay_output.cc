#include "src/replay/replay_output.h"

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/common/gnuplot.h"

namespace engram::replay {
namespace {

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string Grouped(uint64_t v) {
  const std::string digits = std::to_string(v);
  std::string s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

std::string Pad(const std::string& s, size_t width, bool left = false) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}

}  // namespace

std::string FormatJsonLines(std::span<const PolicyRun> runs, const GatherTrace& trace) {
  std::string out;
  for (const PolicyRun& run : runs) {
    for (size_t r = 0; r < run.requests.size(); ++r) {
      const RequestStats& s = run.requests[r];
      nlohmann::ordered_json j;
      j["policy"] = run.policy;
      j["spec"] = run.spec;
      j["request"] = r + 1;
      j["name"] = r < trace.request_names.size() ? trace.request_names[r] : "";
      j["gathers"] = s.gathers;
      j["lookups"] = s.cache.lookups;
      j["hits"] = s.cache.hits;
      j["misses"] = s.cache.misses;
      j["hit_rate"] = s.cache.hit_rate();
      j["inserts"] = s.cache.inserts;
      j["evictions"] = s.cache.evictions;
      j["refusals"] = s.cache.total_refusals();
      for (int i = 0; i < static_cast<int>(RefusalReason::kCount); ++i)
        j[std::string("refusals_") + RefusalReasonName(static_cast<RefusalReason>(i))] = s.cache.refusals[i];
      j["relocations"] = s.cache.relocations;
      j["resident_rows"] = s.cache.resident_rows;
      j["capacity_rows"] = s.cache.capacity_rows;
      out += j.dump();
      out += '\n';
    }
  }
  return out;
}

std::string FormatTable(std::span<const PolicyRun> runs, const GatherTrace& trace,
                        std::optional<uint64_t> distinct_rows) {
  std::string out;
  uint64_t lookups = trace.rows.size();
  out += std::to_string(trace.requests()) + " requests, " + Grouped(trace.gathers()) + " gathers, " +
         Grouped(lookups) + " lookups (distinct rows per gather)";
  if (distinct_rows) out += ", " + Grouped(*distinct_rows) + " distinct rows";
  out += "\n";
  for (size_t r = 0; r < trace.requests(); ++r)
    out += "  req" + std::to_string(r + 1) + " = " + trace.request_names[r] + " (" +
           Grouped(trace.request_end[r] - trace.request_begin(r)) + " gathers)\n";
  out += "\n";

  // Belady misses per capacity, for the avoidable-miss ratio.
  std::map<uint64_t, uint64_t> optimum;
  for (const PolicyRun& run : runs)
    if (run.policy == "belady") optimum[run.requested_capacity_rows] = run.Total().cache.misses;
  const bool avoidable = distinct_rows && !optimum.empty();

  size_t name_width = 6;
  for (const PolicyRun& run : runs) name_width = std::max(name_width, run.policy.size());
  std::string header = Pad("policy", name_width, true);
  for (size_t r = 0; r < trace.requests(); ++r) header += Pad("req" + std::to_string(r + 1), 8);
  header += Pad("capacity", 11) + Pad("misses", 11) + Pad("evictions", 11) + Pad("refusals", 10) +
            Pad("relocations", 12) + Pad("filled", 8);
  if (avoidable) header += Pad("avoidable/opt", 14);
  out += "hit rate % per request\n" + header + "\n";
  for (const PolicyRun& run : runs) {
    std::string line = Pad(run.policy, name_width, true);
    for (const RequestStats& s : run.requests) line += Pad(Fixed(100.0 * s.cache.hit_rate(), 2), 8);
    const RequestStats t = run.Total();
    line += Pad(Grouped(run.capacity_rows), 11) + Pad(Grouped(t.cache.misses), 11) + Pad(Grouped(t.cache.evictions), 11) +
            Pad(Grouped(t.cache.total_refusals()), 10) + Pad(Grouped(t.cache.relocations), 12) +
            Pad(Fixed(run.capacity_rows ? 100.0 * t.cache.resident_rows / run.capacity_rows : 0.0, 1) + "%", 8);
    if (avoidable) {
      auto it = optimum.find(run.requested_capacity_rows);
      std::string ratio = "-";
      if (it != optimum.end() && it->second > *distinct_rows)
        ratio = Fixed(double(t.cache.misses - *distinct_rows) / double(it->second - *distinct_rows), 2) + "x";
      line += Pad(ratio, 14);
    }
    out += line + "\n";
  }
  return out;
}

std::string FormatSweepCsv(std::span<const PolicyRun> runs) {
  std::vector<std::string> policies;
  std::map<uint64_t, std::map<std::string, double>> table;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (std::find(policies.begin(), policies.end(), runs[i].policy) == policies.end())
      policies.push_back(runs[i].policy);
    const RequestStats t = runs[i].Total();
    table[runs[i].requested_capacity_rows][runs[i].policy] =
        t.cache.lookups ? double(t.cache.misses) / double(t.cache.lookups) : 0.0;
  }
  std::string out = "capacity_rows";
  for (const std::string& p : policies) out += "," + p;
  out += "\n";
  for (const auto& [capacity, ratios] : table) {
    out += std::to_string(capacity);
    for (const std::string& p : policies) {
      out += ',';
      if (auto it = ratios.find(p); it != ratios.end()) out += Fixed(it->second, 6);
    }
    out += "\n";
  }
  return out;
}

Status PlotSweep(const std::string& csv_path, const std::string& png_path, size_t policies, const std::string& title) {
  // Paths and title are ARG1..ARG3 (see RunGnuplot): never parsed by gnuplot or a shell.
  const std::string script =
      "set datafile separator ','\n"
      "set terminal pngcairo size 960,600 noenhanced\n"
      "set output ARG1\n"
      "set title ARG3\n"
      "set xlabel 'cache capacity (million rows)'\n"
      "set ylabel 'miss ratio (misses / lookups)'\n"
      "set xrange [0:*]\n"
      "set key outside right top\n"
      "set grid\n"
      "plot for [i=2:" + std::to_string(policies + 1) + "] ARG2" +
      " using ($1/1e6):i with linespoints lw 2 title columnheader(i)\n";
  return RunGnuplot(script, {png_path, csv_path, title}, png_path);
}

}  // namespace engram::replay
