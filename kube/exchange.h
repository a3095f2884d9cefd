// Internal to kube/ (kube::Client's parts): one HTTP exchange with the API server, as a state
// machine on the client's loop — credentials (an exec plugin's answer, when one is needed and
// none is cached), a connection (an idle one, or a new one: resolve, connect, the proxy's
// TLS, CONNECT or SOCKS5 through the proxy, TLS), the request, and the response, whose reading the
// subclass does (the whole body for a request, a stream for a watch). Everything after the
// credentials runs under one deadline; a reused connection the server had closed is replaced once,
// transparently; a 401 with a token file or a plugin re-reads the file or runs the plugin again and
// tries once more, under a new deadline.
//
// Threading: the client's io_context thread. Callbacks of subclasses are never called from
// inside start().
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "kube/transport.h"

namespace nodewarden::kube::detail {

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(std::shared_ptr<ClientCore> core, http::verb method, std::string target,
           std::string body, std::string contentType);
  virtual ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // Arms the deadline and begins (posted: nothing runs inside this call).
  void start();
  // Stops everything in flight; no callback afterwards.
  void abort();
  // This exchange's deadline instead of ClientOptions::requestTimeout; before start().
  void setTimeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

 protected:
  // The response header is next on conn_: read the response.
  virtual void readResponse() = 0;
  // The exchange failed before or while reading (transport, TLS, timeout): `error` says what.
  virtual void fail(std::string error) = 0;
  // Called when the exchange is interrupted (deadline, abort), for the subclass's own timers.
  virtual void onInterrupt() {}

  bool stopped() const { return cancelled_ || core_->closed; }
  // The response header has come: the deadline no longer applies.
  void finishDeadline();
  // A reused connection the server closed while idle: once, on a new connection.
  bool retryStale(const error_code& ec);
  // A 401 with a token file or a plugin: true when a new attempt (fresh credentials, a new
  // deadline) is under way; the caller has let go of conn_.
  bool retryUnauthorized(unsigned status);
  void failTransport(const error_code& ec);

  std::shared_ptr<ClientCore> core_;
  http::verb method_;
  std::string target_;
  std::unique_ptr<Connection> conn_;
  std::string phase_;  // what is being done, for messages ("connect to 10.0.0.1:6443")
  bool cancelled_ = false;
  std::optional<std::chrono::milliseconds> timeout_;  // setTimeout, else the client's

 private:
  std::chrono::milliseconds requestTimeout() const;
  void begin();
  void onCredentials(const std::string& error);
  void attempt();
  void retryLater();  // attempt(), posted
  void interrupt();
  void buildRequest();
  void onResolved(error_code ec, tcp::resolver::results_type results);
  void onConnected(error_code ec);
  void sendConnect();
  void onConnectAnswer(error_code ec);
  // TLS with the proxy (an https:// proxy) or with the server.
  void handshake(bool withProxy);
  void onHandshake(error_code ec, bool withProxy);
  // SOCKS5 (RFC 1928, RFC 1929): greeting, authentication, CONNECT, then the server's TLS.
  void socksGreet();
  void onSocksGreetSent();
  void onSocksMethod(error_code ec);
  void socksAuthenticate();
  void onSocksAuthSent();
  void onSocksAuthAnswer(error_code ec);
  void socksConnect();
  void onSocksConnectSent();
  void onSocksReply(error_code ec);
  void onSocksBoundNameLength(error_code ec);
  void onSocksBound(error_code ec);
  void socksWrite(void (Exchange::*next)());
  void socksRead(std::size_t n, void (Exchange::*next)(error_code));
  void afterTunnel();  // the tunnel to the server is open: its TLS, or the request
  void send();
  void onSent(error_code ec);
  std::string timeoutMessage() const;

  tcp::resolver resolver_;
  asio::steady_timer deadline_;
  std::string body_;
  std::string contentType_;
  http::request<http::string_body> request_;
  http::request<http::empty_body> connectRequest_;
  std::optional<http::response_parser<http::empty_body>> connectAnswer_;
  std::vector<unsigned char> socksBuffer_;
  std::uint64_t usedGeneration_ = 0;  // of the credentials request_ carries
  bool reused_ = false;
  bool retriedStale_ = false;
  bool retried401_ = false;
  bool timedOut_ = false;
  bool deadlineDone_ = false;
};

}  // namespace nodewarden::kube::detail
