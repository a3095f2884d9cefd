#include "policy/admission.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace nodewarden::policy {
namespace {

// The resources an incoming pod competes for, in the order the scheduler's fitsRequest checks
// them: the pod count, cpu, memory, ephemeral-storage, then extended resources by name.
struct Demand {
  std::vector<std::string> names;
  std::vector<std::int64_t> request;   // the incoming pod's (desired), parallel to names
  std::vector<std::int64_t> capacity;  // the node's allocatable
  std::vector<bool> limited;           // false: the node states no limit (pods only)
  // Where each name sits in Pod::fitRequests (0 cpu, 1 memory, 2 ephemeral-storage), or
  // kExtended; unused for "pods".
  std::vector<int> slot;
  RequestConsumer consumer = RequestConsumer::Kubelet;  // how the other pods are counted
};
constexpr int kExtended = 3;

Demand demandOf(const Pod& pod, const Node& node, RequestConsumer consumer) {
  Demand d;
  d.consumer = consumer;
  auto add = [&](const std::string& name, std::int64_t request, int slot) {
    d.names.push_back(name);
    d.request.push_back(request);
    d.slot.push_back(slot);
    if (name == "pods") {
      auto it = node.allocatable.find("pods");
      d.limited.push_back(it != node.allocatable.end());
      d.capacity.push_back(it == node.allocatable.end() ? 0 : it->second.value());
    } else {
      d.limited.push_back(true);
      d.capacity.push_back(amountOf(node.allocatable, name));
    }
  };
  add("pods", 1, kExtended);
  int slot = 0;
  for (const char* name : {"cpu", "memory", "ephemeral-storage"}) {
    auto it = pod.requests.find(name);
    if (it != pod.requests.end() && it->second > 0) add(name, it->second, slot);
    ++slot;
  }
  for (const auto& [name, amount] : pod.requests) {
    if (name == "cpu" || name == "memory" || name == "ephemeral-storage" || name == "pods") {
      continue;
    }
    if (amount > 0) add(name, amount, kExtended);
  }
  return d;
}

// Sums of requests are kept in 128 bits: pods may each request up to 2^63-1 (a quantity of
// exabytes), and a wrapped sum would read as room on a full node.
std::string toDecimal(Int128 value) {
  if (value == 0) return "0";
  const bool negative = value < 0;
  std::string digits;
  for (Int128 v = negative ? -value : value; v > 0; v /= 10) digits += char('0' + int(v % 10));
  if (negative) digits += '-';
  return {digits.rbegin(), digits.rend()};
}

// What one existing pod takes of each demanded resource, counted as `d.consumer` counts it.
void addUsage(const Demand& d, const Pod& pod, std::vector<Int128>& used, int sign) {
  used[0] += sign;
  const std::int64_t* fit = pod.fitRequests[int(d.consumer)];
  for (std::size_t i = 1; i < d.names.size(); ++i) {
    const int slot = d.slot[i];
    if (slot != kExtended) {
      used[i] += Int128(sign) * fit[slot];
    } else if (pod.extendedRequests) {
      const ResourceAmounts& requests = pod.requestsFor(d.consumer);
      auto it = requests.find(d.names[i]);
      if (it != requests.end()) used[i] += Int128(sign) * it->second;
    }
  }
}

// The first resource that does not fit, or -1.
int firstMisfit(const Demand& d, const std::vector<Int128>& used) {
  for (std::size_t i = 0; i < d.names.size(); ++i) {
    if (!d.limited[i]) continue;
    if (Int128(d.request[i]) > Int128(d.capacity[i]) - used[i]) return int(i);
  }
  return -1;
}

bool sameText(const std::string& a, const std::string& b) {
  // Called for every pod of a node, several times a decision: most UIDs differ in their
  // first character, which settles it without a memcmp call.
  return a.size() == b.size() && (a.empty() || a[0] == b[0]) && a == b;
}

bool samePod(const Pod& a, const Pod& b) {
  if (&a == &b) return true;
  if (!a.uid.empty() && !b.uid.empty()) return sameText(a.uid, b.uid);
  return sameText(a.key, b.key);
}

// The incoming pod's own entry among the node's bound pods, if it has one: found once, so
// the passes over the node compare pointers.
const Pod* selfOn(const Pod& pod, const NodeInfo& node) {
  for (const Pod* p : node.pods) {
    if (samePod(*p, pod)) return p;
  }
  return nullptr;
}

// Pods counted on the node for `pod`: every pod bound there (terminating ones too, unless
// excluded) and the pods nominated there with priority >= its own. `self` is selfOn().
std::vector<Int128> usageFor(const Pod& pod, const NodeInfo& node, const Demand& d,
                                   bool withTerminating, const Pod* self) {
  std::vector<Int128> used(d.names.size(), 0);
  for (const Pod* p : node.pods) {
    if (p == self || (!withTerminating && p->leaving())) continue;
    addUsage(d, *p, used, +1);
  }
  for (const Pod* p : node.nominated) {
    if (p->priority < pod.priority || samePod(*p, pod)) continue;
    addUsage(d, *p, used, +1);
  }
  return used;
}

std::string insufficientMessage(const Demand& d, const std::vector<Int128>& used, int i) {
  return "Node didn't have enough resource: " + d.names[std::size_t(i)] +
         ", requested: " + std::to_string(d.request[std::size_t(i)]) +
         ", used: " + toDecimal(used[std::size_t(i)]) +
         ", capacity: " + std::to_string(d.capacity[std::size_t(i)]);
}

// The scheduler's MoreImportantPod: higher priority, then the earlier start (a pod that has
// not started counts as newest); the key makes the order total.
bool moreImportant(const Pod* a, const Pod* b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  const WallMicros kNever = std::numeric_limits<WallMicros>::max();
  WallMicros sa = a->startTime.value_or(kNever), sb = b->startTime.value_or(kNever);
  if (sa != sb) return sa < sb;
  return a->key < b->key;
}

bool selectorIsEmpty(const LabelSelector& s) {
  return s.matchLabels.empty() && s.matchExpressions.empty();
}

std::vector<const Pod*> sortedByKey(std::vector<const Pod*> pods) {
  std::sort(pods.begin(), pods.end(), [](const Pod* a, const Pod* b) { return a->key < b->key; });
  return pods;
}

std::vector<const Pod*> lowerPriorityNominated(const Pod& pod, const NodeInfo& node) {
  std::vector<const Pod*> out;
  for (const Pod* p : node.nominated) {
    if (!samePod(*p, pod) && p->priority < pod.priority) out.push_back(p);
  }
  return sortedByKey(std::move(out));
}

// The pressure conditions the kubelet's eviction manager admits against.
std::vector<std::string> pressureConditions(const Node& node) {
  std::vector<std::string> out;
  for (const auto& c : node.conditions) {
    if (c.status != "True") continue;
    if (c.type == "MemoryPressure" || c.type == "DiskPressure" || c.type == "PIDPressure") {
      out.push_back(c.type);
    }
  }
  return out;
}

bool selectorMatches(const Pod& pod, const Node& node) {
  for (const auto& [key, value] : pod.nodeSelector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) return false;
  }
  return true;
}

// The first taint with one of `effects` that the pod does not tolerate.
const Taint* untoleratedTaint(const Pod& pod, const Node& node,
                              std::initializer_list<std::string_view> effects) {
  for (const auto& taint : node.taints) {
    if (std::find(effects.begin(), effects.end(), taint.effect) == effects.end()) continue;
    if (!tolerates(pod.tolerations, taint)) return &taint;
  }
  return nullptr;
}

// Nodes the scheduler would not even try for the pod: selector, taints, cordon.
bool filteredOut(const Pod& pod, const Node& node) {
  if (!selectorMatches(pod, node)) return true;
  if (untoleratedTaint(pod, node, {"NoSchedule", "NoExecute"}) != nullptr) return true;
  if (node.unschedulable) {
    Taint cordon{"node.kubernetes.io/unschedulable", "", "NoSchedule"};
    if (!tolerates(pod.tolerations, cordon)) return true;
  }
  return false;
}

template <typename Pods>
void appendKeys(OrderedJson& array, const Pods& pods) {
  for (const Pod* p : sortedByKey(pods)) array.push_back(p->key);
}

}  // namespace

const NodeInfo* ClusterIndex::find(std::string_view name) const {
  for (const auto& n : nodes) {
    if (n.node->name == name) return &n;
  }
  return nullptr;
}

ClusterIndex buildClusterIndex(const Snapshot& snapshot) {
  ClusterIndex index;
  index.nodes.reserve(snapshot.nodes.size());
  std::map<std::string_view, std::size_t> byName;
  for (const auto& node : snapshot.nodes) {
    byName.emplace(node.name, index.nodes.size());
    index.nodes.push_back(NodeInfo{&node, {}, {}});
  }
  for (const auto& pod : snapshot.pods) {
    if (pod.phase == "Succeeded" || pod.phase == "Failed") continue;
    if (!pod.nodeName.empty()) {
      if (auto it = byName.find(pod.nodeName); it != byName.end()) {
        index.nodes[it->second].pods.push_back(&pod);
      }
    } else if (!pod.nominatedNodeName.empty()) {
      if (auto it = byName.find(pod.nominatedNodeName); it != byName.end()) {
        index.nodes[it->second].nominated.push_back(&pod);
      }
    }
  }
  return index;
}

const char* verdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::Admit:
      return "admit";
    case Verdict::Reject:
      return "reject";
    case Verdict::Wait:
      return "wait";
    case Verdict::Preempt:
      return "preempt";
  }
  return "reject";
}

PdbIndex indexPdbs(const std::vector<PodDisruptionBudget>& pdbs) {
  PdbIndex index;
  index.pdbs = &pdbs;
  for (std::size_t i = 0; i < pdbs.size(); ++i) {
    const auto& pdb = pdbs[i];
    if (!pdb.selector || selectorIsEmpty(*pdb.selector)) continue;  // selects nothing
    index.byNamespace[pdb.ns].push_back(i);
  }
  return index;
}

void filterPodsWithPdbViolation(const std::vector<const Pod*>& pods, const PdbIndex& index,
                                std::vector<const Pod*>& violating,
                                std::vector<const Pod*>& nonViolating) {
  // Each budget's remaining disruptions, charged as pods are taken in order; only the
  // budgets of these pods' namespaces are ever touched.
  std::vector<std::pair<std::size_t, std::int64_t>> allowed;
  auto remaining = [&](std::size_t i) -> std::int64_t& {
    for (auto& [budget, left] : allowed) {
      if (budget == i) return left;
    }
    allowed.emplace_back(i, (*index.pdbs)[i].disruptionsAllowed);
    return allowed.back().second;
  };
  for (const Pod* pod : pods) {
    bool violated = false;
    auto budgets = pod->labels.empty() ? index.byNamespace.end()  // a pod without labels
                                       : index.byNamespace.find(pod->ns);  // matches no budget
    if (budgets != index.byNamespace.end()) {
      for (std::size_t i : budgets->second) {
        const auto& pdb = (*index.pdbs)[i];
        if (!pdb.selector->matches(pod->labels, pod->labelsBloom)) continue;
        // Already being disrupted, as the API server recorded: neither counted nor violating.
        if (pdb.disruptedPods.count(pod->name) != 0) continue;
        if (--remaining(i) < 0) violated = true;  // every matching budget is charged
      }
    }
    (violated ? violating : nonViolating).push_back(pod);
  }
}

void filterPodsWithPdbViolation(const std::vector<const Pod*>& pods,
                                const std::vector<PodDisruptionBudget>& pdbs,
                                std::vector<const Pod*>& violating,
                                std::vector<const Pod*>& nonViolating) {
  filterPodsWithPdbViolation(pods, indexPdbs(pdbs), violating, nonViolating);
}

namespace {

// SelectVictimsOnNode's first step: may the scheduler preempt `p` for `pod`?
bool isPotentialVictim(const Pod& p, const Pod& pod, const Policy& policy) {
  if (p.leaving() || p.priority >= pod.priority) return false;
  if (p.critical && !pod.critical) return false;
  if (p.priority >= policy.neverEvictPriority) return false;
  return !samePod(p, pod);
}

std::vector<const Pod*> potentialVictims(const Pod& pod, const NodeInfo& node,
                                         const Policy& policy) {
  std::vector<const Pod*> potential;
  for (const Pod* p : node.pods) {
    if (isPotentialVictim(*p, pod, policy)) potential.push_back(p);
  }
  return potential;
}

// The rest of SelectVictimsOnNode: most important first, budget-violating pods before the
// others, each pod is offered back with `stays(p)`, which adds it back and answers whether
// the incoming pod still fits (undoing the add when it does not). Those that cannot stay are
// the victims.
template <typename Stays>
void reprieveInOrder(std::vector<const Pod*> potential, const PdbIndex& pdbs, Stays stays,
                     VictimSelection& result) {
  std::sort(potential.begin(), potential.end(), moreImportant);
  std::vector<const Pod*> violating, nonViolating;
  filterPodsWithPdbViolation(potential, pdbs, violating, nonViolating);
  for (const Pod* p : violating) {
    if (stays(p)) continue;
    result.victims.push_back(p);
    ++result.numPDBViolations;
  }
  for (const Pod* p : nonViolating) {
    if (!stays(p)) result.victims.push_back(p);
  }
  std::sort(result.victims.begin(), result.victims.end(), moreImportant);
}

}  // namespace

VictimSelection selectVictimsOnNode(const Pod& pod, const NodeInfo& node,
                                    const std::vector<PodDisruptionBudget>& pdbs,
                                    const Policy& policy) {
  return selectVictimsOnNode(pod, node, indexPdbs(pdbs), policy);
}

VictimSelection selectVictimsOnNode(const Pod& pod, const NodeInfo& node, const PdbIndex& pdbs,
                                    const Policy& policy) {
  VictimSelection result;
  const Demand d = demandOf(pod, *node.node, RequestConsumer::Scheduler);
  // One pass: the potential victims, and what every other pod holds.
  std::vector<const Pod*> potential;
  std::vector<Int128> used(d.names.size(), 0);
  const Pod* self = nullptr;
  for (const Pod* p : node.pods) {
    if (isPotentialVictim(*p, pod, policy)) {
      potential.push_back(p);
    } else if (self == nullptr && samePod(*p, pod)) {
      self = p;
    } else {
      addUsage(d, *p, used, +1);
    }
  }
  for (const Pod* p : node.nominated) {
    if (p->priority >= pod.priority && !samePod(*p, pod)) addUsage(d, *p, used, +1);
  }
  int misfit = firstMisfit(d, used);
  if (potential.empty() || misfit >= 0) {
    if (misfit < 0) misfit = firstMisfit(d, usageFor(pod, node, d, true, self));
    result.failedResource = misfit >= 0 ? d.names[std::size_t(misfit)] : "";
    return result;
  }
  result.fits = true;
  // Running sums make each reprieve O(resources).
  reprieveInOrder(
      potential, pdbs,
      [&](const Pod* p) {
        addUsage(d, *p, used, +1);
        if (firstMisfit(d, used) < 0) return true;
        addUsage(d, *p, used, -1);
        return false;
      },
      result);
  return result;
}

VictimSelection selectVictimsOnNodeNaive(const Pod& pod, const NodeInfo& node,
                                         const std::vector<PodDisruptionBudget>& pdbs,
                                         const Policy& policy) {
  VictimSelection result;
  const PdbIndex index = indexPdbs(pdbs);
  const Demand d = demandOf(pod, *node.node, RequestConsumer::Scheduler);
  const std::vector<const Pod*> potential = potentialVictims(pod, node, policy);
  // Fit with `removed` gone, recomputed from every pod each time.
  auto fitsWithout = [&](const std::vector<const Pod*>& removed) {
    std::vector<Int128> used(d.names.size(), 0);
    for (const Pod* p : node.pods) {
      if (samePod(*p, pod)) continue;
      if (std::find(removed.begin(), removed.end(), p) != removed.end()) continue;
      addUsage(d, *p, used, +1);
    }
    for (const Pod* p : node.nominated) {
      if (!samePod(*p, pod) && p->priority >= pod.priority) addUsage(d, *p, used, +1);
    }
    return firstMisfit(d, used);
  };
  int misfit = fitsWithout(potential);
  if (potential.empty() || misfit >= 0) {
    result.failedResource = misfit >= 0 ? d.names[std::size_t(misfit)] : "";
    return result;
  }
  result.fits = true;
  std::vector<const Pod*> removed = potential;
  reprieveInOrder(
      potential, index,
      [&](const Pod* p) {
        std::vector<const Pod*> without;
        for (const Pod* r : removed) {
          if (r != p) without.push_back(r);
        }
        if (fitsWithout(without) >= 0) return false;
        removed = std::move(without);
        return true;
      },
      result);
  return result;
}

AdmissionDecision admitPod(const Pod& pod, const NodeInfo& node,
                           const std::vector<PodDisruptionBudget>& pdbs, const Policy& policy) {
  AdmissionDecision out;
  out.pod = pod.key;
  out.node = node.node->name;
  auto reject = [&](std::string reason, std::string message) {
    out.verdict = Verdict::Reject;
    out.reason = std::move(reason);
    out.message = std::move(message);
    return out;
  };

  // 1. The priority class must exist.
  if (!pod.priorityClassFound) {
    return reject("PriorityClassNotFound",
                  "no PriorityClass with name " + pod.priorityClassName + " was found");
  }
  // 2. The kubelet's eviction admission.
  const std::vector<std::string> conditions = pressureConditions(*node.node);
  if (!conditions.empty() && !pod.critical) {
    bool onlyMemory = conditions.size() == 1 && conditions[0] == "MemoryPressure";
    Taint memoryPressure{"node.kubernetes.io/memory-pressure", "", "NoSchedule"};
    bool admitted = onlyMemory &&
                    (pod.qos != QosClass::BestEffort || tolerates(pod.tolerations, memoryPressure));
    if (!admitted) {
      std::string list;
      for (const auto& c : conditions) list += (list.empty() ? "" : " ") + c;
      return reject("Evicted", "The node had condition: [" + list + "]. ");
    }
  }
  // 3. Node selector and NoExecute taints (static pods skip the taint check, as in the kubelet).
  if (!selectorMatches(pod, *node.node)) {
    return reject("NodeAffinity",
                  "Predicate NodeAffinity failed: node(s) didn't match Pod's node "
                  "affinity/selector");
  }
  if (!isStaticPod(pod)) {
    // The kubelet's wording (its own ErrReasonNotMatch), not the scheduler plugin's.
    if (untoleratedTaint(pod, *node.node, {"NoExecute"}) != nullptr) {
      return reject("TaintToleration",
                    "Predicate TaintToleration failed: node(s) had taints that the pod didn't "
                    "tolerate");
    }
  }
  // 4. Resource fit, counting nominated pods of equal or higher priority; the pods already
  //    here count what the kubelet allocated or applied, whichever is larger.
  const Demand d = demandOf(pod, *node.node, RequestConsumer::Kubelet);
  std::vector<Int128> used(d.names.size(), 0);
  std::vector<Int128> leaving(d.names.size(), 0);  // what terminating pods will free
  const Pod* self = nullptr;
  for (const Pod* p : node.pods) {
    if (self == nullptr && samePod(*p, pod)) {
      self = p;
      continue;
    }
    addUsage(d, *p, used, +1);
    if (p->leaving()) addUsage(d, *p, leaving, +1);
  }
  for (const Pod* p : node.nominated) {
    if (p->priority >= pod.priority && !samePod(*p, pod)) addUsage(d, *p, used, +1);
  }
  const int misfit = firstMisfit(d, used);
  if (misfit < 0) {
    out.verdict = Verdict::Admit;
    out.nominatedPodsToClear = lowerPriorityNominated(pod, node);
    return out;
  }
  const std::string reason = "OutOf" + d.names[std::size_t(misfit)];
  const std::string message = insufficientMessage(d, used, misfit);
  // 5. A pod that may not preempt is turned away.
  if (pod.preemptionPolicy == PreemptionPolicy::Never) return reject(reason, message);
  // 6. Room that terminating pods are about to free.
  std::vector<Int128> staying = used;
  for (std::size_t i = 0; i < staying.size(); ++i) staying[i] -= leaving[i];
  if (firstMisfit(d, staying) < 0) {
    out.verdict = Verdict::Wait;
    out.reason = reason;
    out.message = message + "; it fits once the terminating pods on the node are gone";
    out.nominatedPodsToClear = lowerPriorityNominated(pod, node);
    return out;
  }
  // 7. The scheduler's victim selection.
  VictimSelection selection = selectVictimsOnNode(pod, node, pdbs, policy);
  if (!selection.fits) {
    return reject(reason, message + "; preempting every lower-priority pod would not free enough");
  }
  out.verdict = Verdict::Preempt;
  out.reason = reason;
  out.message = message + "; preempting " + std::to_string(selection.victims.size()) +
                " lower-priority pod(s)";
  out.victims = sortedByKey(selection.victims);
  out.numPDBViolations = selection.numPDBViolations;
  out.nominatedPodsToClear = lowerPriorityNominated(pod, node);
  return out;
}

std::size_t pickOneNodeForPreemption(const std::vector<PreemptionCandidate>& candidates) {
  std::vector<std::size_t> best;
  for (std::size_t i = 0; i < candidates.size(); ++i) best.push_back(i);
  // Keeps only the candidates with the highest score.
  auto keepMax = [&](auto score) {
    if (best.size() <= 1) return;
    auto top = score(candidates[best[0]]);
    for (std::size_t i : best) top = std::max(top, score(candidates[i]));
    std::vector<std::size_t> kept;
    for (std::size_t i : best) {
      if (score(candidates[i]) == top) kept.push_back(i);
    }
    best = std::move(kept);
  };
  // 1. Fewest PDB violations.
  keepMax([](const PreemptionCandidate& c) { return -std::int64_t(c.numPDBViolations); });
  // 2. The lowest highest-priority victim (victims are most important first).
  keepMax([](const PreemptionCandidate& c) {
    return c.victims.empty() ? std::numeric_limits<std::int64_t>::max()
                             : -std::int64_t(c.victims[0]->priority);
  });
  // 3. The smallest sum of victim priorities, each offset by 2^31 so none is negative.
  keepMax([](const PreemptionCandidate& c) {
    std::int64_t sum = 0;
    for (const Pod* p : c.victims) sum += std::int64_t(p->priority) + (std::int64_t(1) << 31);
    return -sum;
  });
  // 4. The fewest victims.
  keepMax([](const PreemptionCandidate& c) { return -std::int64_t(c.victims.size()); });
  // 5. The latest start among each node's highest-priority victims (not started = newest).
  keepMax([](const PreemptionCandidate& c) {
    if (c.victims.empty()) return std::numeric_limits<WallMicros>::min();
    std::int32_t top = c.victims[0]->priority;
    WallMicros earliest = std::numeric_limits<WallMicros>::max();
    for (const Pod* p : c.victims) {
      if (p->priority == top) {
        earliest =
            std::min(earliest, p->startTime.value_or(std::numeric_limits<WallMicros>::max()));
      }
    }
    return earliest;
  });
  // 6. The node name, ascending, so the choice is repeatable.
  return *std::min_element(best.begin(), best.end(), [&](std::size_t a, std::size_t b) {
    return candidates[a].node->name < candidates[b].node->name;
  });
}

PreemptionDecision preemptCluster(const Pod& pod, const ClusterIndex& cluster,
                                  const std::vector<PodDisruptionBudget>& pdbs,
                                  const Policy& policy) {
  PreemptionDecision out;
  out.pod = pod.key;
  // 1. A node where the pod fits as it is wins at once: its nominated node if it fits there
  //    (the scheduler tries that first), else the first by name.
  auto fits = [&](const NodeInfo& info) {
    if (filteredOut(pod, *info.node)) return false;
    const Demand d = demandOf(pod, *info.node, RequestConsumer::Scheduler);
    return firstMisfit(d, usageFor(pod, info, d, true, selfOn(pod, info))) < 0;
  };
  const NodeInfo* fitting = nullptr;
  if (!pod.nominatedNodeName.empty()) {
    const NodeInfo* nominated = cluster.find(pod.nominatedNodeName);
    if (nominated != nullptr && fits(*nominated)) fitting = nominated;
  }
  for (const auto& info : cluster.nodes) {
    if (fitting != nullptr && fitting->node->name == pod.nominatedNodeName) break;
    if (!fits(info)) continue;
    if (fitting == nullptr || info.node->name < fitting->node->name) fitting = &info;
  }
  if (fitting != nullptr) {
    out.node = fitting->node;
    out.nominatedPodsToClear = lowerPriorityNominated(pod, *fitting);
    out.reason = "fits without preemption";
    return out;
  }
  // 2. Eligibility to preempt.
  if (pod.preemptionPolicy == PreemptionPolicy::Never) {
    out.reason = "not eligible due to preemptionPolicy=Never";
    return out;
  }
  if (!pod.nominatedNodeName.empty()) {
    if (const NodeInfo* nominated = cluster.find(pod.nominatedNodeName)) {
      for (const Pod* p : nominated->pods) {
        if (p->terminating && p->priority < pod.priority) {
          out.reason = "not eligible due to a terminating pod on the nominated node";
          return out;
        }
      }
    }
  }
  // 3. Candidates on every node.
  std::vector<PreemptionCandidate> candidates;
  const PdbIndex pdbIndex = indexPdbs(pdbs);
  for (const auto& info : cluster.nodes) {
    if (filteredOut(pod, *info.node)) continue;
    VictimSelection s = selectVictimsOnNode(pod, info, pdbIndex, policy);
    if (!s.fits || s.victims.empty()) continue;
    candidates.push_back(PreemptionCandidate{info.node, std::move(s.victims), s.numPDBViolations});
  }
  if (candidates.empty()) {
    out.reason = "preemption is not helpful for scheduling";
    return out;
  }
  // 4. The scheduler's choice.
  const std::size_t chosen = pickOneNodeForPreemption(candidates);
  out.node = candidates[chosen].node;
  out.victims = candidates[chosen].victims;
  out.numPDBViolations = candidates[chosen].numPDBViolations;
  out.nominatedPodsToClear = lowerPriorityNominated(pod, *cluster.find(out.node->name));
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (i != chosen) out.candidates.push_back(std::move(candidates[i]));
  }
  std::sort(out.candidates.begin(), out.candidates.end(),
            [](const PreemptionCandidate& a, const PreemptionCandidate& b) {
              return a.node->name < b.node->name;
            });
  return out;
}

OrderedJson admissionToJson(const AdmissionDecision& decision) {
  OrderedJson out = OrderedJson::object();
  out["pod"] = decision.pod;
  out["node"] = decision.node;
  out["verdict"] = verdictName(decision.verdict);
  out["reason"] = decision.reason;
  out["message"] = decision.message;
  out["victims"] = OrderedJson::array();
  appendKeys(out["victims"], decision.victims);
  out["numPDBViolations"] = decision.numPDBViolations;
  out["nominatedPodsToClear"] = OrderedJson::array();
  appendKeys(out["nominatedPodsToClear"], decision.nominatedPodsToClear);
  return out;
}

OrderedJson preemptionToJson(const PreemptionDecision& decision) {
  OrderedJson out = OrderedJson::object();
  out["pod"] = decision.pod;
  out["node"] = decision.node == nullptr ? OrderedJson(nullptr) : OrderedJson(decision.node->name);
  out["victims"] = OrderedJson::array();
  appendKeys(out["victims"], decision.victims);
  out["numPDBViolations"] = decision.numPDBViolations;
  out["candidates"] = OrderedJson::array();
  for (const auto& c : decision.candidates) {
    OrderedJson item = OrderedJson::object();
    item["node"] = c.node->name;
    item["victims"] = OrderedJson::array();
    appendKeys(item["victims"], c.victims);
    item["numPDBViolations"] = c.numPDBViolations;
    out["candidates"].push_back(std::move(item));
  }
  out["nominatedPodsToClear"] = OrderedJson::array();
  appendKeys(out["nominatedPodsToClear"], decision.nominatedPodsToClear);
  return out;
}

}  // namespace nodewarden::policy
