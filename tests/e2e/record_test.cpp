// The flight recorder on real cgroups (docs/recording.md): a real pressure episode is recorded
// by the agent and replayed by `nodewarden replay` to the identical decisions; a damaged
// episode is refused naming the file and the offset; `why` answers from the state directory,
// from the agent, and — for a pod evicted before the agent restarted — as `kubectl
// nodewarden why` through the API server's node proxy; a kernel OOM kill inside a pod
// becomes a record of its own.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/kube_env.h"

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct Run {
  int status = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs a command line (words quoted here), bounded by `timeout` (coreutils' timeout).
Run run(const TempDir& files, const std::vector<std::string>& words, const std::string& env = "") {
  std::string command = env + " timeout 60";
  for (const std::string& word : words) command += " '" + word + "'";
  const std::string out = files.file("run.out"), err = files.file("run.err");
  const int status = std::system((command + " > '" + out + "' 2> '" + err + "'").c_str());
  return Run{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

const char* kPolicy = R"({
  "evictionHard": { "allocatableMemory.available": "200Mi" },
  "evictionMinimumReclaim": { "allocatableMemory.available": "50Mi" },
  "evictionMaxPodsPerCycle": 5,
  "housekeepingInterval": "1s"
})";

// A sandbox node of 512 MiB with two low-priority pods and a production pod that is pushed
// until the hard threshold is met: the agent evicts the low-priority pods.
struct Pressure {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir manifests;
  PodSpec first = PodSpec("e2e", "first").withPriority(0);
  PodSpec second = PodSpec("e2e", "second").withPriority(0).request("memory", "20Mi");
  PodSpec web = PodSpec("e2e", "web").withPriority(1000).request("memory", "256Mi");
  std::string webCgroup;

  Pressure() {
    const std::string firstCgroup = addPod(sandbox, &manifests, first);
    const std::string secondCgroup = addPod(sandbox, &manifests, second);
    webCgroup = addPod(sandbox, &manifests, web);
    spawnAllocator(sandbox, firstCgroup, 24 * kMiB);
    spawnAllocator(sandbox, secondCgroup, 60 * kMiB);
    spawnAllocator(sandbox, webCgroup, 80 * kMiB);
  }
  // Down to 172 MiB available: both low-priority pods must go (need 78 MiB at most).
  void push() { spawnAllocatorTo(sandbox, webCgroup, 172 * std::int64_t(kMiB)); }
};

}  // namespace

TEST_CASE("record: a real pressure episode is recorded and replayed to the identical decisions") {
  Pressure node;
  TempDir files;
  writeFile(files.file("policy.json"), kPolicy);
  const std::string stateDir = files.file("state");
  AgentConfig config;
  config.policyFile = files.file("policy.json");
  config.manifestsDir = node.manifests.path();
  config.kubepods = node.sandbox.kubepods();
  config.extraArgs = {
      "--state-dir",     stateDir, "--record-preroll", "5s",
      "--record-settle", "2s",     "--decision-log",   files.file("decisions.jsonl")};
  AgentProcess agent(config);

  const std::size_t mark = agent.lines().size();
  node.push();
  REQUIRE_MESSAGE(agent.waitForEvent("evicted", 10s, mark).has_value(), agent.logText());
  // Calm for 2 s after the last eviction ends it.
  const auto recorded = agent.waitForEvent("episode-recorded", 30s, mark);
  REQUIRE_MESSAGE(recorded.has_value(), agent.logText());
  const std::string episode = recorded->field("file");
  CHECK(episode.starts_with(stateDir + "/episodes/"));
  CHECK(recorded->field("reason") == "settled");
  CHECK(fs::exists(episode));
  std::vector<std::string> evicted;
  for (const LogLine& line : agent.events("evict")) evicted.push_back(line.field("pod"));
  REQUIRE(evicted.size() >= 2);
  CHECK(evicted[0] == node.first.key());
  CHECK(evicted[1] == node.second.key());

  // Replayed with the recorded policy: identical, the same victims in the same order.
  const Run replay = run(files, {NODEWARDEN_BINARY, "replay", episode, "-o", "json"});
  REQUIRE_MESSAGE(replay.status == 0, replay.err);
  const Json result = Json::parse(replay.out);
  const Json& item = result["episodes"][0];
  CHECK(item["fidelity"] == "identical");
  CHECK(item["divergence"].is_null());
  CHECK(item["policy"] == "recorded");
  std::vector<std::string> replayed;
  for (const Json& d : item["decisions"]) replayed.push_back(d["pod"].get<std::string>());
  CHECK_MESSAGE(replayed == evicted, replay.out);
  CHECK(item["kernelOomKills"]["recorded"] == 0);
  const double seconds = item["seconds"].get<double>();
  const double replayMs = item["replayMs"].get<double>();
  MESSAGE("episode: " << item["samples"] << " samples over " << seconds << " s, "
                      << fs::file_size(episode) << " bytes, replayed in " << replayMs << " ms ("
                      << (replayMs > 0 ? seconds * 1000 / replayMs : 0) << "x real time)");
  // The same check with the policy file given: it is the recorded one.
  const Run again = run(files, {NODEWARDEN_BINARY, "replay", episode, "--policy",
                                files.file("policy.json"), "-o", "json"});
  REQUIRE_MESSAGE(again.status == 0, again.err);
  CHECK(Json::parse(again.out)["episodes"][0]["fidelity"] == "identical");
  // The table and the plot.
  const Run table =
      run(files, {NODEWARDEN_BINARY, "replay", episode, "--plot", files.file("r.svg")});
  REQUIRE_MESSAGE(table.status == 0, table.err);
  CHECK(table.out.find("Fidelity: identical") != std::string::npos);
  CHECK(slurp(files.file("r.svg")).find(node.first.key()) != std::string::npos);

  // Damaged copies: exit 1, naming the file and the offset; never a crash.
  const std::string bytes = slurp(episode);
  writeFile(files.file("torn.nwep"), bytes.substr(0, bytes.size() * 2 / 3));
  const Run torn = run(files, {NODEWARDEN_BINARY, "replay", files.file("torn.nwep")});
  CHECK(torn.status == 1);
  CHECK_MESSAGE(torn.err.find(files.file("torn.nwep") + ": offset ") != std::string::npos,
                torn.err);
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x20;
  writeFile(files.file("corrupt.nwep"), flipped);
  const Run corrupt = run(files, {NODEWARDEN_BINARY, "replay", files.file("corrupt.nwep")});
  CHECK(corrupt.status == 1);
  CHECK_MESSAGE(corrupt.err.find(files.file("corrupt.nwep") + ": offset ") != std::string::npos,
                corrupt.err);

  // why, from the state directory: the eviction with what was measured and its episode.
  const Run why = run(files, {NODEWARDEN_BINARY, "why", node.first.name, "-n", "e2e", "--state-dir",
                              stateDir, "-o", "json"});
  REQUIRE_MESSAGE(why.status == 0, why.err);
  const Json answer = Json::parse(why.out);
  CHECK(answer["pod"] == node.first.key());
  CHECK(answer["uid"] == node.first.uid);
  REQUIRE(answer["records"].size() == 1);
  const Json& r = answer["records"][0];
  CHECK(r["kind"] == "eviction");
  CHECK(r["signal"] == "allocatableMemory.available");
  CHECK(r["threshold"] == 200 * std::int64_t(kMiB));
  CHECK(r["observed"].get<std::int64_t>() < 200 * std::int64_t(kMiB));
  CHECK(r["rank"] == 1);
  CHECK(r["episode"] == fs::path(episode).filename().string());
  CHECK(r["latencyMs"].get<double>() >= 0);
  // The agent serves the same.
  const HttpReply served = httpRequest(
      agent.port(), "GET", "/v1/decisions?pod=" + node.second.ns + "%2F" + node.second.name);
  REQUIRE(served.status == 200);
  CHECK(Json::parse(served.body)["records"][0]["rank"] == 2);
  // --decision-log: one JSON line per decision, with node, pod and uid.
  std::istringstream log(slurp(files.file("decisions.jsonl")));
  std::vector<Json> lines;
  for (std::string line; std::getline(log, line);) lines.push_back(Json::parse(line));
  REQUIRE(lines.size() >= 2);
  CHECK(lines[0]["node"] == "e2e-node");
  CHECK(lines[0]["pod"] == node.first.key());
  CHECK(lines[0]["uid"] == node.first.uid);
  CHECK(lines[0]["kind"] == "eviction");
  CHECK(agent.stop().has_value());
}

TEST_CASE("record: kubectl nodewarden why answers for a pod evicted before the agent restarted") {
  Pressure node;
  TempDir files;
  writeFile(files.file("policy.json"), kPolicy);
  const std::string stateDir = files.file("state");
  AgentConfig config;
  config.policyFile = files.file("policy.json");
  config.manifestsDir = node.manifests.path();
  config.kubepods = node.sandbox.kubepods();
  config.extraArgs = {"--state-dir", stateDir};
  {
    AgentProcess agent(config);
    const std::size_t mark = agent.lines().size();
    node.push();
    REQUIRE_MESSAGE(agent.waitForEvent("evicted", 10s, mark).has_value(), agent.logText());
    const std::optional<int> status = agent.stop();
    REQUIRE(status.has_value());
    CHECK(WIFEXITED(*status));
  }
  // A new agent on the same state directory: the records are back.
  AgentProcess restarted(config);
  const HttpReply served = httpRequest(restarted.port(), "GET", "/v1/decisions?pod=e2e/first");
  REQUIRE(served.status == 200);
  const Json direct = Json::parse(served.body);
  REQUIRE(direct["records"].size() == 1);
  CHECK(direct["records"][0]["kind"] == "eviction");
  const Run agentWhy = run(files, {NODEWARDEN_BINARY, "why", "e2e/first", "--agent",
                                   "http://127.0.0.1:" + std::to_string(restarted.port())});
  REQUIRE_MESSAGE(agentWhy.status == 0, agentWhy.err);
  CHECK(agentWhy.out.find("eviction  evict") != std::string::npos);

  // The cluster: the pod is gone from the API; the node's agent is asked through the API
  // server's node proxy (nodes/NODE:PORT/proxy), as `kubectl nodewarden why` does.
  FakeApiServerOptions options;
  options.token = "why-token";
  FakeApiServer api(options);
  api.upsertNode(nodeObject("e2e-node", "512Mi"));
  writeFile(files.file("kubeconfig"), kubeconfigFor(api, "", "why-token"));
  fs::create_directory(files.file("bin"));
  fs::create_symlink(NODEWARDEN_BINARY, files.file("bin/kubectl-nodewarden"));
  const std::string env = "PATH='" + files.file("bin") + "':\"$PATH\" KUBECONFIG='" +
                          files.file("kubeconfig") + "' HOME='" + files.path() + "'";
  const std::string port = std::to_string(restarted.port());
  // Through a real kubectl's plugin discovery where there is one; else the plugin binary
  // itself, which is what kubectl runs.
  const bool kubectl = std::system("command -v kubectl > /dev/null 2>&1") == 0;
  const std::vector<std::string> command =
      kubectl ? std::vector<std::string>{"kubectl", "nodewarden",   "why", "first", "-n",
                                         "e2e",     "--agent-port", port,  "-o",    "json"}
              : std::vector<std::string>{files.file("bin/kubectl-nodewarden"),
                                         "why",
                                         "first",
                                         "-n",
                                         "e2e",
                                         "--agent-port",
                                         port,
                                         "-o",
                                         "json"};
  if (!kubectl) MESSAGE("no kubectl on the PATH: running kubectl-nodewarden as kubectl would");
  const Run plugin = run(files, command, env);
  REQUIRE_MESSAGE(plugin.status == 0, plugin.out << plugin.err);
  const Json answer = Json::parse(plugin.out);
  CHECK(answer["pod"] == "e2e/first");
  REQUIRE(answer["records"].size() == 1);
  CHECK(answer["records"][0]["kind"] == "eviction");
  CHECK(answer["records"][0]["signal"] == "allocatableMemory.available");
  CHECK(api.waitFor(
      [&](const std::vector<RecordedRequest>& requests) {
        return std::any_of(requests.begin(), requests.end(), [&](const RecordedRequest& r) {
          return r.path == "/api/v1/nodes/e2e-node:" + port + "/proxy/v1/decisions";
        });
      },
      1s));
  // As the DaemonSet runs it: the agent is a pod of the node, reached through the pod proxy.
  api.upsertPod(
      {{"apiVersion", "v1"},
       {"kind", "Pod"},
       {"metadata",
        {{"name", "nodewarden-agent-x1"},
         {"namespace", "kube-system"},
         {"uid", makeUid()},
         {"labels",
          {{"app.kubernetes.io/name", "nodewarden"}, {"app.kubernetes.io/component", "agent"}}}}},
       {"spec", {{"nodeName", "e2e-node"}, {"containers", Json::array()}}},
       {"status", {{"phase", "Running"}}}});
  const Run viaPod = run(files, command, env);
  REQUIRE_MESSAGE(viaPod.status == 0, viaPod.out << viaPod.err);
  CHECK(Json::parse(viaPod.out)["records"].size() == 1);
  CHECK(api.waitFor(
      [&](const std::vector<RecordedRequest>& requests) {
        return std::any_of(requests.begin(), requests.end(), [&](const RecordedRequest& r) {
          return r.path == "/api/v1/namespaces/kube-system/pods/nodewarden-agent-x1:" + port +
                               "/proxy/v1/decisions";
        });
      },
      1s));
  CHECK(restarted.stop().has_value());
}

TEST_CASE("record: a kernel OOM kill inside a pod becomes a record and opens an episode") {
  cgroups::Sandbox sandbox = makeSandbox(1024 * kMiB);
  TempDir manifests;
  TempDir files;
  writeFile(files.file("policy.json"), kPolicy);
  PodSpec leaky =
      PodSpec("e2e", "leaky").withPriority(0).request("memory", "32Mi").limit("memory", "64Mi");
  const std::string cgroup = addPod(sandbox, &manifests, leaky);
  // The pod's own limit, as the kubelet sets it; no swap escape on v1.
  const bool v1 = hierarchy().memoryVersion == cgroups::Version::V1;
  REQUIRE(bool(sandbox.writeMemoryFile(cgroup, v1 ? "memory.limit_in_bytes" : "memory.max",
                                       std::to_string(64 * kMiB))));
  if (v1)
    (void)sandbox.writeMemoryFile(cgroup, "memory.memsw.limit_in_bytes", std::to_string(64 * kMiB));
  if (!v1) (void)sandbox.writeMemoryFile(cgroup, "memory.swap.max", "0");
  const std::string stateDir = files.file("state");
  AgentConfig config;
  config.policyFile = files.file("policy.json");
  config.manifestsDir = manifests.path();
  config.kubepods = sandbox.kubepods();
  config.extraArgs = {"--state-dir", stateDir, "--record-preroll", "2s", "--record-settle", "1s"};
  AgentProcess agent(config);

  // A child process of the pod that touches twice its limit: the kernel kills it.
  auto pid = sandbox.spawn(cgroup, [] {
    for (int i = 0; i < 128; ++i) {
      char* block = static_cast<char*>(std::malloc(kMiB));
      if (block == nullptr) return 1;
      for (std::size_t offset = 0; offset < kMiB; offset += 4096) block[offset] = 1;
    }
    return 0;
  });
  REQUIRE(pid);
  REQUIRE(waitUntil([&] { return !alive(*pid); }, 20s));
  sandbox.reap();
  const auto recorded = agent.waitForEvent("episode-recorded", 30s);
  REQUIRE_MESSAGE(recorded.has_value(), agent.logText());
  const Run why =
      run(files, {NODEWARDEN_BINARY, "why", "e2e/leaky", "--state-dir", stateDir, "-o", "json"});
  REQUIRE_MESSAGE(why.status == 0, why.err);
  const Json answer = Json::parse(why.out);
  REQUIRE_MESSAGE(answer["records"].size() >= 1, why.out);
  const Json& r = answer["records"][0];
  CHECK(r["kind"] == "kernel-oom-kill");
  CHECK(r["action"] == "oom-kill");
  CHECK(r["episode"] == fs::path(recorded->field("file")).filename().string());
  if (!v1) CHECK(r["reason"].get<std::string>().find("its own memory limit") != std::string::npos);
  const Run replay =
      run(files, {NODEWARDEN_BINARY, "replay", recorded->field("file"), "-o", "json"});
  REQUIRE_MESSAGE(replay.status == 0, replay.err);
  const Json item = Json::parse(replay.out)["episodes"][0];
  CHECK(item["fidelity"] == "identical");
  CHECK(item["kernelOomKills"]["recorded"].get<int>() >= 1);
  CHECK(agent.stop().has_value());
}
