// The Kubernetes objects nodewarden decides on, as plain values, and their parsers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/json_reader.h"
#include "policy/quantity.h"
#include "policy/times.h"

namespace nodewarden::policy {

using ResourceList = std::map<std::string, Quantity>;
// Amounts in the units the scheduler compares: millicores for "cpu", whole units otherwise.
using ResourceAmounts = std::map<std::string, std::int64_t>;

inline constexpr std::int32_t kSystemCriticalPriority = 2'000'000'000;
inline constexpr std::int32_t kSystemNodeCriticalPriority = 2'000'001'000;
inline constexpr std::int32_t kHighestUserDefinablePriority = 1'000'000'000;

enum class PreemptionPolicy { PreemptLowerPriority, Never };
enum class QosClass { Guaranteed, Burstable, BestEffort };
const char* qosClassName(QosClass qos);

struct Toleration {
  std::string key;
  std::string op = "Equal";  // "Equal" or "Exists"
  std::string value;
  std::string effect;  // empty = every effect
};

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute
};

// True when `tolerations` tolerate `taint` (Kubernetes ToleratesTaint).
bool tolerates(const std::vector<Toleration>& tolerations, const Taint& taint);

struct Container {
  std::string name;
  ResourceList requests;
  ResourceList limits;
  bool sidecar = false;  // an init container with restartPolicy: Always
  // In-place resize, from the container's entry in status.containerStatuses[] (or
  // initContainerStatuses[]): absent where the status does not report them.
  std::optional<ResourceList> allocated;  // .allocatedResources
  std::optional<ResourceList> actual;     // .resources.requests
  // The runtime's ID of the running container, from the status's containerID less its
  // "<runtime>://" scheme ("" where the status does not give one): the name of the container's
  // cgroup below the pod's carries it (cgroups::containerIdFromCgroupName).
  std::string runtimeId;
};

// Who counts a pod's requests (docs/reference.md §3): each reads its own of the three request sets.
enum class RequestConsumer : std::uint8_t { Kubelet = 0, Scheduler = 1 };

struct Pod {
  // As written in the object.
  std::string name;
  // metadata.generation (0: absent). The kubelet writes it as the observedGeneration of the
  // status and of the DisruptionTarget condition it records for an eviction.
  std::int64_t generation = 0;
  std::map<std::string, std::string> annotations;
  std::string nodeName;
  std::optional<std::int32_t> specPriority;
  std::string priorityClassName;
  std::optional<PreemptionPolicy> specPreemptionPolicy;
  std::map<std::string, std::string> nodeSelector;
  std::vector<Toleration> tolerations;
  std::int64_t terminationGracePeriodSeconds = 30;  // the API's default
  ResourceList overhead;
  // The pod's local volumes as the kubelet's eviction counts them (localVolumeNames):
  // spec.volumes[] that are hostPath, emptyDir on disk (no medium), configMap or gitRepo.
  std::vector<std::string> localVolumes;
  // spec.resources (pod-level resources, Kubernetes 1.34+); a stanza that names nothing is empty.
  ResourceList podLevelRequests;
  ResourceList podLevelLimits;
  std::vector<Container> containers;
  std::vector<Container> initContainers;
  std::string phase;
  std::string nominatedNodeName;
  std::optional<QosClass> statusQos;
  // In-place resize at pod level: status.allocatedResources and status.resources.requests.
  std::optional<ResourceList> podLevelAllocated;
  std::optional<ResourceList> podLevelActual;
  // The first PodResizePending condition has reason Infeasible.
  bool resizeInfeasible = false;
  // "" or the pending/in-progress resize as the status reports it, for people
  // ("PodResizePending: Deferred", "PodResizeInProgress").
  std::string resizeState;
  // Admission and preemption read the fields from here to extendedRequests for every pod of a
  // node: they stay next to each other, so such a pass touches few cache lines of each pod.
  std::string ns;
  std::string uid;
  std::map<std::string, std::string> labels;
  // labelBloom(labels), set by parsePod and resolvePod; 0: not computed.
  std::uint64_t labelsBloom = 0;
  bool terminating = false;  // metadata.deletionTimestamp is set
  // Condition DisruptionTarget=True: an eviction or preemption of this pod is under way,
  // perhaps before its deletionTimestamp is set (the scheduler's async preemption).
  bool disruptionTarget = false;
  std::optional<WallMicros> startTime;

  // Derived by resolvePods() from the object and the priority classes.
  std::int32_t priority = 0;
  bool critical = false;
  // cpu, memory and ephemeral-storage of kubeletRequests and schedulerRequests (below; indexed
  // by RequestConsumer), for fitting without map lookups; extendedRequests: any other resource.
  std::int64_t fitRequests[2][3] = {};
  bool extendedRequests = false;
  std::string key;  // "namespace/name"
  // This pod's position by key among the pods resolved together (resolvePods), so rankings
  // can order by key without comparing strings.
  std::uint32_t keyOrder = 0;
  bool priorityClassFound = true;
  PreemptionPolicy preemptionPolicy = PreemptionPolicy::PreemptLowerPriority;
  QosClass qos = QosClass::BestEffort;
  // docs/reference.md §3, each with overhead: the desired requests (the spec; what an incoming pod
  // asks for), what the kubelet's admission counts for a pod already on the node
  // (max(allocated, actual)) and what the scheduler counts for one (max(desired, allocated,
  // actual), desired left out when the resize is infeasible).
  ResourceAmounts requests;
  ResourceAmounts kubeletRequests;
  ResourceAmounts schedulerRequests;
  // Eviction's requests: allocated only, the pod level alone when it is set (the kubelet's
  // GetResourceRequestQuantity), overhead added only to a non-zero total.
  ResourceAmounts rankingRequests;
  // The allocated requests (steps 1-3 of §3 over the allocated set), for display.
  ResourceAmounts allocatedRequests;

  // Terminating, or marked for disruption: never a victim again, and its room is coming.
  bool leaving() const { return terminating || disruptionTarget; }

  const ResourceAmounts& requestsFor(RequestConsumer consumer) const {
    return consumer == RequestConsumer::Kubelet ? kubeletRequests : schedulerRequests;
  }
  // True when a resize is pending or in progress: the request sets may differ.
  bool midResize() const { return !resizeState.empty() || allocatedRequests != requests; }
};

struct NodeCondition {
  std::string type;
  std::string status;
};

struct Node {
  std::string name;
  std::string jsonPath;         // where the object was in its document, for messages
  bool hasAllocatable = false;  // status.allocatable was present (admission needs it)
  std::map<std::string, std::string> labels;
  bool unschedulable = false;
  std::vector<Taint> taints;
  ResourceList capacity;
  ResourceList allocatable;
  std::vector<NodeCondition> conditions;
};

struct PriorityClass {
  std::string name;
  std::int32_t value = 0;
  bool globalDefault = false;
  std::optional<PreemptionPolicy> preemptionPolicy;
};

struct LabelSelectorRequirement {
  std::string key;
  std::string op;  // In, NotIn, Exists, DoesNotExist
  std::vector<std::string> values;
};

// Two bits of 64 per label pair: a cheap "cannot match" test before a selector's lookups.
std::uint64_t labelBloom(const std::map<std::string, std::string>& labels);
// The two bits of one pair: labelBloom(labels) is the union of its pairs' bits.
std::uint64_t labelPairBloom(std::string_view key, std::string_view value);

struct LabelSelector {
  std::map<std::string, std::string> matchLabels;
  std::vector<LabelSelectorRequirement> matchExpressions;
  // labelBloom(matchLabels), set by the parser; 0: not computed (no shortcut is taken).
  std::uint64_t matchLabelsBloom = 0;
  bool matches(const std::map<std::string, std::string>& labels) const;
  // matches(), first rejecting a pod that lacks a required pair by the blooms alone.
  bool matches(const std::map<std::string, std::string>& labels, std::uint64_t labelsBloom) const {
    if (matchLabelsBloom != 0 && labelsBloom != 0 && (matchLabelsBloom & ~labelsBloom) != 0) {
      return false;
    }
    return matches(labels);
  }
};

struct PodDisruptionBudget {
  std::string name;
  std::string ns;
  std::optional<LabelSelector> selector;  // absent selects nothing; empty selects all
  std::int64_t disruptionsAllowed = 0;
  std::map<std::string, std::string> disruptedPods;  // pod name -> time
};

// The subset of the kubelet's /stats/summary that eviction reads. Absent figures stay empty.
struct FsStats {
  std::optional<std::uint64_t> availableBytes;
  std::optional<std::uint64_t> capacityBytes;
  std::optional<std::uint64_t> inodesFree;
  std::optional<std::uint64_t> inodes;
};

struct ContainerStats {
  std::string name;
  std::optional<std::uint64_t> memoryWorkingSetBytes;
  std::optional<std::uint64_t> rootfsUsedBytes;
  std::optional<std::uint64_t> logsUsedBytes;
  std::optional<std::uint64_t> rootfsInodesUsed;
  std::optional<std::uint64_t> logsInodesUsed;
};

// pods[].volume[]: one volume's usage.
struct VolumeStats {
  std::string name;
  std::optional<std::uint64_t> usedBytes;
  std::optional<std::uint64_t> inodesUsed;
};

struct PodStats {
  std::string name;
  std::string ns;
  std::string uid;
  std::optional<std::uint64_t> memoryWorkingSetBytes;
  std::optional<std::uint64_t> memoryUsageBytes;  // memory.usageBytes (page cache included)
  std::optional<std::uint64_t> cpuUsageNanoCores;
  std::optional<std::uint64_t> processCount;
  std::optional<std::uint64_t> ephemeralStorageUsedBytes;
  std::optional<std::uint64_t> ephemeralStorageInodesUsed;
  std::optional<std::uint64_t> swapUsageBytes;  // swap.swapUsageBytes (NodeSwap, cgroup v2)
  std::vector<ContainerStats> containers;
  std::vector<VolumeStats> volumes;
};

struct NodeStats {
  std::optional<std::uint64_t> memoryAvailableBytes;
  std::optional<std::uint64_t> memoryWorkingSetBytes;
  // The "pods" system container (the kubepods cgroup), for allocatableMemory.available.
  std::optional<std::uint64_t> podsMemoryAvailableBytes;
  std::optional<std::uint64_t> podsMemoryWorkingSetBytes;
  FsStats nodeFs;
  std::optional<FsStats> imageFs;
  std::optional<std::uint64_t> maxPid;
  std::optional<std::uint64_t> curProc;
};

struct Summary {
  NodeStats node;
  std::vector<PodStats> pods;
};

// The input of every decision: what kubectl prints, plus kubelet stats per node.
struct Snapshot {
  std::vector<Node> nodes;
  std::vector<Pod> pods;
  std::vector<PriorityClass> priorityClasses;
  std::vector<PodDisruptionBudget> podDisruptionBudgets;
  std::map<std::string, Summary> stats;  // by node name

  const Node* findNode(std::string_view name) const;
};

// Parsers. Each reports every problem to `diagnostics` with its JSON path under `path` and
// returns nothing when the object cannot be used. Unknown fields are ignored.
std::optional<Pod> parsePod(const Json& json, const std::string& path, Diagnostics& diagnostics);
std::optional<Node> parseNode(const Json& json, const std::string& path, Diagnostics& diagnostics);
std::optional<PriorityClass> parsePriorityClass(const Json& json, const std::string& path,
                                                Diagnostics& diagnostics);
std::optional<PodDisruptionBudget> parsePodDisruptionBudget(const Json& json,
                                                            const std::string& path,
                                                            Diagnostics& diagnostics);
std::optional<Summary> parseSummary(const Json& json, const std::string& path,
                                    Diagnostics& diagnostics);
// A whole snapshot (docs/reference.md §2). Pods are resolved (resolvePods) before returning.
std::optional<Snapshot> parseSnapshot(const Json& json, Diagnostics& diagnostics);
// Parses JSON text first; syntax errors are reported with line and column.
std::optional<Snapshot> parseSnapshotText(std::string_view text, Diagnostics& diagnostics);

// Fills each pod's derived fields (key, priority, preemption policy, QoS, critical,
// requests) from the priority classes, including the built-in ones.
void resolvePods(std::vector<Pod>& pods, const std::vector<PriorityClass>& classes);
void resolvePod(Pod& pod, const std::vector<PriorityClass>& classes);

// docs/reference.md §3 for one request set: max(Σ containers + Σ sidecars, init-container peak with
// sidecars), the pod-level cpu, memory and hugepages requests in place of the containers',
// then the overhead. With `overheadOnlyIfNonZero` the overhead is added only to a non-zero
// total (the kubelet's rule for eviction).
enum class RequestSet { Desired, Allocated, Actual };
ResourceAmounts podRequests(const Pod& pod, RequestSet set = RequestSet::Desired,
                            bool overheadOnlyIfNonZero = false);
// Kubernetes' IsSupportedPodLevelResource: cpu, memory and hugepages-*.
bool isPodLevelResource(std::string_view resource);
// spec.resources names at least one cpu, memory or hugepages request or limit.
bool hasPodLevelResources(const Pod& pod);
// The amount of `resource` in `list` in scheduler units (millicores for cpu).
std::int64_t amountOf(const ResourceList& list, const std::string& resource);
QosClass computeQos(const Pod& pod);
bool isStaticPod(const Pod& pod);
bool isMirrorPod(const Pod& pod);

}  // namespace nodewarden::policy
