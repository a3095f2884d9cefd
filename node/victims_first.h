// Decide, victims first: the decision a full scan of every pod would make, from the node's
// fresh figures and the fresh figures of the few pods it can be about.
//
// A full scan reads every pod (five or so reads each) before deciding; at 1,000 pods that is
// where the time between a kernel notification and the kill went. Here a decision starts
// from the figures last read for each pod and reads afresh only what can change it:
//
//   1. evaluate   policy::evaluateEviction over the view as it stands (the node's figures
//                 fresh, each pod's as last read). No threshold to act on: that is the
//                 decision whatever the pods use — nothing is read. This is every quiet cycle.
//   2. victims    read the victims it names and the next `lookahead` evictable pods of the
//                 memory ranking (what the last reads put first), re-place each in the
//                 ranking and plan again, until every victim's figures are fresh.
//   3. certify    no pod left unread could rank before the last victim with the figures a
//                 full scan would read. A pod's working set is at most its memory usage, and
//                 every pod's usage is within kubepods' usage less that of the other pods
//                 (kubepods' is read with the node's figures; the pods read, and those outside
//                 the view, are subtracted); a pod whose rank that bound cannot keep behind
//                 the last victim has its usage read (one read); one that its usage cannot
//                 keep behind is read whole and goes back to step 2.
//
// The pods are ranked once a notification, at step 1 (from the order of the last decision's
// ranking when given: VictimsFirstOptions::lastRanking). A pod read is re-placed in that
// ranking (policy::rerankMemoryPressure: only the entries between its old and new places move)
// and the plan is made again over it (policy::planEvictions); step 3 compares each unread pod,
// given its bound, with the last victim by the ranking's own comparator
// (policy::memoryRankedBefore) — no copy of the view, no second sort.
//
// Why that is the full scan's decision: the memory ranking orders pods pairwise (priority,
// then usage against request; ties by key: a total order, so the ranking kept by re-placing
// the pods read is the one a sort of the view with their figures gives), and a pod's place
// can only move forward as its usage grows. The plan takes the ranking's prefix up to the last
// victim. With every pod in that prefix read afresh and every other pod shown unable to enter it,
// the prefix — and so the victims, their usage, the need they cover and their messages — is the one
// a full scan ranks. On a tree that does not move while it is read this is exact (tests/node
// compare the two on churned trees); on a live node every figure is as fresh as a scan's would be.
//
// Falls back to a full scan (FullScanReason) when:
//   - a threshold of another resource than memory is to act on (PIDs, disk): their rankings
//     have no such bound;
//   - the memory ranking counts swap (policy memoryRankingCountsSwap): usage does not bound it;
//   - the pods read would exceed kMaxPodsRead or the rounds kMaxRounds: many small victims,
//     or figures far from the last reads — reading everything is then as cheap.
// A pod cgroup that vanished when read is left out, as a full scan leaves it out. New pods
// need no fallback: a pod never read has no figures, ranks first in its priority as the
// kubelet ranks a pod without stats, and is read at step 2 when it could be chosen.
//
// Pure but for the injected reader; no clock, no logging.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "policy/eviction.h"

namespace nodewarden::node {

// Reads pods' figures during a decision. The agent reads cgroups and stores the figures where
// the view's pointers look; tests serve figures from a tree they change.
class PodFigureReader {
 public:
  virtual ~PodFigureReader() = default;
  struct Read {
    // What a full scan reads of the pod, stored where the view points (so it outlives the
    // decision); nullptr when the pod's cgroup is gone.
    const policy::PodStats* stats = nullptr;
    // Its memory usage, read with the working set (≥ it); nullopt when unreadable.
    std::optional<std::uint64_t> usage;
  };
  virtual Read read(const policy::Pod& pod) = 0;
  // The pod's memory usage alone (one read): at least its working set. nullopt when it cannot
  // be read (then the pod is read whole).
  virtual std::optional<std::uint64_t> usage(const policy::Pod& pod) = 0;
};

enum class FullScanReason {
  None,
  OtherResource,  // a threshold of PIDs or disk is to act on
  SwapRanked,     // the memory ranking counts swap
  TooManyPods,    // more than kMaxPodsRead would be read
  TooManyRounds,  // victims still changing after kMaxRounds reads
};
std::string_view toString(FullScanReason reason);

struct VictimsFirstOptions {
  int lookahead = 3;     // pods read beyond the victims, in ranking order
  int maxPodsRead = 64;  // read whole; beyond it a full scan is as cheap
  int maxRounds = 4;     // step 2 repeated
  // Signals whose victims will not be acted on (one is still exiting for them: the agent
  // chooses no second one). A decision with no other eviction is left as the figures last
  // read give it, nothing read nor certified: its evictions are not acted on.
  std::set<policy::Signal> busy;
  // The previous decision's memory ranking, taken as the sort's starting order
  // (policy::rankMemoryPressure's `reuse`): on a quiet node the pods keep their places, and a
  // pass over them replaces a sort of them every cycle. The decision is the same without it.
  policy::Ranking* lastRanking = nullptr;
};

struct VictimsFirstDecision {
  // The decision, when fullScan is None. Its rankings show the figures as last read (fresh
  // for the pods read); its evictions are the full scan's.
  std::optional<policy::EvictionResult> result;
  FullScanReason fullScan = FullScanReason::None;
  std::vector<std::string> vanished;  // UIDs whose cgroup was gone when read
  std::size_t podsRead = 0;           // read whole
  std::size_t usagesRead = 0;         // memory usage alone
  int rounds = 0;
};

// `view`: the pods that may be chosen (policy::NodeView; the node's stats fresh, each pod's
// as last read). `viewUsage`: what the view's pods use together at most — kubepods' memory
// usage read with the node's figures, less the usage of pods outside the view (nullopt:
// unknown; step 3 then reads usages). `state`, `now`: as evaluateEviction takes them.
VictimsFirstDecision decideVictimsFirst(const policy::NodeView& view,
                                        std::optional<std::uint64_t> viewUsage,
                                        const policy::Policy& policy,
                                        const policy::EvictionState& state, SteadyTime now,
                                        PodFigureReader& reader,
                                        const VictimsFirstOptions& options = {});

}  // namespace nodewarden::node
