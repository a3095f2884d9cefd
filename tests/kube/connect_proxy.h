// A small HTTP proxy for tests, on 127.0.0.1: CONNECT tunnels (how kubectl and nodewarden
// reach an https server through a cluster's proxy-url) and absolute-form requests to http
// servers (sent on with "Connection: close", one request per connection). It only connects to
// 127.0.0.1, and records what it was asked.
//
// Threading: one thread per connection, blocking sockets; the public functions are safe from
// any thread. The destructor closes every connection and joins the threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nodewarden::testing {

struct ProxyRequest {
  std::string method;  // "CONNECT", "GET", …
  std::string target;  // "127.0.0.1:6443" for CONNECT, "http://127.0.0.1:8080/api/v1/pods" else
  std::string proxyAuthorization;
  unsigned status = 0;  // what the proxy answered (0: it passed the server's answer on)
};

class ConnectProxy {
 public:
  // `requiredAuthorization`: when not empty, requests without this Proxy-Authorization value
  // are answered 407.
  explicit ConnectProxy(std::string requiredAuthorization = {});
  ~ConnectProxy();
  ConnectProxy(const ConnectProxy&) = delete;
  ConnectProxy& operator=(const ConnectProxy&) = delete;

  std::uint16_t port() const;
  std::string url() const;  // "http://127.0.0.1:PORT"
  std::vector<ProxyRequest> requests() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nodewarden::testing
