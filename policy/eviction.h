// Node-pressure eviction (docs/reference.md §4): signals, thresholds over time, rankings, the plan.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "policy/model.h"
#include "policy/policy.h"
#include "policy/times.h"

namespace nodewarden::policy {

// One node as eviction sees it: the pods on it (spec.nodeName matches, phase neither Succeeded
// nor Failed), their stats, and the node's stats. Pointers refer into a Snapshot (or the
// agent's own store), which must outlive the view.
struct NodeView {
  std::string name;
  const Node* node = nullptr;        // may be null when the snapshot has no Node object
  const NodeStats* stats = nullptr;  // null when there are no kubelet stats for the node
  std::vector<const Pod*> pods;
  std::vector<const PodStats*> podStats;  // parallel to pods; null when a pod has no stats
  // Parallel to pods: each pod's position when the view's pods are sorted by key. Rankings
  // break their last ties with it, which is the pod key order without comparing strings.
  std::vector<std::uint32_t> keyOrder;
};

// Builds the view of `nodeName` from a snapshot. Stats are matched by UID, else namespace/name.
NodeView makeNodeView(const Snapshot& snapshot, std::string_view nodeName);
NodeView makeNodeView(Snapshot&&, std::string_view) = delete;  // the view would dangle
// Fills view.keyOrder from the pods (for views assembled by hand).
void assignKeyOrder(NodeView& view);

// An observed eviction signal (the kubelet's makeSignalObservations).
struct Observation {
  Signal signal;
  std::int64_t available = 0;
  std::int64_t capacity = 0;
};
std::vector<Observation> observeSignals(const NodeView& view);

// Identifies a configured threshold across cycles and policy reloads.
struct ThresholdKey {
  Signal signal;
  bool hard;
  friend auto operator<=>(const ThresholdKey&, const ThresholdKey&) = default;
};

// What eviction remembers between cycles; a plain value the caller keeps.
struct EvictionState {
  // When each currently met threshold was first seen met (for grace periods).
  std::map<ThresholdKey, SteadyTime> firstObservedAt;
  // Thresholds met in the last cycle: once met, a threshold stays met until available >=
  // threshold + minimum reclaim (docs/reference.md §4).
  std::set<ThresholdKey> met;
  // When each node condition was last observed (for the transition period).
  std::map<std::string, SteadyTime> conditionLastObservedAt;
};

// A state in which every soft threshold has already been met for its grace period at `now`
// (for `explain --assume-grace-elapsed`).
EvictionState assumeGraceElapsed(const Policy& policy, SteadyTime now);

struct SignalStatus {
  ThresholdKey key;
  std::int64_t available = 0;
  std::int64_t capacity = 0;
  std::int64_t threshold = 0;   // resolved against capacity
  std::int64_t minReclaim = 0;  // resolved against capacity
  std::string thresholdText;    // as the kubelet prints it in messages
  bool met = false;             // available < threshold (+ min reclaim while being reclaimed)
  bool actionable = false;      // met, and for its whole grace period
  Duration metFor{0};
};

// One pod in a ranking, with the figures that placed it there.
struct RankedPod {
  const Pod* pod = nullptr;
  const PodStats* stats = nullptr;
  bool hasUsage = false;
  std::int64_t usage = 0;    // bytes, processes or inodes
  std::int64_t request = 0;  // same unit; 0 for processes and inodes
  bool evictable = true;
  std::string notEvictableReason;  // "critical pod", "priority >= neverEvictPriority"
  // The pod key's place among the view's pods (NodeView::keyOrder): the last tie-break.
  std::uint32_t keyOrder = 0;
};

struct Ranking {
  std::string resource;         // "memory", "pids", "ephemeral-storage", "inodes"
  std::vector<RankedPod> pods;  // evicted first at index 0; non-evictable pods last
};

struct Eviction {
  const Pod* pod = nullptr;
  Signal signal = Signal::MemoryAvailable;
  bool hard = true;
  std::int64_t gracePeriodSeconds = 0;
  std::int64_t usage = 0;
  std::int64_t request = 0;
  std::string message;  // the kubelet's eviction message
};

// The kubelet's eviction message (evictionMessage, pkg/kubelet/eviction/helpers.go) for
// `pod` evicted for `status`: the node's resource, the threshold and what is available; for
// memory, the pod against its pod-level request and each of `stats->containers` (in their
// order) using more than its (allocated) request; for ephemeral-storage, the containers' disk
// usage likewise. Without `stats`, the first two sentences alone.
std::string evictionMessage(const SignalStatus& status, const Pod& pod, const PodStats* stats);

struct EvictionDecision {
  std::string node;
  std::vector<SignalStatus> signals;
  std::vector<std::string> conditions;  // MemoryPressure, DiskPressure, PIDPressure
  Ranking memory;
  std::optional<Ranking> pids;
  std::optional<Ranking> ephemeralStorage;
  // The disk signal the ephemeral-storage ranking measures for (with a dedicated image
  // filesystem, nodefs.* and imagefs.* count different figures of a pod).
  Signal ephemeralStorageSignal = Signal::NodeFsAvailable;
  std::vector<Eviction> evict;
};

struct EvictionResult {
  EvictionDecision decision;
  EvictionState next;
};

// Which rankings a decision carries. The memory ranking is always there; the PID and
// ephemeral-storage ones are built when a threshold needs them, or, with `All`, whenever the
// node has that usage (what `explain` and /v1/state show).
enum class Rankings { Needed, All };

// The whole eviction decision for one node at `now`. Pure: the same inputs give the same
// decision, and `state` is only read. `memoryReuse`: as rankMemoryPressure's `reuse` (an
// earlier decision's memory ranking, taken), which changes the cost, not the decision.
EvictionResult evaluateEviction(const NodeView& view, const Policy& policy,
                                const EvictionState& state, SteadyTime now,
                                Rankings rankings = Rankings::All, Ranking* memoryReuse = nullptr);

// evaluateEviction's last step alone: the evictions `decision`'s thresholds call for over its
// rankings (one it lacks is built from `view`). A caller that changed a ranking (re-placed a
// pod) re-plans with it.
std::vector<Eviction> planEvictions(const NodeView& view, const Policy& policy,
                                    const EvictionDecision& decision);

// The ranking a decision shows for a signal's resource: PIDs, ephemeral storage for a disk
// signal, memory otherwise (and when the decision carries no ranking of that resource).
const Ranking& shownRanking(const EvictionDecision& decision, Signal signal);

// The rankings on their own (docs/reference.md §4 "Ranking"), for any resource of the node.
// `reuse`, for the memory ranking: an earlier memory ranking under the same policy (taken:
// its entries are written over). When it ranks exactly the view's pods, its order is where
// the sort starts — repaired by insertion, so that a ranking whose pods did not move costs a
// pass instead of a sort (the agent's quiet cycles, every second). The ranking is the same
// with or without it: the order is total.
Ranking rankMemoryPressure(const NodeView& view, const Policy& policy, Ranking* reuse = nullptr);
Ranking rankPidPressure(const NodeView& view, const Policy& policy);
// The memory ranking's order, the one rankMemoryPressure sorts by: whether `a` is evicted
// before `b` with the figures of their entries (evictable pods first, then the policy's
// ranking, ties by key).
bool memoryRankedBefore(const RankedPod& a, const RankedPod& b, const Policy& policy);
// Re-places `pod` in `ranking`, a memory ranking of a view under `policy`, with the figures
// `stats` (nullptr: none): the ranking is then the one rankMemoryPressure builds over the view
// with those figures for the pod. Moves only the entries between its old and new places.
// False when the pod is not in the ranking (a terminating pod).
bool rerankMemoryPressure(Ranking& ranking, const Pod& pod, const PodStats* stats,
                          const Policy& policy);
// For a disk signal: its bytes or inodes, measured as the kubelet measures them for that
// signal (podDiskUsage over the figures buildSignalToRankFunc gives it).
Ranking rankDiskPressure(const NodeView& view, const Policy& policy, Signal signal);

// docs/reference.md §5 step 2: the pressure conditions §4 derives for `nodeName` from the
// snapshot's stats under `policy` (a threshold met, hard or soft, grace periods aside), added to
// its Node object where it does not already report them True. Returns the ones added.
std::vector<std::string> addDerivedPressureConditions(Snapshot& snapshot, std::string_view nodeName,
                                                      const Policy& policy);

// `explain eviction -o json` exactly as docs/reference.md §4 shows.
OrderedJson evictionToJson(const EvictionDecision& decision);

}  // namespace nodewarden::policy
