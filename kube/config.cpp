#include "kube/config.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string_view>
#include <vector>

#include "kube/yaml.h"
#include "policy/json_reader.h"

namespace nodewarden::kube {

namespace {

using policy::Json;

std::string trimTrailingSpace(std::string s) {
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  return s;
}

Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int e = errno;
    return Error{path + ": " + std::strerror(e != 0 ? e : ENOENT), e};
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return Error{path + ": read error"};
  return out.str();
}

std::string hostForUrl(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

std::string serverUrl(const ClusterConfig& c) {
  return std::string(c.tls ? "https://" : "http://") + hostForUrl(c.host) + ":" + c.port +
         c.basePath;
}

// ---------------------------------------------------------------------------------------

// Go's base64.StdEncoding, as kubeconfig []byte fields are written: padded, line breaks
// ignored. OpenSSL decodes. The scan before it stays because OpenSSL is more lenient than Go
// and names no offset: it skips spaces and tabs, takes data after '=', and stops quietly at
// '-' (the start of a PEM end line).
Result<std::string> decodeBase64(std::string_view in) {
  bool padding = false;
  for (std::size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '\n' || c == '\r') continue;
    if (c == '=') {
      padding = true;
      continue;
    }
    bool alphabet = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '+' || c == '/';
    if (!alphabet || padding) return Error{"invalid base64 at offset " + std::to_string(i)};
  }
  if (in.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) / 2)
    return Error{"invalid base64: too long"};
  std::unique_ptr<EVP_ENCODE_CTX, decltype(&EVP_ENCODE_CTX_free)> ctx(EVP_ENCODE_CTX_new(),
                                                                      &EVP_ENCODE_CTX_free);
  if (!ctx) return Error{"decoding base64: out of memory"};
  EVP_DecodeInit(ctx.get());
  std::string out(in.size() / 4 * 3 + 3, '\0');
  auto* to = reinterpret_cast<unsigned char*>(out.data());
  int decoded = 0;
  int last = 0;
  // EVP_DecodeUpdate returns -1 on bad padding; EVP_DecodeFinal on a partial last group.
  if (EVP_DecodeUpdate(ctx.get(), to, &decoded, reinterpret_cast<const unsigned char*>(in.data()),
                       static_cast<int>(in.size())) < 0 ||
      EVP_DecodeFinal(ctx.get(), to + decoded, &last) < 0)
    return Error{"invalid base64: truncated or bad padding"};
  out.resize(static_cast<std::size_t>(decoded) + static_cast<std::size_t>(last));
  return out;
}

// ---------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------

struct Named {
  const Json* value = nullptr;  // the "cluster" / "context" / "user" member
  std::string path;             // "clusters[0].cluster"
};

Result<Named> findNamed(const Json& root, const char* list, const char* member,
                        const std::string& name) {
  auto it = root.find(list);
  if (it == root.end() || it->is_null()) return Named{};
  if (!it->is_array()) return Error{std::string(list) + ": expected a list"};
  for (std::size_t i = 0; i < it->size(); ++i) {
    const Json& entry = (*it)[i];
    std::string path = std::string(list) + "[" + std::to_string(i) + "]";
    if (!entry.is_object()) return Error{path + ": expected a mapping"};
    auto n = entry.find("name");
    if (n == entry.end() || !n->is_string() || n->get<std::string>() != name) continue;
    auto m = entry.find(member);
    std::string memberPath = path + "." + member;
    if (m == entry.end() || m->is_null()) {
      static const Json kEmpty = Json::object();
      return Named{&kEmpty, memberPath};
    }
    if (!m->is_object()) return Error{memberPath + ": expected a mapping"};
    return Named{&*m, memberPath};
  }
  return Named{};  // not found
}

Result<std::string> optString(const Named& n, const char* key) {
  auto it = n.value->find(key);
  if (it == n.value->end() || it->is_null()) return std::string();
  if (!it->is_string()) return Error{n.path + "." + key + ": expected a string"};
  return it->get<std::string>();
}

Result<bool> optBool(const Named& n, const char* key) {
  auto it = n.value->find(key);
  if (it == n.value->end() || it->is_null()) return false;
  if (it->is_boolean()) return it->get<bool>();
  return Error{n.path + "." + key + ": expected true or false"};
}

std::string resolveAgainst(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return dir + "/" + path;
}

// "https://host:port/prefix" into the config: Boost.URL parses (RFC 3986); the checks are
// what a kubeconfig server may not have (client-go refuses or ignores them too).
std::optional<std::string> parseServer(const std::string& url, ClusterConfig& c) {
  auto parsed = boost::urls::parse_uri(url);
  std::string_view text(url);
  bool https = text.substr(0, 8) == "https://";
  if (!https && text.substr(0, 7) != "http://")
    return "expected an https:// or http:// URL, got \"" + url + "\"";
  // RFC 3986 reads "fd00::1:6443" as a host and an odd port; say what was meant.
  std::string_view authority = text.substr(https ? 8 : 7);
  authority = authority.substr(0, authority.find_first_of("/?#"));
  if (authority.find('[') == std::string_view::npos &&
      std::count(authority.begin(), authority.end(), ':') > 1)
    return "an IPv6 address in a URL must be in brackets ([::1]:6443)";
  if (!parsed) {
    return "invalid server URL \"" + url + "\": " + parsed.error().message();
  }
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
    std::string_view port = u.port();
    if (port.empty()) return "empty port in the server URL";
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535)
      return "bad port in the server URL";
    c.port = std::string(port);
  }
  std::string base(u.encoded_path());
  while (!base.empty() && base.back() == '/') base.pop_back();
  c.basePath = base;
  return std::nullopt;
}

Result<ClusterConfig> interpretKubeconfig(const Json& root, const std::string& path,
                                          const std::optional<std::string>& context) {
  if (!root.is_object()) return Error{"expected a mapping at the top"};
  std::string contextName;
  std::string contextSource;
  if (context) {
    contextName = *context;
    contextSource = "context \"" + contextName + "\"";
  } else {
    auto cc = root.find("current-context");
    if (cc != root.end() && cc->is_string())
      contextName = cc->get<std::string>();
    else if (cc != root.end() && !cc->is_null())
      return Error{"current-context: expected a string"};
    if (contextName.empty()) return Error{"current-context is not set (and no context given)"};
    contextSource = "current-context \"" + contextName + "\"";
  }
  auto ctx = findNamed(root, "contexts", "context", contextName);
  if (!ctx) return ctx.error();
  if (ctx->value == nullptr) return Error{contextSource + ": no such context in contexts"};

  ClusterConfig c;
  auto clusterName = optString(*ctx, "cluster");
  if (!clusterName) return clusterName.error();
  auto userName = optString(*ctx, "user");
  if (!userName) return userName.error();
  auto ns = optString(*ctx, "namespace");
  if (!ns) return ns.error();
  c.namespaceName = ns->empty() ? "default" : *ns;
  if (clusterName->empty()) return Error{ctx->path + ".cluster: not set"};

  std::string dir = ".";
  if (auto slash = path.rfind('/'); slash != std::string::npos)
    dir = slash == 0 ? std::string("/") : path.substr(0, slash);
  if (dir == "/") dir = "";

  auto cluster = findNamed(root, "clusters", "cluster", *clusterName);
  if (!cluster) return cluster.error();
  if (cluster->value == nullptr)
    return Error{ctx->path + ".cluster: cluster \"" + *clusterName + "\" is not in clusters"};
  auto server = optString(*cluster, "server");
  if (!server) return server.error();
  if (server->empty()) return Error{cluster->path + ".server: not set"};
  if (auto problem = parseServer(*server, c)) return Error{cluster->path + ".server: " + *problem};
  auto caFile = optString(*cluster, "certificate-authority");
  if (!caFile) return caFile.error();
  auto caData = optString(*cluster, "certificate-authority-data");
  if (!caData) return caData.error();
  if (!caFile->empty() && !caData->empty())
    return Error{cluster->path +
                 ": certificate-authority and certificate-authority-data are both set"};
  if (!caData->empty()) {
    auto decoded = decodeBase64(*caData);
    if (!decoded) return decoded.error().withContext(cluster->path + ".certificate-authority-data");
    c.caData = std::move(*decoded);
  }
  c.caFile = resolveAgainst(dir, *caFile);
  auto insecure = optBool(*cluster, "insecure-skip-tls-verify");
  if (!insecure) return insecure.error();
  c.insecureSkipTlsVerify = *insecure;
  if (c.insecureSkipTlsVerify && (!c.caData.empty() || !c.caFile.empty()))
    return Error{cluster->path +
                 ": insecure-skip-tls-verify with a certificate authority is not allowed"};
  auto serverName = optString(*cluster, "tls-server-name");
  if (!serverName) return serverName.error();
  c.tlsServerName = *serverName;
  if (cluster->value->contains("proxy-url"))
    return Error{cluster->path + ".proxy-url: proxies are not supported"};

  if (!userName->empty()) {
    auto user = findNamed(root, "users", "user", *userName);
    if (!user) return user.error();
    if (user->value == nullptr)
      return Error{ctx->path + ".user: user \"" + *userName + "\" is not in users"};
    if (user->value->contains("exec"))
      return Error{user->path + ".exec: exec credential plugins are not supported"};
    if (user->value->contains("auth-provider"))
      return Error{user->path + ".auth-provider: auth-provider plugins are not supported"};
    if (user->value->contains("username") || user->value->contains("password"))
      return Error{user->path + ": basic authentication (username/password) is not supported"};
    auto token = optString(*user, "token");
    if (!token) return token.error();
    c.token = *token;
    auto tokenFile = optString(*user, "tokenFile");
    if (!tokenFile) return tokenFile.error();
    c.tokenFile = resolveAgainst(dir, *tokenFile);
    struct Pair {
      const char* file;
      const char* data;
      std::string* fileOut;
      std::string* dataOut;
    };
    for (const Pair& p :
         {Pair{"client-certificate", "client-certificate-data", &c.clientCertFile,
               &c.clientCertData},
          Pair{"client-key", "client-key-data", &c.clientKeyFile, &c.clientKeyData}}) {
      auto file = optString(*user, p.file);
      if (!file) return file.error();
      auto data = optString(*user, p.data);
      if (!data) return data.error();
      if (!file->empty() && !data->empty())
        return Error{user->path + ": " + p.file + " and " + p.data + " are both set"};
      if (!data->empty()) {
        auto decoded = decodeBase64(*data);
        if (!decoded) return decoded.error().withContext(user->path + "." + p.data);
        *p.dataOut = std::move(*decoded);
      }
      *p.fileOut = resolveAgainst(dir, *file);
    }
    bool hasCert = !c.clientCertData.empty() || !c.clientCertFile.empty();
    bool hasKey = !c.clientKeyData.empty() || !c.clientKeyFile.empty();
    if (hasCert != hasKey)
      return Error{user->path + ": a client certificate needs both the certificate and its key"};
  }
  c.description = "kubeconfig " + path + ", context " + contextName + " (" + serverUrl(c) + ")";
  return c;
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
  auto token = readFile(c.tokenFile);
  if (!token) return token.error().withContext("in-cluster service account");
  if (trimTrailingSpace(*token).empty())
    return Error{"in-cluster service account: " + c.tokenFile + " is empty"};
  struct stat st {};
  if (::stat(c.caFile.c_str(), &st) != 0) {
    int e = errno;
    return Error{"in-cluster service account: " + c.caFile + ": " + std::strerror(e), e};
  }
  auto ns = readFile(serviceAccountDir + "/namespace");
  c.namespaceName = ns ? trimTrailingSpace(*ns) : std::string();
  if (c.namespaceName.empty()) c.namespaceName = "default";
  c.description = "in-cluster service account (" + serverUrl(c) + ")";
  return c;
}

Result<ClusterConfig> loadKubeconfig(const std::string& path,
                                     const std::optional<std::string>& context) {
  std::string label = "kubeconfig " + path;
  auto text = readFile(path);
  if (!text) {
    int e = text.error().sysErrno != 0 ? text.error().sysErrno : EIO;
    return Error{label + ": " + std::strerror(e), e};
  }
  Json root;
  std::size_t first = text->find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (*text)[first] == '{') {
    policy::Diagnostics diagnostics;
    auto parsed = policy::parseJsonText(*text, diagnostics);
    if (!parsed) return Error{label + ": " + diagnostics.joined()};
    root = std::move(*parsed);
  } else {
    // kubectl's subset, as before yaml-cpp read it: a kubeconfig written otherwise was
    // written by hand, and a refusal with its line is clearer than a surprise.
    YamlOptions options;
    options.kubectlSubset = true;
    options.untypedScalars = true;
    auto parsed = readYamlDocuments(*text, options);
    if (!parsed) return parsed.error().withContext(label);
    root = parsed->empty() ? Json::object() : std::move(parsed->front());
  }
  auto config = interpretKubeconfig(root, path, context);
  if (!config) return config.error().withContext(label);
  return config;
}

Result<ClusterConfig> resolveClusterConfig(const std::optional<std::string>& kubeconfigFlag) {
  if (kubeconfigFlag && !kubeconfigFlag->empty()) return loadKubeconfig(*kubeconfigFlag);
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr) {
    std::string_view list(env);
    while (!list.empty()) {
      std::size_t colon = list.find(':');
      std::string_view first = list.substr(0, colon);
      if (!first.empty()) return loadKubeconfig(std::string(first));
      if (colon == std::string_view::npos) break;
      list.remove_prefix(colon + 1);
    }
  }
  return inClusterConfig();
}

TokenSource::TokenSource(const ClusterConfig& config)
    : fixed_(config.token), file_(config.tokenFile), token_(config.token) {}

const std::string& TokenSource::token() {
  if (file_.empty()) return token_;
  auto now = std::chrono::steady_clock::now();
  if (!force_ && now - lastCheck_ < std::chrono::seconds(1)) return token_;
  lastCheck_ = now;
  bool forced = force_;
  force_ = false;
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0) {
    int e = errno;
    problem_ = "token file " + file_ + ": " + std::strerror(e);
    return token_;
  }
  std::int64_t mtime =
      static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (!forced && problem_.empty() && static_cast<std::uint64_t>(st.st_ino) == inode_ &&
      static_cast<std::int64_t>(st.st_size) == size_ && mtime == mtimeNanos_)
    return token_;
  auto text = readFile(file_);
  if (!text) {
    problem_ = "token file " + text.error().message;
    return token_;
  }
  std::string fresh = trimTrailingSpace(std::move(*text));
  if (fresh.empty()) {
    problem_ = "token file " + file_ + " is empty";
    return token_;
  }
  token_ = std::move(fresh);
  problem_.clear();
  inode_ = static_cast<std::uint64_t>(st.st_ino);
  size_ = static_cast<std::int64_t>(st.st_size);
  mtimeNanos_ = mtime;
  return token_;
}

void TokenSource::invalidate() {
  force_ = true;
}

}  // namespace nodewarden::kube
