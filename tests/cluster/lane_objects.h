// What the lane's agent tests create as users and kubelets would, and what they ask of etcd:
//
//   laneNode("node-1") + laneNodeStatus("512Mi")    a Node, then the status its kubelet reports
//   lanePod("shop", "web", "node-1", "high", "10Mi")  a pod bound to a node (or unscheduled)
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
#include <ctime>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/cluster/cluster_env.h"

namespace nodewarden::cluster {

inline std::string rfc3339Now() {
  char text[32];
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

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

// The status a kubelet reports for a node of `memory` with no pressure.
inline Json laneNodeStatus(const std::string& memory) {
  const Json resources = {
      {"cpu", "2"}, {"memory", memory}, {"pods", "110"}, {"ephemeral-storage", "20Gi"}};
  const std::string now = rfc3339Now();
  Json conditions = Json::array();
  for (const auto& [type, status, reason] :
       {std::tuple{"MemoryPressure", "False", "KubeletHasSufficientMemory"},
        std::tuple{"DiskPressure", "False", "KubeletHasNoDiskPressure"},
        std::tuple{"PIDPressure", "False", "KubeletHasSufficientPID"},
        std::tuple{"Ready", "True", "KubeletReady"}}) {
    conditions.push_back({{"type", type},
                          {"status", status},
                          {"reason", reason},
                          {"lastHeartbeatTime", now},
                          {"lastTransitionTime", now}});
  }
  return {{"capacity", resources},
          {"allocatable", resources},
          {"conditions", conditions},
          {"nodeInfo",
           {{"architecture", "amd64"},
            {"operatingSystem", "linux"},
            {"kubeletVersion", "v1.37.2"},
            {"containerRuntimeVersion", "containerd://2.1.0"},
            {"kernelVersion", "6.1.0"},
            {"osImage", "Debian GNU/Linux 12 (bookworm)"},
            {"kubeProxyVersion", ""},
            {"machineID", ""},
            {"systemUUID", ""},
            {"bootID", ""}}}};
}

// A pod of one container `main` requesting `memoryRequest` (none when empty), bound to
// `node` at creation (unscheduled when empty), of `priorityClass` (none when empty).
inline Json lanePod(const std::string& ns, const std::string& name, const std::string& node,
                    const std::string& priorityClass = "", const std::string& memoryRequest = "") {
  Json container = {{"name", "main"}, {"image", "registry.invalid/nodewarden/pause:3.10"}};
  if (!memoryRequest.empty()) {
    container["resources"] = {{"requests", {{"memory", memoryRequest}}}};
  }
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", name}}}}},
              {"spec", {{"containers", Json::array({container})}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  if (!priorityClass.empty()) pod["spec"]["priorityClassName"] = priorityClass;
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
