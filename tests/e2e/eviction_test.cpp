// A hard threshold on a real sandbox node: the agent evicts exactly the pods docs/reference.md §4
// says (the shortest prefix of the ranking covering threshold + minimum reclaim − available), at
// once, in the ranking's order, and nothing else.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <csignal>
#include <regex>
#include <thread>

#include "tests/e2e/e2e_env.h"

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;

TEST_CASE("hard threshold: the shortest prefix of the ranking is killed at once, nothing else") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir manifests;
  TempDir files;
  const std::int64_t kThreshold = 200 * std::int64_t(kMiB);
  const std::int64_t kMinReclaim = 50 * std::int64_t(kMiB);
  const std::string policyFile = files.file("policy.json");
  writeFile(policyFile, R"({
    "evictionHard": { "allocatableMemory.available": "200Mi" },
    "evictionMinimumReclaim": { "allocatableMemory.available": "50Mi" },
    "evictionMaxPodsPerCycle": 5,
    "housekeepingInterval": "1s"
  })");

  // Ranking by priority, then usage ÷ request: best-effort (∞), over-request (3), web
  // (priority 1000), and the critical node agent last (never evicted).
  PodSpec bestEffort = PodSpec("e2e", "best-effort").withPriority(0);
  PodSpec overRequest = PodSpec("e2e", "over-request")
                            .withPriority(0)
                            .request("memory", "20Mi")
                            .request("cpu", "10m")
                            .withContainerId(std::string(64, 'c'));
  PodSpec web = PodSpec("e2e", "web")
                    .withPriority(1000)
                    .request("memory", "256Mi")
                    .request("cpu", "100m")
                    .limit("memory", "256Mi")
                    .limit("cpu", "100m");
  PodSpec nodeAgent = PodSpec("kube-system", "node-agent")
                          .withClass("system-node-critical")
                          .request("memory", "64Mi");
  const std::string bestEffortCgroup = addPod(sandbox, &manifests, bestEffort);
  const std::string overRequestCgroup = addPod(sandbox, &manifests, overRequest);
  const std::string webCgroup = addPod(sandbox, &manifests, web);
  const std::string nodeAgentCgroup = addPod(sandbox, &manifests, nodeAgent);
  CHECK(qosOf(web) == "guaranteed");
  const pid_t bestEffortPid = spawnAllocator(sandbox, bestEffortCgroup, 24 * kMiB);
  // As the kubelet lays it out: the process in a container cgroup below the pod's.
  const std::string overRequestContainer =
      sandbox.addChild(overRequestCgroup, std::string(64, 'c')).value();
  const pid_t overRequestPid = spawnAllocator(sandbox, overRequestContainer, 60 * kMiB);
  // Its sandbox (the pause container: in no status) holds memory of its own, so the pod's
  // working set is not its container's.
  const std::string overRequestSandbox =
      sandbox.addChild(overRequestCgroup, std::string(64, 'e')).value();
  const pid_t overRequestPausePid = spawnAllocator(sandbox, overRequestSandbox, 12 * kMiB);
  const pid_t webPid = spawnAllocator(sandbox, webCgroup, 80 * kMiB);
  const pid_t nodeAgentPid = spawnAllocator(sandbox, nodeAgentCgroup, 30 * kMiB);

  AgentConfig config;
  config.policyFile = policyFile;
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  AgentProcess agent(config);

  // ~195 MiB used of 512: not met.
  const Json before = getState(agent.port());
  const Json signal = signalOf(before, "allocatableMemory.available", "hard");
  REQUIRE_MESSAGE(signal.is_object(), before.dump(2));
  CHECK(signal["threshold"] == kThreshold);
  CHECK(signal["capacity"] == std::int64_t(512 * kMiB));
  CHECK(signal["met"] == false);
  CHECK(before["evict"].empty());
  const std::vector<std::string> ranking = memoryRanking(before);
  const std::vector<std::string> expectedRanking = {bestEffort.key(), overRequest.key(), web.key(),
                                                    nodeAgent.key()};
  CHECK(ranking == expectedRanking);
  CHECK(agent.events("evict").empty());

  // Pressure in web (priority 1000) down to 172 MiB available, measured (a process's own
  // overhead differs between builds). The agent may decide anywhere between the crossing
  // (need = 200 + 50 − 200 = 50 MiB) and the end of the allocation (need = 200 + 50 − 172 =
  // 78 MiB): best-effort (24 MiB and its process's overhead) alone is never enough,
  // best-effort + over-request (84 MiB and more) always is. The biggest pod, web, is not
  // touched: priority comes first.
  const std::size_t mark = agent.lines().size();
  const pid_t pressurePid = spawnAllocatorTo(sandbox, webCgroup, 172 * std::int64_t(kMiB));
  const auto pressureAt = now();

  REQUIRE_MESSAGE(agent.waitForEvent("evicted", 10s, mark).has_value(), agent.logText());
  // Let the agent decide again with fresh figures; nothing more may go.
  REQUIRE(waitUntil([&] { return agent.events("evicted").size() >= agent.events("evict").size(); },
                    10s));
  std::this_thread::sleep_for(2s);

  const std::vector<LogLine> evicts = agent.events("evict");
  std::vector<std::string> evictedPods;
  for (const LogLine& line : evicts) evictedPods.push_back(line.field("pod"));
  const std::vector<std::string> expectedEvicted = {bestEffort.key(), overRequest.key()};
  CHECK_MESSAGE(evictedPods == expectedEvicted, agent.logText());
  REQUIRE(evicts.size() >= 2);

  // The contract's rule, from the agent's own figures: one cycle, the shortest prefix of the
  // ranking whose usage covers threshold + minimum reclaim − available.
  const double available = evicts[0].number("available");
  const double need = double(kThreshold + kMinReclaim) - available;
  CHECK(evicts[0].number("threshold") == double(kThreshold));
  CHECK(available < double(kThreshold));
  CHECK(evicts[1].number("available") == available);  // the same cycle
  CHECK(evicts[0].number("usage") < need);
  CHECK(evicts[0].number("usage") + evicts[1].number("usage") >= need);
  for (std::size_t i = 0; i < evicts.size() && i < ranking.size(); ++i) {
    CHECK(evicts[i].field("pod") == ranking[i]);
  }
  for (const LogLine& line : evicts) {
    CAPTURE(line.raw);
    CHECK(line.field("signal") == "allocatableMemory.available");
    CHECK(line.field("kind") == "hard");
    CHECK(line.number("grace_seconds") == 0);
    CHECK(line.field("reason").starts_with(
        "The node was low on resource: memory. Threshold quantity: 200Mi, available: "));
    // Kernel notification or the next 1 s cycle, never later.
    CHECK(line.number("latency_ms") < 1500);
    CHECK(std::chrono::duration<double>(line.seenAt - pressureAt).count() < 2.0);
  }
  // docs/reference.md §4: the message is the kubelet's, "followed by the containers over their
  // request": over-request's container "main" uses 60Mi of a 20Mi request, read from its own
  // cgroup (found by the ID its status gives): the pod's working set, 12Mi more, is not it.
  const std::string reason = evicts[1].field("reason");
  std::smatch used;
  REQUIRE_MESSAGE(std::regex_search(reason, used,
                                    std::regex("Container main was using ([0-9]+)(Ki|Mi), request "
                                               "is 20Mi, has larger consumption of memory\\. $")),
                  "the eviction message does not name the container over its request: " << reason);
  const double containerBytes =
      std::stod(used[1].str()) * (used[2].str() == "Mi" ? double(kMiB) : 1024.0);
  CHECK(containerBytes >= double(60 * kMiB));
  CHECK_MESSAGE(
      containerBytes + double(10 * kMiB) < evicts[1].number("usage"),
      "the container's figure is the pod's: " << reason << " usage " << evicts[1].number("usage"));
  for (const LogLine& line : agent.events("evicted")) {
    CAPTURE(line.raw);
    CHECK(line.number("processes") >= 1);
    CHECK(!line.field("method").empty());
    CHECK(line.number("elapsed_ms") < 1000);
  }
  CHECK(agent.events("eviction-failed").empty());

  // The victims' processes were SIGKILLed; everyone else lives.
  for (pid_t victim : {bestEffortPid, overRequestPid, overRequestPausePid}) {
    const std::optional<int> status = reapChild(sandbox, victim, 2s);

    REQUIRE(status.has_value());
    CHECK(WIFSIGNALED(*status));
    CHECK(WTERMSIG(*status) == SIGKILL);
  }
  CHECK(alive(webPid));
  CHECK(alive(pressurePid));
  CHECK(alive(nodeAgentPid));

  // The threshold is no longer met (available ≥ threshold + minimum reclaim); the condition
  // is held for the transition period (the default, 5 minutes).
  const Json after = getState(agent.port());
  const Json afterSignal = signalOf(after, "allocatableMemory.available", "hard");
  CHECK(afterSignal["met"] == false);
  CHECK(afterSignal["available"].get<std::int64_t>() >= kThreshold + kMinReclaim);
  CHECK(after["evict"].empty());
  CHECK(hasCondition(after, "MemoryPressure"));

  const HttpReply metrics = httpRequest(agent.port(), "GET", "/metrics");
  CHECK(metricValue(metrics.body, "nodewarden_evictions_total",
                    R"(signal="allocatableMemory.available",reason="hard-threshold")") == 2.0);
  CHECK(metricValue(metrics.body, "nodewarden_eviction_latency_seconds_count") == 2.0);

  if (std::getenv("E2E_VERBOSE")) MESSAGE(agent.logText());
  const std::optional<int> status = agent.stop();
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  CHECK(agent.events("stopped").size() == 1);
}
