// `nodewarden agent --dry-run` on a real sandbox node under pressure: it decides and logs
// ("evict-dry-run"), and never signals a process.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <cstdlib>
#include <thread>

#include "tests/e2e/e2e_env.h"

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;

TEST_CASE("--dry-run logs the evictions it would make and kills nothing") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir manifests;
  TempDir files;
  const std::string policyFile = files.file("policy.json");
  writeFile(policyFile, R"({
    "evictionHard": { "allocatableMemory.available": "200Mi" },
    "evictionMinimumReclaim": { "allocatableMemory.available": "50Mi" },
    "evictionMaxPodsPerCycle": 5,
    "housekeepingInterval": "500ms"
  })");
  PodSpec bestEffort = PodSpec("e2e", "best-effort").withPriority(0);
  PodSpec overRequest = PodSpec("e2e", "over-request").withPriority(0).request("memory", "20Mi");
  PodSpec web = PodSpec("e2e", "web").withPriority(1000).request("memory", "256Mi");
  PodSpec critical = PodSpec("kube-system", "node-agent").withClass("system-node-critical");
  const std::string bestEffortCgroup = addPod(sandbox, &manifests, bestEffort);
  const std::string overRequestCgroup = addPod(sandbox, &manifests, overRequest);
  const std::string webCgroup = addPod(sandbox, &manifests, web);
  const std::string criticalCgroup = addPod(sandbox, &manifests, critical);
  std::vector<pid_t> pids = {
      spawnAllocator(sandbox, bestEffortCgroup, 24 * kMiB),
      spawnAllocator(sandbox, overRequestCgroup, 60 * kMiB),
      spawnAllocator(sandbox, webCgroup, 80 * kMiB),
      spawnAllocator(sandbox, criticalCgroup, 30 * kMiB),
  };

  AgentConfig config;
  config.policyFile = policyFile;
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  config.dryRun = true;
  AgentProcess agent(config);
  const auto start = agent.events("agent-start");
  REQUIRE(start.size() == 1);
  CHECK(start[0].field("actuator") == "dry run");

  // The same pressure as e2e/eviction: best-effort and over-request would go, and no more
  // once the allocation is whole (need 78 MiB, they hold 84 MiB and more).
  pids.push_back(spawnAllocatorTo(sandbox, webCgroup, 172 * std::int64_t(kMiB)));
  REQUIRE_MESSAGE(waitUntil([&] { return agent.events("evict-dry-run").size() >= 2; }, 5s),
                  agent.logText());
  std::this_thread::sleep_for(3s);  // six more cycles under the same pressure

  const std::vector<LogLine> wouldEvict = agent.events("evict-dry-run");
  std::vector<std::string> pods;
  for (const LogLine& line : wouldEvict) pods.push_back(line.field("pod"));
  // Each decision is logged once (not every cycle), in the ranking's order.
  const std::vector<std::string> expected = {bestEffort.key(), overRequest.key()};
  CHECK_MESSAGE(pods == expected, agent.logText());
  for (const LogLine& line : wouldEvict) {
    CAPTURE(line.raw);
    CHECK(line.field("kind") == "hard");
    CHECK(line.field("signal") == "allocatableMemory.available");
    CHECK(line.field("reason").starts_with("The node was low on resource: memory."));
  }
  CHECK(agent.events("evict").empty());
  CHECK(agent.events("evicted").empty());
  CHECK(agent.events("eviction-failed").empty());
  for (pid_t pid : pids) {
    CAPTURE(pid);
    CHECK(alive(pid));
  }

  // The live decision still names them; the metrics count dry runs, not evictions.
  const Json state = getState(agent.port());
  CHECK(signalOf(state, "allocatableMemory.available", "hard")["met"] == true);
  std::vector<std::string> decided;
  for (const Json& entry : state["evict"]) decided.push_back(entry["pod"].get<std::string>());
  CHECK(decided == expected);
  const HttpReply metrics = httpRequest(agent.port(), "GET", "/metrics");
  CHECK(metricValue(metrics.body, "nodewarden_dry_run_evictions_total",
                    R"(signal="allocatableMemory.available")") == 2.0);
  CHECK(metrics.body.find("nodewarden_evictions_total{") == std::string::npos);
  CHECK(metricValue(metrics.body, "nodewarden_eviction_latency_seconds_count") == 0.0);

  if (std::getenv("E2E_VERBOSE")) MESSAGE(agent.logText());
  const std::optional<int> status = agent.stop();
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  for (pid_t pid : pids) CHECK(alive(pid));
}
