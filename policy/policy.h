// The eviction policy file (docs/reference.md §4): parse, validate, defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/json_reader.h"
#include "policy/quantity.h"
#include "policy/times.h"

namespace nodewarden::policy {

enum class Signal {
  MemoryAvailable,
  AllocatableMemoryAvailable,
  NodeFsAvailable,
  NodeFsInodesFree,
  ImageFsAvailable,
  ImageFsInodesFree,
  PidAvailable,
};
inline constexpr Signal kAllSignals[] = {
    Signal::MemoryAvailable,  Signal::AllocatableMemoryAvailable, Signal::NodeFsAvailable,
    Signal::NodeFsInodesFree, Signal::ImageFsAvailable,           Signal::ImageFsInodesFree,
    Signal::PidAvailable,
};

// "memory.available", ...
std::string_view toString(Signal signal);
std::optional<Signal> parseSignal(std::string_view text);
// The resource a signal starves, as the kubelet names it in messages: memory,
// ephemeral-storage, inodes, pids.
std::string_view starvedResource(Signal signal);
// MemoryPressure, DiskPressure or PIDPressure.
std::string_view nodeConditionFor(Signal signal);

// A quantity, or a fraction of the signal's capacity ("10%" is 0.1, kept as float32 like the
// kubelet so percentages resolve to the same byte counts).
struct ThresholdValue {
  std::optional<Quantity> quantity;
  float percentage = 0;
  std::string text;  // as written ("100Mi", "10%"); empty for none

  bool isZero() const { return quantity ? quantity->isZero() : percentage == 0; }

  // The value in the signal's units for a given capacity (GetThresholdQuantity).
  Quantity resolve(std::int64_t capacity) const;
};

struct Threshold {
  Signal signal = Signal::MemoryAvailable;
  ThresholdValue value;
  Duration gracePeriod{0};  // zero for hard thresholds
  ThresholdValue minReclaim;
  bool hard() const { return gracePeriod == Duration(0); }
};

enum class RankingMode { Priority, Kubelet };

struct Policy {
  std::vector<Threshold> thresholds;          // hard ones first, in signal order
  std::int64_t maxPodGracePeriodSeconds = 0;  // evictionMaxPodGracePeriod (kubelet default)
  Duration pressureTransitionPeriod = std::chrono::minutes(5);
  int maxPodsPerCycle = 5;
  RankingMode ranking = RankingMode::Priority;
  Duration housekeepingInterval = std::chrono::seconds(1);
  std::int64_t neverEvictPriority = 2'000'001'000;
  // memoryRankingCountsSwap: rank by working set + swap usage (NodeSwap LimitedSwap, cgroup
  // v2). Off by default: the kubelet ignores swap when it ranks.
  bool memoryRankingCountsSwap = false;
  // What the file sets that the kubelet, too, would accept and ignore ("path: why"), for the
  // reader to log; the policy is valid.
  std::vector<std::string> warnings;

  // The kubelet's Linux defaults: memory.available<100Mi, nodefs.available<10%,
  // nodefs.inodesFree<5%, imagefs.available<15%, all hard.
  static Policy defaults();
};

// Parses and validates a policy document. Every error is collected with its JSON path
// (`evictionHard["memory.available"]: ...`); unknown keys are errors. Returns the policy
// only when there are none.
std::optional<Policy> parsePolicy(const Json& json, Diagnostics& diagnostics);
std::optional<Policy> parsePolicyText(std::string_view text, Diagnostics& diagnostics);

// The policy as JSON in the file's own format, with every default filled in.
Json policyToJson(const Policy& policy);

}  // namespace nodewarden::policy
