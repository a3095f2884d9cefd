#include "record/tune.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "record/replay.h"

namespace nodewarden::record {
namespace {

using policy::OrderedJson;
using policy::Signal;
constexpr std::int64_t kMi = 1024 * 1024;

// Round thresholds, in MiB, an operator would write.
constexpr std::int64_t kGrid[] = {16,   32,   48,   64,    96,    100,   128,   160,  200,  256,
                                  300,  384,  500,  512,   640,   750,   1024,  1536, 2048, 3072,
                                  4096, 6144, 8192, 12288, 16384, 24576, 32768, 65536};
constexpr int kGraceSeconds[] = {5, 10, 30};

std::string quantityText(std::int64_t bytes) {
  return policy::Quantity::fromValue(bytes, policy::QuantityFormat::BinarySI).toString();
}

policy::ThresholdValue valueOf(std::int64_t bytes) {
  policy::ThresholdValue value;
  value.quantity = policy::Quantity::fromValue(bytes, policy::QuantityFormat::BinarySI);
  value.text = value.quantity->toString();
  return value;
}

// `base` with the thresholds of `signal` replaced by one.
policy::Policy withThreshold(const policy::Policy& base, Signal signal, std::int64_t bytes,
                             Duration grace, const policy::ThresholdValue& minReclaim) {
  policy::Policy p = base;
  std::erase_if(p.thresholds, [&](const policy::Threshold& t) { return t.signal == signal; });
  policy::Threshold t;
  t.signal = signal;
  t.value = valueOf(bytes);
  t.gracePeriod = grace;
  t.minReclaim = minReclaim;
  p.thresholds.push_back(t);
  // Hard ones first, in signal order, as the parser keeps them.
  std::stable_sort(p.thresholds.begin(), p.thresholds.end(),
                   [](const policy::Threshold& a, const policy::Threshold& b) {
                     if (a.hard() != b.hard()) return a.hard();
                     return int(a.signal) < int(b.signal);
                   });
  p.warnings.clear();
  return p;
}

void score(TuneSetting& setting, const std::vector<const Episode*>& episodes) {
  for (const Episode* episode : episodes) {
    ReplayOptions options;
    options.policy = setting.policy;
    options.policyName = setting.label;
    const ReplayResult r = replay(*episode, options);
    setting.oomKillsLeft += r.killsLeft;
    setting.evictions += r.decisions.size();
    if (!r.decisions.empty() && r.kernelAlone.kills.empty()) ++setting.falseAlarms;
    if (r.leadTimeMs && (!r.kernelAlone.kills.empty() || r.recordedOomKills > 0)) {
      setting.minLeadTimeMs =
          std::min(setting.minLeadTimeMs.value_or(*r.leadTimeMs), *r.leadTimeMs);
    }
  }
}

OrderedJson settingJson(const TuneSetting& s) {
  OrderedJson out;
  out["setting"] = s.label;
  out["threshold"] = s.threshold;
  out["thresholdBytes"] = s.thresholdBytes;
  out["kind"] = s.grace == Duration(0) ? "hard" : "soft";
  out["gracePeriod"] = policy::formatGoDuration(s.grace);
  out["oomKillsLeft"] = s.oomKillsLeft;
  out["evictions"] = s.evictions;
  out["falseAlarms"] = s.falseAlarms;
  out["minLeadTimeMs"] =
      s.minLeadTimeMs ? OrderedJson(std::round(*s.minLeadTimeMs * 10) / 10) : OrderedJson(nullptr);
  return out;
}

}  // namespace

TuneResult tune(const std::vector<const Episode*>& episodes, const TuneOptions& options) {
  TuneResult result;
  result.episodes = episodes.size();
  if (episodes.empty()) return result;
  if (options.signal) {
    result.signal = *options.signal;
  } else {
    std::map<Signal, int> votes;
    for (const Episode* e : episodes) ++votes[limitSignalOf(*e)];
    result.signal = votes[Signal::AllocatableMemoryAvailable] > votes[Signal::MemoryAvailable]
                        ? Signal::AllocatableMemoryAvailable
                        : Signal::MemoryAvailable;
  }
  for (const Episode* e : episodes) {
    for (const OomKill& k : e->oomKills) result.recordedOomKills += std::size_t(k.count);
  }
  // The base: the newest episode's policy, its minimum reclaim for the signal kept.
  const Episode* newest = *std::max_element(
      episodes.begin(), episodes.end(),
      [](const Episode* a, const Episode* b) { return a->originWallMicros < b->originWallMicros; });
  const policy::Policy& base = newest->policies.back().policy;
  policy::ThresholdValue minReclaim;
  for (const policy::Threshold& t : base.thresholds) {
    if (t.signal == result.signal && !t.minReclaim.isZero()) minReclaim = t.minReclaim;
  }
  // The signal's capacity: thresholds up to half of it.
  std::int64_t capacity = 0;
  for (const Episode* e : episodes) {
    for (const Sample& s : e->samples) {
      const auto& n = s.node.stats;
      const std::int64_t c = result.signal == Signal::AllocatableMemoryAvailable
                                 ? std::int64_t(n.podsMemoryAvailableBytes.value_or(0) +
                                                n.podsMemoryWorkingSetBytes.value_or(0))
                                 : std::int64_t(n.memoryAvailableBytes.value_or(0) +
                                                n.memoryWorkingSetBytes.value_or(0));
      capacity = std::max(capacity, c);
    }
  }
  for (std::int64_t mib : kGrid) {
    const std::int64_t bytes = mib * kMi;
    if (capacity > 0 && bytes > capacity / 2) break;
    std::vector<Duration> graces{Duration(0)};
    for (int g : kGraceSeconds) graces.push_back(std::chrono::seconds(g));
    for (Duration grace : graces) {
      TuneSetting s;
      s.thresholdBytes = bytes;
      s.threshold = quantityText(bytes);
      s.grace = grace;
      s.label = s.threshold +
                (grace == Duration(0) ? " hard" : " soft " + policy::formatGoDuration(grace));
      s.policy = withThreshold(base, result.signal, bytes, grace, minReclaim);
      score(s, episodes);
      result.settings.push_back(std::move(s));
    }
  }
  // The kubelet's default as a reference: 100Mi, hard, one pod per cycle, its ranking.
  {
    TuneSetting& k = result.kubeletDefault;
    k.thresholdBytes = 100 * kMi;
    k.threshold = "100Mi";
    k.label = "kubelet default (" + std::string(policy::toString(result.signal)) +
              "<100Mi hard, one pod per cycle)";
    k.policy =
        withThreshold(base, result.signal, k.thresholdBytes, Duration(0), policy::ThresholdValue{});
    k.policy.maxPodsPerCycle = 1;
    k.policy.ranking = policy::RankingMode::Kubelet;
    score(k, episodes);
  }
  // The least disruptive setting that leaves no kill: fewest evictions, fewest false alarms,
  // then the most lead time (the safest among equals), then hard before soft.
  for (std::size_t i = 0; i < result.settings.size(); ++i) {
    const TuneSetting& s = result.settings[i];
    if (s.oomKillsLeft != 0) continue;
    if (!result.recommended) {
      result.recommended = i;
      continue;
    }
    const TuneSetting& best = result.settings[*result.recommended];
    auto key = [](const TuneSetting& x) {
      return std::make_tuple(x.evictions, x.falseAlarms, -x.minLeadTimeMs.value_or(0.0),
                             x.grace.count());
    };
    if (key(s) < key(best)) result.recommended = i;
  }
  return result;
}

OrderedJson tuneJson(const TuneResult& result) {
  OrderedJson out;
  out["signal"] = std::string(policy::toString(result.signal));
  out["episodes"] = result.episodes;
  out["recordedOomKills"] = result.recordedOomKills;
  out["settings"] = OrderedJson::array();
  for (const TuneSetting& s : result.settings) out["settings"].push_back(settingJson(s));
  out["kubeletDefault"] = settingJson(result.kubeletDefault);
  if (result.recommended) {
    const TuneSetting& r = result.settings[*result.recommended];
    out["recommended"] = settingJson(r);
    out["policy"] = policy::policyToJson(r.policy);
  } else {
    out["recommended"] = nullptr;
    out["policy"] = nullptr;
  }
  return out;
}

}  // namespace nodewarden::record
