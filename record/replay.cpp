#include "record/replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

namespace nodewarden::record {
namespace {

using policy::Int128;
using policy::OrderedJson;
using policy::Signal;

constexpr std::int64_t kSecond = 1'000'000'000;
constexpr SteadyTime kOrigin = SteadyTime{} + std::chrono::hours(1);

SteadyTime at(std::int64_t t) {
  return kOrigin + std::chrono::nanoseconds(t);
}

// Figures come from files: every sum saturates instead of overflowing.
std::int64_t clampTo64(Int128 v) {
  if (v > Int128(std::numeric_limits<std::int64_t>::max()))
    return std::numeric_limits<std::int64_t>::max();
  if (v < Int128(std::numeric_limits<std::int64_t>::min()))
    return std::numeric_limits<std::int64_t>::min();
  return std::int64_t(v);
}
std::int64_t add(std::int64_t a, std::int64_t b) {
  return clampTo64(Int128(a) + b);
}
std::int64_t sub(std::int64_t a, std::int64_t b) {
  return clampTo64(Int128(a) - b);
}
std::int64_t bytes(std::uint64_t v) {
  return clampTo64(Int128(v));
}

std::optional<std::int64_t> availableOf(const NodeFigures& node, Signal signal) {
  const auto& s = node.stats;
  if (signal == Signal::AllocatableMemoryAvailable) {
    if (s.podsMemoryAvailableBytes) return bytes(*s.podsMemoryAvailableBytes);
    return std::nullopt;
  }
  if (s.memoryAvailableBytes) return bytes(*s.memoryAvailableBytes);
  return std::nullopt;
}

std::int64_t capacityOf(const NodeFigures& node, Signal signal) {
  const auto& s = node.stats;
  if (signal == Signal::AllocatableMemoryAvailable) {
    return clampTo64(Int128(s.podsMemoryAvailableBytes.value_or(0)) +
                     s.podsMemoryWorkingSetBytes.value_or(0));
  }
  return clampTo64(Int128(s.memoryAvailableBytes.value_or(0)) +
                   s.memoryWorkingSetBytes.value_or(0));
}

// The node's figures with the pods' working set moved by `delta` bytes (positive: more used).
NodeFigures moved(const NodeFigures& node, std::int64_t delta) {
  NodeFigures out = node;
  auto shift = [delta](std::optional<std::uint64_t>& available,
                       std::optional<std::uint64_t>& used) {
    if (available)
      available = std::uint64_t(std::max<std::int64_t>(0, sub(bytes(*available), delta)));
    if (used) used = std::uint64_t(std::max<std::int64_t>(0, add(bytes(*used), delta)));
  };
  shift(out.stats.memoryAvailableBytes, out.stats.memoryWorkingSetBytes);
  shift(out.stats.podsMemoryAvailableBytes, out.stats.podsMemoryWorkingSetBytes);
  return out;
}

const policy::Policy& policyAt(const Episode& episode, std::size_t sample) {
  const PolicyChange* current = &episode.policies.front();
  for (const PolicyChange& change : episode.policies) {
    if (change.sample <= sample) current = &change;
  }
  return current->policy;
}

// The kubelet's oom_score_adj for a pod's containers (GetContainerOOMScoreAdjust), against the
// node's memory capacity.
int oomScoreAdj(const PodInfo& pod, std::int64_t nodeMemory) {
  if (pod.priority >= policy::kSystemNodeCriticalPriority) return -997;
  if (pod.qos == policy::QosClass::Guaranteed) return -997;
  if (pod.qos == policy::QosClass::BestEffort) return 1000;
  if (nodeMemory <= 0) return 999;
  const double share =
      double(std::clamp<std::int64_t>(pod.memoryRequest, 0, nodeMemory)) / double(nodeMemory);
  std::int64_t adj = 1000 - std::int64_t(1000 * share);
  if (adj < 3) adj = 3;
  if (adj == 1000) adj = 999;
  return int(adj);
}

OrderedJson planJson(const Episode& episode, const std::vector<PlannedEviction>& plan) {
  OrderedJson out = OrderedJson::array();
  for (const PlannedEviction& e : plan) {
    out.push_back({{"pod", e.pod < episode.pods.size() ? episode.pods[e.pod].key() : "?"},
                   {"signal", std::string(policy::toString(e.signal))},
                   {"kind", e.hard ? "hard" : "soft"},
                   {"gracePeriodSeconds", e.gracePeriodSeconds}});
  }
  return out;
}

// The plan of a decision in the recording's terms (pod entries by index).
std::vector<PlannedEviction> planOf(const policy::EvictionDecision& decision,
                                    const SampleView& view) {
  std::vector<PlannedEviction> plan;
  for (const policy::Eviction& e : decision.evict) {
    PlannedEviction p;
    p.pod = std::uint32_t(e.pod - view.pods.data());
    p.signal = e.signal;
    p.hard = e.hard;
    p.gracePeriodSeconds = e.gracePeriodSeconds;
    plan.push_back(p);
  }
  return plan;
}

bool samePlan(const std::vector<PlannedEviction>& a, const std::vector<PlannedEviction>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].pod != b[i].pod || a[i].signal != b[i].signal || a[i].hard != b[i].hard ||
        a[i].gracePeriodSeconds != b[i].gracePeriodSeconds) {
      return false;
    }
  }
  return true;
}

// Pass A: the recorded inputs through the decision code, plan against plan.
void checkFidelity(const Episode& episode, ReplayResult& result) {
  SampleView view;
  policy::EvictionState state = initialState(episode, kOrigin);
  for (std::size_t i = 0; i < episode.samples.size(); ++i) {
    const Sample& sample = episode.samples[i];
    buildView(episode, sample, view);
    policy::EvictionResult evaluated = policy::evaluateEviction(
        view.view, policyAt(episode, i), state, at(sample.t), policy::Rankings::Needed);
    ++result.evaluations;
    const std::vector<PlannedEviction> plan = planOf(evaluated.decision, view);
    if (!samePlan(plan, sample.plan)) {
      if (!result.divergence) {
        result.divergence = ReplayResult::Divergence{i, sample.t, planJson(episode, sample.plan),
                                                     planJson(episode, plan)};
      }
    } else {
      for (std::size_t j = 0; j < plan.size(); ++j) {
        if (!sample.plan[j].ordered) continue;
        const PodInfo& pod = episode.pods[plan[j].pod];
        ReplayedEviction e;
        e.sample = i;
        e.t = sample.t;
        e.pod = pod.key();
        e.uid = pod.uid;
        e.signal = plan[j].signal;
        e.hard = plan[j].hard;
        e.gracePeriodSeconds = plan[j].gracePeriodSeconds;
        e.usage = evaluated.decision.evict[j].usage;
        result.decisions.push_back(std::move(e));
      }
    }
    state = std::move(evaluated.next);
  }
  result.fidelity = result.divergence ? Fidelity::Diverged : Fidelity::Identical;
}

// One pod across the episode (by UID: a pod whose entry changed is the same pod).
struct Track {
  std::string uid;
  std::uint32_t entry = 0;  // its latest pod entry
  PodFigures last;
  bool present = false;  // in the current recorded sample
  bool gone = false;     // removed by the simulation (evicted and freed, or killed)
  bool inFlight = false;
  Signal signal = Signal::MemoryAvailable;
  std::int64_t freeAt = 0;
  std::optional<std::int64_t> evictedAt;
};

struct World {
  std::vector<Track> tracks;
  std::unordered_map<std::string, std::size_t> byUid;
  std::vector<PodFigures> pods;  // the simulated pods of the current sample
};

std::int64_t ws(const PodFigures& p) {
  return bytes(p.workingSet.value_or(0));
}

// Updates the tracks from a recorded sample; returns the recorded pods' working set.
std::int64_t follow(const Episode& episode, const Sample& sample, World& world) {
  for (Track& t : world.tracks) t.present = false;
  std::int64_t recorded = 0;
  for (const PodFigures& p : sample.pods) {
    const std::string& uid = episode.pods[p.pod].uid;
    auto [it, added] = world.byUid.emplace(uid, world.tracks.size());
    if (added) {
      Track track;
      track.uid = uid;
      world.tracks.push_back(std::move(track));
    }
    Track& t = world.tracks[it->second];
    t.present = true;
    t.entry = p.pod;
    t.last = p;
    recorded = add(recorded, ws(p));
  }
  return recorded;
}

struct Simulation {
  std::vector<ReplayedEviction> orders;
  std::vector<KernelKill> kills;
  std::vector<std::int64_t> used;  // limit signal's used bytes per sample
  std::int64_t evictedBytes = 0;
};

struct RecordedKill {
  std::int64_t t = 0;
  std::optional<std::string> uid;
  bool podLimit = false;
};

// The simulated world under `policyFor` (null: no policy, the kernel alone).
Simulation simulate(const Episode& episode, const policy::Policy* candidate, bool usePolicy,
                    Signal limit, std::int64_t killLine, std::int64_t killLatency,
                    const std::vector<RecordedKill>& recordedKills, std::size_t& evaluations) {
  Simulation sim;
  World world;
  SampleView view;
  policy::EvictionState state = initialState(episode, kOrigin);
  std::set<std::string> usedVictims;
  const std::int64_t nodeMemory =
      episode.samples.empty() ? 0
                              : capacityOf(episode.samples.front().node, Signal::MemoryAvailable);
  for (std::size_t i = 0; i < episode.samples.size(); ++i) {
    const Sample& sample = episode.samples[i];
    const std::int64_t recorded = follow(episode, sample, world);
    for (Track& t : world.tracks) {
      if (t.inFlight && sample.t >= t.freeAt) {
        t.inFlight = false;
        t.gone = true;
      }
    }
    auto compose = [&](NodeFigures& node) {
      world.pods.clear();
      std::int64_t simulated = 0;
      for (const Track& t : world.tracks) {
        if (t.gone) continue;
        PodFigures p = t.last;
        p.pod = t.entry;
        p.candidate = !t.inFlight;
        simulated = add(simulated, ws(p));
        world.pods.push_back(p);
      }
      node = moved(sample.node, sub(simulated, recorded));
    };
    NodeFigures node;
    compose(node);
    // The kernel, at the line where it killed in the recording.
    for (std::size_t guard = 0; guard < world.tracks.size(); ++guard) {
      const auto available = availableOf(node, limit);
      if (!available || *available > killLine) break;
      Track* victim = nullptr;
      for (const RecordedKill& k : recordedKills) {
        if (!k.uid || k.podLimit || usedVictims.count(*k.uid)) continue;
        auto it = world.byUid.find(*k.uid);
        if (it != world.byUid.end() && !world.tracks[it->second].gone) {
          victim = &world.tracks[it->second];
          break;
        }
      }
      if (victim == nullptr) {
        double best = -std::numeric_limits<double>::infinity();
        for (Track& t : world.tracks) {
          if (t.gone) continue;
          const PodInfo& info = episode.pods[t.entry];
          const double score = double(ws(t.last)) + double(oomScoreAdj(info, nodeMemory)) *
                                                        double(capacityOf(node, limit)) / 1000.0;
          if (victim == nullptr || score > best ||
              (score == best && info.key() < episode.pods[victim->entry].key())) {
            victim = &t;
            best = score;
          }
        }
      }
      if (victim == nullptr) break;
      victim->gone = true;
      victim->inFlight = false;
      usedVictims.insert(victim->uid);
      sim.kills.push_back(KernelKill{sample.t, episode.pods[victim->entry].key()});
      compose(node);
    }
    sim.used.push_back(sub(capacityOf(node, limit), availableOf(node, limit).value_or(0)));
    if (!usePolicy) continue;
    const policy::Policy& policy = candidate != nullptr ? *candidate : policyAt(episode, i);
    buildView(episode, node, world.pods, view);
    policy::EvictionResult evaluated =
        policy::evaluateEviction(view.view, policy, state, at(sample.t), policy::Rankings::Needed);
    ++evaluations;
    std::set<Signal> busy;
    for (const Track& t : world.tracks) {
      if (t.inFlight) busy.insert(t.signal);
    }
    for (const policy::Eviction& e : evaluated.decision.evict) {
      if (busy.count(e.signal) != 0) continue;
      const std::uint32_t entry = std::uint32_t(e.pod - view.pods.data());
      Track& t = world.tracks[world.byUid.at(episode.pods[entry].uid)];
      if (t.inFlight || t.gone) continue;
      t.inFlight = true;
      t.signal = e.signal;
      t.freeAt = add(
          add(sample.t,
              clampTo64(Int128(std::clamp<std::int64_t>(e.gracePeriodSeconds, 0, 1'000'000'000)) *
                        kSecond)),
          killLatency);
      t.evictedAt = sample.t;
      ReplayedEviction order;
      order.sample = i;
      order.t = sample.t;
      order.pod = episode.pods[entry].key();
      order.uid = episode.pods[entry].uid;
      order.signal = e.signal;
      order.hard = e.hard;
      order.gracePeriodSeconds = e.gracePeriodSeconds;
      order.usage = e.usage;
      sim.evictedBytes = add(sim.evictedBytes, e.usage);
      sim.orders.push_back(std::move(order));
    }
    state = std::move(evaluated.next);
  }
  return sim;
}

}  // namespace

std::string_view toString(Fidelity fidelity) {
  switch (fidelity) {
    case Fidelity::Identical:
      return "identical";
    case Fidelity::Diverged:
      return "diverged";
    case Fidelity::NotChecked:
      return "not-checked";
  }
  return "not-checked";
}

Signal limitSignalOf(const Episode& episode) {
  std::optional<std::int64_t> node, pods;
  for (const Sample& s : episode.samples) {
    if (auto a = availableOf(s.node, Signal::MemoryAvailable))
      node = std::min(node.value_or(*a), *a);
    if (auto a = availableOf(s.node, Signal::AllocatableMemoryAvailable)) {
      pods = std::min(pods.value_or(*a), *a);
    }
  }
  if (pods && (!node || *pods < *node)) return Signal::AllocatableMemoryAvailable;
  return Signal::MemoryAvailable;
}

ReplayResult replay(const Episode& episode, const ReplayOptions& options) {
  ReplayResult result;
  result.policyName = options.policyName;
  if (episode.samples.empty() || episode.policies.empty()) return result;
  result.policyIsRecorded = !options.policy.has_value();
  if (options.policy) {
    result.policyIsRecorded = true;
    for (const PolicyChange& change : episode.policies) {
      if (!samePolicy(change.policy, *options.policy)) result.policyIsRecorded = false;
    }
  }
  if (result.policyIsRecorded) checkFidelity(episode, result);

  // What the recording says happened.
  const Signal limit = limitSignalOf(episode);
  result.limitSignal = limit;
  result.recordedOomKills = 0;
  std::vector<RecordedKill> kills;
  for (const OomKill& k : episode.oomKills) {
    result.recordedOomKills += std::size_t(k.count);
    RecordedKill kill;
    kill.t = k.t;
    if (k.pod && *k.pod < episode.pods.size()) kill.uid = episode.pods[*k.pod].uid;
    kill.podLimit = k.limit == "pod";
    kills.push_back(kill);
  }
  // The line the kernel killed at: the tightest the node was before a node-level kill.
  std::optional<std::int64_t> line;
  for (const OomKill& k : episode.oomKills) {
    if (k.limit == "pod") continue;
    const std::size_t last = k.sample == 0 ? 0 : k.sample - 1;
    for (std::size_t s = 0; s <= last && s < episode.samples.size(); ++s) {
      if (auto a = availableOf(episode.samples[s].node, limit))
        line = std::min(line.value_or(*a), *a);
    }
  }
  result.killLine = line.value_or(0);
  // The kill latency the recording shows (median order → emptied), for freeing memory.
  std::vector<double> elapsed;
  for (const Outcome& o : episode.outcomes) {
    if (o.emptied) elapsed.push_back(o.elapsedMs);
  }
  std::int64_t killLatency = 0;
  if (!elapsed.empty()) {
    std::nth_element(elapsed.begin(), elapsed.begin() + long(elapsed.size() / 2), elapsed.end());
    killLatency = std::int64_t(std::clamp(elapsed[elapsed.size() / 2], 0.0, 1e6) * 1e6);
  }
  bool acted = false;
  for (const Order& o : episode.orders) acted |= !o.dryRun;

  for (const Sample& s : episode.samples) {
    result.capacity.push_back(capacityOf(s.node, limit));
    result.recordedUsed.push_back(
        sub(capacityOf(s.node, limit), availableOf(s.node, limit).value_or(0)));
  }

  // The kernel alone.
  std::size_t ignored = 0;
  const Simulation alone =
      simulate(episode, nullptr, false, limit, result.killLine, killLatency, kills, ignored);
  if (!acted) {
    result.kernelAlone.fromRecording = true;
    for (const OomKill& k : episode.oomKills) {
      result.kernelAlone.kills.push_back(
          KernelKill{k.t, k.pod && *k.pod < episode.pods.size() ? episode.pods[*k.pod].key() : ""});
    }
  } else {
    result.kernelAlone.kills = alone.kills;
  }

  // The world under the policy.
  const bool useRecording = result.policyIsRecorded && acted;
  const policy::Policy* candidate = options.policy ? &*options.policy : nullptr;
  if (useRecording) {
    result.evictedBytes = 0;
    for (const ReplayedEviction& e : result.decisions)
      result.evictedBytes = add(result.evictedBytes, e.usage);
    result.killsLeft = result.recordedOomKills;
  } else {
    Simulation sim = simulate(episode, result.policyIsRecorded ? nullptr : candidate, true, limit,
                              result.killLine, killLatency, kills, result.evaluations);
    result.simulated = true;
    result.decisions = std::move(sim.orders);
    result.simulatedKills = std::move(sim.kills);
    result.simulatedUsed = std::move(sim.used);
    result.evictedBytes = sim.evictedBytes;
    result.killsLeft = result.simulatedKills.size();
    for (const RecordedKill& k : kills) {
      if (!k.podLimit) continue;
      bool evictedBefore = false;
      for (const ReplayedEviction& e : result.decisions) {
        if (k.uid && e.uid == *k.uid && e.t <= k.t) evictedBefore = true;
      }
      if (!evictedBefore) ++result.killsLeft;
    }
    if (result.recordedOomKills > 0) result.prevented = result.killsLeft == 0;
  }

  // Demand without any eviction or kill: every pod the recording lost held at its last figure.
  World world;
  std::vector<std::int64_t> base(episode.samples.size());
  std::vector<std::vector<std::int64_t>> figures;  // per track, per sample
  for (std::size_t i = 0; i < episode.samples.size(); ++i) {
    const Sample& sample = episode.samples[i];
    const std::int64_t recorded = follow(episode, sample, world);
    if (figures.size() < world.tracks.size()) {
      figures.resize(world.tracks.size(), std::vector<std::int64_t>(episode.samples.size(), 0));
    }
    std::int64_t all = 0;
    for (std::size_t k = 0; k < world.tracks.size(); ++k) {
      figures[k][i] = ws(world.tracks[k].last);
      all = add(all, figures[k][i]);
    }
    // Not moved(): it floors at 0, and the shortfall below it matters here.
    const auto available = availableOf(sample.node, limit);
    base[i] = available ? sub(*available, sub(all, recorded)) : 0;
  }
  std::size_t tightest = 0;
  for (std::size_t i = 0; i < base.size(); ++i) {
    if (base[i] < base[tightest]) tightest = i;
  }
  // What the policy itself asks for at the tightest moment of the kernel alone: its highest
  // threshold on the limit signal plus that threshold's minimum reclaim, less what was
  // available (the kubelet's "threshold + minimum reclaim − available"); without a threshold
  // there, what keeps the node above the kill line.
  {
    const policy::Policy& asked = candidate != nullptr ? *candidate : policyAt(episode, tightest);
    const std::int64_t capacity = capacityOf(episode.samples[tightest].node, limit);
    std::optional<std::int64_t> goal;
    for (const policy::Threshold& t : asked.thresholds) {
      if (t.signal != limit) continue;
      const std::int64_t value = t.value.resolve(capacity).value();
      const std::int64_t reclaim =
          t.minReclaim.isZero() ? 0 : t.minReclaim.resolve(capacity).value();
      goal = std::max(goal.value_or(add(value, reclaim)), add(value, reclaim));
    }
    result.neededBytes =
        std::max<std::int64_t>(0, sub(goal ? *goal : add(result.killLine, 1), base[tightest]));
  }

  // Perfect foresight, in the policy's ranking at the tightest moment.
  {
    const policy::Policy& ranked = candidate != nullptr ? *candidate : policyAt(episode, tightest);
    std::vector<PodFigures> all;
    for (std::size_t k = 0; k < world.tracks.size(); ++k) {
      PodFigures p = world.tracks[k].last;
      p.pod = world.tracks[k].entry;
      p.candidate = true;
      p.workingSet = std::uint64_t(figures[k][tightest]);
      if (figures[k][tightest] == 0 && !world.tracks[k].present) continue;
      all.push_back(p);
    }
    SampleView view;
    buildView(episode, episode.samples[tightest].node, all, view);
    const policy::Ranking ranking = policy::rankMemoryPressure(view.view, ranked);
    std::vector<std::int64_t> margin = base;
    auto safe = [&] {
      return std::all_of(margin.begin(), margin.end(),
                         [&](std::int64_t m) { return m > result.killLine; });
    };
    PerfectForesightBound& bound = result.perfectForesight;
    for (const policy::RankedPod& r : ranking.pods) {
      if (safe()) break;
      if (!r.evictable) continue;
      const std::size_t k = world.byUid.at(r.pod->uid);
      for (std::size_t i = 0; i < margin.size(); ++i) margin[i] = add(margin[i], figures[k][i]);
      bound.pods.push_back(r.pod->key);
      bound.evictedBytes = add(bound.evictedBytes, figures[k][tightest]);
    }
    bound.feasible = safe();
  }

  // Lead time: to the recorded kill, else the kernel alone's, else the tightest moment.
  if (!episode.oomKills.empty()) {
    result.referenceT = episode.oomKills.front().t;
  } else if (!alone.kills.empty()) {
    result.referenceT = alone.kills.front().t;
  } else {
    result.referenceT = episode.samples[tightest].t;
  }
  if (!result.decisions.empty()) {
    result.leadTimeMs = double(sub(*result.referenceT, result.decisions.front().t)) / 1e6;
  }
  return result;
}

namespace {
// Seconds with millisecond precision, for output.
double seconds(std::int64_t nanos) {
  return std::round(double(nanos) / 1e6) / 1e3;
}
}  // namespace

OrderedJson replayJson(const ReplayResult& r, const Episode& episode, const std::string& file) {
  OrderedJson out;
  out["file"] = file;
  out["policy"] = r.policyName;
  out["fidelity"] = std::string(toString(r.fidelity));
  if (r.divergence) {
    out["divergence"] = {{"sample", r.divergence->sample},
                         {"recorded", r.divergence->recorded},
                         {"replayed", r.divergence->replayed}};
  } else {
    out["divergence"] = nullptr;
  }
  OrderedJson decisions = OrderedJson::array();
  for (const ReplayedEviction& e : r.decisions) {
    decisions.push_back({{"t", seconds(e.t)},
                         {"pod", e.pod},
                         {"signal", std::string(policy::toString(e.signal))},
                         {"action", "evict"}});
  }
  out["decisions"] = std::move(decisions);
  out["kernelOomKills"] = {
      {"recorded", r.recordedOomKills},
      {"prevented", r.prevented ? OrderedJson(*r.prevented) : OrderedJson(nullptr)}};
  out["leadTimeMs"] =
      r.leadTimeMs ? OrderedJson(std::round(*r.leadTimeMs * 10) / 10) : OrderedJson(nullptr);
  out["evictedBytes"] = r.evictedBytes;
  out["neededBytes"] = r.neededBytes;
  OrderedJson alone;
  alone["source"] = r.kernelAlone.fromRecording ? "recording" : "simulation";
  alone["oomKills"] = r.kernelAlone.kills.size();
  alone["victims"] = OrderedJson::array();
  for (const KernelKill& k : r.kernelAlone.kills) alone["victims"].push_back(k.pod);
  alone["firstKillSeconds"] = r.kernelAlone.kills.empty()
                                  ? OrderedJson(nullptr)
                                  : OrderedJson(seconds(r.kernelAlone.kills.front().t));
  OrderedJson foresight;
  foresight["evictions"] = r.perfectForesight.pods.size();
  foresight["pods"] = r.perfectForesight.pods;
  foresight["evictedBytes"] = r.perfectForesight.evictedBytes;
  foresight["feasible"] = r.perfectForesight.feasible;
  out["bounds"] = {{"kernelAlone", alone}, {"perfectForesight", foresight}};
  // Beyond §8: how the figures above were reached.
  out["simulated"] = r.simulated;
  out["simulatedOomKills"] = r.simulatedKills.size();
  out["limitSignal"] = std::string(policy::toString(r.limitSignal));
  out["killLine"] = r.killLine;
  out["samples"] = episode.samples.size();
  out["seconds"] = episode.samples.empty()
                       ? 0.0
                       : seconds(sub(episode.samples.back().t, episode.samples.front().t));
  return out;
}

}  // namespace nodewarden::record
