// Where the Kubernetes API server is and how to authenticate to it: the in-cluster service
// account (client-go rest.InClusterConfig) or a kubeconfig file (its current context), and
// the bearer token re-read from its file as the kubelet rotates it.
//
// Threading: plain values; TokenSource is used from one thread (the loop's).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/result.h"

namespace nodewarden::kube {

struct ClusterConfig {
  std::string host;        // "10.96.0.1", "api.example.com", "::1" (no brackets)
  std::string port;        // "443"
  bool tls = true;         // https (every real cluster); http only for tests
  std::string basePath;    // a server URL's path prefix ("" for most clusters), no trailing /
  std::string caData;      // PEM; empty with caFile empty: the system's default roots
  std::string caFile;
  std::string clientCertData, clientCertFile;  // PEM; client certificate authentication
  std::string clientKeyData, clientKeyFile;
  std::string token;       // a fixed bearer token (kubeconfig "token")
  std::string tokenFile;   // re-read on change and after a 401 (service account, tokenFile)
  bool insecureSkipTlsVerify = false;
  std::string tlsServerName;  // name verified in the server certificate (default: host)
  std::string namespaceName;  // the service account's namespace / the context's namespace
  // For logs: "in-cluster service account (https://10.96.0.1:443)" or
  // "kubeconfig /etc/kubernetes/kubelet.conf, context default (https://…)".
  std::string description;
};

// client-go's InClusterConfig: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT,
// the token and CA under `serviceAccountDir`. An error says what is missing ("not running
// in a cluster: KUBERNETES_SERVICE_HOST is not set").
Result<ClusterConfig> inClusterConfig(
    const std::string& serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount",
    const std::function<const char*(const char*)>& getEnv = nullptr);

// A kubeconfig file (YAML as kubectl writes it, or JSON): the current context (or
// `context`), its cluster (server, certificate-authority(-data), insecure-skip-tls-verify,
// tls-server-name) and user (token, tokenFile, client-certificate(-data),
// client-key(-data)). Relative file paths resolve against the kubeconfig's directory. Exec
// and auth-provider plugins are refused with a clear error. Errors name the file and the
// path inside it ("kubeconfig /etc/kubernetes/kubelet.conf: users[0].user.exec: exec
// credential plugins are not supported"), or the line for YAML outside the subset kubectl
// writes ("kubeconfig /x: line 7: tabs are not allowed for indentation").
Result<ClusterConfig> loadKubeconfig(const std::string& path,
                                     const std::optional<std::string>& context = std::nullopt);

// docs/reference.md §1: --kubeconfig, else $KUBECONFIG (its first file), else in-cluster.
Result<ClusterConfig> resolveClusterConfig(const std::optional<std::string>& kubeconfigFlag);

// The bearer token for each request. A token file is re-read when its inode, size or mtime
// change (checked at most once a second) and at once after invalidate() (a 401).
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
  std::uint64_t inode_ = 0;
  std::int64_t size_ = -1;
  std::int64_t mtimeNanos_ = 0;
  std::chrono::steady_clock::time_point lastCheck_{};
  bool force_ = true;
};

}  // namespace nodewarden::kube
