// A soft threshold on a real sandbox node: nothing happens during its grace period; then the
// victims get SIGTERM and, after min(evictionMaxPodGracePeriod, the pod's
// terminationGracePeriodSeconds), SIGKILL for whatever ignored SIGTERM.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "tests/e2e/e2e_env.h"

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;

TEST_CASE("soft threshold: waits its grace period, then SIGTERM, then SIGKILL after the pod's") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir manifests;
  TempDir files;
  const std::string policyFile = files.file("policy.json");
  writeFile(policyFile, R"({
    "evictionSoft": { "allocatableMemory.available": "200Mi" },
    "evictionSoftGracePeriod": { "allocatableMemory.available": "3s" },
    "evictionMaxPodGracePeriod": 2,
    "evictionMaxPodsPerCycle": 5,
    "housekeepingInterval": "1s"
  })");
  constexpr double kGrace = 3.0;
  constexpr double kInterval = 1.0;

  // batch-a: grace min(2, 1) = 1 s. batch-b: grace min(2, 30) = 2 s.
  PodSpec batchA = PodSpec("e2e", "batch-a").withPriority(0).withGrace(1);
  PodSpec batchB =
      PodSpec("e2e", "batch-b").withPriority(0).withGrace(30).request("memory", "10Mi");
  PodSpec web = PodSpec("e2e", "web").withPriority(1000).request("memory", "128Mi");
  const std::string batchACgroup = addPod(sandbox, &manifests, batchA);
  const std::string batchBCgroup = addPod(sandbox, &manifests, batchB);
  const std::string webCgroup = addPod(sandbox, &manifests, web);
  const pid_t stubbornA = spawnAllocator(sandbox, batchACgroup, 40 * kMiB, OnTerm::Ignore);
  const pid_t politeB = spawnAllocator(sandbox, batchBCgroup, 30 * kMiB, OnTerm::Exit42);
  const pid_t stubbornB = spawnAllocator(sandbox, batchBCgroup, 30 * kMiB, OnTerm::Ignore);
  const pid_t webPid = spawnAllocator(sandbox, webCgroup, 100 * kMiB);

  AgentConfig config;
  config.policyFile = policyFile;
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  AgentProcess agent(config);
  const Json before = getState(agent.port());
  const Json soft = signalOf(before, "allocatableMemory.available", "soft");
  REQUIRE_MESSAGE(soft.is_object(), before.dump(2));
  CHECK(soft["met"] == false);
  CHECK(signalOf(before, "allocatableMemory.available", "hard").is_null());  // none configured
  const std::vector<std::string> expectedRanking = {batchA.key(), batchB.key(), web.key()};
  CHECK(memoryRanking(before) == expectedRanking);

  // Down to 142 MiB available (measured): need ≈ 58 MiB → batch-a (40) and batch-b (60), and
  // with them gone 242 MiB and more is available: nothing else.
  const std::size_t mark = agent.lines().size();
  // The threshold is crossed somewhere between these two moments.
  const SteadyTime pressureStart = now();
  const pid_t pressure = spawnAllocatorTo(sandbox, webCgroup, 142 * std::int64_t(kMiB));
  const SteadyTime pressureDone = now();

  // The threshold is met, but during the grace period nothing is signalled.
  REQUIRE(waitUntil(
      [&] {
        return signalOf(getState(agent.port()), "allocatableMemory.available", "soft")["met"] ==
               true;
      },
      2s, 50ms));
  const Json during = getState(agent.port());
  CHECK(hasCondition(during, "MemoryPressure"));
  CHECK(during["evict"].empty());
  const auto quietUntil = pressureStart + std::chrono::milliseconds(2800);
  const auto early = agent.waitFor([](const LogLine& line) { return line.event() == "evict"; },
                                   std::chrono::duration_cast<Millis>(quietUntil - now()), mark);
  CHECK_MESSAGE(!early.has_value(),
                "evicted during the grace period: " << (early ? early->raw : ""));
  for (pid_t pid : {stubbornA, politeB, stubbornB, webPid, pressure}) CHECK(alive(pid));

  // Then both victims at once, within the grace period + 2 housekeeping intervals.
  REQUIRE_MESSAGE(agent.waitFor([&](const LogLine& l) { return l.event() == "evict"; }, 4s, mark),
                  agent.logText());
  REQUIRE(waitUntil([&] { return agent.events("evict").size() >= 2; }, 2s));
  const std::vector<LogLine> evicts = agent.events("evict");
  REQUIRE(evicts.size() == 2);
  const SteadyTime evictedAt = evicts[0].seenAt;
  CHECK(seconds(pressureStart, evictedAt) >= kGrace - 0.1);
  CHECK(seconds(pressureDone, evictedAt) <= kGrace + 2 * kInterval + 0.3);
  CHECK(evicts[0].field("pod") == batchA.key());
  CHECK(evicts[1].field("pod") == batchB.key());
  CHECK(evicts[0].number("grace_seconds") == 1);
  CHECK(evicts[1].number("grace_seconds") == 2);
  for (const LogLine& line : evicts) {
    CAPTURE(line.raw);
    CHECK(line.field("kind") == "soft");
    CHECK(line.field("signal") == "allocatableMemory.available");
    // Crossing → first signal: at least the grace period.
    CHECK(line.number("latency_ms") >= (kGrace - 0.2) * 1000);
    CHECK(line.number("latency_ms") <= (kGrace + 2 * kInterval + 0.3) * 1000);
  }

  // SIGTERM first: the polite process ends at once, with its own status.
  const std::optional<int> polite = reapChild(sandbox, politeB, 1500ms);
  REQUIRE(polite.has_value());
  CHECK(WIFEXITED(*polite));
  CHECK(WEXITSTATUS(*polite) == 42);
  // The stubborn ones live through their pod's grace period, then get SIGKILL.
  std::this_thread::sleep_until(evictedAt + 700ms);
  CHECK(alive(stubbornA));
  CHECK(alive(stubbornB));
  const std::optional<int> endA = reapChild(sandbox, stubbornA, 2000ms);
  const SteadyTime endAAt = now();
  REQUIRE(endA.has_value());
  CHECK(WIFSIGNALED(*endA));
  CHECK(WTERMSIG(*endA) == SIGKILL);
  CHECK(seconds(evictedAt, endAAt) >= 0.9);
  CHECK(alive(stubbornB));
  std::this_thread::sleep_until(evictedAt + 1700ms);
  CHECK(alive(stubbornB));
  const std::optional<int> endB = reapChild(sandbox, stubbornB, 2000ms);
  const SteadyTime endBAt = now();
  REQUIRE(endB.has_value());
  CHECK(WIFSIGNALED(*endB));
  CHECK(WTERMSIG(*endB) == SIGKILL);
  CHECK(seconds(evictedAt, endBAt) >= 1.9);
  CHECK(seconds(evictedAt, endBAt) <= 3.0);

  // The agent's account of it.
  REQUIRE(waitUntil([&] { return agent.events("evicted").size() >= 2; }, 2s));
  for (const LogLine& line : agent.events("evicted")) {
    CAPTURE(line.raw);
    const double grace = line.field("pod") == batchA.key() ? 1.0 : 2.0;
    CHECK(line.field("method").starts_with("SIGTERM, then "));
    CHECK(line.number("elapsed_ms") >= grace * 1000 - 100);
    CHECK(line.number("elapsed_ms") <= grace * 1000 + 1000);
  }
  CHECK(agent.events("eviction-failed").empty());
  CHECK(alive(webPid));
  CHECK(alive(pressure));

  // ~270 MiB used: no longer met, and nothing more was evicted.
  std::this_thread::sleep_for(1500ms);
  CHECK(agent.events("evict").size() == 2);
  CHECK(signalOf(getState(agent.port()), "allocatableMemory.available", "soft")["met"] == false);
  const HttpReply metrics = httpRequest(agent.port(), "GET", "/metrics");
  CHECK(metricValue(metrics.body, "nodewarden_evictions_total",
                    R"(signal="allocatableMemory.available",reason="soft-threshold")") == 2.0);

  if (std::getenv("E2E_VERBOSE")) MESSAGE(agent.logText());
  const std::optional<int> status = agent.stop();
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
}
