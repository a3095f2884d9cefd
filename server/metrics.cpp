#include "server/metrics.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>
#include <type_traits>
#include <utility>

namespace nodewarden::server {

namespace {

bool isMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool isLabelName(std::string_view name) {
  if (name.empty() || name.starts_with("__")) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

void appendEscapedLabelValue(std::string& out, std::string_view value) {
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void appendEscapedHelp(std::string& out, std::string_view help) {
  for (const char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

}  // namespace

std::vector<double> latencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

std::string formatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  // Below 2^63 an integral double converts exactly; beyond, the shortest form (1e+20) is exact
  // too and shorter than the digits.
  if (value == std::trunc(value) && std::fabs(value) < 9.2e18) {
    const auto [end, ec] =
        std::to_chars(buffer, buffer + sizeof buffer, static_cast<long long>(value));
    return ec == std::errc() ? std::string(buffer, end) : std::string("NaN");
  }
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return ec == std::errc() ? std::string(buffer, end) : std::string("NaN");
}

// --- MetricFamily ---------------------------------------------------------------------------

MetricFamily::MetricFamily(std::string name, std::string help, std::vector<std::string> labelNames,
                           std::uint64_t* misuses)
    : name_(std::move(name)),
      help_(std::move(help)),
      labelNames_(std::move(labelNames)),
      misuses_(misuses) {}

void MetricFamily::countMisuse() const {
  ++*misuses_;
}

bool MetricFamily::checkLabels(const std::vector<std::string>& labelValues) const {
  const bool ok = labelValues.size() == labelNames_.size();
  assert(ok && "wrong number of label values for a metric family");
  if (!ok) countMisuse();
  return ok;
}

void MetricFamily::renderHeader(std::string& out, std::string_view type) const {
  out += "# HELP ";
  out += name_;
  if (!help_.empty()) {
    out += ' ';
    appendEscapedHelp(out, help_);
  }
  out += "\n# TYPE ";
  out += name_;
  out += ' ';
  out += type;
  out += '\n';
}

void MetricFamily::renderSample(std::string& out, std::string_view suffix,
                                const std::vector<std::string>& labelValues,
                                std::string_view extraName, std::string_view extraValue,
                                double value) const {
  out += name_;
  out += suffix;
  if (!labelValues.empty() || !extraName.empty()) {
    out += '{';
    bool first = true;
    for (std::size_t i = 0; i < labelValues.size() && i < labelNames_.size(); ++i) {
      if (!first) out += ',';
      first = false;
      out += labelNames_[i];
      out += "=\"";
      appendEscapedLabelValue(out, labelValues[i]);
      out += '"';
    }
    if (!extraName.empty()) {
      if (!first) out += ',';
      out += extraName;
      out += "=\"";
      appendEscapedLabelValue(out, extraValue);
      out += '"';
    }
    out += '}';
  }
  out += ' ';
  out += formatMetricValue(value);
  out += '\n';
}

// --- CounterFamily --------------------------------------------------------------------------

void CounterFamily::add(const std::vector<std::string>& labelValues, double amount) {
  if (!checkLabels(labelValues)) return;
  const bool ok = amount >= 0 && std::isfinite(amount);
  assert(ok && "a counter only goes up, by a finite amount");
  if (!ok) {
    countMisuse();
    return;
  }
  series_[labelValues] += amount;
}

double CounterFamily::value(const std::vector<std::string>& labelValues) const {
  const auto it = series_.find(labelValues);
  return it == series_.end() ? 0 : it->second;
}

void CounterFamily::render(std::string& out) const {
  renderHeader(out, type());
  for (const auto& [labels, value] : series_) renderSample(out, "", labels, {}, {}, value);
}

// --- GaugeFamily ----------------------------------------------------------------------------

void GaugeFamily::set(const std::vector<std::string>& labelValues, double value) {
  if (!checkLabels(labelValues)) return;
  series_[labelValues] = value;
}

void GaugeFamily::add(const std::vector<std::string>& labelValues, double delta) {
  if (!checkLabels(labelValues)) return;
  series_[labelValues] += delta;
}

void GaugeFamily::remove(const std::vector<std::string>& labelValues) {
  series_.erase(labelValues);
}

void GaugeFamily::clear() {
  series_.clear();
}

double GaugeFamily::value(const std::vector<std::string>& labelValues) const {
  const auto it = series_.find(labelValues);
  return it == series_.end() ? 0 : it->second;
}

void GaugeFamily::render(std::string& out) const {
  renderHeader(out, type());
  for (const auto& [labels, value] : series_) renderSample(out, "", labels, {}, {}, value);
}

// --- HistogramFamily ------------------------------------------------------------------------

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> labelNames, std::uint64_t* misuses,
                                 std::vector<double> upperBounds)
    : MetricFamily(std::move(name), std::move(help), std::move(labelNames), misuses),
      upperBounds_(std::move(upperBounds)) {}

HistogramFamily::Series& HistogramFamily::seriesFor(const std::vector<std::string>& labelValues) {
  Series& series = series_[labelValues];
  if (series.buckets.empty()) series.buckets.assign(upperBounds_.size() + 1, 0);
  return series;
}

void HistogramFamily::observe(const std::vector<std::string>& labelValues, double value) {
  if (!checkLabels(labelValues)) return;
  Series& series = seriesFor(labelValues);
  // The first bound >= value; NaN and values above every bound land in +Inf.
  const auto bound = std::lower_bound(upperBounds_.begin(), upperBounds_.end(), value);
  const std::size_t index = std::isnan(value)
                                ? upperBounds_.size()
                                : static_cast<std::size_t>(bound - upperBounds_.begin());
  ++series.buckets[index];
  series.sum += value;
  ++series.count;
}

std::uint64_t HistogramFamily::count(const std::vector<std::string>& labelValues) const {
  const auto it = series_.find(labelValues);
  return it == series_.end() ? 0 : it->second.count;
}

void HistogramFamily::render(std::string& out) const {
  renderHeader(out, type());
  for (const auto& [labels, series] : series_) {
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < series.buckets.size(); ++i) {
      cumulative += series.buckets[i];
      const std::string le =
          i < upperBounds_.size() ? formatMetricValue(upperBounds_[i]) : std::string("+Inf");
      renderSample(out, "_bucket", labels, "le", le, static_cast<double>(cumulative));
    }
    renderSample(out, "_sum", labels, {}, {}, series.sum);
    renderSample(out, "_count", labels, {}, {}, static_cast<double>(series.count));
  }
}

// --- MetricsRegistry ------------------------------------------------------------------------

template <typename Family, typename... Extra>
Family& MetricsRegistry::add(std::string name, std::string help,
                             std::vector<std::string> labelNames, Extra&&... extra) {
  bool valid = isMetricName(name);
  std::set<std::string_view> seen;
  for (const std::string& label : labelNames) {
    valid = valid && isLabelName(label) && seen.insert(label).second;
    if constexpr (std::is_same_v<Family, HistogramFamily>) valid = valid && label != "le";
  }
  MetricFamily* existing = nullptr;
  for (const auto& family : families_) {
    if (family->name() == name) existing = family.get();
  }
  if (valid && existing != nullptr) {
    auto* same = dynamic_cast<Family*>(existing);
    if (same != nullptr && same->labelNames() == labelNames) {
      if constexpr (std::is_same_v<Family, HistogramFamily>) {
        if (same->upperBounds() == std::get<0>(std::forward_as_tuple(extra...))) return *same;
      } else {
        return *same;
      }
    }
    valid = false;
  }
  assert(valid && "invalid or clashing metric family");

  std::unique_ptr<Family> family(new Family(std::move(name), std::move(help), std::move(labelNames),
                                            &misuses_, std::forward<Extra>(extra)...));
  Family& result = *family;
  // Without labels, the one series exists from the start so the metric is always exported.
  if constexpr (std::is_same_v<Family, HistogramFamily>) {
    if (result.labelNames().empty()) result.seriesFor({});
  } else {
    if (result.labelNames().empty()) result.series_[{}] = 0;
  }
  if (valid) {
    families_.push_back(std::move(family));
  } else {
    ++misuses_;
    detached_.push_back(std::move(family));
  }
  return result;
}

CounterFamily& MetricsRegistry::counter(std::string name, std::string help,
                                        std::vector<std::string> labelNames) {
  return add<CounterFamily>(std::move(name), std::move(help), std::move(labelNames));
}

GaugeFamily& MetricsRegistry::gauge(std::string name, std::string help,
                                    std::vector<std::string> labelNames) {
  return add<GaugeFamily>(std::move(name), std::move(help), std::move(labelNames));
}

HistogramFamily& MetricsRegistry::histogram(std::string name, std::string help,
                                            std::vector<std::string> labelNames,
                                            std::vector<double> upperBounds) {
  // +Inf is implied and NaN cannot be compared: drop both; the rest ascending, once each.
  std::erase_if(upperBounds, [](double b) {
    return std::isnan(b) || b == std::numeric_limits<double>::infinity();
  });
  std::sort(upperBounds.begin(), upperBounds.end());
  upperBounds.erase(std::unique(upperBounds.begin(), upperBounds.end()), upperBounds.end());
  return add<HistogramFamily>(std::move(name), std::move(help), std::move(labelNames),
                              std::move(upperBounds));
}

std::string MetricsRegistry::render() const {
  std::string out;
  for (const auto& family : families_) family->render(out);
  return out;
}

}  // namespace nodewarden::server
