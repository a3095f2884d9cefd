#include "tests/kube/connect_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <functional>
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

// One end of a relay: a socket, or TLS over it.
struct Side {
  int fd = -1;
  SSL* ssl = nullptr;

  ssize_t recvSome(char* buffer, std::size_t size) const {
    if (ssl != nullptr) {
      int n = SSL_read(ssl, buffer, static_cast<int>(size));
      return n > 0 ? n : -1;
    }
    ssize_t n;
    do n = ::recv(fd, buffer, size, 0);
    while (n < 0 && errno == EINTR);
    return n > 0 ? n : -1;
  }
  bool sendAllOf(const std::string& data) const {
    if (ssl == nullptr) return sendAll(fd, data);
    return data.empty() || SSL_write(ssl, data.data(), static_cast<int>(data.size())) ==
                               static_cast<int>(data.size());
  }
  bool pending() const { return ssl != nullptr && SSL_pending(ssl) > 0; }
};

// Copies bytes both ways until either side closes (or `stop`).
void relay(Side a, Side b, const std::atomic<bool>& stop) {
  char buffer[16384];
  Side sides[2] = {a, b};
  pollfd fds[2] = {{a.fd, POLLIN, 0}, {b.fd, POLLIN, 0}};
  while (!stop) {
    bool ready[2] = {sides[0].pending(), sides[1].pending()};
    if (!ready[0] && !ready[1]) {
      int n = ::poll(fds, 2, 200);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return;
      for (int i = 0; i < 2; ++i) ready[i] = (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
    }
    for (int i = 0; i < 2; ++i) {
      if (!ready[i]) continue;
      ssize_t n = sides[i].recvSome(buffer, sizeof buffer);
      if (n <= 0) return;
      if (!sides[1 - i].sendAllOf(std::string(buffer, static_cast<std::size_t>(n)))) return;
    }
  }
}

// A listening socket on 127.0.0.1 with an ephemeral port.
int listenLoopback(std::uint16_t& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    closeQuietly(fd);
    throw std::runtime_error("test proxy: cannot listen on 127.0.0.1");
  }
  port = ntohs(address.sin_port);
  return fd;
}

// Reads exactly `n` bytes (false when the peer closed or failed first).
bool recvExactly(int fd, unsigned char* out, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, out + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  return true;
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

// What both proxies do around their protocol: a listener on 127.0.0.1, a thread per
// connection, and every socket a session holds, to shut down at the end.
struct ProxyServer {
  int listener = -1;
  std::uint16_t port = 0;
  std::atomic<bool> stopping{false};
  std::thread acceptor;
  mutable std::mutex mutex;
  std::vector<std::thread> sessions;
  std::set<int> open;  // every socket a session holds

  // Listens, and runs `session` on a thread of its own for each connection accepted (the
  // client's socket, tracked; the session closes it with untrackAndClose).
  void start(std::function<void(int)> session) {
    listener = listenLoopback(port);
    acceptor = std::thread([this, session = std::move(session)] {
      while (!stopping) {
        int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EINTR) continue;
          return;  // the listener was shut down
        }
        track(fd);
        std::lock_guard lock(mutex);
        sessions.emplace_back([session, fd] { session(fd); });
      }
    });
  }

  // Stops accepting, shuts every open socket down (which ends the sessions' relays) and
  // joins every thread.
  void stop() {
    stopping = true;
    ::shutdown(listener, SHUT_RDWR);
    if (acceptor.joinable()) acceptor.join();
    {
      std::lock_guard lock(mutex);
      for (int fd : open) ::shutdown(fd, SHUT_RDWR);
    }
    std::vector<std::thread> ended;
    {
      std::lock_guard lock(mutex);
      ended = std::move(sessions);
    }
    for (auto& t : ended) t.join();
    ::close(listener);
  }

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
};

}  // namespace

struct ConnectProxy::Impl : ProxyServer {
  std::string required;
  SSL_CTX* tls = nullptr;
  std::atomic<std::size_t> handshakes{0};
  std::vector<ProxyRequest> seen;

  void record(ProxyRequest r) {
    std::lock_guard lock(mutex);
    seen.push_back(std::move(r));
  }

  void serve(int client) {
    SSL* ssl = nullptr;
    if (tls != nullptr) {
      // The handshake is bounded: a client that stalls in it is dropped after 10 s.
      timeval limit{10, 0};
      ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
      ssl = SSL_new(tls);
      SSL_set_fd(ssl, client);
      if (SSL_accept(ssl) != 1) {
        SSL_free(ssl);
        ERR_clear_error();
        return untrackAndClose(client);
      }
      timeval none{0, 0};
      ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
      ++handshakes;
    }
    serveOn(Side{client, ssl});
    if (ssl != nullptr) SSL_free(ssl);
    untrackAndClose(client);
  }

  void serveOn(Side side) {
    std::string head;
    char buffer[4096];
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
      ssize_t n = side.recvSome(buffer, sizeof buffer);
      if (n <= 0) return;
      head.append(buffer, static_cast<std::size_t>(n));
    }
    auto end = head.find("\r\n\r\n");
    if (end == std::string::npos) return;
    std::string rest = head.substr(end + 4);
    head.resize(end + 2);
    ProxyRequest request;
    auto lineEnd = head.find("\r\n");
    std::string line = head.substr(0, lineEnd);
    auto sp1 = line.find(' ');
    auto sp2 = line.find(' ', sp1 + 1);
    if (sp1 == std::string::npos || sp2 == std::string::npos) return;
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
      side.sendAllOf("HTTP/1.1 " + std::to_string(status) + " " + reason +
                     "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
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
      if (!side.sendAllOf("HTTP/1.1 200 Connection established\r\n\r\n") ||
          (!rest.empty() && !sendAll(server, rest)))
        return untrackAndClose(server);
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
                               "Connection: close\r\n\r\n" + rest))
        return untrackAndClose(server);
    }
    relay(side, Side{server}, stopping);
    untrackAndClose(server);
  }
};

ConnectProxy::ConnectProxy(std::string requiredAuthorization)
    : ConnectProxy(ConnectProxyOptions{std::move(requiredAuthorization), {}, {}}) {}

ConnectProxy::ConnectProxy(ConnectProxyOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->required = std::move(options.requiredAuthorization);
  if (!options.tlsCertPem.empty()) {
    impl_->tls = SSL_CTX_new(TLS_server_method());
    BIO* certBio =
        BIO_new_mem_buf(options.tlsCertPem.data(), static_cast<int>(options.tlsCertPem.size()));
    BIO* keyBio =
        BIO_new_mem_buf(options.tlsKeyPem.data(), static_cast<int>(options.tlsKeyPem.size()));
    X509* cert = PEM_read_bio_X509(certBio, nullptr, nullptr, nullptr);
    EVP_PKEY* key = PEM_read_bio_PrivateKey(keyBio, nullptr, nullptr, nullptr);
    const bool ok = cert != nullptr && key != nullptr &&
                    SSL_CTX_use_certificate(impl_->tls, cert) == 1 &&
                    SSL_CTX_use_PrivateKey(impl_->tls, key) == 1;
    X509_free(cert);
    EVP_PKEY_free(key);
    BIO_free(certBio);
    BIO_free(keyBio);
    if (!ok) {
      SSL_CTX_free(impl_->tls);
      throw std::runtime_error("connect proxy: bad TLS certificate or key");
    }
  }
  impl_->start([impl = impl_.get()](int fd) { impl->serve(fd); });
}

ConnectProxy::~ConnectProxy() {
  impl_->stop();
  if (impl_->tls != nullptr) SSL_CTX_free(impl_->tls);
}

std::uint16_t ConnectProxy::port() const {
  return impl_->port;
}

std::string ConnectProxy::url() const {
  return (impl_->tls != nullptr ? "https://127.0.0.1:" : "http://127.0.0.1:") +
         std::to_string(impl_->port);
}

std::size_t ConnectProxy::tlsHandshakes() const {
  return impl_->handshakes;
}

std::vector<ProxyRequest> ConnectProxy::requests() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->seen;
}

struct Socks5Proxy::Impl : ProxyServer {
  Socks5ProxyOptions options;
  std::vector<SocksRequest> seen;

  void serve(int fd) {
    // A client that stalls in the negotiation is dropped after 10 s.
    timeval limit{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    SocksRequest request;
    int server = negotiate(fd, request);
    {
      std::lock_guard lock(mutex);
      seen.push_back(request);
    }
    if (server >= 0) {
      timeval none{0, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
      relay(Side{fd}, Side{server}, stopping);
      untrackAndClose(server);
    }
    untrackAndClose(fd);
  }

  // RFC 1928 and RFC 1929 up to the CONNECT's answer: the socket to the server, or -1.
  int negotiate(int client, SocksRequest& request) {
    unsigned char head[2];
    if (!recvExactly(client, head, 2) || head[0] != 5) return -1;
    std::vector<unsigned char> methods(head[1]);
    if (!recvExactly(client, methods.data(), methods.size())) return -1;
    request.methods.assign(methods.begin(), methods.end());
    const bool wantsPassword = !options.user.empty();
    const unsigned char want = wantsPassword ? 2 : 0;
    if (std::find(methods.begin(), methods.end(), want) == methods.end()) {
      sendAll(client, std::string{5, static_cast<char>(0xff)});
      return -1;
    }
    if (!sendAll(client, std::string{5, static_cast<char>(want)})) return -1;
    if (wantsPassword) {
      unsigned char version[2];
      if (!recvExactly(client, version, 2) || version[0] != 1) return -1;
      std::string user(version[1], '\0');
      unsigned char length = 0;
      if (!recvExactly(client, reinterpret_cast<unsigned char*>(user.data()), user.size()) ||
          !recvExactly(client, &length, 1))
        return -1;
      std::string password(length, '\0');
      if (!recvExactly(client, reinterpret_cast<unsigned char*>(password.data()), length))
        return -1;
      request.user = user;
      request.password = password;
      const bool good = user == options.user && password == options.password;
      if (!sendAll(client, std::string{1, static_cast<char>(good ? 0 : 1)}) || !good) return -1;
    }
    unsigned char connect[4];
    if (!recvExactly(client, connect, 4) || connect[0] != 5) return -1;
    request.addressType = connect[3];
    if (connect[3] == 1) {
      unsigned char a[4];
      if (!recvExactly(client, a, 4)) return -1;
      request.host = std::to_string(a[0]) + "." + std::to_string(a[1]) + "." +
                     std::to_string(a[2]) + "." + std::to_string(a[3]);
    } else if (connect[3] == 3) {
      unsigned char length = 0;
      if (!recvExactly(client, &length, 1)) return -1;
      request.host.assign(length, '\0');
      if (!recvExactly(client, reinterpret_cast<unsigned char*>(request.host.data()), length))
        return -1;
    } else {
      unsigned char a[16];
      if (!recvExactly(client, a, 16)) return -1;
      request.host = "(IPv6)";
    }
    unsigned char portBytes[2];
    if (!recvExactly(client, portBytes, 2)) return -1;
    request.port = static_cast<std::uint16_t>(portBytes[0] << 8 | portBytes[1]);
    auto answer = [&](unsigned reply) {
      request.reply = reply;
      sendAll(client, std::string{5, static_cast<char>(reply), 0, 1, 127, 0, 0, 1, 0, 0});
    };
    if (connect[1] != 1) {
      answer(7);  // command not supported
      return -1;
    }
    if (options.refuseWith != 0) {
      answer(options.refuseWith);
      return -1;
    }
    int server = connectTo(request.host, request.port);  // "localhost" resolved here
    if (server < 0) {
      answer(5);  // connection refused
      return -1;
    }
    track(server);
    answer(0);
    return server;
  }
};

Socks5Proxy::Socks5Proxy(Socks5ProxyOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->start([impl = impl_.get()](int fd) { impl->serve(fd); });
}

Socks5Proxy::~Socks5Proxy() {
  impl_->stop();
}

std::uint16_t Socks5Proxy::port() const {
  return impl_->port;
}

std::string Socks5Proxy::url(const std::string& userInfo) const {
  return "socks5://" + (userInfo.empty() ? "" : userInfo + "@") +
         "127.0.0.1:" + std::to_string(impl_->port);
}

std::vector<SocksRequest> Socks5Proxy::requests() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->seen;
}

}  // namespace nodewarden::testing
