// kube/config: in-cluster configuration, kubeconfig files (YAML as kubectl writes them, and
// JSON) with every refusal's exact message, and the rotating token source.
#include "kube/config.h"
#include "kube/credentials.h"
#include "tests/support/temp_dir.h"

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
using nodewarden::kube::ProxyScheme;
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
  std::string path = dir.write("etc/kubelet.conf",
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
                               "    client-certificate: " +
                                   (dir.path / "pki/kubelet-client-current.pem").string() +
                                   "\n"
                                   "    client-key: ../keys/kubelet.key\n");
  dir.write("etc/pki/ca.crt", kCaPem);
  dir.write("pki/kubelet-client-current.pem", kCertPem);
  dir.write("keys/kubelet.key", kKeyPem);
  auto config = loadKubeconfig(path);
  REQUIRE_MESSAGE(config.ok(), config.error().message);
  std::string base = (dir.path / "etc").string();
  CHECK(config->host == "cp.example.com");
  CHECK(config->caFile == base + "/pki/ca.crt");
  CHECK(config->clientCertFile == (dir.path / "pki/kubelet-client-current.pem").string());
  CHECK(config->clientKeyFile == (dir.path / "keys/kubelet.key").string());  // cleaned
  CHECK(config->caData.empty());
}

TEST_CASE("kubeconfig: token and tokenFile users, --context selection, comments, quoting, flow") {
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

  dir.write("secrets/token", "from-file\n");
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

TEST_CASE("kubeconfig: any YAML kubectl reads — flow style, anchors, YAML 1.1 booleans") {
  TempDir dir;
  SUBCASE("the whole file in flow style, starting with '{' (not JSON)") {
    std::string path =
        dir.write("flow.yaml",
                  "{apiVersion: v1, kind: Config, current-context: c,\n"
                  " clusters: [{name: k, cluster: {server: 'https://10.0.0.1:6443',\n"
                  "             insecure-skip-tls-verify: yes}}],\n"
                  " contexts: [{name: c, context: {cluster: k, user: u}}],\n"
                  " users: [{name: u, user: {token: abc}}]}\n");
    auto config = loadKubeconfig(path);
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    CHECK(config->host == "10.0.0.1");
    CHECK(config->insecureSkipTlsVerify);
    CHECK(config->token == "abc");
  }
  SUBCASE("anchors, aliases and merge keys; the last of two keys; only the first document") {
    std::string path = dir.write("anchors.yaml",
                                 "apiVersion: v1\n"
                                 "current-context: c\n"
                                 "current-context: d\n"
                                 "clusters:\n"
                                 "- name: base\n"
                                 "  cluster: &base\n"
                                 "    server: https://10.0.0.1:6443\n"
                                 "    insecure-skip-tls-verify: on\n"
                                 "- name: k2\n"
                                 "  cluster:\n"
                                 "    <<: *base\n"
                                 "    server: https://10.0.0.2:6443\n"
                                 "contexts:\n"
                                 "- {name: c, context: {cluster: base, user: u}}\n"
                                 "- {name: d, context: {cluster: k2, user: u}}\n"
                                 "users:\n"
                                 "- name: u\n"
                                 "  user:\n"
                                 "    token: >-\n"
                                 "      folded\n"
                                 "      token\n"
                                 "---\n"
                                 "this: [is not read\n");
    auto config = loadKubeconfig(path);
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    CHECK(config->description.find("context d ") != std::string::npos);
    CHECK(config->host == "10.0.0.2");
    CHECK(config->insecureSkipTlsVerify);  // from the merged anchor
    CHECK(config->token == "folded token");
  }
  SUBCASE("tags, quoting and block scalars") {
    std::string path = dir.write("tags.yaml",
                                 "current-context: !!str c\n"
                                 "clusters:\n"
                                 "- name: k\n"
                                 "  cluster:\n"
                                 "    server: \"https://10.0.0.1\"\n"
                                 "    tls-server-name: !!str 0x10\n"
                                 "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                                 "users:\n"
                                 "- name: u\n"
                                 "  user:\n"
                                 "    token: |\n"
                                 "      literal\n");
    auto config = loadKubeconfig(path);
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    CHECK(config->tlsServerName == "0x10");
    CHECK(config->token == "literal\n");
  }
}

TEST_CASE("kubeconfig: exec plugins, proxies, impersonation and servers as kubectl reads them") {
  TempDir dir;
  dir.write("bin/plugin", "#!/bin/sh\n");
  auto load = [&](const std::string& user, const std::string& clusterExtra = "",
                  const std::string& server = "https://10.0.0.1:6443") {
    std::string path = dir.write("config",
                                 "current-context: c\n"
                                 "clusters:\n"
                                 "- name: k\n"
                                 "  cluster:\n"
                                 "    server: " +
                                     server + "\n" + clusterExtra +
                                     "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                                     "users:\n"
                                     "- name: u\n"
                                     "  user:\n" +
                                     user);
    return loadKubeconfig(path);
  };
  SUBCASE("exec v1: command relative to the kubeconfig, args, env, hint, cluster extension") {
    auto config = load(
        "    exec:\n"
        "      apiVersion: client.authentication.k8s.io/v1\n"
        "      command: ./bin/plugin\n"
        "      args: [get-token, --cluster, k]\n"
        "      env: [{name: REGION, value: eu}]\n"
        "      installHint: apt install plugin\n"
        "      provideClusterInfo: true\n"
        "      interactiveMode: Never\n",
        "    extensions:\n"
        "    - name: client.authentication.k8s.io/exec\n"
        "      extension: {audience: nodewarden}\n");
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    REQUIRE(config->exec);
    CHECK(config->exec->command == dir.path.string() + "/bin/plugin");
    CHECK(config->exec->args == std::vector<std::string>{"get-token", "--cluster", "k"});
    REQUIRE(config->exec->env.size() == 1);
    CHECK(config->exec->env[0] == std::make_pair(std::string("REGION"), std::string("eu")));
    CHECK(config->exec->installHint == "apt install plugin");
    CHECK(config->exec->provideClusterInfo);
    CHECK(config->exec->interactiveMode == nodewarden::kube::ExecConfig::Interactive::Never);
    CHECK(config->exec->clusterExtension == R"({"audience":"nodewarden"})");
    CHECK(config->exec->user == "u");
    CHECK(config->server == "https://10.0.0.1:6443");
  }
  SUBCASE("exec v1beta1: a command on the PATH; interactiveMode defaults to IfAvailable") {
    auto config = load(
        "    exec:\n"
        "      apiVersion: client.authentication.k8s.io/v1beta1\n"
        "      command: gke-gcloud-auth-plugin\n");
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    REQUIRE(config->exec);
    CHECK(config->exec->command == "gke-gcloud-auth-plugin");
    CHECK(config->exec->interactiveMode == nodewarden::kube::ExecConfig::Interactive::IfAvailable);
  }
  SUBCASE("a token given with exec wins over the plugin, as in client-go") {
    auto config = load(
        "    token: fixed\n"
        "    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x}\n");
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    CHECK_FALSE(config->exec);
    CHECK(config->token == "fixed");
  }
  SUBCASE("proxy-url with user information; impersonation") {
    auto config = load(
        "    token: t\n"
        "    as: jane\n"
        "    as-uid: \"42\"\n"
        "    as-groups: [devs, ops]\n"
        "    as-user-extra: {scopes: [view]}\n",
        "    proxy-url: http://user:secret@127.0.0.1:3128\n");
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    CHECK(config->proxyHost == "127.0.0.1");
    CHECK(config->proxyPort == "3128");
    CHECK(config->proxyAuthorization == "Basic dXNlcjpzZWNyZXQ=");
    CHECK(config->proxyScheme == ProxyScheme::Http);
    CHECK(config->impersonateUser == "jane");
    CHECK(config->impersonateUid == "42");
    CHECK(config->impersonateGroups == std::vector<std::string>{"devs", "ops"});
    REQUIRE(config->impersonateExtra.size() == 1);
    CHECK(config->impersonateExtra[0].first == "scopes");
  }
  SUBCASE("proxy-url: https and socks5, their default ports, SOCKS5 credentials") {
    auto https = load("    token: t\n", "    proxy-url: https://user:secret@proxy.example\n");
    REQUIRE_MESSAGE(https.ok(), https.error().message);
    CHECK(https->proxyScheme == ProxyScheme::Https);
    CHECK(https->proxyHost == "proxy.example");
    CHECK(https->proxyPort == "443");
    CHECK(https->proxyAuthorization == "Basic dXNlcjpzZWNyZXQ=");
    auto socks = load("    token: t\n", "    proxy-url: socks5://us%40er:p%3Ass@10.0.0.9\n");
    REQUIRE_MESSAGE(socks.ok(), socks.error().message);
    CHECK(socks->proxyScheme == ProxyScheme::Socks5);
    CHECK(socks->proxyHost == "10.0.0.9");
    CHECK(socks->proxyPort == "1080");
    CHECK(socks->proxyAuthorization.empty());
    REQUIRE(socks->proxyCredentials);
    CHECK(socks->proxyCredentials->first == "us@er");
    CHECK(socks->proxyCredentials->second == "p:ss");
    auto plain = load("    token: t\n", "    proxy-url: socks5://127.0.0.1:9050\n");
    REQUIRE_MESSAGE(plain.ok(), plain.error().message);
    CHECK(plain->proxyPort == "9050");
    CHECK_FALSE(plain->proxyCredentials);
  }
  SUBCASE("a server without a scheme: https with TLS settings, http without") {
    auto secure = load("    token: t\n", "    insecure-skip-tls-verify: true\n", "10.0.0.1:6443");
    REQUIRE_MESSAGE(secure.ok(), secure.error().message);
    CHECK(secure->tls);
    CHECK(secure->port == "6443");
    auto plain = load("    token: t\n", "", "localhost:8080");
    REQUIRE_MESSAGE(plain.ok(), plain.error().message);
    CHECK_FALSE(plain->tls);
    CHECK(plain->host == "localhost");
  }
  SUBCASE("an IPv6 address without brackets, as Go's URL parser reads it") {
    auto config = load("    token: t\n", "", "https://fd00::1:6443");
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    CHECK(config->host == "fd00::1");
    CHECK(config->port == "6443");
  }
}

TEST_CASE("kubeconfig: a JSON document that does not parse is refused with both readings") {
  TempDir dir;
  std::string path = dir.write("config", "{\"apiVersion\": \"v1\",\n \"clusters\": [}");
  auto config = loadKubeconfig(path);
  REQUIRE_FALSE(config.ok());
  CHECK(config.error().message.starts_with(
      "kubeconfig " + path +
      ": invalid JSON at line 2, column 15: syntax error while parsing value - unexpected '}'; "
      "expected '[', '{', or a literal (and as YAML, line 2: "));
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
  auto execUser = [&](const std::string& exec) {
    return replace(admin,
                   "    client-certificate-data: " + base64(kCertPem) + "\n" +
                       "    client-key-data: " + base64(kKeyPem) + "\n",
                   "    exec:\n" + exec);
  };

  CHECK(load(replace(admin, "current-context: kubernetes-admin@kubernetes",
                     "current-context: gone")) ==
        "current-context \"gone\": no such context in contexts");
  CHECK(load(replace(admin, "current-context: kubernetes-admin@kubernetes\n", "")) ==
        "current-context is not set (and no context given)");
  // What kubectl refuses when it decodes the file, used or not.
  CHECK(load(replace(admin, "kind: Config", "kind: Pod")) ==
        "kind: \"Pod\" is not a kubeconfig (kind Config)");
  CHECK(load(replace(admin, "apiVersion: v1", "apiVersion: v2")) ==
        "apiVersion: \"v2\" is not a kubeconfig version (v1)");
  // A key given twice: the last one counts, as in kubectl.
  CHECK(load(replace(admin, "preferences: {}", "preferences: {}\nclusters: {}")) ==
        "clusters: expected a list, got a mapping");
  CHECK(load(admin + "- name: kubernetes-admin\n  user: {token: x}\n") ==
        "users[1].name: \"kubernetes-admin\" is already in users");
  CHECK(load(admin + "- name: other\n  user: {token: 12345}\n") ==
        "users[1].user.token: expected a string, got a number (quote it to make it a string)");
  CHECK(load(admin + "- name: other\n  user: {username: yes}\n") ==
        "users[1].user.username: expected a string, got a boolean (quote it to make it a "
        "string)");
  CHECK(
      load(replace(admin, "    server:", "    insecure-skip-tls-verify: \"true\"\n    server:")) ==
      "clusters[0].cluster.insecure-skip-tls-verify: expected true or false, got a string");
  CHECK(load(replace(admin, "client-key-data: ", "client-key-data: !!notbase64")) ==
        "line 19: tags other than !!str, !!int, !!float, !!bool and !!null are not supported");
  CHECK(load(replace(admin, "client-key-data: ", "client-key-data: a%b")) ==
        "users[0].user.client-key-data: invalid base64 at offset 1");
  CHECK(load(replace(admin, "client-key-data: " + base64(kKeyPem), "client-key-data: QUJDRA")) ==
        "users[0].user.client-key-data: invalid base64: truncated or bad padding");
  CHECK(load(replace(admin, "    server: https", "\tserver: https")) ==
        "line 5: tabs are not allowed for indentation");
  // yaml-cpp lets a quoted scalar run to the end of the file; kind then says what is wrong.
  CHECK(load(replace(admin, "kind: Config", "kind: \"Config")).starts_with("kind: \"Config "));
  // What kubectl refuses when it validates the context it uses.
  CHECK(load(replace(admin, "https://192.168.1.10:6443", "ftp://192.168.1.10")) ==
        "clusters[0].cluster.server: expected an https:// or http:// URL, got "
        "\"ftp://192.168.1.10\"");
  CHECK(load(replace(admin, "https://192.168.1.10:6443", "https://fd00::1")) ==
        "clusters[0].cluster.server: an IPv6 address in a URL must be in brackets ([::1]:6443)");
  CHECK(load(replace(admin, "    cluster: kubernetes\n", "    cluster: other\n")) ==
        "contexts[0].context.cluster: cluster \"other\" is not in clusters");
  CHECK(load(replace(admin, "    user: kubernetes-admin\n", "    user: nobody\n")) ==
        "contexts[0].context.user: user \"nobody\" is not in users");
  CHECK(load(replace(admin, "    server:", "    insecure-skip-tls-verify: true\n    server:")) ==
        "clusters[0].cluster: insecure-skip-tls-verify with a certificate authority is not "
        "allowed");
  CHECK(load(replace(admin, "    server:", "    certificate-authority: ca.crt\n    server:")) ==
        "clusters[0].cluster: certificate-authority and certificate-authority-data are both set");
  CHECK(load(replace(admin, "    certificate-authority-data: " + base64(kCaPem),
                     "    certificate-authority: absent.crt")) ==
        "clusters[0].cluster.certificate-authority: " + (dir.path / "absent.crt").string() +
            ": No such file or directory");
  CHECK(load(replace(admin, "    client-key-data: " + base64(kKeyPem) + "\n", "")) ==
        "users[0].user: a client certificate needs both the certificate and its key");
  CHECK(load(replace(admin, "    client-key-data", "    tokenFile: gone\n    client-key-data")) ==
        "users[0].user.tokenFile: " + (dir.path / "gone").string() + ": No such file or directory");
  // kubectl's own words: "invalid 'proxy-url' "ftp://…" for cluster "kubernetes":
  // unsupported scheme "ftp", must be http, https, or socks5".
  CHECK(load(replace(admin, "    server:", "    proxy-url: ftp://127.0.0.1:21\n    server:")) ==
        "clusters[0].cluster.proxy-url: invalid proxy-url \"ftp://127.0.0.1:21\" for cluster "
        "\"kubernetes\": unsupported scheme \"ftp\", must be http, https, or socks5");
  // Refused with what to use instead.
  CHECK(load(replace(admin, "    client-certificate-data",
                     "    auth-provider:\n      name: oidc\n    client-certificate-data")) ==
        "users[0].user.auth-provider: auth-provider plugins are not supported (kubectl itself "
        "removed the gcp and azure ones): use an exec credential plugin instead, such as "
        "gke-gcloud-auth-plugin (GKE) or kubelogin (Azure, OIDC)");
  CHECK(load(replace(admin, "    client-certificate-data",
                     "    username: admin\n    password: secret\n    client-certificate-data")) ==
        "users[0].user: basic authentication (username/password) is not supported: use a token "
        "(token, tokenFile), a client certificate or an exec credential plugin");
  // An exec block as client-go validates it.
  CHECK(load(execUser("      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n")) ==
        "users[0].user.exec.interactiveMode: not set (Never, IfAvailable or Always; "
        "client.authentication.k8s.io/v1 needs it)");
  CHECK(load(execUser("      apiVersion: client.authentication.k8s.io/v1alpha1\n"
                      "      command: aws\n")) ==
        "users[0].user.exec.apiVersion: \"client.authentication.k8s.io/v1alpha1\" is not "
        "client.authentication.k8s.io/v1 or v1beta1");
  CHECK(load(execUser("      command: aws\n")) == "users[0].user.exec.apiVersion: not set");
  CHECK(load(execUser("      apiVersion: client.authentication.k8s.io/v1beta1\n")) ==
        "users[0].user.exec.command: not set");
  CHECK(load(execUser("      apiVersion: client.authentication.k8s.io/v1beta1\n"
                      "      command: aws\n      interactiveMode: Sometimes\n")) ==
        "users[0].user.exec.interactiveMode: \"Sometimes\" is not Never, IfAvailable or Always");
  CHECK(load(execUser("      apiVersion: client.authentication.k8s.io/v1beta1\n"
                      "      command: aws\n      env: [{value: x}]\n")) ==
        "users[0].user.exec.env: an entry has no name");
  CHECK(load(execUser("      apiVersion: client.authentication.k8s.io/v1beta1\n"
                      "      command: aws\n      args: [1, 2]\n")) ==
        "users[0].user.exec.args[0]: expected a string, got a number (quote it to make it a "
        "string)");

  auto missing = loadKubeconfig((dir.path / "absent").string());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message ==
        "kubeconfig " + (dir.path / "absent").string() + ": No such file or directory");
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
