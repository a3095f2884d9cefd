// Upstream Kubernetes test cases, restated as facts and run through nodewarden's admission
// (docs/reference.md §5) and cluster preemption (§6). Sources: the upstream tests named on
// each case (kubernetes/kubernetes pkg/scheduler/framework/preemption, plugins/
// defaultpreemption, their _test.go files). No upstream code is copied: each case is rebuilt
// from its inputs and its expected outcome, as snapshots in the kubectl JSON of §2.
//
// Conventions
// - Priorities as upstream: neg = -100, low = 0, mid = 100, high = 1000, veryHigh = 10000.
// - TestDryRunPreemption / TestSelectBestCandidate / TestPreempt sizes (cpu, memory bytes):
//   small 100m/100, medium 200m/200, large 300m/300, veryLarge 500m/500, on nodes of
//   500m / 500 / 32 pods. Upstream start times epochN (N ns after the epoch) become N seconds
//   after 2026-01-01T00:00:00Z: only their order matters.
// - Upstream pods and PDBs there have namespace ""; here both default to "default", so budgets
//   still select the pods.
// - Where docs/reference.md deliberately differs from upstream, its behaviour is asserted and
//   the comment says so ("REFERENCE").
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "policy/admission.h"
#include "tests/support/policy_objects.h"

namespace {

using nodewarden::policy::AdmissionDecision;
using nodewarden::policy::ClusterIndex;
using nodewarden::policy::Diagnostics;
using nodewarden::policy::Pod;
using nodewarden::policy::Policy;
using nodewarden::policy::PreemptionCandidate;
using nodewarden::policy::PreemptionDecision;
using nodewarden::policy::Snapshot;
using nodewarden::policy::Verdict;
using nodewarden::policy::VictimSelection;
using nodewarden::testing::podFrom;
using nodewarden::testing::snapshotFrom;

constexpr int kNeg = -100;
constexpr int kLow = 0;
constexpr int kMid = 100;
constexpr int kHigh = 1000;
constexpr int kVeryHigh = 10000;

// Container requests of TestDryRunPreemption / TestSelectBestCandidate / TestPreempt.
const std::string kSmall = R"("cpu": "100m", "memory": "100")";
const std::string kMedium = R"("cpu": "200m", "memory": "200")";
const std::string kLarge = R"("cpu": "300m", "memory": "300")";
const std::string kVeryLarge = R"("cpu": "500m", "memory": "500")";

// ---------------------------------------------------------------------------------------------
// JSON builders.

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string quoted(const std::string& s) {
  return "\"" + s + "\"";
}

// NODEWARDEN_TEST_POD_LEVEL=1: the policy/preemption_cases_pod_level test (see PodJ::json).
bool podLevelMode() {
  const char* v = std::getenv("NODEWARDEN_TEST_POD_LEVEL");
  return v != nullptr && std::string(v) == "1";
}

// A start or deletion time: `second` seconds after 2026-01-01T00:00:00Z (0..59).
std::string timeAt(int second) {
  std::string ss = std::to_string(second);
  if (ss.size() < 2) ss = "0" + ss;
  return "2026-01-01T00:00:" + ss + "Z";
}

// A Pod object as kubectl prints it, built member by member.
class PodJ {
 public:
  explicit PodJ(std::string name) : name_(std::move(name)) {}
  PodJ& prio(int value) {
    priority_ = value;
    return *this;
  }
  PodJ& on(const std::string& node) {
    node_ = node;
    return *this;
  }
  // One container with these request members (and limit members).
  PodJ& c(const std::string& requests, const std::string& limits = "") {
    containers_.push_back(container("c" + std::to_string(containers_.size()), requests, limits));
    raw_.emplace_back(requests, limits);
    return *this;
  }
  PodJ& init(const std::string& requests) {
    inits_.push_back(container("i" + std::to_string(inits_.size()), requests, ""));
    return *this;
  }
  PodJ& overhead(const std::string& members) {
    spec_.push_back(R"("overhead": {)" + members + "}");
    return *this;
  }
  PodJ& label(const std::string& key, const std::string& value) {
    labels_.push_back(quoted(key) + ": " + quoted(value));
    return *this;
  }
  PodJ& startedAt(int second) {
    start_ = timeAt(second);
    return *this;
  }
  PodJ& startedAt(const std::string& rfc3339) {
    start_ = rfc3339;
    return *this;
  }
  PodJ& terminating() {
    meta_.push_back(R"("deletionTimestamp": ")" + timeAt(59) + "\"");
    return *this;
  }
  PodJ& nominatedTo(const std::string& node) {
    nominated_ = node;
    return *this;
  }
  PodJ& never() {
    spec_.push_back(R"("preemptionPolicy": "Never")");
    return *this;
  }
  PodJ& staticPod() {
    meta_.push_back(R"("annotations": {"kubernetes.io/config.source": "file"})");
    return *this;
  }
  PodJ& spec(const std::string& member) {
    spec_.push_back(member);
    return *this;
  }

  std::string json() const {
    std::vector<std::string> meta{R"("name": )" + quoted(name_),
                                  R"("uid": )" + quoted("uid-" + name_)};
    if (!labels_.empty()) meta.push_back(R"("labels": {)" + joined(labels_) + "}");
    for (const auto& m : meta_) meta.push_back(m);
    std::vector<std::string> spec;
    if (priority_) spec.push_back(R"("priority": )" + std::to_string(*priority_));
    if (!node_.empty()) spec.push_back(R"("nodeName": )" + quoted(node_));
    if (podLevelMode() && raw_.size() == 1 && inits_.empty()) {
      // The seed and upstream scenarios again with the one container's cpu and memory stated
      // at pod level (spec.resources, Kubernetes 1.34+): the same decisions must follow.
      auto [podLevel, rest] = splitPodLevel(raw_[0].first);
      auto [podLimits, restLimits] = splitPodLevel(raw_[0].second);
      std::vector<std::string> stanza;
      if (!podLevel.empty()) stanza.push_back(R"("requests": {)" + podLevel + "}");
      if (!podLimits.empty()) stanza.push_back(R"("limits": {)" + podLimits + "}");
      if (!stanza.empty()) spec.push_back(R"("resources": {)" + joined(stanza) + "}");
      spec.push_back(R"("containers": [)" + container("c0", rest, restLimits) + "]");
    } else {
      spec.push_back(
          R"("containers": [)" +
          (containers_.empty() ? std::string(R"({"name": "c0"})") : joined(containers_)) + "]");
    }
    if (!inits_.empty()) spec.push_back(R"("initContainers": [)" + joined(inits_) + "]");
    for (const auto& s : spec_) spec.push_back(s);
    std::vector<std::string> status{R"("phase": )" + quoted(node_.empty() ? "Pending" : "Running")};
    if (!start_.empty()) status.push_back(R"("startTime": )" + quoted(start_));
    if (!nominated_.empty()) status.push_back(R"("nominatedNodeName": )" + quoted(nominated_));
    return R"({"metadata": {)" + joined(meta) + R"(}, "spec": {)" + joined(spec) +
           R"(}, "status": {)" + joined(status) + "}}";
  }
  operator std::string() const { return json(); }  // NOLINT: lets pods sit in string lists

 private:
  static std::string container(const std::string& name, const std::string& requests,
                               const std::string& limits) {
    std::vector<std::string> resources;
    if (!requests.empty()) resources.push_back(R"("requests": {)" + requests + "}");
    if (!limits.empty()) resources.push_back(R"("limits": {)" + limits + "}");
    return R"({"name": )" + quoted(name) + R"(, "resources": {)" + joined(resources) + "}}";
  }

  // Splits JSON members into the pod-level ones (cpu, memory, hugepages-*) and the rest.
  static std::pair<std::string, std::string> splitPodLevel(const std::string& members) {
    std::vector<std::string> podLevel, rest;
    Diagnostics d;
    auto json = nodewarden::policy::parseJsonText("{" + members + "}", d);
    REQUIRE(json.has_value());
    for (auto it = json->begin(); it != json->end(); ++it) {
      const std::string member = quoted(it.key()) + ": " + it.value().dump();
      const bool level =
          it.key() == "cpu" || it.key() == "memory" || it.key().rfind("hugepages-", 0) == 0;
      (level ? podLevel : rest).push_back(member);
    }
    return {joined(podLevel), joined(rest)};
  }

  std::vector<std::pair<std::string, std::string>> raw_;  // each container's requests, limits
  std::string name_;
  std::optional<int> priority_;
  std::string node_;
  std::string start_;
  std::string nominated_;
  std::vector<std::string> labels_;
  std::vector<std::string> containers_;
  std::vector<std::string> inits_;
  std::vector<std::string> meta_;
  std::vector<std::string> spec_;
};

// A Node whose capacity and allocatable are both `resources` (JSON members), as the upstream
// tests' MakeNode().Capacity(...) does.
std::string nodeJ(const std::string& name, const std::string& resources,
                  const std::string& specMembers = "", const std::string& extraStatus = "",
                  const std::string& labels = "") {
  return R"({"metadata": {"name": )" + quoted(name) + R"(, "labels": {)" + labels +
         R"(}}, "spec": {)" + specMembers + R"(}, "status": {"capacity": {)" + resources +
         R"(}, "allocatable": {)" + resources + "}" + extraStatus + "}}";
}

// The DPT-new node: 500m cpu, 500 bytes of memory, 32 pods.
std::string node500(const std::string& name) {
  return nodeJ(name, R"("cpu": "500m", "memory": "500", "pods": "32")");
}

// A PodDisruptionBudget selecting `matchLabels`, with its status.
std::string pdbJ(const std::string& name, const std::string& matchLabels, std::int64_t allowed,
                 const std::vector<std::string>& disrupted = {}) {
  std::vector<std::string> d;
  for (const auto& pod : disrupted) d.push_back(quoted(pod) + ": " + quoted(timeAt(30)));
  return R"({"metadata": {"name": )" + quoted(name) +
         R"(}, "spec": {"selector": {"matchLabels": {)" + matchLabels +
         R"(}}}, "status": {"disruptionsAllowed": )" + std::to_string(allowed) +
         R"(, "disruptedPods": {)" + joined(d) + "}}}";
}

std::string snapJ(const std::vector<std::string>& nodes, const std::vector<std::string>& pods,
                  const std::vector<std::string>& pdbs = {}) {
  return R"({"nodes": [)" + joined(nodes) + R"(], "pods": [)" + joined(pods) +
         R"(], "podDisruptionBudgets": [)" + joined(pdbs) + "]}";
}

// ---------------------------------------------------------------------------------------------
// Running the decisions.

const ClusterIndex& indexOf(const Snapshot& s) {
  static std::deque<ClusterIndex> indexes;
  indexes.push_back(nodewarden::policy::buildClusterIndex(s));
  return indexes.back();
}

AdmissionDecision admit(const Snapshot& s, const Pod& p, const std::string& node) {
  const auto* info = indexOf(s).find(node);
  REQUIRE(info != nullptr);
  return nodewarden::policy::admitPod(p, *info, s.podDisruptionBudgets, Policy::defaults());
}

VictimSelection victimsOn(const Snapshot& s, const Pod& p, const std::string& node) {
  const auto* info = indexOf(s).find(node);
  REQUIRE(info != nullptr);
  return nodewarden::policy::selectVictimsOnNode(p, *info, s.podDisruptionBudgets,
                                                 Policy::defaults());
}

PreemptionDecision preempt(const Snapshot& s, const Pod& p) {
  return nodewarden::policy::preemptCluster(p, indexOf(s), s.podDisruptionBudgets,
                                            Policy::defaults());
}

// Pod names in the given order.
std::string ordered(const std::vector<const Pod*>& pods) {
  std::string out;
  for (const Pod* p : pods) out += (out.empty() ? "" : ",") + p->name;
  return out;
}

// Pod names sorted, as "{a,b}".
std::string nameSet(const std::vector<const Pod*>& pods) {
  std::vector<std::string> names;
  for (const Pod* p : pods) names.push_back(p->name);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return "{" + out + "}";
}

// "{p1,p2} v1" for a node that is a candidate, "no fit" otherwise.
std::string describe(const VictimSelection& s) {
  if (!s.fits) return "no fit";
  return nameSet(s.victims) + " v" + std::to_string(s.numPDBViolations);
}

// "node1 {p1} v0 | others: node2 {p2} v0, …" or "none".
std::string describe(const PreemptionDecision& d) {
  if (d.node == nullptr) return "none";
  std::string out = d.node->name + " " + nameSet(d.victims) + " v" +
                    std::to_string(d.numPDBViolations) + " | others:";
  for (const auto& c : d.candidates) {
    out += " " + c.node->name + " " + nameSet(c.victims) + " v" +
           std::to_string(c.numPDBViolations) + ";";
  }
  return out;
}

// The kubelet's InsufficientResourceError text. Our message may append a clause after it.
std::string insufficient(const std::string& resource, std::int64_t requested, std::int64_t used,
                         std::int64_t capacity) {
  return "Node didn't have enough resource: " + resource +
         ", requested: " + std::to_string(requested) + ", used: " + std::to_string(used) +
         ", capacity: " + std::to_string(capacity);
}

bool startsWith(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

}  // namespace

// =============================================================================================
// 1. TestDryRunPreemption (default_preemption_test.go, newest): victims per node.
// Rows with custom filter plugins, inter-pod anti-affinity or topology spread (1-3, 9-11) are
// outside nodewarden's model (docs/reference.md §2 reads no affinity or spread) and are not
// restated.

TEST_CASE(
    "scheduler: TestDryRunPreemption - a pod that fits on both nodes when lower priority pods "
    "are preempted") {
  const Snapshot& s = snapshotFrom(snapJ(
      {node500("node1"), node500("node2")},
      {PodJ("p1").prio(kMid).c(kLarge).on("node1"), PodJ("p2").prio(kMid).c(kLarge).on("node2")}));
  Pod p = podFrom(PodJ("p").prio(kHigh).c(kLarge), s);
  CHECK(describe(victimsOn(s, p, "node1")) == "{p1} v0");
  CHECK(describe(victimsOn(s, p, "node2")) == "{p2} v0");
  // Both are candidates; upstream picks either (random tie). docs/reference.md §6.4 breaks the full
  // tie by node name, ascending.
  CHECK(describe(preempt(s, p)) == "node1 {p1} v0 | others: node2 {p2} v0;");
}

TEST_CASE(
    "scheduler: TestDryRunPreemption - a pod that would fit on the nodes, but other pods "
    "running are higher priority, no preemption would happen") {
  const Snapshot& s = snapshotFrom(snapJ(
      {node500("node1"), node500("node2")},
      {PodJ("p1").prio(kMid).c(kLarge).on("node1"), PodJ("p2").prio(kMid).c(kLarge).on("node2")}));
  Pod p = podFrom(PodJ("p").prio(kLow).c(kLarge), s);
  CHECK(describe(victimsOn(s, p, "node1")) == "no fit");
  CHECK(describe(victimsOn(s, p, "node2")) == "no fit");
  CHECK(describe(preempt(s, p)) == "none");
}

TEST_CASE(
    "scheduler: TestDryRunPreemption - medium priority pod is preempted, but lower priority one "
    "stays as it is small") {
  const Snapshot& s = snapshotFrom(snapJ(
      {node500("node1"), node500("node2")},
      {PodJ("p1.1").prio(kLow).c(kSmall).on("node1"), PodJ("p1.2").prio(kMid).c(kLarge).on("node1"),
       PodJ("p2").prio(kMid).c(kLarge).on("node2")}));
  Pod p = podFrom(PodJ("p").prio(kHigh).c(kLarge), s);
  // p1.2 is reprieved first (300 + 300 > 500: victim); p1.1 then fits (100 + 300).
  CHECK(describe(victimsOn(s, p, "node1")) == "{p1.2} v0");
  CHECK(describe(victimsOn(s, p, "node2")) == "{p2} v0");
}

TEST_CASE("scheduler: TestDryRunPreemption - mixed priority pods are preempted") {
  const Snapshot& s = snapshotFrom(snapJ(
      {node500("node1"), node500("node2")},
      {PodJ("p1.1").prio(kMid).c(kSmall).on("node1"), PodJ("p1.2").prio(kLow).c(kSmall).on("node1"),
       PodJ("p1.3").prio(kMid).c(kMedium).on("node1"),
       PodJ("p1.4").prio(kHigh).c(kSmall).on("node1"),
       PodJ("p2").prio(kHigh).c(kLarge).on("node2")}));
  Pod p = podFrom(PodJ("p").prio(kHigh).c(kLarge), s);
  CHECK(describe(victimsOn(s, p, "node1")) == "{p1.2,p1.3} v0");
  // node2 holds only an equal-priority pod: never a victim, so not a candidate.
  CHECK(describe(victimsOn(s, p, "node2")) == "no fit");
  CHECK(describe(preempt(s, p)) == "node1 {p1.2,p1.3} v0 | others:");
}

TEST_CASE(
    "scheduler: TestDryRunPreemption - mixed priority pods are preempted, pick later StartTime "
    "one when priorities are equal") {
  const Snapshot& s =
      snapshotFrom(snapJ({node500("node1"), node500("node2")},
                         {PodJ("p1.1").prio(kLow).c(kSmall).on("node1").startedAt(5),
                          PodJ("p1.2").prio(kLow).c(kSmall).on("node1").startedAt(4),
                          PodJ("p1.3").prio(kMid).c(kMedium).on("node1").startedAt(3),
                          PodJ("p1.4").prio(kHigh).c(kSmall).on("node1").startedAt(2),
                          PodJ("p2").prio(kHigh).c(kLarge).on("node2").startedAt(1)}));
  Pod p = podFrom(PodJ("p").prio(kHigh).c(kLarge), s);
  // MoreImportantPod: p1.3 (mid), then the older low pod p1.2, then p1.1. p1.3 → 600: victim;
  // p1.2 → 500: kept; p1.1 → 600: victim. The later-started low pod goes.
  VictimSelection v = victimsOn(s, p, "node1");
  CHECK(describe(v) == "{p1.1,p1.3} v0");
  CHECK(ordered(v.victims) == "p1.3,p1.1");  // most important first
  CHECK(describe(victimsOn(s, p, "node2")) == "no fit");
}

TEST_CASE(
    "scheduler: TestSelectNodesForPreemption (v1.19) - pick later StartTime one when priorities "
    "are equal, memory binding") {
  // DPT-119: nodes of 5000m cpu, 1000Mi memory, 100 pods, so memory binds; small = 100m/200Mi,
  // medium = 200m/400Mi, large = 300m/600Mi. Victims must be listed highest priority first.
  const std::string res = R"("cpu": "5000m", "memory": "1000Mi", "pods": "100")";
  const std::string small = R"("cpu": "100m", "memory": "200Mi")";
  const std::string medium = R"("cpu": "200m", "memory": "400Mi")";
  const std::string large = R"("cpu": "300m", "memory": "600Mi")";
  const Snapshot& s = snapshotFrom(
      snapJ({nodeJ("machine1", res), nodeJ("machine2", res)},
            {PodJ("a").prio(kLow).c(small).on("machine1").startedAt("2019-01-07T00:00:00Z"),
             PodJ("b").prio(kLow).c(small).on("machine1").startedAt("2019-01-06T00:00:00Z"),
             PodJ("c").prio(kMid).c(medium).on("machine1").startedAt("2019-01-05T00:00:00Z"),
             PodJ("d").prio(kHigh).c(small).on("machine1").startedAt("2019-01-04T00:00:00Z"),
             PodJ("e").prio(kHigh).c(large).on("machine2").startedAt("2019-01-03T00:00:00Z")}));
  Pod p = podFrom(PodJ("p").prio(kHigh).c(large), s);
  VictimSelection v = victimsOn(s, p, "machine1");
  CHECK(describe(v) == "{a,c} v0");
  CHECK(ordered(v.victims) == "c,a");
  CHECK(describe(victimsOn(s, p, "machine2")) == "no fit");
}

TEST_CASE("scheduler: TestDryRunPreemption - preemption with violation of the same pdb") {
  // One node; the preemptor (veryLarge) needs the whole node, so every pod is a victim and
  // only the number of PDB violations changes.
  auto run = [](const std::vector<std::string>& podNames, const std::string& budget) {
    std::vector<std::string> pods;
    for (const auto& n : podNames) {
      pods.push_back(PodJ(n).prio(kMid).c(kMedium).on("node1").label("app", "foo"));
    }
    const Snapshot& s = snapshotFrom(snapJ({node500("node1")}, pods, {budget}));
    Pod p = podFrom(PodJ("p").prio(kHigh).c(kVeryLarge), s);
    return describe(victimsOn(s, p, "node1"));
  };
  SUBCASE("preemption with violation of same pdb") {
    CHECK(run({"p1.1", "p1.2"}, pdbJ("pdb", R"("app": "foo")", 1)) == "{p1.1,p1.2} v1");
  }
  SUBCASE(
      "... pdb with pod whose eviction was processed, the victim doesn't belong to "
      "DisruptedPods") {
    CHECK(run({"p1.1", "p1.2"}, pdbJ("pdb", R"("app": "foo")", 1, {"p2"})) == "{p1.1,p1.2} v1");
  }
  SUBCASE("... the victim belongs to DisruptedPods") {
    CHECK(run({"p1.1", "p1.2"}, pdbJ("pdb", R"("app": "foo")", 1, {"p1.2"})) == "{p1.1,p1.2} v0");
  }
  SUBCASE("... the victim which belongs to DisruptedPods is treated as 'nonViolating'") {
    CHECK(run({"p1.1", "p1.2", "p1.3"}, pdbJ("pdb", R"("app": "foo")", 1, {"p1.3"})) ==
          "{p1.1,p1.2,p1.3} v1");
  }
  SUBCASE("the budget is charged per node evaluation, not across nodes") {
    // Fact sheet §1.5: disruptionsAllowed is copied once per node evaluation. Two nodes each
    // with one matching pod and a budget of 1: neither candidate violates it.
    const Snapshot& s =
        snapshotFrom(snapJ({node500("node1"), node500("node2")},
                           {PodJ("p1").prio(kMid).c(kLarge).on("node1").label("app", "foo"),
                            PodJ("p2").prio(kMid).c(kLarge).on("node2").label("app", "foo")},
                           {pdbJ("pdb", R"("app": "foo")", 1)}));
    Pod p = podFrom(PodJ("p").prio(kHigh).c(kLarge), s);
    CHECK(describe(preempt(s, p)) == "node1 {p1} v0 | others: node2 {p2} v0;");
  }
}

TEST_CASE(
    "scheduler: SelectVictimsOnNode (default_preemption.go, fact sheet §1.4) - PDB-violating "
    "pods are reprieved first") {
  // Step 6: the violating group is reprieved before the non-violating one, each most important
  // first. "a" (older, so more important) has no budget; "b" is protected by a budget that
  // allows no disruption. Only one of them can stay beside the preemptor: b is tried first and
  // stays, a goes, and nothing is violated.
  const Snapshot& s = snapshotFrom(
      snapJ({node500("node1")},
            {PodJ("a").prio(kLow).c(kLarge).on("node1").startedAt(1),
             PodJ("b").prio(kLow).c(kLarge).on("node1").startedAt(2).label("app", "foo")},
            {pdbJ("pdb", R"("app": "foo")", 0)}));
  Pod p = podFrom(PodJ("p").prio(kHigh).c(kMedium), s);
  CHECK(describe(victimsOn(s, p, "node1")) == "{a} v0");
  // Without the budget the more important pod, a, is the one reprieved.
  const Snapshot& free = snapshotFrom(
      snapJ({node500("node1")}, {PodJ("a").prio(kLow).c(kLarge).on("node1").startedAt(1),
                                 PodJ("b").prio(kLow).c(kLarge).on("node1").startedAt(2)}));
  CHECK(describe(victimsOn(free, podFrom(PodJ("p").prio(kHigh).c(kMedium), free), "node1")) ==
        "{b} v0");
}

TEST_CASE(
    "scheduler: TestDryRunPreemption - all nodes are possible candidates, but "
    "DefaultPreemptionArgs limits to 2") {
  // docs/reference.md §6.3 evaluates every node: upstream stops after numCandidates (2, from a
  // random offset) and returns node1 and node5 only. Here all five are candidates; the full tie is
  // broken by node name (docs/reference.md §6.4), upstream picks at random among those it found.
  SUBCASE("all nodes are possible candidates") {
    std::vector<std::string> nodes, pods;
    for (int i = 1; i <= 5; ++i) {
      const std::string n = "node" + std::to_string(i);
      nodes.push_back(node500(n));
      pods.push_back(PodJ("p" + std::to_string(i)).prio(kMid).c(kLarge).on(n));
    }
    const Snapshot& s = snapshotFrom(snapJ(nodes, pods));
    Pod p = podFrom(PodJ("p").prio(kHigh).c(kLarge), s);
    CHECK(describe(preempt(s, p)) ==
          "node1 {p1} v0 | others: node2 {p2} v0; node3 {p3} v0; node4 {p4} v0; node5 {p5} v0;");
  }
  SUBCASE("some nodes are not possible candidates, DefaultPreemptionArgs limits to 2") {
    std::vector<std::string> nodes, pods;
    for (int i = 1; i <= 5; ++i) {
      const std::string n = "node" + std::to_string(i);
      nodes.push_back(node500(n));
      const int priority = (i == 2 || i == 5) ? kVeryHigh : kMid;
      pods.push_back(PodJ("p" + std::to_string(i)).prio(priority).c(kLarge).on(n));
    }
    const Snapshot& s = snapshotFrom(snapJ(nodes, pods));
    Pod p = podFrom(PodJ("p").prio(kHigh).c(kLarge), s);
    // Upstream: node1 {p1}, node3 {p3} (stops at 2). node2 and node5 hold veryHigh pods.
    CHECK(describe(victimsOn(s, p, "node2")) == "no fit");
    CHECK(describe(victimsOn(s, p, "node5")) == "no fit");
    CHECK(describe(preempt(s, p)) == "node1 {p1} v0 | others: node3 {p3} v0; node4 {p4} v0;");
  }
}

TEST_CASE(
    "scheduler: TestDryRunPreemption - preemption looks past numCandidates until a non-PDB "
    "violating node is found") {
  std::vector<std::string> nodes, pods;
  for (int i = 1; i <= 5; ++i) {
    const std::string n = "node" + std::to_string(i);
    nodes.push_back(node500(n));
    PodJ pod("p" + std::to_string(i));
    pod.prio(kMid).c(kLarge).on(n);
    if (i == 1 || i == 2 || i == 5) pod.label("app", "foo");
    pods.push_back(pod);
  }
  const Snapshot& s = snapshotFrom(snapJ(nodes, pods, {pdbJ("pdb", R"("app": "foo")", 0)}));
  Pod p = podFrom(PodJ("p").prio(kHigh).c(kLarge), s);
  // Upstream candidates: node1 {p1} v1, node3 {p3} v0, node5 {p5} v1 (the search stops once a
  // non-violating node is found). docs/reference.md §6.3 evaluates every node; the choice is the
  // same: rule 1 (fewest PDB violations) keeps node3 and node4, the name picks node3.
  CHECK(describe(victimsOn(s, p, "node1")) == "{p1} v1");
  CHECK(describe(victimsOn(s, p, "node3")) == "{p3} v0");
  CHECK(describe(victimsOn(s, p, "node5")) == "{p5} v1");
  CHECK(describe(preempt(s, p)) ==
        "node3 {p3} v0 | others: node1 {p1} v1; node2 {p2} v1; node4 {p4} v0; node5 {p5} v1;");
}

// =============================================================================================
// 2. TestSelectBestCandidate (newest) / TestPickOneNodeForPreemption (v1.19): which node wins.
// Nodes 500m/500; the preemptor requests veryLarge, so every pod on the chosen node goes.

namespace {

// Pods "<node>.<i>" on nodes node1..nodeN, each {priority, requests, start second}.
struct VictimSpec {
  int priority;
  std::string requests;
  int start;
};

const Snapshot& bestCandidateSnapshot(const std::vector<std::vector<VictimSpec>>& perNode) {
  std::vector<std::string> nodes, pods;
  for (std::size_t n = 0; n < perNode.size(); ++n) {
    const std::string node = "node" + std::to_string(n + 1);
    nodes.push_back(node500(node));
    for (std::size_t i = 0; i < perNode[n].size(); ++i) {
      const VictimSpec& v = perNode[n][i];
      pods.push_back(PodJ("p" + std::to_string(n + 1) + "." + std::to_string(i + 1))
                         .prio(v.priority)
                         .c(v.requests)
                         .on(node)
                         .startedAt(v.start));
    }
  }
  return snapshotFrom(snapJ(nodes, pods));
}

std::string chosenNode(const std::vector<std::vector<VictimSpec>>& perNode, int preemptorPriority,
                       const std::string& preemptorRequests = kVeryLarge) {
  const Snapshot& s = bestCandidateSnapshot(perNode);
  PreemptionDecision d =
      preempt(s, podFrom(PodJ("p").prio(preemptorPriority).c(preemptorRequests), s));
  return d.node == nullptr ? "none" : d.node->name;
}

}  // namespace

TEST_CASE("scheduler: TestSelectBestCandidate - which node wins, by rule") {
  SUBCASE("a pod that fits on both nodes when lower priority pods are preempted") {
    // Upstream accepts node1 or node2 (random tie); docs/reference.md §6.4 takes the name,
    // ascending.
    CHECK(chosenNode({{{kMid, kLarge, 0}}, {{kMid, kLarge, 0}}}, kHigh, kLarge) == "node1");
  }
  SUBCASE("node with min highest priority pod is picked") {
    // Rule 2: highest victims 100 / 100 / 0.
    CHECK(chosenNode({{{kMid, kMedium, 0}, {kMid, kLarge, 0}},
                      {{kMid, kMedium, 0}, {kLow, kMedium, 0}},
                      {{kLow, kMedium, 0}, {kLow, kMedium, 0}}},
                     kHigh) == "node3");
  }
  SUBCASE("when highest priorities are the same, minimum sum of priorities is picked") {
    // Rule 3: sums 200 / 100 / 200 over two victims each.
    CHECK(chosenNode({{{kMid, kMedium, 0}, {kMid, kLarge, 0}},
                      {{kMid, kLarge, 0}, {kLow, kMedium, 0}},
                      {{kMid, kMedium, 0}, {kMid, kMedium, 0}}},
                     kHigh) == "node2");
  }
  SUBCASE("when highest priority and sum are the same, minimum number of pods is picked") {
    // Raw sums are all 0; with the 2^31 offset node2 (2 victims) is already smallest.
    CHECK(chosenNode({{{kMid, kSmall, 0}, {kNeg, kSmall, 0}, {kMid, kSmall, 0}, {kNeg, kSmall, 0}},
                      {{kMid, kLarge, 0}, {kNeg, kMedium, 0}},
                      {{kMid, kMedium, 0}, {kNeg, kSmall, 0}, {kLow, kSmall, 0}}},
                     kHigh) == "node2");
  }
  SUBCASE("sum of adjusted priorities is considered") {
    // A raw sum would pick node1 (-100); adjusted, 3·2^31 − 100 > 2·2^31: node2.
    CHECK(chosenNode({{{kMid, kSmall, 0}, {kNeg, kSmall, 0}, {kNeg, kSmall, 0}},
                      {{kMid, kLarge, 0}, {kNeg, kMedium, 0}},
                      {{kMid, kMedium, 0}, {kNeg, kSmall, 0}, {kLow, kSmall, 0}}},
                     kHigh) == "node2");
  }
  SUBCASE("non-overlapping lowest high priority, sum priorities, and number of pods") {
    // Rule 2 drops node2 (1000); rule 3: 3·2^31+100 < 4·2^31+100 < 4·2^31+200.
    CHECK(
        chosenNode({{{kMid, kSmall, 0}, {kLow, kSmall, 0}, {kLow, kSmall, 0}},
                    {{kHigh, kLarge, 0}},
                    {{kMid, kMedium, 0}, {kLow, kSmall, 0}, {kLow, kSmall, 0}, {kLow, kMedium, 0}},
                    {{kMid, kMedium, 0}, {kMid, kSmall, 0}, {kMid, kSmall, 0}, {kNeg, kSmall, 0}}},
                   kVeryHigh) == "node1");
  }
  SUBCASE("same priority, same number of victims, different start time for each node's pod") {
    CHECK(chosenNode({{{kMid, kMedium, 2}, {kMid, kMedium, 2}},
                      {{kMid, kMedium, 3}, {kMid, kMedium, 3}},
                      {{kMid, kMedium, 1}, {kMid, kMedium, 1}}},
                     kHigh) == "node2");
  }
  SUBCASE("same priority, same number of victims, different start time for all pods") {
    // Earliest starts 2 / 1 / 3: the latest of them wins.
    CHECK(chosenNode({{{kMid, kMedium, 4}, {kMid, kMedium, 2}},
                      {{kMid, kMedium, 5}, {kMid, kMedium, 1}},
                      {{kMid, kMedium, 3}, {kMid, kMedium, 6}}},
                     kHigh) == "node3");
  }
  SUBCASE("different priority, same number of victims, different start time for all pods") {
    // Only the highest-priority (mid) victims count: 2 / 6 / 5.
    CHECK(chosenNode({{{kLow, kMedium, 4}, {kMid, kMedium, 2}},
                      {{kMid, kMedium, 6}, {kLow, kMedium, 1}},
                      {{kLow, kMedium, 3}, {kMid, kMedium, 5}}},
                     kHigh) == "node2");
  }
}

TEST_CASE("scheduler: TestPickOneNodeForPreemption (v1.19) - nodes that need no preemption") {
  // DPT-119 node: 500m cpu, 1000Mi memory, 100 pods; small = 100m/200Mi, large = 300m/600Mi.
  const std::string res = R"("cpu": "500m", "memory": "1000Mi", "pods": "100")";
  const std::string small = R"("cpu": "100m", "memory": "200Mi")";
  const std::string large = R"("cpu": "300m", "memory": "600Mi")";
  SUBCASE("No node needs preemption") {
    const Snapshot& s = snapshotFrom(
        snapJ({nodeJ("machine1", res)}, {PodJ("m1.1").prio(kMid).c(small).on("machine1")}));
    PreemptionDecision d = preempt(s, podFrom(PodJ("p").prio(kHigh).c(large), s));
    CHECK(describe(d) == "machine1 {} v0 | others:");
  }
  SUBCASE("a pod that fits on a machine with no preemption") {
    // Upstream v1.19 returned the node with no victims at once; today the pod would not reach
    // preemption. docs/reference.md §6.1: a node where the pod fits wins at once, without victims.
    const Snapshot& s =
        snapshotFrom(snapJ({nodeJ("machine1", res), nodeJ("machine2", res), nodeJ("machine3", res)},
                           {PodJ("m1.1").prio(kMid).c(large).on("machine1"),
                            PodJ("m2.1").prio(kMid).c(large).on("machine2")}));
    PreemptionDecision d = preempt(s, podFrom(PodJ("p").prio(kHigh).c(large), s));
    CHECK(describe(d) == "machine3 {} v0 | others:");
  }
}

TEST_CASE("scheduler: TestSelectBestCandidate - pickOneNodeForPreemption on dry-run candidates") {
  // The first row again, as candidates handed to pickOneNodeForPreemption in reverse name
  // order: upstream returns whichever comes first (random); docs/reference.md §6.4 picks node1 by
  // name whatever the order.
  const Snapshot& s = snapshotFrom(snapJ(
      {node500("node1"), node500("node2")},
      {PodJ("p1").prio(kMid).c(kLarge).on("node1"), PodJ("p2").prio(kMid).c(kLarge).on("node2")}));
  Pod p = podFrom(PodJ("p").prio(kHigh).c(kLarge), s);
  std::vector<PreemptionCandidate> candidates;
  for (const char* name : {"node2", "node1"}) {
    VictimSelection v = victimsOn(s, p, name);
    REQUIRE(v.fits);
    candidates.push_back(PreemptionCandidate{s.findNode(name), v.victims, v.numPDBViolations});
  }
  const std::size_t chosen = nodewarden::policy::pickOneNodeForPreemption(candidates);
  REQUIRE(chosen < candidates.size());
  CHECK(candidates[chosen].node->name == "node1");
  // A PDB violation on node1 reverses it (rule 1 comes before the name).
  candidates[1].numPDBViolations = 1;
  CHECK(candidates[nodewarden::policy::pickOneNodeForPreemption(candidates)].node->name == "node2");
}

// =============================================================================================
// TestPreempt (newest): end-to-end node and victims. Nodes node1..node3 at 500m/500; the
// preemptor is high, veryLarge. Extender rows are not modelled except where the answer is
// what the default rules give.

TEST_CASE("scheduler: TestPreempt - basic preemption logic, policy unset, Never, second call") {
  auto snapshot = [](bool victimsTerminating) {
    PodJ p11("p1.1"), p12("p1.2");
    p11.prio(kLow).c(kSmall).on("node1");
    p12.prio(kLow).c(kSmall).on("node1");
    if (victimsTerminating) {
      p11.terminating();
      p12.terminating();
    }
    return &snapshotFrom(snapJ({node500("node1"), node500("node2"), node500("node3")},
                               {p11, p12, PodJ("p2.1").prio(kHigh).c(kLarge).on("node2"),
                                PodJ("p3.1").prio(kMid).c(kMedium).on("node3")}));
  };
  const Snapshot& s = *snapshot(false);
  SUBCASE("basic preemption logic / PreemptionPolicy is nil") {
    // node1's highest victim is low (0) against node3's mid (100): rule 2. node2 only holds an
    // equal-priority pod.
    CHECK(describe(preempt(s, podFrom(PodJ("p").prio(kHigh).c(kVeryLarge), s))) ==
          "node1 {p1.1,p1.2} v0 | others: node3 {p3.1} v0;");
  }
  SUBCASE("no preempting in pod") {
    CHECK(describe(preempt(s, podFrom(PodJ("p").prio(kHigh).c(kVeryLarge).never(), s))) == "none");
  }
  SUBCASE("calling preempt again after the victims got a deletionTimestamp preempts nothing") {
    // The preemptor is now nominated to node1, where its victims are terminating. Upstream
    // refuses because they carry DisruptionTarget; docs/reference.md §6.2 refuses for any
    // terminating lower-priority pod on the nominated node.
    const Snapshot& again = *snapshot(true);
    CHECK(describe(preempt(again, podFrom(PodJ("p").prio(kHigh).c(kVeryLarge).nominatedTo("node1"),
                                          again))) == "none");
  }
}

TEST_CASE(
    "scheduler: TestPreempt - One extender allows only node1, but it is not interested in given "
    "pod") {
  // The uninterested extender drops out; the default rules decide: both highest victims are
  // mid, node1's sum (mid + low) exceeds node2's (mid) once offset by 2^31 each: rule 3.
  const Snapshot& s = snapshotFrom(snapJ(
      {node500("node1"), node500("node2")},
      {PodJ("p1.1").prio(kMid).c(kSmall).on("node1"), PodJ("p1.2").prio(kLow).c(kSmall).on("node1"),
       PodJ("p2.1").prio(kMid).c(kLarge).on("node2")}));
  CHECK(describe(preempt(s, podFrom(PodJ("p").prio(kHigh).c(kVeryLarge), s))) ==
        "node2 {p2.1} v0 | others: node1 {p1.1,p1.2} v0;");
}

// =============================================================================================
// TestPostFilter (newest): nodes of {pods: 1} ("onePodRes") or {cpu 200m, memory 400, pods 32}.

TEST_CASE("scheduler: TestPostFilter - nominated node and no-candidate outcomes") {
  const std::string onePod = R"("pods": "1")";
  const std::string nodeRes = R"("cpu": "200m", "memory": "400", "pods": "32")";
  SUBCASE("pod with higher priority can be made schedulable") {
    const Snapshot& s =
        snapshotFrom(snapJ({nodeJ("node1", onePod)}, {PodJ("p1").prio(0).on("node1")}));
    CHECK(describe(preempt(s, podFrom(PodJ("p").prio(kHigh), s))) == "node1 {p1} v0 | others:");
  }
  SUBCASE("pod with tied priority is still unschedulable") {
    const Snapshot& s =
        snapshotFrom(snapJ({nodeJ("node1", onePod)}, {PodJ("p1").prio(0).on("node1")}));
    CHECK(describe(preempt(s, podFrom(PodJ("p").prio(0), s))) == "none");
  }
  SUBCASE("pod can be made schedulable on one node") {
    const Snapshot& s = snapshotFrom(
        snapJ({nodeJ("node1", onePod), nodeJ("node2", onePod)},
              {PodJ("p1").prio(kHigh).on("node1"), PodJ("p2").prio(kLow).on("node2")}));
    CHECK(describe(preempt(s, podFrom(PodJ("p").prio(kMid), s))) == "node2 {p2} v0 | others:");
  }
  SUBCASE("pod can be made schedulable on minHighestPriority node") {
    // node1 = {p1, p2} with one violation (p2), node2 = {p3} with one violation: the counts tie,
    // rule 2 takes node2 (highest victim 100 against 1000).
    const Snapshot& s =
        snapshotFrom(snapJ({nodeJ("node1", onePod), nodeJ("node2", onePod)},
                           {PodJ("p1").prio(kHigh).on("node1").label("pdb", "non-violating"),
                            PodJ("p2").prio(kLow).on("node1").label("pdb", "violating"),
                            PodJ("p3").prio(kMid).on("node2").label("pdb", "violating")},
                           {pdbJ("non-violating-pdb", R"("pdb": "non-violating")", 2147483647),
                            pdbJ("violating-pdb", R"("pdb": "violating")", 0)}));
    CHECK(describe(preempt(s, podFrom(PodJ("p").prio(kVeryHigh), s))) ==
          "node2 {p3} v1 | others: node1 {p1,p2} v1;");
  }
  SUBCASE("no candidate nodes found, no enough resource after removing low priority pods") {
    // REFERENCE: a node with too little allocatable for the pod at all is not a candidate.
    const Snapshot& s =
        snapshotFrom(snapJ({nodeJ("node1", nodeRes), nodeJ("node2", nodeRes)},
                           {PodJ("p1").prio(0).on("node1"), PodJ("p2").prio(0).on("node2")}));
    Pod p = podFrom(PodJ("p").prio(kHigh).c(kLarge), s);
    CHECK(describe(victimsOn(s, p, "node1")) == "no fit");
    CHECK(describe(preempt(s, p)) == "none");
  }
  SUBCASE(
      "no candidate nodes found with mixed reasons, no lower priority pod and no enough CPU "
      "resource") {
    const Snapshot& s = snapshotFrom(
        snapJ({nodeJ("node1", onePod), nodeJ("node2", nodeRes), nodeJ("node3", onePod)},
              {PodJ("p1").prio(kHigh).on("node1"), PodJ("p2").prio(0).on("node2"),
               PodJ("p3").prio(kHigh).on("node3")}));
    CHECK(describe(preempt(s, podFrom(PodJ("p").prio(kHigh).c(kLarge), s))) == "none");
  }
}

// =============================================================================================
// TestPodEligibleToPreemptOthers. Setup: node1 (cpu 2) holds p1 (low, 1 cpu) and p2 (low,
// 1 cpu); the preemptor (high, 1 cpu) would take p2 if it may preempt at all.

TEST_CASE("scheduler: TestPodEligibleToPreemptOthers - preemptionPolicy and the nominated node") {
  const std::string res = R"("cpu": "2", "memory": "1Gi", "pods": "32")";
  auto run = [&](bool p1Terminating, const std::string& taints, bool nominated, bool never) {
    PodJ p1("p1");
    p1.prio(kLow).c(R"("cpu": "1")").on("node1");
    if (p1Terminating) p1.terminating();
    const Snapshot& s =
        snapshotFrom(snapJ({nodeJ("node1", res, taints.empty() ? "" : R"("taints": )" + taints)},
                           {p1, PodJ("p2").prio(kLow).c(R"("cpu": "1")").on("node1")}));
    PodJ p("p");
    p.prio(kHigh).c(R"("cpu": "1")");
    if (nominated) p.nominatedTo("node1");
    if (never) p.never();
    return describe(preempt(s, podFrom(p, s)));
  };
  SUBCASE("Pod without nominated node") {
    CHECK(run(false, "", false, false) == "node1 {p2} v0 | others:");
  }
  SUBCASE("Pod with 'PreemptNever' preemption policy") {
    CHECK(run(false, "", false, true) == "none");
  }
  SUBCASE(
      "preemption victim pod terminating, as indicated by the dedicated DisruptionTarget "
      "condition") {
    // Upstream: not eligible. Conditions are not read; docs/reference.md §6.2 gives the same
    // answer.
    CHECK(run(true, "", true, false) == "none");
  }
  SUBCASE("non-victim Pods terminating") {
    // Upstream newest: eligible (no DisruptionTarget condition). docs/reference.md §6.2
    // deliberately keeps the older rule (DPT-121 "Pod with nominated node, but without nominated
    // node status": not eligible): any terminating lower-priority pod on the nominated node blocks.
    CHECK(run(true, "", true, false) == "none");
    // Without the nomination the same pod preempts p2.
    CHECK(run(true, "", false, false) == "node1 {p2} v0 | others:");
  }
  SUBCASE("Pod with nominated node (the nominated node is UnschedulableAndUnresolvable)") {
    // node1 now has an untolerated NoSchedule taint and a terminating low pod; node2 is full
    // of one low pod the preemptor could take. Upstream: the nominated node's status is
    // UnschedulableAndUnresolvable, so the pod is eligible and would preempt on node2.
    // docs/reference.md §6.2 states no such exception: the terminating lower-priority pod on the
    // nominated node blocks preemption.
    const Snapshot& s = snapshotFrom(
        snapJ({nodeJ("node1", res, R"("taints": [{"key": "dedicated", "effect": "NoSchedule"}])"),
               nodeJ("node2", res)},
              {PodJ("p1").prio(kLow).c(R"("cpu": "1")").on("node1").terminating(),
               PodJ("p3").prio(kLow).c(R"("cpu": "2")").on("node2")}));
    CHECK(describe(preempt(s, podFrom(PodJ("p").prio(kHigh).c(R"("cpu": "1")").nominatedTo("node1"),
                                      s))) == "none");
    CHECK(describe(preempt(s, podFrom(PodJ("p").prio(kHigh).c(R"("cpu": "1")"), s))) ==
          "node2 {p3} v0 | others:");
  }
}

// =============================================================================================
// 4. Nominated pods.

TEST_CASE(
    "scheduler: TestNominatedNode (integration) - a higher pod's preemption clears the lower "
    "nomination") {
  // Node cpu 5: low-1..low-4 (1 cpu each) run, medium (4 cpu) is nominated, high (3 cpu) comes.
  const std::string res = R"("cpu": "5", "memory": "1Gi", "pods": "32")";
  std::vector<std::string> pods;
  for (int i = 1; i <= 4; ++i) {
    pods.push_back(
        PodJ("low-" + std::to_string(i)).prio(kLow).c(R"("cpu": "1")").on("node").startedAt(i));
  }
  pods.push_back(PodJ("medium").prio(kMid).c(R"("cpu": "4")").nominatedTo("node"));
  const Snapshot& s = snapshotFrom(snapJ({nodeJ("node", res)}, pods));
  Pod high = podFrom(PodJ("high").prio(kHigh).c(R"("cpu": "3")"), s);
  // The lower nomination is ignored for high: 4 used, 3 requested. Removing all lows and
  // reprieving the oldest first keeps low-1 and low-2.
  AdmissionDecision a = admit(s, high, "node");
  CHECK(a.verdict == Verdict::Preempt);
  CHECK(a.reason == "OutOfcpu");
  CHECK(nameSet(a.victims) == "{low-3,low-4}");
  CHECK(nameSet(a.nominatedPodsToClear) == "{medium}");
  PreemptionDecision d = preempt(s, high);
  CHECK(describe(d) == "node {low-3,low-4} v0 | others:");
  CHECK(nameSet(d.nominatedPodsToClear) == "{medium}");

  // Afterwards (low-3, low-4 gone, high nominated): medium counts high (1000 >= 100) and no
  // longer fits; low-1 and low-2 cannot free enough, so it has no candidate node.
  const Snapshot& after = snapshotFrom(
      snapJ({nodeJ("node", res)},
            {pods[0], pods[1], PodJ("high").prio(kHigh).c(R"("cpu": "3")").nominatedTo("node")}));
  Pod medium = podFrom(PodJ("medium").prio(kMid).c(R"("cpu": "4")").nominatedTo("node"), after);
  AdmissionDecision m = admit(after, medium, "node");
  CHECK(m.verdict == Verdict::Reject);
  CHECK(m.reason == "OutOfcpu");
  CHECK(startsWith(m.message, insufficient("cpu", 4000, 5000, 5000)));
  CHECK(describe(preempt(after, medium)) == "none");
}

TEST_CASE(
    "scheduler: TestNominatedNode (integration, capacity 2) - a higher pod ignores a lower "
    "nomination and schedules at once") {
  const std::string res = R"("cpu": "2", "memory": "1Gi", "pods": "32")";
  const Snapshot& s = snapshotFrom(snapJ(
      {nodeJ("node", res)}, {PodJ("low").prio(kLow).c(R"("cpu": "1")").on("node"),
                             PodJ("medium").prio(kMid).c(R"("cpu": "2")").nominatedTo("node")}));
  Pod high = podFrom(PodJ("high").prio(kHigh).c(R"("cpu": "1")"), s);
  AdmissionDecision a = admit(s, high, "node");
  CHECK(a.verdict == Verdict::Admit);
  CHECK(a.victims.empty());
  CHECK(nameSet(a.nominatedPodsToClear) == "{medium}");
  CHECK(describe(preempt(s, high)) == "node {} v0 | others:");

  // After low is deleted and high runs: medium (2) no longer fits beside high (1) and has no
  // lower-priority pod to preempt.
  const Snapshot& after = snapshotFrom(
      snapJ({nodeJ("node", res)}, {PodJ("high").prio(kHigh).c(R"("cpu": "1")").on("node")}));
  Pod medium = podFrom(PodJ("medium").prio(kMid).c(R"("cpu": "2")").nominatedTo("node"), after);
  AdmissionDecision m = admit(after, medium, "node");
  CHECK(m.verdict == Verdict::Reject);
  CHECK(startsWith(m.message, insufficient("cpu", 2000, 1000, 2000)));
  CHECK(describe(preempt(after, medium)) == "none");
}

TEST_CASE(
    "scheduler: TestPreemptionStarvation (integration) - lower pods do not take the room "
    "freed for a nominated preemptor") {
  // Node 500m: five medium pods (100m) run; the high preemptor (300m/200) takes three of them
  // (the oldest two are reprieved) and is nominated.
  const std::string res = R"("cpu": "500m", "memory": "1Gi", "pods": "32")";
  std::vector<std::string> running;
  for (int i = 1; i <= 5; ++i) {
    running.push_back(PodJ("running-" + std::to_string(i))
                          .prio(kMid)
                          .c(R"("cpu": "100m", "memory": "100")")
                          .on("node")
                          .startedAt(i));
  }
  const Snapshot& s = snapshotFrom(snapJ({nodeJ("node", res)}, running));
  Pod high = podFrom(PodJ("preemptor").prio(kHigh).c(R"("cpu": "300m", "memory": "200")"), s);
  CHECK(describe(preempt(s, high)) == "node {running-3,running-4,running-5} v0 | others:");

  // With the victims gone and the preemptor nominated, a pending medium pod (100m) does not
  // fit: the nominated higher pod counts, and equal-priority pods are never victims.
  const Snapshot& after = snapshotFrom(snapJ(
      {nodeJ("node", res)},
      {running[0], running[1],
       PodJ("preemptor").prio(kHigh).c(R"("cpu": "300m", "memory": "200")").nominatedTo("node")}));
  Pod pending = podFrom(PodJ("pending-1").prio(kMid).c(R"("cpu": "100m", "memory": "100")"), after);
  AdmissionDecision a = admit(after, pending, "node");
  CHECK(a.verdict == Verdict::Reject);
  CHECK(a.reason == "OutOfcpu");
  CHECK(startsWith(a.message, insufficient("cpu", 100, 500, 500)));
  CHECK(describe(preempt(after, pending)) == "none");
}

TEST_CASE(
    "scheduler: TestPreemptionRaces (integration) - no lower pod lands while the preemptor is "
    "nominated") {
  // Node 5000m, preemptor 4900m nominated after its victims left. The additional pods' size is
  // ours (200m): anything above the 100m left must wait.
  const Snapshot& s = snapshotFrom(
      snapJ({nodeJ("node", R"("cpu": "5000m", "memory": "1Gi", "pods": "32")")},
            {PodJ("preemptor").prio(kHigh).c(R"("cpu": "4900m")").nominatedTo("node")}));
  for (int i = 0; i < 3; ++i) {
    Pod extra =
        podFrom(PodJ("additional-" + std::to_string(i)).prio(kMid).c(R"("cpu": "200m")"), s);
    CAPTURE(i);
    CHECK(admit(s, extra, "node").verdict == Verdict::Reject);
    CHECK(describe(preempt(s, extra)) == "none");
  }
}

TEST_CASE(
    "scheduler: TestFilterPluginsWithNominatedPods (restated with resources) - higher or equal "
    "nominated pods count, lower ones do not") {
  // Node cpu 4. A pod nominated there holds 3 cpu; the incoming pod (priority 100) asks for 2.
  const std::string res = R"("cpu": "4", "memory": "1Gi", "pods": "32")";
  auto run = [&](int nominatedPriority) {
    const Snapshot& s = snapshotFrom(
        snapJ({nodeJ("node", res)},
              {PodJ("nominated").prio(nominatedPriority).c(R"("cpu": "3")").nominatedTo("node")}));
    return admit(s, podFrom(PodJ("p").prio(kMid).c(R"("cpu": "2")"), s), "node");
  };
  SUBCASE("low priority pod with a high priority nominated pod") {
    AdmissionDecision a = run(kHigh);
    CHECK(a.verdict == Verdict::Reject);
    CHECK(a.reason == "OutOfcpu");
    CHECK(startsWith(a.message, insufficient("cpu", 2000, 3000, 4000)));
    CHECK(a.nominatedPodsToClear.empty());
  }
  SUBCASE("an equal priority nominated pod counts too") {
    AdmissionDecision a = run(kMid);
    CHECK(a.verdict == Verdict::Reject);
    CHECK(startsWith(a.message, insufficient("cpu", 2000, 3000, 4000)));
  }
  SUBCASE("high priority pod with a low priority nominated pod") {
    AdmissionDecision a = run(kMid - 1);
    CHECK(a.verdict == Verdict::Admit);
    CHECK(nameSet(a.nominatedPodsToClear) == "{nominated}");
  }
}

TEST_CASE(
    "scheduler: SelectVictimsOnNode with nominated pods - a higher nominated pod blocks "
    "preemption, a lower one is ignored and cleared") {
  // Node cpu 4, a running low pod (3 cpu), a pod nominated there (3 cpu); the preemptor is mid
  // with 2 cpu. RunFilterPluginsWithNominatedPods counts the nominated pod only when its
  // priority is >= the preemptor's.
  const std::string res = R"("cpu": "4", "memory": "1Gi", "pods": "32")";
  auto snapshotWith = [&](int nominatedPriority) -> const Snapshot& {
    return snapshotFrom(
        snapJ({nodeJ("node", res)},
              {PodJ("low").prio(kLow).c(R"("cpu": "3")").on("node"),
               PodJ("nominated").prio(nominatedPriority).c(R"("cpu": "3")").nominatedTo("node")}));
  };
  SUBCASE("higher nominated pod") {
    const Snapshot& s = snapshotWith(kHigh);
    Pod p = podFrom(PodJ("p").prio(kMid).c(R"("cpu": "2")"), s);
    CHECK(describe(victimsOn(s, p, "node")) == "no fit");
    CHECK(admit(s, p, "node").verdict == Verdict::Reject);
    CHECK(describe(preempt(s, p)) == "none");
  }
  SUBCASE("lower nominated pod") {
    const Snapshot& s = snapshotWith(kLow + 50);
    Pod p = podFrom(PodJ("p").prio(kMid).c(R"("cpu": "2")"), s);
    CHECK(describe(victimsOn(s, p, "node")) == "{low} v0");
    AdmissionDecision a = admit(s, p, "node");
    CHECK(a.verdict == Verdict::Preempt);
    CHECK(nameSet(a.victims) == "{low}");
    CHECK(nameSet(a.nominatedPodsToClear) == "{nominated}");
    PreemptionDecision d = preempt(s, p);
    CHECK(describe(d) == "node {low} v0 | others:");
    CHECK(nameSet(d.nominatedPodsToClear) == "{nominated}");
  }
}

TEST_CASE("scheduler: TestPreferNominatedNode (integration) - the nominated node is tried first") {
  // Two empty nodes with room; the pod is nominated to node-2.
  const std::string res = R"("cpu": "2", "memory": "1Gi", "pods": "32")";
  SUBCASE("the nominated node passes all filters: the pod runs there") {
    const Snapshot& s = snapshotFrom(snapJ({nodeJ("node-1", res), nodeJ("node-2", res)}, {}));
    PreemptionDecision d =
        preempt(s, podFrom(PodJ("p").prio(kMid).c(R"("cpu": "1")").nominatedTo("node-2"), s));
    REQUIRE(d.node != nullptr);
    CHECK(d.victims.empty());
    // Upstream (TestPreferNominatedNode) runs the pod on its nominated node when that node
    // passes every filter; docs/reference.md §6.1 does not say which fitting node wins, so we
    // follow it.
    CHECK(d.node->name == "node-2");
  }
  SUBCASE("the nominated node does not pass: another feasible node") {
    const Snapshot& s =
        snapshotFrom(snapJ({nodeJ("node-1", res), nodeJ("node-2", res)},
                           {PodJ("big").prio(kHigh).c(R"("cpu": "2")").on("node-2")}));
    PreemptionDecision d =
        preempt(s, podFrom(PodJ("p").prio(kMid).c(R"("cpu": "1")").nominatedTo("node-2"), s));
    CHECK(describe(d) == "node-1 {} v0 | others:");
  }
}

// =============================================================================================
// 3. Kubelet admission.
// The kubelet itself never preempts for a non-critical pod; docs/reference.md §5.7 does the
// scheduler's victim selection. The rows below keep every pod at priority 0 so no victim can exist
// and the kubelet's rejection is what is checked.

TEST_CASE("kubelet admission: TestGeneralPredicates - resources, taints, node selector") {
  // Node allocatable cpu 10m, memory 20, pods 32.
  const std::string res = R"("cpu": "10m", "memory": "20", "pods": "32")";
  auto nodeWithTaints = [&](const std::string& list) {
    return nodeJ("machine1", res, list.empty() ? "" : R"("taints": )" + list);
  };
  SUBCASE("no resources/port/host requested always fits") {
    const Snapshot& s =
        snapshotFrom(snapJ({nodeWithTaints("")},
                           {PodJ("existing").c(R"("cpu": "9m", "memory": "19")").on("machine1")}));
    AdmissionDecision a = admit(s, podFrom(PodJ("p"), s), "machine1");
    CHECK(a.verdict == Verdict::Admit);
    CHECK(a.reason.empty());
  }
  SUBCASE("not enough cpu and memory resource") {
    const Snapshot& s =
        snapshotFrom(snapJ({nodeWithTaints("")},
                           {PodJ("existing").c(R"("cpu": "5m", "memory": "19")").on("machine1")}));
    // Both cpu and memory fail; the kubelet reports only the first reason, cpu.
    AdmissionDecision a =
        admit(s, podFrom(PodJ("p").c(R"("cpu": "8m", "memory": "10")"), s), "machine1");
    CHECK(a.verdict == Verdict::Reject);
    CHECK(a.reason == "OutOfcpu");
    CHECK_MESSAGE(startsWith(a.message, insufficient("cpu", 8, 5, 10)), a.message);
  }
  const std::string taints =
      R"([{"key": "foo", "effect": "NoSchedule"}, {"key": "bar", "effect": "NoExecute"}])";
  SUBCASE("taint/toleration match") {
    const Snapshot& s = snapshotFrom(snapJ({nodeWithTaints(taints)}, {}));
    Pod p = podFrom(PodJ("p").spec(R"("tolerations": [{"key": "foo"}, {"key": "bar"}])"), s);
    CHECK(admit(s, p, "machine1").verdict == Verdict::Admit);
  }
  SUBCASE("NoSchedule taint/toleration not match") {
    const Snapshot& s =
        snapshotFrom(snapJ({nodeWithTaints(R"([{"key": "foo", "effect": "NoSchedule"}])")}, {}));
    CHECK(admit(s, podFrom(PodJ("p"), s), "machine1").verdict == Verdict::Admit);
  }
  SUBCASE("NoExecute taint/toleration not match") {
    const Snapshot& s =
        snapshotFrom(snapJ({nodeWithTaints(R"([{"key": "bar", "effect": "NoExecute"}])")}, {}));
    AdmissionDecision a = admit(s, podFrom(PodJ("p"), s), "machine1");
    CHECK(a.verdict == Verdict::Reject);
    CHECK(a.reason == "TaintToleration");
    // The kubelet reports its own ErrReasonNotMatch (predicate.go generalFilter).
    CHECK(a.message ==
          "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate");
  }
  SUBCASE("PreferNoSchedule taint/toleration not match") {
    const Snapshot& s = snapshotFrom(
        snapJ({nodeWithTaints(R"([{"key": "baz", "effect": "PreferNoSchedule"}])")}, {}));
    CHECK(admit(s, podFrom(PodJ("p"), s), "machine1").verdict == Verdict::Admit);
  }
  SUBCASE("static pods ignore taints") {
    const Snapshot& s = snapshotFrom(snapJ({nodeWithTaints(taints)}, {}));
    CHECK(admit(s, podFrom(PodJ("p").staticPod(), s), "machine1").verdict == Verdict::Admit);
    // A non-static pod without tolerations is turned away by the NoExecute taint.
    CHECK(admit(s, podFrom(PodJ("q"), s), "machine1").reason == "TaintToleration");
  }
  SUBCASE("node affinity failure") {
    // Upstream uses required node affinity (foo Exists) on a static pod; docs/reference.md §2 reads
    // spec.nodeSelector only, so the same failure is expressed as a selector on foo. Static pods
    // skip taints, not the selector.
    const Snapshot& s = snapshotFrom(snapJ({nodeWithTaints(taints)}, {}));
    AdmissionDecision a = admit(
        s, podFrom(PodJ("p").staticPod().spec(R"("nodeSelector": {"foo": "bar"})"), s), "machine1");
    CHECK(a.verdict == Verdict::Reject);
    CHECK(a.reason == "NodeAffinity");
    CHECK(a.message ==
          "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector");
    const Snapshot& labelled =
        snapshotFrom(snapJ({nodeJ("machine1", res, "", "", R"("foo": "bar")")}, {}));
    CHECK(admit(labelled,
                podFrom(PodJ("p").staticPod().spec(R"("nodeSelector": {"foo": "bar"})"), labelled),
                "machine1")
              .verdict == Verdict::Admit);
  }
}

TEST_CASE("kubelet admission: TestEnoughRequests (noderesources fitsRequest) - through admitPod") {
  // Node capacity = allocatable: cpu 10m, memory 20, pods 32, example.com/aaa 5,
  // ephemeral-storage 20, hugepages-2Mi 5. One existing pod per row.
  const std::string res = R"("cpu": "10m", "memory": "20", "pods": "32", "example.com/aaa": "5", )"
                          R"("ephemeral-storage": "20", "hugepages-2Mi": "5")";
  struct Row {
    const char* name;
    PodJ pod;
    std::string existing;  // the existing pod's container requests
    std::string resource;  // "" = admitted
    std::int64_t requested, used, capacity;
  };
  const std::string c1m1 = R"("cpu": "1m", "memory": "1")";
  const std::vector<Row> rows = {
      {"no resources requested always fits", PodJ("p"), R"("cpu": "10m", "memory": "20")", "", 0, 0,
       0},
      {"too many resources fails", PodJ("p").c(c1m1), R"("cpu": "10m", "memory": "20")", "cpu", 1,
       10, 10},
      {"too many resources fails due to init container cpu",
       PodJ("p").c(c1m1).init(R"("cpu": "3m", "memory": "1")"), R"("cpu": "8m", "memory": "19")",
       "cpu", 3, 8, 10},
      {"too many resources fails due to highest init container cpu",
       PodJ("p")
           .c(c1m1)
           .init(R"("cpu": "3m", "memory": "1")")
           .init(R"("cpu": "2m", "memory": "1")"),
       R"("cpu": "8m", "memory": "19")", "cpu", 3, 8, 10},
      {"too many resources fails due to init container memory",
       PodJ("p").c(c1m1).init(R"("cpu": "1m", "memory": "3")"), R"("cpu": "9m", "memory": "19")",
       "memory", 3, 19, 20},
      {"too many resources fails due to highest init container memory",
       PodJ("p")
           .c(c1m1)
           .init(R"("cpu": "1m", "memory": "3")")
           .init(R"("cpu": "1m", "memory": "2")"),
       R"("cpu": "9m", "memory": "19")", "memory", 3, 19, 20},
      {"init container fits because it's the max, not sum, of containers and init containers",
       PodJ("p").c(c1m1).init(c1m1), R"("cpu": "9m", "memory": "19")", "", 0, 0, 0},
      {"multiple init containers fit because it's the max, not sum, of containers and init "
       "containers",
       PodJ("p").c(c1m1).init(c1m1).init(c1m1), R"("cpu": "9m", "memory": "19")", "", 0, 0, 0},
      {"both resources fit", PodJ("p").c(c1m1), R"("cpu": "5m", "memory": "5")", "", 0, 0, 0},
      {"one resource memory fits", PodJ("p").c(R"("cpu": "2m", "memory": "1")"),
       R"("cpu": "9m", "memory": "5")", "cpu", 2, 9, 10},
      {"one resource cpu fits", PodJ("p").c(R"("cpu": "1m", "memory": "2")"),
       R"("cpu": "5m", "memory": "19")", "memory", 2, 19, 20},
      {"equal edge case", PodJ("p").c(R"("cpu": "5m", "memory": "1")"),
       R"("cpu": "5m", "memory": "19")", "", 0, 0, 0},
      {"equal edge case for init container",
       PodJ("p").c(R"("cpu": "4m", "memory": "1")").init(R"("cpu": "5m", "memory": "1")"),
       R"("cpu": "5m", "memory": "19")", "", 0, 0, 0},
      {"extended resource fits", PodJ("p").c(R"("example.com/aaa": "1")"), "", "", 0, 0, 0},
      {"extended resource fits for init container", PodJ("p").init(R"("example.com/aaa": "1")"), "",
       "", 0, 0, 0},
      {"extended resource capacity enforced", PodJ("p").c(c1m1 + R"(, "example.com/aaa": "10")"),
       R"("example.com/aaa": "0")", "example.com/aaa", 10, 0, 5},
      {"extended resource capacity enforced for init container",
       PodJ("p").init(c1m1 + R"(, "example.com/aaa": "10")"), R"("example.com/aaa": "0")",
       "example.com/aaa", 10, 0, 5},
      {"extended resource allocatable enforced", PodJ("p").c(c1m1 + R"(, "example.com/aaa": "1")"),
       R"("example.com/aaa": "5")", "example.com/aaa", 1, 5, 5},
      {"extended resource allocatable enforced for init container",
       PodJ("p").init(R"("example.com/aaa": "1")"), R"("example.com/aaa": "5")", "example.com/aaa",
       1, 5, 5},
      {"extended resource allocatable enforced for multiple containers",
       PodJ("p").c(R"("example.com/aaa": "3")").c(R"("example.com/aaa": "3")"),
       R"("example.com/aaa": "2")", "example.com/aaa", 6, 2, 5},
      {"extended resource allocatable admits multiple init containers",
       PodJ("p").init(R"("example.com/aaa": "3")").init(R"("example.com/aaa": "3")"),
       R"("example.com/aaa": "2")", "", 0, 0, 0},
      {"extended resource allocatable enforced for multiple init containers",
       PodJ("p").init(R"("example.com/aaa": "6")").init(R"("example.com/aaa": "3")"),
       R"("example.com/aaa": "2")", "example.com/aaa", 6, 2, 5},
      // docs/reference.md §5.4 checks every extended resource against allocatable (0 when the node
      // does not list it), as the scheduler's fitsRequest does. The kubelet's own admission first
      // drops extended requests the node does not list (removeMissingExtendedResources).
      {"extended resource allocatable enforced for unknown resource",
       PodJ("p").c(R"("example.com/bbb": "1")"), "", "example.com/bbb", 1, 0, 0},
      {"extended resource allocatable enforced for unknown resource for init container",
       PodJ("p").init(R"("example.com/bbb": "1")"), "", "example.com/bbb", 1, 0, 0},
      {"kubernetes.io resource capacity enforced",
       PodJ("p").c(R"("kubernetes.io/something": "10")"), "", "kubernetes.io/something", 10, 0, 0},
      {"kubernetes.io resource capacity enforced for init container",
       PodJ("p").init(R"("subdomain.kubernetes.io/something": "10")"), "",
       "subdomain.kubernetes.io/something", 10, 0, 0},
      {"hugepages resource capacity enforced", PodJ("p").c(R"("hugepages-2Mi": "10")"),
       R"("hugepages-2Mi": "0")", "hugepages-2Mi", 10, 0, 5},
      {"hugepages resource capacity enforced for init container",
       PodJ("p").init(R"("hugepages-2Mi": "10")"), R"("hugepages-2Mi": "0")", "hugepages-2Mi", 10,
       0, 5},
      {"hugepages resource allocatable enforced for multiple containers",
       PodJ("p").c(R"("hugepages-2Mi": "3")").c(R"("hugepages-2Mi": "3")"),
       R"("hugepages-2Mi": "2")", "hugepages-2Mi", 6, 2, 5},
      {"resources + pod overhead fits",
       PodJ("p").c(c1m1).overhead(R"("cpu": "3m", "memory": "13")"),
       R"("cpu": "5m", "memory": "5")", "", 0, 0, 0},
      {"requests + overhead does not fit for memory",
       PodJ("p").c(c1m1).overhead(R"("cpu": "1m", "memory": "15")"),
       R"("cpu": "5m", "memory": "5")", "memory", 16, 5, 20},
      {"skip checking extended resource request with quantity zero via resource groups",
       PodJ("p").c(c1m1 + R"(, "example.com/aaa": "0")"), R"("example.com/aaa": "6")", "", 0, 0, 0},
      {"skip checking resource request with quantity zero",
       PodJ("p").c(R"("example.com/aaa": "1")"),
       R"("cpu": "20m", "memory": "30", "example.com/aaa": "1")", "", 0, 0, 0},
  };
  for (const Row& row : rows) {
    CAPTURE(row.name);
    PodJ existing("existing");
    existing.on("n");
    if (!row.existing.empty()) existing.c(row.existing);
    const Snapshot& s = snapshotFrom(snapJ({nodeJ("n", res)}, {existing}));
    AdmissionDecision a = admit(s, podFrom(row.pod, s), "n");
    if (row.resource.empty()) {
      CHECK(a.verdict == Verdict::Admit);
      CHECK(a.message.empty());
    } else {
      CHECK(a.verdict == Verdict::Reject);
      CHECK(a.reason == "OutOf" + row.resource);
      CHECK_MESSAGE(
          startsWith(a.message, insufficient(row.resource, row.requested, row.used, row.capacity)),
          a.message);
    }
  }
}

TEST_CASE("kubelet admission: TestNotEnoughRequests - too many pods") {
  // Node allocatable cpu 10m, memory 20, pods 1, one existing pod: every row fails on pods
  // first, even when cpu and memory fit.
  const std::string res = R"("cpu": "10m", "memory": "20", "pods": "1")";
  struct Row {
    const char* name;
    PodJ pod;
    std::string existing;
  };
  const std::vector<Row> rows = {
      {"even without specified resources, predicate fails when there's no space for additional "
       "pod",
       PodJ("p"), R"("cpu": "10m", "memory": "20")"},
      {"even if both resources fit, predicate fails when there's no space for additional pod",
       PodJ("p").c(R"("cpu": "1m", "memory": "1")"), R"("cpu": "5m", "memory": "5")"},
      {"even for equal edge case, predicate fails when there's no space for additional pod",
       PodJ("p").c(R"("cpu": "5m", "memory": "1")"), R"("cpu": "5m", "memory": "19")"},
      {"even for equal edge case, predicate fails when there's no space for additional pod due to "
       "init container",
       PodJ("p").c(R"("cpu": "5m", "memory": "1")").init(R"("cpu": "5m", "memory": "1")"),
       R"("cpu": "5m", "memory": "19")"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.name);
    const Snapshot& s =
        snapshotFrom(snapJ({nodeJ("n", res)}, {PodJ("existing").c(row.existing).on("n")}));
    AdmissionDecision a = admit(s, podFrom(row.pod, s), "n");
    CHECK(a.verdict == Verdict::Reject);
    CHECK(a.reason == "OutOfpods");
    CHECK_MESSAGE(startsWith(a.message, insufficient("pods", 1, 1, 1)), a.message);
  }
}

TEST_CASE("kubelet admission: TestStorageRequests - ephemeral-storage") {
  // The TestEnoughRequests node (ephemeral-storage 20). Existing pods are ours where the facts
  // do not give them.
  const std::string res =
      R"("cpu": "10m", "memory": "20", "pods": "32", "ephemeral-storage": "20")";
  auto run = [&](const std::string& existing, const std::string& incoming) {
    const Snapshot& s =
        snapshotFrom(snapJ({nodeJ("n", res)}, {PodJ("existing").c(existing).on("n")}));
    return admit(s, podFrom(PodJ("p").c(incoming), s), "n");
  };
  SUBCASE("pod fits") {
    CHECK(run(R"("cpu": "2m", "memory": "10")", R"("cpu": "1m", "memory": "1")").verdict ==
          Verdict::Admit);
  }
  SUBCASE("storage ephemeral local storage request exceeds allocatable") {
    AdmissionDecision a = run(R"("cpu": "2m", "memory": "2")",
                              R"("cpu": "1m", "memory": "1", "ephemeral-storage": "25")");
    CHECK(a.verdict == Verdict::Reject);
    CHECK(a.reason == "OutOfephemeral-storage");
    CHECK_MESSAGE(startsWith(a.message, insufficient("ephemeral-storage", 25, 0, 20)), a.message);
  }
  SUBCASE("ephemeral local storage is sufficient") {
    CHECK(run(R"("cpu": "2m", "memory": "2", "ephemeral-storage": "10")",
              R"("cpu": "1m", "memory": "1", "ephemeral-storage": "5")")
              .verdict == Verdict::Admit);
  }
  SUBCASE("pod fits with ephemeral local storage (equal edge)") {
    CHECK(run(R"("cpu": "2m", "memory": "2", "ephemeral-storage": "10")",
              R"("cpu": "1m", "memory": "1", "ephemeral-storage": "10")")
              .verdict == Verdict::Admit);
  }
  SUBCASE("due to container scratch disk (v1.19): cpu is reported") {
    AdmissionDecision a = run(R"("cpu": "10m", "memory": "10")", R"("cpu": "1m", "memory": "1")");
    CHECK(a.reason == "OutOfcpu");
    CHECK_MESSAGE(startsWith(a.message, insufficient("cpu", 1, 10, 10)), a.message);
  }
}

TEST_CASE("kubelet admission: TestAdmitUnderNodeConditions - eviction manager admission") {
  // guaranteed: requests = limits 100m/1Gi; burstable: requests 100m/1Gi; best-effort: none.
  const std::string res = R"("cpu": "4", "memory": "8Gi", "pods": "110")";
  const std::string r = R"("cpu": "100m", "memory": "1Gi")";
  auto verdicts = [&](const std::string& conditions) {
    const Snapshot& s = snapshotFrom(
        snapJ({nodeJ("node", res, "", R"(, "conditions": [)" + conditions + "]")}, {}));
    std::string out;
    for (const PodJ& p :
         {PodJ("guaranteed-pod").c(r, r), PodJ("burstable-pod").c(r), PodJ("best-effort-pod")}) {
      AdmissionDecision a = admit(s, podFrom(p, s), "node");
      out += std::string(out.empty() ? "" : ",") + (a.verdict == Verdict::Admit ? "true" : "false");
    }
    return out;
  };
  const std::string memory = R"({"type": "MemoryPressure", "status": "True"})";
  const std::string disk = R"({"type": "DiskPressure", "status": "True"})";
  CHECK(verdicts(R"({"type": "Ready", "status": "True"})") == "true,true,true");
  CHECK(verdicts(memory) == "true,true,false");
  CHECK(verdicts(memory + ", " + disk) == "false,false,false");
  // A condition reported False is no condition.
  CHECK(verdicts(R"({"type": "MemoryPressure", "status": "False"})") == "true,true,true");
  // Any condition other than MemoryPressure alone rejects every non-critical pod.
  CHECK(verdicts(disk) == "false,false,false");
  CHECK(verdicts(R"({"type": "PIDPressure", "status": "True"})") == "false,false,false");

  const Snapshot& s = snapshotFrom(
      snapJ({nodeJ("node", res, "", R"(, "conditions": [)" + memory + ", " + disk + "]")}, {}));
  AdmissionDecision rejected = admit(s, podFrom(PodJ("burstable-pod").c(r), s), "node");
  CHECK(rejected.reason == "Evicted");
  CHECK(rejected.message == "The node had condition: [MemoryPressure DiskPressure]. ");
  // A critical pod is always admitted: system priority, or a static pod.
  CHECK(admit(s, podFrom(PodJ("critical").prio(2000000000), s), "node").verdict == Verdict::Admit);
  CHECK(admit(s, podFrom(PodJ("static").staticPod(), s), "node").verdict == Verdict::Admit);

  const Snapshot& m =
      snapshotFrom(snapJ({nodeJ("node", res, "", R"(, "conditions": [)" + memory + "]")}, {}));
  AdmissionDecision be = admit(m, podFrom(PodJ("best-effort-pod"), m), "node");
  CHECK(be.reason == "Evicted");
  CHECK(be.message == "The node had condition: [MemoryPressure]. ");
  // Under MemoryPressure alone a BestEffort pod tolerating the memory-pressure taint
  // (NoSchedule) is admitted.
  Pod tolerating =
      podFrom(PodJ("tolerating")
                  .spec(R"("tolerations": [{"key": "node.kubernetes.io/memory-pressure", )"
                        R"("operator": "Exists", "effect": "NoSchedule"}])"),
              m);
  CHECK(admit(m, tolerating, "node").verdict == Verdict::Admit);
}

TEST_CASE("kubelet admission: TestHandleMemExceeded - the newer pod is rejected") {
  // Allocatable cpu 10m, memory 100, pods 40; oldpod (memory 90) was admitted first.
  const Snapshot& s =
      snapshotFrom(snapJ({nodeJ("node", R"("cpu": "10m", "memory": "100", "pods": "40")")},
                         {PodJ("oldpod").c(R"("memory": "90")").on("node").startedAt(0)}));
  AdmissionDecision a = admit(s, podFrom(PodJ("newpod").c(R"("memory": "90")"), s), "node");
  CHECK(a.verdict == Verdict::Reject);
  CHECK(a.reason == "OutOfmemory");
  CHECK_MESSAGE(startsWith(a.message, insufficient("memory", 90, 90, 100)), a.message);
}

TEST_CASE("kubelet admission: TestHandleNodeSelector - a selector the node lacks is rejected") {
  const Snapshot& s = snapshotFrom(snapJ(
      {nodeJ("node", R"("cpu": "1", "memory": "1Gi", "pods": "110")", "", "", R"("key": "B")")},
      {}));
  AdmissionDecision a =
      admit(s, podFrom(PodJ("podA").spec(R"("nodeSelector": {"key": "A"})"), s), "node");
  CHECK(a.verdict == Verdict::Reject);
  CHECK(a.reason == "NodeAffinity");
  CHECK(
      admit(s, podFrom(PodJ("podB").spec(R"("nodeSelector": {"key": "B"})"), s), "node").verdict ==
      Verdict::Admit);
}
