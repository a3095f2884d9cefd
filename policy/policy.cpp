#include "policy/policy.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

namespace nodewarden::policy {
namespace {

constexpr std::string_view kKnownKeys[] = {
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionMinimumReclaim",
    "evictionMaxPodGracePeriod",
    "evictionPressureTransitionPeriod",
    "evictionMaxPodsPerCycle",
    "ranking",
    "housekeepingInterval",
    "neverEvictPriority",
    "memoryRankingCountsSwap",
};

// Signals the kubelet accepts in a configuration but never takes from it: with a split image
// filesystem (KubeletSeparateDiskGC) it derives them from the nodefs or imagefs thresholds
// (UpdateContainerFsThresholds) and logs that it ignores the value given.
constexpr std::string_view kDerivedSignals[] = {"containerfs.available", "containerfs.inodesFree"};

std::string knownSignals() {
  std::string out;
  for (Signal s : kAllSignals) {
    if (!out.empty()) out += ", ";
    out += toString(s);
  }
  return out;
}

std::string quote(std::string_view s) {
  return Json(std::string(s)).dump();
}

// A percentage as the kubelet reads it (parsePercentage): the number before "%" rounded once
// to the nearest float32 (strconv.ParseFloat(s, 32)), then divided by 100 in float32. The
// fraction, not the number, is what the range checks compare: "100.000001%" is 1.0 there.
std::optional<float> parsePercentFraction(std::string_view text) {
  if (text.size() < 2 || text.back() != '%') return std::nullopt;
  std::string_view number = text.substr(0, text.size() - 1);
  if (!number.empty() && number[0] == '+') number.remove_prefix(1);
  float value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value / 100.0f;
}

// The signal-keyed maps of the file: evictionHard, evictionSoft, ... Reports non-string values
// and unknown signals; returns the usable entries.
std::map<Signal, std::pair<std::string, std::string>> signalMap(
    const Json& root, std::string_view key, std::string_view expected, Diagnostics& diagnostics,
    std::vector<std::string>& warnings) {
  std::map<Signal, std::pair<std::string, std::string>> out;  // signal -> (text, path)
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return out;
  if (!it->is_object()) {
    diagnostics.add(key, "expected an object of signal to " + std::string(expected) + ", got " +
                             describeJson(*it));
    return out;
  }
  for (auto entry = it->begin(); entry != it->end(); ++entry) {
    std::string path = childPath(key, entry.key());
    auto signal = parseSignal(entry.key());
    if (!signal && std::find(std::begin(kDerivedSignals), std::end(kDerivedSignals), entry.key()) !=
                       std::end(kDerivedSignals)) {
      if (!entry.value().is_string()) {
        diagnostics.add(
            path, "expected " + std::string(expected) + ", got " + describeJson(entry.value()));
      } else {
        warnings.push_back(path + ": ignored, as the kubelet ignores it: " + entry.key() +
                           " is derived from the nodefs thresholds (the imagefs ones when only "
                           "the image filesystem is split)");
      }
      continue;
    }
    if (!signal) {
      diagnostics.add(path, "unknown signal (expected one of " + knownSignals() + ")");
      continue;
    }
    if (!entry.value().is_string()) {
      diagnostics.add(path,
                      "expected " + std::string(expected) + ", got " + describeJson(entry.value()));
      continue;
    }
    out.emplace(*signal, std::make_pair(entry.value().get<std::string>(), path));
  }
  return out;
}

// A threshold: a positive quantity or a percentage in [0%, 100%]. Returns nothing for an
// error (reported) and a zero value for a disabled threshold ("0%" or "100%").
std::optional<ThresholdValue> parseThresholdValue(const std::string& text, const std::string& path,
                                                  Diagnostics& diagnostics) {
  ThresholdValue value;
  value.text = text;
  if (!text.empty() && text.back() == '%') {
    auto fraction = parsePercentFraction(text);
    if (!fraction) {
      diagnostics.add(path, "expected a quantity or a percentage, got " + quote(text));
      return std::nullopt;
    }
    if (*fraction < 0 || *fraction > 1) {
      diagnostics.add(path, "must be between 0% and 100%, got " + quote(text));
      return std::nullopt;
    }
    // Disabled: exactly "0%" or "100%" as written, as the kubelet's parseThresholdStatement
    // ignores them; "100.0%" is a threshold at the whole capacity there, and here.
    if (text == "0%" || text == "100%") return ThresholdValue{};
    value.percentage = *fraction;
    return value;
  }
  auto q = Quantity::parse(text);
  if (!q) {
    diagnostics.add(path, "expected a quantity or a percentage, got " + quote(text));
    return std::nullopt;
  }
  if (q->sign() <= 0) {
    diagnostics.add(path, "must be positive, got " + quote(text));
    return std::nullopt;
  }
  value.quantity = q.value();
  return value;
}

std::optional<ThresholdValue> parseMinReclaim(const std::string& text, const std::string& path,
                                              Diagnostics& diagnostics) {
  ThresholdValue value;
  value.text = text;
  if (!text.empty() && text.back() == '%') {
    auto fraction = parsePercentFraction(text);
    if (!fraction) {
      diagnostics.add(path, "expected a quantity or a percentage, got " + quote(text));
      return std::nullopt;
    }
    if (*fraction <= 0 || *fraction > 1) {
      diagnostics.add(path, "must be a percentage above 0% and at most 100%, got " + quote(text));
      return std::nullopt;
    }
    value.percentage = *fraction;
    return value;
  }
  auto q = Quantity::parse(text);
  if (!q) {
    diagnostics.add(path, "expected a quantity or a percentage, got " + quote(text));
    return std::nullopt;
  }
  if (q->sign() < 0) {
    diagnostics.add(path, "must not be negative, got " + quote(text));
    return std::nullopt;
  }
  value.quantity = q.value();
  return value;
}

std::optional<Duration> durationMember(const Json& root, std::string_view key,
                                       Diagnostics& diagnostics, bool positive) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) {
    diagnostics.add(key, "expected a duration such as \"30s\" or \"5m\", got " + describeJson(*it));
    return std::nullopt;
  }
  auto d = parseGoDuration(it->get<std::string>());
  if (!d) {
    diagnostics.add(key, "expected a duration such as \"30s\" or \"5m\", got " + describeJson(*it));
    return std::nullopt;
  }
  if (positive ? d.value() <= Duration(0) : d.value() < Duration(0)) {
    diagnostics.add(key, std::string(positive ? "must be positive" : "must not be negative") +
                             ", got " + describeJson(*it));
    return std::nullopt;
  }
  return d.value();
}

std::optional<std::int64_t> integerMember(const Json& root, std::string_view key, std::int64_t min,
                                          std::int64_t max, Diagnostics& diagnostics) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return std::nullopt;
  bool integral = it->is_number_integer() ||
                  (it->is_number_float() && std::floor(it->get<double>()) == it->get<double>() &&
                   std::fabs(it->get<double>()) < 9e15);
  std::int64_t value = 0;
  if (integral) {
    if (it->is_number_unsigned() && it->get<std::uint64_t>() > std::uint64_t(max)) {
      integral = false;
    } else {
      value = it->is_number_float() ? std::int64_t(it->get<double>()) : it->get<std::int64_t>();
    }
  }
  if (!integral || value < min || value > max) {
    std::string range = max == std::numeric_limits<std::int64_t>::max()
                            ? "of at least " + std::to_string(min)
                            : "from " + std::to_string(min) + " to " + std::to_string(max);
    diagnostics.add(key, "expected an integer " + range + ", got " + describeJson(*it));
    return std::nullopt;
  }
  return value;
}

Json thresholdValueToJson(const ThresholdValue& v) {
  if (v.quantity) return v.quantity->toString();
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g%%", double(v.percentage) * 100.0);
  return std::string(buffer);
}

}  // namespace

std::string_view toString(Signal signal) {
  switch (signal) {
    case Signal::MemoryAvailable:
      return "memory.available";
    case Signal::AllocatableMemoryAvailable:
      return "allocatableMemory.available";
    case Signal::NodeFsAvailable:
      return "nodefs.available";
    case Signal::NodeFsInodesFree:
      return "nodefs.inodesFree";
    case Signal::ImageFsAvailable:
      return "imagefs.available";
    case Signal::ImageFsInodesFree:
      return "imagefs.inodesFree";
    case Signal::PidAvailable:
      return "pid.available";
  }
  return "memory.available";
}

std::optional<Signal> parseSignal(std::string_view text) {
  for (Signal s : kAllSignals) {
    if (toString(s) == text) return s;
  }
  return std::nullopt;
}

std::string_view starvedResource(Signal signal) {
  switch (signal) {
    case Signal::MemoryAvailable:
    case Signal::AllocatableMemoryAvailable:
      return "memory";
    case Signal::NodeFsAvailable:
    case Signal::ImageFsAvailable:
      return "ephemeral-storage";
    case Signal::NodeFsInodesFree:
    case Signal::ImageFsInodesFree:
      return "inodes";
    case Signal::PidAvailable:
      return "pids";
  }
  return "memory";
}

std::string_view nodeConditionFor(Signal signal) {
  switch (signal) {
    case Signal::MemoryAvailable:
    case Signal::AllocatableMemoryAvailable:
      return "MemoryPressure";
    case Signal::PidAvailable:
      return "PIDPressure";
    default:
      return "DiskPressure";
  }
}

Quantity ThresholdValue::resolve(std::int64_t capacity) const {
  if (quantity) return *quantity;
  // GetThresholdQuantity: int64(float64(capacity) * float64(percentage)).
  double bytes = double(capacity) * double(percentage);
  return Quantity::fromValue(static_cast<std::int64_t>(bytes), QuantityFormat::BinarySI);
}

Policy Policy::defaults() {
  Policy p;
  auto hard = [&](Signal s, std::string_view text) {
    Diagnostics ignored;
    Threshold t;
    t.signal = s;
    t.value = *parseThresholdValue(std::string(text), "", ignored);
    p.thresholds.push_back(t);
  };
  hard(Signal::MemoryAvailable, "100Mi");
  hard(Signal::NodeFsAvailable, "10%");
  hard(Signal::NodeFsInodesFree, "5%");
  hard(Signal::ImageFsAvailable, "15%");
  return p;
}

std::optional<Policy> parsePolicy(const Json& json, Diagnostics& diagnostics) {
  const std::size_t before = diagnostics.size();
  if (!json.is_object()) {
    diagnostics.add("", "expected a policy object, got " + describeJson(json));
    return std::nullopt;
  }
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (std::find(std::begin(kKnownKeys), std::end(kKnownKeys), it.key()) == std::end(kKnownKeys)) {
      std::string known;
      for (auto k : kKnownKeys) known += (known.empty() ? "" : ", ") + std::string(k);
      diagnostics.add(childPath("", it.key()), "unknown key (expected one of " + known + ")");
    }
  }

  Policy policy;
  const bool anyThreshold = (json.contains("evictionHard") && !json["evictionHard"].is_null()) ||
                            (json.contains("evictionSoft") && !json["evictionSoft"].is_null());
  auto hard =
      signalMap(json, "evictionHard", "a quantity or a percentage", diagnostics, policy.warnings);
  auto soft =
      signalMap(json, "evictionSoft", "a quantity or a percentage", diagnostics, policy.warnings);
  auto grace =
      signalMap(json, "evictionSoftGracePeriod", "a duration", diagnostics, policy.warnings);
  auto reclaim = signalMap(json, "evictionMinimumReclaim", "a quantity or a percentage",
                           diagnostics, policy.warnings);

  std::map<Signal, ThresholdValue> minReclaims;
  for (const auto& [signal, entry] : reclaim) {
    if (auto v = parseMinReclaim(entry.first, entry.second, diagnostics)) {
      minReclaims.emplace(signal, *v);
    }
  }
  std::map<Signal, Duration> graces;
  for (const auto& [signal, entry] : grace) {
    auto d = parseGoDuration(entry.first);
    if (!d) {
      diagnostics.add(entry.second, "expected a duration such as \"30s\" or \"1m30s\", got " +
                                        quote(entry.first));
    } else if (d.value() < Duration(0)) {
      diagnostics.add(entry.second, "must not be negative, got " + quote(entry.first));
    } else {
      graces.emplace(signal, d.value());
    }
  }
  auto minReclaimFor = [&](Signal s) {
    auto it = minReclaims.find(s);
    return it == minReclaims.end() ? ThresholdValue{} : it->second;
  };
  for (Signal signal : kAllSignals) {
    auto it = hard.find(signal);
    if (it == hard.end()) continue;
    auto value = parseThresholdValue(it->second.first, it->second.second, diagnostics);
    if (!value || value->isZero()) continue;
    policy.thresholds.push_back(Threshold{signal, *value, Duration(0), minReclaimFor(signal)});
  }
  for (Signal signal : kAllSignals) {
    auto it = soft.find(signal);
    if (it == soft.end()) continue;
    auto value = parseThresholdValue(it->second.first, it->second.second, diagnostics);
    if (!value || value->isZero()) continue;
    if (grace.count(signal) == 0) {
      diagnostics.add(it->second.second,
                      "a soft threshold needs a grace period: set " +
                          childPath("evictionSoftGracePeriod", toString(signal)));
      continue;
    }
    auto g = graces.find(signal);
    if (g == graces.end()) continue;  // its error is already reported
    if (g->second == Duration(0)) {
      diagnostics.add(childPath("evictionSoftGracePeriod", toString(signal)),
                      "must be positive for a soft threshold (a zero grace period makes it hard)");
      continue;
    }
    policy.thresholds.push_back(Threshold{signal, *value, g->second, minReclaimFor(signal)});
  }
  if (!anyThreshold) policy.thresholds = Policy::defaults().thresholds;
  // Beyond 2^63-1 bytes a quantity is clamped, as Kubernetes' Quantity.Value() clamps it; say so.
  const Int128 kMaxNanos = Int128(std::numeric_limits<std::int64_t>::max()) * 1'000'000'000;
  for (const Threshold& t : policy.thresholds) {
    auto clamped = [&](const ThresholdValue& v, const std::string& path) {
      if (v.quantity && v.quantity->nanoValue() >= kMaxNanos) {
        policy.warnings.push_back(path + ": " + quote(v.text) +
                                  " is beyond 2^63-1 and counts as 9223372036854775807, as "
                                  "Kubernetes clamps it");
      }
    };
    clamped(t.value, childPath(t.hard() ? "evictionHard" : "evictionSoft", toString(t.signal)));
    clamped(t.minReclaim, childPath("evictionMinimumReclaim", toString(t.signal)));
  }

  if (auto v = integerMember(json, "evictionMaxPodGracePeriod", 0,
                             std::numeric_limits<std::int32_t>::max(), diagnostics)) {
    policy.maxPodGracePeriodSeconds = *v;
  }
  if (auto d = durationMember(json, "evictionPressureTransitionPeriod", diagnostics, false)) {
    policy.pressureTransitionPeriod = *d;
  }
  if (auto v = integerMember(json, "evictionMaxPodsPerCycle", 1, 10000, diagnostics)) {
    policy.maxPodsPerCycle = int(*v);
  }
  if (auto it = json.find("ranking"); it != json.end() && !it->is_null()) {
    if (it->is_string() && *it == "priority") {
      policy.ranking = RankingMode::Priority;
    } else if (it->is_string() && *it == "kubelet") {
      policy.ranking = RankingMode::Kubelet;
    } else {
      diagnostics.add("ranking", "expected \"priority\" or \"kubelet\", got " + describeJson(*it));
    }
  }
  if (auto d = durationMember(json, "housekeepingInterval", diagnostics, true)) {
    policy.housekeepingInterval = *d;
  }
  if (auto v =
          integerMember(json, "neverEvictPriority", std::numeric_limits<std::int32_t>::min(),
                        std::int64_t(std::numeric_limits<std::int32_t>::max()) + 1, diagnostics)) {
    policy.neverEvictPriority = *v;
  }
  if (auto it = json.find("memoryRankingCountsSwap"); it != json.end() && !it->is_null()) {
    if (it->is_boolean()) {
      policy.memoryRankingCountsSwap = it->get<bool>();
    } else {
      diagnostics.add("memoryRankingCountsSwap",
                      "expected true or false, got " + describeJson(*it));
    }
  }
  if (diagnostics.size() != before) return std::nullopt;
  return policy;
}

std::optional<Policy> parsePolicyText(std::string_view text, Diagnostics& diagnostics) {
  auto json = parseJsonText(text, diagnostics);
  if (!json) return std::nullopt;
  return parsePolicy(*json, diagnostics);
}

Json policyToJson(const Policy& policy) {
  Json out = Json::object();
  Json hard = Json::object(), soft = Json::object(), grace = Json::object(),
       reclaim = Json::object();
  for (const auto& t : policy.thresholds) {
    std::string signal(toString(t.signal));
    (t.hard() ? hard : soft)[signal] = thresholdValueToJson(t.value);
    if (!t.hard()) grace[signal] = formatGoDuration(t.gracePeriod);
    if (!t.minReclaim.isZero()) reclaim[signal] = thresholdValueToJson(t.minReclaim);
  }
  out["evictionHard"] = hard;
  out["evictionSoft"] = soft;
  out["evictionSoftGracePeriod"] = grace;
  out["evictionMinimumReclaim"] = reclaim;
  out["evictionMaxPodGracePeriod"] = policy.maxPodGracePeriodSeconds;
  out["evictionPressureTransitionPeriod"] = formatGoDuration(policy.pressureTransitionPeriod);
  out["evictionMaxPodsPerCycle"] = policy.maxPodsPerCycle;
  out["ranking"] = policy.ranking == RankingMode::Priority ? "priority" : "kubelet";
  out["housekeepingInterval"] = formatGoDuration(policy.housekeepingInterval);
  out["neverEvictPriority"] = policy.neverEvictPriority;
  if (policy.memoryRankingCountsSwap) out["memoryRankingCountsSwap"] = true;
  return out;
}

}  // namespace nodewarden::policy
