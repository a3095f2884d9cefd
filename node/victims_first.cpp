#include "node/victims_first.h"

#include <algorithm>
#include <deque>
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
        options_(options) {
    index();
  }

  VictimsFirstDecision run() {
    for (;;) {
      policy::EvictionResult result =
          policy::evaluateEviction(view_, policy_, state_, now_, policy::Rankings::Needed);
      if (auto reason = mustScan(result.decision); reason != FullScanReason::None) {
        return fullScan(reason);
      }
      if (!anyCounts(result.decision)) return decided(std::move(result));
      std::vector<std::size_t> toRead = unreadVictims(result.decision);
      if (toRead.empty()) {
        // Every victim is fresh: is any pod left unread able to enter their prefix?
        toRead = uncertified(result.decision);
        if (toRead.empty()) return decided(std::move(result));
      } else {
        addLookahead(result.decision, toRead);
      }
      if (++out_.rounds > options_.maxRounds) return fullScan(FullScanReason::TooManyRounds);
      if (int(out_.podsRead + toRead.size()) > options_.maxPodsRead) {
        return fullScan(FullScanReason::TooManyPods);
      }
      readWhole(toRead);
    }
  }

 private:
  void index() {
    position_.clear();
    for (std::size_t i = 0; i < view_.pods.size(); ++i) position_[view_.pods[i]] = i;
    fresh_.resize(view_.pods.size(), false);
    usage_.resize(view_.pods.size());
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

  std::vector<std::size_t> unreadVictims(const policy::EvictionDecision& decision) const {
    std::vector<std::size_t> unread;
    for (const policy::Eviction& eviction : decision.evict) {
      const std::size_t at = position_.at(eviction.pod);
      if (!fresh_[at]) unread.push_back(at);
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
  void addLookahead(const policy::EvictionDecision& decision, std::vector<std::size_t>& toRead) {
    const auto& ranked = decision.memory.pods;
    int added = 0;
    for (std::size_t r = lastVictimRank(decision) + 1;
         r < ranked.size() && added < options_.lookahead; ++r) {
      if (!ranked[r].evictable) break;
      const std::size_t at = position_.at(ranked[r].pod);
      if (fresh_[at] || std::find(toRead.begin(), toRead.end(), at) != toRead.end()) continue;
      toRead.push_back(at);
      ++added;
    }
  }

  // Step 3: the unread pods that could still rank before the last victim with the figures a
  // full scan would read; empty when the decision is certified.
  std::vector<std::size_t> uncertified(const policy::EvictionDecision& decision) {
    const policy::Pod* last = decision.memory.pods[lastVictimRank(decision)].pod;
    // Every pod's usage is within kubepods' (hierarchical counters); the pods read hold part
    // of it. What is left bounds any single unread pod's usage, hence its working set.
    std::uint64_t left = kUnbounded;
    if (kubepodsUsage_) {
      std::uint64_t read = 0;
      for (std::size_t i = 0; i < view_.pods.size(); ++i) {
        if (fresh_[i] && usage_[i]) {
          read += *usage_[i];
        } else if (auto it = bound_.find(view_.pods[i]); !fresh_[i] && it != bound_.end()) {
          read += *it->second->memoryWorkingSetBytes;
        }
      }
      left = *kubepodsUsage_ - std::min(*kubepodsUsage_, read);
    }
    policy::PodStats shared;
    shared.memoryWorkingSetBytes = left;
    auto boundOf = [&](std::size_t at) -> const policy::PodStats* {
      auto it = bound_.find(view_.pods[at]);
      return it == bound_.end() ? &shared : it->second;
    };
    std::vector<std::size_t> suspects = aheadOf(last, boundOf);
    if (suspects.empty()) return {};

    // Their own usage, one read each (kept for the rounds after: still a bound).
    std::vector<std::size_t> unreadable;
    for (std::size_t at : suspects) {
      if (bound_.contains(view_.pods[at])) continue;
      ++out_.usagesRead;
      if (auto usage = reader_.usage(*view_.pods[at])) {
        own_.emplace_back().memoryWorkingSetBytes = *usage;
        bound_[view_.pods[at]] = &own_.back();
      } else {
        unreadable.push_back(at);
      }
    }
    std::vector<std::size_t> still = aheadOf(last, boundOf);
    for (std::size_t at : unreadable) {
      if (std::find(still.begin(), still.end(), at) == still.end()) still.push_back(at);
    }
    return still;
  }

  // The unread evictable pods that rank before `last` when each unread pod with usage is
  // given the figures `boundOf` returns (the fresh ones keep theirs).
  template <typename BoundOf>
  std::vector<std::size_t> aheadOf(const policy::Pod* last, BoundOf boundOf) const {
    policy::NodeView pessimistic = view_;
    for (std::size_t i = 0; i < pessimistic.pods.size(); ++i) {
      const policy::PodStats* stats = pessimistic.podStats[i];
      // A pod absent from the view's figures ranks first in its priority; no bound moves it.
      // One with an entry but no working set yet (never read) counts 0, as the kubelet counts
      // a pod in its summary without the figure: only the bound says where it could be.
      if (fresh_[i] || stats == nullptr) continue;
      pessimistic.podStats[i] = boundOf(i);
    }
    const policy::Ranking ranking = policy::rankMemoryPressure(pessimistic, policy_);
    std::vector<std::size_t> ahead;
    for (const policy::RankedPod& ranked : ranking.pods) {
      if (ranked.pod == last) break;
      const std::size_t at = position_.at(ranked.pod);
      if (!fresh_[at] && ranked.evictable) ahead.push_back(at);
    }
    return ahead;
  }

  void readWhole(const std::vector<std::size_t>& positions) {
    std::vector<std::size_t> gone;
    for (std::size_t at : positions) {
      ++out_.podsRead;
      PodFigureReader::Read read = reader_.read(*view_.pods[at]);
      if (read.stats == nullptr) {
        gone.push_back(at);
        continue;
      }
      view_.podStats[at] = read.stats;
      fresh_[at] = true;
      usage_[at] = read.usage;
    }
    if (gone.empty()) return;
    // A pod whose cgroup vanished is off the node: a full scan leaves it out as well.
    std::sort(gone.begin(), gone.end());
    for (auto it = gone.rbegin(); it != gone.rend(); ++it) {
      out_.vanished.push_back(view_.pods[*it]->uid);
      view_.pods.erase(view_.pods.begin() + std::ptrdiff_t(*it));
      view_.podStats.erase(view_.podStats.begin() + std::ptrdiff_t(*it));
      view_.keyOrder.erase(view_.keyOrder.begin() + std::ptrdiff_t(*it));
      fresh_.erase(fresh_.begin() + std::ptrdiff_t(*it));
      usage_.erase(usage_.begin() + std::ptrdiff_t(*it));
    }
    position_.clear();
    for (std::size_t i = 0; i < view_.pods.size(); ++i) position_[view_.pods[i]] = i;
  }

  VictimsFirstDecision decided(policy::EvictionResult result) {
    out_.result = std::move(result);
    return std::move(out_);
  }

  VictimsFirstDecision fullScan(FullScanReason reason) {
    out_.fullScan = reason;
    return std::move(out_);
  }

  policy::NodeView view_;
  std::optional<std::uint64_t> kubepodsUsage_;
  const policy::Policy& policy_;
  const policy::EvictionState& state_;
  SteadyTime now_;
  PodFigureReader& reader_;
  VictimsFirstOptions options_;
  std::unordered_map<const policy::Pod*, std::size_t> position_;
  std::vector<bool> fresh_;
  std::vector<std::optional<std::uint64_t>> usage_;
  // Usages read at step 3, by pod: bounds for every later round too.
  std::deque<policy::PodStats> own_;
  std::unordered_map<const policy::Pod*, const policy::PodStats*> bound_;
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
