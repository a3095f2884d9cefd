// bench/support: a sandbox node as bench_agent and bench_soak run it — pods as a manifest (first:
// an agent never sees a pod cgroup without its object) and a cgroup, the nodewarden binary
// guarding them (static pod source, JSON log), and kubepods' memory, OOM kills and log lines.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/support/agent_process.h"
#include "cgroups/readers.h"
#include "cgroups/sandbox.h"

namespace nodewarden::bench {

using Json = nlohmann::json;

// The last `lines` lines of a log, for failure messages.
inline std::string tail(const std::filesystem::path& path, std::size_t lines) {
  std::string text = readText(path);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  std::size_t start = text.size();  // the newline before the last `lines` lines; npos: none
  for (std::size_t n = 0; n < lines && start != std::string::npos; ++n)
    start = start == 0 ? std::string::npos : text.rfind('\n', start - 1);
  return (start == std::string::npos ? text : text.substr(start + 1)) + "\n";
}

// Calls `each` with every complete JSON line of a log from byte `*from` on (all of it without
// `from`), then moves `*from` past the last complete line.
inline void forEachLogLine(const std::filesystem::path& log,
                           const std::function<void(const Json&)>& each,
                           std::size_t* from = nullptr) {
  const std::string text = readText(log);
  std::size_t at = from != nullptr ? *from : 0;
  for (std::size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    const Json line = Json::parse(std::string_view(text).substr(at, nl - at), nullptr, false);
    if (line.is_object()) each(line);
  }
  if (from != nullptr) *from = at;
}

// A Pod object. `requests` null: as its QoS class says ("guaranteed" 100m and 64Mi with
// equal limits, "burstable" 50m and 32Mi, "besteffort" none).
inline Json podManifest(const std::string& ns, const std::string& name, const std::string& uid,
                        std::int64_t priority, const std::string& qos, Json requests = nullptr) {
  if (requests.is_null()) {
    requests = qos == "besteffort"   ? Json::object()
               : qos == "guaranteed" ? Json{{"cpu", "100m"}, {"memory", "64Mi"}}
                                     : Json{{"cpu", "50m"}, {"memory", "32Mi"}};
  }
  Json resources = requests.empty() ? Json::object() : Json{{"requests", requests}};
  if (qos == "guaranteed" && !requests.empty()) resources["limits"] = requests;
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
          {"spec",
           {{"containers", Json::array({{{"name", "main"}, {"resources", resources}}})},
            {"priority", priority},
            {"terminationGracePeriodSeconds", 5}}},
          {"status", {{"phase", "Running"}}}};
}

// printf into a string (up to 511 characters).
template <typename... Args>
std::string format(const char* pattern, Args... args) {
  char text[512];
  std::snprintf(text, sizeof text, pattern, args...);
  return text;
}

// A directory removed with everything in it when this goes.
struct TempDir {
  std::filesystem::path path;
  ~TempDir() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
};

struct Pod {
  std::string uid, relative;  // relative: its cgroup below every hierarchy root
  std::filesystem::path manifest;
  Json object;
};

struct AgentNode {
  AgentNode(cgroups::Sandbox& box, const std::filesystem::path& where, std::uint64_t seed)
      : sandbox(box), dir(where), manifests(where / "manifests"), rng(seed) {
    std::error_code ignored;
    std::filesystem::create_directories(manifests, ignored);
    const cgroups::Hierarchy& h = sandbox.hierarchy();
    auto opened = cgroups::CgroupDir::open(h.memory + "/" + sandbox.kubepods(), h.memoryVersion);
    if (opened) kubepods = std::move(opened).value();
  }
  AgentNode(const AgentNode&) = delete;
  AgentNode& operator=(const AgentNode&) = delete;
  ~AgentNode() { stop(); }

  // The manifest "<ns>_<name>.json" (and `publish`, when set, is given the object), then after
  // `settleMillis` the pod cgroup in its QoS tier.
  Result<Pod> addPod(const std::string& ns, const std::string& name, std::int64_t priority,
                     const std::string& qos, Json requests = nullptr, int settleMillis = 0) {
    Pod pod{rng.uuid(), "", manifests / (ns + "_" + name + ".json"), {}};
    pod.object = podManifest(ns, name, pod.uid, priority, qos, std::move(requests));
    if (!writeText(pod.manifest, pod.object.dump(2)))
      return Error{"cannot write " + pod.manifest.string()};
    if (publish) publish(pod.object);
    if (settleMillis > 0) sleepMillis(settleMillis);
    auto relative = sandbox.addPod(pod.uid, qos);
    if (!relative) {
      removePod(pod);
      return Error{"cannot create a pod cgroup: " + relative.error().message};
    }
    pod.relative = *relative;
    return pod;
  }

  // prod/steady, burstable at priority 100000, whose process holds `bytes`, once kubepods'
  // working set shows them (≤ 5 s).
  Result<Pod> addSteady(const std::string& request, std::int64_t bytes) {
    auto pod = addPod("prod", "steady", 100000, "burstable", {{"memory", request}});
    if (!pod) return pod;
    auto child = sandbox.spawn(
        pod->relative, [bytes, self = ::getpid()] { return holdMemory(std::size_t(bytes), self); });
    if (!child) {
      removePod(*pod);
      return child.error();
    }
    for (int i = 0; i < 250; ++i) {  // 5 s at most
      if (auto memory = readMemory(); memory && std::int64_t(memory->workingSet) >= bytes) break;
      sleepMillis(20);
    }
    return pod;
  }

  // Its cgroup (processes killed first), then its manifest.
  void removePod(const Pod& pod) {
    if (!pod.relative.empty()) (void)sandbox.removeCgroup(pod.relative);
    sandbox.reap();
    std::error_code ignored;
    std::filesystem::remove(pod.manifest, ignored);
  }

  Result<cgroups::MemoryReading> readMemory() { return cgroups::readMemory(kubepods, buffer); }

  // Kernel OOM kills in kubepods; on cgroup v1 they count on the victim's own cgroup (`pod`) too.
  std::uint64_t oomKills(const std::string& pod = "") {
    const cgroups::Hierarchy& h = sandbox.hierarchy();
    auto kills = [&](const cgroups::CgroupDir& cgroup) {
      auto n = cgroups::readOomKills(cgroup, buffer);
      return n ? *n : 0;
    };
    std::uint64_t total = kills(kubepods);
    if (h.memoryVersion == cgroups::Version::V1 && !pod.empty()) {
      if (auto victim = cgroups::CgroupDir::open(h.memory + "/" + pod, h.memoryVersion)) {
        total += kills(*victim);
      }
    }
    return total;
  }

  // Starts `nodewarden agent` over the manifests and the sandbox's kubepods and reads its log
  // every 100 ms for up to `seconds` until a line has event `readyEvent` (`port` is taken from
  // "agent-start"). "" when ready, else why not.
  std::string start(const std::string& policy, const std::string& listen, const std::string& nodefs,
                    const std::string& readyEvent, int seconds) {
    const std::filesystem::path policyFile = dir / "policy.json";
    if (!writeText(policyFile, policy)) return "cannot write " + policyFile.string();
    log = dir / "agent.log";
    pid = startProcess(
        {NODEWARDEN_EXE, "agent", "--source", "static", "--manifests", manifests.string(),
         "--kubepods-cgroup", sandbox.kubepods(), "--policy", policyFile.string(), "--node",
         "bench-node", "--listen", listen, "--nodefs", nodefs, "--log-format", "json",
         "--state-dir=" + (dir / "state").string()},  // the recorder's, not the node's /var/lib
        log);
    if (pid < 0) return std::string("cannot start the agent: ") + std::strerror(errno);
    bool ready = false;
    for (int i = 0; i < seconds * 10 && !ready && !stopped(); ++i) {
      sleepMillis(100);
      if (auto status = waitProcess(pid, 0)) {
        pid = -1;
        return "the agent exited (" + describeStatus(status) + "); its log:\n" + tail(log, 12);
      }
      forEachLogLine(log, [&](const Json& line) {
        const std::string event = line.value("event", ""), address = line.value("listen", "");
        const std::size_t colon = address.rfind(':');  // "127.0.0.1:PORT"; none: --listen off
        if (event == "agent-start" && colon != std::string::npos) {
          port = std::uint16_t(std::atoi(address.c_str() + colon + 1));
        }
        ready = ready || event == readyEvent;
      });
    }
    if (ready || stopped()) return ready ? "" : "interrupted";
    return format("the agent was not ready within %d s; its log:\n", seconds) + tail(log, 12);
  }

  // SIGTERM, then SIGKILL after `grace` seconds; how it ended.
  std::string stop(double grace = 10) {
    return pid > 0 ? describeStatus(stopProcess(std::exchange(pid, -1), grace)) : "not running";
  }

  cgroups::Sandbox& sandbox;
  const std::filesystem::path dir;  // its files: manifests/, policy.json, agent.log, state/
  const std::filesystem::path manifests;
  cgroups::CgroupDir kubepods;  // its memory cgroup
  std::string buffer;
  std::function<void(const Json&)> publish;
  std::filesystem::path log;
  pid_t pid = -1;
  std::uint16_t port = 0;
  Random rng;  // the pods' UIDs
};

}  // namespace nodewarden::bench
