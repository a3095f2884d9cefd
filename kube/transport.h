// Internal to kube/ (kube::Client's parts; other folders include kube/client.h): the
// connections to the API server — plain TCP or TLS, kept open and reused — and the state the
// client's exchanges share: the configuration, the token source, the TLS context made from the
// configuration's certificates, and the pool of idle connections.
//
// Threading: everything here runs on the client's io_context thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

// GCC 12 with -fsanitize=address,undefined reports a false -Wmaybe-uninitialized inside
// Beast's parser (a boost::optional content length); keep it out of -Werror builds.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#pragma GCC diagnostic pop

#include "base/time.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/credentials.h"

namespace nodewarden::kube::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

// "10 s" or "250 ms", for messages.
std::string formatDuration(std::chrono::milliseconds d);

// One connection to the API server: plain, TLS, or — through an https:// proxy to an https
// server — TLS inside the TLS to the proxy; with the bytes read past the last message. Through
// an https:// proxy to an http server, `tls` is the TLS to the proxy.
struct Connection {
  using TlsStream = beast::ssl_stream<beast::tcp_stream>;
  using TlsInTlsStream = beast::ssl_stream<ssl::stream<beast::tcp_stream>>;
  std::shared_ptr<ssl::context> tlsContext;  // what `tls` or `tlsInTls` was made with (outlives it)
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<TlsStream> tls;
  std::unique_ptr<TlsInTlsStream> tlsInTls;
  beast::flat_buffer buffer;
  SteadyTime idleSince;

  beast::tcp_stream& lowest() {
    if (plain) return *plain;
    return tls ? beast::get_lowest_layer(*tls) : beast::get_lowest_layer(*tlsInTls);
  }
  void close();
  template <typename F>
  void visit(F&& f) {
    if (plain)
      f(*plain);
    else if (tls)
      f(*tls);
    else
      f(*tlsInTls);
  }
};

// What a server that closed an idle kept-alive connection makes a reused one report.
bool isStaleConnectionError(const error_code& ec);

class Exchange;

// The client's shared state: exchanges hold it, so it outlives a Client destroyed mid-flight.
struct ClientCore {
  ClientCore(asio::io_context& ioContext, ClusterConfig clusterConfig, ClientOptions clientOptions);

  // After the exec plugin answered: a TLS context with its client certificate (when it gave
  // one), and the idle connections made with the old one closed. tlsSetupError says what
  // failed.
  void useCredentials();

  // An idle connection young enough to reuse (older ones are closed), or null.
  std::unique_ptr<Connection> takeIdle();
  // Keeps `conn` for reuse (at most a few; the oldest goes), unless the client is closed or
  // the connection holds unread bytes.
  void putIdle(std::unique_ptr<Connection> conn);
  // Aborts every live exchange (no callbacks) and closes every idle connection.
  void shutdown();

  asio::io_context& io;
  ClusterConfig config;
  ClientOptions options;
  Credentials credentials;
  std::string address;       // "host:port" for messages and the Host header
  std::string proxyAddress;  // "host:port" of the proxy, "" without one
  // Made with the cluster's TLS settings, for the server (https) and for an https:// proxy,
  // as client-go uses one TLS configuration for both.
  std::shared_ptr<ssl::context> sslContext;
  std::string tlsSetupError;        // set: every exchange fails with it
  std::uint64_t tlsGeneration = 0;  // the credentials' generation sslContext was made for
  bool tlsHasPluginCertificate = false;
  std::vector<std::unique_ptr<Connection>> idle;
  std::set<Exchange*> live;
  bool closed = false;

 private:
  void setUpTls(const std::string& pluginCertPem, const std::string& pluginKeyPem);
};

}  // namespace nodewarden::kube::detail
