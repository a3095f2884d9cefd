// What kube::Client authenticates each request with: the fixed token, the token file (re-read
// as the kubelet rotates it), or an exec credential plugin's answer (run when none is cached or
// it expired, once for every request waiting, again after a 401).
//
// Threading: the client's io_context thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/files.h"
#include "kube/config.h"
#include "kube/exec_plugin.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace nodewarden::kube {

// The bearer token of a fixed token or a token file. A token file is re-read when its inode,
// size or mtime change (checked at most once a second) and at once after invalidate() (a 401).
class TokenSource {
 public:
  explicit TokenSource(const ClusterConfig& config);
  // "" when the config has no token. An unreadable file keeps the last good token.
  const std::string& token();
  void invalidate();
  // The last read problem, for logs ("" when none).
  const std::string& problem() const { return problem_; }

 private:
  std::string fixed_;
  std::string file_;
  std::string token_;
  std::string problem_;
  FileStamp stamp_;
  std::chrono::steady_clock::time_point lastCheck_{};
  bool force_ = true;
};

struct CredentialOptions {
  ExecRunOptions exec;
  // The wall clock that expirationTimestamp is compared with (tests set it).
  std::function<std::chrono::system_clock::time_point()> wallClock;
};

class Credentials {
 public:
  Credentials(boost::asio::io_context& io, const ClusterConfig& config, CredentialOptions options);
  ~Credentials();  // kills a plugin still running
  Credentials(const Credentials&) = delete;
  Credentials& operator=(const Credentials&) = delete;

  // Whether a request must wait for refresh() first: a plugin is configured and no answer of
  // it is cached, or the cached one expired.
  bool stale() const;
  // Runs the plugin, or joins the run under way, and calls `done` with "" or what failed
  // (from a handler, never inside this call).
  void refresh(std::function<void(const std::string& error)> done);
  // The bearer token for the next request ("" for none).
  const std::string& token();
  // The plugin's client certificate and key (PEM, "" when it gave none); `generation()`
  // changes whenever the plugin answers.
  const std::string& certificatePem() const { return credential_.clientCertPem; }
  const std::string& keyPem() const { return credential_.clientKeyPem; }
  std::uint64_t generation() const { return generation_; }
  // A request sent with credentials of `generation` got 401: drop what it used (re-read the
  // token file; forget the plugin's answer unless a newer one came meanwhile). True when a
  // retry may succeed.
  bool unauthorized(std::uint64_t generation);
  // Kills a running plugin and forgets the waiters (their `done` is never called).
  void shutdown();

  TokenSource& tokens() { return tokens_; }

 private:
  void answered(Result<ExecCredential> result);

  boost::asio::io_context& io_;
  const ClusterConfig& config_;
  CredentialOptions options_;
  TokenSource tokens_;
  ExecCredential credential_;
  bool haveCredential_ = false;
  std::uint64_t generation_ = 0;
  std::unique_ptr<ExecRun> running_;
  std::vector<std::function<void(const std::string&)>> waiting_;
};

}  // namespace nodewarden::kube
