// Pods the agent may never evict, on a real sandbox node under pressure: a system-node-critical
// pod and a pod at neverEvictPriority hold all the memory. Nothing is killed, and the agent
// says why.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <cstdlib>
#include <thread>

#include "tests/e2e/e2e_env.h"

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;

TEST_CASE("critical pods and pods at neverEvictPriority survive pressure; the agent says why") {
  // The systemd driver's layout, as on most cgroup v2 nodes.
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB, cgroups::Driver::Systemd);
  TempDir manifests;
  TempDir files;
  const std::string policyFile = files.file("policy.json");
  writeFile(policyFile, R"({
    "evictionHard": { "allocatableMemory.available": "200Mi" },
    "neverEvictPriority": 100000,
    "housekeepingInterval": "500ms"
  })");
  PodSpec critical = PodSpec("kube-system", "node-exporter").withClass("system-node-critical");
  PodSpec important = PodSpec("e2e", "important").withPriority(100000).request("memory", "64Mi");
  const std::string criticalCgroup = addPod(sandbox, &manifests, critical);
  const std::string importantCgroup = addPod(sandbox, &manifests, important);
  const pid_t criticalPid = spawnAllocator(sandbox, criticalCgroup, 100 * kMiB);
  const pid_t importantPid = spawnAllocator(sandbox, importantCgroup, 100 * kMiB);

  AgentConfig config;
  config.policyFile = policyFile;
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  AgentProcess agent(config);
  CHECK(signalOf(getState(agent.port()), "allocatableMemory.available", "hard")["met"] == false);

  // ~330 MiB used of 512: met, and only unevictable pods to choose from.
  const std::size_t mark = agent.lines().size();
  const pid_t pressure = spawnAllocator(sandbox, importantCgroup, 130 * kMiB);
  REQUIRE(waitUntil(
      [&] {
        return signalOf(getState(agent.port()), "allocatableMemory.available", "hard")["met"] ==
               true;
      },
      2s, 50ms));
  std::this_thread::sleep_for(3s);  // six cycles under pressure

  const Json state = getState(agent.port());
  CHECK(hasCondition(state, "MemoryPressure"));
  CHECK(state["evict"].empty());
  // Both are ranked (unevictable ones last), neither is chosen.
  const std::vector<std::string> ranking = memoryRanking(state);
  const std::vector<std::string> expectedRanking = {important.key(), critical.key()};
  CHECK(ranking == expectedRanking);
  CHECK(agent.events("evict").empty());
  CHECK(agent.events("evicted").empty());
  CHECK(alive(criticalPid));
  CHECK(alive(importantPid));
  CHECK(alive(pressure));
  const HttpReply metrics = httpRequest(agent.port(), "GET", "/metrics");
  CHECK(metricValue(metrics.body, "nodewarden_threshold_met",
                    R"(signal="allocatableMemory.available",kind="hard")") == 1.0);
  CHECK(metrics.body.find("nodewarden_evictions_total{") == std::string::npos);

  // Why nothing was evicted while the threshold is met: the log (as the kubelet's "unable to
  // evict any pods from the node") or /v1/state must name the reasons: a critical pod, and a
  // priority at or above neverEvictPriority.
  bool explained = false;
  std::string said;
  const std::vector<LogLine>& lines = agent.lines();
  for (std::size_t i = mark; i < lines.size(); ++i) {
    const std::string& raw = lines[i].raw;
    const bool namesCritical = raw.find("critical") != std::string::npos;
    const bool namesNeverEvict = raw.find("neverEvictPriority") != std::string::npos;
    if (namesCritical && namesNeverEvict) explained = true;
    said += raw + "\n";
  }
  const std::string stateText = state.dump();
  if (stateText.find("critical pod") != std::string::npos &&
      stateText.find("neverEvictPriority") != std::string::npos) {
    explained = true;
  }
  CHECK_MESSAGE(explained,
                "a threshold is met and nothing may be evicted, but neither the log nor "
                "/v1/state says why (no line names \"critical\" and \"neverEvictPriority\"); "
                "log since the pressure:\n"
                    << said << "/v1/state: " << stateText);

  if (std::getenv("E2E_VERBOSE")) MESSAGE(agent.logText());
  const std::optional<int> status = agent.stop();
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
}
