// `nodewarden explain admission` and `nodewarden explain preemption` (docs/reference.md §5-§6).
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <variant>

#include "base/args.h"
#include "cli/commands.h"
#include "cli/source.h"
#include "policy/admission.h"
#include "policy/files.h"

namespace nodewarden::cli {
namespace {

const char* kAdmissionUsage =
    "usage: nodewarden explain admission SOURCE --node NAME --pod FILE [--policy FILE]\n"
    "                                    [-o table|json]\n"
    "\n"
    "Says whether a pod bound to NAME would be admitted, turned away, made to wait for\n"
    "terminating pods, or admitted by preempting lower-priority pods chosen exactly as the\n"
    "scheduler chooses them (PodDisruptionBudgets, fewest victims, nominated pods).\n"
    "\n"
    "  SOURCE            --snapshot FILE (kubectl output, see explain eviction --help), or\n"
    "                    --kubeconfig FILE [--context NAME] [--save-snapshot FILE]: the live\n"
    "                    cluster\n"
    "  --node NAME       the node the pod is bound to\n"
    "  --pod FILE        the Pod object (- for standard input)\n"
    "  --policy FILE     the policy: its thresholds turn the snapshot's kubelet stats into\n"
    "                    MemoryPressure/DiskPressure/PIDPressure for the node, as the\n"
    "                    conditions its Node object reports are; and neverEvictPriority\n"
    "                    (default: built-in)\n"
    "  -o, --output      table (default) or json\n"
    "\n"
    "Exit status: 0 whatever the verdict, 1 bad input, 2 usage error.\n";

const char* kPreemptionUsage =
    "usage: nodewarden explain preemption SOURCE --pod FILE [--policy FILE]\n"
    "                                     [-o table|json]\n"
    "\n"
    "Says where the scheduler would put a pending pod: a node where it fits, or the node whose\n"
    "preemption pickOneNodeForPreemption chooses, with the victims on every candidate node.\n"
    "\n"
    "  SOURCE            --snapshot FILE (kubectl output, see explain eviction --help), or\n"
    "                    --kubeconfig FILE [--context NAME] [--save-snapshot FILE]: the live\n"
    "                    cluster\n"
    "  --pod FILE        the pending Pod object (- for standard input)\n"
    "  --policy FILE     the policy (neverEvictPriority; default: built-in)\n"
    "  -o, --output      table (default) or json\n"
    "\n"
    "Exit status: 0 whatever the decision, 1 bad input, 2 usage error.\n";

std::string keyList(const std::vector<const policy::Pod*>& pods) {
  if (pods.empty()) return "none";
  std::vector<std::string> keys;
  for (const auto* p : pods) keys.push_back(p->key);
  std::sort(keys.begin(), keys.end());
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

struct Loaded {
  policy::Snapshot snapshot;
  policy::Pod pod;
  policy::Policy policy;
  std::string output;
  std::string node;  // --node (explain admission)
};

// --pod FILE (a Pod object; "-" is standard input), or --pod NAME [-n NAMESPACE] / --pod
// NAMESPACE/NAME: a pod of the snapshot, taken out of it and decided as if it were arriving
// now (where a Pending pod would go, or whether a running one would be admitted again).
Result<policy::Pod> podOption(const std::string& pod, const std::optional<std::string>& ns,
                              policy::Snapshot& snapshot) {
  std::error_code ec;
  if (pod == "-" || std::filesystem::exists(pod, ec)) {
    if (ns) return Error{"-n/--namespace names a pod of the snapshot; --pod " + pod + " is a file"};
    return policy::loadPod(pod, snapshot);
  }
  const std::string key =
      pod.find('/') != std::string::npos ? pod : ns.value_or("default") + "/" + pod;
  auto found = std::find_if(snapshot.pods.begin(), snapshot.pods.end(),
                            [&](const policy::Pod& p) { return p.key == key; });
  if (found == snapshot.pods.end()) {
    const std::string space = key.substr(0, key.find('/'));
    std::string names;
    for (const policy::Pod& p : snapshot.pods) {
      if (p.ns == space) names += (names.empty() ? "" : ", ") + p.name;
    }
    // The file's own error first (what a missing --pod FILE always said), then the snapshot.
    const Error unreadable = policy::loadPod(pod, snapshot).error();
    return Error{unreadable.message + "; and no pod " + key + " in the snapshot (pods in " + space +
                 ": " + (names.empty() ? "none" : names) + ")"};
  }
  policy::Pod arriving = std::move(*found);
  snapshot.pods.erase(found);
  arriving.nodeName.clear();
  return arriving;
}

// Parses the common options and reads what they name; or the exit code to return now.
std::variant<Loaded, int> load(const std::string& what, const char* usage,
                               const std::vector<std::string>& argv, bool needsNode,
                               std::ostream& out, std::ostream& err) {
  std::set<std::string> options{"pod", "namespace", "policy", "output"};
  options.insert(kSourceOptions.begin(), kSourceOptions.end());
  if (needsNode) options.insert("node");
  auto parsed = parseCommand("explain " + what, argv, options, {}, usage, out, err);
  if (const int* exit = std::get_if<int>(&parsed)) return *exit;
  const Args* args = &std::get<Args>(parsed);
  Loaded loaded;
  std::vector<std::string> required{"pod"};
  if (needsNode) required.push_back("node");
  for (const auto& name : required) {
    if (!args->value(name)) {
      err << "nodewarden explain " << what << ": --" << name << " is required\n\n" << usage;
      return kExitUsage;
    }
  }
  loaded.output = args->value("output").value_or("table");
  if (loaded.output != "table" && loaded.output != "json") {
    err << "nodewarden explain " << what << ": -o must be table or json, got \"" << loaded.output
        << "\"\n\n"
        << usage;
    return kExitUsage;
  }
  auto policy = loadPolicyOption(*args, err);
  if (!policy) {
    err << policy.error().message << "\n";
    return kExitBadInput;
  }
  loaded.policy = *policy;
  auto source = chooseSource(*args);
  if (!source) {
    err << "nodewarden explain " << what << ": " << source.error().message << "\n\n" << usage;
    return kExitUsage;
  }
  const std::string& snapshotPath = source->name;
  auto snapshot = loadSource(*source, err);
  if (!snapshot) {
    err << snapshot.error().message << "\n";
    return kExitBadInput;
  }
  loaded.snapshot = std::move(snapshot.value());
  if (loaded.snapshot.nodes.empty()) {
    err << snapshotPath << ": nodes: missing (admission and preemption need the Node objects)\n";
    return kExitBadInput;
  }
  for (const auto& n : loaded.snapshot.nodes) {
    if (!n.hasAllocatable) {
      err << snapshotPath << ": " << n.jsonPath
          << ".status.allocatable: missing (a node needs status.allocatable to decide what "
             "fits)\n";
      return kExitBadInput;
    }
  }
  if (needsNode) {
    const std::string& node = loaded.node = *args->value("node");
    if (loaded.snapshot.findNode(node) == nullptr) {
      std::string names;
      for (const auto& n : loaded.snapshot.nodes) names += (names.empty() ? "" : ", ") + n.name;
      err << snapshotPath << ": nodes: node \"" << node
          << "\" not found (nodes in the snapshot: " << names << ")\n";
      return kExitBadInput;
    }
  }
  auto pod = podOption(*args->value("pod"), args->value("namespace"), loaded.snapshot);
  if (!pod) {
    err << pod.error().message << "\n";
    return kExitBadInput;
  }
  loaded.pod = std::move(pod.value());
  return loaded;
}

}  // namespace

int runExplainAdmission(const std::vector<std::string>& argv, std::ostream& out,
                        std::ostream& err) {
  auto result = load("admission", kAdmissionUsage, argv, true, out, err);
  if (const int* exit = std::get_if<int>(&result)) return *exit;
  Loaded& loaded = std::get<Loaded>(result);
  const std::string& node = loaded.node;
  // §5 step 2: the node's pressure conditions include those its stats show under the policy.
  const std::vector<std::string> derived =
      policy::addDerivedPressureConditions(loaded.snapshot, node, loaded.policy);
  const policy::ClusterIndex cluster = policy::buildClusterIndex(loaded.snapshot);
  const policy::AdmissionDecision d = policy::admitPod(
      loaded.pod, *cluster.find(node), loaded.snapshot.podDisruptionBudgets, loaded.policy);
  if (loaded.output == "json") {
    out << policy::admissionToJson(d).dump(2) << "\n";
    return kExitOk;
  }
  std::string verdict = policy::verdictName(d.verdict);
  for (auto& c : verdict) c = char(std::toupper(static_cast<unsigned char>(c)));
  out << "Pod " << d.pod << " (priority " << loaded.pod.priority << ") on node " << d.node << ": "
      << verdict << (d.reason.empty() ? "" : " (" + d.reason + ")") << "\n";
  if (!d.message.empty()) out << "  " << d.message << "\n";
  if (!derived.empty()) {
    std::string list;
    for (const auto& c : derived) list += (list.empty() ? "" : ", ") + c;
    out << "Conditions derived from the snapshot's stats under the policy: " << list << "\n";
  }
  if (d.verdict == policy::Verdict::Preempt) {
    out << "Victims: " << keyList(d.victims) << "\n"
        << "PodDisruptionBudget violations: " << d.numPDBViolations << "\n";
  }
  out << "Nominated pods losing their reservation: " << keyList(d.nominatedPodsToClear) << "\n";
  return kExitOk;
}

int runExplainPreemption(const std::vector<std::string>& argv, std::ostream& out,
                         std::ostream& err) {
  auto result = load("preemption", kPreemptionUsage, argv, false, out, err);
  if (const int* exit = std::get_if<int>(&result)) return *exit;
  Loaded& loaded = std::get<Loaded>(result);
  const policy::ClusterIndex cluster = policy::buildClusterIndex(loaded.snapshot);
  const policy::PreemptionDecision d = policy::preemptCluster(
      loaded.pod, cluster, loaded.snapshot.podDisruptionBudgets, loaded.policy);
  if (loaded.output == "json") {
    out << policy::preemptionToJson(d).dump(2) << "\n";
    return kExitOk;
  }
  out << "Pod " << d.pod << " (priority " << loaded.pod.priority << "): ";
  if (d.node == nullptr) {
    out << "no node (" << d.reason << ")\n";
  } else if (d.victims.empty()) {
    out << "node " << d.node->name << ", " << d.reason << "\n";
  } else {
    out << "node " << d.node->name << ", preempting " << keyList(d.victims) << " ("
        << d.numPDBViolations << " PodDisruptionBudget violations)\n";
  }
  if (!d.candidates.empty()) {
    out << "Other candidate nodes:\n";
    for (const auto& c : d.candidates) {
      out << "  " << c.node->name << ": " << keyList(c.victims) << " (" << c.numPDBViolations
          << " PodDisruptionBudget violations)\n";
    }
  }
  out << "Nominated pods losing their reservation: " << keyList(d.nominatedPodsToClear) << "\n";
  return kExitOk;
}

}  // namespace nodewarden::cli
