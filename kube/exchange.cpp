#include "kube/exchange.h"

#include "kube/client.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <iterator>

namespace nodewarden::kube::detail {

Exchange::Exchange(std::shared_ptr<ClientCore> core, http::verb method, std::string target,
                   std::string body, std::string contentType)
    : core_(std::move(core)),
      method_(method),
      target_(core_->config.basePath + target),
      resolver_(core_->io),
      deadline_(core_->io),
      body_(std::move(body)),
      contentType_(std::move(contentType)) {
  core_->live.insert(this);
}

Exchange::~Exchange() {
  core_->live.erase(this);
  if (conn_) conn_->close();
}

void Exchange::start() {
  asio::post(core_->io, [self = shared_from_this()] { self->begin(); });
}

void Exchange::begin() {
  if (stopped()) return;
  if (core_->credentials.stale()) {
    phase_ = "getting credentials";
    core_->credentials.refresh(
        [self = shared_from_this()](const std::string& error) { self->onCredentials(error); });
    return;
  }
  onCredentials({});
}

void Exchange::onCredentials(const std::string& error) {
  if (stopped()) return;
  if (!error.empty()) return fail("getting credentials: " + error);
  core_->useCredentials();
  deadlineDone_ = false;
  timedOut_ = false;
  deadline_.expires_after(requestTimeout());
  deadline_.async_wait([weak = weak_from_this()](error_code ec) {
    auto self = weak.lock();
    if (!self || ec || self->deadlineDone_) return;
    self->timedOut_ = true;
    self->interrupt();
  });
  attempt();
}

void Exchange::abort() {
  cancelled_ = true;
  interrupt();
}

void Exchange::interrupt() {
  resolver_.cancel();
  deadline_.cancel();
  if (conn_) conn_->close();
  onInterrupt();
}

void Exchange::finishDeadline() {
  deadlineDone_ = true;
  deadline_.cancel();
}

void Exchange::retryLater() {
  asio::post(core_->io, [self = shared_from_this()] { self->attempt(); });
}

void Exchange::attempt() {
  if (stopped()) return;
  if (method_ == http::verb::unknown) return fail("unknown HTTP method");
  if (!core_->tlsSetupError.empty()) return fail("TLS setup: " + core_->tlsSetupError);
  buildRequest();
  conn_ = core_->takeIdle();
  if (conn_) {
    reused_ = true;
    return send();
  }
  reused_ = false;
  const ClusterConfig& c = core_->config;
  const bool proxy = !core_->proxyAddress.empty();
  phase_ = "resolve " + (proxy ? c.proxyHost : c.host);
  resolver_.async_resolve(
      proxy ? c.proxyHost : c.host, proxy ? c.proxyPort : c.port,
      [self = shared_from_this()](error_code ec, tcp::resolver::results_type results) {
        self->onResolved(ec, std::move(results));
      });
}

void Exchange::buildRequest() {
  const ClusterConfig& c = core_->config;
  // Plain http through an http(s):// proxy goes to it in absolute form; https is tunnelled
  // (CONNECT); SOCKS5 is a tunnel for both.
  const bool httpProxy = c.proxyScheme == ProxyScheme::Http || c.proxyScheme == ProxyScheme::Https;
  const bool absolute = httpProxy && !c.tls;
  request_ = {};
  request_.method(method_);
  request_.target(absolute ? "http://" + core_->address + target_ : target_);
  request_.version(11);
  request_.set(http::field::host, core_->address);
  request_.set(http::field::user_agent, core_->options.userAgent);
  request_.set(http::field::accept, "application/json");
  if (absolute && !c.proxyAuthorization.empty())
    request_.set(http::field::proxy_authorization, c.proxyAuthorization);
  const std::string& token = core_->credentials.token();
  usedGeneration_ = core_->credentials.generation();
  if (!token.empty()) request_.set(http::field::authorization, "Bearer " + token);
  if (!c.impersonateUser.empty()) request_.set("Impersonate-User", c.impersonateUser);
  if (!c.impersonateUid.empty()) request_.set("Impersonate-Uid", c.impersonateUid);
  for (const auto& group : c.impersonateGroups) request_.insert("Impersonate-Group", group);
  for (const auto& [key, values] : c.impersonateExtra) {
    for (const auto& value : values)
      request_.insert("Impersonate-Extra-" + queryEscape(key), value);
  }
  if (!body_.empty()) {
    request_.set(http::field::content_type, contentType_);
    request_.body() = body_;
  }
  request_.prepare_payload();
}

void Exchange::onResolved(error_code ec, tcp::resolver::results_type results) {
  if (stopped()) return;
  if (ec) return failTransport(ec);
  const ClusterConfig& c = core_->config;
  conn_ = std::make_unique<Connection>();
  conn_->tlsContext = core_->sslContext;
  if (c.proxyScheme == ProxyScheme::Https && c.tls) {
    conn_->tlsInTls = std::make_unique<Connection::TlsInTlsStream>(
        ssl::stream<beast::tcp_stream>(core_->io, *conn_->tlsContext), *conn_->tlsContext);
  } else if (c.tls || c.proxyScheme == ProxyScheme::Https) {
    conn_->tls = std::make_unique<Connection::TlsStream>(core_->io, *conn_->tlsContext);
  } else {
    conn_->plain = std::make_unique<beast::tcp_stream>(core_->io);
  }
  phase_ = core_->proxyAddress.empty() ? "connect to " + core_->address
                                       : "connect to the proxy " + core_->proxyAddress;
  conn_->lowest().async_connect(
      results, [self = shared_from_this()](error_code connectEc, const tcp::endpoint&) {
        self->onConnected(connectEc);
      });
}

void Exchange::onConnected(error_code ec) {
  if (stopped()) return;
  if (ec) return failTransport(ec);
  conn_->lowest().socket().set_option(tcp::no_delay(true), ec);
  switch (core_->config.proxyScheme) {
    case ProxyScheme::None:
      return afterTunnel();
    case ProxyScheme::Http:
      return core_->config.tls ? sendConnect() : send();
    case ProxyScheme::Https:
      return handshake(true);
    case ProxyScheme::Socks5:
      return socksGreet();
  }
}

void Exchange::afterTunnel() {
  if (core_->config.tls) return handshake(false);
  send();
}

// HTTP CONNECT: the proxy opens a tunnel to the server, and TLS runs through it. Through an
// https:// proxy, the CONNECT goes inside the TLS to the proxy.
void Exchange::sendConnect() {
  const ClusterConfig& c = core_->config;
  connectRequest_ = {};
  connectRequest_.method(http::verb::connect);
  connectRequest_.target(core_->address);
  connectRequest_.version(11);
  connectRequest_.set(http::field::host, core_->address);
  connectRequest_.set(http::field::user_agent, core_->options.userAgent);
  if (!c.proxyAuthorization.empty())
    connectRequest_.set(http::field::proxy_authorization, c.proxyAuthorization);
  phase_ = "CONNECT to " + core_->address + " through the proxy " + core_->proxyAddress;
  auto withProxy = [this](auto&& f) {
    if (conn_->tlsInTls)
      f(conn_->tlsInTls->next_layer());
    else
      f(conn_->lowest());
  };
  withProxy([this](auto& stream) {
    http::async_write(stream, connectRequest_,
                      [self = shared_from_this(), &stream](error_code writeEc, std::size_t) {
                        if (self->stopped()) return;
                        if (writeEc) return self->failTransport(writeEc);
                        self->connectAnswer_.emplace();
                        self->connectAnswer_->skip(true);  // a 2xx answer to CONNECT has no body
                        http::async_read_header(stream, self->conn_->buffer, *self->connectAnswer_,
                                                [self](error_code readEc, std::size_t) {
                                                  self->onConnectAnswer(readEc);
                                                });
                      });
  });
}

void Exchange::onConnectAnswer(error_code ec) {
  if (stopped()) return;
  if (ec) return failTransport(ec);
  const auto& answer = connectAnswer_->get();
  if (answer.result_int() / 100 != 2) {
    std::string reason(answer.reason());
    return fail(phase_ + ": the proxy answered " + std::to_string(answer.result_int()) +
                (reason.empty() ? "" : " " + reason));
  }
  if (conn_->buffer.size() != 0) return fail(phase_ + ": the proxy sent bytes after its answer");
  handshake(false);
}

// The TLS with the server, or with an https:// proxy: verified as client-go verifies both,
// against the cluster's certificate authorities and for tls-server-name when it is set (Go's
// transport gives the proxy the same TLS configuration), else for the host dialled.
void Exchange::handshake(bool withProxy) {
  const ClusterConfig& c = core_->config;
  std::string name = !c.tlsServerName.empty() ? c.tlsServerName : withProxy ? c.proxyHost : c.host;
  SSL* ssl = withProxy && conn_->tlsInTls ? conn_->tlsInTls->next_layer().native_handle()
             : conn_->tls                 ? conn_->tls->native_handle()
                                          : conn_->tlsInTls->native_handle();
  error_code addressEc;
  asio::ip::make_address(name, addressEc);
  bool isAddress = !addressEc;
  if (!isAddress) SSL_set_tlsext_host_name(ssl, name.c_str());
  if (!c.insecureSkipTlsVerify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (isAddress)
      X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
    else
      X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
  }
  phase_ = withProxy ? "TLS handshake with the proxy " + core_->proxyAddress
                     : "TLS handshake with " + core_->address;
  auto done = [self = shared_from_this(), withProxy](error_code handshakeEc) {
    self->onHandshake(handshakeEc, withProxy);
  };
  if (withProxy && conn_->tlsInTls)
    conn_->tlsInTls->next_layer().async_handshake(ssl::stream_base::client, std::move(done));
  else if (conn_->tls)
    conn_->tls->async_handshake(ssl::stream_base::client, std::move(done));
  else
    conn_->tlsInTls->async_handshake(ssl::stream_base::client, std::move(done));
}

void Exchange::onHandshake(error_code ec, bool withProxy) {
  if (stopped()) return;
  if (ec) {
    std::string detail = ec.message();
    SSL* ssl = withProxy && conn_->tlsInTls ? conn_->tlsInTls->next_layer().native_handle()
               : conn_->tls                 ? conn_->tls->native_handle()
                                            : conn_->tlsInTls->native_handle();
    long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) detail += ": " + std::string(X509_verify_cert_error_string(verify));
    const ClusterConfig& c = core_->config;
    const std::string peer = withProxy ? "the proxy's" : "the server's";
    if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH)
      detail += " (" + peer + " certificate is not valid for " +
                (!c.tlsServerName.empty() ? c.tlsServerName
                 : withProxy              ? c.proxyHost
                                          : c.host) +
                ")";
    if (verify == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT ||
        verify == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
        verify == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY)
      detail += " (no certificate authority of the kubeconfig signed " + peer + " certificate)";
    return fail(phase_ + ": " + detail);
  }
  if (!withProxy) return send();
  if (core_->config.tls) return sendConnect();
  send();  // an http server: the request goes to the proxy in absolute form
}

// SOCKS5 as golang.org/x/net/proxy (Go's transport) speaks it: no authentication offered, or
// with the URL's user information also username/password; CONNECT with the server's host
// name as written (the proxy resolves it) or its address.
void Exchange::socksGreet() {
  const ClusterConfig& c = core_->config;
  phase_ = "SOCKS5 greeting to the proxy " + core_->proxyAddress;
  if (c.proxyCredentials)
    socksBuffer_ = {5, 2, 0, 2};
  else
    socksBuffer_ = {5, 1, 0};
  socksWrite(&Exchange::onSocksGreetSent);
}

void Exchange::onSocksGreetSent() {
  socksRead(2, &Exchange::onSocksMethod);
}

void Exchange::socksWrite(void (Exchange::*next)()) {
  asio::async_write(conn_->lowest(), asio::buffer(socksBuffer_),
                    [self = shared_from_this(), next](error_code ec, std::size_t) {
                      if (self->stopped()) return;
                      if (ec) return self->failTransport(ec);
                      ((*self).*next)();
                    });
}

void Exchange::socksRead(std::size_t n, void (Exchange::*next)(error_code)) {
  socksBuffer_.assign(n, 0);
  asio::async_read(conn_->lowest(), asio::buffer(socksBuffer_),
                   [self = shared_from_this(), next](error_code ec, std::size_t) {
                     if (self->stopped()) return;
                     ((*self).*next)(ec);
                   });
}

void Exchange::onSocksMethod(error_code ec) {
  if (ec) return failTransport(ec);
  const ClusterConfig& c = core_->config;
  if (socksBuffer_[0] != 5)
    return fail(phase_ + ": not a SOCKS5 proxy (it answered version " +
                std::to_string(socksBuffer_[0]) + ")");
  const unsigned method = socksBuffer_[1];
  if (method == 0) return socksConnect();
  if (method == 2 && c.proxyCredentials) return socksAuthenticate();
  if (method == 0xff)
    return fail(phase_ + ": the proxy accepts none of the authentication methods offered (" +
                (c.proxyCredentials ? "none, username/password" : "none") +
                (c.proxyCredentials ? ")" : "; put user:password@ in proxy-url if it needs them)"));
  return fail(phase_ + ": the proxy chose authentication method " + std::to_string(method) +
              ", which was not offered");
}

void Exchange::socksAuthenticate() {
  const auto& [user, password] = *core_->config.proxyCredentials;
  phase_ = "SOCKS5 username/password authentication with the proxy " + core_->proxyAddress;
  if (user.empty() || user.size() > 255 || password.size() > 255)
    return fail(phase_ +
                ": invalid username/password (a user name of 1 to 255 bytes, a password of at "
                "most 255)");
  socksBuffer_ = {1, static_cast<unsigned char>(user.size())};
  socksBuffer_.insert(socksBuffer_.end(), user.begin(), user.end());
  socksBuffer_.push_back(static_cast<unsigned char>(password.size()));
  socksBuffer_.insert(socksBuffer_.end(), password.begin(), password.end());
  socksWrite(&Exchange::onSocksAuthSent);
}

void Exchange::onSocksAuthSent() {
  socksRead(2, &Exchange::onSocksAuthAnswer);
}

void Exchange::onSocksAuthAnswer(error_code ec) {
  if (ec) return failTransport(ec);
  if (socksBuffer_[1] != 0)
    return fail(phase_ + ": the proxy refused the user name and password (status " +
                std::to_string(socksBuffer_[1]) + ")");
  socksConnect();
}

void Exchange::socksConnect() {
  const ClusterConfig& c = core_->config;
  phase_ = "SOCKS5 CONNECT to " + core_->address + " through the proxy " + core_->proxyAddress;
  socksBuffer_ = {5, 1, 0};
  error_code addressEc;
  const asio::ip::address address = asio::ip::make_address(c.host, addressEc);
  if (!addressEc && address.is_v4()) {
    socksBuffer_.push_back(1);
    for (unsigned char b : address.to_v4().to_bytes()) socksBuffer_.push_back(b);
  } else if (!addressEc) {
    socksBuffer_.push_back(4);
    for (unsigned char b : address.to_v6().to_bytes()) socksBuffer_.push_back(b);
  } else {
    if (c.host.size() > 255) return fail(phase_ + ": the host name is longer than 255 bytes");
    socksBuffer_.push_back(3);
    socksBuffer_.push_back(static_cast<unsigned char>(c.host.size()));
    socksBuffer_.insert(socksBuffer_.end(), c.host.begin(), c.host.end());
  }
  const unsigned port = static_cast<unsigned>(std::stoul(c.port));
  socksBuffer_.push_back(static_cast<unsigned char>(port >> 8));
  socksBuffer_.push_back(static_cast<unsigned char>(port & 0xff));
  socksWrite(&Exchange::onSocksConnectSent);
}

void Exchange::onSocksConnectSent() {
  socksRead(4, &Exchange::onSocksReply);
}

void Exchange::onSocksReply(error_code ec) {
  if (ec) return failTransport(ec);
  static const char* const kReplies[] = {"succeeded",
                                         "general SOCKS server failure",
                                         "connection not allowed by ruleset",
                                         "network unreachable",
                                         "host unreachable",
                                         "connection refused",
                                         "TTL expired",
                                         "command not supported",
                                         "address type not supported"};
  if (socksBuffer_[0] != 5)
    return fail(phase_ + ": not a SOCKS5 answer (version " + std::to_string(socksBuffer_[0]) + ")");
  const unsigned reply = socksBuffer_[1];
  if (reply != 0)
    return fail(phase_ + ": the proxy answered " +
                (reply < std::size(kReplies) ? std::string(kReplies[reply])
                                             : "unknown reply " + std::to_string(reply)));
  // The address the proxy bound: read and dropped.
  switch (socksBuffer_[3]) {
    case 1:
      return socksRead(4 + 2, &Exchange::onSocksBound);
    case 4:
      return socksRead(16 + 2, &Exchange::onSocksBound);
    case 3:
      return socksRead(1, &Exchange::onSocksBoundNameLength);
  }
  return fail(phase_ + ": the proxy answered an unknown address type " +
              std::to_string(socksBuffer_[3]));
}

void Exchange::onSocksBoundNameLength(error_code ec) {
  if (ec) return failTransport(ec);
  socksRead(std::size_t{socksBuffer_[0]} + 2, &Exchange::onSocksBound);
}

void Exchange::onSocksBound(error_code ec) {
  if (ec) return failTransport(ec);
  afterTunnel();
}

void Exchange::send() {
  phase_ = "send to " + core_->address;
  conn_->visit([this](auto& stream) {
    http::async_write(stream, request_, [self = shared_from_this()](error_code ec, std::size_t) {
      self->onSent(ec);
    });
  });
}

void Exchange::onSent(error_code ec) {
  if (stopped()) return;
  if (ec) {
    if (retryStale(ec)) return;
    return failTransport(ec);
  }
  phase_ = "read from " + core_->address;
  readResponse();
}

bool Exchange::retryStale(const error_code& ec) {
  if (!reused_ || retriedStale_ || !isStaleConnectionError(ec) || timedOut_) return false;
  retriedStale_ = true;
  conn_->close();
  conn_.reset();
  retryLater();
  return true;
}

bool Exchange::retryUnauthorized(unsigned status) {
  if (status != 401 || retried401_) return false;
  if (!core_->credentials.unauthorized(usedGeneration_)) return false;
  retried401_ = true;
  finishDeadline();
  asio::post(core_->io, [self = shared_from_this()] { self->begin(); });
  return true;
}

void Exchange::failTransport(const error_code& ec) {
  if (timedOut_) return fail(timeoutMessage());
  fail(phase_ + ": " + ec.message());
}

std::string Exchange::timeoutMessage() const {
  return phase_ + ": timed out (request timeout " + formatDuration(requestTimeout()) + ")";
}

std::chrono::milliseconds Exchange::requestTimeout() const {
  return timeout_.value_or(core_->options.requestTimeout);
}

}  // namespace nodewarden::kube::detail
