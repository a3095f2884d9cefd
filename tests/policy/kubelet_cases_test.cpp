// The kubelet's own eviction test cases, restated as facts (inputs -> expected outcome) and run
// against nodewarden's policy core. The facts come from pkg/kubelet/eviction/helpers_test.go and
// eviction_manager_test.go (kubernetes/kubernetes pkg/kubelet/eviction); no
// kubelet code is copied. Rankings run in `"ranking": "kubelet"` mode and the eviction-manager
// scenarios with evictionMaxPodsPerCycle = 1 (the kubelet's one pod per cycle). Where
// docs/reference.md deliberately differs from the kubelet, the contract's behaviour is asserted and
// the difference is noted next to the assertion.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "policy/eviction.h"
#include "policy/json_reader.h"
#include "policy/model.h"
#include "policy/policy.h"
#include "policy/quantity.h"
#include "policy/times.h"

using namespace nodewarden::policy;
using nodewarden::Duration;
using nodewarden::SteadyTime;

namespace {

// ---------------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------------

constexpr std::uint64_t kKi = 1024;
constexpr std::uint64_t kMi = 1024 * kKi;
constexpr std::uint64_t kGi = 1024 * kMi;
const std::string kNodeName = "test";  // the kubelet tests' node

using std::chrono::minutes;
using std::chrono::seconds;

Quantity qty(const char* text) {
  auto parsed = Quantity::parse(text);
  REQUIRE_MESSAGE(parsed.ok(), "quantity " << text);
  return parsed.value();
}

// A quantity's whole value, rounded up as resource.Quantity.Value() does ("1.2Gi").
std::uint64_t bytesOf(const char* text) {
  return std::uint64_t(qty(text).value());
}

ResourceList resources(std::initializer_list<std::pair<const char*, const char*>> items) {
  ResourceList out;
  for (const auto& [resource, text] : items) out.emplace(resource, qty(text));
  return out;
}

// A running pod on node "test" with one container named like the pod (as the kubelet's test
// helpers build them) and spec.priority set (nullopt leaves it unset).
Pod makePod(const std::string& name, std::optional<std::int32_t> priority,
            ResourceList requests = {}, ResourceList limits = {},
            const std::string& ns = "default") {
  Pod pod;
  pod.name = name;
  pod.ns = ns;
  pod.uid = "uid-" + ns + "-" + name;
  pod.nodeName = kNodeName;
  pod.phase = "Running";
  pod.specPriority = priority;
  Container container;
  container.name = name;
  container.requests = std::move(requests);
  container.limits = std::move(limits);
  pod.containers.push_back(std::move(container));
  return pod;
}

PodStats statsOf(const Pod& pod) {
  PodStats stats;
  stats.name = pod.name;
  stats.ns = pod.ns;
  stats.uid = pod.uid;
  return stats;
}

// Summary pods[].memory.workingSetBytes.
PodStats memoryStats(const Pod& pod, std::uint64_t workingSet) {
  PodStats stats = statsOf(pod);
  stats.memoryWorkingSetBytes = workingSet;
  return stats;
}

// Summary pods[].process_stats.process_count.
PodStats processStats(const Pod& pod, std::uint64_t count) {
  PodStats stats = statsOf(pod);
  stats.processCount = count;
  return stats;
}

// Summary pods[].ephemeral-storage.usedBytes (the kubelet's rootfs + logs + local volumes).
PodStats diskStats(const Pod& pod, std::uint64_t usedBytes) {
  PodStats stats = statsOf(pod);
  stats.ephemeralStorageUsedBytes = usedBytes;
  return stats;
}

// Summary pods[].ephemeral-storage.inodesUsed.
PodStats inodeStats(const Pod& pod, std::uint64_t inodesUsed) {
  PodStats stats = statsOf(pod);
  stats.ephemeralStorageInodesUsed = inodesUsed;
  return stats;
}

// The kubelet tests' memory summary helper: node available = X and working set = X (capacity
// 2X), the same for the "pods" system container.
void setMemory(Summary& summary, std::uint64_t available) {
  summary.node.memoryAvailableBytes = available;
  summary.node.memoryWorkingSetBytes = available;
  summary.node.podsMemoryAvailableBytes = available;
  summary.node.podsMemoryWorkingSetBytes = available;
}

// The kubelet tests' disk summary helper: available = X, capacity = 2X.
void setNodeFs(Summary& summary, std::uint64_t available) {
  summary.node.nodeFs.availableBytes = available;
  summary.node.nodeFs.capacityBytes = 2 * available;
}

void setNodeFsInodes(Summary& summary, std::uint64_t inodesFree, std::uint64_t inodes) {
  summary.node.nodeFs.inodesFree = inodesFree;
  summary.node.nodeFs.inodes = inodes;
}

// The kubelet tests' PID summary helper: MaxPID = total, running processes = running.
void setPids(Summary& summary, std::uint64_t total, std::uint64_t running) {
  summary.node.maxPid = total;
  summary.node.curProc = running;
}

// One node ("test") with its pods and kubelet stats, as a Snapshot.
struct NodeFixture {
  Snapshot snap;

  explicit NodeFixture(std::vector<Pod> pods, std::vector<PodStats> podStats = {}) {
    Node node;
    node.name = kNodeName;
    snap.nodes.push_back(node);
    snap.pods = std::move(pods);
    resolvePods(snap.pods, snap.priorityClasses);
    snap.stats[kNodeName].pods = std::move(podStats);
  }

  Summary& summary() { return snap.stats[kNodeName]; }
  NodeView view() const { return makeNodeView(snap, kNodeName); }
};

Policy kubeletRanking() {
  Policy pol;
  pol.ranking = RankingMode::Kubelet;
  return pol;
}

Policy parsePolicyOrFail(const std::string& text) {
  Diagnostics diagnostics;
  auto parsed = parsePolicyText(text, diagnostics);
  REQUIRE_MESSAGE(parsed.has_value(), diagnostics.joined());
  return *parsed;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// A ranking as "name, name, ..." (every pod here lives in "default" unless a test says so).
std::string names(const Ranking& ranking) {
  std::vector<std::string> out;
  for (const auto& r : ranking.pods) out.push_back(r.pod->name);
  return join(out);
}

std::string keys(const Ranking& ranking) {
  std::vector<std::string> out;
  for (const auto& r : ranking.pods) out.push_back(r.pod->key);
  return join(out);
}

// Signals compare as their names, so that a failure prints them.
std::string signalName(Signal signal) {
  return std::string(toString(signal));
}

std::string conditions(const EvictionDecision& decision) {
  return join(decision.conditions);
}

std::string evicted(const EvictionDecision& decision) {
  std::vector<std::string> out;
  for (const auto& e : decision.evict) out.push_back(e.pod->name);
  return join(out);
}

const SignalStatus* statusOf(const EvictionDecision& decision, Signal signal, bool hard) {
  for (const auto& st : decision.signals) {
    if (st.key.signal == signal && st.key.hard == hard) return &st;
  }
  return nullptr;
}

// Drives evaluateEviction as the kubelet's synchronize loop: `result.next` becomes the next
// state and a simulated monotonic clock advances between steps (no real time passes).
struct Simulation {
  NodeFixture& node;
  Policy pol;
  EvictionState state;
  SteadyTime now = SteadyTime{} + std::chrono::hours(24);

  EvictionDecision step(Duration advance) {
    now += advance;
    const NodeView view = node.view();
    EvictionResult result = evaluateEviction(view, pol, state, now);
    state = result.next;
    return result.decision;
  }
};

// The standard 5-pod memory set of TestMemoryPressure, TestMinReclaim and
// TestAllocatableMemoryPressure.
std::vector<Pod> standardMemoryPods() {
  return {
      makePod("guaranteed-low-priority-high-usage", -1,
              resources({{"cpu", "100m"}, {"memory", "1Gi"}}),
              resources({{"cpu", "100m"}, {"memory", "1Gi"}})),
      makePod("burstable-below-requests", 0, resources({{"cpu", "100m"}, {"memory", "100Mi"}}),
              resources({{"cpu", "200m"}, {"memory", "1Gi"}})),
      makePod("burstable-above-requests", 0, resources({{"cpu", "100m"}, {"memory", "100Mi"}}),
              resources({{"cpu", "200m"}, {"memory", "1Gi"}})),
      makePod("best-effort-high-priority-high-usage", 1),
      makePod("best-effort-low-priority-low-usage", -1),
  };
}

std::vector<PodStats> standardMemoryStats(const std::vector<Pod>& pods) {
  const std::uint64_t workingSets[] = {900 * kMi, 50 * kMi, 400 * kMi, 400 * kMi, 100 * kMi};
  std::vector<PodStats> out;
  for (std::size_t i = 0; i < pods.size(); ++i) out.push_back(memoryStats(pods[i], workingSets[i]));
  return out;
}

const char* const kMemoryVictim = "best-effort-low-priority-low-usage";

}  // namespace

// =============================================================================================
// 1. Rankings in "kubelet" mode (helpers_test.go, TestOrdered*)
// =============================================================================================

TEST_CASE(
    "kubelet: TestOrderedByExceedsRequestMemory - a pod over its memory request ranks "
    "before a lower-priority pod under it") {
  std::vector<Pod> pods = {
      makePod("below-requests", -1, resources({{"memory", "200Mi"}})),
      makePod("exceeds-requests", 1, resources({{"memory", "100Mi"}})),
  };
  NodeFixture node(pods, {memoryStats(pods[0], 199 * kMi), memoryStats(pods[1], 101 * kMi)});
  const NodeView view = node.view();

  CHECK(names(rankMemoryPressure(view, kubeletRanking())) == "exceeds-requests, below-requests");
  // The contract's default "priority" ranking puts priority first; the mode matters here.
  CHECK(names(rankMemoryPressure(view, Policy{})) == "below-requests, exceeds-requests");
}

TEST_CASE(
    "kubelet: TestOrderedByExceedsRequestDisk - a pod over its ephemeral-storage request "
    "ranks first") {
  std::vector<Pod> pods = {
      makePod("below-requests", -1, resources({{"ephemeral-storage", "200Mi"}})),
      makePod("exceeds-requests", 1, resources({{"ephemeral-storage", "100Mi"}})),
  };
  // rootfs + logs: 100Mi + 99Mi and 90Mi + 11Mi; neither pod has volumes.
  NodeFixture node(pods, {diskStats(pods[0], 199 * kMi), diskStats(pods[1], 101 * kMi)});

  const Ranking ranking = rankDiskPressure(node.view(), kubeletRanking(), Signal::NodeFsAvailable);
  CHECK(ranking.resource == "ephemeral-storage");
  CHECK(names(ranking) == "exceeds-requests, below-requests");
}

TEST_CASE("kubelet: TestOrderedByPriority - lower priority first") {
  // Input order [high, medium, low]; the kubelet test gives the pods no stats.
  std::vector<Pod> pods = {
      makePod("high-priority", 12534, resources({{"cpu", "200m"}, {"memory", "200Mi"}}),
              resources({{"cpu", "200m"}, {"memory", "200Mi"}})),
      makePod("medium-priority", 1, resources({{"cpu", "100m"}, {"memory", "100Mi"}}),
              resources({{"cpu", "200m"}, {"memory", "200Mi"}})),
      makePod("low-priority", -134),
  };
  NodeFixture node(pods);
  const NodeView view = node.view();
  const Policy pol = kubeletRanking();

  CHECK(names(rankMemoryPressure(view, pol)) == "low-priority, medium-priority, high-priority");
  CHECK(names(rankPidPressure(view, pol)) == "low-priority, medium-priority, high-priority");
  CHECK(names(rankDiskPressure(view, pol, Signal::NodeFsAvailable)) ==
        "low-priority, medium-priority, high-priority");
}

TEST_CASE("kubelet: TestOrderedByMemory - working set minus memory request, largest first") {
  const auto burstableReq = resources({{"memory", "100Mi"}});
  const auto burstableLim = resources({{"memory", "1Gi"}});
  const auto guaranteed = resources({{"memory", "1Gi"}});
  std::vector<Pod> pods = {
      makePod("best-effort-high", 0),
      makePod("best-effort-low", 0),
      makePod("burstable-high", 0, burstableReq, burstableLim),
      makePod("burstable-low", 0, burstableReq, burstableLim),
      makePod("guaranteed-high", 0, guaranteed, guaranteed),
      makePod("guaranteed-low", 0, guaranteed, guaranteed),
  };
  NodeFixture node(pods, {
                             memoryStats(pods[0], 500 * kMi),
                             memoryStats(pods[1], 300 * kMi),
                             memoryStats(pods[2], 800 * kMi),
                             memoryStats(pods[3], 300 * kMi),
                             memoryStats(pods[4], 800 * kMi),
                             memoryStats(pods[5], 200 * kMi),
                         });

  // Expected [pod3, pod1, pod2, pod4, pod5, pod6].
  CHECK(names(rankMemoryPressure(node.view(), kubeletRanking())) ==
        "burstable-high, best-effort-high, best-effort-low, burstable-low, guaranteed-high, "
        "guaranteed-low");
}

TEST_CASE(
    "kubelet: TestOrderedByPriorityMemory - exceeds request, then priority, then usage "
    "minus request") {
  const auto small = resources({{"memory", "100Mi"}});
  const auto large = resources({{"memory", "1Gi"}});
  // Input order [8..1].
  std::vector<Pod> pods = {
      makePod("below-requests-high-priority-low-usage", 1, large),   // 8
      makePod("below-requests-high-priority-high-usage", 1, large),  // 7
      makePod("below-requests-low-priority-low-usage", -1, large),   // 6
      makePod("below-requests-low-priority-high-usage", -1, large),  // 5
      makePod("above-requests-high-priority-low-usage", 1, small),   // 4
      makePod("above-requests-high-priority-high-usage", 1, small),  // 3
      makePod("above-requests-low-priority-low-usage", -1),          // 2
      makePod("above-requests-low-priority-high-usage", -1),         // 1
  };
  const std::uint64_t workingSets[] = {200 * kMi, 800 * kMi, 200 * kMi, 800 * kMi,
                                       150 * kMi, 600 * kMi, 50 * kMi,  500 * kMi};
  std::vector<PodStats> stats;
  for (std::size_t i = 0; i < pods.size(); ++i)
    stats.push_back(memoryStats(pods[i], workingSets[i]));
  NodeFixture node(pods, stats);

  CHECK(names(rankMemoryPressure(node.view(), kubeletRanking())) ==
        "above-requests-low-priority-high-usage, above-requests-low-priority-low-usage, "
        "above-requests-high-priority-high-usage, above-requests-high-priority-low-usage, "
        "below-requests-low-priority-high-usage, below-requests-low-priority-low-usage, "
        "below-requests-high-priority-high-usage, below-requests-high-priority-low-usage");
}

TEST_CASE("kubelet: TestOrderedByPriorityProcess - priority, then process count, largest first") {
  // Input order [4, 3, 2, 1].
  std::vector<Pod> pods = {
      makePod("high-priority-low-usage", 1),
      makePod("high-priority-high-usage", 1),
      makePod("low-priority-low-usage", -1),
      makePod("low-priority-high-usage", -1),
  };
  NodeFixture node(pods, {processStats(pods[0], 5), processStats(pods[1], 20),
                          processStats(pods[2], 6), processStats(pods[3], 20)});

  const Ranking ranking = rankPidPressure(node.view(), kubeletRanking());
  CHECK(ranking.resource == "pids");
  CHECK(names(ranking) ==
        "low-priority-high-usage, low-priority-low-usage, high-priority-high-usage, "
        "high-priority-low-usage");
  REQUIRE(ranking.pods.size() == 4);
  CHECK(ranking.pods[0].usage == 20);
  CHECK(ranking.pods[3].usage == 5);
}

TEST_CASE(
    "kubelet: TestOrderedbyDisk - disk usage minus ephemeral-storage request, largest "
    "first") {
  const auto burstableReq = resources({{"ephemeral-storage", "100Mi"}});
  const auto burstableLim = resources({{"ephemeral-storage", "400Mi"}});
  const auto guaranteed = resources({{"ephemeral-storage", "400Mi"}});
  std::vector<Pod> pods = {
      makePod("best-effort-high", 0),
      makePod("best-effort-low", 0),
      makePod("burstable-high", 0, burstableReq, burstableLim),
      makePod("burstable-low", 0, burstableReq, burstableLim),
      makePod("guaranteed-high", 0, guaranteed, guaranteed),
      makePod("guaranteed-low", 0, guaranteed, guaranteed),
  };
  // Totals of rootfs + logs + local volume.
  NodeFixture node(pods, {
                             diskStats(pods[0], (50 + 100 + 150) * kMi),
                             diskStats(pods[1], (25 + 25 + 50) * kMi),
                             diskStats(pods[2], (150 + 150 + 50) * kMi),
                             diskStats(pods[3], (25 + 35 + 50) * kMi),
                             diskStats(pods[4], (225 + 100 + 50) * kMi),
                             diskStats(pods[5], (25 + 45 + 50) * kMi),
                         });

  // Expected [pod1, pod3, pod2, pod4, pod5, pod6].
  CHECK(names(rankDiskPressure(node.view(), kubeletRanking(), Signal::NodeFsAvailable)) ==
        "best-effort-high, burstable-high, best-effort-low, burstable-low, guaranteed-high, "
        "guaranteed-low");
}

TEST_CASE(
    "kubelet: TestOrderedByPriorityDisk - exceeds request, then priority, then usage "
    "minus request") {
  const auto small = resources({{"ephemeral-storage", "100Mi"}});
  const auto large = resources({{"ephemeral-storage", "1Gi"}});
  // Input order [8..1]; totals are rootfs + logs + local volume.
  std::vector<Pod> pods = {
      makePod("below-requests-high-priority-low-usage", 1, large),   // 8: 100+60+40
      makePod("below-requests-high-priority-high-usage", 1, large),  // 7: 250+500+50
      makePod("below-requests-low-priority-low-usage", -1, large),   // 6: 50+100+50
      makePod("below-requests-low-priority-high-usage", -1, large),  // 5: 500+200+100
      makePod("above-requests-high-priority-low-usage", 1, small),   // 4: 90+50+10
      makePod("above-requests-high-priority-high-usage", 1, small),  // 3: 200+150+250
      makePod("above-requests-low-priority-low-usage", -1),          // 2: 10+10+30
      makePod("above-requests-low-priority-high-usage", -1),         // 1: 200+100+200
  };
  const std::uint64_t used[] = {200 * kMi, 800 * kMi, 200 * kMi, 800 * kMi,
                                150 * kMi, 600 * kMi, 50 * kMi,  500 * kMi};
  std::vector<PodStats> stats;
  for (std::size_t i = 0; i < pods.size(); ++i) stats.push_back(diskStats(pods[i], used[i]));
  NodeFixture node(pods, stats);

  CHECK(names(rankDiskPressure(node.view(), kubeletRanking(), Signal::NodeFsAvailable)) ==
        "above-requests-low-priority-high-usage, above-requests-low-priority-low-usage, "
        "above-requests-high-priority-high-usage, above-requests-high-priority-low-usage, "
        "below-requests-low-priority-high-usage, below-requests-low-priority-low-usage, "
        "below-requests-high-priority-high-usage, below-requests-high-priority-low-usage");
}

TEST_CASE("kubelet: TestOrderedbyInodes - inode usage, largest first (snapshot JSON)") {
  // Built through parseSnapshot so that pods[].ephemeral-storage.inodesUsed is read as a user's
  // snapshot carries it. Totals of rootfs + logs + volume inodes: 200000, 300000, 400000.
  const char* text = R"({
    "nodes": [ { "metadata": { "name": "test" },
                 "status": { "allocatable": { "cpu": "4", "memory": "2Gi", "pods": "110" } } } ],
    "pods": [
      { "metadata": { "name": "low", "namespace": "default", "uid": "u-low" },
        "spec": { "nodeName": "test", "priority": 0, "containers": [ { "name": "low" } ] },
        "status": { "phase": "Running" } },
      { "metadata": { "name": "medium", "namespace": "default", "uid": "u-medium" },
        "spec": { "nodeName": "test", "priority": 0, "containers": [ { "name": "medium" } ] },
        "status": { "phase": "Running" } },
      { "metadata": { "name": "high", "namespace": "default", "uid": "u-high" },
        "spec": { "nodeName": "test", "priority": 0, "containers": [ { "name": "high" } ] },
        "status": { "phase": "Running" } }
    ],
    "stats": { "test": { "node": { "nodeName": "test" }, "pods": [
      { "podRef": { "name": "low", "namespace": "default", "uid": "u-low" },
        "ephemeral-storage": { "usedBytes": 1000, "inodesUsed": 200000 } },
      { "podRef": { "name": "medium", "namespace": "default", "uid": "u-medium" },
        "ephemeral-storage": { "usedBytes": 1000, "inodesUsed": 300000 } },
      { "podRef": { "name": "high", "namespace": "default", "uid": "u-high" },
        "ephemeral-storage": { "usedBytes": 1000, "inodesUsed": 400000 } }
    ] } }
  })";
  Diagnostics diagnostics;
  auto snap = parseSnapshotText(text, diagnostics);
  REQUIRE_MESSAGE(snap.has_value(), diagnostics.joined());
  const NodeView view = makeNodeView(*snap, "test");

  const Ranking ranking = rankDiskPressure(view, kubeletRanking(), Signal::NodeFsInodesFree);
  CHECK(ranking.resource == "inodes");
  CHECK(names(ranking) == "high, medium, low");
  REQUIRE(ranking.pods.size() == 3);
  CHECK(ranking.pods[0].usage == 400000);
  CHECK(ranking.pods[2].usage == 200000);
}

TEST_CASE("kubelet: TestOrderedByPriorityInodes - priority, then inode usage") {
  // Input order [4, 3, 2, 1]; totals of rootfs + logs + volume inodes.
  std::vector<Pod> pods = {
      makePod("high-priority-low-usage", 1),
      makePod("high-priority-high-usage", 1),
      makePod("low-priority-low-usage", -1),
      makePod("low-priority-high-usage", -1),
  };
  NodeFixture node(pods, {inodeStats(pods[0], 150000), inodeStats(pods[1], 350000),
                          inodeStats(pods[2], 100000), inodeStats(pods[3], 400000)});

  CHECK(names(rankDiskPressure(node.view(), kubeletRanking(), Signal::NodeFsInodesFree)) ==
        "low-priority-high-usage, low-priority-low-usage, high-priority-high-usage, "
        "high-priority-low-usage");
}

TEST_CASE("kubelet: ties left open by the kubelet's unstable sort break by pod key") {
  // The kubelet sorts with sort.Sort (not stable), so pods equal under its comparators come out
  // in no defined order. docs/reference.md §4 breaks such ties by pod key ascending: this is our
  // deterministic order, not a kubelet fact. Same-named pods in different namespaces appear as
  // in TestMakeSignalObservations (pod1 in ns1 and ns2).
  std::vector<Pod> pods = {
      makePod("pod1", 0, {}, {}, "ns2"),
      makePod("zeta", 0, {}, {}, "ns1"),
      makePod("pod1", 0, {}, {}, "ns1"),
  };
  std::vector<PodStats> stats;
  for (const auto& pod : pods) {
    PodStats s = memoryStats(pod, 100 * kMi);
    s.processCount = 7;
    s.ephemeralStorageUsedBytes = 10 * kMi;
    s.ephemeralStorageInodesUsed = 1000;
    stats.push_back(s);
  }
  NodeFixture node(pods, stats);
  const NodeView view = node.view();
  const Policy pol = kubeletRanking();

  const std::string expected = "ns1/pod1, ns1/zeta, ns2/pod1";
  CHECK(keys(rankMemoryPressure(view, pol)) == expected);
  CHECK(keys(rankPidPressure(view, pol)) == expected);
  CHECK(keys(rankDiskPressure(view, pol, Signal::NodeFsAvailable)) == expected);
  CHECK(keys(rankDiskPressure(view, pol, Signal::NodeFsInodesFree)) == expected);
}

// =============================================================================================
// 2. Eviction-manager scenarios (eviction_manager_test.go), kubelet ranking, one pod per cycle
// =============================================================================================

namespace {

// Fixtures of the manager tests: MaxPodGracePeriodSeconds 5, PressureTransitionPeriod 5m.
std::string managerPolicy(const std::string& thresholds) {
  return "{" + thresholds +
         R"(, "evictionMaxPodGracePeriod": 5, "evictionPressureTransitionPeriod": "5m",)"
         R"( "evictionMaxPodsPerCycle": 1, "ranking": "kubelet"})";
}

}  // namespace

TEST_CASE("kubelet: TestMemoryPressure - soft then hard memory.available, one pod per cycle") {
  std::vector<Pod> pods = standardMemoryPods();
  NodeFixture node(pods, standardMemoryStats(pods));
  Simulation sim{node,
                 parsePolicyOrFail(managerPolicy(
                     R"("evictionHard": { "memory.available": "1Gi" },
                        "evictionSoft": { "memory.available": "2Gi" },
                        "evictionSoftGracePeriod": { "memory.available": "2m" })")),
                 {}};

  // Step 1, t0: 2Gi available -> no pressure, nothing killed (2Gi < 2Gi is false).
  setMemory(node.summary(), 2 * kGi);
  EvictionDecision d = sim.step(Duration(0));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());
  REQUIRE(statusOf(d, Signal::MemoryAvailable, false) != nullptr);
  CHECK_FALSE(statusOf(d, Signal::MemoryAvailable, false)->met);

  // Step 2, +1m: 1500Mi -> soft threshold met: MemoryPressure at once, grace not elapsed.
  setMemory(node.summary(), 1500 * kMi);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "MemoryPressure");
  CHECK(d.evict.empty());
  REQUIRE(statusOf(d, Signal::MemoryAvailable, false) != nullptr);
  CHECK(statusOf(d, Signal::MemoryAvailable, false)->met);
  CHECK_FALSE(statusOf(d, Signal::MemoryAvailable, false)->actionable);

  // The kubelet's ranking: the victim exceeds its (zero) request at the lowest priority; the
  // guaranteed pod at priority -1 is under its request and ranks after it.
  REQUIRE_FALSE(d.memory.pods.empty());
  CHECK(d.memory.pods[0].pod->name == kMemoryVictim);

  // Step 3, +3m (t = 4m): the soft threshold has been met for 3m >= 2m: kill the victim with
  // min(evictionMaxPodGracePeriod 5, terminationGracePeriodSeconds 30) = 5.
  d = sim.step(minutes(3));
  CHECK(conditions(d) == "MemoryPressure");
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == kMemoryVictim);
  CHECK(signalName(d.evict[0].signal) == signalName(Signal::MemoryAvailable));
  CHECK_FALSE(d.evict[0].hard);
  CHECK(d.evict[0].gracePeriodSeconds == 5);
  CHECK(d.evict[0].message ==
        "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1500Mi. ");

  // Step 4, +20m: 3Gi -> no pressure, nothing killed.
  setMemory(node.summary(), 3 * kGi);
  d = sim.step(minutes(20));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());

  // Step 5, +1m: 500Mi -> hard threshold met: kill the victim at once.
  setMemory(node.summary(), 500 * kMi);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "MemoryPressure");
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == kMemoryVictim);
  CHECK(d.evict[0].hard);
  // Contract difference: a hard threshold kills with grace 0; the recent kubelet passes 1 (the
  // older kubelet test, commit d19aec8b, expected 0).
  CHECK(d.evict[0].gracePeriodSeconds == 0);
  CHECK(d.evict[0].message ==
        "The node was low on resource: memory. Threshold quantity: 1Gi, available: 500Mi. ");

  // Step 6, +1m: 2Gi -> no threshold met, but MemoryPressure is held for the transition period.
  setMemory(node.summary(), 2 * kGi);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "MemoryPressure");
  CHECK(d.evict.empty());
  for (const auto& st : d.signals) CHECK_FALSE(st.met);

  // Step 7, +5m: the transition period (5m since step 5) has passed.
  d = sim.step(minutes(5));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());
}

TEST_CASE(
    "kubelet: TestMemoryPressure with the cap raised - the contract's shortfall-covering "
    "prefix") {
  // Contract difference: the kubelet evicts one pod per cycle; nodewarden evicts the shortest
  // prefix of the ranking whose usage covers threshold + minimum reclaim - available, up to
  // evictionMaxPodsPerCycle. Step 3 of TestMemoryPressure with a cap of 5: the shortfall is
  // 2Gi - 1500Mi = 548Mi, covered by 100Mi + 400Mi + 400Mi.
  std::vector<Pod> pods = standardMemoryPods();
  NodeFixture node(pods, standardMemoryStats(pods));
  Policy pol = parsePolicyOrFail(managerPolicy(
      R"("evictionHard": { "memory.available": "1Gi" },
         "evictionSoft": { "memory.available": "2Gi" },
         "evictionSoftGracePeriod": { "memory.available": "2m" })"));
  pol.maxPodsPerCycle = 5;
  Simulation sim{node, pol, {}};
  setMemory(node.summary(), 1500 * kMi);
  EvictionDecision d = sim.step(minutes(1));
  CHECK(d.evict.empty());
  d = sim.step(minutes(3));
  CHECK(evicted(d) ==
        "best-effort-low-priority-low-usage, burstable-above-requests, "
        "best-effort-high-priority-high-usage");
  for (const auto& e : d.evict) CHECK(e.gracePeriodSeconds == 5);
}

TEST_CASE("kubelet: TestMemoryPressure_VerifyPodStatus - the exact memory eviction message") {
  std::vector<Pod> pods = {
      makePod("below-requests", 0, resources({{"memory", "1Gi"}}), resources({{"memory", "1Gi"}})),
      makePod("above-requests", 0, resources({{"memory", "100Mi"}}),
              resources({{"memory", "1Gi"}})),
  };
  // The fake stats carry no per-container memory, so the message has no container fragment.
  NodeFixture node(pods, {memoryStats(pods[0], 900 * kMi), memoryStats(pods[1], 700 * kMi)});
  Simulation sim{
      node,
      parsePolicyOrFail(managerPolicy(R"("evictionHard": { "memory.available": "2Gi" })")),
      {}};
  setMemory(node.summary(), 1500 * kMi);

  EvictionDecision d = sim.step(Duration(0));
  CHECK(conditions(d) == "MemoryPressure");
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == "above-requests");
  CHECK(d.evict[0].message ==
        "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1500Mi. ");
}

TEST_CASE("kubelet: TestPIDPressure - soft then hard pid.available, one pod per cycle") {
  std::vector<Pod> pods = {
      makePod("high-priority-high-usage", 1),      makePod("default-priority-low-usage", 0),
      makePod("default-priority-medium-usage", 0), makePod("low-priority-high-usage", -1),
      makePod("low-priority-low-usage", -1),
  };
  NodeFixture node(
      pods, {processStats(pods[0], 900), processStats(pods[1], 100), processStats(pods[2], 400),
             processStats(pods[3], 600), processStats(pods[4], 50)});
  Simulation sim{node,
                 parsePolicyOrFail(managerPolicy(
                     R"("evictionHard": { "pid.available": "1200" },
                        "evictionSoft": { "pid.available": "1500" },
                        "evictionSoftGracePeriod": { "pid.available": "2m" })")),
                 {}};
  const char* const victim = "low-priority-high-usage";

  // Step 1, t0: 300 running of 2000 -> 1700 available: no pressure.
  setPids(node.summary(), 2000, 300);
  EvictionDecision d = sim.step(Duration(0));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());

  // Step 2, +1m: 700 running -> 1300: soft met, PIDPressure, no kill.
  setPids(node.summary(), 2000, 700);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "PIDPressure");
  CHECK(d.evict.empty());
  REQUIRE(d.pids.has_value());
  REQUIRE_FALSE(d.pids->pods.empty());
  CHECK(d.pids->pods[0].pod->name == victim);

  // Step 3, +3m: unchanged -> the grace period has elapsed: kill with grace 5.
  d = sim.step(minutes(3));
  CHECK(conditions(d) == "PIDPressure");
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == victim);
  CHECK(signalName(d.evict[0].signal) == signalName(Signal::PidAvailable));
  CHECK(d.evict[0].gracePeriodSeconds == 5);
  CHECK(d.evict[0].message ==
        "The node was low on resource: pids. Threshold quantity: 1500, available: 1300. ");

  // Step 4, +20m: 300 running -> no pressure.
  setPids(node.summary(), 2000, 300);
  d = sim.step(minutes(20));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());

  // Step 5, +1m: 1200 running -> 800 available: hard met, kill at once.
  setPids(node.summary(), 2000, 1200);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "PIDPressure");
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == victim);
  CHECK(d.evict[0].hard);
  // Contract difference: hard grace 0 (the recent kubelet passes 1).
  CHECK(d.evict[0].gracePeriodSeconds == 0);

  // Step 6, +1m: 300 running -> still PIDPressure (transition period), no kill.
  setPids(node.summary(), 2000, 300);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "PIDPressure");
  CHECK(d.evict.empty());

  // Step 7, +5m: no pressure.
  d = sim.step(minutes(5));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());
}

TEST_CASE("kubelet: TestPIDPressure_VerifyPodStatus - the exact pids eviction message") {
  std::vector<Pod> pods = {makePod("pod1", -1), makePod("pod2", 0)};
  NodeFixture node(pods, {processStats(pods[0], 2), processStats(pods[1], 2)});
  Simulation sim{
      node, parsePolicyOrFail(managerPolicy(R"("evictionHard": { "pid.available": "1200" })")), {}};
  setPids(node.summary(), 1500, 1000);

  EvictionDecision d = sim.step(Duration(0));
  CHECK(conditions(d) == "PIDPressure");
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == "pod1");
  CHECK(d.evict[0].message ==
        "The node was low on resource: pids. Threshold quantity: 1200, available: 500. ");
}

TEST_CASE("kubelet: TestDiskPressureNodeFs (no image fs) - soft then hard nodefs.available") {
  std::vector<Pod> pods = {
      makePod("low-priority-high-usage", -1, resources({{"cpu", "100m"}, {"memory", "1Gi"}}),
              resources({{"cpu", "100m"}, {"memory", "1Gi"}})),
      makePod("below-requests", 0, resources({{"cpu", "100m"}, {"memory", "100Mi"}}),
              resources({{"cpu", "200m"}, {"memory", "1Gi"}})),
      makePod("above-requests", 0, resources({{"cpu", "100m"}, {"memory", "100Mi"}}),
              resources({{"cpu", "200m"}, {"memory", "1Gi"}})),
      makePod("high-priority-high-usage", 1),
      makePod("low-priority-low-usage", -1),
  };
  // rootfs 900Mi; logs 50Mi; rootfs 400Mi; a 400Mi local volume the pod does not have (0);
  // rootfs 100Mi. No pod requests ephemeral-storage.
  NodeFixture node(
      pods, {diskStats(pods[0], 900 * kMi), diskStats(pods[1], 50 * kMi),
             diskStats(pods[2], 400 * kMi), diskStats(pods[3], 0), diskStats(pods[4], 100 * kMi)});
  Simulation sim{node,
                 parsePolicyOrFail(managerPolicy(
                     R"("evictionHard": { "nodefs.available": "1Gi" },
                        "evictionSoft": { "nodefs.available": "2Gi" },
                        "evictionSoftGracePeriod": { "nodefs.available": "2m" })")),
                 {}};
  const char* const victim = "low-priority-high-usage";

  // t0: 16Gi available -> no DiskPressure.
  setNodeFs(node.summary(), 16 * kGi);
  EvictionDecision d = sim.step(Duration(0));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());

  // +1m: 1.5Gi (soft level) -> DiskPressure, no kill.
  setNodeFs(node.summary(), bytesOf("1.5Gi"));
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "DiskPressure");
  CHECK(d.evict.empty());
  REQUIRE(d.ephemeralStorage.has_value());
  REQUIRE_FALSE(d.ephemeralStorage->pods.empty());
  CHECK(d.ephemeralStorage->pods[0].pod->name == victim);

  // +3m: kill the victim with grace 5.
  d = sim.step(minutes(3));
  CHECK(conditions(d) == "DiskPressure");
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == victim);
  CHECK(signalName(d.evict[0].signal) == signalName(Signal::NodeFsAvailable));
  CHECK(d.evict[0].gracePeriodSeconds == 5);
  // 1.5Gi prints as 1536Mi, as in the kubelet's expected messages.
  CHECK(d.evict[0].message ==
        "The node was low on resource: ephemeral-storage. Threshold quantity: 2Gi, available: "
        "1536Mi. ");

  // +20m: back to 16Gi -> no pressure.
  setNodeFs(node.summary(), 16 * kGi);
  d = sim.step(minutes(20));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());

  // +1m: 750Mi (hard level) -> DiskPressure, kill the victim at once.
  setNodeFs(node.summary(), 750 * kMi);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "DiskPressure");
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == victim);
  CHECK(d.evict[0].hard);
  // Contract difference: hard grace 0 (the recent kubelet passes 1).
  CHECK(d.evict[0].gracePeriodSeconds == 0);

  // +1m: 16Gi -> DiskPressure held for the transition period, no kill.
  setNodeFs(node.summary(), 16 * kGi);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "DiskPressure");
  CHECK(d.evict.empty());

  // +5m: no pressure.
  d = sim.step(minutes(5));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());
}

TEST_CASE(
    "kubelet: TestDiskPressureNodeFs_VerifyPodStatus (no image fs) - message with the "
    "container over its request") {
  std::vector<Pod> pods = {
      makePod("below-requests", 0, resources({{"ephemeral-storage", "1Gi"}}),
              resources({{"ephemeral-storage", "1Gi"}})),
      makePod("above-requests", 0, resources({{"ephemeral-storage", "100Mi"}}),
              resources({{"ephemeral-storage", "1Gi"}})),
  };
  auto withRootfs = [](const Pod& pod, std::uint64_t rootfs) {
    PodStats s = diskStats(pod, rootfs);
    ContainerStats c;
    c.name = pod.name;
    c.rootfsUsedBytes = rootfs;
    // newPodDiskStats (helpers_test.go) sets the logs too; the kubelet writes a container's
    // usage only when it has both (evictionMessage).
    c.logsUsedBytes = 0;
    s.containers.push_back(c);
    return s;
  };
  NodeFixture node(pods, {withRootfs(pods[0], 900 * kMi), withRootfs(pods[1], 700 * kMi)});
  Simulation sim{
      node,
      parsePolicyOrFail(managerPolicy(R"("evictionHard": { "nodefs.available": "2Gi" })")),
      {}};
  node.summary().node.nodeFs.availableBytes = bytesOf("1.5Gi");
  node.summary().node.nodeFs.capacityBytes = 10 * kGi;

  EvictionDecision d = sim.step(Duration(0));
  CHECK(conditions(d) == "DiskPressure");
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == "above-requests");
  CHECK(d.evict[0].message ==
        "The node was low on resource: ephemeral-storage. Threshold quantity: 2Gi, available: "
        "1536Mi. Container above-requests was using 700Mi, request is 100Mi, has larger "
        "consumption of ephemeral-storage. ");
}

TEST_CASE("kubelet: TestInodePressureFsInodes (no image fs) - soft then hard nodefs.inodesFree") {
  std::vector<Pod> pods = {
      makePod("low-priority-high-usage", -1, resources({{"cpu", "100m"}, {"memory", "1Gi"}}),
              resources({{"cpu", "100m"}, {"memory", "1Gi"}})),
      makePod("below-requests", 0, resources({{"cpu", "100m"}, {"memory", "100Mi"}}),
              resources({{"cpu", "200m"}, {"memory", "1Gi"}})),
      makePod("above-requests", 0, resources({{"cpu", "100m"}, {"memory", "100Mi"}}),
              resources({{"cpu", "200m"}, {"memory", "1Gi"}})),
      makePod("high-priority-high-usage", 1),
      makePod("low-priority-low-usage", -1),
  };
  // Rootfs inodes used, written as quantities in the kubelet test (900Mi = 900 * 2^20 inodes).
  NodeFixture node(pods, {inodeStats(pods[0], 900 * kMi), inodeStats(pods[1], 50 * kMi),
                          inodeStats(pods[2], 400 * kMi), inodeStats(pods[3], 400 * kMi),
                          inodeStats(pods[4], 100 * kMi)});
  Simulation sim{node,
                 parsePolicyOrFail(managerPolicy(
                     R"("evictionHard": { "nodefs.inodesFree": "1Mi" },
                        "evictionSoft": { "nodefs.inodesFree": "2Mi" },
                        "evictionSoftGracePeriod": { "nodefs.inodesFree": "2m" })")),
                 {}};
  const char* const victim = "low-priority-high-usage";

  setNodeFsInodes(node.summary(), 3 * kMi, 4 * kMi);
  EvictionDecision d = sim.step(Duration(0));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());

  setNodeFsInodes(node.summary(), bytesOf("1.5Mi"), 4 * kMi);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "DiskPressure");
  CHECK(d.evict.empty());

  d = sim.step(minutes(3));
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == victim);
  CHECK(signalName(d.evict[0].signal) == signalName(Signal::NodeFsInodesFree));
  CHECK(d.evict[0].gracePeriodSeconds == 5);
  CHECK(d.evict[0].message.rfind("The node was low on resource: inodes. ", 0) == 0);

  setNodeFsInodes(node.summary(), 3 * kMi, 4 * kMi);
  d = sim.step(minutes(20));
  CHECK(conditions(d) == "");

  setNodeFsInodes(node.summary(), bytesOf("0.5Mi"), 4 * kMi);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "DiskPressure");
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == victim);
  CHECK(d.evict[0].gracePeriodSeconds == 0);  // contract: hard grace 0 (kubelet: 1)

  setNodeFsInodes(node.summary(), 3 * kMi, 4 * kMi);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "DiskPressure");
  CHECK(d.evict.empty());

  d = sim.step(minutes(5));
  CHECK(conditions(d) == "");
}

TEST_CASE(
    "kubelet: TestMinReclaim - a threshold acted on stays met until threshold + minimum "
    "reclaim") {
  std::vector<Pod> pods = standardMemoryPods();
  NodeFixture node(pods, standardMemoryStats(pods));
  const std::string policyText = managerPolicy(
      R"("evictionHard": { "memory.available": "1Gi" },
         "evictionMinimumReclaim": { "memory.available": "500Mi" })");
  Simulation sim{node, parsePolicyOrFail(policyText), {}};

  // Step 1, t0: 2Gi -> no pressure.
  setMemory(node.summary(), 2 * kGi);
  EvictionDecision d = sim.step(Duration(0));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());

  // Step 2, +1m: 500Mi -> pressure, kill the victim (contract: hard grace 0; kubelet: 1).
  setMemory(node.summary(), 500 * kMi);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "MemoryPressure");
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == kMemoryVictim);
  CHECK(d.evict[0].gracePeriodSeconds == 0);
  REQUIRE(statusOf(d, Signal::MemoryAvailable, true) != nullptr);
  CHECK(statusOf(d, Signal::MemoryAvailable, true)->minReclaim == std::int64_t(500 * kMi));

  // Contract difference: with a larger cap nodewarden evicts the prefix covering
  // 1Gi + 500Mi - 500Mi = 1Gi: 100Mi + 400Mi + 400Mi + 900Mi (the kubelet: one pod).
  {
    Policy wide = parsePolicyOrFail(policyText);
    wide.maxPodsPerCycle = 5;
    const NodeView view = node.view();
    EvictionResult r = evaluateEviction(view, wide, EvictionState{}, sim.now);
    CHECK(evicted(r.decision) ==
          "best-effort-low-priority-low-usage, burstable-above-requests, "
          "best-effort-high-priority-high-usage, guaranteed-low-priority-high-usage");
  }

  // Step 3, +1m: 1.2Gi -> still met, since 1.2Gi < 1Gi + 500Mi: the victim again.
  setMemory(node.summary(), bytesOf("1.2Gi"));
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "MemoryPressure");
  REQUIRE(statusOf(d, Signal::MemoryAvailable, true) != nullptr);
  CHECK(statusOf(d, Signal::MemoryAvailable, true)->met);
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == kMemoryVictim);
  CHECK(d.evict[0].gracePeriodSeconds == 0);

  // Step 4, +1m: 2Gi -> no threshold met; MemoryPressure held (transition period).
  setMemory(node.summary(), 2 * kGi);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "MemoryPressure");
  REQUIRE(statusOf(d, Signal::MemoryAvailable, true) != nullptr);
  CHECK_FALSE(statusOf(d, Signal::MemoryAvailable, true)->met);
  CHECK(d.evict.empty());

  // Step 5, +5m: no pressure.
  d = sim.step(minutes(5));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());
}

TEST_CASE(
    "kubelet: TestStaticCriticalPodsAreNotEvicted - a static critical pod is ranked but "
    "never evicted") {
  Pod critical =
      makePod("critical", kSystemCriticalPriority, resources({{"cpu", "100m"}, {"memory", "1Gi"}}),
              resources({{"cpu", "100m"}, {"memory", "1Gi"}}), "kube-system");
  critical.annotations["kubernetes.io/config.source"] = "file";
  NodeFixture node({critical});
  node.summary().pods = {memoryStats(node.snap.pods[0], 800 * kMi)};
  Simulation sim{node,
                 parsePolicyOrFail(managerPolicy(
                     R"("evictionHard": { "memory.available": "1Gi" },
                        "evictionSoft": { "memory.available": "2Gi" },
                        "evictionSoftGracePeriod": { "memory.available": "2m" })")),
                 {}};
  CHECK(node.snap.pods[0].critical);

  // +1m: 1500Mi -> MemoryPressure, no kill.
  setMemory(node.summary(), 1500 * kMi);
  EvictionDecision d = sim.step(minutes(1));
  CHECK(conditions(d) == "MemoryPressure");
  CHECK(d.evict.empty());

  // +3m: the soft threshold is actionable, but the critical pod must not be killed. It is still
  // ranked (docs/reference.md §4: every pod, critical ones last and marked).
  d = sim.step(minutes(3));
  CHECK(conditions(d) == "MemoryPressure");
  REQUIRE(statusOf(d, Signal::MemoryAvailable, false) != nullptr);
  CHECK(statusOf(d, Signal::MemoryAvailable, false)->actionable);
  CHECK(d.evict.empty());
  REQUIRE(d.memory.pods.size() == 1);
  CHECK(d.memory.pods[0].pod->key == "kube-system/critical");
  CHECK_FALSE(d.memory.pods[0].evictable);
  CHECK(d.memory.pods[0].notEvictableReason == "critical pod");

  // +20m: 3Gi -> no pressure.
  setMemory(node.summary(), 3 * kGi);
  d = sim.step(minutes(20));
  CHECK(conditions(d) == "");

  // The priority unset (still a static pod in kube-system): +1m 500Mi -> MemoryPressure. The
  // kubelet test asserts only the pressure here; the contract also forbids evicting the pod
  // (static pods are critical whatever their priority).
  node.snap.pods[0].specPriority.reset();
  resolvePods(node.snap.pods, node.snap.priorityClasses);
  CHECK(node.snap.pods[0].priority == 0);
  CHECK(node.snap.pods[0].critical);
  setMemory(node.summary(), 500 * kMi);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "MemoryPressure");
  CHECK(d.evict.empty());
}

namespace {

// A kubelet Summary as JSON: node memory, the "pods" system container and pod working sets.
std::string allocatableSummaryJson(std::uint64_t available,
                                   const std::vector<std::pair<const Pod*, std::uint64_t>>& pods,
                                   bool extraPod) {
  Json summary = {
      {"node",
       {{"nodeName", "test"},
        {"memory", {{"availableBytes", available}, {"workingSetBytes", available}}},
        {"systemContainers",
         Json::array(
             {{{"name", "kubelet"}, {"memory", {{"workingSetBytes", 1}}}},
              {{"name", "pods"},
               {"memory", {{"availableBytes", available}, {"workingSetBytes", available}}}}})}}},
      {"pods", Json::array()}};
  for (const auto& [pod, workingSet] : pods) {
    summary["pods"].push_back(
        {{"podRef", {{"name", pod->name}, {"namespace", pod->ns}, {"uid", pod->uid}}},
         {"memory", {{"workingSetBytes", workingSet}}}});
  }
  if (extraPod) {
    // A pod the kubelet has stats for but that is not in the active list.
    summary["pods"].push_back(
        {{"podRef", {{"name", "guaranteed-high-2"}, {"namespace", "default"}, {"uid", "g2"}}},
         {"memory", {{"workingSetBytes", kGi}}}});
  }
  return summary.dump();
}

Summary parseSummaryOrFail(const std::string& text) {
  Diagnostics diagnostics;
  auto json = parseJsonText(text, diagnostics);
  REQUIRE_MESSAGE(json.has_value(), diagnostics.joined());
  auto summary = parseSummary(*json, "stats.test", diagnostics);
  REQUIRE_MESSAGE(summary.has_value(), diagnostics.joined());
  return *summary;
}

}  // namespace

TEST_CASE(
    "kubelet: TestAllocatableMemoryPressure - allocatableMemory.available from the "
    "\"pods\" system container") {
  std::vector<Pod> pods = standardMemoryPods();
  NodeFixture node(pods);
  const std::uint64_t workingSets[] = {900 * kMi, 50 * kMi, 400 * kMi, 400 * kMi, 100 * kMi};
  auto summaryFor = [&](std::uint64_t available, bool extraPod) {
    std::vector<std::pair<const Pod*, std::uint64_t>> usage;
    for (std::size_t i = 0; i < node.snap.pods.size(); ++i) {
      usage.emplace_back(&node.snap.pods[i], workingSets[i]);
    }
    return parseSummaryOrFail(allocatableSummaryJson(available, usage, extraPod));
  };
  Simulation sim{node,
                 parsePolicyOrFail(
                     managerPolicy(R"("evictionHard": { "allocatableMemory.available": "1Gi" })")),
                 {}};

  // Step 1, t0: 4Gi -> no pressure.
  node.summary() = summaryFor(4 * kGi, false);
  EvictionDecision d = sim.step(Duration(0));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());
  REQUIRE(statusOf(d, Signal::AllocatableMemoryAvailable, true) != nullptr);
  CHECK(statusOf(d, Signal::AllocatableMemoryAvailable, true)->available == std::int64_t(4 * kGi));
  CHECK(statusOf(d, Signal::AllocatableMemoryAvailable, true)->capacity == std::int64_t(8 * kGi));

  // Step 2, +1m: 500Mi, plus stats of a pod not in the active list -> pressure, kill the victim
  // (contract: hard grace 0; kubelet: 1).
  node.summary() = summaryFor(500 * kMi, true);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "MemoryPressure");
  REQUIRE(d.evict.size() == 1);
  CHECK(d.evict[0].pod->name == kMemoryVictim);
  CHECK(signalName(d.evict[0].signal) == signalName(Signal::AllocatableMemoryAvailable));
  CHECK(d.evict[0].gracePeriodSeconds == 0);
  CHECK(d.evict[0].message ==
        "The node was low on resource: memory. Threshold quantity: 1Gi, available: 500Mi. ");
  CHECK(d.memory.pods.size() == 5);  // the extra pod's stats rank no pod

  // Step 3, +1m: 2Gi, extra stats removed -> MemoryPressure held (transition), no kill.
  node.summary() = summaryFor(2 * kGi, false);
  d = sim.step(minutes(1));
  CHECK(conditions(d) == "MemoryPressure");
  CHECK(d.evict.empty());

  // Step 4, +5m: no pressure.
  d = sim.step(minutes(5));
  CHECK(conditions(d) == "");
  CHECK(d.evict.empty());
}

TEST_CASE(
    "kubelet: TestSortByEvictionPriority - memory signals are acted on before nodefs and "
    "pid") {
  std::vector<Pod> pods = standardMemoryPods();
  std::vector<PodStats> stats = standardMemoryStats(pods);
  for (auto& s : stats) {
    s.processCount = 10;
    s.ephemeralStorageUsedBytes = 10 * kMi;
  }
  NodeFixture node(pods, stats);
  setMemory(node.summary(), 100 * kMi);
  setNodeFs(node.summary(), 10 * kMi);
  setPids(node.summary(), 1000, 990);

  SUBCASE("memory first: [nodefs.available, pid.available, memory.available]") {
    Policy pol = parsePolicyOrFail(managerPolicy(
        R"("evictionHard": { "nodefs.available": "1Gi", "pid.available": "100",
                             "memory.available": "1Gi" })"));
    REQUIRE(pol.thresholds.size() == 3);
    CHECK(signalName(pol.thresholds[0].signal) == signalName(Signal::MemoryAvailable));
    const NodeView view = node.view();
    EvictionResult r = evaluateEviction(view, pol, EvictionState{}, SteadyTime{});
    CHECK(conditions(r.decision) == "MemoryPressure, DiskPressure, PIDPressure");
    REQUIRE(r.decision.evict.size() == 1);
    CHECK(signalName(r.decision.evict[0].signal) == signalName(Signal::MemoryAvailable));
  }
  SUBCASE(
      "allocatable memory first: [nodefs.available, pid.available, "
      "allocatableMemory.available]") {
    Policy pol = parsePolicyOrFail(managerPolicy(
        R"("evictionHard": { "nodefs.available": "1Gi", "pid.available": "100",
                             "allocatableMemory.available": "1Gi" })"));
    const NodeView view = node.view();
    EvictionResult r = evaluateEviction(view, pol, EvictionState{}, SteadyTime{});
    REQUIRE(r.decision.evict.size() == 1);
    CHECK(signalName(r.decision.evict[0].signal) == signalName(Signal::AllocatableMemoryAvailable));
  }
}

// =============================================================================================
// 3. Threshold parsing and threshold arithmetic (helpers_test.go)
// =============================================================================================

namespace {

struct ExpectedThreshold {
  Signal signal;
  bool hard;
  const char* value;  // a quantity, or a percentage such as "10.5%"
  Duration grace;
  const char* minReclaim;  // "" or "0" for none
};

bool sameValue(const ThresholdValue& actual, const std::string& expected) {
  if (!expected.empty() && expected.back() == '%') {
    const float pct = std::stof(expected.substr(0, expected.size() - 1)) / 100.0f;
    return !actual.quantity && actual.percentage == pct;
  }
  if (expected.empty() || expected == "0") return actual.isZero();
  return actual.quantity.has_value() && *actual.quantity == qty(expected.c_str());
}

// Order-independent set equality, as the kubelet test compares.
void checkThresholds(const Policy& pol, const std::vector<ExpectedThreshold>& expected) {
  CHECK(pol.thresholds.size() == expected.size());
  for (const auto& e : expected) {
    INFO("signal " << std::string(toString(e.signal)) << (e.hard ? " hard" : " soft"));
    const Threshold* found = nullptr;
    for (const auto& t : pol.thresholds) {
      if (t.signal == e.signal && t.hard() == e.hard) found = &t;
    }
    REQUIRE(found != nullptr);
    CHECK(sameValue(found->value, e.value));
    CHECK(found->gracePeriod == e.grace);
    CHECK(sameValue(found->minReclaim, e.minReclaim));
  }
}

}  // namespace

TEST_CASE("kubelet: TestParseThresholdConfig - success cases as policy files") {
  const Duration s30 = seconds(30);
  const Duration none{0};

  SUBCASE("no values") {
    checkThresholds(parsePolicyOrFail(R"({"evictionHard": {}, "evictionSoft": {},
        "evictionSoftGracePeriod": {}, "evictionMinimumReclaim": {}})"),
                    {});
    // Not a kubelet case: a file with no threshold maps at all gets the kubelet's defaults
    // (docs/reference.md §4), as KubeletConfiguration defaulting would give.
    CHECK(parsePolicyOrFail("{}").thresholds.size() == 4);
  }
  SUBCASE("all memory eviction values") {
    // The kubelet case also passes allocatableConfig ["pods"] and expects an extra hard
    // allocatableMemory.available <150Mi; nodewarden's policy file has no
    // enforceNodeAllocatable, so only the two memory.available thresholds are expected.
    checkThresholds(parsePolicyOrFail(R"({
        "evictionHard": {"memory.available": "150Mi"},
        "evictionSoft": {"memory.available": "300Mi"},
        "evictionSoftGracePeriod": {"memory.available": "30s"},
        "evictionMinimumReclaim": {"memory.available": "0"}})"),
                    {{Signal::MemoryAvailable, true, "150Mi", none, "0"},
                     {Signal::MemoryAvailable, false, "300Mi", s30, "0"}});
  }
  SUBCASE("all memory eviction values in percentages") {
    checkThresholds(parsePolicyOrFail(R"({
        "evictionHard": {"memory.available": "10%"},
        "evictionSoft": {"memory.available": "30%"},
        "evictionSoftGracePeriod": {"memory.available": "30s"},
        "evictionMinimumReclaim": {"memory.available": "5%"}})"),
                    {{Signal::MemoryAvailable, true, "10%", none, "5%"},
                     {Signal::MemoryAvailable, false, "30%", s30, "5%"}});
  }
  SUBCASE("disk eviction values") {
    checkThresholds(parsePolicyOrFail(R"({
        "evictionHard": {"imagefs.available": "150Mi", "nodefs.available": "100Mi"},
        "evictionSoft": {"imagefs.available": "300Mi", "nodefs.available": "200Mi"},
        "evictionSoftGracePeriod": {"imagefs.available": "30s", "nodefs.available": "30s"},
        "evictionMinimumReclaim": {"imagefs.available": "2Gi", "nodefs.available": "1Gi"}})"),
                    {{Signal::ImageFsAvailable, true, "150Mi", none, "2Gi"},
                     {Signal::NodeFsAvailable, true, "100Mi", none, "1Gi"},
                     {Signal::ImageFsAvailable, false, "300Mi", s30, "2Gi"},
                     {Signal::NodeFsAvailable, false, "200Mi", s30, "1Gi"}});
  }
  SUBCASE("disk eviction values in percentages") {
    checkThresholds(parsePolicyOrFail(R"({
        "evictionHard": {"imagefs.available": "15%", "nodefs.available": "10.5%"},
        "evictionSoft": {"imagefs.available": "30%", "nodefs.available": "20.5%"},
        "evictionSoftGracePeriod": {"imagefs.available": "30s", "nodefs.available": "30s"},
        "evictionMinimumReclaim": {"imagefs.available": "10%", "nodefs.available": "5%"}})"),
                    {{Signal::ImageFsAvailable, true, "15%", none, "10%"},
                     {Signal::NodeFsAvailable, true, "10.5%", none, "5%"},
                     {Signal::ImageFsAvailable, false, "30%", s30, "10%"},
                     {Signal::NodeFsAvailable, false, "20.5%", s30, "5%"}});
    // The kubelet keeps percentages as float32: 10.5% is float32(0.105).
    Policy pol = parsePolicyOrFail(R"({"evictionHard": {"nodefs.available": "10.5%"}})");
    REQUIRE(pol.thresholds.size() == 1);
    CHECK(pol.thresholds[0].value.percentage == 0.105f);
  }
  SUBCASE("inode eviction values") {
    checkThresholds(parsePolicyOrFail(R"({
        "evictionHard": {"imagefs.inodesFree": "150Mi", "nodefs.inodesFree": "100Mi"},
        "evictionSoft": {"imagefs.inodesFree": "300Mi", "nodefs.inodesFree": "200Mi"},
        "evictionSoftGracePeriod": {"imagefs.inodesFree": "30s", "nodefs.inodesFree": "30s"},
        "evictionMinimumReclaim": {"imagefs.inodesFree": "2Gi", "nodefs.inodesFree": "1Gi"}})"),
                    {{Signal::ImageFsInodesFree, true, "150Mi", none, "2Gi"},
                     {Signal::NodeFsInodesFree, true, "100Mi", none, "1Gi"},
                     {Signal::ImageFsInodesFree, false, "300Mi", s30, "2Gi"},
                     {Signal::NodeFsInodesFree, false, "200Mi", s30, "1Gi"}});
  }
  SUBCASE("disable via 0%") {
    checkThresholds(parsePolicyOrFail(R"({"evictionHard": {"memory.available": "0%"},
                                          "evictionSoft": {"memory.available": "0%"}})"),
                    {});
  }
  SUBCASE("disable via 100%") {
    checkThresholds(parsePolicyOrFail(R"({"evictionHard": {"memory.available": "100%"},
                                          "evictionSoft": {"memory.available": "100%"}})"),
                    {});
  }
}

TEST_CASE("kubelet: TestParseThresholdConfig - error cases name the JSON path") {
  struct ErrorCase {
    const char* name;
    const char* policy;
    const char* path;
  };
  const ErrorCase cases[] = {
      {"invalid-signal", R"({"evictionHard": {"mem.available": "150Mi"}})",
       R"(evictionHard["mem.available"])"},
      {"hard-signal-negative", R"({"evictionHard": {"memory.available": "-150Mi"}})",
       R"(evictionHard["memory.available"])"},
      {"hard-signal-negative-percentage", R"({"evictionHard": {"memory.available": "-15%"}})",
       R"(evictionHard["memory.available"])"},
      {"hard-signal-percentage-greater-than-100%",
       R"({"evictionHard": {"memory.available": "150%"}})", R"(evictionHard["memory.available"])"},
      {"soft-signal-negative", R"({"evictionSoft": {"memory.available": "-150Mi"}})",
       R"(evictionSoft["memory.available"])"},
      {"valid-and-invalid-signal",
       R"({"evictionHard": {"memory.available": "150Mi", "invalid.foo": "150Mi"}})",
       R"(evictionHard["invalid.foo"])"},
      {"soft-no-grace-period",
       R"({"evictionSoft": {"memory.available": "150Mi"}, "evictionSoftGracePeriod": {}})",
       R"(evictionSoft["memory.available"])"},
      {"soft-negative-grace-period",
       R"({"evictionSoft": {"memory.available": "150Mi"},
           "evictionSoftGracePeriod": {"memory.available": "-30s"}})",
       R"(evictionSoftGracePeriod["memory.available"])"},
      {"negative-reclaim", R"({"evictionMinimumReclaim": {"memory.available": "-300Mi"}})",
       R"(evictionMinimumReclaim["memory.available"])"},
  };
  for (const auto& c : cases) {
    INFO("case " << c.name);
    Diagnostics diagnostics;
    auto parsed = parsePolicyText(c.policy, diagnostics);
    CHECK_FALSE(parsed.has_value());
    CHECK_FALSE(diagnostics.empty());
    INFO("diagnostics: " << diagnostics.joined());
    CHECK(diagnostics.joined().find(c.path) != std::string::npos);
  }
}

namespace {

// A node whose kubelet stats show `available` of `capacity` bytes of memory.
void setMemoryOf(Summary& summary, std::uint64_t available, std::uint64_t capacity) {
  summary.node.memoryAvailableBytes = available;
  summary.node.memoryWorkingSetBytes = capacity - available;
}

}  // namespace

TEST_CASE("kubelet: TestThresholdsMet - hard memory.available < 1Gi, minimum reclaim 500Mi") {
  NodeFixture node({});
  const Policy pol = parsePolicyOrFail(R"({
      "evictionHard": {"memory.available": "1Gi"},
      "evictionMinimumReclaim": {"memory.available": "500Mi"}})");
  const ThresholdKey hardMemory{Signal::MemoryAvailable, true};
  // enforceMinReclaim in the kubelet = the threshold was acted on in the previous cycle.
  EvictionState reclaiming;
  reclaiming.met.insert(hardMemory);
  const SteadyTime now = SteadyTime{} + minutes(10);

  auto met = [&](std::uint64_t available, const EvictionState& st) {
    setMemoryOf(node.summary(), available, 4 * kGi);
    const NodeView view = node.view();
    EvictionResult r = evaluateEviction(view, pol, st, now);
    const SignalStatus* status = statusOf(r.decision, Signal::MemoryAvailable, true);
    REQUIRE(status != nullptr);
    CHECK(status->threshold == std::int64_t(kGi));
    CHECK(status->minReclaim == std::int64_t(500 * kMi));
    return status->met;
  };

  SUBCASE("empty") {
    setMemoryOf(node.summary(), 500 * kMi, 4 * kGi);
    const NodeView view = node.view();
    EvictionResult r =
        evaluateEviction(view, parsePolicyOrFail(R"({"evictionHard": {}})"), EvictionState{}, now);
    CHECK(r.decision.signals.empty());
    CHECK(r.decision.conditions.empty());
  }
  SUBCASE("threshold-met-memory") {
    CHECK(met(500 * kMi, EvictionState{}));
  }
  SUBCASE("threshold-not-met") {
    CHECK_FALSE(met(2 * kGi, EvictionState{}));
  }
  SUBCASE("threshold-met-with-min-reclaim") {
    // 1.05Gi < 1Gi + 500Mi while reclaiming; without enforcement it is not met.
    CHECK(met(bytesOf("1.05Gi"), reclaiming));
    CHECK_FALSE(met(bytesOf("1.05Gi"), EvictionState{}));
  }
  SUBCASE("threshold-not-met-with-min-reclaim") {
    CHECK_FALSE(met(2 * kGi, reclaiming));
  }
  SUBCASE("met is strict: available == threshold is not met") {
    CHECK_FALSE(met(kGi, EvictionState{}));
    CHECK(met(kGi - 1, EvictionState{}));
  }
}

TEST_CASE("kubelet: TestPercentageThresholdsMet - memory < 20% (min reclaim 5%), nodefs < 30%") {
  NodeFixture node({});
  const Policy pol = parsePolicyOrFail(R"({
      "evictionHard": {"memory.available": "20%", "nodefs.available": "30%"},
      "evictionMinimumReclaim": {"memory.available": "5%"}})");
  const SteadyTime now = SteadyTime{} + minutes(10);
  EvictionState reclaimingMemory;
  reclaimingMemory.met.insert(ThresholdKey{Signal::MemoryAvailable, true});

  // Returns "memory", "nodefs", both or none, as met.
  auto metSignals = [&](std::uint64_t memAvailable, std::optional<std::uint64_t> fsAvailable,
                        const EvictionState& st) {
    node.summary() = Summary{};
    setMemoryOf(node.summary(), memAvailable, 1000 * kMi);
    if (fsAvailable) {
      node.summary().node.nodeFs.availableBytes = *fsAvailable;
      node.summary().node.nodeFs.capacityBytes = 1000 * kGi;
    }
    const NodeView view = node.view();
    EvictionResult r = evaluateEviction(view, pol, st, now);
    std::vector<std::string> out;
    for (const auto& status : r.decision.signals) {
      if (!status.met) continue;
      out.push_back(status.key.signal == Signal::MemoryAvailable ? "memory" : "nodefs");
    }
    return join(out);
  };

  CHECK(metSignals(100 * kMi, 100 * kGi, EvictionState{}) == "memory, nodefs");  // BothMet
  CHECK(metSignals(300 * kMi, 400 * kGi, EvictionState{}) == "");                // NoneMet
  CHECK(metSignals(300 * kMi, 100 * kGi, EvictionState{}) == "nodefs");          // DiskMet
  CHECK(metSignals(100 * kMi, 400 * kGi, EvictionState{}) == "memory");          // MemoryMet
  // MemoryMetWithMinReclaim: 225Mi < 20% + 5% of 1000Mi (no nodefs observation).
  CHECK(metSignals(225 * kMi, std::nullopt, reclaimingMemory) == "memory");
  // MemoryNotMetWithMinReclaim.
  CHECK(metSignals(300 * kMi, std::nullopt, reclaimingMemory) == "");

  // GetThresholdQuantity: int64(float64(capacity) * float64(float32 percentage)).
  setMemoryOf(node.summary(), 225 * kMi, 1000 * kMi);
  const NodeView view = node.view();
  EvictionResult r = evaluateEviction(view, pol, EvictionState{}, now);
  const SignalStatus* memory = statusOf(r.decision, Signal::MemoryAvailable, true);
  REQUIRE(memory != nullptr);
  CHECK(memory->capacity == std::int64_t(1000 * kMi));
  CHECK(memory->threshold == std::int64_t(double(1000 * kMi) * double(0.2f)));
  CHECK(memory->minReclaim == std::int64_t(double(1000 * kMi) * double(0.05f)));
  CHECK(statusOf(r.decision, Signal::NodeFsAvailable, true) == nullptr);  // not observed
}

TEST_CASE("kubelet: TestThresholdsMetGracePeriod and TestThresholdsFirstObservedAt") {
  NodeFixture node({});
  setMemoryOf(node.summary(), 500 * kMi, 4 * kGi);  // both thresholds met
  const Policy pol = parsePolicyOrFail(R"({
      "evictionHard": {"memory.available": "1Gi"},
      "evictionSoft": {"memory.available": "2Gi"},
      "evictionSoftGracePeriod": {"memory.available": "1m"}})");
  const ThresholdKey hardKey{Signal::MemoryAvailable, true};
  const ThresholdKey softKey{Signal::MemoryAvailable, false};
  const SteadyTime now = SteadyTime{} + std::chrono::hours(1);
  const SteadyTime twoMinutesAgo = now - minutes(2);
  const NodeView view = node.view();

  SUBCASE("empty: no thresholds, nothing actionable") {
    EvictionResult r =
        evaluateEviction(view, parsePolicyOrFail(R"({"evictionHard": {}})"), EvictionState{}, now);
    CHECK(r.decision.signals.empty());
    CHECK(r.next.firstObservedAt.empty());
  }
  SUBCASE("hard-threshold-met / soft-threshold-not-met, first observed now") {
    EvictionResult r = evaluateEviction(view, pol, EvictionState{}, now);
    const SignalStatus* hard = statusOf(r.decision, Signal::MemoryAvailable, true);
    const SignalStatus* soft = statusOf(r.decision, Signal::MemoryAvailable, false);
    REQUIRE(hard != nullptr);
    REQUIRE(soft != nullptr);
    CHECK(hard->actionable);
    CHECK(soft->met);
    CHECK_FALSE(soft->actionable);  // 0 < 1m
    // TestThresholdsFirstObservedAt, no-previous-observation: first observed = now.
    REQUIRE(r.next.firstObservedAt.count(hardKey) == 1);
    CHECK(r.next.firstObservedAt.at(hardKey) == now);
    CHECK(r.next.firstObservedAt.at(softKey) == now);
  }
  SUBCASE("soft-threshold-met: observed since now - 2m") {
    EvictionState st;
    st.firstObservedAt[softKey] = twoMinutesAgo;
    EvictionResult r = evaluateEviction(view, pol, st, now);
    const SignalStatus* soft = statusOf(r.decision, Signal::MemoryAvailable, false);
    REQUIRE(soft != nullptr);
    CHECK(soft->actionable);
    CHECK(soft->metFor == Duration(minutes(2)));
    // TestThresholdsFirstObservedAt, previous-observation: the first time is kept.
    CHECK(r.next.firstObservedAt.at(softKey) == twoMinutesAgo);
  }
}

TEST_CASE(
    "kubelet: TestNodeConditions, TestNodeConditionsLastObservedAt and "
    "TestNodeConditionsObservedSince") {
  NodeFixture node({});
  const SteadyTime now = SteadyTime{} + std::chrono::hours(1);
  const SteadyTime oneMinuteAgo = now - minutes(1);
  auto policyWithTransition = [](const char* period) {
    return parsePolicyOrFail(std::string(R"({"evictionHard": {"memory.available": "1Gi"},
                                             "evictionPressureTransitionPeriod": ")") +
                             period + "\"}");
  };
  const Policy pol = policyWithTransition("5m");

  SUBCASE("TestNodeConditions: nothing met -> no condition; memory.available -> MemoryPressure") {
    setMemoryOf(node.summary(), 2 * kGi, 4 * kGi);
    CHECK(evaluateEviction(node.view(), pol, EvictionState{}, now).decision.conditions.empty());
    setMemoryOf(node.summary(), 500 * kMi, 4 * kGi);
    CHECK(conditions(evaluateEviction(node.view(), pol, EvictionState{}, now).decision) ==
          "MemoryPressure");
  }
  SUBCASE("TestNodeConditionsLastObservedAt") {
    // no-previous-observation and previous-observation: a current condition is observed now.
    setMemoryOf(node.summary(), 500 * kMi, 4 * kGi);
    EvictionResult r = evaluateEviction(node.view(), pol, EvictionState{}, now);
    CHECK(r.next.conditionLastObservedAt.at("MemoryPressure") == now);
    EvictionState previous;
    previous.conditionLastObservedAt["MemoryPressure"] = oneMinuteAgo;
    r = evaluateEviction(node.view(), pol, previous, now);
    CHECK(r.next.conditionLastObservedAt.at("MemoryPressure") == now);
    // old-observation: no current condition, the old time is retained.
    setMemoryOf(node.summary(), 2 * kGi, 4 * kGi);
    r = evaluateEviction(node.view(), pol, previous, now);
    REQUIRE(r.next.conditionLastObservedAt.count("MemoryPressure") == 1);
    CHECK(r.next.conditionLastObservedAt.at("MemoryPressure") == oneMinuteAgo);
  }
  SUBCASE("TestNodeConditionsObservedSince: observed 1m ago") {
    setMemoryOf(node.summary(), 2 * kGi, 4 * kGi);  // nothing met now
    EvictionState previous;
    previous.conditionLastObservedAt["MemoryPressure"] = oneMinuteAgo;
    // in-period: transition period 2m.
    CHECK(conditions(
              evaluateEviction(node.view(), policyWithTransition("2m"), previous, now).decision) ==
          "MemoryPressure");
    // out-of-period: transition period 30s.
    CHECK(evaluateEviction(node.view(), policyWithTransition("30s"), previous, now)
              .decision.conditions.empty());
  }
}

// =============================================================================================
// 4. TestMakeSignalObservations (containerfs left out: nodewarden has no containerfs signal)
// =============================================================================================

TEST_CASE("kubelet: TestMakeSignalObservations - available and capacity per signal") {
  // The test's allocatable memory capacity constant.
  CHECK(qty("5Gi").value() == 5368709120);

  const char* text = R"({
    "nodes": [ { "metadata": { "name": "test" },
                 "status": { "allocatable": { "cpu": "4", "memory": "2Gi", "pods": "110" } } } ],
    "pods": [
      { "metadata": { "name": "pod1", "namespace": "ns1", "uid": "uuid1" },
        "spec": { "nodeName": "test", "containers": [ { "name": "c" } ] },
        "status": { "phase": "Running" } },
      { "metadata": { "name": "pod1", "namespace": "ns2", "uid": "uuid2" },
        "spec": { "nodeName": "test", "containers": [ { "name": "c" } ] },
        "status": { "phase": "Running" } },
      { "metadata": { "name": "pod3", "namespace": "ns3", "uid": "uuid3" },
        "spec": { "nodeName": "test", "containers": [ { "name": "c" } ] },
        "status": { "phase": "Running" } }
    ],
    "stats": { "test": {
      "node": {
        "nodeName": "test",
        "memory": { "availableBytes": 1073741824, "workingSetBytes": 1073741824 },
        "systemContainers": [ { "name": "pods",
          "memory": { "availableBytes": 1073741824, "workingSetBytes": 1073741824 } } ],
        "fs": { "availableBytes": 1024, "capacityBytes": 2048,
                "inodesFree": 1024, "inodes": 1048576 },
        "runtime": { "imageFs": { "availableBytes": 1048576, "capacityBytes": 2097152,
                                  "inodesFree": 1024, "inodes": 1048576 } },
        "rlimit": { "maxpid": 255816, "curproc": 1000 }
      },
      "pods": [
        { "podRef": { "name": "pod1", "namespace": "ns1", "uid": "uuid1" },
          "memory": { "workingSetBytes": 1073741824 } },
        { "podRef": { "name": "pod1", "namespace": "ns2", "uid": "uuid2" },
          "memory": { "workingSetBytes": 1073741824 } },
        { "podRef": { "name": "pod3", "namespace": "ns3", "uid": "uuid3" },
          "memory": { "workingSetBytes": 1073741824 } }
      ]
    } }
  })";
  Diagnostics diagnostics;
  auto snap = parseSnapshotText(text, diagnostics);
  REQUIRE_MESSAGE(snap.has_value(), diagnostics.joined());
  const NodeView view = makeNodeView(*snap, "test");
  const std::vector<Observation> observations = observeSignals(view);

  struct Expected {
    Signal signal;
    std::int64_t available;
    std::int64_t capacity;
  };
  const Expected expected[] = {
      {Signal::AllocatableMemoryAvailable, 1073741824, 2147483648},
      {Signal::MemoryAvailable, 1073741824, 2147483648},
      {Signal::NodeFsAvailable, 1024, 2048},
      {Signal::NodeFsInodesFree, 1024, 1048576},
      {Signal::ImageFsAvailable, 1048576, 2097152},
      {Signal::ImageFsInodesFree, 1024, 1048576},
      {Signal::PidAvailable, 255816 - 1000, 255816},
  };
  CHECK(observations.size() == std::size(expected));
  for (const auto& e : expected) {
    INFO("signal " << std::string(toString(e.signal)));
    const Observation* found = nullptr;
    for (const auto& o : observations) {
      if (o.signal == e.signal) found = &o;
    }
    REQUIRE(found != nullptr);
    CHECK(found->available == e.available);
    CHECK(found->capacity == e.capacity);
  }

  // The stats function finds every pod, even the two named pod1 in different namespaces, each
  // with its own stats (matched by UID) and a 1Gi working set.
  REQUIRE(view.pods.size() == 3);
  for (std::size_t i = 0; i < view.pods.size(); ++i) {
    INFO("pod " << view.pods[i]->key);
    REQUIRE(view.podStats[i] != nullptr);
    CHECK(view.podStats[i]->uid == view.pods[i]->uid);
    CHECK(view.podStats[i]->ns == view.pods[i]->ns);
    REQUIRE(view.podStats[i]->memoryWorkingSetBytes.has_value());
    CHECK(*view.podStats[i]->memoryWorkingSetBytes == kGi);
  }
}

// =============================================================================================
// Found by the kubelet judge (tests/judges/): the eviction manager of k8s.io/kubernetes v1.37.2
// run on generated cases. Each has a kept case under tests/judges/cases/.

TEST_CASE("judge: a pod in the summary without a memory or process figure uses 0 of it") {
  // memoryUsage and processUsage (helpers.go) count a missing figure as 0; only a pod absent
  // from the summary ranks first ("prioritize evicting the pod for which no stats were found").
  std::vector<Pod> pods = {
      makePod("no-figures", 0, resources({{"memory", "100Mi"}})),
      makePod("over", 0, resources({{"memory", "100Mi"}})),
      makePod("absent", 0),
  };
  PodStats none = statsOf(pods[0]);  // in the summary, no memory and no process_stats
  PodStats over = memoryStats(pods[1], 200 * kMi);
  over.processCount = 5;
  NodeFixture node(pods, {none, over});
  for (const Policy& pol : {kubeletRanking(), Policy{}}) {
    CAPTURE(int(pol.ranking));
    const Ranking memory = rankMemoryPressure(node.view(), pol);
    CHECK(names(memory) == "absent, over, no-figures");
    REQUIRE(memory.pods.size() == 3);
    CHECK(memory.pods[2].hasUsage);
    CHECK(memory.pods[2].usage == 0);
    CHECK(names(rankPidPressure(node.view(), pol)) == "absent, over, no-figures");
  }
}

namespace {

// A pod with one container of rootfs/logs figures and a disk emptyDir "scratch".
PodStats diskDetail(const Pod& pod, std::uint64_t rootfs, std::uint64_t logs, std::uint64_t volume,
                    std::uint64_t inodes) {
  PodStats s = statsOf(pod);
  ContainerStats c;
  c.name = pod.name;
  c.rootfsUsedBytes = rootfs;
  c.logsUsedBytes = logs;
  c.rootfsInodesUsed = inodes;
  c.logsInodesUsed = 1;
  s.containers.push_back(c);
  s.volumes.push_back(VolumeStats{"scratch", volume, 10});
  s.volumes.push_back(VolumeStats{"not-local", 999 * kGi, 999999});  // a volume no spec names
  // What the summary's pod total says; ranking does not read it when the detail is there.
  s.ephemeralStorageUsedBytes = rootfs + logs + volume + 4096;
  s.ephemeralStorageInodesUsed = inodes + 11;
  return s;
}

}  // namespace

TEST_CASE("judge: disk usage is the kubelet's podDiskUsage for the signal and the layout") {
  // Judge case tests/judges/cases/eviction-dedicated-imagefs.json. One filesystem: writable
  // layers + logs + local volumes for every disk signal; a dedicated image filesystem:
  // logs + local volumes for nodefs.*, writable layers for imagefs.* (buildSignalToRankFunc).
  std::vector<Pod> pods = {makePod("big-rootfs", 0), makePod("big-logs", 0),
                           makePod("big-volume", 0)};
  for (Pod& p : pods) p.localVolumes = {"scratch"};
  NodeFixture node(pods, {diskDetail(pods[0], 900 * kMi, 1 * kMi, 1 * kMi, 9000),
                          diskDetail(pods[1], 10 * kMi, 300 * kMi, 1 * kMi, 100),
                          diskDetail(pods[2], 10 * kMi, 1 * kMi, 500 * kMi, 50)});
  Summary& sum = node.summary();
  setNodeFs(sum, 10 * kGi);
  sum.node.imageFs = sum.node.nodeFs;  // one filesystem, reported twice
  const Policy pol = kubeletRanking();
  CHECK(names(rankDiskPressure(node.view(), pol, Signal::NodeFsAvailable)) ==
        "big-rootfs, big-volume, big-logs");
  CHECK(names(rankDiskPressure(node.view(), pol, Signal::ImageFsAvailable)) ==
        "big-rootfs, big-volume, big-logs");
  const Ranking one = rankDiskPressure(node.view(), pol, Signal::NodeFsAvailable);
  CHECK(one.pods[0].usage == std::int64_t(902 * kMi));

  sum.node.imageFs->capacityBytes = 50 * kGi;  // another device
  CHECK(names(rankDiskPressure(node.view(), pol, Signal::NodeFsAvailable)) ==
        "big-volume, big-logs, big-rootfs");
  CHECK(names(rankDiskPressure(node.view(), pol, Signal::ImageFsAvailable)) ==
        "big-rootfs, big-logs, big-volume");
  CHECK(rankDiskPressure(node.view(), pol, Signal::ImageFsAvailable).pods[0].usage ==
        std::int64_t(900 * kMi));
  CHECK(names(rankDiskPressure(node.view(), pol, Signal::ImageFsInodesFree)) ==
        "big-rootfs, big-logs, big-volume");
}

TEST_CASE("judge: inodes exceed a request of 0; the ephemeral-storage request still subtracts") {
  // exceedDiskRequests compares the inodes used with the pod's "inodes" request, which no pod
  // has; disk() subtracts the ephemeral-storage request from them (judge case
  // tests/judges/cases/eviction-inodes-exceed-a-zero-request.json).
  std::vector<Pod> pods = {
      makePod("requests-storage", 10, resources({{"ephemeral-storage", "136M"}})),
      makePod("uses-no-inodes", 0),
      makePod("requests-nothing", 10),
  };
  NodeFixture node(pods,
                   {inodeStats(pods[0], 30000), inodeStats(pods[1], 0), inodeStats(pods[2], 2000)});
  const Ranking r = rankDiskPressure(node.view(), kubeletRanking(), Signal::NodeFsInodesFree);
  // The two using inodes exceed and go before the one using none, whatever the priorities;
  // between them, the larger inodes - request: 2000 - 0 before 30000 - 136000000.
  CHECK(names(r) == "requests-nothing, requests-storage, uses-no-inodes");
}

TEST_CASE("judge: a container's disk usage is in the message only with both of its figures") {
  // evictionMessage (helpers.go) writes a container's ephemeral-storage usage only when it
  // has both rootfs and logs figures.
  std::vector<Pod> pods = {makePod("rootfs-only", 0), makePod("both", 0)};
  PodStats a = statsOf(pods[0]);
  ContainerStats ca;
  ca.name = "rootfs-only";
  ca.rootfsUsedBytes = 700 * kMi;
  a.containers.push_back(ca);
  PodStats b = diskDetail(pods[1], 600 * kMi, 0, 0, 10);
  NodeFixture node(pods, {a, b});
  Simulation sim{node,
                 parsePolicyOrFail(R"({"evictionHard": {"nodefs.available": "3Gi"},
                                       "evictionMaxPodsPerCycle": 2, "ranking": "kubelet"})"),
                 {}};
  node.summary().node.nodeFs.availableBytes = bytesOf("1.5Gi");
  node.summary().node.nodeFs.capacityBytes = 10 * kGi;
  EvictionDecision d = sim.step(Duration(0));
  REQUIRE(d.evict.size() == 2);
  CHECK(d.evict[0].pod->name == "rootfs-only");
  CHECK(d.evict[0].message ==
        "The node was low on resource: ephemeral-storage. Threshold quantity: 3Gi, available: "
        "1536Mi. ");
  CHECK(d.evict[1].message ==
        "The node was low on resource: ephemeral-storage. Threshold quantity: 3Gi, available: "
        "1536Mi. Container both was using 600Mi, request is 0, has larger consumption of "
        "ephemeral-storage. ");
}
