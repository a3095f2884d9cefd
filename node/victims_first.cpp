#include "node/victims_first.h"

#include <algorithm>
#include <unordered_map>

namespace nodewarden::node {

std::string_view toString(FullScanReason reason) {
  switch (reason) {
    case FullScanReason::None:
      return "none";
    case FullScanReason::OtherResource:
      return "a threshold of another resource than memory acts";
    case FullScanReason::SwapRanked:
      return "the memory ranking counts swap";
    case FullScanReason::TooManyPods:
      return "too many pods to read one by one";
    case FullScanReason::TooManyRounds:
      return "the victims kept changing as pods were read";
  }
  return "unknown";
}

namespace {

// Usage assumed for a pod when nothing bounds it: larger than any machine's memory, small
// enough that the ranking's 128-bit products stay exact.
constexpr std::uint64_t kUnbounded = std::uint64_t(1) << 62;

// One ranking a notification: the decision's memory ranking is built once, by the first
// evaluation, and kept as the full scan's would be by re-placing each pod read
// (policy::rerankMemoryPressure) and re-planning (policy::planEvictions); step 3 compares each
// unread pod, with its bound, against the last victim (policy::memoryRankedBefore). What a
// full scan's ranking orders pairwise, the same comparator decides here pod by pod.
class Decider {
 public:
  Decider(const policy::NodeView& view, std::optional<std::uint64_t> kubepodsUsage,
          const policy::Policy& policy, const policy::EvictionState& state, SteadyTime now,
          PodFigureReader& reader, const VictimsFirstOptions& options)
      : view_(view),
        kubepodsUsage_(kubepodsUsage),
        policy_(policy),
        state_(state),
        now_(now),
        reader_(reader),
        options_(options) {}

  VictimsFirstDecision run() {
    policy::EvictionResult result = policy::evaluateEviction(
        view_, policy_, state_, now_, policy::Rankings::Needed, options_.lastRanking);
    // The node's figures, hence the signals and what acts, stay through the rounds.
    if (auto reason = mustScan(result.decision); reason != FullScanReason::None) {
      return fullScan(reason);
    }
    policy::EvictionDecision& decision = result.decision;
    for (;;) {
      if (!anyCounts(decision)) return decided(std::move(result));
      std::vector<const policy::Pod*> toRead = unreadVictims(decision);
      if (toRead.empty()) {
        // Every victim is fresh: is any pod left unread able to enter their prefix?
        toRead = uncertified(decision);
        if (toRead.empty()) return decided(std::move(result));
      } else {
        addLookahead(decision, toRead);
      }
      if (++out_.rounds > options_.maxRounds) return fullScan(FullScanReason::TooManyRounds);
      if (int(out_.podsRead + toRead.size()) > options_.maxPodsRead) {
        return fullScan(FullScanReason::TooManyPods);
      }
      readWhole(toRead, decision.memory);
      // Only memory thresholds act (mustScan): their plan is the memory ranking's prefix.
      decision.evict = policy::planEvictions(view_, policy_, decision);
    }
  }

 private:
  // What the decision learnt of a pod it read.
  struct Read {
    bool fresh = false;                  // read whole: its figures are the full scan's
    bool gone = false;                   // its cgroup vanished when read
    std::optional<std::uint64_t> usage;  // memory usage read with it (fresh) …
    std::optional<std::uint64_t> bound;  // … or alone at step 3 (a bound for every later round)
  };

  bool fresh(const policy::Pod* pod) const {
    auto it = reads_.find(pod);
    return it != reads_.end() && it->second.fresh;
  }

  // Thresholds whose rankings usage cannot bound: a full scan decides those.
  FullScanReason mustScan(const policy::EvictionDecision& decision) const {
    bool acts = false;
    for (const policy::SignalStatus& status : decision.signals) {
      if (!status.actionable) continue;
      acts = true;
      if (policy::starvedResource(status.key.signal) != "memory") {
        return FullScanReason::OtherResource;
      }
    }
    if (acts && policy_.memoryRankingCountsSwap) return FullScanReason::SwapRanked;
    return FullScanReason::None;
  }

  // Whether the agent acts on any eviction of the decision. When it does, every eviction
  // counts: an earlier threshold's victims decide what a later one still needs.
  bool anyCounts(const policy::EvictionDecision& decision) const {
    return std::any_of(
        decision.evict.begin(), decision.evict.end(),
        [&](const policy::Eviction& e) { return !options_.busy.contains(e.signal); });
  }

  std::vector<const policy::Pod*> unreadVictims(const policy::EvictionDecision& decision) const {
    std::vector<const policy::Pod*> unread;
    for (const policy::Eviction& eviction : decision.evict) {
      if (!fresh(eviction.pod)) unread.push_back(eviction.pod);
    }
    return unread;
  }

  // The place in the memory ranking of the last victim (every evictable pod before it is a
  // victim: the plan takes a prefix).
  static std::size_t lastVictimRank(const policy::EvictionDecision& decision) {
    std::size_t last = 0;
    for (std::size_t r = 0; r < decision.memory.pods.size(); ++r) {
      for (const policy::Eviction& eviction : decision.evict) {
        if (eviction.pod == decision.memory.pods[r].pod) last = r;
      }
    }
    return last;
  }

  // The pods the ranking puts right after the victims: read with them, so that a victim that
  // turns out smaller than its last figure is replaced without another round.
  void addLookahead(const policy::EvictionDecision& decision,
                    std::vector<const policy::Pod*>& toRead) const {
    const auto& ranked = decision.memory.pods;
    int added = 0;
    for (std::size_t r = lastVictimRank(decision) + 1;
         r < ranked.size() && added < options_.lookahead; ++r) {
      if (!ranked[r].evictable) break;
      const policy::Pod* pod = ranked[r].pod;
      if (fresh(pod) || std::find(toRead.begin(), toRead.end(), pod) != toRead.end()) continue;
      toRead.push_back(pod);
      ++added;
    }
  }

  // Step 3: the unread pods that could still rank before the last victim with the figures a
  // full scan would read; empty when the decision is certified. The pods ranked before the
  // last victim are all victims, read: only those after it can move ahead of it, and one does
  // exactly when, given its bound, the ranking's comparator puts it before the last victim.
  std::vector<const policy::Pod*> uncertified(const policy::EvictionDecision& decision) {
    const auto& ranked = decision.memory.pods;
    const std::size_t lastRank = lastVictimRank(decision);
    const policy::RankedPod& last = ranked[lastRank];
    // Every pod's usage is within kubepods' (hierarchical counters); the pods read hold part
    // of it. What is left bounds any single unread pod's usage, hence its working set.
    std::uint64_t left = kUnbounded;
    if (kubepodsUsage_) {
      std::uint64_t read = 0;
      for (const auto& [pod, known] : reads_) {
        if (known.gone) continue;
        if (known.fresh) {
          read += known.usage.value_or(0);
        } else if (known.bound) {
          read += *known.bound;
        }
      }
      left = *kubepodsUsage_ - std::min(*kubepodsUsage_, read);
    }
    // Whether the unread pod ranked at `r` could rank before the last victim with `bound` as
    // its working set. A pod without figures in the view ranks first in its priority and no
    // bound moves it; one with an entry but no working set yet (never read) counts 0, as the
    // kubelet counts a pod in its summary without the figure: only the bound places it.
    auto ahead = [&](const policy::RankedPod& entry, std::uint64_t bound) {
      if (entry.stats == nullptr) return false;
      policy::RankedPod pessimistic = entry;
      pessimistic.usage = std::int64_t(std::min(bound, kUnbounded));
      return policy::memoryRankedBefore(pessimistic, last, policy_);
    };
    std::vector<const policy::Pod*> still;
    for (std::size_t r = lastRank + 1; r < ranked.size() && ranked[r].evictable; ++r) {
      const policy::RankedPod& entry = ranked[r];
      auto known = reads_.find(entry.pod);
      if (known != reads_.end() && known->second.fresh) continue;
      if (known != reads_.end() && known->second.bound) {
        if (ahead(entry, *known->second.bound)) still.push_back(entry.pod);
        continue;
      }
      if (!ahead(entry, left)) continue;
      // Its own usage, one read (kept for the rounds after: still a bound).
      ++out_.usagesRead;
      std::optional<std::uint64_t> usage = reader_.usage(*entry.pod);
      reads_[entry.pod].bound = usage;
      if (!usage || ahead(entry, *usage)) still.push_back(entry.pod);
    }
    return still;
  }

  // Reads the pods whole and re-places each in the ranking; one whose cgroup vanished leaves
  // it, as a full scan leaves it out.
  void readWhole(const std::vector<const policy::Pod*>& pods, policy::Ranking& ranking) {
    for (const policy::Pod* pod : pods) {
      ++out_.podsRead;
      PodFigureReader::Read read = reader_.read(*pod);
      Read& known = reads_[pod];
      if (read.stats == nullptr) {
        known.gone = true;
        out_.vanished.push_back(pod->uid);
        std::erase_if(ranking.pods, [&](const policy::RankedPod& r) { return r.pod == pod; });
        continue;
      }
      known.fresh = true;
      known.usage = read.usage;
      policy::rerankMemoryPressure(ranking, *pod, read.stats, policy_);
    }
  }

  VictimsFirstDecision decided(policy::EvictionResult result) {
    out_.result = std::move(result);
    return std::move(out_);
  }

  VictimsFirstDecision fullScan(FullScanReason reason) {
    out_.fullScan = reason;
    return std::move(out_);
  }

  const policy::NodeView& view_;
  std::optional<std::uint64_t> kubepodsUsage_;
  const policy::Policy& policy_;
  const policy::EvictionState& state_;
  SteadyTime now_;
  PodFigureReader& reader_;
  const VictimsFirstOptions& options_;
  // The pods read, whole or their usage alone: a handful, next to the ranking's 1,000.
  std::unordered_map<const policy::Pod*, Read> reads_;
  VictimsFirstDecision out_;
};

}  // namespace

VictimsFirstDecision decideVictimsFirst(const policy::NodeView& view,
                                        std::optional<std::uint64_t> viewUsage,
                                        const policy::Policy& policy,
                                        const policy::EvictionState& state, SteadyTime now,
                                        PodFigureReader& reader,
                                        const VictimsFirstOptions& options) {
  return Decider(view, viewUsage, policy, state, now, reader, options).run();
}

}  // namespace nodewarden::node
