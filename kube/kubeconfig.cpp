#include "kube/kubeconfig.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <sstream>

#include "kube/yaml.h"

namespace nodewarden::kube::kubeconfig {

namespace {

using policy::Json;

Result<std::string> readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int e = errno != 0 ? errno : ENOENT;
    return Error{std::strerror(e), e};
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return Error{"read error", EIO};
  return out.str();
}

// JSON, or YAML as kubectl reads it (go-yaml v2: YAML 1.1 scalars, anchors, merge keys, the
// last of duplicate keys, the first document). A file that starts with '{' is tried as JSON
// first: flow-style YAML starts so too.
Result<Json> parseText(const std::string& text) {
  std::size_t first = text.find_first_not_of(" \t\r\n");
  std::optional<Error> jsonError;
  if (first != std::string::npos && text[first] == '{') {
    policy::Diagnostics diagnostics;
    auto parsed = policy::parseJsonText(text, diagnostics);
    if (parsed) return std::move(*parsed);
    jsonError = Error{diagnostics.joined()};
  }
  YamlOptions options;
  options.scalars = YamlScalars::GoYaml;
  options.aliases = true;
  options.lastDuplicateKeyWins = true;
  options.firstDocumentOnly = true;
  auto parsed = readYamlDocuments(text, options);
  if (!parsed) {
    if (jsonError)
      return Error{jsonError->message + " (and as YAML, " + parsed.error().message + ")"};
    return parsed.error();
  }
  if (parsed->empty() || parsed->front().is_null()) return Json::object();
  return std::move(parsed->front());
}

std::string kindOf(const Json& value) {
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number()) return "a number";
  if (value.is_array()) return "a list";
  if (value.is_object()) return "a mapping";
  return "null";
}

Error expected(const std::string& path, const char* what, const Json& got) {
  std::string message = path + ": expected " + what + ", got " + kindOf(got);
  // A plain `token: 12345` or `name: yes` is a number or a boolean to kubectl's YAML reader.
  if (std::string_view(what) == "a string" && (got.is_number() || got.is_boolean()))
    message += " (quote it to make it a string)";
  return Error{message};
}

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

// The members of one mapping, each read as the Go type kubectl decodes it into; absent and
// null members are the zero value.
class Fields {
 public:
  Fields(const Json& object, std::string path) : object_(object), path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  std::string at(const char* key) const { return path_ + "." + key; }
  const Json* find(const char* key) const {
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  Result<std::string> string(const char* key) const {
    const Json* v = find(key);
    if (v == nullptr) return std::string();
    if (!v->is_string()) return expected(at(key), "a string", *v);
    return v->get<std::string>();
  }
  Result<bool> boolean(const char* key) const {
    const Json* v = find(key);
    if (v == nullptr) return false;
    if (!v->is_boolean()) return expected(at(key), "true or false", *v);
    return v->get<bool>();
  }
  Result<std::optional<std::string>> bytes(const char* key) const {
    auto text = string(key);
    if (!text) return text.error();
    if (find(key) == nullptr) return std::optional<std::string>();
    auto decoded = decodeBase64(*text);
    if (!decoded) return decoded.error().withContext(at(key));
    return std::optional<std::string>(std::move(*decoded));
  }
  Result<std::vector<std::string>> strings(const char* key) const {
    std::vector<std::string> out;
    const Json* v = find(key);
    if (v == nullptr) return out;
    if (!v->is_array()) return expected(at(key), "a list of strings", *v);
    for (std::size_t i = 0; i < v->size(); ++i) {
      const Json& item = (*v)[i];
      if (item.is_null()) {
        out.emplace_back();
        continue;
      }
      if (!item.is_string())
        return expected(at(key) + "[" + std::to_string(i) + "]", "a string", item);
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  // A mapping member as Fields, or nullopt when absent; an error when not a mapping.
  Result<std::optional<Fields>> mapping(const char* key) const {
    const Json* v = find(key);
    if (v == nullptr) return std::optional<Fields>();
    if (!v->is_object()) return expected(at(key), "a mapping", *v);
    return std::optional<Fields>(Fields(*v, at(key)));
  }

 private:
  const Json& object_;
  std::string path_;
};

#define NW_TRY(var, expr)                       \
  auto var##Result = (expr);                    \
  if (!var##Result) return var##Result.error(); \
  auto var = std::move(*var##Result)

// As kubectl's filepath.Join: relative to the kubeconfig's directory, and cleaned.
std::string resolveAgainst(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return (std::filesystem::path(dir) / path).lexically_normal().string();
}

// A list of {name: N, <member>: {...}} entries, each decoded by `decode` (given its Fields,
// or null ones for a missing member). Names must be unique in the list.
template <typename T, typename Decode>
Result<std::map<std::string, T>> namedList(const Fields& top, const char* list, const char* member,
                                           Decode&& decode) {
  std::map<std::string, T> out;
  const Json* v = top.find(list);
  if (v == nullptr) return out;
  if (!v->is_array()) return expected(list, "a list", *v);
  static const Json kEmpty = Json::object();
  for (std::size_t i = 0; i < v->size(); ++i) {
    const std::string path = std::string(list) + "[" + std::to_string(i) + "]";
    const Json& entry = (*v)[i];
    if (entry.is_null()) continue;
    if (!entry.is_object()) return expected(path, "a mapping", entry);
    Fields fields(entry, path);
    NW_TRY(name, fields.string("name"));
    NW_TRY(inner, fields.mapping(member));
    NW_TRY(value, decode(inner ? *inner : Fields(kEmpty, fields.at(member))));
    if (out.count(name) != 0) return Error{path + ".name: \"" + name + "\" is already in " + list};
    out.emplace(name, std::move(value));
  }
  return out;
}

Result<Cluster> decodeCluster(const Fields& f, const std::string& dir) {
  Cluster c;
  c.origin.path = f.path();
  NW_TRY(server, f.string("server"));
  NW_TRY(serverName, f.string("tls-server-name"));
  NW_TRY(insecure, f.boolean("insecure-skip-tls-verify"));
  NW_TRY(caFile, f.string("certificate-authority"));
  NW_TRY(caData, f.bytes("certificate-authority-data"));
  NW_TRY(proxy, f.string("proxy-url"));
  NW_TRY(noCompression, f.boolean("disable-compression"));
  c.server = std::move(server);
  c.tlsServerName = std::move(serverName);
  c.insecureSkipTlsVerify = insecure;
  c.caFile = resolveAgainst(dir, caFile);
  c.caData = std::move(caData);
  c.proxyUrl = std::move(proxy);
  c.disableCompression = noCompression;
  // Extensions are free-form: only their names are checked, and the exec one kept whole.
  if (const Json* list = f.find("extensions")) {
    if (!list->is_array()) return expected(f.at("extensions"), "a list", *list);
    for (const Json& entry : *list) {
      if (!entry.is_object()) continue;
      auto name = entry.find("name");
      auto extension = entry.find("extension");
      if (name != entry.end() && *name == "client.authentication.k8s.io/exec" &&
          extension != entry.end())
        c.execExtension = *extension;
    }
  }
  return c;
}

Result<Exec> decodeExec(const Fields& f, const std::string& dir) {
  Exec e;
  NW_TRY(command, f.string("command"));
  NW_TRY(args, f.strings("args"));
  NW_TRY(apiVersion, f.string("apiVersion"));
  NW_TRY(hint, f.string("installHint"));
  NW_TRY(clusterInfo, f.boolean("provideClusterInfo"));
  NW_TRY(mode, f.string("interactiveMode"));
  // kubectl resolves a command against the kubeconfig's directory only when it names a path.
  e.command = command.find('/') != std::string::npos ? resolveAgainst(dir, command) : command;
  e.args = std::move(args);
  e.apiVersion = std::move(apiVersion);
  e.installHint = std::move(hint);
  e.provideClusterInfo = clusterInfo;
  e.interactiveMode = std::move(mode);
  if (const Json* env = f.find("env")) {
    if (!env->is_array()) return expected(f.at("env"), "a list", *env);
    for (std::size_t i = 0; i < env->size(); ++i) {
      const std::string path = f.at("env") + "[" + std::to_string(i) + "]";
      if (!(*env)[i].is_object()) return expected(path, "a mapping", (*env)[i]);
      Fields var((*env)[i], path);
      NW_TRY(name, var.string("name"));
      NW_TRY(value, var.string("value"));
      if (name.empty()) e.envNameMissing = true;
      e.env.emplace_back(std::move(name), std::move(value));
    }
  }
  return e;
}

Result<User> decodeUser(const Fields& f, const std::string& dir) {
  User u;
  u.origin.path = f.path();
  NW_TRY(certFile, f.string("client-certificate"));
  NW_TRY(certData, f.bytes("client-certificate-data"));
  NW_TRY(keyFile, f.string("client-key"));
  NW_TRY(keyData, f.bytes("client-key-data"));
  NW_TRY(token, f.string("token"));
  NW_TRY(tokenFile, f.string("tokenFile"));
  NW_TRY(as, f.string("as"));
  NW_TRY(asUid, f.string("as-uid"));
  NW_TRY(asGroups, f.strings("as-groups"));
  NW_TRY(username, f.string("username"));
  NW_TRY(password, f.string("password"));
  u.clientCertFile = resolveAgainst(dir, certFile);
  u.clientCertData = std::move(certData);
  u.clientKeyFile = resolveAgainst(dir, keyFile);
  u.clientKeyData = std::move(keyData);
  u.token = std::move(token);
  u.tokenFile = resolveAgainst(dir, tokenFile);
  u.impersonate = std::move(as);
  u.impersonateUid = std::move(asUid);
  u.impersonateGroups = std::move(asGroups);
  u.username = std::move(username);
  u.password = std::move(password);
  NW_TRY(extra, f.mapping("as-user-extra"));
  if (extra) {
    const Json* object = f.find("as-user-extra");
    for (const auto& [key, value] : object->items()) {
      NW_TRY(values, extra->strings(key.c_str()));
      u.impersonateExtra.emplace_back(key, std::move(values));
    }
  }
  NW_TRY(provider, f.mapping("auth-provider"));
  if (provider) {
    NW_TRY(name, provider->string("name"));
    u.authProvider = std::move(name);
  }
  NW_TRY(exec, f.mapping("exec"));
  if (exec) {
    NW_TRY(decoded, decodeExec(*exec, dir));
    u.exec = std::move(decoded);
  }
  return u;
}

Result<Context> decodeContext(const Fields& f) {
  Context c;
  c.origin.path = f.path();
  NW_TRY(cluster, f.string("cluster"));
  NW_TRY(user, f.string("user"));
  NW_TRY(ns, f.string("namespace"));
  c.cluster = std::move(cluster);
  c.user = std::move(user);
  c.namespaceName = std::move(ns);
  return c;
}

Result<Config> decode(const Json& root, const std::string& path) {
  if (!root.is_object()) return expected("the document", "a mapping", root);
  Fields top(root, "");
  std::string dir = ".";
  if (auto slash = path.rfind('/'); slash != std::string::npos)
    dir = slash == 0 ? std::string("/") : path.substr(0, slash);
  NW_TRY(apiVersion, top.string("apiVersion"));
  NW_TRY(kind, top.string("kind"));
  if (!apiVersion.empty() && apiVersion != "v1")
    return Error{"apiVersion: \"" + apiVersion + "\" is not a kubeconfig version (v1)"};
  if (!kind.empty() && kind != "Config")
    return Error{"kind: \"" + kind + "\" is not a kubeconfig (kind Config)"};
  Config config;
  config.files.push_back(path);
  NW_TRY(current, top.string("current-context"));
  config.currentContext = std::move(current);
  NW_TRY(clusters, namedList<Cluster>(top, "clusters", "cluster",
                                      [&](const Fields& f) { return decodeCluster(f, dir); }));
  NW_TRY(users, namedList<User>(top, "users", "user",
                                [&](const Fields& f) { return decodeUser(f, dir); }));
  NW_TRY(contexts, namedList<Context>(top, "contexts", "context", decodeContext));
  for (auto& [name, c] : clusters) c.origin.file = path;
  for (auto& [name, u] : users) u.origin.file = path;
  for (auto& [name, c] : contexts) c.origin.file = path;
  config.clusters = std::move(clusters);
  config.users = std::move(users);
  config.contexts = std::move(contexts);
  return config;
}

#undef NW_TRY

}  // namespace

Result<Config> readFile(const std::string& path) {
  auto text = readText(path);
  if (!text) return text.error();
  auto root = parseText(*text);
  if (!root) return root.error();
  return decode(*root, path);
}

void mergeInto(Config& into, Config next) {
  into.files.insert(into.files.end(), next.files.begin(), next.files.end());
  if (into.currentContext.empty()) into.currentContext = std::move(next.currentContext);
  // std::map::insert keeps what is there: the first file to set a name wins.
  into.clusters.insert(std::make_move_iterator(next.clusters.begin()),
                       std::make_move_iterator(next.clusters.end()));
  into.users.insert(std::make_move_iterator(next.users.begin()),
                    std::make_move_iterator(next.users.end()));
  into.contexts.insert(std::make_move_iterator(next.contexts.begin()),
                       std::make_move_iterator(next.contexts.end()));
}

}  // namespace nodewarden::kube::kubeconfig
