// kube/config: in-cluster configuration, kubeconfig files (YAML as kubectl writes them, and
// JSON) with every refusal's exact message, and the rotating token source.
#include "tests/support/temp_dir.h"
#include "kube/config.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

namespace fs = std::filesystem;
using nodewarden::kube::ClusterConfig;
using nodewarden::kube::inClusterConfig;
using nodewarden::kube::loadKubeconfig;
using nodewarden::kube::resolveClusterConfig;
using nodewarden::kube::TokenSource;

using nodewarden::testing::TempDir;

namespace {


std::string base64(const std::string& in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                 (static_cast<unsigned char>(in[i + 1]) << 8) |
                 static_cast<unsigned char>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (in.size() - i == 1) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (in.size() - i == 2) {
    unsigned v =
        (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

const std::string kCaPem =
    "-----BEGIN "
    "CERTIFICATE-----\nMIIC/jCCAeagAwIBAgIBADANBgkqhkiG9w0BAQsFADAVMRMwEQYDVQQDEwprdWJl\n"
    "-----END CERTIFICATE-----\n";
const std::string kCertPem =
    "-----BEGIN CERTIFICATE-----\nMIIDITCCAgmgAwIBAgIIQ2xpZW50Q2VydA==\n-----END "
    "CERTIFICATE-----\n";
const std::string kKeyPem =
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx2c=\n-----END RSA PRIVATE KEY-----\n";

// What `kubeadm init` writes to /etc/kubernetes/admin.conf.
std::string adminConf() {
  return "apiVersion: v1\n"
         "clusters:\n"
         "- cluster:\n"
         "    certificate-authority-data: " +
         base64(kCaPem) +
         "\n"
         "    server: https://192.168.1.10:6443\n"
         "  name: kubernetes\n"
         "contexts:\n"
         "- context:\n"
         "    cluster: kubernetes\n"
         "    user: kubernetes-admin\n"
         "  name: kubernetes-admin@kubernetes\n"
         "current-context: kubernetes-admin@kubernetes\n"
         "kind: Config\n"
         "preferences: {}\n"
         "users:\n"
         "- name: kubernetes-admin\n"
         "  user:\n"
         "    client-certificate-data: " +
         base64(kCertPem) +
         "\n"
         "    client-key-data: " +
         base64(kKeyPem) + "\n";
}

}  // namespace

TEST_CASE("in-cluster: host, port, token file, CA and namespace from the service account") {
  TempDir dir;
  dir.write("token", "eyJhbGciOi.token\n");
  dir.write("ca.crt", kCaPem);
  dir.write("namespace", "kube-system\n");
  std::map<std::string, std::string> env = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                            {"KUBERNETES_SERVICE_PORT", "443"}};
  auto getEnv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto config = inClusterConfig(dir.path.string(), getEnv);
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  CHECK(config->host == "10.96.0.1");
  CHECK(config->port == "443");
  CHECK(config->tls);
  CHECK(config->tokenFile == (dir.path / "token").string());
  CHECK(config->token.empty());
  CHECK(config->caFile == (dir.path / "ca.crt").string());
  CHECK(config->namespaceName == "kube-system");
  CHECK(config->description == "in-cluster service account (https://10.96.0.1:443)");

  SUBCASE("an IPv6 service host is bracketed in the description only") {
    env["KUBERNETES_SERVICE_HOST"] = "fd00:10:96::1";
    auto v6 = inClusterConfig(dir.path.string(), getEnv);
    REQUIRE(v6.ok());
    CHECK(v6->host == "fd00:10:96::1");
    CHECK(v6->description == "in-cluster service account (https://[fd00:10:96::1]:443)");
  }
  SUBCASE("missing host") {
    env.erase("KUBERNETES_SERVICE_HOST");
    auto missing = inClusterConfig(dir.path.string(), getEnv);
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().message ==
          "not running in a cluster: KUBERNETES_SERVICE_HOST is not set");
  }
  SUBCASE("missing port") {
    env.erase("KUBERNETES_SERVICE_PORT");
    auto missing = inClusterConfig(dir.path.string(), getEnv);
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().message ==
          "not running in a cluster: KUBERNETES_SERVICE_PORT is not set");
  }
  SUBCASE("missing token") {
    fs::remove(dir.path / "token");
    auto missing = inClusterConfig(dir.path.string(), getEnv);
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().message ==
          "in-cluster service account: " + (dir.path / "token").string() +
              ": No such file or directory");
  }
  SUBCASE("no namespace file: default") {
    fs::remove(dir.path / "namespace");
    auto noNs = inClusterConfig(dir.path.string(), getEnv);
    REQUIRE(noNs.ok());
    CHECK(noNs->namespaceName == "default");
  }
}

TEST_CASE("kubeconfig: kubeadm admin.conf with embedded certificates") {
  TempDir dir;
  std::string path = dir.write("admin.conf", adminConf());
  auto config = loadKubeconfig(path);
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  CHECK(config->host == "192.168.1.10");
  CHECK(config->port == "6443");
  CHECK(config->tls);
  CHECK(config->basePath.empty());
  CHECK(config->caData == kCaPem);
  CHECK(config->caFile.empty());
  CHECK(config->clientCertData == kCertPem);
  CHECK(config->clientKeyData == kKeyPem);
  CHECK(config->token.empty());
  CHECK(config->tokenFile.empty());
  CHECK_FALSE(config->insecureSkipTlsVerify);
  CHECK(config->namespaceName == "default");
  CHECK(config->description == "kubeconfig " + path +
                                   ", context kubernetes-admin@kubernetes "
                                   "(https://192.168.1.10:6443)");
}

TEST_CASE("kubeconfig: kubelet.conf with certificate files, relative paths resolved") {
  TempDir dir;
  std::string path =
      dir.write("etc/kubelet.conf",
                "apiVersion: v1\n"
                "clusters:\n"
                "- cluster:\n"
                "    certificate-authority: pki/ca.crt\n"
                "    server: https://cp.example.com:6443\n"
                "  name: default-cluster\n"
                "contexts:\n"
                "- context:\n"
                "    cluster: default-cluster\n"
                "    namespace: default\n"
                "    user: default-auth\n"
                "  name: default-context\n"
                "current-context: default-context\n"
                "kind: Config\n"
                "preferences: {}\n"
                "users:\n"
                "- name: default-auth\n"
                "  user:\n"
                "    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n"
                "    client-key: ../keys/kubelet.key\n");
  auto config = loadKubeconfig(path);
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  std::string base = (dir.path / "etc").string();
  CHECK(config->host == "cp.example.com");
  CHECK(config->caFile == base + "/pki/ca.crt");
  CHECK(config->clientCertFile == "/var/lib/kubelet/pki/kubelet-client-current.pem");
  CHECK(config->clientKeyFile == base + "/../keys/kubelet.key");
  CHECK(config->caData.empty());
}

TEST_CASE("kubeconfig: token and tokenFile users, --context selection, comments and quoting") {
  TempDir dir;
  std::string path = dir.write("config",
                               "# written by hand\n"
                               "apiVersion: v1\n"
                               "kind: Config\n"
                               "current-context: prod\n"
                               "clusters:\n"
                               "  - name: prod-cluster   # indented sequence, as some tools write\n"
                               "    cluster:\n"
                               "      server: \"https://[fd00::1]:8443/k8s/clusters/c-1/\"\n"
                               "      insecure-skip-tls-verify: true\n"
                               "  - name: 'dev cluster'\n"
                               "    cluster:\n"
                               "      server: http://127.0.0.1\n"
                               "      tls-server-name: kubernetes.default.svc\n"
                               "contexts:\n"
                               "- name: prod\n"
                               "  context:\n"
                               "    cluster: prod-cluster\n"
                               "    user: robot\n"
                               "    namespace: team-a\n"
                               "- name: dev\n"
                               "  context: {cluster: x}\n"
                               "- name: dev2\n"
                               "  context:\n"
                               "    cluster: dev cluster\n"
                               "    user: file-user\n"
                               "users:\n"
                               "- name: robot\n"
                               "  user:\n"
                               "    token: 'abc''def'\n"
                               "- name: file-user\n"
                               "  user:\n"
                               "    tokenFile: secrets/token\n");

  SUBCASE("current context: fixed token, IPv6 server with a path prefix") {
    auto config = loadKubeconfig(path);
    REQUIRE(!config.ok());  // the "dev" context's flow mapping is refused even when unused
    CHECK(config.error().message ==
          "kubeconfig " + path + ": line 21: flow collections are not supported (only {} and [])");
  }

  // Without the refused flow mapping.
  std::string text;
  {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      if (line == "- name: dev" || line == "  context: {cluster: x}") continue;
      text += line + "\n";
    }
  }
  path = dir.write("config", text);

  SUBCASE("current context") {
    auto config = loadKubeconfig(path);
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    CHECK(config->host == "fd00::1");
    CHECK(config->port == "8443");
    CHECK(config->basePath == "/k8s/clusters/c-1");
    CHECK(config->insecureSkipTlsVerify);
    CHECK(config->token == "abc'def");
    CHECK(config->tokenFile.empty());
    CHECK(config->namespaceName == "team-a");
    CHECK(config->description ==
          "kubeconfig " + path + ", context prod (https://[fd00::1]:8443/k8s/clusters/c-1)");
  }
  SUBCASE("--context dev2: plain http on port 80, tokenFile relative to the kubeconfig") {
    auto config = loadKubeconfig(path, std::string("dev2"));
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    CHECK(config->host == "127.0.0.1");
    CHECK(config->port == "80");
    CHECK_FALSE(config->tls);
    CHECK(config->tlsServerName == "kubernetes.default.svc");
    CHECK(config->tokenFile == (dir.path / "secrets/token").string());
    CHECK(config->token.empty());
    CHECK(config->namespaceName == "default");
  }
  SUBCASE("--context that does not exist") {
    auto config = loadKubeconfig(path, std::string("nope"));
    REQUIRE_FALSE(config.ok());
    CHECK(config.error().message ==
          "kubeconfig " + path + ": context \"nope\": no such context in contexts");
  }
}

TEST_CASE("kubeconfig: a JSON document") {
  TempDir dir;
  std::string path = dir.write("config.json", R"({
    "apiVersion": "v1", "kind": "Config", "current-context": "c",
    "clusters": [{"name": "k", "cluster": {"server": "https://10.0.0.1",
                  "certificate-authority-data": ")" +
                                                  base64(kCaPem) + R"("}}],
    "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    "users": [{"name": "u", "user": {"token": "json-token"}}]
  })");
  auto config = loadKubeconfig(path);
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  CHECK(config->host == "10.0.0.1");
  CHECK(config->port == "443");
  CHECK(config->caData == kCaPem);
  CHECK(config->token == "json-token");
}

TEST_CASE("kubeconfig: every refusal names the file and the place inside it") {
  TempDir dir;
  std::string admin = adminConf();
  auto load = [&](const std::string& text) {
    std::string path = dir.write("config", text);
    auto config = loadKubeconfig(path);
    REQUIRE_FALSE(config.ok());
    std::string prefix = "kubeconfig " + path + ": ";
    REQUIRE(config.error().message.substr(0, prefix.size()) == prefix);
    return config.error().message.substr(prefix.size());
  };
  auto replace = [](std::string text, const std::string& from, const std::string& to) {
    auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };

  CHECK(load(replace(admin, "current-context: kubernetes-admin@kubernetes",
                     "current-context: gone")) ==
        "current-context \"gone\": no such context in contexts");
  CHECK(load(replace(admin, "current-context: kubernetes-admin@kubernetes\n", "")) ==
        "current-context is not set (and no context given)");
  CHECK(load(replace(admin, "    client-certificate-data",
                     "    exec:\n"
                     "      apiVersion: client.authentication.k8s.io/v1\n"
                     "      command: aws\n"
                     "      args:\n"
                     "      - eks\n"
                     "    client-certificate-data")) ==
        "users[0].user.exec: exec credential plugins are not supported");
  CHECK(load(replace(admin, "    client-certificate-data",
                     "    auth-provider:\n      name: oidc\n    client-certificate-data")) ==
        "users[0].user.auth-provider: auth-provider plugins are not supported");
  CHECK(load(replace(admin, "client-key-data: ", "client-key-data: !!notbase64")) ==
        "line 19: tags are not supported");
  CHECK(load(replace(admin, "client-key-data: ", "client-key-data: a%b")) ==
        "users[0].user.client-key-data: invalid base64 at offset 1");
  CHECK(load(replace(admin, "client-key-data: " + base64(kKeyPem), "client-key-data: QUJDRA")) ==
        "users[0].user.client-key-data: invalid base64: truncated or bad padding");
  CHECK(load(replace(admin, "    server: https", "\tserver: https")) ==
        "line 5: tabs are not allowed for indentation");
  CHECK(load(admin + "---\napiVersion: v1\n") ==
        "line 20: multiple YAML documents are not supported");
  CHECK(load(replace(admin, "  name: kubernetes\n", "  name: &anchor kubernetes\n")) ==
        "line 6: anchors and aliases are not supported");
  CHECK(load(replace(admin, "kind: Config", "kind: |\n  Config")) ==
        "line 13: block scalars are not supported");
  CHECK(load(replace(admin, "kind: Config", "kind: Config\n  more: text")) ==
        "line 14: multi-line scalars are not supported");
  CHECK(load(replace(admin, "kind: Config", "kind: \"Config")) ==
        "line 13: multi-line quoted scalars are not supported");
  CHECK(load(replace(admin, "kind: Config", "kind: Config\nkind: Config")) ==
        "line 14: duplicate key \"kind\"");
  CHECK(load(replace(admin, "https://192.168.1.10:6443", "ftp://192.168.1.10")) ==
        "clusters[0].cluster.server: expected an https:// or http:// URL, got "
        "\"ftp://192.168.1.10\"");
  CHECK(load(replace(admin, "https://192.168.1.10:6443", "https://fd00::1:6443")) ==
        "clusters[0].cluster.server: an IPv6 address in a URL must be in brackets ([::1]:6443)");
  CHECK(load(replace(admin, "    cluster: kubernetes\n", "    cluster: other\n")) ==
        "contexts[0].context.cluster: cluster \"other\" is not in clusters");
  CHECK(load(replace(admin, "    user: kubernetes-admin\n", "    user: nobody\n")) ==
        "contexts[0].context.user: user \"nobody\" is not in users");
  CHECK(load(replace(admin, "    server:", "    insecure-skip-tls-verify: true\n    server:")) ==
        "clusters[0].cluster: insecure-skip-tls-verify with a certificate authority is not "
        "allowed");
  CHECK(load("{\"apiVersion\": \"v1\",\n \"clusters\": [}") ==
        "invalid JSON at line 2, column 15: syntax error while parsing value - unexpected '}'; "
        "expected '[', '{', or a literal");

  auto missing = loadKubeconfig((dir.path / "absent").string());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message ==
        "kubeconfig " + (dir.path / "absent").string() + ": No such file or directory");
}

TEST_CASE("resolveClusterConfig: --kubeconfig, then $KUBECONFIG's first file, then in-cluster") {
  TempDir dir;
  std::string admin = dir.write("admin.conf", adminConf());
  std::string other = dir.write("other.conf", "current-context: x\n");
  const char* saved = std::getenv("KUBECONFIG");
  std::string savedValue = saved ? saved : "";
  const char* savedHost = std::getenv("KUBERNETES_SERVICE_HOST");
  std::string savedHostValue = savedHost ? savedHost : "";

  ::setenv("KUBECONFIG", (":" + admin + ":" + other).c_str(), 1);
  auto fromEnv = resolveClusterConfig(std::nullopt);
  REQUIRE_MESSAGE(fromEnv.ok(), fromEnv.error().message);
  CHECK(fromEnv->host == "192.168.1.10");

  auto fromFlag = resolveClusterConfig(other);
  REQUIRE_FALSE(fromFlag.ok());
  CHECK(fromFlag.error().message ==
        "kubeconfig " + other + ": current-context \"x\": no such context in contexts");

  ::unsetenv("KUBECONFIG");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  auto inCluster = resolveClusterConfig(std::nullopt);
  REQUIRE_FALSE(inCluster.ok());
  CHECK(inCluster.error().message ==
        "not running in a cluster: KUBERNETES_SERVICE_HOST is not set");

  if (saved) ::setenv("KUBECONFIG", savedValue.c_str(), 1);
  if (savedHost) ::setenv("KUBERNETES_SERVICE_HOST", savedHostValue.c_str(), 1);
}

TEST_CASE("TokenSource: a fixed token, and a token file re-read as it rotates") {
  ClusterConfig fixed;
  fixed.token = "static";
  TokenSource fixedSource(fixed);
  CHECK(fixedSource.token() == "static");
  CHECK(fixedSource.problem().empty());

  TempDir dir;
  std::string file = dir.write("token", "first-token\n");
  ClusterConfig config;
  config.tokenFile = file;
  TokenSource tokens(config);
  CHECK(tokens.token() == "first-token");
  CHECK(tokens.problem().empty());

  SUBCASE("a rewrite is seen within about a second, not before") {
    dir.write("token", "second-token-longer \n");
    CHECK(tokens.token() == "first-token");  // checked at most once a second
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (tokens.token() != "second-token-longer" && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(tokens.token() == "second-token-longer");
  }
  SUBCASE("invalidate() forces a read at once") {
    dir.write("token", "rotated\n");
    tokens.invalidate();
    CHECK(tokens.token() == "rotated");
  }
  SUBCASE("a deleted file keeps the last good token and reports the problem") {
    fs::remove(file);
    tokens.invalidate();
    CHECK(tokens.token() == "first-token");
    CHECK(tokens.problem() == "token file " + file + ": No such file or directory");
    dir.write("token", "back\n");
    tokens.invalidate();
    CHECK(tokens.token() == "back");
    CHECK(tokens.problem().empty());
  }
  SUBCASE("an empty file keeps the last good token") {
    dir.write("token", "\n");
    tokens.invalidate();
    CHECK(tokens.token() == "first-token");
    CHECK(tokens.problem() == "token file " + file + " is empty");
  }
}
