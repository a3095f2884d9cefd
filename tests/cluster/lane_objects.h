// What the lane's tests create as users and kubelets would, and what they ask of etcd:
//
//   laneNode("node-1")                               a Node as a kubelet registers it
//   laneNodeStatus("node-1", "512Mi")                the status its kubelet reports (with
//                                                    {.cpu, .pressure}: its size, a pressure)
//   lanePod("shop", "web", {.node = "node-1", .memory = "10Mi"})
//                                                    a pod, bound or for a scheduler (PodShape)
//   runningStatus(stored)                            the status a kubelet reports for it running
//   tokenKubeconfig(cluster, token)                  a kubeconfig with a bearer token
//   etcdRevision(cluster), compactEtcd(cluster, rev) etcd's own API (its JSON gateway)
//   TcpRelay relay(port); relay.cut(); relay.resume()  a TCP relay whose connections the
//                                                    test drops at will
//
// Header-only: each test file of the lane that needs them includes it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/cluster/cluster_env.h"

namespace nodewarden::cluster {

// A Node as a kubelet registers it (the status comes through the status subresource).
inline Json laneNode(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"kubernetes.io/hostname", name},
              {"kubernetes.io/os", "linux"},
              {"kubernetes.io/arch", "amd64"}}}}}};
}

// What a lane node reports besides its memory.
struct NodeShape {
  std::string cpu = "2";
  // A condition reported "True": the kubelet's MemoryPressure, DiskPressure or PIDPressure,
  // or NodewardenMemoryPressure as the node's agent publishes it (node/kube_source.cpp);
  // "": no pressure.
  std::string pressure;
};

// The status a kubelet reports for node `name` of `memory` (capacity and allocatable alike):
// its conditions, its hostname address and its node info.
inline Json laneNodeStatus(const std::string& name, const std::string& memory,
                           const NodeShape& shape = {}) {
  const Json resources = {
      {"cpu", shape.cpu}, {"memory", memory}, {"pods", "110"}, {"ephemeral-storage", "20Gi"}};
  const std::string now = rfc3339Now();
  Json conditions = Json::array();
  for (const auto& [type, fine, pressed] :
       {std::tuple{"MemoryPressure", "KubeletHasSufficientMemory", "KubeletHasInsufficientMemory"},
        std::tuple{"DiskPressure", "KubeletHasNoDiskPressure", "KubeletHasDiskPressure"},
        std::tuple{"PIDPressure", "KubeletHasSufficientPID", "KubeletHasInsufficientPID"}}) {
    const bool on = shape.pressure == type;
    conditions.push_back({{"type", type},
                          {"status", on ? "True" : "False"},
                          {"reason", on ? pressed : fine},
                          {"lastHeartbeatTime", now},
                          {"lastTransitionTime", now}});
  }
  conditions.push_back({{"type", "Ready"},
                        {"status", "True"},
                        {"reason", "KubeletReady"},
                        {"lastHeartbeatTime", now},
                        {"lastTransitionTime", now}});
  if (shape.pressure == "NodewardenMemoryPressure") {
    conditions.push_back({{"type", "NodewardenMemoryPressure"},
                          {"status", "True"},
                          {"reason", "NodewardenHasInsufficientMemory"},
                          {"message", "memory.available below its hard threshold 100Mi"},
                          {"lastHeartbeatTime", now},
                          {"lastTransitionTime", now}});
  }
  return {{"capacity", resources},
          {"allocatable", resources},
          {"conditions", conditions},
          {"addresses", Json::array({{{"type", "Hostname"}, {"address", name}}})},
          {"nodeInfo",
           {{"architecture", "amd64"},
            {"operatingSystem", "linux"},
            {"kubeletVersion", kubernetesRelease()},
            {"containerRuntimeVersion", "containerd://2.1.0"},
            {"kernelVersion", "6.1.0"},
            {"osImage", "Debian GNU/Linux 12 (bookworm)"},
            {"kubeProxyVersion", ""},
            {"machineID", ""},
            {"systemUUID", ""},
            {"bootID", ""}}}};
}

// What matters of a lane pod; one container `main`.
struct PodShape {
  std::string node;    // spec.nodeName: created bound (and Running when `running`)
  std::string pinTo;   // spec.nodeSelector kubernetes.io/hostname (for a scheduler)
  std::string memory;  // requests.memory; "" and no cpu: BestEffort
  std::string cpu;
  std::string priorityClass;
  std::string scheduler;  // spec.schedulerName ("" : default-scheduler)
  Json labels = Json::object();
  Json tolerations = Json::array();
  bool running = false;  // status.phase Running in the object (for loadSnapshot)
};

inline Json lanePod(const std::string& ns, const std::string& name, const PodShape& shape) {
  Json container = {{"name", "main"}, {"image", "registry.invalid/nodewarden/pause:3.10"}};
  Json requests = Json::object();
  if (!shape.memory.empty()) requests["memory"] = shape.memory;
  if (!shape.cpu.empty()) requests["cpu"] = shape.cpu;
  if (!requests.empty()) container["resources"] = {{"requests", requests}};
  Json spec = {{"containers", Json::array({container})}};
  if (!shape.node.empty()) spec["nodeName"] = shape.node;
  if (!shape.pinTo.empty()) spec["nodeSelector"] = {{"kubernetes.io/hostname", shape.pinTo}};
  if (!shape.priorityClass.empty()) spec["priorityClassName"] = shape.priorityClass;
  if (!shape.scheduler.empty()) spec["schedulerName"] = shape.scheduler;
  if (!shape.tolerations.empty()) spec["tolerations"] = shape.tolerations;
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", ns}}},
              {"spec", spec}};
  if (!shape.labels.empty()) pod["metadata"]["labels"] = shape.labels;
  if (shape.running) pod["status"] = {{"phase", "Running"}};
  return pod;
}

// The status a kubelet reports for the stored pod `stored` once its one container runs.
inline Json runningStatus(const Json& stored) {
  const std::string now = rfc3339Now();
  Json conditions = Json::array();
  for (const char* type :
       {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    conditions.push_back({{"type", type}, {"status", "True"}, {"lastTransitionTime", now}});
  }
  Json containers = Json::array();
  for (const auto& c : stored["spec"]["containers"]) {
    containers.push_back({{"name", c["name"]},
                          {"image", c["image"]},
                          {"imageID", ""},
                          {"restartCount", 0},
                          {"ready", true},
                          {"started", true},
                          {"state", {{"running", {{"startedAt", now}}}}}});
  }
  return {{"phase", "Running"},
          {"qosClass", stored["status"]["qosClass"]},
          {"startTime", now},
          {"hostIP", "10.250.0.1"},
          {"podIP", "10.244.0.10"},
          {"conditions", conditions},
          {"containerStatuses", containers}};
}

// A kubeconfig for `cluster` (its CA by path) with a bearer token, as kubectl writes one.
// `server` replaces the cluster's own address (a relay in front of it) when not empty.
inline std::string tokenKubeconfig(const Cluster& cluster, const std::string& token,
                                   const std::string& user = "nodewarden",
                                   const std::string& server = "") {
  return "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority: " +
         cluster.info()["caFile"].get<std::string>() +
         "\n    server: " + (server.empty() ? cluster.server() : server) +
         "\n  name: lane\ncontexts:\n- context:\n    cluster: lane\n    user: " + user +
         "\n  name: lane\ncurrent-context: lane\nusers:\n- name: " + user +
         "\n  user:\n    token: " + token + "\n";
}

// POST `body` to etcd's JSON gateway (plain HTTP on 127.0.0.1, the lane's client port);
// returns the answer's body, throwing unless it is 200.
inline Json etcdCall(const Cluster& cluster, const std::string& path, const Json& body) {
  const int port = cluster.info()["ports"]["etcd"];
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    throw std::runtime_error("connecting to etcd on port " + std::to_string(port) + " failed");
  }
  const std::string payload = body.dump();
  const std::string request =
      "POST " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n" +
      "Content-Type: application/json\r\nContent-Length: " + std::to_string(payload.size()) +
      "\r\n\r\n" + payload;
  std::size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) answer.append(buffer, n);
  ::close(fd);
  const auto end = answer.find("\r\n\r\n");
  if (!answer.starts_with("HTTP/1.") || answer.find(" 200 ") != answer.find(' ') ||
      end == std::string::npos) {
    throw std::runtime_error("etcd " + path + " answered: " + answer.substr(0, 400));
  }
  return Json::parse(answer.substr(end + 4));
}

// etcd's current revision (the API server's resourceVersions are etcd revisions).
inline std::int64_t etcdRevision(const Cluster& cluster) {
  // A count of the keys under "\0": any range answers the store's revision in its header.
  const Json answer = etcdCall(cluster, "/v3/kv/range", {{"key", "AA=="}, {"count_only", true}});
  const Json& revision = answer["header"]["revision"];
  return revision.is_string() ? std::stoll(revision.get<std::string>())
                              : revision.get<std::int64_t>();
}

// Compacts etcd's history up to `revision`: a watch from an older revision is then refused
// (the API server answers 410 Gone: "too old").
inline void compactEtcd(const Cluster& cluster, std::int64_t revision) {
  etcdCall(cluster, "/v3/kv/compaction", {{"revision", revision}, {"physical", true}});
}

// A TCP relay on 127.0.0.1 to 127.0.0.1:`targetPort`, bytes passed on as they are (TLS
// included: the client still talks to the server). cut() drops every open connection and
// refuses new ones (accepted, then closed at once) until resume(): a client's watch ends
// as a network outage ends it, and it cannot reconnect meanwhile. One thread accepts, one
// thread per connection pumps; the destructor closes everything and joins them.
class TcpRelay {
 public:
  explicit TcpRelay(int targetPort) : target_(targetPort) {
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = loopback(0);
    socklen_t length = sizeof address;
    if (listen_ < 0 || ::bind(listen_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(listen_, 64) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw std::runtime_error("the relay cannot listen on 127.0.0.1");
    }
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { acceptLoop(); });
  }
  ~TcpRelay() {
    stopping_ = true;
    cut();
    acceptor_.join();
    std::vector<std::thread> pumps;
    {
      std::lock_guard lock(mutex_);
      pumps.swap(pumps_);
    }
    for (auto& pump : pumps) pump.join();
    ::close(listen_);
  }
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  int port() const { return port_; }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  // Connections relayed so far (accepted while not cut).
  int connections() const { return connections_; }

  void cut() {
    refusing_ = true;
    std::lock_guard lock(mutex_);
    for (const auto& link : open_) {
      ::shutdown(link->client, SHUT_RDWR);
      ::shutdown(link->upstream, SHUT_RDWR);
    }
  }
  void resume() { refusing_ = false; }

 private:
  struct Link {
    int client = -1;
    int upstream = -1;
  };

  static sockaddr_in loopback(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    return address;
  }

  void acceptLoop() {
    while (!stopping_) {
      pollfd ready{listen_, POLLIN, 0};
      if (::poll(&ready, 1, 100) <= 0) continue;
      const int client = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      if (refusing_ || stopping_) {
        ::close(client);
        continue;
      }
      const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const sockaddr_in address = loopback(target_);
      if (upstream < 0 ||
          ::connect(upstream, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
        if (upstream >= 0) ::close(upstream);
        ::close(client);
        continue;
      }
      auto link = std::make_shared<Link>(Link{client, upstream});
      ++connections_;
      std::lock_guard lock(mutex_);
      open_.push_back(link);
      pumps_.emplace_back([this, link] { pump(link); });
    }
  }

  void pump(const std::shared_ptr<Link>& link) {
    char buffer[16384];
    bool open = true;
    while (open && !stopping_) {
      pollfd ends[2] = {{link->client, POLLIN, 0}, {link->upstream, POLLIN, 0}};
      if (::poll(ends, 2, 100) <= 0) continue;
      for (int i = 0; i < 2 && open; ++i) {
        if (ends[i].revents == 0) continue;
        const int from = i == 0 ? link->client : link->upstream;
        const int to = i == 0 ? link->upstream : link->client;
        const ssize_t n = ::recv(from, buffer, sizeof buffer, 0);
        if (n <= 0) {
          open = false;
          break;
        }
        for (ssize_t sent = 0; sent < n && open;) {
          const ssize_t w =
              ::send(to, buffer + sent, static_cast<std::size_t>(n - sent), MSG_NOSIGNAL);
          if (w <= 0) open = false;
          sent += w > 0 ? w : 0;
        }
      }
    }
    std::lock_guard lock(mutex_);
    std::erase(open_, link);
    ::close(link->client);
    ::close(link->upstream);
  }

  int target_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> refusing_{false};
  std::atomic<int> connections_{0};
  std::mutex mutex_;
  std::vector<std::shared_ptr<Link>> open_;
  std::vector<std::thread> pumps_;
  std::thread acceptor_;
};

}  // namespace nodewarden::cluster
