// Differential: the trimmed parse (policy::parseKubernetesJsonText, which drops members no
// parser reads while parsing) against nlohmann's full DOM (policy::parseJsonText), and the
// scanner that finds one string without a DOM (kube::findJsonString) against a lookup in the
// full DOM. For any input:
//   - both parses accept or both reject;
//   - the trimmed document is a sub-document of the full one (same values where kept);
//   - every parser of policy/ (snapshot, Pod, Node, PriorityClass, PDB, Summary) reads the
//     same values and reports the same problems from either, once the one documented
//     difference is applied to the full DOM (kubectl's last-applied-configuration annotation
//     is dropped);
//   - without duplicate member names, findJsonString returns exactly the full DOM's string.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kube/client.h"
#include "policy/model.h"

namespace policy = nodewarden::policy;
using policy::Json;

namespace {

[[noreturn]] void fail(const char* what) {
  (void)what;  // visible in the debugger and the stack
  std::abort();
}

// True when `part` is `whole` with members of objects removed (at any depth).
bool isSubDocument(const Json& part, const Json& whole) {
  if (part.type() != whole.type()) {
    return false;
  }
  if (part.is_object()) {
    for (auto it = part.begin(); it != part.end(); ++it) {
      auto other = whole.find(it.key());
      if (other == whole.end() || !isSubDocument(it.value(), *other)) return false;
    }
    return true;
  }
  if (part.is_array()) {
    if (part.size() != whole.size()) return false;
    for (std::size_t i = 0; i < part.size(); ++i) {
      if (!isSubDocument(part[i], whole[i])) return false;
    }
    return true;
  }
  return part == whole;
}

// The documented difference: the annotation holding a copy of the whole object is dropped.
void dropLastApplied(Json& value) {
  if (value.is_object()) {
    value.erase("kubectl.kubernetes.io/last-applied-configuration");
    for (auto& member : value) dropLastApplied(member);
  } else if (value.is_array()) {
    for (auto& element : value) dropLastApplied(element);
  }
}

// Detects a member name repeated within one object (the DOM keeps the last, a scanner may
// stop at the first).
class DuplicateKeys {
 public:
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(Json::number_integer_t) { return true; }
  bool number_unsigned(Json::number_unsigned_t) { return true; }
  bool number_float(Json::number_float_t, const Json::string_t&) { return true; }
  bool string(Json::string_t&) { return true; }
  bool binary(Json::binary_t&) { return true; }
  bool start_object(std::size_t) {
    keys_.emplace_back();
    return true;
  }
  bool key(Json::string_t& k) {
    if (!keys_.back().insert(k).second) found = true;
    return true;
  }
  bool end_object() {
    keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }
  bool found = false;

 private:
  std::vector<std::set<std::string>> keys_;
};

Json dumpList(const policy::ResourceList& list) {
  Json out = Json::object();
  for (const auto& [name, q] : list) out[name] = q.toString();
  return out;
}
Json dumpAmounts(const policy::ResourceAmounts& amounts) {
  Json out = Json::object();
  for (const auto& [name, v] : amounts) out[name] = v;
  return out;
}
template <typename T>
Json dumpOptional(const std::optional<T>& value) {
  return value ? Json(*value) : Json();
}
Json dumpOptionalList(const std::optional<policy::ResourceList>& list) {
  return list ? dumpList(*list) : Json();
}

Json dumpContainer(const policy::Container& c) {
  return Json{{"name", c.name},
              {"requests", dumpList(c.requests)},
              {"limits", dumpList(c.limits)},
              {"sidecar", c.sidecar},
              {"allocated", dumpOptionalList(c.allocated)},
              {"actual", dumpOptionalList(c.actual)}};
}

Json dumpPod(const policy::Pod& p) {
  Json containers = Json::array(), inits = Json::array(), tolerations = Json::array();
  for (const auto& c : p.containers) containers.push_back(dumpContainer(c));
  for (const auto& c : p.initContainers) inits.push_back(dumpContainer(c));
  for (const auto& t : p.tolerations) tolerations.push_back({t.key, t.op, t.value, t.effect});
  Json out = {{"name", p.name},
              {"ns", p.ns},
              {"uid", p.uid},
              {"labels", p.labels},
              {"annotations", p.annotations},
              {"terminating", p.terminating},
              {"labelsBloom", p.labelsBloom},
              {"nodeName", p.nodeName},
              {"specPriority", dumpOptional(p.specPriority)},
              {"priorityClassName", p.priorityClassName},
              {"specPreemptionPolicy",
               p.specPreemptionPolicy ? Json(int(*p.specPreemptionPolicy)) : Json()},
              {"nodeSelector", p.nodeSelector},
              {"tolerations", tolerations},
              {"grace", p.terminationGracePeriodSeconds},
              {"overhead", dumpList(p.overhead)},
              {"podLevelRequests", dumpList(p.podLevelRequests)},
              {"podLevelLimits", dumpList(p.podLevelLimits)},
              {"containers", containers},
              {"initContainers", inits},
              {"phase", p.phase},
              {"startTime", dumpOptional(p.startTime)},
              {"nominatedNodeName", p.nominatedNodeName},
              {"statusQos", p.statusQos ? Json(int(*p.statusQos)) : Json()},
              {"podLevelAllocated", dumpOptionalList(p.podLevelAllocated)},
              {"podLevelActual", dumpOptionalList(p.podLevelActual)},
              {"disruptionTarget", p.disruptionTarget},
              {"resizeInfeasible", p.resizeInfeasible},
              {"resizeState", p.resizeState},
              {"key", p.key},
              {"keyOrder", p.keyOrder},
              {"priority", p.priority},
              {"priorityClassFound", p.priorityClassFound},
              {"preemptionPolicy", int(p.preemptionPolicy)},
              {"qos", int(p.qos)},
              {"critical", p.critical},
              {"requests", dumpAmounts(p.requests)},
              {"kubeletRequests", dumpAmounts(p.kubeletRequests)},
              {"schedulerRequests", dumpAmounts(p.schedulerRequests)},
              {"rankingRequests", dumpAmounts(p.rankingRequests)},
              {"allocatedRequests", dumpAmounts(p.allocatedRequests)},
              {"extendedRequests", p.extendedRequests}};
  Json fit = Json::array();
  for (const auto& row : p.fitRequests) fit.push_back({row[0], row[1], row[2]});
  out["fitRequests"] = fit;
  return out;
}

Json dumpNode(const policy::Node& n) {
  Json taints = Json::array(), conditions = Json::array();
  for (const auto& t : n.taints) taints.push_back({t.key, t.value, t.effect});
  for (const auto& c : n.conditions) conditions.push_back({c.type, c.status});
  return Json{{"name", n.name},
              {"jsonPath", n.jsonPath},
              {"hasAllocatable", n.hasAllocatable},
              {"labels", n.labels},
              {"unschedulable", n.unschedulable},
              {"taints", taints},
              {"capacity", dumpList(n.capacity)},
              {"allocatable", dumpList(n.allocatable)},
              {"conditions", conditions}};
}

Json dumpPriorityClass(const policy::PriorityClass& c) {
  return Json{{"name", c.name},
              {"value", c.value},
              {"globalDefault", c.globalDefault},
              {"preemptionPolicy", c.preemptionPolicy ? Json(int(*c.preemptionPolicy)) : Json()}};
}

Json dumpPdb(const policy::PodDisruptionBudget& b) {
  Json selector;
  if (b.selector) {
    Json expressions = Json::array();
    for (const auto& e : b.selector->matchExpressions)
      expressions.push_back({e.key, e.op, e.values});
    selector = {{"matchLabels", b.selector->matchLabels},
                {"matchExpressions", expressions},
                {"bloom", b.selector->matchLabelsBloom}};
  }
  return Json{{"name", b.name},
              {"ns", b.ns},
              {"selector", selector},
              {"disruptionsAllowed", b.disruptionsAllowed},
              {"disruptedPods", b.disruptedPods}};
}

Json dumpFs(const policy::FsStats& f) {
  return Json{dumpOptional(f.availableBytes), dumpOptional(f.capacityBytes),
              dumpOptional(f.inodesFree), dumpOptional(f.inodes)};
}

Json dumpSummary(const policy::Summary& s) {
  const auto& n = s.node;
  Json pods = Json::array();
  for (const auto& p : s.pods) {
    Json containers = Json::array();
    for (const auto& c : p.containers) {
      containers.push_back({c.name, dumpOptional(c.memoryWorkingSetBytes),
                            dumpOptional(c.rootfsUsedBytes), dumpOptional(c.logsUsedBytes)});
    }
    pods.push_back({p.name, p.ns, p.uid, dumpOptional(p.memoryWorkingSetBytes),
                    dumpOptional(p.cpuUsageNanoCores), dumpOptional(p.processCount),
                    dumpOptional(p.ephemeralStorageUsedBytes),
                    dumpOptional(p.ephemeralStorageInodesUsed), dumpOptional(p.swapUsageBytes),
                    containers});
  }
  return Json{{"node",
               {dumpOptional(n.memoryAvailableBytes), dumpOptional(n.memoryWorkingSetBytes),
                dumpOptional(n.podsMemoryAvailableBytes), dumpOptional(n.podsMemoryWorkingSetBytes),
                dumpFs(n.nodeFs), n.imageFs ? dumpFs(*n.imageFs) : Json(), dumpOptional(n.maxPid),
                dumpOptional(n.curProc)}},
              {"pods", pods}};
}

Json dumpSnapshot(const policy::Snapshot& s) {
  Json nodes = Json::array(), pods = Json::array(), classes = Json::array(), pdbs = Json::array(),
       stats = Json::object();
  for (const auto& n : s.nodes) nodes.push_back(dumpNode(n));
  for (const auto& p : s.pods) pods.push_back(dumpPod(p));
  for (const auto& c : s.priorityClasses) classes.push_back(dumpPriorityClass(c));
  for (const auto& b : s.podDisruptionBudgets) pdbs.push_back(dumpPdb(b));
  for (const auto& [name, summary] : s.stats) stats[name] = dumpSummary(summary);
  return Json{
      {"nodes", nodes}, {"pods", pods}, {"classes", classes}, {"pdbs", pdbs}, {"stats", stats}};
}

template <typename T, typename Parse, typename Dump>
Json readWith(const Json& json, Parse&& parse, Dump&& dump) {
  policy::Diagnostics diagnostics;
  std::optional<T> value = parse(json, diagnostics);
  return Json{{"value", value ? dump(*value) : Json()}, {"problems", diagnostics.joined()}};
}

// Everything the parsers of policy/ make of one document.
Json readAll(const Json& json) {
  Json out = Json::object();
  out["snapshot"] = readWith<policy::Snapshot>(
      json, [](const Json& j, policy::Diagnostics& d) { return policy::parseSnapshot(j, d); },
      dumpSnapshot);
  out["pod"] = readWith<policy::Pod>(
      json,
      [](const Json& j, policy::Diagnostics& d) {
        auto pod = policy::parsePod(j, "pod", d);
        if (pod) policy::resolvePod(*pod, {});
        return pod;
      },
      dumpPod);
  out["node"] = readWith<policy::Node>(
      json, [](const Json& j, policy::Diagnostics& d) { return policy::parseNode(j, "node", d); },
      dumpNode);
  out["class"] = readWith<policy::PriorityClass>(
      json,
      [](const Json& j, policy::Diagnostics& d) { return policy::parsePriorityClass(j, "pc", d); },
      dumpPriorityClass);
  out["pdb"] = readWith<policy::PodDisruptionBudget>(
      json,
      [](const Json& j, policy::Diagnostics& d) {
        return policy::parsePodDisruptionBudget(j, "pdb", d);
      },
      dumpPdb);
  out["summary"] = readWith<policy::Summary>(
      json,
      [](const Json& j, policy::Diagnostics& d) { return policy::parseSummary(j, "stats", d); },
      dumpSummary);
  return out;
}

// The string at `path` of the full DOM, as findJsonString promises to find it.
std::optional<std::string> lookUp(const Json& json, std::initializer_list<std::string_view> path) {
  const Json* at = &json;
  for (auto name : path) {
    if (!at->is_object()) return std::nullopt;
    auto it = at->find(std::string(name));
    if (it == at->end()) return std::nullopt;
    at = &*it;
  }
  if (!at->is_string()) return std::nullopt;
  return at->get<std::string>();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  policy::Diagnostics fullProblems, trimmedProblems;
  auto full = policy::parseJsonText(text, fullProblems);
  auto trimmed = policy::parseKubernetesJsonText(text, trimmedProblems);
  if (full.has_value() != trimmed.has_value()) fail("one parse accepted what the other rejected");

  if (full) {
    if (!isSubDocument(*trimmed, *full)) fail("trimmed is not a sub-document of full");
    Json reference = *full;
    dropLastApplied(reference);
    if (readAll(reference) != readAll(*trimmed)) fail("parsers read different values");

    DuplicateKeys duplicates;
    (void)Json::sax_parse(text, &duplicates);
    if (!duplicates.found) {
      for (auto path : {std::initializer_list<std::string_view>{"metadata", "resourceVersion"},
                        std::initializer_list<std::string_view>{"metadata", "continue"},
                        std::initializer_list<std::string_view>{"type"},
                        std::initializer_list<std::string_view>{"object", "metadata", "name"}}) {
        if (nodewarden::kube::findJsonString(text, path) != lookUp(*full, path))
          fail("findJsonString disagrees with the DOM");
      }
    }
  } else {
    for (auto path : {std::initializer_list<std::string_view>{"metadata", "resourceVersion"},
                      std::initializer_list<std::string_view>{"type"}}) {
      (void)nodewarden::kube::findJsonString(text, path);
    }
  }
  return 0;
}
