#include "src/metrics/metrics_snapshot.h"

#include <cmath>
#include <cstdio>

namespace engram {

namespace {

std::string EscapeHelp(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Integers (every counter) print exactly; others with round-trip precision.
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

bool Matches(const MetricSample& s, const MetricLabels& want) {
  for (const auto& w : want) {
    bool found = false;
    for (const auto& l : s.labels) {
      if (l.name == w.name && l.value == w.value) found = true;
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

MetricFamily& MetricsSnapshot::FamilyFor(const std::string& name, const std::string& help, MetricType type) {
  auto it = index_.find(name);
  if (it != index_.end()) return families_[it->second];
  index_.emplace(name, families_.size());
  families_.push_back(MetricFamily{name, help, type, {}});
  return families_.back();
}

void MetricsSnapshot::AddCounter(const std::string& name, const std::string& help, MetricLabels labels,
                                 double value) {
  FamilyFor(name, help, MetricType::kCounter).samples.push_back({"", std::move(labels), value});
}

void MetricsSnapshot::AddGauge(const std::string& name, const std::string& help, MetricLabels labels,
                               double value) {
  FamilyFor(name, help, MetricType::kGauge).samples.push_back({"", std::move(labels), value});
}

void MetricsSnapshot::AddHistogram(const std::string& name, const std::string& help, MetricLabels labels,
                                   std::span<const double> upper_bounds, std::span<const uint64_t> bucket_counts,
                                   double sum, uint64_t count) {
  MetricFamily& f = FamilyFor(name, help, MetricType::kHistogram);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    cumulative += i < bucket_counts.size() ? bucket_counts[i] : 0;
    MetricLabels l = labels;
    l.push_back({"le", FormatValue(upper_bounds[i])});
    f.samples.push_back({"_bucket", std::move(l), double(cumulative)});
  }
  MetricLabels inf = labels;
  inf.push_back({"le", "+Inf"});
  f.samples.push_back({"_bucket", std::move(inf), double(count)});
  f.samples.push_back({"_sum", labels, sum});
  f.samples.push_back({"_count", std::move(labels), double(count)});
}

double MetricsSnapshot::Value(const std::string& name, const MetricLabels& labels, const std::string& suffix) const {
  auto it = index_.find(name);
  if (it == index_.end()) return 0;
  double total = 0;
  for (const auto& s : families_[it->second].samples) {
    if (s.suffix == suffix && Matches(s, labels)) total += s.value;
  }
  return total;
}

std::string MetricsSnapshot::ToPrometheusText() const {
  std::string out;
  out.reserve(families_.size() * 256);
  for (const auto& f : families_) {
    out += "# HELP " + f.name + " " + EscapeHelp(f.help) + "\n";
    out += "# TYPE " + f.name + " " + TypeName(f.type) + "\n";
    for (const auto& s : f.samples) {
      out += f.name;
      out += s.suffix;
      if (!s.labels.empty()) {
        out += '{';
        for (size_t i = 0; i < s.labels.size(); ++i) {
          if (i) out += ',';
          out += s.labels[i].name;
          out += "=\"";
          out += EscapeLabelValue(s.labels[i].value);
          out += '"';
        }
        out += '}';
      }
      out += ' ';
      out += FormatValue(s.value);
      out += '\n';
    }
  }
  return out;
}

}  // namespace engram
