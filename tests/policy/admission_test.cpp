// Admission (docs/reference.md §5) and the scheduler's preemption rules (§6): the seed documents'
// scenarios, each admission check, PDB filtering, every pickOneNodeForPreemption tie-break,
// and the incremental victim selection against the naive one.
#include <doctest/doctest.h>

#include <cstdlib>
#include <deque>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "policy/admission.h"
#include "tests/support/policy_objects.h"

using nodewarden::policy::AdmissionDecision;
using nodewarden::policy::ClusterIndex;
using nodewarden::policy::Diagnostics;
using nodewarden::policy::Json;
using nodewarden::policy::Pod;
using nodewarden::policy::Policy;
using nodewarden::policy::PreemptionCandidate;
using nodewarden::policy::Snapshot;
using nodewarden::policy::Verdict;
using nodewarden::testing::podFrom;
using nodewarden::testing::snapshotFrom;

namespace {

std::string slurp(const std::string& relative) {
  std::ifstream in(std::string(NODEWARDEN_SOURCE_ROOT) + "/" + relative);
  REQUIRE_MESSAGE(in.good(), relative);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> keys(const std::vector<const Pod*>& pods) {
  std::vector<std::string> out;
  for (const Pod* p : pods) out.push_back(p->key);
  return out;
}

AdmissionDecision admit(const Snapshot& s, const Pod& pod, const std::string& node,
                        const Policy& policy = Policy::defaults()) {
  static std::deque<ClusterIndex> indexes;
  indexes.push_back(nodewarden::policy::buildClusterIndex(s));
  const auto* info = indexes.back().find(node);
  REQUIRE(info != nullptr);
  return nodewarden::policy::admitPod(pod, *info, s.podDisruptionBudgets, policy);
}

// A node of `cpu` cores and a pod with `cpu` cores of request, as JSON.
std::string node(const std::string& name, int cpu, const std::string& extra = "") {
  return R"({"metadata": {"name": ")" + name + R"(", "labels": {"zone": "a"}}, "spec": {)" + extra +
         R"(}, "status": {"allocatable": {"cpu": ")" + std::to_string(cpu) +
         R"(", "memory": "8Gi", "pods": "110"}}})";
}
// With NODEWARDEN_TEST_POD_LEVEL=1 (the policy/admission_pod_level test) every pod states its
// request at pod level (spec.resources, Kubernetes 1.34+) instead of in its container: the
// seed scenarios must give the same verdicts and victims.
bool podLevelMode() {
  const char* v = std::getenv("NODEWARDEN_TEST_POD_LEVEL");
  return v != nullptr && std::string(v) == "1";
}

std::string pod(const std::string& name, int priority, int cpu, const std::string& nodeName,
                const std::string& extraMeta = "", const std::string& extraSpec = "",
                const std::string& extraStatus = "") {
  const std::string requests = R"({"requests": {"cpu": ")" + std::to_string(cpu) + R"("}})";
  return R"({"metadata": {"name": ")" + name + R"(", "namespace": "ns", "uid": "uid-)" + name +
         "\"" + extraMeta + R"(}, "spec": {"priority": )" + std::to_string(priority) +
         (nodeName.empty() ? "" : R"(, "nodeName": ")" + nodeName + "\"") + extraSpec +
         (podLevelMode() ? R"(, "resources": )" + requests + R"(, "containers": [{"name": "c"}]})"
                         : R"(, "containers": [{"name": "c", "resources": )" + requests + "}]}") +
         R"(, "status": {"phase": ")" + (nodeName.empty() ? "Pending" : "Running") + "\"" +
         extraStatus + "}}";
}

}  // namespace

TEST_CASE("seed: capacity 10, only the priority-2 pod is preempted") {
  const Snapshot& s = snapshotFrom(slurp("examples/preemption/capacity-10.json"));
  Pod p = podFrom(slurp("examples/preemption/capacity-10-pod.json"), s);
  AdmissionDecision d = admit(s, p, "node-1");
  CHECK(d.verdict == Verdict::Preempt);
  CHECK(d.reason == "OutOfcpu");
  CHECK(keys(d.victims) == std::vector<std::string>{"default/p2"});
  CHECK(d.numPDBViolations == 0);
}

TEST_CASE("seed example 1: a nominated higher-priority pod C blocks lower pod D") {
  const Snapshot& s = snapshotFrom(slurp("examples/preemption/example-1.json"));
  Pod d = podFrom(slurp("examples/preemption/example-1-pod.json"), s);
  AdmissionDecision r = admit(s, d, "node-1");
  CHECK(r.verdict == Verdict::Reject);
  CHECK(r.reason == "OutOfcpu");
  // A (5, terminating) and C (10, nominated, priority 1000 >= 50) both count.
  CHECK(r.message.rfind(
            "Node didn't have enough resource: cpu, requested: 2000, used: 15000, capacity: 10000",
            0) == 0);
  CHECK(r.nominatedPodsToClear.empty());
}

TEST_CASE("seed example 4: F waits for the terminating pods and C's nomination is cleared") {
  const Snapshot& s = snapshotFrom(slurp("examples/preemption/example-4.json"));
  Pod f = podFrom(slurp("examples/preemption/example-4-pod.json"), s);
  AdmissionDecision r = admit(s, f, "node-1");
  CHECK(r.verdict == Verdict::Wait);
  CHECK(keys(r.nominatedPodsToClear) == std::vector<std::string>{"default/c"});
  CHECK(r.victims.empty());
}

TEST_CASE("seed examples 2 and 3 as cluster preemption") {
  const Snapshot& s2 = snapshotFrom(slurp("examples/preemption/example-2.json"));
  Pod c = podFrom(slurp("examples/preemption/example-2-pod.json"), s2);
  auto index2 = nodewarden::policy::buildClusterIndex(s2);
  auto r2 =
      nodewarden::policy::preemptCluster(c, index2, s2.podDisruptionBudgets, Policy::defaults());
  REQUIRE(r2.node != nullptr);
  CHECK(r2.node->name == "node-1");  // E (2000) on node-2 is not a victim for C (1000)
  CHECK(keys(r2.victims) == std::vector<std::string>{"default/a", "default/b"});
  CHECK(r2.candidates.empty());

  const Snapshot& s3 = snapshotFrom(slurp("examples/preemption/example-3.json"));
  Pod d = podFrom(slurp("examples/preemption/example-3-pod.json"), s3);
  auto index3 = nodewarden::policy::buildClusterIndex(s3);
  auto r3 =
      nodewarden::policy::preemptCluster(d, index3, s3.podDisruptionBudgets, Policy::defaults());
  REQUIRE(r3.node != nullptr);
  CHECK(r3.node->name == "node-2");  // D fits beside E at once
  CHECK(r3.victims.empty());
}

TEST_CASE("seed 004: the green pod is preempted, not the PDB-protected blue one") {
  const Snapshot& s = snapshotFrom(slurp("examples/preemption/pdb-green-not-blue.json"));
  Pod orange = podFrom(slurp("examples/preemption/pdb-green-not-blue-pod.json"), s);
  CHECK(orange.priority == 30000);
  AdmissionDecision r = admit(s, orange, "node-1");
  CHECK(r.verdict == Verdict::Preempt);
  CHECK(keys(r.victims) == std::vector<std::string>{"shop/green-0"});
  CHECK(r.numPDBViolations == 0);
  auto index = nodewarden::policy::buildClusterIndex(s);
  auto cluster =
      nodewarden::policy::preemptCluster(orange, index, s.podDisruptionBudgets, Policy::defaults());
  REQUIRE(cluster.node != nullptr);
  // Both nodes lose one cat-2 pod; node-2's started later (rule 5).
  CHECK(cluster.node->name == "node-2");
  CHECK(keys(cluster.victims) == std::vector<std::string>{"shop/green-1"});
  REQUIRE(cluster.candidates.size() == 1);
  CHECK(cluster.candidates[0].node->name == "node-1");
}

TEST_CASE("admission: each check in order, with the kubelet's reasons") {
  const std::string classes = R"("priorityClasses": [{"metadata": {"name": "low"}, "value": 1}])";
  SUBCASE("unknown priority class") {
    const Snapshot& s = snapshotFrom("{" + classes + R"(, "nodes": [)" + node("n", 4) + "]}");
    Pod p = podFrom(R"({"metadata": {"name": "p"}, "spec": {"priorityClassName": "gold"}})", s);
    auto r = admit(s, p, "n");
    CHECK(r.verdict == Verdict::Reject);
    CHECK(r.reason == "PriorityClassNotFound");
    CHECK(r.message == "no PriorityClass with name gold was found");
  }
  SUBCASE("memory pressure rejects BestEffort pods unless they tolerate it") {
    const Snapshot& s = snapshotFrom(
        R"({"nodes": [{"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4", "pods": "10"},
            "conditions": [{"type": "MemoryPressure", "status": "True"}, {"type": "Ready", "status": "True"}]}}]})");
    Pod bestEffort =
        podFrom(R"({"metadata": {"name": "be"}, "spec": {"containers": [{"name": "c"}]}})", s);
    auto r = admit(s, bestEffort, "n");
    CHECK(r.verdict == Verdict::Reject);
    CHECK(r.reason == "Evicted");
    CHECK(r.message == "The node had condition: [MemoryPressure]. ");
    Pod tolerating = podFrom(R"({"metadata": {"name": "t"}, "spec": {"containers": [{"name": "c"}],
        "tolerations": [{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}]}})",
                             s);
    CHECK(admit(s, tolerating, "n").verdict == Verdict::Admit);
    Pod burstable = podFrom(pod("b", 0, 1, ""), s);
    CHECK(admit(s, burstable, "n").verdict == Verdict::Admit);
  }
  SUBCASE("any other condition rejects every non-critical pod") {
    const Snapshot& s = snapshotFrom(
        R"({"nodes": [{"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4", "pods": "10"},
            "conditions": [{"type": "MemoryPressure", "status": "True"}, {"type": "DiskPressure", "status": "True"}]}}]})");
    auto r = admit(s, podFrom(pod("b", 0, 1, ""), s), "n");
    CHECK(r.reason == "Evicted");
    CHECK(r.message == "The node had condition: [MemoryPressure DiskPressure]. ");
    Pod critical = podFrom(pod("k", 2000000000, 1, ""), s);
    CHECK(admit(s, critical, "n").verdict == Verdict::Admit);
  }
  SUBCASE("node selector and NoExecute taints") {
    const Snapshot& s = snapshotFrom(
        R"({"nodes": [)" +
        node("n", 4, R"("taints": [{"key": "dedicated", "value": "gpu", "effect": "NoExecute"},
                                                                {"key": "soft", "effect": "NoSchedule"}])") +
        "]}");
    auto selector =
        admit(s, podFrom(pod("p", 0, 1, "", "", R"(, "nodeSelector": {"zone": "b"})"), s), "n");
    CHECK(selector.reason == "NodeAffinity");
    auto taint = admit(s, podFrom(pod("p", 0, 1, ""), s), "n");
    CHECK(taint.reason == "TaintToleration");
    CHECK(taint.message ==
          "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate");
    // NoSchedule taints are the scheduler's business, not the kubelet's.
    auto tolerated = admit(
        s,
        podFrom(
            pod("p", 0, 1, "", "",
                R"(, "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu"}])"),
            s),
        "n");
    CHECK(tolerated.verdict == Verdict::Admit);
  }
  SUBCASE("resource fit: pods, cpu, extended resources; Never does not preempt") {
    const Snapshot& s = snapshotFrom(
        R"({"nodes": [{"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4", "memory": "1Gi", "pods": "2", "example.com/gpu": "1"}}}],
            "pods": [)" +
        pod("a", 0, 1, "n") + "," + pod("b", 0, 2, "n") + "]}");
    auto pods = admit(s, podFrom(pod("p", 5, 1, ""), s), "n");
    CHECK(pods.reason == "OutOfpods");
    CHECK(pods.message.rfind(
              "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2", 0) ==
          0);
    CHECK(pods.verdict == Verdict::Preempt);
    const Snapshot& s2 = snapshotFrom(
        R"({"nodes": [{"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}}],
            "pods": [)" +
        pod("a", 0, 3, "n") + "]}");
    auto never =
        admit(s2, podFrom(pod("p", 5, 2, "", "", R"(, "preemptionPolicy": "Never")"), s2), "n");
    CHECK(never.verdict == Verdict::Reject);
    CHECK(never.reason == "OutOfcpu");
    CHECK(never.message ==
          "Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000");
    CHECK(never.victims.empty());
    auto gpu = admit(
        s2,
        podFrom(
            R"({"metadata": {"name": "g"}, "spec": {"priority": 5, "containers": [{"name": "c", "resources": {"limits": {"example.com/gpu": "1"}}}]}})",
            s2),
        "n");
    CHECK(gpu.reason == "OutOfexample.com/gpu");
    CHECK(gpu.verdict == Verdict::Reject);  // no pod to preempt frees a GPU the node lacks
  }
  SUBCASE("equal priority is never a victim; critical pods only for critical preemptors") {
    const Snapshot& s = snapshotFrom(
        R"({"nodes": [)" + node("n", 4) + R"(], "pods": [)" + pod("same", 5, 2, "n") + "," +
        pod("static", 0, 2, "n", R"(, "annotations": {"kubernetes.io/config.source": "file"})") +
        "]}");
    auto r = admit(s, podFrom(pod("p", 5, 2, ""), s), "n");
    CHECK(r.verdict == Verdict::Reject);
    auto critical = admit(s, podFrom(pod("k", 2000001000, 2, ""), s), "n");
    CHECK(critical.verdict == Verdict::Preempt);
    CHECK(keys(critical.victims) == std::vector<std::string>{"ns/static"});
  }
}

TEST_CASE("filterPodsWithPDBViolation: per-budget counters, namespaces, disruptedPods") {
  const Snapshot& s = snapshotFrom(
      R"({"pods": [)" + pod("a1", 0, 1, "n", R"(, "labels": {"app": "a"})") + "," +
      pod("a2", 0, 1, "n", R"(, "labels": {"app": "a"})") + "," +
      pod("a3", 0, 1, "n", R"(, "labels": {"app": "a"})") + "," + pod("nolabels", 0, 1, "n") + R"(],
      "podDisruptionBudgets": [
        {"metadata": {"name": "a", "namespace": "ns"}, "spec": {"selector": {"matchLabels": {"app": "a"}}},
         "status": {"disruptionsAllowed": 1, "disruptedPods": {"a3": "2026-01-01T00:00:00Z"}}},
        {"metadata": {"name": "other-ns", "namespace": "x"}, "spec": {"selector": {"matchLabels": {"app": "a"}}},
         "status": {"disruptionsAllowed": 0}},
        {"metadata": {"name": "empty", "namespace": "ns"}, "spec": {"selector": {}},
         "status": {"disruptionsAllowed": 0}}]})");
  std::vector<const Pod*> pods;
  for (const auto& p : s.pods) pods.push_back(&p);
  std::vector<const Pod*> violating, nonViolating;
  nodewarden::policy::filterPodsWithPdbViolation(pods, s.podDisruptionBudgets, violating,
                                                 nonViolating);
  // a1 uses the one allowed disruption, a2 violates, a3 is already disrupted, an empty
  // selector and another namespace's budget match nothing, a pod without labels nothing.
  CHECK(keys(violating) == std::vector<std::string>{"ns/a2"});
  CHECK(keys(nonViolating) == std::vector<std::string>{"ns/a1", "ns/a3", "ns/nolabels"});
}

TEST_CASE("pickOneNodeForPreemption: each tie-break rule in order") {
  Snapshot owner;
  auto p = [&](const std::string& name, int priority, long long start) {
    Pod x;
    x.name = name;
    x.ns = "ns";
    x.key = "ns/" + name;
    x.priority = priority;
    x.startTime = start;
    owner.pods.push_back(x);
  };
  owner.pods.reserve(32);
  owner.nodes.resize(6);
  for (int i = 0; i < 6; ++i) owner.nodes[std::size_t(i)].name = "node-" + std::to_string(i);
  auto candidate = [&](int node, std::vector<std::pair<int, long long>> victims, int violations) {
    PreemptionCandidate c;
    c.node = &owner.nodes[std::size_t(node)];
    for (auto [priority, start] : victims) {
      p("v" + std::to_string(owner.pods.size()), priority, start);
      c.victims.push_back(&owner.pods.back());
    }
    c.numPDBViolations = violations;
    return c;
  };
  using nodewarden::policy::pickOneNodeForPreemption;
  // 1. fewest PDB violations
  CHECK(pickOneNodeForPreemption({candidate(0, {{1, 0}}, 1), candidate(1, {{9, 0}, {9, 0}}, 0)}) ==
        1);
  // 2. lowest highest-priority victim
  CHECK(pickOneNodeForPreemption({candidate(0, {{5, 0}}, 0), candidate(1, {{3, 0}, {3, 0}}, 0)}) ==
        1);
  // 3. smallest sum of (priority + 2^31): same top victim, 4+4 against 4+0
  CHECK(pickOneNodeForPreemption(
            {candidate(0, {{4, 0}, {4, 0}}, 0), candidate(1, {{4, 0}, {0, 0}}, 0)}) == 1);
  // 4. fewest victims: a victim at the lowest priority adds 0 to the offset sum, so the sums
  //    tie and the count decides
  CHECK(pickOneNodeForPreemption(
            {candidate(0, {{4, 0}, {-2147483647 - 1, 0}}, 0), candidate(1, {{4, 0}}, 0)}) == 1);
  // 5. latest start time among the highest-priority victims
  CHECK(pickOneNodeForPreemption({candidate(0, {{4, 100}}, 0), candidate(1, {{4, 200}}, 0)}) == 1);
  // 6. the node name
  CHECK(pickOneNodeForPreemption({candidate(3, {{4, 100}}, 0), candidate(2, {{4, 100}}, 0)}) == 1);
}

TEST_CASE("cluster preemption: Never, a terminating pod on the nominated node, no candidates") {
  const std::string nodes = "[" + node("n1", 2) + "," + node("n2", 2) + "]";
  const Snapshot& s = snapshotFrom(
      R"({"nodes": )" + nodes + R"(, "pods": [)" + pod("low", 0, 2, "n1") + "," +
      pod("leaving", 0, 2, "n2", R"(, "deletionTimestamp": "2026-01-01T00:00:00Z")") + "]}");
  auto index = nodewarden::policy::buildClusterIndex(s);
  auto run = [&](const std::string& podJson) {
    return nodewarden::policy::preemptCluster(podFrom(podJson, s), index, s.podDisruptionBudgets,
                                              Policy::defaults());
  };
  CHECK(run(pod("p", 5, 2, "", "", R"(, "preemptionPolicy": "Never")")).node == nullptr);
  CHECK(run(pod("p", 5, 2, "", "", "", R"(, "nominatedNodeName": "n2")")).node == nullptr);
  auto ok = run(pod("p", 5, 2, ""));
  REQUIRE(ok.node != nullptr);
  CHECK(ok.node->name == "n1");
  CHECK(keys(ok.victims) == std::vector<std::string>{"ns/low"});
  CHECK(run(pod("p", 5, 3, "")).node == nullptr);  // too big for any node
}

TEST_CASE("victim selection: incremental and naive agree on random nodes") {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 200; ++round) {
    std::string pods;
    int count = int(rng() % 12) + 1;
    for (int i = 0; i < count; ++i) {
      std::string labels = R"(, "labels": {"app": ")" + std::string(rng() % 2 ? "a" : "b") + "\"}";
      std::string start =
          R"(, "startTime": "2026-01-01T00:0)" + std::to_string(rng() % 10) + ":00Z\"";
      pods += (i ? "," : "") + pod("p" + std::to_string(i), int(rng() % 5), int(rng() % 3) + 1, "n",
                                   labels, "", start);
    }
    const Snapshot& s =
        snapshotFrom(R"({"nodes": [)" + node("n", 8) + R"(], "pods": [)" + pods + R"(],
            "podDisruptionBudgets": [{"metadata": {"name": "a", "namespace": "ns"},
              "spec": {"selector": {"matchLabels": {"app": "a"}}}, "status": {"disruptionsAllowed": 1}}]})");
    auto index = nodewarden::policy::buildClusterIndex(s);
    Pod incoming = podFrom(pod("in", 3, int(rng() % 6) + 1, ""), s);
    auto fast = nodewarden::policy::selectVictimsOnNode(incoming, *index.find("n"),
                                                        s.podDisruptionBudgets, Policy::defaults());
    auto naive = nodewarden::policy::selectVictimsOnNodeNaive(
        incoming, *index.find("n"), s.podDisruptionBudgets, Policy::defaults());
    CAPTURE(round);
    CHECK(fast.fits == naive.fits);
    CHECK(keys(fast.victims) == keys(naive.victims));
    CHECK(fast.numPDBViolations == naive.numPDBViolations);
  }
}

TEST_CASE("victim selection: the incremental selection's shortcuts agree with the naive one") {
  // Pods of app "a" (one budget allows one disruption) started at the same second, on a node
  // of `nodeCpu` cores and `slots` pod slots; the incoming pod (priority 3) asks for
  // `incomingCpu`.
  auto withCpu = [](std::string json, const std::string& cpu) {
    return json.replace(json.find(R"("cpu": "1")"), 10, R"("cpu": ")" + cpu + "\"");
  };
  auto member = [&](const std::string& name, int priority, const std::string& cpu) {
    return withCpu(pod(name, priority, 1, "n", R"(, "labels": {"app": "a"})", "",
                       R"(, "startTime": "2026-01-01T00:00:00Z")"),
                   cpu);
  };
  auto select = [&](const std::string& nodeCpu, int slots, const std::string& incomingCpu,
                    const std::vector<std::string>& pods) {
    std::string list;
    for (const auto& p : pods) list += (list.empty() ? "" : ",") + p;
    const Snapshot& s = snapshotFrom(
        R"({"nodes": [{"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": ")" + nodeCpu +
        R"(", "memory": "8Gi", "pods": ")" + std::to_string(slots) + R"("}}}], "pods": [)" + list +
        R"(],
            "podDisruptionBudgets": [{"metadata": {"name": "a", "namespace": "ns"},
              "spec": {"selector": {"matchLabels": {"app": "a"}}}, "status": {"disruptionsAllowed": 1}}]})");
    auto index = nodewarden::policy::buildClusterIndex(s);
    Pod incoming = podFrom(withCpu(pod("in", 3, 1, ""), incomingCpu), s);
    auto fast = nodewarden::policy::selectVictimsOnNode(incoming, *index.find("n"),
                                                        s.podDisruptionBudgets, Policy::defaults());
    auto naive = nodewarden::policy::selectVictimsOnNodeNaive(
        incoming, *index.find("n"), s.podDisruptionBudgets, Policy::defaults());
    CHECK(fast.fits == naive.fits);
    CHECK(fast.victims == naive.victims);  // the same Pod objects, in the same order
    CHECK(fast.numPDBViolations == naive.numPDBViolations);
    return fast;
  };
  SUBCASE("two pods with the same key, priority and start: moreImportant cannot order them") {
    // Which twins go depends on the order std::sort leaves them in (past 16 elements it
    // moves equal ones around).
    std::vector<std::string> pods = {member("p0", 0, "1")};
    for (int i = 0; i < 20; ++i) pods.push_back(member("twin", 1, i % 2 ? "1" : "2"));
    auto fast = select("31", 30, "2", pods);
    CHECK(fast.fits);
    CHECK(fast.victims.size() == 2);
  }
  SUBCASE("requests beyond 2^40: the running sums are kept in 128 bits") {
    auto fast = select("9000000000000000", 5, "4000000000000000",
                       {member("p0", 0, "3000000000000000"), member("p1", 1, "3000000000000000"),
                        member("p2", 2, "1")});
    CHECK(fast.fits);
    CHECK(fast.victims.size() == 1);
  }
  SUBCASE("room beyond 2^62 on cpu: the pod slots decide") {
    auto fast = select("9000000000000000", 5, "1",
                       {member("p0", 0, "1"), member("p1", 1, "1"), member("p2", 2, "1"),
                        member("p3", 2, "1"), member("p4", 2, "1")});
    CHECK(fast.fits);
    CHECK(fast.victims.size() == 1);
  }
}
