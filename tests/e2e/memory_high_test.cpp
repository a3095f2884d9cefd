// --memory-high-edge on a real sandbox node: on cgroup v2 the agent puts kubepods' memory.high
// at the usage where its allocatable threshold is met, the kernel's "high" event marks the
// crossing, the pods the contract names are evicted, and the value found is given back when
// the agent stops. On cgroup v1 (no memory.high) the flag changes nothing.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "tests/e2e/e2e_env.h"

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;

namespace {

std::string contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string value = text.str();
  while (!value.empty() && value.back() == '\n') value.pop_back();
  return value;
}

}  // namespace

TEST_CASE("--memory-high-edge: memory.high on the line while the agent runs, given back after") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir manifests;
  TempDir files;
  const std::string policyFile = files.file("policy.json");
  writeFile(policyFile, R"({
    "evictionHard": { "allocatableMemory.available": "200Mi" },
    "evictionMinimumReclaim": { "allocatableMemory.available": "50Mi" },
    "housekeepingInterval": "1s"
  })");
  const bool v2 = sandbox.hierarchy().memoryVersion == cgroups::Version::V2;
  const std::string high = sandbox.hierarchy().memory + "/" + sandbox.kubepods() + "/memory.high";
  const std::string found = v2 ? contents(high) : "";
  if (v2) REQUIRE(found == "max");
  if (!v2) MESSAGE("cgroup v1 here: the flag must change nothing (the VM lane runs the v2 part)");

  // Best-effort pods go (the larger first); web, the pressure, has priority 1000 and stays.
  PodSpec small = PodSpec("e2e", "small").withPriority(0);
  PodSpec large = PodSpec("e2e", "large").withPriority(0);
  PodSpec web = PodSpec("e2e", "web").withPriority(1000).request("memory", "256Mi");
  const std::string smallCgroup = addPod(sandbox, &manifests, small);
  const std::string largeCgroup = addPod(sandbox, &manifests, large);
  const std::string webCgroup = addPod(sandbox, &manifests, web);
  const pid_t smallPid = spawnAllocator(sandbox, smallCgroup, 24 * kMiB);
  const pid_t largePid = spawnAllocator(sandbox, largeCgroup, 60 * kMiB);

  AgentConfig config;
  config.policyFile = policyFile;
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  config.extraArgs = {"--memory-high-edge"};
  AgentProcess agent(config);

  if (v2) {
    // capacity − threshold + inactive_file: 312 MiB and the page cache kubepods holds.
    REQUIRE_MESSAGE(waitUntil([&] { return contents(high) != "max"; }, 10s), agent.logText());
    const std::int64_t line = std::stoll(contents(high));
    CHECK(line >= 312 * std::int64_t(kMiB));
    CHECK(line <= 312 * std::int64_t(kMiB) + 64 * std::int64_t(kMiB));
  }

  const std::size_t mark = agent.lines().size();
  const pid_t pressurePid = spawnAllocatorTo(sandbox, webCgroup, 180 * std::int64_t(kMiB));
  REQUIRE_MESSAGE(agent.waitForEvent("evicted", 10s, mark).has_value(), agent.logText());
  // Where the crossing is seen decides how much is missing: at the line (v2's edge) the larger
  // best-effort pod alone covers it, at the end of the allocation both go. Either way only
  // best-effort pods, the larger first, and each one's process is gone.
  std::vector<std::string> evicted;
  for (const LogLine& line : agent.events("evict")) evicted.push_back(line.field("pod"));
  REQUIRE_MESSAGE(!evicted.empty(), agent.logText());
  CHECK_MESSAGE(evicted[0] == large.key(), agent.logText());
  CHECK(evicted.size() <= 2);
  for (const std::string& pod : evicted) {
    CHECK(pod != web.key());
    const pid_t pid = pod == large.key() ? largePid : smallPid;
    CHECK(waitUntil([&] { return !alive(pid); }, 10s));
  }
  CHECK(alive(pressurePid));
  if (v2) {
    const std::string events =
        contents(sandbox.hierarchy().memory + "/" + sandbox.kubepods() + "/memory.events");
    CHECK_MESSAGE(events.find("high 0\n") == std::string::npos, events);  // the edge fired
  }

  const std::optional<int> status = agent.stop();
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  if (v2) CHECK(contents(high) == found);  // given back on SIGTERM
}

TEST_CASE("--memory-high-edge under --dry-run: memory.high is never written, and the log says so") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir manifests;
  TempDir files;
  const std::string policyFile = files.file("policy.json");
  writeFile(policyFile, R"({"evictionHard": {"allocatableMemory.available": "200Mi"}})");
  const bool v2 = sandbox.hierarchy().memoryVersion == cgroups::Version::V2;
  const std::string high = sandbox.hierarchy().memory + "/" + sandbox.kubepods() + "/memory.high";
  const std::string found = v2 ? contents(high) : "";
  AgentConfig config;
  config.policyFile = policyFile;
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  config.dryRun = true;
  config.extraArgs = {"--memory-high-edge"};
  AgentProcess agent(config);
  REQUIRE_MESSAGE(agent.waitForEvent("memory-high-edge", 10s).has_value(), agent.logText());
  // Ready means a full cycle ran, which is where the line would be placed; then a further one
  // (the default interval is 1 s). A write would have happened by then; none may.
  REQUIRE(waitUntil([&] { return agent.events("ready").size() >= 1; }, 10s));
  std::this_thread::sleep_for(1500ms);
  if (v2) CHECK(contents(high) == found);
  const std::optional<int> status = agent.stop();
  REQUIRE(status.has_value());
  if (v2) CHECK(contents(high) == found);
}
