// Eviction (docs/reference.md §4) in the default "priority" ranking: signals, thresholds over
// simulated time, rankings, the plan, messages and the JSON output.
#include <doctest/doctest.h>

#include <deque>
#include <string>
#include <vector>

#include "policy/eviction.h"

using namespace std::chrono_literals;
using nodewarden::SteadyTime;
using nodewarden::policy::Diagnostics;
using nodewarden::policy::EvictionResult;
using nodewarden::policy::EvictionState;
using nodewarden::policy::Json;
using nodewarden::policy::Policy;
using nodewarden::policy::Signal;
using nodewarden::policy::Snapshot;

namespace {

constexpr long long kMi = 1024 * 1024;

struct PodSpec {
  PodSpec(std::string n, int prio, long long requestMi, long long usage, std::string extra = "",
          long long procs = -1, long long disk = -1, long long diskRequest = -1,
          int graceSeconds = 30, bool leaving = false)
      : name(std::move(n)),
        priority(prio),
        memoryRequestMi(requestMi),
        usageMi(usage),
        extraMetadata(std::move(extra)),
        processes(procs),
        diskMi(disk),
        diskRequestMi(diskRequest),
        terminationGraceSeconds(graceSeconds),
        terminating(leaving) {}
  std::string name;
  int priority = 0;
  long long memoryRequestMi = -1;  // -1: none
  long long usageMi = -1;          // -1: no stats
  std::string extraMetadata;       // e.g. annotations
  long long processes = -1;
  long long diskMi = -1;
  long long diskRequestMi = -1;
  int terminationGraceSeconds = 30;
  bool terminating = false;
};

// A one-node snapshot: node "n" with memory available `availableMi` of `capacityMi`.
Snapshot makeSnapshot(const std::vector<PodSpec>& pods, long long availableMi,
                      long long capacityMi = 8192, std::string nodeStatsExtra = "") {
  Json pj = Json::array();
  Json stats = Json::array();
  for (const auto& p : pods) {
    Json requests = Json::object();
    if (p.memoryRequestMi >= 0) requests["memory"] = std::to_string(p.memoryRequestMi) + "Mi";
    if (p.diskRequestMi >= 0)
      requests["ephemeral-storage"] = std::to_string(p.diskRequestMi) + "Mi";
    Json meta = Json::parse(R"({"name": ")" + p.name + R"(", "namespace": "ns", "uid": "uid-)" +
                            p.name + "\"" + p.extraMetadata + "}");
    if (p.terminating) meta["deletionTimestamp"] = "2026-01-01T00:00:00Z";
    pj.push_back({{"metadata", meta},
                  {"spec",
                   {{"nodeName", "n"},
                    {"priority", p.priority},
                    {"terminationGracePeriodSeconds", p.terminationGraceSeconds},
                    {"containers", {{{"name", "c"}, {"resources", {{"requests", requests}}}}}}}},
                  {"status", {{"phase", "Running"}}}});
    if (p.usageMi < 0 && p.processes < 0 && p.diskMi < 0) continue;
    Json ps = {{"podRef", {{"name", p.name}, {"namespace", "ns"}, {"uid", "uid-" + p.name}}}};
    if (p.usageMi >= 0) {
      ps["memory"] = {{"workingSetBytes", p.usageMi * kMi}};
      ps["containers"] = {{{"name", "c"}, {"memory", {{"workingSetBytes", p.usageMi * kMi}}}}};
    }
    if (p.processes >= 0) ps["process_stats"] = {{"process_count", p.processes}};
    if (p.diskMi >= 0) ps["ephemeral-storage"] = {{"usedBytes", p.diskMi * kMi}};
    stats.push_back(ps);
  }
  Json node =
      Json::parse(R"({"memory": {"availableBytes": )" + std::to_string(availableMi * kMi) +
                  R"(, "workingSetBytes": )" + std::to_string((capacityMi - availableMi) * kMi) +
                  "}" + nodeStatsExtra + "}");
  Json snap = {{"nodes",
                {{{"metadata", {{"name", "n"}}},
                  {"status", {{"allocatable", {{"memory", "7Gi"}, {"cpu", "4"}}}}}}}},
               {"pods", pj},
               {"stats", {{"n", {{"node", node}, {"pods", stats}}}}}};
  Diagnostics d;
  auto s = nodewarden::policy::parseSnapshot(snap, d);
  REQUIRE_MESSAGE(s.has_value(), d.joined());
  return std::move(*s);
}

Policy policyFrom(const std::string& text) {
  Diagnostics d;
  auto p = nodewarden::policy::parsePolicyText(text, d);
  REQUIRE_MESSAGE(p.has_value(), d.joined());
  return *p;
}

std::vector<std::string> keys(const nodewarden::policy::Ranking& r) {
  std::vector<std::string> out;
  for (const auto& p : r.pods) out.push_back(p.pod->key);
  return out;
}

std::vector<std::string> evicted(const EvictionResult& r) {
  std::vector<std::string> out;
  for (const auto& e : r.decision.evict) out.push_back(e.pod->key);
  return out;
}

EvictionResult evaluate(const Snapshot& s, const Policy& p, const EvictionState& state,
                        SteadyTime now) {
  return nodewarden::policy::evaluateEviction(nodewarden::policy::makeNodeView(s, "n"), p, state,
                                              now);
}

// Decisions point into their snapshot: a snapshot made for one call is kept alive here for
// the rest of the test run.
EvictionResult evaluate(Snapshot&& s, const Policy& p, const EvictionState& state, SteadyTime now) {
  static std::deque<Snapshot> kept;
  kept.push_back(std::move(s));
  return evaluate(kept.back(), p, state, now);
}

const SteadyTime kStart{std::chrono::hours(1000)};

}  // namespace

TEST_CASE("priority ranking: lowest priority, then usage over request, then usage, then key") {
  Snapshot s = makeSnapshot(
      {
          {"high-hog", 1000, 100, 900},   // high priority: last despite 9x
          {"low-2x", -5, 100, 200},       // 2x its request
          {"low-3x", -5, 100, 300},       // 3x: before low-2x
          {"low-norequest", -5, -1, 10},  // zero request = infinitely over: first among -5
          {"zero-b", 0, 200, 200},        // ratio 1 at 200Mi
          {"zero-a", 0, 100, 100},        // ratio 1 at 100Mi: after zero-b (smaller usage)
          {"zero-c", 0, 100, 100},        // ties zero-a completely: by key
          {"nostats", 0, 100, -1},        // no usage data: first within priority 0
      },
      4000);
  Policy p = policyFrom("{}");
  auto ranking =
      nodewarden::policy::rankMemoryPressure(nodewarden::policy::makeNodeView(s, "n"), p);
  CHECK(keys(ranking) == std::vector<std::string>{"ns/low-norequest", "ns/low-3x", "ns/low-2x",
                                                  "ns/nostats", "ns/zero-b", "ns/zero-a",
                                                  "ns/zero-c", "ns/high-hog"});
}

TEST_CASE("kubelet ranking: over-request first, then priority, then usage - request") {
  // TestMemoryPressure's facts: a low-priority BestEffort pod using 100Mi goes before a
  // default-priority Burstable pod 300Mi over its request.
  Snapshot s = makeSnapshot(
      {
          {"burstable-over", 0, 100, 400},       // exceeds by 300Mi
          {"besteffort-low", -1, -1, 100},       // exceeds (request 0), lower priority
          {"guaranteed-under", -1, 500, 300},    // below request: after every exceeding pod
          {"burstable-over-more", 0, 100, 600},  // exceeds by 500Mi: before burstable-over
      },
      4000);
  Policy p = policyFrom(R"({"ranking": "kubelet"})");
  auto ranking =
      nodewarden::policy::rankMemoryPressure(nodewarden::policy::makeNodeView(s, "n"), p);
  CHECK(keys(ranking) == std::vector<std::string>{"ns/besteffort-low", "ns/burstable-over-more",
                                                  "ns/burstable-over", "ns/guaranteed-under"});
}

TEST_CASE("critical pods and pods at neverEvictPriority rank last and are never evicted") {
  Snapshot s = makeSnapshot(
      {
          {"static", -10, -1, 3000, R"(, "annotations": {"kubernetes.io/config.source": "file"})"},
          {"mirror", 0, -1, 2000, R"(, "annotations": {"kubernetes.io/config.mirror": "x"})"},
          {"cluster-critical", 2000000000, -1, 1000},
          {"protected", 5000, -1, 900},
          {"victim", 10, -1, 50},
      },
      10);
  Policy p = policyFrom(R"({"evictionHard": {"memory.available": "100Mi"},
                            "neverEvictPriority": 5000})");
  auto r = evaluate(s, p, {}, kStart);
  CHECK(keys(r.decision.memory) == std::vector<std::string>{"ns/victim", "ns/static", "ns/mirror",
                                                            "ns/protected", "ns/cluster-critical"});
  // Only one evictable pod: it goes, even though it cannot cover the shortfall alone.
  CHECK(evicted(r) == std::vector<std::string>{"ns/victim"});
  CHECK_FALSE(r.decision.memory.pods[1].evictable);
  CHECK(r.decision.memory.pods[1].notEvictableReason == "critical pod");
  CHECK(r.decision.memory.pods[3].notEvictableReason == "priority 5000 >= neverEvictPriority 5000");
}

TEST_CASE("terminating pods are not ranked and never chosen again") {
  Snapshot s = makeSnapshot(
      {{"leaving", -100, -1, 3000, "", -1, -1, -1, 30, true}, {"staying", 0, -1, 500}}, 50);
  auto r = evaluate(s, policyFrom("{}"), {}, kStart);
  CHECK(keys(r.decision.memory) == std::vector<std::string>{"ns/staying"});
  CHECK(evicted(r) == std::vector<std::string>{"ns/staying"});
}

TEST_CASE("the plan is the shortest prefix covering threshold + minimum reclaim - available") {
  std::vector<PodSpec> pods = {{"a", 0, -1, 100}, {"b", 1, -1, 100}, {"c", 2, -1, 100},
                               {"d", 3, -1, 100}, {"e", 4, -1, 100}, {"f", 5, -1, 100},
                               {"g", 6, -1, 100}};
  SUBCASE("one pod covers 100Mi - 60Mi") {
    auto r = evaluate(makeSnapshot(pods, 60),
                      policyFrom(R"({"evictionHard": {"memory.available": "100Mi"}})"), {}, kStart);
    CHECK(evicted(r) == std::vector<std::string>{"ns/a"});
  }
  SUBCASE("minimum reclaim raises the target: 100 + 150 - 60 = 190Mi needs two pods") {
    auto r = evaluate(makeSnapshot(pods, 60),
                      policyFrom(R"({"evictionHard": {"memory.available": "100Mi"},
                                     "evictionMinimumReclaim": {"memory.available": "150Mi"}})"),
                      {}, kStart);
    CHECK(evicted(r) == std::vector<std::string>{"ns/a", "ns/b"});
  }
  SUBCASE("exactly covering stops there: 100 + 140 - 40 = 200Mi") {
    auto r = evaluate(makeSnapshot(pods, 40),
                      policyFrom(R"({"evictionHard": {"memory.available": "100Mi"},
                                     "evictionMinimumReclaim": {"memory.available": "140Mi"}})"),
                      {}, kStart);
    CHECK(evicted(r) == std::vector<std::string>{"ns/a", "ns/b"});
  }
  SUBCASE("the cap bounds one cycle") {
    auto r =
        evaluate(makeSnapshot(pods, 10), policyFrom(R"({"evictionHard": {"memory.available": "1Gi"},
                                     "evictionMaxPodsPerCycle": 3})"),
                 {}, kStart);
    CHECK(evicted(r) == std::vector<std::string>{"ns/a", "ns/b", "ns/c"});
  }
  SUBCASE("cap 1 is the kubelet's one pod per cycle") {
    auto r =
        evaluate(makeSnapshot(pods, 10), policyFrom(R"({"evictionHard": {"memory.available": "1Gi"},
                                     "evictionMaxPodsPerCycle": 1})"),
                 {}, kStart);
    CHECK(evicted(r) == std::vector<std::string>{"ns/a"});
  }
  SUBCASE("available equal to the threshold is not met") {
    auto r = evaluate(makeSnapshot(pods, 100),
                      policyFrom(R"({"evictionHard": {"memory.available": "100Mi"}})"), {}, kStart);
    CHECK(evicted(r).empty());
    CHECK_FALSE(r.decision.signals.at(0).met);
    CHECK(r.decision.conditions.empty());
  }
}

TEST_CASE("hard evictions get grace 0; soft ones min(evictionMaxPodGracePeriod, the pod's)") {
  std::vector<PodSpec> pods = {{"short", 0, -1, 600, "", -1, -1, -1, 10},
                               {"long", 1, -1, 600, "", -1, -1, -1, 120}};
  Policy p = policyFrom(R"({"evictionHard": {"memory.available": "100Mi"},
                            "evictionSoft": {"memory.available": "1Gi"},
                            "evictionSoftGracePeriod": {"memory.available": "30s"},
                            "evictionMaxPodGracePeriod": 60})");
  SUBCASE("soft") {
    // 1Gi - 500Mi = 524Mi to free: "short" (600Mi) covers it.
    auto state = nodewarden::policy::assumeGraceElapsed(p, kStart);
    auto r = evaluate(makeSnapshot(pods, 500), p, state, kStart);
    REQUIRE(r.decision.evict.size() == 1);
    CHECK(r.decision.evict[0].gracePeriodSeconds == 10);
    CHECK_FALSE(r.decision.evict[0].hard);
    // The next pod in line would get the policy's maximum, not its own 120 s.
    auto r2 = evaluate(makeSnapshot(pods, 0), p, state, kStart);
    CHECK(r2.decision.evict.size() == 2);
  }
  SUBCASE("hard") {
    auto r = evaluate(makeSnapshot(pods, 50), p, {}, kStart);
    REQUIRE(!r.decision.evict.empty());
    CHECK(r.decision.evict[0].gracePeriodSeconds == 0);
    CHECK(r.decision.evict[0].hard);
  }
  SUBCASE("soft grace capped by evictionMaxPodGracePeriod") {
    std::vector<PodSpec> one = {{"long", 1, -1, 600, "", -1, -1, -1, 120}};
    auto state = nodewarden::policy::assumeGraceElapsed(p, kStart);
    auto r = evaluate(makeSnapshot(one, 500), p, state, kStart);
    REQUIRE(r.decision.evict.size() == 1);
    CHECK(r.decision.evict[0].gracePeriodSeconds == 60);
  }
}

TEST_CASE("a soft threshold acts only after its grace period, continuously met") {
  Policy p = policyFrom(R"({"evictionSoft": {"memory.available": "500Mi"},
                            "evictionSoftGracePeriod": {"memory.available": "30s"},
                            "evictionMaxPodGracePeriod": 5})");
  std::vector<PodSpec> pods = {{"a", 0, -1, 600}};
  Snapshot low = makeSnapshot(pods, 400);
  Snapshot ok = makeSnapshot(pods, 800);
  EvictionState state;
  SteadyTime now = kStart;
  auto step = [&](const Snapshot& s, std::chrono::milliseconds dt) {
    now += dt;
    auto r = evaluate(s, p, state, now);
    state = r.next;
    return r;
  };
  auto r = step(low, 0ms);
  CHECK(r.decision.signals.at(0).met);
  CHECK_FALSE(r.decision.signals.at(0).actionable);
  CHECK(r.decision.conditions == std::vector<std::string>{"MemoryPressure"});  // at once
  CHECK(evicted(r).empty());
  r = step(low, 29999ms);
  CHECK(evicted(r).empty());
  r = step(low, 1ms);  // 30 s continuously met
  CHECK(evicted(r) == std::vector<std::string>{"ns/a"});
  CHECK(r.decision.evict[0].gracePeriodSeconds == 5);
  // Recovery resets the clock: the grace period starts again.
  r = step(ok, 1s);
  CHECK_FALSE(r.decision.signals.at(0).met);
  r = step(low, 1s);
  CHECK(evicted(r).empty());
  r = step(low, 29s);
  CHECK(evicted(r).empty());
  r = step(low, 1s);
  CHECK(evicted(r) == std::vector<std::string>{"ns/a"});
}

TEST_CASE("once acted on, a threshold stays met until available >= threshold + minimum reclaim") {
  Policy p = policyFrom(R"({"evictionHard": {"memory.available": "100Mi"},
                            "evictionMinimumReclaim": {"memory.available": "200Mi"},
                            "evictionPressureTransitionPeriod": "0s"})");
  std::vector<PodSpec> pods = {{"a", 0, -1, 50}};
  EvictionState state;
  auto r = evaluate(makeSnapshot(pods, 90), p, state, kStart);
  CHECK(r.decision.signals.at(0).met);
  state = r.next;
  r = evaluate(makeSnapshot(pods, 250), p, state, kStart + 1s);  // 250 < 100 + 200
  CHECK(r.decision.signals.at(0).met);
  CHECK(evicted(r) == std::vector<std::string>{"ns/a"});
  state = r.next;
  r = evaluate(makeSnapshot(pods, 300), p, state, kStart + 2s);  // 300 >= 300: resolved
  CHECK_FALSE(r.decision.signals.at(0).met);
  state = r.next;
  r = evaluate(makeSnapshot(pods, 250), p, state, kStart + 3s);  // not acted on any more
  CHECK_FALSE(r.decision.signals.at(0).met);
}

TEST_CASE("node conditions are held for the transition period after last being observed") {
  Policy p = policyFrom(R"({"evictionHard": {"memory.available": "100Mi"},
                            "evictionPressureTransitionPeriod": "5m"})");
  std::vector<PodSpec> pods = {{"a", 0, -1, 10}};
  EvictionState state;
  auto r = evaluate(makeSnapshot(pods, 50), p, state, kStart);
  CHECK(r.decision.conditions == std::vector<std::string>{"MemoryPressure"});
  state = r.next;
  r = evaluate(makeSnapshot(pods, 4000), p, state, kStart + 4min + 59s);
  CHECK(r.decision.conditions == std::vector<std::string>{"MemoryPressure"});
  CHECK(evicted(r).empty());  // held condition, but nothing to evict
  state = r.next;
  r = evaluate(makeSnapshot(pods, 4000), p, state, kStart + 5min);
  CHECK(r.decision.conditions.empty());
}

TEST_CASE("the eviction message is the kubelet's") {
  Snapshot s = makeSnapshot({{"hog", 0, 100, 700}, {"fine", 0, 500, 200}}, 1500, 8192);
  Policy p = policyFrom(R"({"evictionHard": {"memory.available": "2Gi"}})");
  auto r = evaluate(s, p, {}, kStart);
  REQUIRE(r.decision.evict.size() >= 1);
  CHECK(r.decision.evict[0].message ==
        "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1500Mi. "
        "Container c was using 700Mi, request is 100Mi, has larger consumption of memory. ");
  // A percentage threshold prints its resolved quantity.
  Policy pct = policyFrom(R"({"evictionHard": {"memory.available": "25%"}})");
  auto r2 = evaluate(s, pct, {}, kStart);
  REQUIRE(!r2.decision.evict.empty());
  CHECK(r2.decision.evict[0].message.rfind(
            "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1500Mi. ",
            0) == 0);
}

TEST_CASE("PID and disk pressure rank by their own usage and free it") {
  const std::string extra =
      R"(, "fs": {"availableBytes": 1048576, "capacityBytes": 104857600, "inodesFree": 1000000, "inodes": 2000000},
          "rlimit": {"maxpid": 1000, "curproc": 990})";
  Snapshot s = makeSnapshot(
      {
          {"forky", 0, -1, 10, "", 500, 5, 0},
          {"few", 0, -1, 10, "", 5, 50, 100},
          {"writer", 0, -1, 10, "", 3, 60, 10},
          {"important", 100, -1, 10, "", 400, 10, 0},
      },
      4000, 8192, extra);
  Policy p = policyFrom(R"({"evictionHard": {"pid.available": "5%", "nodefs.available": "10%"}})");
  auto r = evaluate(s, p, {}, kStart);
  REQUIRE(r.decision.pids.has_value());
  CHECK(keys(*r.decision.pids) ==
        std::vector<std::string>{"ns/forky", "ns/few", "ns/writer", "ns/important"});
  REQUIRE(r.decision.ephemeralStorage.has_value());
  // writer: 60Mi over a 10Mi request (6x); few: 50Mi of 100Mi; forky: no request (infinite).
  CHECK(keys(*r.decision.ephemeralStorage) ==
        std::vector<std::string>{"ns/forky", "ns/writer", "ns/few", "ns/important"});
  CHECK(r.decision.conditions == std::vector<std::string>{"DiskPressure", "PIDPressure"});
  // pid: 50 + 0 - 10 = 40 processes: forky (500) covers it. nodefs: 10Mi - 1Mi = 9Mi: forky
  // frees only 5Mi, so writer goes too.
  CHECK(evicted(r) == std::vector<std::string>{"ns/forky", "ns/writer"});
  CHECK((r.decision.evict[0].signal == Signal::NodeFsAvailable));
  CHECK(r.decision.evict[0].message.rfind("The node was low on resource: ephemeral-storage. "
                                          "Threshold quantity: 10Mi, available: 1Mi. ",
                                          0) == 0);
}

TEST_CASE("memory is reclaimed first and what it frees counts for the other signals") {
  const std::string extra = R"(, "rlimit": {"maxpid": 1000, "curproc": 990})";
  Snapshot s =
      makeSnapshot({{"a", 0, -1, 500, "", 100}, {"b", 1, -1, 10, "", 400}}, 50, 8192, extra);
  Policy p =
      policyFrom(R"({"evictionHard": {"memory.available": "100Mi", "pid.available": "5%"}})");
  auto r = evaluate(s, p, {}, kStart);
  // memory: a covers 50Mi; pids: 50 - 10 = 40 needed, a's 100 processes already freed.
  CHECK(evicted(r) == std::vector<std::string>{"ns/a"});
  CHECK((r.decision.evict[0].signal == Signal::MemoryAvailable));
}

TEST_CASE("allocatableMemory.available: the kubepods figures, else allocatable - pods' usage") {
  Policy p = policyFrom(R"({"evictionHard": {"allocatableMemory.available": "1Gi"}})");
  SUBCASE("from the pods system container") {
    Snapshot s = makeSnapshot(
        {{"a", 0, -1, 100}}, 4000, 8192,
        R"(, "systemContainers": [{"name": "pods", "memory": {"availableBytes": 524288000, "workingSetBytes": 1048576000}}])");
    auto obs = nodewarden::policy::observeSignals(nodewarden::policy::makeNodeView(s, "n"));
    auto r = evaluate(s, p, {}, kStart);
    REQUIRE(r.decision.signals.size() == 1);
    CHECK(r.decision.signals[0].available == 524288000);
    CHECK(r.decision.signals[0].capacity == 1572864000);
    CHECK(evicted(r) == std::vector<std::string>{"ns/a"});
  }
  SUBCASE("from the node's allocatable memory") {
    Snapshot s = makeSnapshot({{"a", 0, -1, 3000}, {"b", 0, -1, 3500}}, 4000);
    auto r = evaluate(s, p, {}, kStart);
    REQUIRE(r.decision.signals.size() == 1);
    CHECK(r.decision.signals[0].capacity == 7 * 1024 * kMi);
    CHECK(r.decision.signals[0].available == (7 * 1024 - 6500) * kMi);
    CHECK(r.decision.conditions == std::vector<std::string>{"MemoryPressure"});
  }
}

TEST_CASE("a node without stats has no signals, ranks every pod as without usage") {
  Snapshot s = makeSnapshot({{"b", 0, -1, -1}, {"a", 0, -1, -1}}, 4000);
  s.stats.clear();
  auto r = evaluate(s, policyFrom("{}"), {}, kStart);
  CHECK(r.decision.signals.empty());
  CHECK(keys(r.decision.memory) == std::vector<std::string>{"ns/a", "ns/b"});
  CHECK(evicted(r).empty());
}

TEST_CASE("explain JSON has exactly the contract's shape") {
  Snapshot s = makeSnapshot({{"hog", 0, 100, 700}}, 60, 8192);
  auto r =
      evaluate(s, policyFrom(R"({"evictionHard": {"memory.available": "100Mi"}})"), {}, kStart);
  auto json = nodewarden::policy::evictionToJson(r.decision);
  const auto expected = nodewarden::policy::OrderedJson::parse(R"({
    "node": "n",
    "signals": [{"signal": "memory.available", "available": 62914560, "capacity": 8589934592,
                 "threshold": 104857600, "kind": "hard", "met": true}],
    "conditions": ["MemoryPressure"],
    "ranking": {"memory": ["ns/hog"]},
    "evict": [{"pod": "ns/hog", "signal": "memory.available", "gracePeriodSeconds": 0,
               "message": "The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi. Container c was using 700Mi, request is 100Mi, has larger consumption of memory. "}]
  })");
  CHECK(json.dump() == expected.dump());
}

TEST_CASE("the same inputs give the same decision") {
  Snapshot s = makeSnapshot({{"a", 0, -1, 100}, {"b", 0, -1, 100}, {"c", 0, -1, 100}}, 10);
  Policy p = policyFrom(R"({"evictionHard": {"memory.available": "150Mi"}})");
  auto first = nodewarden::policy::evictionToJson(evaluate(s, p, {}, kStart).decision).dump();
  for (int i = 0; i < 20; ++i) {
    CHECK(nodewarden::policy::evictionToJson(evaluate(s, p, {}, kStart).decision).dump() == first);
  }
}

TEST_CASE("disk and PID pressure evict even when no pod reports that usage") {
  const std::string extra =
      R"(, "fs": {"availableBytes": 1, "capacityBytes": 1000}, "rlimit": {"maxpid": 100, "curproc": 99})";
  Snapshot s = makeSnapshot({{"a", 0, -1, 10}, {"b", 5, -1, 10}}, 4000, 8192, extra);
  auto r = evaluate(
      s, policyFrom(R"({"evictionHard": {"nodefs.available": "10%", "pid.available": "5%"}})"), {},
      kStart);
  CHECK(r.decision.conditions == std::vector<std::string>{"DiskPressure", "PIDPressure"});
  // Pods without usage data rank first; the lowest priority goes first. The rankings are not
  // shown (no pod has that usage), but the plan still uses them.
  CHECK_FALSE(r.decision.ephemeralStorage.has_value());
  CHECK(evicted(r) == std::vector<std::string>{"ns/a", "ns/b"});
}

TEST_CASE("once met, a soft threshold stays met until threshold + minimum reclaim, grace or not") {
  Policy p = policyFrom(R"({"evictionSoft": {"memory.available": "500Mi"},
                            "evictionSoftGracePeriod": {"memory.available": "30s"},
                            "evictionMinimumReclaim": {"memory.available": "100Mi"}})");
  std::vector<PodSpec> pods = {{"a", 0, -1, 600}};
  auto r = evaluate(makeSnapshot(pods, 400), p, {}, kStart);
  CHECK(r.decision.signals.at(0).met);
  // 550Mi is above the threshold but below threshold + minimum reclaim: still met, and the
  // grace period keeps running from the first observation.
  r = evaluate(makeSnapshot(pods, 550), p, r.next, kStart + 10s);
  CHECK(r.decision.signals.at(0).met);
  r = evaluate(makeSnapshot(pods, 550), p, r.next, kStart + 30s);
  CHECK(evicted(r) == std::vector<std::string>{"ns/a"});
  r = evaluate(makeSnapshot(pods, 600), p, r.next, kStart + 31s);
  CHECK_FALSE(r.decision.signals.at(0).met);
}

TEST_CASE("a zero transition period still reports a condition while its threshold is met") {
  Policy p = policyFrom(R"({"evictionHard": {"memory.available": "100Mi"},
                            "evictionPressureTransitionPeriod": "0s"})");
  std::vector<PodSpec> pods = {{"a", 0, -1, 10}};
  auto r = evaluate(makeSnapshot(pods, 50), p, {}, kStart);
  CHECK(r.decision.conditions == std::vector<std::string>{"MemoryPressure"});
  r = evaluate(makeSnapshot(pods, 4000), p, r.next, kStart + 1s);
  CHECK(r.decision.conditions.empty());
}

TEST_CASE("figures as large as int64 allows do not overflow") {
  Snapshot s = makeSnapshot({{"a", 0, -1, 10}}, 4000, 8192,
                            R"(, "rlimit": {"maxpid": 9223372036854775807, "curproc": 0})");
  s.stats["n"].node.memoryAvailableBytes = 9223372036854775807ULL;
  s.stats["n"].node.memoryWorkingSetBytes = 9223372036854775807ULL;
  auto r = evaluate(
      s, policyFrom(R"({"evictionHard": {"memory.available": "100Mi", "pid.available": "5%"}})"),
      {}, kStart);
  REQUIRE(r.decision.signals.size() == 2);
  CHECK(r.decision.signals[0].capacity == 9223372036854775807LL);
  CHECK_FALSE(r.decision.signals[0].met);
  CHECK(evicted(r).empty());
}
