// The agent acts only on pod cgroups below its own kubepods cgroup. Under pressure it must not
// signal a process of the sandbox outside every pod, a process in no sandbox at all, a pod of
// ANOTHER kubepods cgroup (even one whose UID has a manifest), or itself (it runs inside a pod,
// as a DaemonSet's agent does). A pod cgroup without a manifest is reported and ranked as a
// priority-0 pod without requests.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <csignal>
#include <cstdlib>
#include <set>
#include <thread>

#include "tests/e2e/e2e_env.h"

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;

TEST_CASE("never outside the sandbox's pods, never itself; unknown pods rank as priority 0") {
  // 768 MiB with the line at 456Mi: the deficits below are those of 512 MiB and 200Mi, with
  // 256 MiB more before the kernel's limit, which a sanitizer build's processes (shadow
  // memory beside every allocation) need; with 512 MiB the 280 MiB allocation below was
  // sometimes OOM-killed by the kernel there before it could report.
  cgroups::Sandbox sandbox = makeSandbox(768 * kMiB);
  cgroups::Sandbox other = makeSandbox(std::nullopt);
  TempDir manifests;
  TempDir files;
  const std::string policyFile = files.file("policy.json");
  writeFile(policyFile, R"({
    "evictionHard": { "allocatableMemory.available": "456Mi" },
    "evictionMaxPodsPerCycle": 5,
    "housekeepingInterval": "500ms"
  })");
  constexpr double kInterval = 0.5;

  // Pods of this node. Expected ranking: negative (priority −1), unknown (priority 0, 60 MiB),
  // agent-host (priority 0, ~30 MiB), bystander (priority 1000), critical. "elsewhere" has a
  // manifest but no cgroup below this kubepods: nothing of it runs here, so it is no candidate.
  PodSpec negative = PodSpec("e2e", "negative").withPriority(-1);
  PodSpec agentHost = PodSpec("e2e", "agent-host").withPriority(0);
  PodSpec bystander = PodSpec("e2e", "bystander").withPriority(1000).request("memory", "64Mi");
  PodSpec critical = PodSpec("kube-system", "node-exporter").withClass("system-node-critical");
  const std::string negativeCgroup = addPod(sandbox, &manifests, negative);
  const std::string agentHostCgroup = addPod(sandbox, &manifests, agentHost);
  const std::string bystanderCgroup = addPod(sandbox, &manifests, bystander);
  const std::string criticalCgroup = addPod(sandbox, &manifests, critical);
  // A pod cgroup without a manifest.
  PodSpec unknown = PodSpec("unknown", "");
  const std::string unknownCgroup = addPod(sandbox, nullptr, unknown);
  // A pod of ANOTHER kubepods cgroup, big, whose manifest is in this node's directory: the
  // agent knows its UID but must not look for it outside its own kubepods.
  PodSpec elsewhere = PodSpec("e2e", "elsewhere").withPriority(0);
  const std::string elsewhereCgroup = addPod(other, &manifests, elsewhere);

  const pid_t negativePid = spawnAllocator(sandbox, negativeCgroup, 5 * kMiB);
  const pid_t agentHostPid = spawnAllocator(sandbox, agentHostCgroup, 20 * kMiB);
  (void)spawnAllocator(sandbox, bystanderCgroup, 10 * kMiB);
  const pid_t criticalPid = spawnAllocator(sandbox, criticalCgroup, 10 * kMiB);
  const pid_t unknownPid = spawnAllocator(sandbox, unknownCgroup, 60 * kMiB);
  const pid_t elsewherePid = spawnAllocator(other, elsewhereCgroup, 300 * kMiB);
  // Outside every pod: beside kubepods in the sandbox (as system.slice is on a node; cgroup
  // v2 allows no process in the top itself once it hands controllers down), and in no
  // sandbox at all.
  const std::string systemCgroup = sandbox.addChild(sandbox.top(), "system").value();
  const pid_t topPid = spawnAllocator(sandbox, systemCgroup, 100 * kMiB);
  OutsideProcess outside(50 * kMiB);

  AgentConfig config;
  config.policyFile = policyFile;
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  config.moveInto = &sandbox;
  config.moveIntoCgroup = agentHostCgroup;
  AgentProcess agent(config);

  // The unknown pod is reported once and ranked as priority 0 without requests.
  const std::vector<LogLine> reported = agent.events("pod-without-object");
  REQUIRE_MESSAGE(reported.size() == 1, agent.logText());
  CHECK(reported[0].field("uid") == unknown.uid);
  CHECK(reported[0].field("cgroup") == unknownCgroup);
  CHECK(reported[0].field("level") == "warn");
  const std::string unknownKey = "unknown/" + unknown.uid;
  const Json before = getState(agent.port());
  // unknown and agent-host are both priority 0 without requests: the larger usage goes
  // first, and agent-host's includes the agent itself (much larger in a sanitizer build).
  const std::vector<std::string> ranking = memoryRanking(before);
  REQUIRE(ranking.size() == 5);
  CHECK(ranking[0] == negative.key());
  CHECK(std::set<std::string>{ranking[1], ranking[2]} ==
        std::set<std::string>{unknownKey, agentHost.key()});
  CHECK(ranking[3] == bystander.key());
  CHECK(ranking[4] == critical.key());
  CHECK(signalOf(before, "allocatableMemory.available", "hard")["met"] == false);

  // Pressure from a process in kubepods but in no pod: ~395 MiB used of 768, ~373
  // available, need ≈ 83 MiB against 456Mi: negative, unknown and agent-host are chosen. The agent
  // must refuse to kill its own pod; it then backs off from it and the ranking moves on (the
  // pressure, held by a process in no pod, stays: the bystander is a legitimate victim).
  const std::size_t mark = agent.lines().size();
  // A leaf below kubepods that is no pod's: cgroup v2 allows no process in kubepods itself
  // once it hands controllers down ("no internal processes"), and a real node's stray
  // processes sit in such leaves too.
  const std::string noPodCgroup = sandbox.addChild(sandbox.kubepods(), "no-pod").value();
  const pid_t kubepodsPid = spawnAllocator(sandbox, noPodCgroup, 280 * kMiB);
  const SteadyTime pressured = now();
  REQUIRE_MESSAGE(agent.waitForEvent("evict", 3s, mark).has_value(), agent.logText());
  const auto failed = agent.waitFor(
      [&](const LogLine& line) {
        return line.event() == "eviction-failed" && line.field("pod") == agentHost.key();
      },
      3s, mark);
  CHECK_MESSAGE(failed.has_value(), agent.logText());
  if (failed) CHECK(failed->field("error").find("own process") != std::string::npos);
  const SteadyTime windowStart = now();
  std::this_thread::sleep_for(3s);  // the pressure stays (no pod holds it): six cycles
  const double window = secondsSince(windowStart);

  // Only pods of this kubepods were chosen, never the critical pod.
  std::map<std::string, int> attempts;
  for (const LogLine& line : agent.events("evict")) ++attempts[line.field("pod")];
  for (const auto& [pod, count] : attempts) {
    CAPTURE(pod);
    CHECK((pod == negative.key() || pod == unknownKey || pod == agentHost.key() ||
           pod == bystander.key()));
  }
  CHECK(attempts[unknownKey] == 1);
  // A pod with a manifest but no cgroup below this kubepods has nothing to kill: never chosen.
  CHECK_MESSAGE(attempts[elsewhere.key()] == 0, "e2e/elsewhere (no cgroup here) was \"evicted\" "
                                                    << attempts[elsewhere.key()] << " times");
  CHECK(attempts[negative.key()] == 1);
  CHECK(attempts[bystander.key()] <= 1);
  CHECK(attempts[agentHost.key()] == 1);  // refused once, then backed off
  // Its own pod cannot be evicted: retried at most once per housekeeping cycle, not in a loop.
  int selfAttemptsInWindow = 0;
  for (const LogLine& line : agent.events("evict")) {
    if (line.field("pod") == agentHost.key() && line.seenAt >= windowStart) ++selfAttemptsInWindow;
  }
  CHECK_MESSAGE(selfAttemptsInWindow <= int(window / kInterval) + 2,
                selfAttemptsInWindow << " attempts to evict its own pod in " << window
                                     << " s (housekeeping every " << kInterval << " s)");
  MESSAGE("evict lines: " << agent.events("evict").size()
                          << ", eviction-failed lines: " << agent.events("eviction-failed").size()
                          << " in " << secondsSince(pressured) << " s");

  // The victims this kubepods holds are gone; everything else lives, the agent too.
  for (pid_t victim : {negativePid, unknownPid}) {
    const std::optional<int> status = reapChild(sandbox, victim, 2s);
    REQUIRE(status.has_value());
    CHECK(WIFSIGNALED(*status));
    CHECK(WTERMSIG(*status) == SIGKILL);
  }
  CHECK(alive(elsewherePid));
  CHECK(alive(topPid));
  CHECK(alive(kubepodsPid));
  CHECK(alive(outside.pid()));
  CHECK(alive(agentHostPid));
  CHECK(alive(criticalPid));
  CHECK(agent.running());
  CHECK(alive(agent.pid()));
  CHECK(httpRequest(agent.port(), "GET", "/healthz").status == 200);
  // Still under pressure, which no pod can relieve.
  CHECK(signalOf(getState(agent.port()), "allocatableMemory.available", "hard")["met"] == true);

  if (std::getenv("E2E_VERBOSE")) MESSAGE(agent.logText());
  const std::optional<int> status = agent.stop();
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  CHECK(alive(elsewherePid));
  CHECK(alive(agentHostPid));
}
