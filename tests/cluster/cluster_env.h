// The real-control-plane lane: a test starts Kubernetes' own kube-apiserver, kube-scheduler,
// kube-controller-manager and etcd (built from the release tests/upstream/go.mod requires)
// with one declaration, and talks to them with the real kubectl:
//
//   nodewarden::cluster::Cluster cluster;                  // ready when constructed
//   auto version = cluster.kubectlJson("get --raw /version");
//   cluster.create(nodeJson);                              // kubectl create -f -
//
// The constructor runs `nw-control-plane up --dir DIR` (tests/cluster/build-control-plane.sh
// builds it into the build directory; $NW_CONTROL_PLANE names another;
// tests/upstream/internal/cluster starts the components) and reads the one JSON
// line it prints when everything is ready; the destructor sends SIGTERM and waits. The
// launcher also dies with the test process (PR_SET_PDEATHSIG), and its components with it,
// so a test killed by a timeout leaves nothing running. Every cluster has its own
// directory, certificates and ports: tests may run at once.
//
// Where the lane cannot run, the test is skipped with the reason (exit 77): no Go new
// enough to build Kubernetes (the launcher is then a script saying so), no kubectl, or no
// private network namespace when stand-in kubelets are asked for. A control plane that
// fails to start fails the test, quoting the launcher's log.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace nodewarden::cluster {

using Json = nlohmann::json;

// Prints `why` and exits 77 (meson's "skipped").
[[noreturn]] void skip(const std::string& why);

// kubectl on the PATH, else /usr/bin/kubectl; "" when there is none.
std::string kubectlPath();

// The Kubernetes release tests/upstream/go.mod requires ("v1.37.2"): what the control plane
// is built from and must answer on /version.
std::string kubernetesRelease();

// Moves the calling process (and so every child it starts afterwards) into a network
// namespace of its own, once: `lo` up, and a private address (returned) on `lo` that is
// not loopback, so the API server's node proxy, which refuses loopback addresses, reaches a
// stand-in kubelet listening there. Nothing outside the process can reach anything inside.
// Skips the test (77) when the kernel refuses (needs root: CAP_SYS_ADMIN, CAP_NET_ADMIN).
// Call it while the process has one thread: a namespace is per thread.
std::string enterPrivateNetwork();

// A finished child process: exit status (-1: killed by a signal or timed out), its output.
struct Run {
  int status = -1;
  std::string out;
  std::string err;
};

// Runs argv (argv[0] looked up on the PATH) with `env` added to the environment and `input`
// on stdin; kills it after `timeoutSeconds`.
Run run(const std::vector<std::string>& argv, const std::string& input = "",
        const std::map<std::string, std::string>& env = {}, int timeoutSeconds = 120);

struct ClusterOptions {
  // Stand-in kubelets, one per node name: HTTPS endpoints the API server's node proxy
  // reaches (GET /api/v1/nodes/NODE/proxy/PATH answers the file kubeletRoot(NODE)/PATH).
  // Asking for any enters a private network namespace (enterPrivateNetwork()).
  std::vector<std::string> kubelets;
  // false: the launcher does not renew Node Leases as kubelets would, and the
  // node-lifecycle controller marks nodes unreachable after 50 s.
  bool nodeLeases = true;
  // Extra flags for the components (they win over the launcher's).
  std::vector<std::string> apiserverArgs, schedulerArgs, controllerManagerArgs;
  int readyTimeoutSeconds = 300;
};

class Cluster {
 public:
  explicit Cluster(const ClusterOptions& options = {});
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // What the launcher printed (tests/upstream/internal/cluster.Info): version, dir,
  // kubeconfig, server, caFile, caKeyFile, clientCertFile, clientKeyFile, ports, pids, logs,
  // kubelets, readySeconds.
  const Json& info() const { return info_; }
  std::string kubeconfig() const { return info_["kubeconfig"]; }
  std::string server() const { return info_["server"]; }
  std::string dir() const { return info_["dir"]; }
  double readySeconds() const { return info_["readySeconds"]; }
  // The stand-in kubelet of `node`: its address, port and the directory it serves.
  std::string kubeletAddress(const std::string& node) const;
  int kubeletPort(const std::string& node) const;
  std::string kubeletRoot(const std::string& node) const;
  // Its request log, one line per request: METHOD URI CLIENT-CERTIFICATE-CN.
  std::string kubeletRequests(const std::string& node) const;
  // The last `lines` lines of a component's log (kube-apiserver, kube-scheduler, …).
  std::string logTail(const std::string& component, int lines = 40) const;

  // kubectl ARGS (split at spaces; use the vector form for arguments with spaces) with this
  // cluster's kubeconfig, `input` on stdin.
  Run kubectl(const std::string& args, const std::string& input = "") const;
  Run kubectl(const std::vector<std::string>& args, const std::string& input = "") const;
  // The same, requiring success (throws with kubectl's stderr otherwise) and parsing stdout.
  Json kubectlJson(const std::string& args, const std::string& input = "") const;
  // kubectl create -f - of `object`; returns the object as the server stored it.
  Json create(const Json& object) const;
  // kubectl create -f - of a List of `objects` (one kubectl run); returns them as stored,
  // in the same order.
  Json createAll(const Json& objects) const;
  // kubectl replace --subresource=status -f - of a List of whole objects: each object's
  // status replaced through its status subresource (the server keeps its spec); retried
  // while a controller's write in between makes it a conflict.
  void replaceStatuses(const Json& objects) const;
  // Replaces the `status` of the object at `path` (e.g. /api/v1/nodes/NAME) through its
  // status subresource, as a kubelet reports it; returns the stored object.
  Json replaceStatus(const std::string& path, const Json& status) const;
  // Polls `condition` every 250 ms until it holds or `timeoutSeconds` pass; returns its last
  // answer.
  bool waitUntil(const std::function<bool()>& condition, int timeoutSeconds) const;

 private:
  // Made once the checks that may skip the test have passed: a skip exits at once and
  // would leave it behind.
  std::optional<testing::TempDir> dir_;
  pid_t launcher_ = -1;
  Json info_;
};

// Creates the objects of a snapshot (docs/reference.md §2) in the cluster as users and
// kubelets would: namespaces (waiting for their `default` ServiceAccount), priority classes,
// nodes (then their status through the status subresource, with the stand-in kubelet's
// address and port when the cluster has one for the node), pods (bound where spec.nodeName
// says; their status as a kubelet reports it: Ready conditions and a status per container
// when Running), disruption budgets (their status left to the real disruption
// controller), and each node's stats summary, given to its stand-in kubelet with the pod
// UIDs the server assigned. Returns when the cluster has settled: no node carries the
// not-ready taint, every budget's status is observed. Adaptations a real server demands:
// containers get an image; a pod with spec.priority and no class gets a class of that
// value (the Priority admission plugin refuses a bare priority). Returns "ns/name" → UID.
std::map<std::string, std::string> loadSnapshot(const Cluster& cluster, const Json& snapshot);

// The snapshot a user builds with kubectl (docs/reference.md §2): `kubectl get nodes -o
// json`, `get pods -A`, `get priorityclasses`, `get pdb -A`, and for each node `get --raw
// /api/v1/nodes/NODE/proxy/stats/summary` where that answers.
Json kubectlSnapshot(const Cluster& cluster);

// The time now as the API server writes it (RFC 3339, UTC, whole seconds):
// "2026-11-27T18:50:00Z".
std::string rfc3339Now();

// A file of the repository's examples/, by its path below it.
std::string example(const std::string& name);

// A JSON file, read whole; a file that cannot be opened throws, naming it (the test fails).
Json readJson(const std::string& path);

}  // namespace nodewarden::cluster
