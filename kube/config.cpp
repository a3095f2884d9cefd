#include "kube/config.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/files.h"
#include "kube/kubeconfig.h"

namespace nodewarden::kube {

namespace {

std::string hostForUrl(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

std::string serverUrl(const ClusterConfig& c) {
  return std::string(c.tls ? "https://" : "http://") + hostForUrl(c.host) + ":" + c.port +
         c.basePath;
}

std::string base64(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

bool validPort(std::string_view port) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  return ec == std::errc() && end == port.data() + port.size() && value > 0 && value <= 65535;
}

// Go's url.Parse takes "https://fd00::1:6443" (the last colon before the port) and kubectl
// then dials [fd00::1]:6443; RFC 3986 does not. Brackets it when that reading is an IPv6
// address and a port.
std::string bracketBareIpv6(std::string url, std::size_t authorityStart) {
  std::size_t end = url.find_first_of("/?#", authorityStart);
  if (end == std::string::npos) end = url.size();
  std::string_view authority(url.data() + authorityStart, end - authorityStart);
  if (authority.find('[') != std::string_view::npos ||
      authority.find('@') != std::string_view::npos ||
      std::count(authority.begin(), authority.end(), ':') < 2)
    return url;
  std::size_t colon = authority.rfind(':');
  std::string host(authority.substr(0, colon));
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address_v6(host, ec);
  if (ec || !validPort(authority.substr(colon + 1))) return url;
  return url.substr(0, authorityStart) + "[" + host + "]" + url.substr(authorityStart + colon);
}

// The cluster's server into `c`: "https://host:port/prefix", or a bare "host:port", which
// kubectl reads as https when TLS is configured (a certificate authority, a client
// certificate, insecure-skip-tls-verify) and as http otherwise.
std::optional<std::string> parseServer(const std::string& written, bool defaultTls,
                                       ClusterConfig& c) {
  std::string url = written;
  if (url.find("://") == std::string::npos) {
    url = (defaultTls ? "https://" : "http://") + url;
    if (url.find('/', url.find("://") + 3) != std::string::npos &&
        url.substr(url.find('/', url.find("://") + 3)) != "/")
      return "expected a URL or host:port, got \"" + written + "\"";
  }
  std::string_view text(url);
  bool https = text.substr(0, 8) == "https://";
  if (!https && text.substr(0, 7) != "http://")
    return "expected an https:// or http:// URL, got \"" + written + "\"";
  url = bracketBareIpv6(url, https ? 8 : 7);
  text = url;
  std::string_view authority = text.substr(https ? 8 : 7);
  authority = authority.substr(0, authority.find_first_of("/?#"));
  if (authority.find('[') == std::string_view::npos &&
      std::count(authority.begin(), authority.end(), ':') > 1)
    return "an IPv6 address in a URL must be in brackets ([::1]:6443)";
  auto parsed = boost::urls::parse_uri(url);
  if (!parsed) return "invalid server URL \"" + written + "\": " + parsed.error().message();
  const boost::urls::url_view& u = *parsed;
  c.tls = https;
  if (u.has_userinfo()) return "user information in the server URL is not supported";
  if (u.has_query() || u.has_fragment())
    return "a query or fragment in the server URL is not supported";
  if (u.host_type() == boost::urls::host_type::ipvfuture)
    return "an IPvFuture address in the server URL is not supported";
  c.host = u.host_address();
  if (c.host.empty()) return "no host in the server URL";
  if (!u.has_port()) {
    c.port = c.tls ? "443" : "80";
  } else {
    if (u.port().empty()) return "empty port in the server URL";
    if (!validPort(u.port())) return "bad port in the server URL";
    c.port = std::string(u.port());
  }
  std::string base(u.encoded_path());
  while (!base.empty() && base.back() == '/') base.pop_back();
  c.basePath = base;
  return std::nullopt;
}

// proxy-url as kubectl reads it (client-go's parseProxyURL): http://, https:// or socks5://,
// the port defaulting to the scheme's (80, 443, 1080); the user information becomes
// Proxy-Authorization (http, https) or the SOCKS5 username and password.
std::optional<std::string> parseProxy(const std::string& url, const std::string& clusterName,
                                      ClusterConfig& c) {
  const std::string invalid =
      "invalid proxy-url \"" + url + "\" for cluster \"" + clusterName + "\": ";
  auto parsed = boost::urls::parse_uri(url);
  if (!parsed) return invalid + "cannot parse it: " + parsed.error().message();
  const boost::urls::url_view& u = *parsed;
  const std::string scheme(u.scheme());
  std::string defaultPort;
  if (scheme == "http") {
    c.proxyScheme = ProxyScheme::Http;
    defaultPort = "80";
  } else if (scheme == "https") {
    c.proxyScheme = ProxyScheme::Https;
    defaultPort = "443";
  } else if (scheme == "socks5") {
    c.proxyScheme = ProxyScheme::Socks5;
    defaultPort = "1080";
  } else {
    return invalid + "unsupported scheme \"" + scheme + "\", must be http, https, or socks5";
  }
  c.proxyUrl = url;
  c.proxyHost = u.host_address();
  if (c.proxyHost.empty()) return invalid + "no host";
  c.proxyPort = u.has_port() && !u.port().empty() ? std::string(u.port()) : defaultPort;
  if (!validPort(c.proxyPort)) return invalid + "bad port";
  if (!u.has_userinfo()) return std::nullopt;
  std::string user = u.user(), password = u.password();
  if (c.proxyScheme == ProxyScheme::Socks5) {
    // Checked (1 to 255 bytes, RFC 1929) when the proxy asks for them, as Go's client does.
    c.proxyCredentials = std::make_pair(std::move(user), std::move(password));
  } else {
    c.proxyAuthorization = "Basic " + base64(user + ":" + password);
  }
  return std::nullopt;
}

Result<void> readable(const std::string& path) {
  if (::access(path.c_str(), R_OK) == 0) return {};
  int e = errno;
  return Error{path + ": " + std::strerror(e), e};
}

Error at(const kubeconfig::Origin& origin, const std::string& message) {
  return Error{"kubeconfig " + origin.file + ": " + message};
}

Result<ExecConfig> interpretExec(const kubeconfig::Exec& e, const kubeconfig::User& user,
                                 const std::string& userName) {
  const std::string path = user.origin.at("exec");
  ExecConfig out;
  if (e.command.empty()) return at(user.origin, path + ".command: not set");
  if (e.apiVersion.empty()) return at(user.origin, path + ".apiVersion: not set");
  if (e.apiVersion != "client.authentication.k8s.io/v1" &&
      e.apiVersion != "client.authentication.k8s.io/v1beta1")
    return at(user.origin, path + ".apiVersion: \"" + e.apiVersion +
                               "\" is not client.authentication.k8s.io/v1 or v1beta1");
  if (e.envNameMissing) return at(user.origin, path + ".env: an entry has no name");
  if (e.interactiveMode.empty()) {
    // client-go defaults it for v1beta1 only.
    if (e.apiVersion == "client.authentication.k8s.io/v1")
      return at(user.origin, path +
                                 ".interactiveMode: not set (Never, IfAvailable or Always; "
                                 "client.authentication.k8s.io/v1 needs it)");
    out.interactiveMode = ExecConfig::Interactive::IfAvailable;
  } else if (e.interactiveMode == "Never") {
    out.interactiveMode = ExecConfig::Interactive::Never;
  } else if (e.interactiveMode == "IfAvailable") {
    out.interactiveMode = ExecConfig::Interactive::IfAvailable;
  } else if (e.interactiveMode == "Always") {
    out.interactiveMode = ExecConfig::Interactive::Always;
  } else {
    return at(user.origin, path + ".interactiveMode: \"" + e.interactiveMode +
                               "\" is not Never, IfAvailable or Always");
  }
  out.apiVersion = e.apiVersion;
  out.command = e.command;
  out.args = e.args;
  out.env = e.env;
  out.installHint = e.installHint;
  out.provideClusterInfo = e.provideClusterInfo;
  out.user = userName;
  return out;
}

Result<void> interpretUser(const kubeconfig::User& u, const std::string& name, ClusterConfig& c) {
  if (u.authProvider)
    return at(u.origin, u.origin.at("auth-provider") +
                            ": auth-provider plugins are not supported (kubectl itself removed "
                            "the gcp and azure ones): use an exec credential plugin instead, "
                            "such as gke-gcloud-auth-plugin (GKE) or kubelogin (Azure, OIDC)");
  if (!u.username.empty() || !u.password.empty())
    return at(u.origin, u.origin.path +
                            ": basic authentication (username/password) is not supported: use a "
                            "token (token, tokenFile), a client certificate or an exec "
                            "credential plugin");
  struct Pair {
    const char* file;
    const char* data;
    const std::string& fileValue;
    const std::optional<std::string>& dataValue;
    std::string* fileOut;
    std::string* dataOut;
  };
  for (const Pair& p : {Pair{"client-certificate", "client-certificate-data", u.clientCertFile,
                             u.clientCertData, &c.clientCertFile, &c.clientCertData},
                        Pair{"client-key", "client-key-data", u.clientKeyFile, u.clientKeyData,
                             &c.clientKeyFile, &c.clientKeyData}}) {
    if (!p.fileValue.empty() && p.dataValue)
      return at(u.origin, u.origin.path + ": " + p.file + " and " + p.data + " are both set");
    if (!p.fileValue.empty()) {
      if (auto ok = readable(p.fileValue); !ok)
        return at(u.origin, u.origin.at(p.file) + ": " + ok.error().message);
    }
    *p.fileOut = p.fileValue;
    *p.dataOut = p.dataValue.value_or("");
  }
  bool hasCert = !c.clientCertData.empty() || !c.clientCertFile.empty();
  bool hasKey = !c.clientKeyData.empty() || !c.clientKeyFile.empty();
  if (hasCert != hasKey)
    return at(u.origin,
              u.origin.path + ": a client certificate needs both the certificate and its key");
  c.token = u.token;
  c.tokenFile = u.tokenFile;
  if (!c.tokenFile.empty()) {
    if (auto ok = readable(c.tokenFile); !ok)
      return at(u.origin, u.origin.at("tokenFile") + ": " + ok.error().message);
  }
  if (u.exec) {
    auto exec = interpretExec(*u.exec, u, name);
    if (!exec) return exec.error();
    // As client-go: a token or a client certificate given with the plugin wins over it.
    if (c.token.empty() && c.tokenFile.empty() && !hasCert) c.exec = std::move(*exec);
  }
  c.impersonateUser = u.impersonate;
  c.impersonateUid = u.impersonateUid;
  c.impersonateGroups = u.impersonateGroups;
  c.impersonateExtra = u.impersonateExtra;
  return {};
}

// The chosen context of a (merged) kubeconfig, validated as kubectl validates it.
Result<ClusterConfig> interpret(const kubeconfig::Config& config, const std::string& label,
                                const std::optional<std::string>& context) {
  std::string contextName = context ? *context : config.currentContext;
  std::string contextSource = (context ? "context \"" : "current-context \"") + contextName + "\"";
  if (contextName.empty())
    return Error{"kubeconfig " + label + ": current-context is not set (and no context given)"};
  auto ctx = config.contexts.find(contextName);
  if (ctx == config.contexts.end())
    return Error{"kubeconfig " + label + ": " + contextSource + ": no such context in contexts"};
  const kubeconfig::Context& x = ctx->second;
  if (x.cluster.empty()) return at(x.origin, x.origin.at("cluster") + ": not set");
  auto cl = config.clusters.find(x.cluster);
  if (cl == config.clusters.end())
    return at(x.origin,
              x.origin.at("cluster") + ": cluster \"" + x.cluster + "\" is not in clusters");
  const kubeconfig::Cluster& k = cl->second;

  ClusterConfig c;
  c.namespaceName = x.namespaceName.empty() ? "default" : x.namespaceName;
  if (k.server.empty()) return at(k.origin, k.origin.at("server") + ": not set");
  if (!k.caFile.empty() && k.caData)
    return at(k.origin, k.origin.path +
                            ": certificate-authority and certificate-authority-data are both set");
  if (!k.caFile.empty()) {
    if (auto ok = readable(k.caFile); !ok)
      return at(k.origin, k.origin.at("certificate-authority") + ": " + ok.error().message);
  }
  c.caFile = k.caFile;
  c.caData = k.caData.value_or("");
  c.insecureSkipTlsVerify = k.insecureSkipTlsVerify;
  if (c.insecureSkipTlsVerify && (k.caData || !c.caFile.empty()))
    return at(
        k.origin,
        k.origin.path + ": insecure-skip-tls-verify with a certificate authority is not allowed");
  c.tlsServerName = k.tlsServerName;
  c.disableCompression = k.disableCompression;
  if (!k.proxyUrl.empty()) {
    if (auto problem = parseProxy(k.proxyUrl, x.cluster, c))
      return at(k.origin, k.origin.at("proxy-url") + ": " + *problem);
  }
  if (!x.user.empty()) {
    auto user = config.users.find(x.user);
    if (user == config.users.end())
      return at(x.origin, x.origin.at("user") + ": user \"" + x.user + "\" is not in users");
    if (auto ok = interpretUser(user->second, x.user, c); !ok) return ok.error();
  }
  bool defaultTls = k.caData || !c.caFile.empty() || c.insecureSkipTlsVerify ||
                    !c.clientCertFile.empty() || !c.clientCertData.empty();
  c.server = k.server;
  if (auto problem = parseServer(k.server, defaultTls, c))
    return at(k.origin, k.origin.at("server") + ": " + *problem);
  if (c.exec && k.execExtension) c.exec->clusterExtension = k.execExtension->dump();
  c.description = "kubeconfig " + label + ", context " + contextName + " (" + serverUrl(c) + ")";
  return c;
}

std::string join(const std::vector<std::string>& files) {
  std::string out;
  for (const auto& f : files) out += (out.empty() ? "" : ":") + f;
  return out;
}

}  // namespace

Result<ClusterConfig> inClusterConfig(const std::string& serviceAccountDir,
                                      const std::function<const char*(const char*)>& getEnv) {
  auto env = [&](const char* name) -> std::string {
    const char* v = getEnv ? getEnv(name) : std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  std::string host = env("KUBERNETES_SERVICE_HOST");
  std::string port = env("KUBERNETES_SERVICE_PORT");
  if (host.empty()) return Error{"not running in a cluster: KUBERNETES_SERVICE_HOST is not set"};
  if (port.empty()) return Error{"not running in a cluster: KUBERNETES_SERVICE_PORT is not set"};
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  ClusterConfig c;
  c.host = host;
  c.port = port;
  c.tls = true;
  c.tokenFile = serviceAccountDir + "/token";
  c.caFile = serviceAccountDir + "/ca.crt";
  auto token = readTrimmedFile(c.tokenFile);
  if (!token) return token.error().withContext("in-cluster service account");
  if (token->empty()) return Error{"in-cluster service account: " + c.tokenFile + " is empty"};
  struct stat st {};
  if (::stat(c.caFile.c_str(), &st) != 0) {
    int e = errno;
    return Error{"in-cluster service account: " + c.caFile + ": " + std::strerror(e), e};
  }
  auto ns = readTrimmedFile(serviceAccountDir + "/namespace");
  c.namespaceName = ns ? *ns : std::string();
  if (c.namespaceName.empty()) c.namespaceName = "default";
  c.server = "https://" + hostForUrl(host) + ":" + port;
  c.description = "in-cluster service account (" + serverUrl(c) + ")";
  return c;
}

Result<ClusterConfig> loadKubeconfig(const std::string& path,
                                     const std::optional<std::string>& context) {
  auto config = kubeconfig::readFile(path);
  if (!config) return config.error().withContext("kubeconfig " + path);
  return interpret(*config, path, context);
}

std::optional<Result<ClusterConfig>> loadKubeconfigList(const std::vector<std::string>& paths,
                                                        const std::optional<std::string>& context) {
  std::optional<kubeconfig::Config> merged;
  for (const std::string& path : paths) {
    if (path.empty()) continue;
    auto config = kubeconfig::readFile(path);
    if (!config) {
      if (config.error().sysErrno == ENOENT) continue;  // as kubectl: skipped
      return Result<ClusterConfig>(config.error().withContext("kubeconfig " + path));
    }
    if (!merged)
      merged = std::move(*config);
    else
      kubeconfig::mergeInto(*merged, std::move(*config));
  }
  if (!merged) return std::nullopt;
  return interpret(*merged, join(merged->files), context);
}

Result<ClusterConfig> resolveClusterConfig(const std::optional<std::string>& kubeconfigFlag,
                                           const ResolveOptions& options) {
  auto env = [&](const char* name) -> std::string {
    const char* v = options.getEnv ? options.getEnv(name) : std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  if (kubeconfigFlag && !kubeconfigFlag->empty())
    return loadKubeconfig(*kubeconfigFlag, options.context);
  std::string looked;
  if (std::string list = env("KUBECONFIG"); !list.empty()) {
    std::vector<std::string> paths;
    std::stringstream in(list);
    for (std::string path; std::getline(in, path, ':');) paths.push_back(path);
    if (auto config = loadKubeconfigList(paths, options.context)) return std::move(*config);
    looked = "no file of $KUBECONFIG (" + list + ") exists";
  } else if (std::string home = env("HOME"); !home.empty()) {
    const std::string path = home + "/.kube/config";
    if (auto config = loadKubeconfigList({path}, options.context)) return std::move(*config);
    looked = "no --kubeconfig, $KUBECONFIG is not set and " + path + " does not exist";
  } else {
    looked = "no --kubeconfig, and neither $KUBECONFIG nor $HOME is set";
  }
  if (!options.inClusterFallback) return Error{"no kubeconfig: " + looked};
  auto inCluster = inClusterConfig(options.serviceAccountDir, options.getEnv);
  if (!inCluster) return inCluster.error().withContext("no kubeconfig (" + looked + ")");
  return inCluster;
}

}  // namespace nodewarden::kube
