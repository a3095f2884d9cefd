#include "kube/exchange.h"

#include "kube/client.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>

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
  deadline_.expires_after(core_->options.requestTimeout);
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
  // Plain http through a proxy goes to it in absolute form; https is tunnelled (CONNECT).
  const bool absolute = !core_->proxyAddress.empty() && !c.tls;
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
  conn_ = std::make_unique<Connection>();
  if (core_->config.tls) {
    conn_->tlsContext = core_->sslContext;
    conn_->tls =
        std::make_unique<beast::ssl_stream<beast::tcp_stream>>(core_->io, *conn_->tlsContext);
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
  if (!conn_->tls) return send();
  if (!core_->proxyAddress.empty()) return sendConnect();
  handshake();
}

// HTTP CONNECT: the proxy opens a tunnel to the server, and TLS runs through it.
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
  http::async_write(
      conn_->lowest(), connectRequest_,
      [self = shared_from_this()](error_code writeEc, std::size_t) {
        if (self->stopped()) return;
        if (writeEc) return self->failTransport(writeEc);
        self->connectAnswer_.emplace();
        self->connectAnswer_->skip(true);  // a 2xx answer to CONNECT has no body
        http::async_read_header(
            self->conn_->lowest(), self->conn_->buffer, *self->connectAnswer_,
            [self](error_code readEc, std::size_t) { self->onConnectAnswer(readEc); });
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
  handshake();
}

void Exchange::handshake() {
  const ClusterConfig& c = core_->config;
  std::string name = c.tlsServerName.empty() ? c.host : c.tlsServerName;
  SSL* ssl = conn_->tls->native_handle();
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
  phase_ = "TLS handshake with " + core_->address;
  conn_->tls->async_handshake(
      ssl::stream_base::client,
      [self = shared_from_this()](error_code handshakeEc) { self->onHandshake(handshakeEc); });
}

void Exchange::onHandshake(error_code ec) {
  if (stopped()) return;
  if (ec) {
    std::string detail = ec.message();
    long verify = SSL_get_verify_result(conn_->tls->native_handle());
    if (verify != X509_V_OK) detail += ": " + std::string(X509_verify_cert_error_string(verify));
    const ClusterConfig& c = core_->config;
    if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH)
      detail += " (the server's certificate is not valid for " +
                (c.tlsServerName.empty() ? c.host : c.tlsServerName) + ")";
    if (verify == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT ||
        verify == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
        verify == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY)
      detail += " (no certificate authority of the kubeconfig signed the server's certificate)";
    return fail(phase_ + ": " + detail);
  }
  send();
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
  return phase_ + ": timed out (request timeout " + formatDuration(core_->options.requestTimeout) +
         ")";
}

}  // namespace nodewarden::kube::detail
