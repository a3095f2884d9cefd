// The HTTPS side of server/http_server.h: the certificate pair (PEM files → an OpenSSL
// server context for TLS 1.2 or newer, with an optional client CA), and its reload when the
// files change (cert-manager rotates a Secret's files in place). Errors name the file at
// fault; a new pair that does not load keeps the old one. Loop thread only, like the server.
// Asio's SSL context is only declared here, so http_server.h stays free of it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "base/result.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace nodewarden::server {

struct TlsFiles {
  std::string certFile;      // PEM, may hold a chain (leaf first)
  std::string keyFile;       // PEM, not encrypted
  std::string clientCaFile;  // optional: PEM CA certificates that client certificates must chain to
};

// The loaded pair and what it was loaded from. New connections take a reference to context();
// open ones keep the context they started with.
class TlsPair {
 public:
  // `report` is told (once per distinct bad content) about a rotated pair that fails to load.
  TlsPair(TlsFiles files, std::function<void(const std::string&)> report);

  // Reads the files. True when a different pair was loaded, false when they hold the loaded
  // pair already. On an error the loaded pair (if any) stays in use. With reportFailure the
  // error is also reported, and the same bad content again is not re-parsed (an error
  // saying so is returned); without it (the first load, at start) nothing is reported.
  Result<bool> load(bool reportFailure);

  // load(true) if `interval` has passed since the last load; errors are reported only.
  void reloadIfDue(std::chrono::milliseconds interval);

  // The context of the loaded pair; null before a load succeeded.
  const std::shared_ptr<boost::asio::ssl::context>& context() const { return context_; }
  const TlsFiles& files() const { return files_; }

 private:
  TlsFiles files_;
  std::function<void(const std::string&)> report_;
  std::shared_ptr<boost::asio::ssl::context> context_;
  std::string certPem_, keyPem_, caPem_;  // the files' content when loaded
  // The last cert and key content that failed to load (reported once).
  std::optional<std::pair<std::string, std::string>> failed_;
  std::chrono::steady_clock::time_point lastCheck_{};
};

}  // namespace nodewarden::server
