#include "kube/exchange.h"

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
  deadline_.expires_after(core_->options.requestTimeout);
  deadline_.async_wait([weak = weak_from_this()](error_code ec) {
    auto self = weak.lock();
    if (!self || ec || self->deadlineDone_) return;
    self->timedOut_ = true;
    self->interrupt();
  });
  retryLater();
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
  phase_ = "resolve " + core_->config.host;
  resolver_.async_resolve(
      core_->config.host, core_->config.port,
      [self = shared_from_this()](error_code ec, tcp::resolver::results_type results) {
        self->onResolved(ec, std::move(results));
      });
}

void Exchange::buildRequest() {
  request_ = {};
  request_.method(method_);
  request_.target(target_);
  request_.version(11);
  request_.set(http::field::host, core_->address);
  request_.set(http::field::user_agent, core_->options.userAgent);
  request_.set(http::field::accept, "application/json");
  const std::string& token = core_->tokens.token();
  if (!token.empty()) request_.set(http::field::authorization, "Bearer " + token);
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
    conn_->tls =
        std::make_unique<beast::ssl_stream<beast::tcp_stream>>(core_->io, *core_->sslContext);
  } else {
    conn_->plain = std::make_unique<beast::tcp_stream>(core_->io);
  }
  phase_ = "connect to " + core_->address;
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
  if (status != 401 || retried401_ || core_->config.tokenFile.empty()) return false;
  retried401_ = true;
  core_->tokens.invalidate();
  return true;
}

void Exchange::failTransport(const error_code& ec) {
  if (timedOut_) return fail(timeoutMessage());
  fail(phase_ + ": " + ec.message());
}

std::string Exchange::timeoutMessage() const {
  return phase_ + ": timed out (request timeout " +
         formatDuration(core_->options.requestTimeout) + ")";
}

}  // namespace nodewarden::kube::detail
