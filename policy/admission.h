// Admission of a pod bound to a node, and the scheduler's preemption rules (docs/reference.md
// §5-§6).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/model.h"
#include "policy/policy.h"

namespace nodewarden::policy {

// The pods that hold or reserve a node's resources, as the scheduler's NodeInfo sees them.
struct NodeInfo {
  const Node* node = nullptr;
  std::vector<const Pod*> pods;       // bound here, phase neither Succeeded nor Failed
  std::vector<const Pod*> nominated;  // status.nominatedNodeName here, not bound anywhere
};

// Every node of a snapshot with its pods; built once, used for many decisions. Pointers refer
// into the snapshot, which must outlive the index.
struct ClusterIndex {
  std::vector<NodeInfo> nodes;  // in the snapshot's order
  const NodeInfo* find(std::string_view name) const;
};
ClusterIndex buildClusterIndex(const Snapshot& snapshot);
ClusterIndex buildClusterIndex(Snapshot&&) = delete;  // the index would dangle

enum class Verdict { Admit, Reject, Wait, Preempt };
const char* verdictName(Verdict verdict);

struct AdmissionDecision {
  std::string pod;
  std::string node;
  Verdict verdict = Verdict::Admit;
  std::string reason;  // "" for admit; PriorityClassNotFound, Evicted, NodeAffinity, ...
  std::string message;
  std::vector<const Pod*> victims;  // sorted by pod key; only for preempt
  int numPDBViolations = 0;
  std::vector<const Pod*> nominatedPodsToClear;  // sorted by pod key; empty for reject
};

// docs/reference.md §5: the verdict for `pod` on `node`. `pdbs` are the cluster's disruption
// budgets. Pure; `pod` need not be part of the index (if it is, it does not count against itself).
AdmissionDecision admitPod(const Pod& pod, const NodeInfo& node,
                           const std::vector<PodDisruptionBudget>& pdbs, const Policy& policy);

// The victims SelectVictimsOnNode picks, for a pod that failed only on resources.
struct VictimSelection {
  bool fits = false;  // false: even without every lower-priority pod the pod does not fit
  std::vector<const Pod*> victims;  // most important first
  int numPDBViolations = 0;
  std::string failedResource;  // when !fits
};
VictimSelection selectVictimsOnNode(const Pod& pod, const NodeInfo& node,
                                    const std::vector<PodDisruptionBudget>& pdbs,
                                    const Policy& policy);

// The budgets that can select anything, by namespace, with what a pod's labelBloom() must
// show for each to match it: built once, used for many victim selections. Refers into `pdbs`,
// which must outlive it.
struct PdbIndex {
  struct Budget {
    std::size_t pdb;  // place in *pdbs
    // A pod can match only if its labelsBloom has every bit of `allOf` (the matchLabels) and,
    // for each `In` requirement, every bit of one of the requirement's values' pairs:
    // anyOf[groups[g].first, groups[g].second) for g in [firstGroup, endGroup).
    std::uint64_t allOf;
    std::uint32_t firstGroup, endGroup;
  };
  struct Namespace {
    std::uint64_t head = 0, tail = 0;  // the name's first and last eight bytes, and length
    std::string_view name;
    std::uint32_t first = 0, count = 0;  // its run of `budgets`; count 0: an empty slot
  };
  const std::vector<PodDisruptionBudget>* pdbs = nullptr;
  std::vector<Budget> budgets;  // each namespace's next to each other
  std::vector<std::pair<std::uint32_t, std::uint32_t>> groups;
  std::vector<std::uint64_t> anyOf;
  std::vector<Namespace> namespaces;  // open addressing; a power of two in size
};
PdbIndex indexPdbs(const std::vector<PodDisruptionBudget>& pdbs);
PdbIndex indexPdbs(std::vector<PodDisruptionBudget>&&) = delete;  // the index would dangle
VictimSelection selectVictimsOnNode(const Pod& pod, const NodeInfo& node, const PdbIndex& pdbs,
                                    const Policy& policy);

// The scheduler's filterPodsWithPDBViolation: splits `pods` (most important first) into those
// whose eviction would violate a budget and those whose would not, each keeping its order.
void filterPodsWithPdbViolation(const std::vector<const Pod*>& pods,
                                const std::vector<PodDisruptionBudget>& pdbs,
                                std::vector<const Pod*>& violating,
                                std::vector<const Pod*>& nonViolating);
void filterPodsWithPdbViolation(const std::vector<const Pod*>& pods, const PdbIndex& index,
                                std::vector<const Pod*>& violating,
                                std::vector<const Pod*>& nonViolating);

// The same victim selection done naively: a full re-fit over every pod for each reprieve
// (for the benchmark's comparison and as a cross-check in tests).
VictimSelection selectVictimsOnNodeNaive(const Pod& pod, const NodeInfo& node,
                                         const std::vector<PodDisruptionBudget>& pdbs,
                                         const Policy& policy);

// docs/reference.md §6: the scheduler's decision for a pending pod across every node.
struct PreemptionCandidate {
  const Node* node = nullptr;
  std::vector<const Pod*> victims;  // most important first
  int numPDBViolations = 0;
};
struct PreemptionDecision {
  std::string pod;
  const Node* node = nullptr;  // null: nowhere
  std::vector<const Pod*> victims;
  int numPDBViolations = 0;
  std::vector<PreemptionCandidate> candidates;
  std::vector<const Pod*> nominatedPodsToClear;
  std::string reason;  // why there is no node, for people
};
PreemptionDecision preemptCluster(const Pod& pod, const ClusterIndex& cluster,
                                  const std::vector<PodDisruptionBudget>& pdbs,
                                  const Policy& policy);

// The scheduler's pickOneNodeForPreemption over candidates (index into `candidates`).
std::size_t pickOneNodeForPreemption(const std::vector<PreemptionCandidate>& candidates);

// The JSON of docs/reference.md §5 and §6.
OrderedJson admissionToJson(const AdmissionDecision& decision);
OrderedJson preemptionToJson(const PreemptionDecision& decision);

}  // namespace nodewarden::policy
