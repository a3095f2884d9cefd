// End-to-end tests of `nodewarden agent`: the real binary (NODEWARDEN_BINARY, passed by the
// build) runs as a child process against a sandbox node the test builds from real cgroups and
// real processes, with a temporary manifests directory and policy file. The test reads the
// agent's JSON log lines (stderr, redirected to a temporary file) and its HTTP surface.
//
// Everything a test makes is owned by an RAII guard declared in the test, so that a failing
// check still removes it: the agent (SIGKILLed and reaped if still running), forked helper
// processes, the sandbox (its processes killed, its cgroups removed) and temporary files.
// Every wait is bounded in time. Not thread-safe; tests run one at a time.
#pragma once

#include <sys/types.h>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/time.h"
#include "cgroups/hierarchy.h"
#include "cgroups/sandbox.h"

namespace nodewarden::e2e {

using Json = nlohmann::json;
using Millis = std::chrono::milliseconds;

constexpr std::uint64_t kMiB = 1024 * 1024;

inline SteadyTime now() {
  return std::chrono::steady_clock::now();
}
inline double seconds(SteadyTime from, SteadyTime to) {
  return std::chrono::duration<double>(to - from).count();
}
inline double secondsSince(SteadyTime since) {
  return std::chrono::duration<double>(now() - since).count();
}

// The host's hierarchy (discovered once by the skip check, which guarantees it exists).
const cgroups::Hierarchy& hierarchy();

// A sandbox named "nodewarden-e2e-<pid>-<n>" with the given memory limit on its kubepods
// cgroup (the sandbox node's allocatable memory) and no swap escape. Fails the test if it
// cannot be made.
// `driver`: the kubelet's cgroupfs layout (kubepods/burstable/pod<uid>) or the systemd one
// (kubepods.slice/kubepods-burstable.slice/…), which real cgroup v2 nodes mostly run.
cgroups::Sandbox makeSandbox(std::optional<std::uint64_t> memoryLimit,
                             cgroups::Driver driver = cgroups::Driver::Cgroupfs);

// True while `pid` exists and is not a zombie.
bool alive(pid_t pid);

// Polls `condition` every `step` until it holds or `timeout` passes; returns the last answer.
bool waitUntil(const std::function<bool()>& condition, Millis timeout, Millis step = Millis(20));

// A temporary directory below /tmp, removed with everything in it when destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes `text` to `path` in one write (replacing it in place). Fails the test on error.
void writeFile(const std::string& path, const std::string& text);

// One Pod object of the static manifests directory, built with chained setters:
//   PodSpec("e2e", "web").withPriority(1000).request("memory", "256Mi")
struct PodSpec {
  std::string ns;
  std::string name;
  std::string uid;  // given by addPod() when empty
  std::optional<std::int64_t> priority;
  std::optional<std::string> priorityClassName;
  std::int64_t terminationGracePeriodSeconds = 30;
  std::map<std::string, std::string> requests;  // e.g. {"memory", "64Mi"}
  std::map<std::string, std::string> limits;
  // The runtime's ID of the container "main" (status.containerStatuses[0].containerID,
  // "containerd://<id>"); "": the status names none.
  std::string containerId;

  PodSpec(std::string ns_, std::string name_) : ns(std::move(ns_)), name(std::move(name_)) {}
  PodSpec& withPriority(std::int64_t value) {
    priority = value;
    return *this;
  }
  PodSpec& withClass(std::string className) {
    priorityClassName = std::move(className);
    return *this;
  }
  PodSpec& withGrace(std::int64_t seconds) {
    terminationGracePeriodSeconds = seconds;
    return *this;
  }
  PodSpec& request(const std::string& resource, std::string amount) {
    requests[resource] = std::move(amount);
    return *this;
  }
  PodSpec& limit(const std::string& resource, std::string amount) {
    limits[resource] = std::move(amount);
    return *this;
  }
  PodSpec& withContainerId(std::string id) {
    containerId = std::move(id);
    return *this;
  }
  std::string key() const { return ns + "/" + name; }
};

// The QoS class Kubernetes computes for the spec: "besteffort", "burstable" or "guaranteed"
// (as the cgroup tier directory is named).
std::string qosOf(const PodSpec& pod);
// The Pod JSON (apiVersion v1, kind Pod, status.phase Running).
Json podObject(const PodSpec& pod);
// Writes the pod to `<dir>/<ns>_<name>.json`.
void writeManifest(const TempDir& dir, const PodSpec& pod);
// Gives the pod a UID when it has none, creates its cgroup in the sandbox (in its QoS tier)
// and, unless `manifests` is null (a pod cgroup without a pod object), writes its manifest.
// Returns the pod cgroup's relative path.
std::string addPod(cgroups::Sandbox& sandbox, const TempDir* manifests, PodSpec& pod);
// A UID unique in this run: "e2e0c0de-<pid>-4000-8000-<n>".
std::string makeUid();

// What a helper process does on SIGTERM.
enum class OnTerm {
  Die,     // the default action
  Ignore,  // SIG_IGN: only SIGKILL ends it
  Exit42,  // exits with status 42 (a graceful stop the test can recognise)
};

// Starts a process in the sandbox cgroup at `relative` that allocates `bytes` of anonymous
// memory, touches every page, and then sleeps (ending by itself after `lifetimeSeconds`).
// Returns once every page is touched (fails the test if that takes more than 20 s).
pid_t spawnAllocator(cgroups::Sandbox& sandbox, const std::string& relative, std::uint64_t bytes,
                     OnTerm onTerm = OnTerm::Die, int lifetimeSeconds = 120);

// The sandbox node's allocatable memory available, as the agent computes
// allocatableMemory.available: the kubepods limit − (usage − inactive_file).
std::int64_t sandboxAvailable(cgroups::Sandbox& sandbox);

// Starts a process in the sandbox cgroup at `relative` and, once it runs, has it allocate
// and touch exactly what brings sandboxAvailable() down to `targetAvailable` — measured, so
// a process's own overhead (larger under a sanitizer) and earlier drift cannot move where
// the pressure lands. Returns once every page is touched (fails the test after 20 s, or if
// less than the target is available already).
pid_t spawnAllocatorTo(cgroups::Sandbox& sandbox, const std::string& relative,
                       std::int64_t targetAvailable, OnTerm onTerm = OnTerm::Die,
                       int lifetimeSeconds = 120);

// Waits (bounded) for the sandbox child `pid` to end, reaps it and tells the sandbox; returns
// its wait status, or nullopt if it is still running after `timeout`.
std::optional<int> reapChild(cgroups::Sandbox& sandbox, pid_t pid, Millis timeout);

// A forked process of the test outside every sandbox cgroup (it stays in the test's own
// cgroup), allocating `bytes`. Killed and reaped when destroyed.
class OutsideProcess {
 public:
  explicit OutsideProcess(std::uint64_t bytes, int lifetimeSeconds = 120);
  ~OutsideProcess();
  OutsideProcess(const OutsideProcess&) = delete;
  OutsideProcess& operator=(const OutsideProcess&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// One line of the agent's log, parsed, with the moment the test first saw it.
struct LogLine {
  Json json;  // null when the line is not JSON
  std::string raw;
  SteadyTime seenAt;
  std::string event() const;
  std::string field(const std::string& name) const;  // string fields; "" when absent
  double number(const std::string& name) const;      // numeric fields; NaN when absent
};

struct AgentConfig {
  std::string policyFile;
  std::string manifestsDir;
  // Set: --source kubernetes --kubeconfig FILE instead of the manifests directory.
  std::string kubeconfig;
  // Runs `nodewarden webhook --listen 127.0.0.1:0 --log-format json` + extraArgs instead of
  // the agent (policyFile and kubeconfig are passed when set); waits for its "started" line.
  bool webhook = false;
  std::string nodeName = "e2e-node";
  std::string kubepods;  // Sandbox::kubepods()
  bool dryRun = false;
  std::vector<std::string> extraArgs;
  // Moves the agent into this sandbox cgroup before it executes (an agent running inside a
  // pod, as a DaemonSet's does).
  cgroups::Sandbox* moveInto = nullptr;
  std::string moveIntoCgroup;
};

// `nodewarden agent … --listen 127.0.0.1:0 --log-format json --nodefs ""` as a child process,
// stderr and stdout to a temporary file. The constructor waits (bounded) for "agent-start" and
// "ready" and reads the port. The destructor SIGKILLs and reaps it if it still runs.
class AgentProcess {
 public:
  explicit AgentProcess(const AgentConfig& config);
  ~AgentProcess();
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  pid_t pid() const { return pid_; }
  std::uint16_t port() const { return port_; }
  bool running();
  void signal(int sig);
  // Sends SIGTERM and waits (≤ 10 s) for the exit; returns the wait status (nullopt: did not
  // exit, then it is SIGKILLed).
  std::optional<int> stop();

  // Every line so far (reads what is new in the log file first).
  const std::vector<LogLine>& lines();
  std::vector<LogLine> events(const std::string& event);
  // The first line from index `from` on for which `match` holds, waiting up to `timeout`.
  std::optional<LogLine> waitFor(const std::function<bool(const LogLine&)>& match, Millis timeout,
                                 std::size_t from = 0);
  std::optional<LogLine> waitForEvent(const std::string& event, Millis timeout,
                                      std::size_t from = 0);
  // The whole log, for failure messages.
  std::string logText();

 private:
  void readNew();

  TempDir logDir_;
  std::string logPath_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
  std::optional<int> status_;
  std::size_t offset_ = 0;
  std::string partial_;
  std::vector<LogLine> lines_;
};

// A tiny HTTP/1.1 client on raw sockets to 127.0.0.1 (Connection: close, 5 s timeouts).
struct HttpReply {
  int status = 0;                              // 0: no valid answer (see error)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string error;
};
HttpReply httpRequest(std::uint16_t port, const std::string& method, const std::string& target,
                      const std::string& body = "",
                      const std::string& contentType = "application/json");
// Sends `bytes` as they are and reads the answer.
HttpReply httpRaw(std::uint16_t port, const std::string& bytes);
// GET /v1/state, parsed; fails the test unless it answers 200 with JSON.
Json getState(std::uint16_t port);
// The signals[] entry for `signal` and `kind` ("hard"/"soft"), or null.
Json signalOf(const Json& state, const std::string& signal, const std::string& kind);
bool hasCondition(const Json& state, const std::string& condition);
std::vector<std::string> memoryRanking(const Json& state);
// The value of the sample `name{labels}` (labels as rendered, e.g. `signal="x",reason="y"`;
// empty for none) in Prometheus text, or nullopt.
std::optional<double> metricValue(const std::string& text, const std::string& name,
                                  const std::string& labels = "");

}  // namespace nodewarden::e2e
