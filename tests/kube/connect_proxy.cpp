#include "tests/kube/connect_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

namespace nodewarden::testing {

namespace {

void closeQuietly(int fd) {
  if (fd >= 0) ::close(fd);
}

bool sendAll(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

int connectTo(const std::string& host, std::uint16_t port) {
  if (host != "127.0.0.1" && host != "localhost") return -1;  // tests only
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Copies bytes both ways until either side closes (or `stop`).
void relay(int a, int b, const std::atomic<bool>& stop) {
  char buffer[16384];
  pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
  while (!stop) {
    int ready = ::poll(fds, 2, 200);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return;
    for (int i = 0; i < 2; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ssize_t n = ::recv(fds[i].fd, buffer, sizeof buffer, 0);
      if (n <= 0) return;
      if (!sendAll(fds[1 - i].fd, std::string(buffer, static_cast<std::size_t>(n)))) return;
    }
  }
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool splitHostPort(const std::string& hostPort, std::string& host, std::uint16_t& port) {
  auto colon = hostPort.rfind(':');
  if (colon == std::string::npos) return false;
  host = hostPort.substr(0, colon);
  try {
    int value = std::stoi(hostPort.substr(colon + 1));
    if (value <= 0 || value > 65535) return false;
    port = static_cast<std::uint16_t>(value);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

}  // namespace

struct ConnectProxy::Impl {
  std::string required;
  int listener = -1;
  std::uint16_t port = 0;
  std::atomic<bool> stopping{false};
  std::thread acceptor;
  mutable std::mutex mutex;
  std::vector<std::thread> sessions;
  std::set<int> open;  // every socket a session holds, to shut down at the end
  std::vector<ProxyRequest> seen;

  void track(int fd) {
    std::lock_guard lock(mutex);
    open.insert(fd);
  }
  void untrackAndClose(int fd) {
    if (fd < 0) return;
    {
      std::lock_guard lock(mutex);
      open.erase(fd);
    }
    ::close(fd);
  }
  void record(ProxyRequest r) {
    std::lock_guard lock(mutex);
    seen.push_back(std::move(r));
  }

  void acceptLoop() {
    while (!stopping) {
      int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR) continue;
        return;  // the listener was shut down
      }
      track(fd);
      std::lock_guard lock(mutex);
      sessions.emplace_back([this, fd] { serve(fd); });
    }
  }

  void serve(int client) {
    std::string head;
    char buffer[4096];
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
      ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
      if (n <= 0) return untrackAndClose(client);
      head.append(buffer, static_cast<std::size_t>(n));
    }
    auto end = head.find("\r\n\r\n");
    if (end == std::string::npos) return untrackAndClose(client);
    std::string rest = head.substr(end + 4);
    head.resize(end + 2);
    ProxyRequest request;
    auto lineEnd = head.find("\r\n");
    std::string line = head.substr(0, lineEnd);
    auto sp1 = line.find(' ');
    auto sp2 = line.find(' ', sp1 + 1);
    if (sp1 == std::string::npos || sp2 == std::string::npos) return untrackAndClose(client);
    request.method = line.substr(0, sp1);
    request.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string version = line.substr(sp2 + 1);
    // The headers, without Proxy-Authorization and Connection (the proxy's own).
    std::string headers;
    for (std::size_t at = lineEnd + 2; at < head.size();) {
      auto next = head.find("\r\n", at);
      std::string header = head.substr(at, next - at);
      at = next + 2;
      auto colon = header.find(':');
      std::string name = lower(header.substr(0, colon));
      std::string value = colon == std::string::npos ? "" : header.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      if (name == "proxy-authorization") {
        request.proxyAuthorization = value;
        continue;
      }
      if (name == "connection" || name == "proxy-connection") continue;
      headers += header + "\r\n";
    }
    auto answer = [&](unsigned status, const char* reason) {
      request.status = status;
      record(request);
      sendAll(client, "HTTP/1.1 " + std::to_string(status) + " " + reason +
                          "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      untrackAndClose(client);
    };
    if (!required.empty() && request.proxyAuthorization != required)
      return answer(407, "Proxy Authentication Required");
    std::string host;
    std::uint16_t targetPort = 0;
    int server = -1;
    if (request.method == "CONNECT") {
      if (!splitHostPort(request.target, host, targetPort)) return answer(400, "Bad Request");
      server = connectTo(host, targetPort);
      if (server < 0) return answer(502, "Bad Gateway");
      track(server);
      record(request);
      if (!sendAll(client, "HTTP/1.1 200 Connection established\r\n\r\n") ||
          (!rest.empty() && !sendAll(server, rest))) {
        untrackAndClose(server);
        return untrackAndClose(client);
      }
    } else {
      const std::string scheme = "http://";
      if (request.target.rfind(scheme, 0) != 0) return answer(400, "Bad Request");
      auto slash = request.target.find('/', scheme.size());
      std::string authority = request.target.substr(scheme.size(), slash - scheme.size());
      std::string path = slash == std::string::npos ? "/" : request.target.substr(slash);
      if (!splitHostPort(authority, host, targetPort)) return answer(400, "Bad Request");
      server = connectTo(host, targetPort);
      if (server < 0) return answer(502, "Bad Gateway");
      track(server);
      record(request);
      if (!sendAll(server, request.method + " " + path + " " + version + "\r\n" + headers +
                               "Connection: close\r\n\r\n" + rest)) {
        untrackAndClose(server);
        return untrackAndClose(client);
      }
    }
    relay(client, server, stopping);
    untrackAndClose(server);
    untrackAndClose(client);
  }
};

ConnectProxy::ConnectProxy(std::string requiredAuthorization) : impl_(std::make_unique<Impl>()) {
  impl_->required = std::move(requiredAuthorization);
  impl_->listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (impl_->listener < 0 ||
      ::bind(impl_->listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(impl_->listener, 64) != 0 ||
      ::getsockname(impl_->listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    closeQuietly(impl_->listener);
    throw std::runtime_error("connect proxy: cannot listen on 127.0.0.1");
  }
  impl_->port = ntohs(address.sin_port);
  impl_->acceptor = std::thread([this] { impl_->acceptLoop(); });
}

ConnectProxy::~ConnectProxy() {
  impl_->stopping = true;
  ::shutdown(impl_->listener, SHUT_RDWR);
  impl_->acceptor.join();
  {
    std::lock_guard lock(impl_->mutex);
    for (int fd : impl_->open) ::shutdown(fd, SHUT_RDWR);
  }
  std::vector<std::thread> sessions;
  {
    std::lock_guard lock(impl_->mutex);
    sessions = std::move(impl_->sessions);
  }
  for (auto& t : sessions) t.join();
  ::close(impl_->listener);
}

std::uint16_t ConnectProxy::port() const {
  return impl_->port;
}

std::string ConnectProxy::url() const {
  return "http://127.0.0.1:" + std::to_string(impl_->port);
}

std::vector<ProxyRequest> ConnectProxy::requests() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->seen;
}

}  // namespace nodewarden::testing
