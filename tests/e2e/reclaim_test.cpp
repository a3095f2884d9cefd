// Minimum reclaim and the pressure transition period on a real sandbox node, read through
// /v1/state: a met threshold stays met until available ≥ threshold + minimum reclaim, and
// MemoryPressure is held for evictionPressureTransitionPeriod after the last time it was met.
// The only pod is critical, so the agent never frees memory itself: the test does.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "tests/e2e/e2e_env.h"

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;

namespace {

const char* kSignal = "allocatableMemory.available";

}  // namespace

TEST_CASE("minimum reclaim holds the threshold met; the transition period holds the condition") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir manifests;
  TempDir files;
  const std::int64_t kThreshold = 200 * std::int64_t(kMiB);
  const std::int64_t kMinReclaim = 100 * std::int64_t(kMiB);
  constexpr double kTransition = 4.0;
  constexpr double kInterval = 0.5;
  const std::string policyFile = files.file("policy.json");
  writeFile(policyFile, R"({
    "evictionHard": { "allocatableMemory.available": "200Mi" },
    "evictionMinimumReclaim": { "allocatableMemory.available": "100Mi" },
    "evictionPressureTransitionPeriod": "4s",
    "housekeepingInterval": "500ms"
  })");
  PodSpec critical = PodSpec("kube-system", "node-agent")
                         .withClass("system-node-critical")
                         .request("memory", "64Mi");
  const std::string cgroup = addPod(sandbox, &manifests, critical);
  const pid_t base = spawnAllocator(sandbox, cgroup, 150 * kMiB);

  AgentConfig config;
  config.policyFile = policyFile;
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  AgentProcess agent(config);
  auto signal = [&] { return signalOf(getState(agent.port()), kSignal, "hard"); };
  Json state = getState(agent.port());
  CHECK(signalOf(state, kSignal, "hard")["met"] == false);
  CHECK_FALSE(hasCondition(state, "MemoryPressure"));

  // 1. Down to 170 MiB available (measured) < 200: met, MemoryPressure.
  const pid_t small = spawnAllocator(sandbox, cgroup, 60 * kMiB);
  const pid_t large = spawnAllocatorTo(sandbox, cgroup, 170 * std::int64_t(kMiB));
  REQUIRE_MESSAGE(waitUntil([&] { return signal()["met"] == true; }, 2s, 50ms), agent.logText());
  state = getState(agent.port());
  CHECK(signalOf(state, kSignal, "hard")["available"].get<std::int64_t>() < kThreshold);
  CHECK(hasCondition(state, "MemoryPressure"));
  CHECK(state["evict"].empty());  // nothing evictable

  // 2. Free 60 MiB: ~230 available, above the threshold but below threshold + minimum
  // reclaim: still met, for as long as that lasts.
  ::kill(small, SIGKILL);
  REQUIRE(reapChild(sandbox, small, 2s).has_value());
  REQUIRE_MESSAGE(
      waitUntil([&] { return signal()["available"].get<std::int64_t>() >= kThreshold; }, 2s, 50ms),
      signal().dump());
  const SteadyTime between = now();
  int polls = 0;
  while (secondsSince(between) < 4 * kInterval) {
    const Json s = signal();
    CAPTURE(s.dump());
    const std::int64_t available = s["available"].get<std::int64_t>();
    CHECK(available >= kThreshold);
    CHECK(available < kThreshold + kMinReclaim);
    CHECK(s["met"] == true);
    ++polls;
    std::this_thread::sleep_for(100ms);
  }
  CHECK(polls >= 10);
  CHECK(hasCondition(getState(agent.port()), "MemoryPressure"));

  // 3. Free ~130 MiB more: ~360 available ≥ 300: no longer met, at the next cycle.
  ::kill(large, SIGKILL);
  REQUIRE(reapChild(sandbox, large, 2s).has_value());
  const SteadyTime freed = now();
  REQUIRE_MESSAGE(waitUntil([&] { return signal()["met"] == false; },
                            std::chrono::milliseconds(int(2 * kInterval * 1000 + 500)), 50ms),
                  signal().dump());
  CHECK(signal()["available"].get<std::int64_t>() >= kThreshold + kMinReclaim);

  // 4. MemoryPressure stays for the transition period after the last cycle that saw the
  // threshold met (at most one interval before `freed`), then goes.
  std::optional<double> droppedAfter;
  while (secondsSince(freed) < kTransition + 3) {
    const Json s = getState(agent.port());
    if (!hasCondition(s, "MemoryPressure")) {
      droppedAfter = secondsSince(freed);
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  REQUIRE_MESSAGE(droppedAfter.has_value(), "MemoryPressure never dropped");
  CHECK(*droppedAfter >= kTransition - kInterval - 0.2);
  CHECK(*droppedAfter <= kTransition + kInterval + 0.3);
  // The metric follows at the next cycle.
  CHECK(waitUntil(
      [&] {
        return metricValue(httpRequest(agent.port(), "GET", "/metrics").body,
                           "nodewarden_node_condition", R"(condition="MemoryPressure")") == 0.0;
      },
      2s, 100ms));

  CHECK(agent.events("evict").empty());
  CHECK(alive(base));
  if (std::getenv("E2E_VERBOSE")) MESSAGE(agent.logText());
  const std::optional<int> status = agent.stop();
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
}
