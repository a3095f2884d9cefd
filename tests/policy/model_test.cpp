// Kubernetes objects from JSON (docs/reference.md §2) and the shared definitions of §3.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "policy/model.h"

using nodewarden::policy::Diagnostics;
using nodewarden::policy::Json;
using nodewarden::policy::Pod;
using nodewarden::policy::PreemptionPolicy;
using nodewarden::policy::QosClass;
using nodewarden::policy::Snapshot;

namespace {

Snapshot snapshotOk(const std::string& text) {
  Diagnostics d;
  auto s = nodewarden::policy::parseSnapshotText(text, d);
  REQUIRE_MESSAGE(s.has_value(), d.joined());
  return std::move(*s);
}

std::vector<std::string> snapshotErrors(const std::string& text) {
  Diagnostics d;
  auto s = nodewarden::policy::parseSnapshotText(text, d);
  CHECK_FALSE(s.has_value());
  std::vector<std::string> out;
  for (const auto& e : d.errors()) out.push_back(e.message);
  return out;
}

// One pod with the given spec members, resolved against `classes`.
Pod podWith(const std::string& spec, const std::string& classes = "[]",
            const std::string& extra = "") {
  Snapshot s = snapshotOk(R"({"priorityClasses": )" + classes +
                          R"(, "pods": [{"metadata": {"name": "p", "namespace": "ns")" + extra +
                          R"(}, "spec": )" + spec + "}]}");
  REQUIRE(s.pods.size() == 1);
  return s.pods[0];
}

std::string container(const std::string& name, const std::string& requests,
                      const std::string& limits = "{}", const std::string& restart = "") {
  return R"({"name": ")" + name + R"(", "resources": {"requests": )" + requests +
         R"(, "limits": )" + limits + "}" +
         (restart.empty() ? "" : R"(, "restartPolicy": ")" + restart + "\"") + "}";
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace

TEST_CASE("snapshot: members may be arrays or kubectl List objects") {
  Snapshot s = snapshotOk(R"({
    "nodes": {"apiVersion": "v1", "kind": "List", "items": [
      {"metadata": {"name": "n1", "labels": {"zone": "a"}},
       "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]},
       "status": {"allocatable": {"cpu": "3800m", "memory": "7Gi", "pods": "110"},
                  "capacity": {"cpu": "4"},
                  "conditions": [{"type": "MemoryPressure", "status": "True"}]}}]},
    "pods": [{"metadata": {"name": "a", "namespace": "x", "uid": "u1"}, "spec": {"nodeName": "n1"}}],
    "priorityClasses": {"kind": "PriorityClassList", "items": []},
    "podDisruptionBudgets": [{"metadata": {"name": "b", "namespace": "x"},
      "spec": {"selector": {"matchLabels": {"app": "a"},
               "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]}},
      "status": {"disruptionsAllowed": 1, "disruptedPods": {"a": "2024-01-01T00:00:00Z"}}}],
    "stats": {"n1": {"node": {"memory": {"availableBytes": 100, "workingSetBytes": 200}},
                     "pods": [{"podRef": {"name": "a", "namespace": "x", "uid": "u1"},
                               "memory": {"workingSetBytes": 42}}]}},
    "someOtherMember": {"ignored": true}
  })");
  REQUIRE(s.nodes.size() == 1);
  CHECK(s.nodes[0].allocatable.at("memory").value() == 7LL * 1024 * 1024 * 1024);
  CHECK(s.nodes[0].taints.at(0).effect == "NoExecute");
  CHECK(s.nodes[0].conditions.at(0).type == "MemoryPressure");
  REQUIRE(s.pods.size() == 1);
  CHECK(s.pods[0].key == "x/a");
  REQUIRE(s.podDisruptionBudgets.size() == 1);
  CHECK(s.podDisruptionBudgets[0].selector->matches({{"app", "a"}, {"tier", "web"}}));
  CHECK_FALSE(s.podDisruptionBudgets[0].selector->matches({{"app", "a"}, {"tier", "db"}}));
  CHECK(s.podDisruptionBudgets[0].disruptedPods.count("a") == 1);
  CHECK(*s.stats.at("n1").pods.at(0).memoryWorkingSetBytes == 42);
}

TEST_CASE("priority: spec.priority, then the class, then globalDefault, then 0") {
  const std::string classes = R"([
    {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"},
    {"metadata": {"name": "default"}, "value": 50, "globalDefault": true}])";
  CHECK(podWith(R"({"priority": 7, "priorityClassName": "high"})", classes).priority == 7);
  CHECK(podWith(R"({"priorityClassName": "high"})", classes).priority == 1000);
  CHECK(podWith(R"({})", classes).priority == 50);
  CHECK(podWith(R"({})").priority == 0);
  CHECK(podWith(R"({"priorityClassName": "system-node-critical"})").priority == 2000001000);
  CHECK(podWith(R"({"priorityClassName": "system-cluster-critical"})").priority == 2000000000);
  Pod unknown = podWith(R"({"priorityClassName": "nope"})", classes);
  CHECK_FALSE(unknown.priorityClassFound);
  CHECK(podWith(R"({"priorityClassName": "high"})", classes).priorityClassFound);
}

TEST_CASE("preemption policy: spec, then the class, then PreemptLowerPriority") {
  const std::string classes = R"([
    {"metadata": {"name": "never"}, "value": 10, "preemptionPolicy": "Never"},
    {"metadata": {"name": "dflt"}, "value": 5, "globalDefault": true, "preemptionPolicy": "Never"}])";
  CHECK(podWith(R"({"priorityClassName": "never"})", classes).preemptionPolicy ==
        PreemptionPolicy::Never);
  CHECK(podWith(R"({"priorityClassName": "never", "preemptionPolicy": "PreemptLowerPriority"})",
                classes)
            .preemptionPolicy == PreemptionPolicy::PreemptLowerPriority);
  CHECK(podWith(R"({})", classes).preemptionPolicy == PreemptionPolicy::Never);
  CHECK(podWith(R"({})").preemptionPolicy == PreemptionPolicy::PreemptLowerPriority);
}

TEST_CASE("requests: containers, sidecars, init containers and overhead") {
  // Plain containers add up.
  Pod plain =
      podWith(R"({"containers": [)" + container("a", R"({"cpu": "100m", "memory": "1Gi"})") + "," +
              container("b", R"({"cpu": "0.5", "memory": "512Mi"})") + "]}");
  CHECK(plain.requests.at("cpu") == 600);
  CHECK(plain.requests.at("memory") == 1536LL * 1024 * 1024);

  // An init container larger than the sum wins (the classic max rule).
  Pod init = podWith(R"({"containers": [)" + container("a", R"({"cpu": "100m"})") +
                     R"(], "initContainers": [)" + container("i", R"({"cpu": "2"})") + "]}");
  CHECK(init.requests.at("cpu") == 2000);

  // KEP-753: sidecars run alongside; an init container after a sidecar adds to it.
  Pod sidecar = podWith(R"({"containers": [)" + container("main", R"({"memory": "100Mi"})") +
                        R"(], "initContainers": [)" +
                        container("side", R"({"memory": "50Mi"})", "{}", "Always") + "," +
                        container("migrate", R"({"memory": "200Mi"})") + "]}");
  // max(100 + 50, 50 + 200) = 250Mi
  CHECK(sidecar.requests.at("memory") == 250LL * 1024 * 1024);
  Pod sidecarFirst =
      podWith(R"({"containers": [)" + container("main", R"({"memory": "300Mi"})") +
              R"(], "initContainers": [)" + container("migrate", R"({"memory": "200Mi"})") + "," +
              container("side", R"({"memory": "50Mi"})", "{}", "Always") + "]}");
  // max(300 + 50, max(200, 50)) = 350Mi
  CHECK(sidecarFirst.requests.at("memory") == 350LL * 1024 * 1024);

  // Overhead is added on top.
  Pod overhead = podWith(R"({"overhead": {"memory": "120Mi", "cpu": "250m"}, "containers": [)" +
                         container("a", R"({"memory": "100Mi"})") + "]}");
  CHECK(overhead.requests.at("memory") == 220LL * 1024 * 1024);
  CHECK(overhead.requests.at("cpu") == 250);
  // The kubelet's eviction ranking adds overhead only to a non-zero request.
  CHECK(overhead.rankingRequests.at("memory") == 220LL * 1024 * 1024);
  CHECK(overhead.rankingRequests.count("cpu") == 0);

  // A limit without a request defaults the request, as the API server does.
  Pod limitOnly =
      podWith(R"({"containers": [)" +
              container("a", "{}", R"({"memory": "64Mi", "example.com/gpu": "1"})") + "]}");
  CHECK(limitOnly.requests.at("memory") == 64LL * 1024 * 1024);
  CHECK(limitOnly.requests.at("example.com/gpu") == 1);
}

TEST_CASE("quantities may be JSON numbers or padded strings, as Quantity.UnmarshalJSON allows") {
  Pod p = podWith(
      R"({"containers": [{"name": "c", "resources": {"requests": {"memory": 1.5e3, "cpu": " 250m "}}}]})");
  CHECK(p.requests.at("memory") == 1500);
  CHECK(p.requests.at("cpu") == 250);
}

TEST_CASE("QoS: status.qosClass wins, else computed from cpu and memory") {
  CHECK(podWith(R"({"containers": [)" + container("a", "{}") + "]}").qos == QosClass::BestEffort);
  CHECK(podWith(
            R"({"containers": [)" +
            container("a", R"({"cpu": "1", "memory": "1Gi"})", R"({"cpu": "1", "memory": "1Gi"})") +
            "]}")
            .qos == QosClass::Guaranteed);
  CHECK(podWith(R"({"containers": [)" + container("a", "{}", R"({"cpu": "1", "memory": "1Gi"})") +
                "]}")
            .qos == QosClass::Guaranteed);  // requests defaulted from limits
  CHECK(podWith(R"({"containers": [)" + container("a", R"({"memory": "1Gi"})") + "]}").qos ==
        QosClass::Burstable);
  CHECK(podWith(
            R"({"containers": [)" +
            container("a", R"({"cpu": "1", "memory": "1Gi"})", R"({"cpu": "2", "memory": "1Gi"})") +
            "]}")
            .qos == QosClass::Burstable);
  // Extended resources do not make a pod Burstable.
  CHECK(podWith(R"({"containers": [)" + container("a", R"({"example.com/gpu": "1"})") + "]}").qos ==
        QosClass::BestEffort);
  Snapshot s = snapshotOk(R"({"pods": [{"metadata": {"name": "p"}, "spec": {},
                                         "status": {"qosClass": "Guaranteed"}}]})");
  CHECK(s.pods[0].qos == QosClass::Guaranteed);
}

TEST_CASE("critical pods: system priority, static pods and mirror pods") {
  CHECK(podWith(R"({"priorityClassName": "system-cluster-critical"})").critical);
  CHECK(podWith(R"({"priority": 2000000000})").critical);
  CHECK_FALSE(podWith(R"({"priority": 1999999999})").critical);
  CHECK(
      podWith("{}", "[]", R"(, "annotations": {"kubernetes.io/config.source": "file"})").critical);
  CHECK_FALSE(
      podWith("{}", "[]", R"(, "annotations": {"kubernetes.io/config.source": "api"})").critical);
  CHECK(podWith("{}", "[]", R"(, "annotations": {"kubernetes.io/config.mirror": "abc"})").critical);
  CHECK_FALSE(podWith("{}").critical);
}

TEST_CASE("tolerations match taints as Kubernetes does") {
  using nodewarden::policy::Taint;
  using nodewarden::policy::tolerates;
  using nodewarden::policy::Toleration;
  Taint memoryPressure{"node.kubernetes.io/memory-pressure", "", "NoSchedule"};
  CHECK(tolerates({Toleration{"node.kubernetes.io/memory-pressure", "Exists", "", "NoSchedule"}},
                  memoryPressure));
  CHECK(tolerates({Toleration{"", "Exists", "", ""}}, memoryPressure));
  CHECK_FALSE(
      tolerates({Toleration{"node.kubernetes.io/memory-pressure", "Exists", "", "NoExecute"}},
                memoryPressure));
  CHECK(tolerates({Toleration{"k", "Equal", "v", "NoExecute"}}, Taint{"k", "v", "NoExecute"}));
  CHECK_FALSE(
      tolerates({Toleration{"k", "Equal", "w", "NoExecute"}}, Taint{"k", "v", "NoExecute"}));
  CHECK_FALSE(tolerates({}, memoryPressure));
}

TEST_CASE("snapshot: malformed objects are errors with their JSON path") {
  struct Case {
    std::string name;
    std::string text;
    std::vector<std::string> errors;
  };
  const std::vector<Case> cases = {
      {"malformed quantity",
       R"({"pods": [{"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "9x"}}}]}}]})",
       {R"(pods[0].spec.containers[0].resources.requests.memory: "9x" is not a quantity (expected a number with an optional suffix, such as 128974848, 129e6, 129M, 123Mi, 1.5Gi or 500m))"}},
      {"negative request",
       R"({"pods": {"kind": "PodList", "items": [{"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "-1"}}}]}}]}})",
       {R"(pods.items[0].spec.containers[0].resources.requests.cpu: must not be negative, got "-1")"}},
      {"pod without a name",
       R"({"pods": [{"metadata": {"namespace": "x"}, "spec": {}}]})",
       {"pods[0].metadata.name: missing (a string is required)"}},
      {"pod without metadata",
       R"({"pods": [{"spec": {}}]})",
       {"pods[0].metadata: missing (a pod needs metadata.name)"}},
      {"pod not an object", R"({"pods": [42]})", {"pods[0]: expected an object, got 42"}},
      {"priority not an integer",
       R"({"pods": [{"metadata": {"name": "a"}, "spec": {"priority": "high"}}]})",
       {R"(pods[0].spec.priority: expected an integer, got "high")"}},
      {"bad start time",
       R"({"pods": [{"metadata": {"name": "a"}, "spec": {}, "status": {"startTime": "yesterday"}}]})",
       {R"(pods[0].status.startTime: "yesterday" is not an RFC 3339 time (expected e.g. 2024-05-01T10:00:00Z))"}},
      {"bad preemption policy",
       R"({"pods": [{"metadata": {"name": "a"}, "spec": {"preemptionPolicy": "Sometimes"}}]})",
       {R"(pods[0].spec.preemptionPolicy: expected "PreemptLowerPriority" or "Never", got "Sometimes")"}},
      {"node label not a string",
       R"({"nodes": [{"metadata": {"name": "n", "labels": {"zone": 1}}, "status": {"allocatable": {}}}]})",
       {R"(nodes[0].metadata.labels.zone: expected a string, got 1)"}},
      {"PDB with an invalid operator",
       R"({"podDisruptionBudgets": [{"metadata": {"name": "b"}, "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]}}}]})",
       {R"(podDisruptionBudgets[0].spec.selector.matchExpressions[0].operator: expected In, NotIn, Exists or DoesNotExist, got "Near")"}},
      {"PDB In without values",
       R"({"podDisruptionBudgets": [{"metadata": {"name": "b"}, "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}}]})",
       {"podDisruptionBudgets[0].spec.selector.matchExpressions[0].values: must not be empty for "
        "operator In"}},
      {"user class above the limit",
       R"({"priorityClasses": [{"metadata": {"name": "too-high"}, "value": 2000000000}]})",
       {"priorityClasses[0].value: must be at most 1000000000 for a user class, got 2000000000"}},
      {"stats figure negative",
       R"({"stats": {"n": {"node": {"memory": {"availableBytes": -5}}}}})",
       {"stats.n.node.memory.availableBytes: expected an integer from 0 to 9223372036854775807, "
        "got -5"}},
      {"stats figure above int64",
       R"({"stats": {"n": {"node": {"memory": {"availableBytes": 18446744073709551615}}}}})",
       {"stats.n.node.memory.availableBytes: expected an integer from 0 to 9223372036854775807, "
        "got 18446744073709551615"}},
      {"a long non-ASCII value is cut on a character boundary",
       R"({"pods": [{"metadata": {"name": "p"}, "spec": {"priority": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaééééé"}}]})",
       {"pods[0].spec.priority: expected an integer, got "
        "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\""}},
      {"priority far out of range as a float",
       R"({"pods": [{"metadata": {"name": "p"}, "spec": {"priority": 1e300}}]})",
       {"pods[0].spec.priority: expected an integer, got 1e+300"}},
      {"member neither list nor array",
       R"({"pods": {"kind": "PodList"}})",
       {R"(pods: expected an array or a List object with "items", got an object)"}},
      {"not an object",
       R"([1, 2])",
       {"expected a snapshot object with nodes, pods, priorityClasses, podDisruptionBudgets and "
        "stats, got an array"}},
      {"two bad pods, both reported",
       R"({"pods": [{"metadata": {"name": ""}}, {"metadata": {"name": "b"}, "spec": {"overhead": {"memory": "1Ki5"}}}]})",
       {"pods[0].metadata.name: must not be empty",
        R"(pods[1].spec.overhead.memory: "1Ki5" has an unknown suffix "Ki5" (expected one of n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3; suffixes are case-sensitive))"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    CHECK(joined(snapshotErrors(c.text)) == joined(c.errors));
  }
}

TEST_CASE("snapshot: invalid JSON is reported with its position, never thrown") {
  auto errors = snapshotErrors("{\"pods\": [");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].rfind("invalid JSON at line 1, column ", 0) == 0);
  // Fuzz-style: every prefix of a valid snapshot is either valid or an error, never a crash.
  const std::string text =
      R"({"pods": [{"metadata": {"name": "a", "uid": "u"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "1.5Gi"}}}]}}]})";
  for (std::size_t n = 0; n < text.size(); ++n) {
    Diagnostics d;
    auto s = nodewarden::policy::parseSnapshotText(text.substr(0, n), d);
    CHECK((s.has_value() || !d.empty()));
  }
}

namespace {

std::string quantities(const nodewarden::policy::ResourceList& list) {
  std::string out;
  for (const auto& [name, q] : list) out += name + "=" + q.toString() + ",";
  return out;
}

std::string strings(const std::map<std::string, std::string>& map) {
  std::string out;
  for (const auto& [k, v] : map) out += k + "=" + v + ",";
  return out;
}

// Everything the model holds, as text, to compare two parses of the same document.
std::string dump(const Snapshot& s) {
  std::ostringstream o;
  for (const auto& n : s.nodes) {
    o << "node " << n.name << " " << strings(n.labels) << n.unschedulable << " cap "
      << quantities(n.capacity) << " alloc " << quantities(n.allocatable);
    for (const auto& t : n.taints) o << " taint " << t.key << "=" << t.value << ":" << t.effect;
    for (const auto& c : n.conditions) o << " cond " << c.type << "=" << c.status;
    o << "\n";
  }
  for (const auto& p : s.pods) {
    o << "pod " << p.key << " " << p.uid << " " << strings(p.labels) << " "
      << strings(p.annotations) << p.terminating << " " << p.nodeName << " " << p.priority << " "
      << p.priorityClassName << " " << int(p.preemptionPolicy) << " " << strings(p.nodeSelector)
      << " " << p.terminationGracePeriodSeconds << " " << quantities(p.overhead) << " " << p.phase
      << " " << p.startTime.value_or(-1) << " " << p.nominatedNodeName << " " << int(p.qos) << " "
      << p.critical;
    for (const auto& t : p.tolerations) {
      o << " tol " << t.key << t.op << t.value << t.effect;
    }
    for (const auto* list : {&p.containers, &p.initContainers}) {
      for (const auto& c : *list) {
        o << " c " << c.name << " " << quantities(c.requests) << " " << quantities(c.limits)
          << c.sidecar;
      }
    }
    for (const auto& [r, v] : p.requests) o << " req " << r << "=" << v;
    for (const auto& v : p.localVolumes) o << " localvol " << v;
    o << "\n";
  }
  for (const auto& c : s.priorityClasses) {
    o << "class " << c.name << " " << c.value << c.globalDefault
      << int(c.preemptionPolicy.value_or(PreemptionPolicy::PreemptLowerPriority)) << "\n";
  }
  for (const auto& b : s.podDisruptionBudgets) {
    o << "pdb " << b.ns << "/" << b.name << " " << b.disruptionsAllowed << " "
      << strings(b.disruptedPods);
    if (b.selector) {
      o << " sel " << strings(b.selector->matchLabels);
      for (const auto& e : b.selector->matchExpressions) {
        o << " expr " << e.key << e.op;
        for (const auto& v : e.values) o << v << ",";
      }
    }
    o << "\n";
  }
  auto opt = [](const std::optional<std::uint64_t>& v) {
    return v ? std::to_string(*v) : std::string("-");
  };
  for (const auto& [name, sum] : s.stats) {
    const auto& n = sum.node;
    o << "stats " << name << " " << opt(n.memoryAvailableBytes) << opt(n.memoryWorkingSetBytes)
      << opt(n.podsMemoryAvailableBytes) << opt(n.podsMemoryWorkingSetBytes)
      << opt(n.nodeFs.availableBytes) << opt(n.nodeFs.capacityBytes) << opt(n.nodeFs.inodesFree)
      << opt(n.nodeFs.inodes) << (n.imageFs ? opt(n.imageFs->availableBytes) : "none")
      << opt(n.maxPid) << opt(n.curProc) << "\n";
    for (const auto& ps : sum.pods) {
      o << " ps " << ps.ns << "/" << ps.name << " " << ps.uid << " "
        << opt(ps.memoryWorkingSetBytes) << opt(ps.cpuUsageNanoCores) << opt(ps.processCount)
        << opt(ps.ephemeralStorageUsedBytes) << opt(ps.ephemeralStorageInodesUsed);
      for (const auto& c : ps.containers) {
        o << " c " << c.name << opt(c.memoryWorkingSetBytes) << opt(c.rootfsUsedBytes)
          << opt(c.logsUsedBytes) << opt(c.rootfsInodesUsed) << opt(c.logsInodesUsed);
      }
      for (const auto& v : ps.volumes)
        o << " v " << v.name << opt(v.usedBytes) << opt(v.inodesUsed);
      o << "\n";
    }
  }
  return o.str();
}

// Parses with the filtering parser (what parseSnapshotText uses) and with a full DOM.
void expectSameModel(const std::string& text) {
  Diagnostics d1, d2;
  auto filtered = nodewarden::policy::parseSnapshotText(text, d1);
  auto json = nodewarden::policy::parseJsonText(text, d2);
  REQUIRE(json.has_value());
  auto full = nodewarden::policy::parseSnapshot(*json, d2);
  REQUIRE_MESSAGE(filtered.has_value(), d1.joined());
  REQUIRE_MESSAGE(full.has_value(), d2.joined());
  // The one piece of user data deliberately dropped: kubectl's copy of the whole object.
  for (auto& pod : full->pods) {
    pod.annotations.erase("kubectl.kubernetes.io/last-applied-configuration");
  }
  CHECK(dump(*filtered) == dump(*full));
  CHECK(dump(*filtered).size() > 200);
}

}  // namespace

TEST_CASE("snapshot: skipping unread members while parsing loses nothing the model reads") {
  std::ifstream in(std::string(NODEWARDEN_SOURCE_ROOT) + "/examples/snapshot.json");
  REQUIRE(in.good());
  std::ostringstream text;
  text << in.rdbuf();
  expectSameModel(text.str());
  // Every field of docs/reference.md §2, with user data whose keys collide with skipped member
  // names.
  expectSameModel(R"({
    "nodes": [{"metadata": {"name": "n", "labels": {"env": "prod", "volumes": "x", "images": "y"}},
               "spec": {"unschedulable": true, "taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]},
               "status": {"capacity": {"cpu": "4", "env": "1"}, "allocatable": {"memory": "1Gi", "example.com/gpu": "2"},
                          "images": [{"names": ["a"], "sizeBytes": 1}], "nodeInfo": {"kernelVersion": "6"},
                          "conditions": [{"type": "DiskPressure", "status": "True"}]}}],
    "pods": {"kind": "PodList", "items": [
      {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z",
                    "deletionTimestamp": "2026-01-02T00:00:00Z",
                    "labels": {"env": "a", "command": "b"},
                    "annotations": {"kubernetes.io/config.source": "file", "ports": "80",
                                    "kubectl.kubernetes.io/last-applied-configuration": "{}"},
                    "managedFields": [{"manager": "kubectl"}], "ownerReferences": [{"name": "rs"}]},
       "spec": {"nodeName": "n", "priority": 5, "priorityClassName": "c", "preemptionPolicy": "Never",
                "nodeSelector": {"env": "prod", "volumes": "z"},
                "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30}],
                "terminationGracePeriodSeconds": 12, "overhead": {"memory": "10Mi"},
                "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}}, {"name": "w", "hostPath": {"path": "/x"}},
                            {"name": "m", "emptyDir": {"medium": "Memory"}}, {"name": "s", "secret": {"secretName": "s"}},
                            {"name": "g", "configMap": {"name": "cm"}}],
                "containers": [{"name": "c1", "env": [{"name": "A"}], "ports": [{"containerPort": 1}],
                                "resources": {"requests": {"cpu": "100m", "env": "1"}, "limits": {"memory": "1Gi"}}}],
                "initContainers": [{"name": "i", "restartPolicy": "Always", "resources": {"requests": {"memory": "5Mi"}}}]},
       "status": {"phase": "Running", "startTime": "2026-01-01T00:00:01Z", "nominatedNodeName": "n2",
                  "qosClass": "Burstable", "containerStatuses": [{"name": "c1"}]}}]},
    "priorityClasses": [{"metadata": {"name": "c"}, "value": 10, "globalDefault": true, "preemptionPolicy": "Never"}],
    "podDisruptionBudgets": [{"metadata": {"name": "b", "namespace": "ns"},
      "spec": {"selector": {"matchLabels": {"env": "a"},
               "matchExpressions": [{"key": "command", "operator": "NotIn", "values": ["x", "y"]}]}},
      "status": {"disruptionsAllowed": 2, "disruptedPods": {"env": "2026-01-01T00:00:00Z"}}}],
    "stats": {"env": {"node": {"memory": {"availableBytes": 1, "workingSetBytes": 2},
                               "fs": {"availableBytes": 3, "capacityBytes": 4, "inodesFree": 5, "inodes": 6},
                               "runtime": {"imageFs": {"availableBytes": 7, "capacityBytes": 8}},
                               "rlimit": {"maxpid": 9, "curproc": 10},
                               "systemContainers": [{"name": "pods", "memory": {"availableBytes": 11, "workingSetBytes": 12}}]},
                      "pods": [{"podRef": {"name": "p", "namespace": "ns", "uid": "u"},
                                "memory": {"workingSetBytes": 13}, "cpu": {"usageNanoCores": 14},
                                "process_stats": {"process_count": 15},
                                "ephemeral-storage": {"usedBytes": 16, "inodesUsed": 17},
                                "volume": [{"name": "v", "usedBytes": 1, "inodesUsed": 2, "time": "x"}], "network": {"rxBytes": 1},
                                "containers": [{"name": "c1", "memory": {"workingSetBytes": 18},
                                                "rootfs": {"usedBytes": 19, "inodesUsed": 21}, "logs": {"usedBytes": 20, "inodesUsed": 22}}]}]}}
  })");
}

TEST_CASE("a pod's metadata.generation is read, through the member filter too; absent: 0") {
  // The agent writes it back as the observedGeneration of an eviction, as the kubelet does.
  auto parse = [](const std::string& text) {
    Diagnostics d;
    auto json = nodewarden::policy::parseKubernetesJsonText(text, d);
    REQUIRE(json.has_value());
    auto pod = nodewarden::policy::parsePod(*json, "pod", d);
    CHECK(d.empty());
    REQUIRE(pod.has_value());
    return *pod;
  };
  CHECK(parse(R"({"metadata": {"name": "p", "uid": "u", "generation": 3}})").generation == 3);
  CHECK(parse(R"({"metadata": {"name": "p", "uid": "u"}})").generation == 0);

  Diagnostics d;
  auto bad = nodewarden::policy::parsePod(
      Json::parse(R"({"metadata": {"name": "p", "generation": "three"}})"), "pod", d);
  CHECK_FALSE(d.empty());
  CHECK(d.joined().find("metadata.generation") != std::string::npos);
}
