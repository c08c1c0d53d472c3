// MetricsSnapshot: a point-in-time set of metric families, rendered in the
// Prometheus text exposition format 0.0.4.
//
// The store fills one from its counters on every scrape; nothing here touches
// the hot path. Families keep the order in which they were first added, so
// the output is stable and diffable.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace engram {

enum class MetricType : uint8_t { kCounter, kGauge, kHistogram };

struct MetricLabel {
  std::string name;
  std::string value;
};
using MetricLabels = std::vector<MetricLabel>;

struct MetricSample {
  std::string suffix;  // "", "_bucket", "_sum", "_count"
  MetricLabels labels;
  double value = 0;
};

struct MetricFamily {
  std::string name;
  std::string help;
  MetricType type = MetricType::kCounter;
  std::vector<MetricSample> samples;
};

class MetricsSnapshot {
 public:
  // Counter names must end in "_total" (Prometheus convention); the name is
  // used as given.
  void AddCounter(const std::string& name, const std::string& help, MetricLabels labels, double value);
  void AddGauge(const std::string& name, const std::string& help, MetricLabels labels, double value);
  // upper_bounds are the finite bucket bounds in ascending order;
  // bucket_counts[i] is the number of observations <= upper_bounds[i]
  // (NOT cumulative); the +Inf bucket is `count`.
  void AddHistogram(const std::string& name, const std::string& help, MetricLabels labels,
                    std::span<const double> upper_bounds, std::span<const uint64_t> bucket_counts,
                    double sum, uint64_t count);

  const std::vector<MetricFamily>& families() const { return families_; }
  // Sum of the samples of a family with the given suffix and matching labels
  // (a sample matches when it carries every given label); for tests and tools.
  double Value(const std::string& name, const MetricLabels& labels = {}, const std::string& suffix = "") const;

  std::string ToPrometheusText() const;

 private:
  MetricFamily& FamilyFor(const std::string& name, const std::string& help, MetricType type);

  std::vector<MetricFamily> families_;
  std::map<std::string, size_t> index_;
};

// Escapes a label value: backslash, double quote and line feed.
std::string EscapeLabelValue(const std::string& v);

}  // namespace engram
