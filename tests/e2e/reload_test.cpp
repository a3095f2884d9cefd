// Policy reloads of a running agent: SIGHUP with an invalid file is rejected (the error logged,
// the last good policy kept and acting); a valid edit is picked up without a signal.
// A file cut short, replaced by rename or deleted keeps the last good policy too.
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

TEST_CASE("policy reload: an invalid file is rejected and the old policy acts; an edit applies") {
  // The systemd driver's layout, as on most cgroup v2 nodes.
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB, cgroups::Driver::Systemd);
  TempDir manifests;
  TempDir files;
  const std::string policyFile = files.file("policy.json");
  writeFile(policyFile, R"({
    "evictionHard": { "allocatableMemory.available": "150Mi" },
    "housekeepingInterval": "500ms"
  })");
  PodSpec web = PodSpec("e2e", "web").withPriority(0).request("memory", "64Mi");
  PodSpec critical = PodSpec("kube-system", "node-agent").withClass("system-node-critical");
  const std::string webCgroup = addPod(sandbox, &manifests, web);
  const std::string criticalCgroup = addPod(sandbox, &manifests, critical);
  const pid_t webPid = spawnAllocator(sandbox, webCgroup, 10 * kMiB);
  const pid_t criticalPid = spawnAllocator(sandbox, criticalCgroup, 10 * kMiB);

  AgentConfig config;
  config.policyFile = policyFile;
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  AgentProcess agent(config);
  Json state = getState(agent.port());
  CHECK(signalOf(state, kSignal, "hard")["threshold"] == 150 * std::int64_t(kMiB));
  CHECK(state["signals"].size() == 1);

  // An invalid file (an unknown key and a malformed quantity), then SIGHUP.
  std::size_t mark = agent.lines().size();
  writeFile(policyFile, R"({
    "evictionHard": { "allocatableMemory.available": "15OMi" },
    "evictionHardd": { "memory.available": "1Gi" }
  })");
  agent.signal(SIGHUP);
  const auto reload = agent.waitFor(
      [](const LogLine& line) {
        return line.event() == "reload" && line.field("signal") == "SIGHUP";
      },
      3s, mark);
  REQUIRE_MESSAGE(reload.has_value(), agent.logText());
  std::size_t reloadIndex = mark;
  while (agent.lines()[reloadIndex].raw != reload->raw) ++reloadIndex;
  const auto rejected = agent.waitForEvent("policy-reload-rejected", 2s, reloadIndex);
  REQUIRE_MESSAGE(rejected.has_value(), agent.logText());
  CAPTURE(rejected->raw);
  CHECK(rejected->field("level") == "error");
  CHECK(rejected->field("file") == policyFile);
  const std::string errors = rejected->field("errors");
  CHECK(errors.find(policyFile) != std::string::npos);
  CHECK(errors.find("evictionHardd") != std::string::npos);
  CHECK(errors.find("15OMi") != std::string::npos);
  CHECK(agent.events("policy-reloaded").empty());

  // The old thresholds still act: 115 MiB available (measured), below the old 150Mi (and
  // above the rejected file's): web, the one evictable pod, goes.
  std::this_thread::sleep_for(1s);  // a few cycles with the invalid file in place
  CHECK(agent.running());
  state = getState(agent.port());
  CHECK(signalOf(state, kSignal, "hard")["threshold"] == 150 * std::int64_t(kMiB));
  CHECK(state["signals"].size() == 1);
  const pid_t pressure = spawnAllocatorTo(sandbox, criticalCgroup, 115 * std::int64_t(kMiB));
  const auto evict = agent.waitForEvent("evict", 3s, mark);
  REQUIRE_MESSAGE(evict.has_value(), agent.logText());
  CHECK(evict->field("pod") == web.key());
  CHECK(evict->number("threshold") == 150.0 * kMiB);
  const std::optional<int> webEnd = reapChild(sandbox, webPid, 2s);
  REQUIRE(webEnd.has_value());
  CHECK(WIFSIGNALED(*webEnd));
  // Still met: 115 MiB + web's 10 MiB and its process's overhead (well under 25 MiB) < 150,
  // and nothing left to evict.
  REQUIRE(waitUntil([&] { return agent.events("evicted").size() == 1; }, 2s));
  std::this_thread::sleep_for(600ms);
  state = getState(agent.port());
  CHECK(signalOf(state, kSignal, "hard")["met"] == true);
  const std::int64_t available = signalOf(state, kSignal, "hard")["available"];
  CHECK(available > 100 * std::int64_t(kMiB));
  CHECK(available < 150 * std::int64_t(kMiB));
  CHECK(agent.events("policy-reloaded").empty());
  // Each rejection once: by SIGHUP, and perhaps once more if a cycle saw the change first.
  CHECK(agent.events("policy-reload-rejected").size() <= 2);
  const HttpReply metrics = httpRequest(agent.port(), "GET", "/metrics");
  CHECK(metricValue(metrics.body, "nodewarden_policy_reloads_total", R"(result="rejected")") >=
        1.0);

  // A valid edit, no signal: picked up by the file watch within ~2 s.
  mark = agent.lines().size();
  const SteadyTime edited = now();
  writeFile(policyFile, R"({
    "evictionHard": { "allocatableMemory.available": "100Mi" },
    "evictionSoft": { "allocatableMemory.available": "180Mi" },
    "evictionSoftGracePeriod": { "allocatableMemory.available": "10s" },
    "housekeepingInterval": "1s"
  })");
  const auto reloaded = agent.waitForEvent("policy-reloaded", 3s, mark);
  REQUIRE_MESSAGE(reloaded.has_value(), agent.logText());
  CAPTURE(reloaded->raw);
  CHECK(std::chrono::duration<double>(reloaded->seenAt - edited).count() <= 2.0);
  CHECK(reloaded->number("thresholds") == 2);
  CHECK(reloaded->number("interval_ms") == 1000);
  state = getState(agent.port());
  CHECK(signalOf(state, kSignal, "hard")["threshold"] == 100 * std::int64_t(kMiB));
  CHECK(signalOf(state, kSignal, "soft")["threshold"] == 180 * std::int64_t(kMiB));
  CHECK(state["signals"].size() == 2);
  CHECK(agent.events("policy-reloaded").size() == 1);
  // 125–150 MiB available: above the new hard threshold, below the new soft one (10 s grace).
  CHECK(signalOf(state, kSignal, "hard")["met"] == false);
  CHECK(signalOf(state, kSignal, "soft")["met"] == true);
  CHECK(state["evict"].empty());

  // The new interval governs /healthz (3 intervals) and the loop keeps running.
  std::this_thread::sleep_for(1500ms);
  CHECK(httpRequest(agent.port(), "GET", "/healthz").status == 200);
  CHECK(agent.events("evict").size() == 1);
  CHECK(alive(criticalPid));
  CHECK(alive(pressure));

  if (std::getenv("E2E_VERBOSE")) MESSAGE(agent.logText());
  const std::optional<int> status = agent.stop();
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
}

TEST_CASE(
    "policy reload: a file cut short, replaced by rename, or deleted — the last good one acts") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir manifests;
  TempDir files;
  const std::string policyFile = files.file("policy.json");
  const std::string good150 = R"({
    "evictionHard": { "allocatableMemory.available": "150Mi" },
    "housekeepingInterval": "500ms"
  })";
  writeFile(policyFile, good150);
  PodSpec web = PodSpec("e2e", "web").withPriority(0);
  addPod(sandbox, &manifests, web);
  AgentConfig config;
  config.policyFile = policyFile;
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  AgentProcess agent(config);
  auto threshold = [&] {
    return signalOf(getState(agent.port()), kSignal, "hard")["threshold"].get<std::int64_t>();
  };
  CHECK(threshold() == 150 * std::int64_t(kMiB));

  // Cut short mid-write (an editor or a config tool that writes in place): rejected.
  std::size_t mark = agent.lines().size();
  writeFile(policyFile, good150.substr(0, good150.size() / 2));
  const auto rejected = agent.waitForEvent("policy-reload-rejected", 6s, mark);
  REQUIRE_MESSAGE(rejected.has_value(), agent.logText());
  CHECK(threshold() == 150 * std::int64_t(kMiB));

  // Replaced by rename (a ConfigMap update, `mv`): a new inode, picked up.
  mark = agent.lines().size();
  const std::string staged = files.file("policy.json.new");
  writeFile(staged, R"({
    "evictionHard": { "allocatableMemory.available": "100Mi" },
    "housekeepingInterval": "500ms"
  })");
  REQUIRE(std::rename(staged.c_str(), policyFile.c_str()) == 0);
  const auto reloaded = agent.waitForEvent("policy-reloaded", 6s, mark);
  REQUIRE_MESSAGE(reloaded.has_value(), agent.logText());
  CHECK(threshold() == 100 * std::int64_t(kMiB));

  // Deleted, then SIGHUP: rejected ("cannot read"), the last good policy acts on.
  mark = agent.lines().size();
  REQUIRE(std::remove(policyFile.c_str()) == 0);
  std::this_thread::sleep_for(700ms);  // cycles with the file gone
  agent.signal(SIGHUP);
  const auto gone = agent.waitForEvent("policy-reload-rejected", 6s, mark);
  REQUIRE_MESSAGE(gone.has_value(), agent.logText());
  CHECK(gone->field("errors").find("cannot read") != std::string::npos);
  CHECK(threshold() == 100 * std::int64_t(kMiB));
  CHECK(agent.running());
  CHECK(httpRequest(agent.port(), "GET", "/healthz").status == 200);
}
