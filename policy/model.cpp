#include "policy/model.h"

#include <algorithm>
#include <limits>

namespace nodewarden::policy {
namespace {

constexpr std::int64_t kInt32Min = std::numeric_limits<std::int32_t>::min();
constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

std::optional<PreemptionPolicy> parsePreemptionPolicy(const JsonObject& obj, std::string_view key) {
  auto text = obj.string(key);
  if (!text) return std::nullopt;
  if (*text == "PreemptLowerPriority") return PreemptionPolicy::PreemptLowerPriority;
  if (*text == "Never") return PreemptionPolicy::Never;
  obj.diagnostics().add(
      obj.pathOf(key), "expected \"PreemptLowerPriority\" or \"Never\", got " + Json(*text).dump());
  return std::nullopt;
}

Container parseContainer(const Json& json, const std::string& path, Diagnostics& diagnostics) {
  JsonObject obj(json, path, diagnostics);
  Container c;
  c.name = obj.string("name").value_or("");
  JsonObject resources = obj.object("resources");
  c.requests = resources.quantityMap("requests", /*nonNegative=*/true);
  c.limits = resources.quantityMap("limits", /*nonNegative=*/true);
  // The API server defaults a missing request to the limit; snapshots written by hand
  // may lack that defaulting.
  for (const auto& [name, limit] : c.limits) c.requests.emplace(name, limit);
  c.sidecar = obj.string("restartPolicy").value_or("") == "Always";
  return c;
}

std::vector<Toleration> parseTolerations(const JsonObject& spec) {
  std::vector<Toleration> out;
  spec.forEach("tolerations", [&](const Json& item, const std::string& path) {
    JsonObject obj(item, path, spec.diagnostics());
    if (!obj.valid()) return;
    Toleration t;
    t.key = obj.string("key").value_or("");
    t.op = obj.string("operator").value_or("Equal");
    if (t.op.empty()) t.op = "Equal";
    if (t.op != "Equal" && t.op != "Exists") {
      spec.diagnostics().add(obj.pathOf("operator"),
                             "expected \"Equal\" or \"Exists\", got " + Json(t.op).dump());
    }
    t.value = obj.string("value").value_or("");
    t.effect = obj.string("effect").value_or("");
    out.push_back(std::move(t));
  });
  return out;
}

void addTo(std::map<std::string, Int128>& sum, const ResourceList& list) {
  for (const auto& [name, q] : list) sum[name] += q.nanoValue();
}

void maxInto(std::map<std::string, Int128>& target, const std::map<std::string, Int128>& other) {
  for (const auto& [name, v] : other) {
    auto [it, inserted] = target.emplace(name, v);
    if (!inserted) it->second = std::max(it->second, v);
  }
}

std::int64_t toAmount(const std::string& resource, Int128 nanos) {
  // Round away from zero to the unit the scheduler compares in.
  const Int128 unit = resource == "cpu" ? Int128(1'000'000) : Int128(1'000'000'000);
  Int128 v = nanos / unit;
  if (nanos % unit != 0) v += nanos > 0 ? 1 : -1;
  if (v > std::numeric_limits<std::int64_t>::max()) return std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(v);
}

const PriorityClass* findClass(const std::vector<PriorityClass>& classes, std::string_view name) {
  for (const auto& c : classes) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

const PriorityClass* builtInClass(std::string_view name) {
  static const PriorityClass kNodeCritical{"system-node-critical", kSystemNodeCriticalPriority,
                                           false, std::nullopt};
  static const PriorityClass kClusterCritical{"system-cluster-critical", kSystemCriticalPriority,
                                              false, std::nullopt};
  if (name == kNodeCritical.name) return &kNodeCritical;
  if (name == kClusterCritical.name) return &kClusterCritical;
  return nullptr;
}

std::optional<FsStats> parseFsStats(const JsonObject& parent, std::string_view key) {
  if (parent.member(key) == nullptr) return std::nullopt;
  JsonObject fs = parent.object(key);
  FsStats out;
  out.availableBytes = fs.unsignedInteger("availableBytes");
  out.capacityBytes = fs.unsignedInteger("capacityBytes");
  out.inodesFree = fs.unsignedInteger("inodesFree");
  out.inodes = fs.unsignedInteger("inodes");
  return out;
}

// A container's entry in status.containerStatuses[] / initContainerStatuses[]: what the
// kubelet allocated and what the runtime applied (in-place resize), and the runtime's ID.
void parseContainerStatuses(const JsonObject& status, std::string_view key,
                            std::vector<Container>& containers, std::string_view specList,
                            Diagnostics& diagnostics) {
  status.forEach(key, [&](const Json& item, const std::string& path) {
    JsonObject cs(item, path, diagnostics);
    if (!cs.valid()) return;
    const bool hasAllocated = cs.member("allocatedResources") != nullptr;
    JsonObject resources = cs.object("resources");
    const bool hasActual = resources.member("requests") != nullptr;
    std::string runtimeId = cs.string("containerID").value_or("");
    if (auto scheme = runtimeId.find("://"); scheme != std::string::npos) {
      runtimeId.erase(0, scheme + 3);
    }
    if (!hasAllocated && !hasActual && runtimeId.empty()) return;
    const std::string name = cs.string("name").value_or("");
    auto it = std::find_if(containers.begin(), containers.end(),
                           [&](const Container& c) { return c.name == name; });
    if (it != containers.end()) it->runtimeId = std::move(runtimeId);
    if (!hasAllocated && !hasActual) return;
    if (it == containers.end()) {
      diagnostics.add(cs.pathOf("name"), "names no container of spec." + std::string(specList) +
                                             " (got " + Json(name).dump() +
                                             "): resources reported for a container the pod "
                                             "does not have");
      return;
    }
    if (hasAllocated) it->allocated = cs.quantityMap("allocatedResources", /*nonNegative=*/true);
    if (hasActual) it->actual = resources.quantityMap("requests", /*nonNegative=*/true);
  });
}

// In-place resize in the pod's status (per container, at pod level) and the conditions read.
void parseResizeStatus(const JsonObject& status, Pod& pod, Diagnostics& diagnostics) {
  parseContainerStatuses(status, "containerStatuses", pod.containers, "containers", diagnostics);
  parseContainerStatuses(status, "initContainerStatuses", pod.initContainers, "initContainers",
                         diagnostics);
  if (status.member("allocatedResources") != nullptr) {
    pod.podLevelAllocated = status.quantityMap("allocatedResources", /*nonNegative=*/true);
  }
  JsonObject resources = status.object("resources");
  if (resources.member("requests") != nullptr) {
    pod.podLevelActual = resources.quantityMap("requests", /*nonNegative=*/true);
  }
  bool pendingSeen = false;
  status.forEach("conditions", [&](const Json& item, const std::string& path) {
    JsonObject c(item, path, diagnostics);
    if (!c.valid()) return;
    const std::string type = c.string("type").value_or("");
    const std::string reason = c.string("reason").value_or("");
    if (type == "DisruptionTarget" && c.string("status").value_or("") == "True") {
      pod.disruptionTarget = true;
    }
    if (type == "PodResizePending" && !pendingSeen) {
      // Kubernetes' IsPodResizeInfeasible reads the first condition of this type only.
      pendingSeen = true;
      pod.resizeInfeasible = reason == "Infeasible";
      pod.resizeState = "PodResizePending" + (reason.empty() ? "" : ": " + reason);
    } else if (type == "PodResizeInProgress" && pod.resizeState.empty()) {
      pod.resizeState = "PodResizeInProgress";
    }
  });
}

// Resource name → amount in nano-units (a Quantity scaled by 10^9), for exact sums.
using NanoAmounts = std::map<std::string, Int128>;

// A container's requests in `set`. A status set falls back to the spec for a container whose
// status reports nothing, except in an infeasible resize (`statusOnly`): the scheduler then
// counts what the kubelet reports, and nothing for a container it reports nothing of
// (component-helpers' containerAllocatedRequests and containerActuatedRequests), as for a
// terminated init container.
const ResourceList& containerRequests(const Container& c, RequestSet set, bool statusOnly = false) {
  static const ResourceList kNothing;
  switch (set) {
    case RequestSet::Desired:
      break;
    case RequestSet::Allocated:
      if (c.allocated) return *c.allocated;
      if (statusOnly) return kNothing;
      break;
    case RequestSet::Actual:
      if (c.actual) return *c.actual;
      if (c.allocated) return *c.allocated;
      if (statusOnly) return kNothing;
      break;
  }
  return c.requests;
}

// Step 1 of docs/reference.md §3 (KEP-753): Σ regular + Σ sidecars, max'ed with each init
// container's own request plus the sidecars declared before it.
NanoAmounts aggregateContainerRequests(const Pod& pod, RequestSet set, bool statusOnly = false) {
  NanoAmounts reqs;
  for (const auto& c : pod.containers) addTo(reqs, containerRequests(c, set, statusOnly));
  NanoAmounts restartable;
  NanoAmounts initPeak;
  for (const auto& c : pod.initContainers) {
    const ResourceList& own = containerRequests(c, set, statusOnly);
    if (c.sidecar) {
      addTo(reqs, own);
      addTo(restartable, own);
      maxInto(initPeak, restartable);
    } else {
      NanoAmounts candidate = restartable;
      addTo(candidate, own);
      maxInto(initPeak, candidate);
    }
  }
  maxInto(reqs, initPeak);
  return reqs;
}

// The pod-level requests of `set`, cpu, memory and hugepages only. The desired set is the
// spec as the API server defaults it: a pod-level limit without a request requests the
// containers' value when a container requests that resource, else the limit.
NanoAmounts podLevelRequests(const Pod& pod, RequestSet set) {
  const ResourceList* status = nullptr;
  if (set == RequestSet::Actual) status = pod.podLevelActual ? &*pod.podLevelActual : nullptr;
  if (set != RequestSet::Desired && status == nullptr && pod.podLevelAllocated) {
    status = &*pod.podLevelAllocated;
  }
  NanoAmounts out;
  if (status != nullptr) {
    for (const auto& [name, q] : *status) {
      if (isPodLevelResource(name)) out.emplace(name, q.nanoValue());
    }
    return out;
  }
  for (const auto& [name, q] : pod.podLevelRequests) {
    if (isPodLevelResource(name)) out.emplace(name, q.nanoValue());
  }
  bool needsDefault = false;
  for (const auto& [name, q] : pod.podLevelLimits) {
    needsDefault |= isPodLevelResource(name) && out.count(name) == 0;
  }
  if (!needsDefault) return out;
  const NanoAmounts containers = aggregateContainerRequests(pod, RequestSet::Desired);
  for (const auto& [name, q] : pod.podLevelLimits) {
    if (!isPodLevelResource(name) || out.count(name) != 0) continue;
    auto it = containers.find(name);
    out.emplace(name, it != containers.end() ? it->second : q.nanoValue());
  }
  return out;
}

void addOverhead(NanoAmounts& reqs, const Pod& pod, bool onlyIfNonZero) {
  for (const auto& [name, q] : pod.overhead) {
    auto it = reqs.find(name);
    const bool nonZero = it != reqs.end() && it->second != 0;
    if (!onlyIfNonZero || nonZero) reqs[name] += q.nanoValue();
  }
}

ResourceAmounts toAmounts(const NanoAmounts& nanos) {
  ResourceAmounts out;
  for (const auto& [name, v] : nanos) out.emplace(name, toAmount(name, v));
  return out;
}

void maxAmountsInto(ResourceAmounts& target, const ResourceAmounts& other) {
  for (const auto& [name, v] : other) {
    auto [it, inserted] = target.emplace(name, v);
    if (!inserted) it->second = std::max(it->second, v);
  }
}

// Kubernetes' resourceQOS over one requests/limits pair, cpu and memory only.
QosClass resourcesQos(const NanoAmounts& requests, const NanoAmounts& limits) {
  if (requests.empty() && limits.empty()) return QosClass::BestEffort;
  std::optional<QosClass> common;
  for (const char* name : {"cpu", "memory"}) {
    auto nanos = [&](const NanoAmounts& list) {
      auto it = list.find(name);
      return it == list.end() ? Int128(0) : it->second;
    };
    const Int128 request = nanos(requests), limit = nanos(limits);
    if (request != limit) return QosClass::Burstable;
    const QosClass own = request == 0 ? QosClass::BestEffort : QosClass::Guaranteed;
    if (common && *common != own) return QosClass::Burstable;
    common = own;
  }
  return *common;
}
}  // namespace

const char* qosClassName(QosClass qos) {
  switch (qos) {
    case QosClass::Guaranteed:
      return "Guaranteed";
    case QosClass::Burstable:
      return "Burstable";
    case QosClass::BestEffort:
      return "BestEffort";
  }
  return "BestEffort";
}

bool tolerates(const std::vector<Toleration>& tolerations, const Taint& taint) {
  for (const auto& t : tolerations) {
    if (!t.effect.empty() && t.effect != taint.effect) continue;
    if (!t.key.empty() && t.key != taint.key) continue;
    if (t.op == "Exists") return true;
    if (t.op == "Equal" && t.value == taint.value) return true;
  }
  return false;
}

std::uint64_t labelPairBloom(std::string_view key, std::string_view value) {
  const std::hash<std::string_view> hash;
  const std::size_t h = hash(key) * 31 + hash(value);
  return (std::uint64_t(1) << (h & 63)) | (std::uint64_t(1) << ((h >> 6) & 63));
}

std::uint64_t labelBloom(const std::map<std::string, std::string>& labels) {
  std::uint64_t bloom = 0;
  for (const auto& [key, value] : labels) bloom |= labelPairBloom(key, value);
  return bloom;
}

bool LabelSelector::matches(const std::map<std::string, std::string>& labels) const {
  for (const auto& [key, value] : matchLabels) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  for (const auto& req : matchExpressions) {
    auto it = labels.find(req.key);
    bool has = it != labels.end();
    bool inValues =
        has && std::find(req.values.begin(), req.values.end(), it->second) != req.values.end();
    if (req.op == "In" && !inValues) return false;
    if (req.op == "NotIn" && inValues) return false;
    if (req.op == "Exists" && !has) return false;
    if (req.op == "DoesNotExist" && has) return false;
  }
  return true;
}

const Node* Snapshot::findNode(std::string_view name) const {
  for (const auto& n : nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

std::optional<Pod> parsePod(const Json& json, const std::string& path, Diagnostics& diagnostics) {
  const std::size_t before = diagnostics.size();
  JsonObject obj(json, path, diagnostics);
  if (!obj.valid()) return std::nullopt;
  Pod pod;
  JsonObject meta = obj.object("metadata");
  if (!meta.valid()) {
    diagnostics.add(obj.pathOf("metadata"), "missing (a pod needs metadata.name)");
    return std::nullopt;
  }
  pod.name = meta.requiredString("name");
  pod.ns = meta.string("namespace").value_or("default");
  if (pod.ns.empty()) pod.ns = "default";
  pod.uid = meta.string("uid").value_or("");
  pod.generation =
      meta.integer("generation", 0, std::numeric_limits<std::int64_t>::max()).value_or(0);
  pod.labels = meta.stringMap("labels");
  pod.labelsBloom = labelBloom(pod.labels);
  pod.annotations = meta.stringMap("annotations");
  if (auto deletion = meta.string("deletionTimestamp")) {
    pod.terminating = true;
    if (auto t = parseRfc3339(*deletion); !t) {
      diagnostics.add(meta.pathOf("deletionTimestamp"), t.error().message);
    }
  }

  JsonObject spec = obj.object("spec");
  pod.nodeName = spec.string("nodeName").value_or("");
  if (auto p = spec.integer("priority", kInt32Min, kInt32Max)) pod.specPriority = std::int32_t(*p);
  pod.priorityClassName = spec.string("priorityClassName").value_or("");
  pod.specPreemptionPolicy = parsePreemptionPolicy(spec, "preemptionPolicy");
  pod.nodeSelector = spec.stringMap("nodeSelector");
  pod.tolerations = parseTolerations(spec);
  if (auto g = spec.integer("terminationGracePeriodSeconds", 0,
                            std::numeric_limits<std::int64_t>::max())) {
    pod.terminationGracePeriodSeconds = *g;
  }
  pod.overhead = spec.quantityMap("overhead", /*nonNegative=*/true);
  JsonObject podResources = spec.object("resources");
  pod.podLevelRequests = podResources.quantityMap("requests", /*nonNegative=*/true);
  pod.podLevelLimits = podResources.quantityMap("limits", /*nonNegative=*/true);
  spec.forEach("containers", [&](const Json& item, const std::string& p) {
    pod.containers.push_back(parseContainer(item, p, diagnostics));
  });
  spec.forEach("initContainers", [&](const Json& item, const std::string& p) {
    pod.initContainers.push_back(parseContainer(item, p, diagnostics));
  });
  spec.forEach("volumes", [&](const Json& item, const std::string& p) {
    JsonObject v(item, p, diagnostics);
    if (!v.valid()) return;
    // The kubelet's localVolumeNames: hostPath, or IsLocalEphemeralVolume (gitRepo, an
    // emptyDir with the default medium, configMap).
    const JsonObject emptyDir = v.object("emptyDir");
    const bool local = v.member("hostPath") != nullptr || v.member("gitRepo") != nullptr ||
                       v.member("configMap") != nullptr ||
                       (emptyDir.valid() && emptyDir.string("medium").value_or("").empty());
    if (local) pod.localVolumes.push_back(v.requiredString("name"));
  });

  JsonObject status = obj.object("status");
  pod.phase = status.string("phase").value_or("");
  parseResizeStatus(status, pod, diagnostics);
  if (auto start = status.string("startTime")) {
    if (auto t = parseRfc3339(*start)) {
      pod.startTime = t.value();
    } else {
      diagnostics.add(status.pathOf("startTime"), t.error().message);
    }
  }
  pod.nominatedNodeName = status.string("nominatedNodeName").value_or("");
  if (auto qos = status.string("qosClass")) {
    if (*qos == "Guaranteed") {
      pod.statusQos = QosClass::Guaranteed;
    } else if (*qos == "Burstable") {
      pod.statusQos = QosClass::Burstable;
    } else if (*qos == "BestEffort") {
      pod.statusQos = QosClass::BestEffort;
    } else {
      diagnostics.add(status.pathOf("qosClass"),
                      "expected Guaranteed, Burstable or BestEffort, got " + Json(*qos).dump());
    }
  }
  if (diagnostics.size() != before) return std::nullopt;
  pod.key = pod.ns + "/" + pod.name;
  return pod;
}

std::optional<Node> parseNode(const Json& json, const std::string& path, Diagnostics& diagnostics) {
  const std::size_t before = diagnostics.size();
  JsonObject obj(json, path, diagnostics);
  if (!obj.valid()) return std::nullopt;
  Node node;
  JsonObject meta = obj.object("metadata");
  if (!meta.valid()) {
    diagnostics.add(obj.pathOf("metadata"), "missing (a node needs metadata.name)");
    return std::nullopt;
  }
  node.name = meta.requiredString("name");
  node.labels = meta.stringMap("labels");
  JsonObject spec = obj.object("spec");
  node.unschedulable = spec.boolean("unschedulable").value_or(false);
  spec.forEach("taints", [&](const Json& item, const std::string& p) {
    JsonObject t(item, p, diagnostics);
    if (!t.valid()) return;
    node.taints.push_back(
        Taint{t.requiredString("key"), t.string("value").value_or(""), t.requiredString("effect")});
  });
  JsonObject status = obj.object("status");
  node.capacity = status.quantityMap("capacity", /*nonNegative=*/true);
  node.allocatable = status.quantityMap("allocatable", /*nonNegative=*/true);
  node.hasAllocatable = status.member("allocatable") != nullptr;
  node.jsonPath = path;
  status.forEach("conditions", [&](const Json& item, const std::string& p) {
    JsonObject c(item, p, diagnostics);
    if (!c.valid()) return;
    node.conditions.push_back(NodeCondition{c.requiredString("type"), c.requiredString("status")});
  });
  if (diagnostics.size() != before) return std::nullopt;
  return node;
}

std::optional<PriorityClass> parsePriorityClass(const Json& json, const std::string& path,
                                                Diagnostics& diagnostics) {
  const std::size_t before = diagnostics.size();
  JsonObject obj(json, path, diagnostics);
  if (!obj.valid()) return std::nullopt;
  PriorityClass pc;
  pc.name = obj.object("metadata").requiredString("name");
  if (obj.member("metadata") == nullptr) {
    diagnostics.add(obj.pathOf("metadata"), "missing (a priority class needs metadata.name)");
  }
  auto value = obj.integer("value", kInt32Min, kInt32Max);
  if (!value && obj.member("value") == nullptr) {
    diagnostics.add(obj.pathOf("value"), "missing (a priority class needs a value)");
  }
  pc.value = std::int32_t(value.value_or(0));
  bool builtIn = builtInClass(pc.name) != nullptr;
  if (value && !builtIn && *value > kHighestUserDefinablePriority) {
    diagnostics.add(obj.pathOf("value"),
                    "must be at most 1000000000 for a user class, got " + std::to_string(*value));
  }
  pc.globalDefault = obj.boolean("globalDefault").value_or(false);
  pc.preemptionPolicy = parsePreemptionPolicy(obj, "preemptionPolicy");
  if (diagnostics.size() != before) return std::nullopt;
  return pc;
}

std::optional<PodDisruptionBudget> parsePodDisruptionBudget(const Json& json,
                                                            const std::string& path,
                                                            Diagnostics& diagnostics) {
  const std::size_t before = diagnostics.size();
  JsonObject obj(json, path, diagnostics);
  if (!obj.valid()) return std::nullopt;
  PodDisruptionBudget pdb;
  JsonObject meta = obj.object("metadata");
  pdb.name = meta.string("name").value_or("");
  pdb.ns = meta.string("namespace").value_or("default");
  JsonObject spec = obj.object("spec");
  if (spec.member("selector") != nullptr) {
    JsonObject sel = spec.object("selector");
    LabelSelector selector;
    selector.matchLabels = sel.stringMap("matchLabels");
    sel.forEach("matchExpressions", [&](const Json& item, const std::string& p) {
      JsonObject e(item, p, diagnostics);
      if (!e.valid()) return;
      LabelSelectorRequirement req;
      req.key = e.requiredString("key");
      req.op = e.requiredString("operator");
      e.forEach("values", [&](const Json& v, const std::string& vp) {
        if (v.is_string()) {
          req.values.push_back(v.get<std::string>());
        } else {
          diagnostics.add(vp, "expected a string, got " + describeJson(v));
        }
      });
      if (req.op == "In" || req.op == "NotIn") {
        if (req.values.empty()) {
          diagnostics.add(e.pathOf("values"), "must not be empty for operator " + req.op);
        }
      } else if (req.op == "Exists" || req.op == "DoesNotExist") {
        if (!req.values.empty()) {
          diagnostics.add(e.pathOf("values"), "must be empty for operator " + req.op);
        }
      } else if (!req.op.empty()) {
        diagnostics.add(e.pathOf("operator"),
                        "expected In, NotIn, Exists or DoesNotExist, got " + Json(req.op).dump());
      }
      selector.matchExpressions.push_back(std::move(req));
    });
    selector.matchLabelsBloom = labelBloom(selector.matchLabels);
    pdb.selector = std::move(selector);
  }
  JsonObject status = obj.object("status");
  pdb.disruptionsAllowed = status.integer("disruptionsAllowed", kInt32Min, kInt32Max).value_or(0);
  pdb.disruptedPods = status.stringMap("disruptedPods");
  if (diagnostics.size() != before) return std::nullopt;
  return pdb;
}

std::optional<Summary> parseSummary(const Json& json, const std::string& path,
                                    Diagnostics& diagnostics) {
  const std::size_t before = diagnostics.size();
  JsonObject obj(json, path, diagnostics);
  if (!obj.valid()) return std::nullopt;
  Summary summary;
  JsonObject node = obj.object("node");
  JsonObject memory = node.object("memory");
  summary.node.memoryAvailableBytes = memory.unsignedInteger("availableBytes");
  summary.node.memoryWorkingSetBytes = memory.unsignedInteger("workingSetBytes");
  if (auto fs = parseFsStats(node, "fs")) summary.node.nodeFs = *fs;
  summary.node.imageFs = parseFsStats(node.object("runtime"), "imageFs");
  JsonObject rlimit = node.object("rlimit");
  summary.node.maxPid = rlimit.unsignedInteger("maxpid");
  summary.node.curProc = rlimit.unsignedInteger("curproc");
  node.forEach("systemContainers", [&](const Json& item, const std::string& p) {
    JsonObject c(item, p, diagnostics);
    if (c.string("name").value_or("") != "pods") return;
    JsonObject mem = c.object("memory");
    summary.node.podsMemoryAvailableBytes = mem.unsignedInteger("availableBytes");
    summary.node.podsMemoryWorkingSetBytes = mem.unsignedInteger("workingSetBytes");
  });
  obj.forEach("pods", [&](const Json& item, const std::string& p) {
    JsonObject ps(item, p, diagnostics);
    if (!ps.valid()) return;
    PodStats stats;
    JsonObject ref = ps.object("podRef");
    stats.name = ref.requiredString("name");
    stats.ns = ref.string("namespace").value_or("default");
    stats.uid = ref.string("uid").value_or("");
    stats.memoryWorkingSetBytes = ps.object("memory").unsignedInteger("workingSetBytes");
    stats.cpuUsageNanoCores = ps.object("cpu").unsignedInteger("usageNanoCores");
    stats.processCount = ps.object("process_stats").unsignedInteger("process_count");
    JsonObject eph = ps.object("ephemeral-storage");
    stats.ephemeralStorageUsedBytes = eph.unsignedInteger("usedBytes");
    stats.ephemeralStorageInodesUsed = eph.unsignedInteger("inodesUsed");
    stats.swapUsageBytes = ps.object("swap").unsignedInteger("swapUsageBytes");
    ps.forEach("containers", [&](const Json& citem, const std::string& cp) {
      JsonObject cs(citem, cp, diagnostics);
      if (!cs.valid()) return;
      ContainerStats c;
      c.name = cs.string("name").value_or("");
      c.memoryWorkingSetBytes = cs.object("memory").unsignedInteger("workingSetBytes");
      c.rootfsUsedBytes = cs.object("rootfs").unsignedInteger("usedBytes");
      c.logsUsedBytes = cs.object("logs").unsignedInteger("usedBytes");
      c.rootfsInodesUsed = cs.object("rootfs").unsignedInteger("inodesUsed");
      c.logsInodesUsed = cs.object("logs").unsignedInteger("inodesUsed");
      stats.containers.push_back(std::move(c));
    });
    ps.forEach("volume", [&](const Json& vitem, const std::string& vp) {
      JsonObject vs(vitem, vp, diagnostics);
      if (!vs.valid()) return;
      stats.volumes.push_back(VolumeStats{vs.string("name").value_or(""),
                                          vs.unsignedInteger("usedBytes"),
                                          vs.unsignedInteger("inodesUsed")});
    });
    summary.pods.push_back(std::move(stats));
  });
  if (diagnostics.size() != before) return std::nullopt;
  return summary;
}

std::optional<Snapshot> parseSnapshot(const Json& json, Diagnostics& diagnostics) {
  const std::size_t before = diagnostics.size();
  if (!json.is_object()) {
    diagnostics.add("",
                    "expected a snapshot object with nodes, pods, priorityClasses, "
                    "podDisruptionBudgets and stats, got " +
                        describeJson(json));
    return std::nullopt;
  }
  Snapshot snap;
  auto list = [&](const char* key, auto&& parseOne, auto& out) {
    auto it = json.find(key);
    if (it == json.end() || it->is_null()) return;
    forEachListItem(*it, key, diagnostics, [&](const Json& item, const std::string& path) {
      if (auto v = parseOne(item, path, diagnostics)) out.push_back(std::move(*v));
    });
  };
  list("nodes", parseNode, snap.nodes);
  list("pods", parsePod, snap.pods);
  list("priorityClasses", parsePriorityClass, snap.priorityClasses);
  list("podDisruptionBudgets", parsePodDisruptionBudget, snap.podDisruptionBudgets);
  if (auto it = json.find("stats"); it != json.end() && !it->is_null()) {
    if (!it->is_object()) {
      diagnostics.add(
          "stats", "expected an object of node name to kubelet Summary, got " + describeJson(*it));
    } else {
      for (auto s = it->begin(); s != it->end(); ++s) {
        if (auto summary = parseSummary(s.value(), childPath("stats", s.key()), diagnostics)) {
          snap.stats.emplace(s.key(), std::move(*summary));
        }
      }
    }
  }
  if (diagnostics.size() != before) return std::nullopt;
  resolvePods(snap.pods, snap.priorityClasses);
  return snap;
}

std::optional<Snapshot> parseSnapshotText(std::string_view text, Diagnostics& diagnostics) {
  auto json = parseKubernetesJsonText(text, diagnostics);
  if (!json) return std::nullopt;
  return parseSnapshot(*json, diagnostics);
}

std::int64_t amountOf(const ResourceList& list, const std::string& resource) {
  auto it = list.find(resource);
  if (it == list.end()) return 0;
  return toAmount(resource, it->second.nanoValue());
}

bool isPodLevelResource(std::string_view resource) {
  return resource == "cpu" || resource == "memory" || resource.starts_with("hugepages-");
}

bool hasPodLevelResources(const Pod& pod) {
  auto names = [](const ResourceList& list) {
    return std::any_of(list.begin(), list.end(),
                       [](const auto& entry) { return isPodLevelResource(entry.first); });
  };
  return names(pod.podLevelRequests) || names(pod.podLevelLimits);
}

namespace {

ResourceAmounts podRequestsOf(const Pod& pod, RequestSet set, bool overheadOnlyIfNonZero,
                              bool statusOnly) {
  NanoAmounts reqs = aggregateContainerRequests(pod, set, statusOnly);
  // Step 2: the pod level replaces the containers' value of each resource it names.
  for (const auto& [name, v] : podLevelRequests(pod, set)) reqs[name] = v;
  addOverhead(reqs, pod, overheadOnlyIfNonZero);
  return toAmounts(reqs);
}

}  // namespace

ResourceAmounts podRequests(const Pod& pod, RequestSet set, bool overheadOnlyIfNonZero) {
  return podRequestsOf(pod, set, overheadOnlyIfNonZero, /*statusOnly=*/false);
}

QosClass computeQos(const Pod& pod) {
  // A pod-level stanza that names anything decides alone (an empty one does not count).
  if (!pod.podLevelRequests.empty() || !pod.podLevelLimits.empty()) {
    NanoAmounts requests, limits;
    addTo(requests, pod.podLevelRequests);
    addTo(limits, pod.podLevelLimits);
    // As the API server defaults it: a limit without a request.
    for (const auto& [name, v] : podLevelRequests(pod, RequestSet::Desired))
      requests.emplace(name, v);
    return resourcesQos(requests, limits);
  }
  std::map<std::string, Int128> requests;
  std::map<std::string, Int128> limits;
  bool guaranteed = true;
  auto consider = [&](const Container& c) {
    bool cpuLimit = false, memoryLimit = false;
    for (const auto& [name, q] : c.requests) {
      if ((name == "cpu" || name == "memory") && q.sign() > 0) requests[name] += q.nanoValue();
    }
    for (const auto& [name, q] : c.limits) {
      if ((name == "cpu" || name == "memory") && q.sign() > 0) {
        limits[name] += q.nanoValue();
        (name == "cpu" ? cpuLimit : memoryLimit) = true;
      }
    }
    if (!cpuLimit || !memoryLimit) guaranteed = false;
  };
  for (const auto& c : pod.containers) consider(c);
  for (const auto& c : pod.initContainers) consider(c);
  if (requests.empty() && limits.empty()) return QosClass::BestEffort;
  if (guaranteed) {
    for (const auto& [name, req] : requests) {
      auto it = limits.find(name);
      if (it == limits.end() || it->second != req) {
        guaranteed = false;
        break;
      }
    }
  }
  if (guaranteed && requests.size() == limits.size()) return QosClass::Guaranteed;
  return QosClass::Burstable;
}

bool isStaticPod(const Pod& pod) {
  auto it = pod.annotations.find("kubernetes.io/config.source");
  return it != pod.annotations.end() && it->second != "api";
}

bool isMirrorPod(const Pod& pod) {
  return pod.annotations.count("kubernetes.io/config.mirror") != 0;
}

namespace {

// The request sets of docs/reference.md §3 and who counts which.
void resolveRequests(Pod& pod) {
  pod.requests = podRequests(pod, RequestSet::Desired);
  bool statusReported = pod.podLevelAllocated || pod.podLevelActual;
  for (const auto* list : {&pod.containers, &pod.initContainers}) {
    for (const auto& c : *list) statusReported |= c.allocated || c.actual;
  }
  if (statusReported) {
    pod.allocatedRequests = podRequests(pod, RequestSet::Allocated);
    const ResourceAmounts actual = podRequests(pod, RequestSet::Actual);
    pod.kubeletRequests = pod.allocatedRequests;
    maxAmountsInto(pod.kubeletRequests, actual);
    if (pod.resizeInfeasible) {
      // The scheduler in an infeasible resize: what the kubelet allocated and runs, the
      // desired spec left out, and nothing for a container whose status says nothing.
      pod.schedulerRequests = podRequestsOf(pod, RequestSet::Allocated, false, true);
      maxAmountsInto(pod.schedulerRequests, podRequestsOf(pod, RequestSet::Actual, false, true));
    } else {
      pod.schedulerRequests = pod.kubeletRequests;
      maxAmountsInto(pod.schedulerRequests, pod.requests);
    }
  } else {
    pod.allocatedRequests = pod.requests;
    pod.kubeletRequests = pod.requests;
    pod.schedulerRequests = pod.requests;
  }
  // Eviction: the allocated set; with pod-level resources only the pod level counts, for
  // every resource (the kubelet's GetResourceRequestQuantity).
  if (hasPodLevelResources(pod)) {
    NanoAmounts reqs = podLevelRequests(pod, RequestSet::Allocated);
    addOverhead(reqs, pod, /*onlyIfNonZero=*/true);
    pod.rankingRequests = toAmounts(reqs);
  } else if (statusReported || !pod.overhead.empty()) {
    pod.rankingRequests = podRequests(pod, RequestSet::Allocated, /*overheadOnlyIfNonZero=*/true);
  } else {
    pod.rankingRequests = pod.requests;
  }
  for (int consumer = 0; consumer < 2; ++consumer) {
    const ResourceAmounts& set =
        pod.requestsFor(consumer == 0 ? RequestConsumer::Kubelet : RequestConsumer::Scheduler);
    int slot = 0;
    for (const char* name : {"cpu", "memory", "ephemeral-storage"}) {
      auto it = set.find(name);
      pod.fitRequests[consumer][slot++] = it == set.end() ? 0 : it->second;
    }
  }
  pod.extendedRequests = false;
  for (const auto& [name, v] : pod.schedulerRequests) {
    if (name != "cpu" && name != "memory" && name != "ephemeral-storage")
      pod.extendedRequests = true;
  }
  for (const auto& [name, v] : pod.kubeletRequests) {
    if (name != "cpu" && name != "memory" && name != "ephemeral-storage")
      pod.extendedRequests = true;
  }
}

}  // namespace

void resolvePod(Pod& pod, const std::vector<PriorityClass>& classes) {
  pod.key = pod.ns + "/" + pod.name;
  pod.labelsBloom = labelBloom(pod.labels);
  const PriorityClass* globalDefault = nullptr;
  for (const auto& c : classes) {
    if (c.globalDefault) globalDefault = &c;
  }
  const PriorityClass* cls = nullptr;
  pod.priorityClassFound = true;
  if (!pod.priorityClassName.empty()) {
    cls = findClass(classes, pod.priorityClassName);
    if (cls == nullptr) cls = builtInClass(pod.priorityClassName);
    if (cls == nullptr) pod.priorityClassFound = false;
  } else {
    cls = globalDefault;
  }
  if (pod.specPriority) {
    pod.priority = *pod.specPriority;
  } else if (cls != nullptr) {
    pod.priority = cls->value;
  } else {
    pod.priority = globalDefault != nullptr ? globalDefault->value : 0;
  }
  if (pod.specPreemptionPolicy) {
    pod.preemptionPolicy = *pod.specPreemptionPolicy;
  } else if (cls != nullptr && cls->preemptionPolicy) {
    pod.preemptionPolicy = *cls->preemptionPolicy;
  } else {
    pod.preemptionPolicy = PreemptionPolicy::PreemptLowerPriority;
  }
  pod.qos = pod.statusQos ? *pod.statusQos : computeQos(pod);
  pod.critical = pod.priority >= kSystemCriticalPriority || isStaticPod(pod) || isMirrorPod(pod);
  resolveRequests(pod);
}

void resolvePods(std::vector<Pod>& pods, const std::vector<PriorityClass>& classes) {
  for (auto& pod : pods) resolvePod(pod, classes);
  std::vector<std::uint32_t> byKey(pods.size());
  for (std::size_t i = 0; i < pods.size(); ++i) byKey[i] = std::uint32_t(i);
  std::stable_sort(byKey.begin(), byKey.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return pods[a].key < pods[b].key; });
  for (std::size_t rank = 0; rank < byKey.size(); ++rank) {
    pods[byKey[rank]].keyOrder = std::uint32_t(rank);
  }
}

}  // namespace nodewarden::policy
