#include "kube/transport.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "kube/exchange.h"

namespace nodewarden::kube::detail {

namespace {

constexpr std::size_t kMaxIdleConnections = 4;
constexpr auto kMaxIdleAge = std::chrono::seconds(50);

std::string hostPort(const ClusterConfig& c) {
  std::string host = c.host.find(':') != std::string::npos ? "[" + c.host + "]" : c.host;
  return host + ":" + c.port;
}

}  // namespace

std::string formatDuration(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

void Connection::close() {
  error_code ec;
  lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
  lowest().socket().close(ec);
}

bool isStaleConnectionError(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == ssl::error::stream_truncated;
}

ClientCore::ClientCore(asio::io_context& ioContext, ClusterConfig clusterConfig,
                       ClientOptions clientOptions)
    : io(ioContext),
      config(std::move(clusterConfig)),
      options(std::move(clientOptions)),
      credentials(io, config,
                  CredentialOptions{ExecRunOptions{options.terminal, options.execTimeout},
                                    options.wallClock}),
      address(hostPort(config)) {
  if (!config.proxyHost.empty()) {
    ClusterConfig proxy;
    proxy.host = config.proxyHost;
    proxy.port = config.proxyPort;
    proxyAddress = hostPort(proxy);
  }
  if (config.tls || config.proxyScheme == ProxyScheme::Https) setUpTls({}, {});
}

std::unique_ptr<Connection> ClientCore::takeIdle() {
  auto now = std::chrono::steady_clock::now();
  while (!idle.empty()) {
    std::unique_ptr<Connection> conn = std::move(idle.back());
    idle.pop_back();
    if (now - conn->idleSince < kMaxIdleAge) return conn;
    conn->close();
  }
  return nullptr;
}

void ClientCore::putIdle(std::unique_ptr<Connection> conn) {
  if (closed || conn->buffer.size() != 0) {
    conn->close();
    return;
  }
  conn->idleSince = std::chrono::steady_clock::now();
  idle.push_back(std::move(conn));
  if (idle.size() > kMaxIdleConnections) {
    idle.front()->close();
    idle.erase(idle.begin());
  }
}

void ClientCore::shutdown() {
  closed = true;
  credentials.shutdown();
  std::vector<Exchange*> all(live.begin(), live.end());
  for (Exchange* exchange : all) exchange->abort();
  for (auto& conn : idle) conn->close();
  idle.clear();
}

void ClientCore::useCredentials() {
  const bool anyTls = config.tls || config.proxyScheme == ProxyScheme::Https;
  if (!anyTls || credentials.generation() == tlsGeneration) return;
  tlsGeneration = credentials.generation();
  const bool pluginCertificate = !credentials.certificatePem().empty();
  if (!pluginCertificate && !tlsHasPluginCertificate) return;  // tokens: the context stays
  setUpTls(credentials.certificatePem(), credentials.keyPem());
  tlsHasPluginCertificate = pluginCertificate;
  // client-go closes the connections made with a certificate that rotated; the idle ones
  // here (a watch keeps its connection until it ends).
  for (auto& conn : idle) conn->close();
  idle.clear();
}

void ClientCore::setUpTls(const std::string& pluginCertPem, const std::string& pluginKeyPem) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  tlsSetupError.clear();
  sslContext.reset();
  SSL_CTX* ctx = context->native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  error_code ec;
  if (config.insecureSkipTlsVerify) {
    context->set_verify_mode(ssl::verify_none);
  } else {
    context->set_verify_mode(ssl::verify_peer);
    if (!config.caData.empty()) {
      BIO* bio = BIO_new_mem_buf(config.caData.data(), static_cast<int>(config.caData.size()));
      X509_STORE* store = SSL_CTX_get_cert_store(ctx);
      int added = 0;
      while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
        if (X509_STORE_add_cert(store, cert) == 1) ++added;
        X509_free(cert);
      }
      BIO_free(bio);
      ERR_clear_error();  // the loop ends on "no start line"
      if (added == 0) {
        tlsSetupError = "certificate authority data: no PEM certificate found";
        return;
      }
    } else if (!config.caFile.empty()) {
      context->load_verify_file(config.caFile, ec);
      if (ec) {
        tlsSetupError = "certificate authority " + config.caFile + ": " + ec.message();
        return;
      }
    } else {
      context->set_default_verify_paths(ec);
      if (ec) {
        tlsSetupError = "the system's certificate authorities: " + ec.message();
        return;
      }
    }
  }
  const bool fromPlugin = !pluginCertPem.empty();
  const std::string& certData = fromPlugin ? pluginCertPem : config.clientCertData;
  const std::string& keyData = fromPlugin ? pluginKeyPem : config.clientKeyData;
  const std::string what = fromPlugin ? "the exec plugin's client " : "client ";
  if (!certData.empty()) {
    context->use_certificate_chain(asio::buffer(certData), ec);
    if (ec) {
      tlsSetupError = what + "certificate data: " + ec.message();
      return;
    }
  } else if (!config.clientCertFile.empty()) {
    context->use_certificate_chain_file(config.clientCertFile, ec);
    if (ec) {
      tlsSetupError = "client certificate " + config.clientCertFile + ": " + ec.message();
      return;
    }
  }
  if (!keyData.empty()) {
    context->use_private_key(asio::buffer(keyData), ssl::context::pem, ec);
    if (ec) {
      tlsSetupError = what + "key data: " + ec.message();
      return;
    }
  } else if (!config.clientKeyFile.empty()) {
    context->use_private_key_file(config.clientKeyFile, ssl::context::pem, ec);
    if (ec) {
      tlsSetupError = "client key " + config.clientKeyFile + ": " + ec.message();
      return;
    }
  }
  if ((!keyData.empty() || !config.clientKeyFile.empty()) && SSL_CTX_check_private_key(ctx) != 1) {
    tlsSetupError = "client key does not match the client certificate";
    ERR_clear_error();
    return;
  }
  sslContext = std::move(context);
}

}  // namespace nodewarden::kube::detail
