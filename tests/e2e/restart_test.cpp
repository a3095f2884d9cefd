// Restart safety on a real sandbox node: the agent SIGKILLed in the middle of a soft
// eviction's grace period and started again with its eviction journal finishes that pod
// exactly once, at the kill time first given, and chooses no second victim for memory the
// first is still freeing.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "tests/e2e/e2e_env.h"

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;

TEST_CASE("restart: an eviction under way is finished once by the next run, no second victim") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir manifests;
  TempDir files;
  const std::string policyFile = files.file("policy.json");
  const std::string journal = files.file("evictions.json");
  writeFile(policyFile, R"({
    "evictionSoft": { "allocatableMemory.available": "200Mi" },
    "evictionSoftGracePeriod": { "allocatableMemory.available": "1s" },
    "evictionMaxPodGracePeriod": 6,
    "housekeepingInterval": "1s"
  })");
  constexpr double kPodGrace = 6.0;

  // victim: first in the ranking, ignores SIGTERM, so its memory stays until SIGKILL.
  // second: next in the ranking — what an agent that forgot the first would choose.
  PodSpec victim = PodSpec("e2e", "victim").withPriority(0).withGrace(30);
  PodSpec second = PodSpec("e2e", "second").withPriority(500).withGrace(30);
  PodSpec web = PodSpec("e2e", "web").withPriority(1000).request("memory", "128Mi");
  const std::string victimCgroup = addPod(sandbox, &manifests, victim);
  const std::string secondCgroup = addPod(sandbox, &manifests, second);
  const std::string webCgroup = addPod(sandbox, &manifests, web);
  const pid_t victimPid = spawnAllocator(sandbox, victimCgroup, 100 * kMiB, OnTerm::Ignore);
  const pid_t secondPid = spawnAllocator(sandbox, secondCgroup, 40 * kMiB, OnTerm::Ignore);
  const pid_t webPid = spawnAllocator(sandbox, webCgroup, 60 * kMiB);

  AgentConfig config;
  config.policyFile = policyFile;
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  config.extraArgs = {"--eviction-journal", journal};
  auto first = std::make_unique<AgentProcess>(config);

  // 120 MiB available: need 80 MiB, the victim's 100 MiB cover it (220 MiB after it goes).
  const pid_t pressure = spawnAllocatorTo(sandbox, webCgroup, 120 * std::int64_t(kMiB));
  const auto evict =
      first->waitFor([&](const LogLine& line) { return line.event() == "evict"; }, 15000ms);
  REQUIRE_MESSAGE(evict.has_value(), first->logText());
  CHECK(evict->field("pod") == victim.key());
  CHECK(evict->number("grace_seconds") == kPodGrace);
  const SteadyTime orderedAt = evict->seenAt;
  {
    std::ifstream in(journal);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    CHECK_MESSAGE(text.find(victim.key()) != std::string::npos, text);
  }

  // The agent dies in the grace period: SIGTERM has been sent, SIGKILL has not.
  std::this_thread::sleep_until(orderedAt + 1500ms);
  first->signal(SIGKILL);
  REQUIRE(waitUntil([&] { return !first->running(); }, 3000ms));
  CHECK(first->events("evict").size() == 1);
  CHECK(alive(victimPid));

  AgentProcess next(config);
  const auto resumed = next.waitForEvent("evict-resumed", 3000ms);
  REQUIRE_MESSAGE(resumed.has_value(), next.logText());
  CHECK(resumed->field("pod") == victim.key());
  // What is left of the first order's grace, never a fresh one: the restart came >= 1.5 s
  // after the order (decided by the agent from the journal, not by this test's timing).
  CHECK(resumed->number("grace_left_seconds") >= 0);
  CHECK(resumed->number("grace_left_seconds") <= kPodGrace - 1);

  // SIGKILL at the first run's kill time, not a whole grace period after the restart.
  const std::optional<int> end = reapChild(sandbox, victimPid, 20000ms);
  const SteadyTime endAt = now();
  REQUIRE_MESSAGE(end.has_value(), next.logText());
  CHECK(WIFSIGNALED(*end));
  CHECK(WTERMSIG(*end) == SIGKILL);
  // Not before the first order's kill time (orderedAt is when this test saw the order, a
  // little after it was given: the margin covers that on a busy machine).
  CHECK(seconds(orderedAt, endAt) >= kPodGrace - 1.5);

  // Once, and nobody else: no new order while the victim was exiting, nor after.
  REQUIRE(waitUntil([&] { return !next.events("evicted").empty(); }, 5000ms));
  std::this_thread::sleep_for(1500ms);
  CHECK_MESSAGE(next.events("evict").empty(), next.logText());
  CHECK(alive(secondPid));
  CHECK(alive(webPid));
  CHECK(alive(pressure));
  {
    std::ifstream in(journal);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    CHECK_MESSAGE(text.find(victim.key()) == std::string::npos, text);
  }
  if (std::getenv("E2E_VERBOSE")) MESSAGE(next.logText());
}

TEST_CASE("restart: a journal cut short is ignored with a warning, and the agent decides afresh") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir manifests;
  TempDir files;
  const std::string journal = files.file("evictions.json");
  writeFile(journal, "{\"kind\": \"NodewardenEvictionJournal\", \"evictions\": [{\"uid\"");
  PodSpec web = PodSpec("e2e", "web").withPriority(1000);
  addPod(sandbox, &manifests, web);
  AgentConfig config;
  config.policyFile = files.file("policy.json");
  writeFile(config.policyFile, R"({"housekeepingInterval": "1s"})");
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  config.extraArgs = {"--eviction-journal", journal};
  AgentProcess agent(config);
  const auto ignored = agent.waitForEvent("eviction-journal-ignored", 2000ms);
  REQUIRE_MESSAGE(ignored.has_value(), agent.logText());
  CHECK(ignored->field("error").find("cut short") != std::string::npos);
  CHECK(agent.events("evict-resumed").empty());
  CHECK(agent.running());
}
