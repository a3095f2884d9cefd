// Prometheus metrics for GET /metrics (docs/reference.md §7), in the text exposition format 0.0.4:
//
//   # HELP nodewarden_evictions_total Pods evicted, by signal and reason.
//   # TYPE nodewarden_evictions_total counter
//   nodewarden_evictions_total{signal="memory.available",reason="hard"} 3
//
// Not thread-safe: the registry and its families belong to the agent's loop thread, which both
// updates them and renders them. Families live as long as the registry and keep their address,
// so callers hold on to the references that counter()/gauge()/histogram() return.
//
// Misuse (a wrong number of label values, a negative counter increment, an invalid or clashing
// name) is a bug: it asserts in debug builds; in release builds the update is ignored and
// counted in MetricsRegistry::misuses(), so a bad call site cannot take the agent down.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nodewarden::server {

// The Content-Type of render()'s output.
inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// Histogram upper bounds in seconds for latencies, from 1 ms to 30 s:
// {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}.
std::vector<double> latencyBuckets();

// A sample value as the exposition format spells it: integral values without a fraction
// ("3", "-2", "0"), others as the shortest text that reads back to the same double ("0.25",
// "1e-05"), and "+Inf", "-Inf", "NaN".
std::string formatMetricValue(double value);

class MetricsRegistry;

// What counter(), gauge() and histogram() families have in common.
class MetricFamily {
 public:
  virtual ~MetricFamily() = default;
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<std::string>& labelNames() const { return labelNames_; }

 protected:
  MetricFamily(std::string name, std::string help, std::vector<std::string> labelNames,
               std::uint64_t* misuses);
  // False (and a misuse counted; assert in debug) when the count of values is wrong.
  bool checkLabels(const std::vector<std::string>& labelValues) const;
  void countMisuse() const;
  // Appends the "# HELP" and "# TYPE" lines.
  void renderHeader(std::string& out, std::string_view type) const;
  // Appends `name{l1="v1",...,extraName="extraValue"} value\n`.
  void renderSample(std::string& out, std::string_view suffix,
                    const std::vector<std::string>& labelValues, std::string_view extraName,
                    std::string_view extraValue, double value) const;

 private:
  friend class MetricsRegistry;
  virtual void render(std::string& out) const = 0;
  virtual std::string_view type() const = 0;

  std::string name_;
  std::string help_;
  std::vector<std::string> labelNames_;
  std::uint64_t* misuses_;  // the registry's counter
};

// A monotonically increasing count (Prometheus type "counter"); name it with "_total".
class CounterFamily final : public MetricFamily {
 public:
  // Adds `amount` (>= 0, finite) to the series with these label values (one per label name,
  // in order), creating it at 0 first.
  void add(const std::vector<std::string>& labelValues, double amount = 1);
  // The series' current value; 0 when it does not exist.
  double value(const std::vector<std::string>& labelValues) const;

 private:
  friend class MetricsRegistry;
  using MetricFamily::MetricFamily;
  void render(std::string& out) const override;
  std::string_view type() const override { return "counter"; }

  std::map<std::vector<std::string>, double> series_;  // sorted by label values
};

// A value that goes up and down (Prometheus type "gauge").
class GaugeFamily final : public MetricFamily {
 public:
  // Sets the series with these label values, creating it.
  void set(const std::vector<std::string>& labelValues, double value);
  // Adds `delta` (may be negative) to the series, creating it at 0 first.
  void add(const std::vector<std::string>& labelValues, double delta);
  // Drops the series with these label values (a pod or signal that went away).
  void remove(const std::vector<std::string>& labelValues);
  // Drops every series, e.g. before re-setting the gauges of the current pods. Afterwards the
  // family renders only its HELP and TYPE lines until set again.
  void clear();
  // The series' current value; 0 when it does not exist.
  double value(const std::vector<std::string>& labelValues) const;

 private:
  friend class MetricsRegistry;
  using MetricFamily::MetricFamily;
  void render(std::string& out) const override;
  std::string_view type() const override { return "gauge"; }

  std::map<std::vector<std::string>, double> series_;  // sorted by label values
};

// A distribution over fixed buckets (Prometheus type "histogram"): per series, cumulative
// name_bucket{...,le="B"} lines for every upper bound and le="+Inf", then name_sum and
// name_count.
class HistogramFamily final : public MetricFamily {
 public:
  // Records one observation (a value <= a bound falls in that bucket).
  void observe(const std::vector<std::string>& labelValues, double value);
  // Observations recorded in the series so far; 0 when it does not exist.
  std::uint64_t count(const std::vector<std::string>& labelValues) const;
  // The bucket upper bounds, ascending, without +Inf.
  const std::vector<double>& upperBounds() const { return upperBounds_; }

 private:
  friend class MetricsRegistry;
  HistogramFamily(std::string name, std::string help, std::vector<std::string> labelNames,
                  std::uint64_t* misuses, std::vector<double> upperBounds);
  void render(std::string& out) const override;
  std::string_view type() const override { return "histogram"; }

  struct Series {
    std::vector<std::uint64_t> buckets;  // per bound, not cumulative; last one is +Inf
    double sum = 0;
    std::uint64_t count = 0;
  };
  Series& seriesFor(const std::vector<std::string>& labelValues);

  std::vector<double> upperBounds_;
  std::map<std::vector<std::string>, Series> series_;  // sorted by label values
};

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  // Families point back at the registry: neither copyable nor movable.
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Register a family and return it; the reference stays valid as long as the registry.
  // Names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* and not "__..."
  // (nor "le" for a histogram). Registering the same name again with the same type and label
  // names returns the existing family; any other clash is a misuse and returns a detached
  // family that is never rendered. A family without labels starts with its one series at 0,
  // so it is exported from the start; a family with labels renders samples once it has
  // series. Histogram bounds are sorted, deduplicated, and +Inf/NaN dropped (+Inf is implied).
  CounterFamily& counter(std::string name, std::string help,
                         std::vector<std::string> labelNames = {});
  GaugeFamily& gauge(std::string name, std::string help, std::vector<std::string> labelNames = {});
  HistogramFamily& histogram(std::string name, std::string help,
                             std::vector<std::string> labelNames, std::vector<double> upperBounds);

  // The whole exposition: families in registration order, each with its # HELP and # TYPE
  // lines, series sorted by label values. Ends with a newline unless empty.
  std::string render() const;

  // Misuses ignored so far (see the top of this file); stays 0 in a correct program.
  std::uint64_t misuses() const { return misuses_; }

 private:
  template <typename Family, typename... Extra>
  Family& add(std::string name, std::string help, std::vector<std::string> labelNames,
              Extra&&... extra);

  std::vector<std::unique_ptr<MetricFamily>> families_;  // registration order
  std::vector<std::unique_ptr<MetricFamily>> detached_;  // misuse sinks, never rendered
  std::uint64_t misuses_ = 0;
};

}  // namespace nodewarden::server
