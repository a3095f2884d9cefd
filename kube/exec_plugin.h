// Exec credential plugins (client.authentication.k8s.io/v1 and v1beta1), as client-go runs
// them: the command found on the PATH, run with the kubeconfig's args and env and
// KUBERNETES_EXEC_INFO, its standard output read as an ExecCredential (a token, or a client
// certificate and key, and when they expire). The pure parts (the input, the output, the PATH
// lookup) are separate from the run, so tests can check them on strings.
//
// Threading: ExecRun runs on its io_context's thread; the rest are pure functions.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "kube/config.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace nodewarden::kube {

struct ExecCredential {
  std::string token;
  std::string clientCertPem, clientKeyPem;                      // both or neither
  std::optional<std::chrono::system_clock::time_point> expiry;  // none: until a 401
};

// KUBERNETES_EXEC_INFO: an ExecCredential of the plugin's apiVersion with spec.interactive,
// and spec.cluster when the plugin asks for it (provideClusterInfo): the server, TLS
// settings, the certificate authority (`caPem`, read from the file when the cluster names
// one), the proxy and the cluster's exec extension as spec.cluster.config.
std::string execInfo(const ExecConfig& exec, const ClusterConfig& cluster, bool interactive,
                     const std::string& caPem);

// The plugin's standard output checked as client-go checks it: JSON (or YAML) of the
// configured apiVersion, kind ExecCredential when given, a status with a token or a
// certificate and key (both, and they must load), and an RFC 3339 expirationTimestamp.
Result<ExecCredential> parseExecCredential(std::string_view output, const std::string& apiVersion);

// The executable to run, as Go's exec.LookPath: a command with a '/' as it is; otherwise the
// first regular file with an execute bit in a directory of `pathVariable` (relative
// directories are skipped, as Go refuses programs found through them).
Result<std::string> findExecutable(const std::string& command, std::string_view pathVariable);

struct ExecRunOptions {
  // Standard input is a terminal the plugin may read (the CLI run by a person; never the
  // daemons). With it, interactiveMode IfAvailable and Always give the plugin the terminal
  // (stdin and stderr); without it, Always fails.
  bool terminal = false;
  std::chrono::milliseconds timeout{60000};  // then the plugin is killed
};

// One run of a plugin. The error messages name the plugin and the user, and carry the end
// of the plugin's standard error and the kubeconfig's installHint when it fails.
class ExecRun {
 public:
  using Done = std::function<void(Result<ExecCredential>)>;
  // Starts the plugin; `done` is called once, from a handler on `io` (never from inside
  // start()). Destroying the returned handle kills the plugin (SIGKILL) and calls nothing.
  static std::unique_ptr<ExecRun> start(boost::asio::io_context& io, const ClusterConfig& cluster,
                                        const ExecRunOptions& options, Done done);
  virtual ~ExecRun() = default;
};

}  // namespace nodewarden::kube
