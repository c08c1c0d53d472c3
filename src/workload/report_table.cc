#include "src/workload/report_table.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "src/common/gnuplot.h"
#include "storage/input_files.h"

namespace engram {

namespace {

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string Thousands(uint64_t v) {
  const std::string digits = std::to_string(v);
  std::string s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

}  // namespace

std::string FormatReportTable(const std::vector<PolicyRequests>& runs) {
  if (runs.empty()) return "";
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-16s %-12s %9s %11s %11s %9s %10s %10s %10s %6s\n", "request", "policy",
                "hit rate", "evictions", "refusals", "time (s)", "rows/s", "wait cache", "wait disk", "ampl");
  out += line;
  const size_t requests = runs[0].requests.size();
  for (size_t r = 0; r < requests; ++r) {
    for (const auto& p : runs) {
      if (r >= p.requests.size()) continue;
      const RequestRunStats& s = p.requests[r];
      std::snprintf(line, sizeof line, "%-16s %-12s %8.2f%% %11s %11s %9.2f %10s %9.3fs %9.3fs %6.2f\n",
                    p.requests[r].name.c_str(), p.policy.c_str(), 100.0 * s.hit_rate(),
                    Thousands(s.evictions).c_str(), Thousands(s.refusals).c_str(), s.wall_seconds,
                    Thousands(uint64_t(s.rows_per_second() + 0.5)).c_str(),
                    double(s.cache_ns) * 1e-9, double(s.disk_ns) * 1e-9, s.read_amplification());
      out += line;
    }
  }
  out += "ampl = bytes read from disk per byte of missed row (4 KiB blocks; rows sharing a block read once)\n";
  for (const auto& p : runs) {
    if (p.requests.empty()) continue;
    const RequestRunStats& last = p.requests.back();
    out += "end of run, " + p.policy + ": " + Thousands(last.resident_rows) + " of " +
           Thousands(last.capacity_rows) + " slots filled (" +
           Fmt("%.1f", last.capacity_rows ? 100.0 * double(last.resident_rows) / double(last.capacity_rows) : 0) +
           " %)\n";
  }
  return out;
}

std::string FormatReportJsonLines(const std::vector<PolicyRequests>& runs) {
  std::string out;
  for (const auto& p : runs) {
    for (size_t r = 0; r < p.requests.size(); ++r) {
      const RequestRunStats& s = p.requests[r];
      nlohmann::json j = {{"policy", p.policy},
                          {"request", r + 1},
                          {"name", s.name},
                          {"gathers", s.gathers},
                          {"lookups", s.lookups},
                          {"hits", s.hits},
                          {"misses", s.misses},
                          {"hit_rate", s.hit_rate()},
                          {"inserts", s.inserts},
                          {"refusals", s.refusals},
                          {"evictions", s.evictions},
                          {"relocations", s.relocations},
                          {"blocks_read", s.blocks_read},
                          {"read_amplification", s.read_amplification()},
                          {"wall_seconds", s.wall_seconds},
                          {"rows", s.rows},
                          {"rows_per_second", s.rows_per_second()},
                          {"readiness_wait_seconds", double(s.wait_ns) * 1e-9},
                          {"readiness_wait_cache_seconds", double(s.cache_ns) * 1e-9},
                          {"readiness_wait_disk_seconds", double(s.disk_ns) * 1e-9},
                          {"resident_rows", s.resident_rows},
                          {"capacity_rows", s.capacity_rows}};
      out += j.dump() + "\n";
    }
  }
  return out;
}

Status WriteHitRateChart(const std::vector<PolicyRequests>& runs, const std::string& csv_path,
                         const std::string& png_path, const std::string& title) {
  if (runs.empty()) return Status::InvalidArgument("chart: no runs");
  ENGRAM_RETURN_IF_ERROR(CheckNotAnInput(csv_path, "chart data"));
  {
    std::ofstream csv(csv_path);
    if (!csv) return Status::IOError("cannot write " + csv_path + ": " + std::strerror(errno));
    csv << "request";
    for (const auto& p : runs) csv << "," << p.policy;
    csv << "\n";
    for (size_t r = 0; r < runs[0].requests.size(); ++r) {
      csv << '"' << runs[0].requests[r].name << '"';
      for (const auto& p : runs) csv << "," << (r < p.requests.size() ? 100.0 * p.requests[r].hit_rate() : 0.0);
      csv << "\n";
    }
    csv.close();
    if (!csv) return Status::IOError("cannot write " + csv_path + " (disk full?)");
  }
  // Paths and title are ARG1..ARG3 (see RunGnuplot): never parsed by gnuplot or a shell.
  std::string script =
      "set terminal pngcairo size 900,500 noenhanced\n"
      "set output ARG1\n"
      "set title ARG3\n"
      "set datafile separator ','\n"
      "set style data histograms\nset style histogram clustered gap 1\n"
      "set style fill solid 0.8 border -1\nset boxwidth 0.9\n"
      "set yrange [0:105]\nset ylabel 'hit rate (%)'\nset grid ytics\nset key top left\n"
      "plot ";
  for (size_t i = 0; i < runs.size(); ++i) {
    script += (i ? ", " : "") + std::string("ARG2 using ") + std::to_string(i + 2) + (i == 0 ? ":xtic(1)" : "") +
              " title columnheader(" + std::to_string(i + 2) + ")";
  }
  script += "\n";
  Status s = RunGnuplot(script, {png_path, csv_path, title}, png_path);
  if (s.code() == StatusCode::kUnsupported) return Status::Unsupported(s.message() + "; wrote " + csv_path + " only");
  return s;
}

}  // namespace engram
