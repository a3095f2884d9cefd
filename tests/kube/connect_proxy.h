// Small proxies for tests, on 127.0.0.1, that only connect to 127.0.0.1 (or "localhost") and
// record what they were asked. ConnectProxy: an HTTP proxy, plain (http://) or behind TLS
// (https://): CONNECT tunnels (how kubectl and nodewarden reach an https server through a
// cluster's proxy-url) and absolute-form requests to http servers (sent on with
// "Connection: close", one request per connection). Socks5Proxy: a SOCKS5 proxy (RFC 1928
// CONNECT, RFC 1929 username/password), which resolves the names it is given itself.
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

struct ConnectProxyOptions {
  // When not empty, requests without this Proxy-Authorization value are answered 407.
  std::string requiredAuthorization;
  // When set, the proxy speaks TLS with this certificate and key (PEM): an https:// proxy.
  std::string tlsCertPem, tlsKeyPem;
};

class ConnectProxy {
 public:
  explicit ConnectProxy(std::string requiredAuthorization = {});
  explicit ConnectProxy(ConnectProxyOptions options);
  ~ConnectProxy();
  ConnectProxy(const ConnectProxy&) = delete;
  ConnectProxy& operator=(const ConnectProxy&) = delete;

  std::uint16_t port() const;
  std::string url() const;  // "http://127.0.0.1:PORT", or https:// with TLS
  std::vector<ProxyRequest> requests() const;
  std::size_t tlsHandshakes() const;  // completed (with TLS)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct SocksRequest {
  std::vector<unsigned> methods;  // the authentication methods the client offered
  std::string user, password;     // what it authenticated with (method 2)
  unsigned addressType = 0;       // 1 IPv4, 3 a name (resolved by the proxy), 4 IPv6
  std::string host;               // the address or the name
  std::uint16_t port = 0;
  unsigned reply = 0xff;  // what the proxy answered the CONNECT (0 succeeded); 0xff: never got
                          // that far
};

struct Socks5ProxyOptions {
  // When `user` is set, only username/password authentication with these is accepted.
  std::string user, password;
  // When not 0, every CONNECT is answered with this RFC 1928 reply (2: not allowed by
  // ruleset).
  unsigned refuseWith = 0;
};

class Socks5Proxy {
 public:
  explicit Socks5Proxy(Socks5ProxyOptions options = {});
  ~Socks5Proxy();
  Socks5Proxy(const Socks5Proxy&) = delete;
  Socks5Proxy& operator=(const Socks5Proxy&) = delete;

  std::uint16_t port() const;
  // "socks5://127.0.0.1:PORT", with `userInfo` ("user:secret") before the host when given.
  std::string url(const std::string& userInfo = {}) const;
  std::vector<SocksRequest> requests() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nodewarden::testing
