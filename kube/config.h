// Where the Kubernetes API server is and how to authenticate to it, found as kubectl finds it
// (docs/reference.md §1.10): --kubeconfig, else $KUBECONFIG (a list of files, merged), else
// ~/.kube/config, else — for the daemons — the in-cluster service account (client-go's
// rest.InClusterConfig).
//
// Threading: plain values and pure functions of the files they read.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace nodewarden::kube {

// An exec credential plugin (a kubeconfig user's `exec`, client.authentication.k8s.io/v1 or
// v1beta1): the command whose output is the credential.
struct ExecConfig {
  enum class Interactive { Never, IfAvailable, Always };
  std::string apiVersion;  // "client.authentication.k8s.io/v1" or ".../v1beta1"
  // As written; resolved against the kubeconfig's directory when it holds a '/' and is
  // relative. Without a '/', looked up on the PATH when the plugin runs.
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to nodewarden's environment
  std::string installHint;                               // shown when the plugin fails
  bool provideClusterInfo = false;  // KUBERNETES_EXEC_INFO carries spec.cluster
  Interactive interactiveMode = Interactive::IfAvailable;
  // The cluster's `client.authentication.k8s.io/exec` extension as JSON text ("" when none):
  // spec.cluster.config of KUBERNETES_EXEC_INFO.
  std::string clusterExtension;
  std::string user;  // the kubeconfig user's name, for messages
};

// The scheme of a cluster's proxy-url (None: no proxy).
enum class ProxyScheme { None, Http, Https, Socks5 };

struct ClusterConfig {
  std::string host;      // "10.96.0.1", "api.example.com", "::1" (no brackets)
  std::string port;      // "443"
  bool tls = true;       // https (every real cluster); http only for tests
  std::string basePath;  // a server URL's path prefix ("" for most clusters), no trailing /
  std::string server;    // the server URL as written (for KUBERNETES_EXEC_INFO)
  std::string caData;    // PEM; empty with caFile empty: the system's default roots
  std::string caFile;
  std::string clientCertData, clientCertFile;  // PEM; client certificate authentication
  std::string clientKeyData, clientKeyFile;
  std::string token;               // a fixed bearer token (kubeconfig "token")
  std::string tokenFile;           // re-read on change and after a 401 (service account, tokenFile)
  std::optional<ExecConfig> exec;  // credentials from a plugin (none of the above given)
  bool insecureSkipTlsVerify = false;
  std::string tlsServerName;        // name verified in the server certificate (default: host)
  bool disableCompression = false;  // read for KUBERNETES_EXEC_INFO; nothing is compressed
  // The cluster's proxy-url, as kubectl takes it. http:// and https:// (TLS to the proxy,
  // made with the cluster's own TLS settings as client-go does): an https server is tunnelled
  // with CONNECT, an http one is sent to the proxy in absolute form. socks5://: SOCKS5
  // (RFC 1928), the server's host name sent to the proxy to resolve, with the URL's user
  // information as RFC 1929 username/password authentication.
  std::string proxyUrl;  // as written, "" for none
  ProxyScheme proxyScheme = ProxyScheme::None;
  std::string proxyHost, proxyPort;
  std::string proxyAuthorization;  // http(s): "Basic …" from the URL's user information, or ""
  std::optional<std::pair<std::string, std::string>> proxyCredentials;  // socks5: user, password
  // Impersonation (the user's as, as-uid, as-groups, as-user-extra): Impersonate-* headers.
  std::string impersonateUser, impersonateUid;
  std::vector<std::string> impersonateGroups;
  std::vector<std::pair<std::string, std::vector<std::string>>> impersonateExtra;
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

// One kubeconfig file, as `kubectl --kubeconfig FILE` reads it: YAML (anything kubectl's YAML
// reader takes: flow style, anchors, YAML 1.1 booleans, …) or JSON; its current context (or
// `context`), that context's cluster and user. Relative file paths resolve against the
// file's directory. Every entry is checked as kubectl decodes it (types, base64, duplicate
// names), the chosen ones as kubectl validates them (files readable, one certificate
// authority, a key with a certificate, a complete exec block). Basic authentication and
// auth-provider plugins are refused with what to use instead. Errors name the file and the
// place inside it ("kubeconfig /etc/kubernetes/kubelet.conf: users[0].user.exec: command is
// not set"), or the line for YAML that does not parse. A missing file is an error.
Result<ClusterConfig> loadKubeconfig(const std::string& path,
                                     const std::optional<std::string>& context = std::nullopt);

// Several kubeconfig files merged by kubectl's rules ($KUBECONFIG): the first file to set a
// cluster, user or context of a given name, or current-context, wins; files that do not exist
// and empty names are skipped; a file that exists but does not load is an error. nullopt when
// no file of the list exists.
std::optional<Result<ClusterConfig>> loadKubeconfigList(
    const std::vector<std::string>& paths,
    const std::optional<std::string>& context = std::nullopt);

struct ResolveOptions {
  std::optional<std::string> context;  // --context: instead of current-context
  // When no kubeconfig is found: the in-cluster service account (the agent and the webhook),
  // or an error saying where nodewarden looked (explain, kubectl nodewarden).
  bool inClusterFallback = true;
  std::function<const char*(const char*)> getEnv;  // default std::getenv (tests set it)
  std::string serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

// kubectl's resolution: `kubeconfigFlag` (one file) when given; else $KUBECONFIG when it is
// set and not empty (a ':'-separated list, merged as loadKubeconfigList does); else
// ~/.kube/config ($HOME) when it exists; else the in-cluster service account or an error.
Result<ClusterConfig> resolveClusterConfig(const std::optional<std::string>& kubeconfigFlag,
                                           const ResolveOptions& options = {});

}  // namespace nodewarden::kube
