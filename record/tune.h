// `nodewarden tune` (docs/recording.md "Tuning"): one memory signal's threshold, hard or soft
// with a grace period, swept over recorded episodes by the replay's simulation (replay.h), and
// the trade-off it shows — kernel OOM kills left, pods evicted, false alarms — with the least
// disruptive setting that leaves no kill, written as a policy file.
//
// Pure: the caller reads the episodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policy/json_reader.h"
#include "policy/policy.h"
#include "record/episode.h"

namespace nodewarden::record {

struct TuneOptions {
  // The signal to tune; nullopt: the one the kernel kills on in most episodes
  // (limitSignalOf).
  std::optional<policy::Signal> signal;
};

struct TuneSetting {
  std::string label;      // "64Mi hard", "128Mi soft 10s", "kubelet default …"
  policy::Policy policy;  // the whole policy file this setting stands for
  std::int64_t thresholdBytes = 0;
  std::string threshold;  // as a quantity ("64Mi")
  Duration grace{0};      // 0: hard
  std::size_t oomKillsLeft = 0;
  std::size_t evictions = 0;
  // Episodes where it evicted although the kernel alone would have killed nothing.
  std::size_t falseAlarms = 0;
  std::optional<double> minLeadTimeMs;  // over the episodes with something to lead
};

struct TuneResult {
  policy::Signal signal = policy::Signal::MemoryAvailable;
  std::size_t episodes = 0;
  std::size_t recordedOomKills = 0;
  std::vector<TuneSetting> settings;       // by threshold, hard first, then soft by grace
  TuneSetting kubeletDefault;              // <signal> < 100Mi, hard, one pod per cycle
  std::optional<std::size_t> recommended;  // index into settings
};

TuneResult tune(const std::vector<const Episode*>& episodes, const TuneOptions& options = {});

// `tune -o json`: {"signal", "episodes", "recordedOomKills", "settings": [...],
// "kubeletDefault": {...}, "recommended": {...}|null, "policy": {...}|null}.
policy::OrderedJson tuneJson(const TuneResult& result);

}  // namespace nodewarden::record
