#include "server/tls.h"

#include <fcntl.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>

namespace nodewarden::server {

namespace asio = boost::asio;

namespace {

// A certificate or key file, whole; `what` ("TLS certificate") and the path start every error.
Result<std::string> readPemFile(const std::string& path, std::string_view what) {
  constexpr std::size_t kMaxPem = std::size_t{1} << 20;
  const std::string where = std::string(what) + " " + path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return Error{where + ": reading: " + std::strerror(err), err};
  }
  std::string content;
  char chunk[8192];
  for (;;) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int err = errno;
      ::close(fd);
      return Error{where + ": reading: " + std::strerror(err), err};
    }
    if (got == 0) break;
    content.append(chunk, static_cast<std::size_t>(got));
    if (content.size() > kMaxPem) {
      ::close(fd);
      return Error{where + ": larger than 1 MiB, not a PEM file"};
    }
  }
  ::close(fd);
  if (content.find("-----BEGIN") == std::string::npos) {
    return Error{where + ": no PEM block (-----BEGIN ...) in the file"};
  }
  return content;
}

// The first OpenSSL reason of `ec`, or its message.
std::string sslReason(const boost::system::error_code& ec) {
  std::string out = ec.message();
  return out.empty() ? std::string("unknown OpenSSL error") : out;
}

// A server context for TLS 1.2+ with the pair; errors name the file at fault.
Result<std::shared_ptr<asio::ssl::context>> makeTlsContext(const TlsFiles& files,
                                                           const std::string& certPem,
                                                           const std::string& keyPem,
                                                           const std::string& caPem) {
  const std::string& certFile = files.certFile;
  const std::string& keyFile = files.keyFile;
  const std::string& caFile = files.clientCaFile;
  std::shared_ptr<asio::ssl::context> context;
  try {
    context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  } catch (const std::exception& e) {
    return Error{std::string("creating a TLS context: ") + e.what()};
  }
  SSL_CTX* native = context->native_handle();
  boost::system::error_code ec;
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                           asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                           asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use,
                       ec);
  if (ec || SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1) {
    ::ERR_clear_error();
    return Error{"creating a TLS context: cannot require TLS 1.2"};
  }
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // An encrypted key must fail, not prompt on a terminal (OpenSSL's default callback).
  context->set_password_callback(
      [](std::size_t, asio::ssl::context::password_purpose) { return std::string(); }, ec);
  context->use_certificate_chain(asio::buffer(certPem), ec);
  if (ec) {
    ::ERR_clear_error();
    return Error{"TLS certificate " + certFile + ": not a usable PEM certificate (" +
                 sslReason(ec) + ")"};
  }
  // Checked here rather than left to use_private_key, whose mismatch error
  // ("key values mismatch") does not say which files are meant.
  {
    BIO* bio = BIO_new_mem_buf(keyPem.data(), static_cast<int>(keyPem.size()));
    EVP_PKEY* key = bio == nullptr
                        ? nullptr
                        : PEM_read_bio_PrivateKey(
                              bio, nullptr, [](char*, int, int, void*) { return 0; }, nullptr);
    if (bio != nullptr) BIO_free(bio);
    if (key == nullptr) {
      ::ERR_clear_error();
      return Error{"TLS key " + keyFile + ": not a usable unencrypted PEM private key"};
    }
    X509* leaf = SSL_CTX_get0_certificate(native);
    const bool matches = leaf != nullptr && X509_check_private_key(leaf, key) == 1;
    EVP_PKEY_free(key);
    ::ERR_clear_error();
    if (!matches) {
      return Error{"TLS key " + keyFile + " does not match the certificate " + certFile};
    }
  }
  context->use_private_key(asio::buffer(keyPem), asio::ssl::context::pem, ec);
  if (ec || SSL_CTX_check_private_key(native) != 1) {
    ::ERR_clear_error();
    return Error{"TLS key " + keyFile + ": not a usable unencrypted PEM private key (" +
                 (ec ? sslReason(ec) : std::string("rejected by OpenSSL")) + ")"};
  }
  if (!caFile.empty()) {
    // Every certificate of the bundle is trusted for client authentication.
    BIO* bio = BIO_new_mem_buf(caPem.data(), static_cast<int>(caPem.size()));
    int loaded = 0;
    X509_STORE* store = SSL_CTX_get_cert_store(native);
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
    while (bio != nullptr) {
      X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
      if (cert == nullptr) break;
      if (X509_STORE_add_cert(store, cert) == 1) ++loaded;
      if (names != nullptr) sk_X509_NAME_push(names, X509_NAME_dup(X509_get_subject_name(cert)));
      X509_free(cert);
    }
    if (bio != nullptr) BIO_free(bio);
    ::ERR_clear_error();
    if (loaded == 0) {
      if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
      return Error{"TLS client CA " + caFile + ": no usable PEM certificate in it"};
    }
    if (names != nullptr) SSL_CTX_set_client_CA_list(native, names);
    // Ask for a certificate, fail the handshake on a bad one, accept none (probes).
    SSL_CTX_set_verify(native, SSL_VERIFY_PEER, nullptr);
  }
  return context;
}

}  // namespace

TlsPair::TlsPair(TlsFiles files, std::function<void(const std::string&)> report)
    : files_(std::move(files)), report_(std::move(report)) {}

Result<bool> TlsPair::load(bool reportFailure) {
  lastCheck_ = std::chrono::steady_clock::now();
  auto cert = readPemFile(files_.certFile, "TLS certificate");
  auto key = cert ? readPemFile(files_.keyFile, "TLS key") : Result<std::string>(cert.error());
  Result<std::string> ca = std::string();
  if (cert && key && !files_.clientCaFile.empty()) {
    ca = readPemFile(files_.clientCaFile, "TLS client CA");
    if (!ca) key = ca.error();
  }
  Result<std::shared_ptr<asio::ssl::context>> context = Error{""};
  if (cert && key) {
    if (context_ && *cert == certPem_ && *key == keyPem_ && *ca == caPem_) return false;
    // The same bad content again: reported already.
    if (reportFailure && failed_ && *cert == failed_->first && *key == failed_->second) {
      return Error{"TLS certificate " + files_.certFile + " and key " + files_.keyFile +
                   ": still the pair that failed to load"};
    }
    context = makeTlsContext(files_, *cert, *key, *ca);
  }
  Error failure = !cert ? cert.error() : !key ? key.error() : !context ? context.error() : Error{};
  if (!cert || !key || !context) {
    if (reportFailure) {
      // A half-written rotation is re-tried when the files change again.
      failed_.emplace(cert ? *cert : std::string(), key ? *key : std::string());
      if (report_)
        report_(failure.message + (context_ ? " (keeping the previous certificate)" : ""));
    }
    return failure;
  }
  context_ = std::move(context).value();
  certPem_ = std::move(cert).value();
  keyPem_ = std::move(key).value();
  caPem_ = std::move(ca).value();
  failed_.reset();
  return true;
}

void TlsPair::reloadIfDue(std::chrono::milliseconds interval) {
  if (std::chrono::steady_clock::now() - lastCheck_ < interval) return;
  (void)load(/*reportFailure=*/true);
}

}  // namespace nodewarden::server
