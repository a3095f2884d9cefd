// Every kubeconfig kubectl accepts, side by side with the real kubectl: for each shape of file
// (flow style, anchors, JSON, token files, client certificates, tls-server-name, proxies:
// http:// and https:// CONNECT, socks5:// with and without a password, exec plugins of both API
// versions, $KUBECONFIG lists, ~/.kube/config, --context), `kubectl get --raw /api/v1/nodes` and
// nodewarden (`explain eviction --kubeconfig F`, or `kubectl nodewarden explain eviction` where
// kubectl's own resolution is the point) both work against the same server; for each file kubectl
// refuses, both refuse, and the two messages are printed side by side.
//
// The server under test is one parameter. By default it is the fake API server of this
// folder over TLS, seeded with examples/current. With $NODEWARDEN_TEST_APISERVER=DIR it is
// whatever DIR describes: `server` (its URL), `ca.crt`, `token` (a bearer token it accepts),
// and optionally `client.crt` + `client.key` (a client certificate it accepts) and
// `server-name` (a DNS name its certificate carries); shapes that need what DIR lacks are
// skipped, saying so (the https:// proxy serves the fake server's own certificate, which the
// kubeconfig's certificate authority verifies, so it needs the fake server). Skips (77) when
// /usr/bin/kubectl is absent.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/kube/connect_proxy.h"
#include "tests/kube/fake_apiserver.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using Json = nlohmann::json;
using nodewarden::testing::ConnectProxy;
using nodewarden::testing::ConnectProxyOptions;
using nodewarden::testing::FakeApiServer;
using nodewarden::testing::FakeApiServerOptions;
using nodewarden::testing::makeTestCertificate;
using nodewarden::testing::Socks5Proxy;
using nodewarden::testing::Socks5ProxyOptions;
using nodewarden::testing::TempDir;

namespace {

const char* kKubectl = "/usr/bin/kubectl";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string base64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned n = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(n >> shift) & 63];
  }
  if (i + 1 == bytes.size()) {
    const unsigned n = static_cast<unsigned char>(bytes[i]) << 16;
    out += std::string{kAlphabet[(n >> 18) & 63], kAlphabet[(n >> 12) & 63]} + "==";
  } else if (i + 2 == bytes.size()) {
    const unsigned n = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8);
    out += std::string{kAlphabet[(n >> 18) & 63], kAlphabet[(n >> 12) & 63],
                       kAlphabet[(n >> 6) & 63], '='};
  }
  return out;
}

// A YAML double-quoted string (for PEM blocks and paths).
std::string quoted(const std::string& s) {
  return Json(s).dump();
}

// The server both clients talk to.
struct ServerUnderTest {
  std::string url;  // "https://127.0.0.1:PORT"
  std::string caPem;
  std::string token;                        // a bearer token it accepts
  std::string clientCertPem, clientKeyPem;  // "" when not known
  std::string serverName;  // a DNS name in its certificate other than its address, or ""
  std::string wrongCaPem;  // a CA that did not sign its certificate
  std::string servingCertPem, servingKeyPem;  // its certificate and key, when it is the fake one
  std::unique_ptr<FakeApiServer> fake;        // when it is the fake one
};

ServerUnderTest serverUnderTest() {
  ServerUnderTest s;
  s.wrongCaPem = makeTestCertificate("not-the-cluster-ca").certPem;
  if (const char* dir = std::getenv("NODEWARDEN_TEST_APISERVER"); dir != nullptr && *dir != '\0') {
    const std::string d(dir);
    s.url = trim(slurp(d + "/server"));
    s.caPem = slurp(d + "/ca.crt");
    s.token = trim(slurp(d + "/token"));
    s.clientCertPem = slurp(d + "/client.crt");
    s.clientKeyPem = slurp(d + "/client.key");
    s.serverName = trim(slurp(d + "/server-name"));
    return s;
  }
  auto serving = makeTestCertificate("kubernetes.nodewarden.test");
  auto client = makeTestCertificate("side-by-side-user");
  FakeApiServerOptions options;
  options.tls = true;
  options.certPem = serving.certPem;
  options.keyPem = serving.keyPem;
  options.token = "side-by-side-token";
  options.clientCaPem = client.certPem;
  s.fake = std::make_unique<FakeApiServer>(options);
  std::ifstream in(std::string(NODEWARDEN_SOURCE_ROOT) + "/examples/current/snapshot.json");
  const Json snapshot = Json::parse(in);
  for (Json node : snapshot["nodes"]) s.fake->upsertNode(node);
  for (Json pod : snapshot["pods"]) s.fake->upsertPod(pod);
  for (Json pc : snapshot["priorityClasses"]) s.fake->upsertPriorityClass(pc);
  for (const auto& [node, summary] : snapshot["stats"].items()) s.fake->setNodeStats(node, summary);
  s.url = s.fake->url();
  s.caPem = serving.certPem;
  s.servingCertPem = serving.certPem;
  s.servingKeyPem = serving.keyPem;
  s.token = options.token;
  s.clientCertPem = client.certPem;
  s.clientKeyPem = client.keyPem;
  s.serverName = "kubernetes.nodewarden.test";
  return s;
}

struct Run {
  int status = -1;
  std::string out, err;
};

// Runs `command` under `env` alone (plus a PATH), stdin from /dev/null, bounded in time.
Run shell(const TempDir& dir, const std::vector<std::string>& env, const std::string& command) {
  const std::string out = (dir.path / "stdout").string(), err = (dir.path / "stderr").string();
  std::string line = "env -i";
  for (const auto& e : env) line += " '" + e + "'";
  line += " timeout 120 " + command + " < /dev/null > '" + out + "' 2> '" + err + "'";
  const int status = std::system(line.c_str());
  return Run{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// Starts `nodewarden webhook` (a daemon: its kubeconfig comes from the environment) under
// `env` and waits, at most 30 s, for its reflectors to list the cluster; stops it. Returns
// its log.
std::string daemonLog(const TempDir& dir, const std::vector<std::string>& env) {
  const std::string log = (dir.path / "daemon.log").string();
  std::filesystem::remove(log);  // not the last run's
  std::vector<std::string> args = {"env", "-i"};
  args.insert(args.end(), env.begin(), env.end());
  for (const char* a :
       {NODEWARDEN_BINARY, "webhook", "--listen", "127.0.0.1:0", "--log-format", "json"})
    args.emplace_back(a);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv("/usr/bin/env", argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int status = 0;
  bool exited = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (slurp(log).find("listed ") != std::string::npos) break;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    ::usleep(50 * 1000);
  }
  if (!exited) {
    ::kill(pid, SIGTERM);
    for (int i = 0; i < 200 && ::waitpid(pid, &status, WNOHANG) != pid; ++i) ::usleep(50 * 1000);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  return slurp(log);
}

// One kubeconfig shape: its files, and how each client is pointed at it.
struct Shape {
  std::string name;
  std::function<void(const TempDir&)> write;  // writes the files below the directory
  // Where the kubeconfig is: a file for --kubeconfig, or empty when the environment says
  // ($KUBECONFIG in `env`, or $HOME/.kube/config).
  std::string kubeconfig;
  std::vector<std::string> env = {};  // e.g. "KUBECONFIG=a:b"
  std::string context = {};           // --context, when set
  std::string needs = {};             // what of the server the shape needs ("client certificate")
};

}  // namespace

TEST_CASE("kubeconfig shapes: kubectl and nodewarden both work, or both refuse") {
  if (::access(kKubectl, X_OK) != 0) {
    std::printf("skipped: %s is not installed (this test compares nodewarden with it)\n", kKubectl);
    std::exit(77);
  }
  ServerUnderTest server = serverUnderTest();
  ConnectProxy proxy;
  // An https:// proxy needs a certificate the kubeconfig's authority signed: the fake
  // server's own (a real server's key is not at hand).
  std::unique_ptr<ConnectProxy> httpsProxy;
  if (!server.servingKeyPem.empty())
    httpsProxy = std::make_unique<ConnectProxy>(
        ConnectProxyOptions{{}, server.servingCertPem, server.servingKeyPem});
  Socks5Proxy socks;
  Socks5Proxy socksWithPassword(Socks5ProxyOptions{"proxy-user", "pa:ss@word", 0});
  TempDir dir("nodewarden-kubectl");
  const std::string root = dir.path.string();
  fs::create_directories(dir.path / "bin");
  fs::create_symlink(NODEWARDEN_BINARY, dir.path / "bin/kubectl-nodewarden");
  const std::string basePath = "PATH=" + root + "/bin:/usr/local/bin:/usr/bin:/bin";

  auto plugin = [&](const std::string& name, const std::string& apiVersion,
                    const std::string& status) {
    std::string path =
        dir.write(name,
                  "#!/bin/sh\n"
                  "echo \"$0 $*\" >> '" +
                      root +
                      "/plugin-runs'\n"
                      "[ -n \"$1\" ] && printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$1\"\n"
                      "cat <<'EOF'\n" +
                      Json{{"apiVersion", apiVersion},
                           {"kind", "ExecCredential"},
                           {"status", Json::parse(status)}}
                          .dump() +
                      "\nEOF\n");
    ::chmod(path.c_str(), 0755);
  };
  const std::string tokenStatus = Json{{"token", server.token}}.dump();
  plugin("bin/nw-token-plugin", "client.authentication.k8s.io/v1", tokenStatus);
  plugin("plugins/v1beta1-token", "client.authentication.k8s.io/v1beta1", tokenStatus);
  if (!server.clientCertPem.empty())
    plugin("plugins/cert", "client.authentication.k8s.io/v1",
           Json{{"clientCertificateData", server.clientCertPem},
                {"clientKeyData", server.clientKeyPem}}
               .dump());

  // The blocks files are made of.
  const std::string caData = base64(server.caPem);
  auto cluster = [&](const std::string& extra = "", const std::string& url = "") {
    return "- name: sut\n  cluster:\n    server: " + (url.empty() ? server.url : url) + "\n" +
           "    certificate-authority-data: " + caData + "\n" + extra;
  };
  auto user = [&](const std::string& body) { return "- name: me\n  user:\n" + body; };
  auto file = [&](const std::string& clusters, const std::string& users,
                  const std::string& current = "sut") {
    return "apiVersion: v1\nkind: Config\ncurrent-context: " + current + "\nclusters:\n" +
           clusters + "contexts:\n- name: sut\n  context: {cluster: sut, user: me}\n" + "users:\n" +
           users;
  };
  const std::string tokenUser = user("    token: " + server.token + "\n");
  auto at = [&](const std::string& name, const std::string& text) {
    return [name, text](const TempDir& d) { d.write(name, text); };
  };

  std::vector<Shape> shapes = {
      {"block YAML as kubectl writes it, a token", at("config", file(cluster(), tokenUser)),
       "config"},
      {"flow style throughout",
       at("config",
          "{apiVersion: v1, kind: Config, current-context: sut,\n"
          " clusters: [{name: sut, cluster: {server: '" +
              server.url + "', certificate-authority-data: " + caData +
              "}}],\n"
              " contexts: [{name: sut, context: {cluster: sut, user: me}}],\n"
              " users: [{name: me, user: {token: '" +
              server.token + "'}}]}\n"),
       "config"},
      {"anchors, a merge key, YAML 1.1 booleans, a second document",
       at("config",
          "apiVersion: v1\ncurrent-context: sut\nclusters:\n"
          "- name: base\n  cluster: &base\n    server: " +
              server.url + "\n    certificate-authority-data: " + caData +
              "\n    disable-compression: yes\n"
              "- name: sut\n  cluster:\n    <<: *base\n    insecure-skip-tls-verify: off\n"
              "contexts:\n- name: sut\n  context: {cluster: sut, user: me}\n"
              "users:\n" +
              tokenUser + "---\nkind: Ignored\n"),
       "config"},
      {"JSON",
       at("config.json",
          Json{{"apiVersion", "v1"},
               {"kind", "Config"},
               {"current-context", "sut"},
               {"clusters",
                {{{"name", "sut"},
                  {"cluster", {{"server", server.url}, {"certificate-authority-data", caData}}}}}},
               {"contexts", {{{"name", "sut"}, {"context", {{"cluster", "sut"}, {"user", "me"}}}}}},
               {"users", {{{"name", "me"}, {"user", {{"token", server.token}}}}}}}
              .dump(2)),
       "config.json"},
      {"certificate-authority and tokenFile as paths relative to the kubeconfig",
       [&](const TempDir& d) {
         d.write("pki/ca.crt", server.caPem);
         d.write("conf/token", server.token + "\n");
         d.write("conf/config",
                 "apiVersion: v1\ncurrent-context: sut\nclusters:\n- name: sut\n  cluster:\n"
                 "    server: " +
                     server.url +
                     "\n    certificate-authority: ../pki/ca.crt\n"
                     "contexts:\n- name: sut\n  context: {cluster: sut, user: me}\n"
                     "users:\n" +
                     user("    tokenFile: token\n"));
       },
       "conf/config"},
      {"a client certificate and key as data",
       at("config",
          file(cluster(), user("    client-certificate-data: " + base64(server.clientCertPem) +
                               "\n    client-key-data: " + base64(server.clientKeyPem) + "\n"))),
       "config",
       {},
       {},
       "client certificate"},
      {"a client certificate and key as files",
       [&](const TempDir& d) {
         d.write("pki/me.crt", server.clientCertPem);
         d.write("pki/me.key", server.clientKeyPem);
         d.write("config", file(cluster(), user("    client-certificate: pki/me.crt\n"
                                                "    client-key: pki/me.key\n")));
       },
       "config",
       {},
       {},
       "client certificate"},
      {"tls-server-name",
       at("config", file(cluster("    tls-server-name: " + server.serverName + "\n"), tokenUser)),
       "config",
       {},
       {},
       "server name"},
      {"insecure-skip-tls-verify",
       at("config",
          "apiVersion: v1\ncurrent-context: sut\nclusters:\n- name: sut\n  cluster:\n"
          "    server: " +
              server.url +
              "\n    insecure-skip-tls-verify: true\n"
              "contexts:\n- name: sut\n  context: {cluster: sut, user: me}\nusers:\n" +
              tokenUser),
       "config"},
      {"proxy-url: through an HTTP CONNECT proxy",
       at("config", file(cluster("    proxy-url: " + proxy.url() + "\n"), tokenUser)), "config"},
      {"proxy-url: through an https:// proxy (TLS to it, CONNECT inside)",
       at("config", file(cluster("    proxy-url: " + (httpsProxy ? httpsProxy->url() : "") + "\n"),
                         tokenUser)),
       "config",
       {},
       {},
       "the fake server's key"},
      {"proxy-url: through a socks5:// proxy",
       at("config", file(cluster("    proxy-url: " + socks.url() + "\n"), tokenUser)), "config"},
      {"proxy-url: through a socks5:// proxy with a user name and password",
       at("config", file(cluster("    proxy-url: " +
                                 socksWithPassword.url("proxy-user:pa%3Ass%40word") + "\n"),
                         tokenUser)),
       "config"},
      {"exec v1: a plugin on the PATH with args, env and cluster info",
       at("config", file(cluster("    extensions:\n    - name: client.authentication.k8s.io/exec\n"
                                 "      extension: {audience: side-by-side}\n"),
                         user("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                              "      command: nw-token-plugin\n      args: [" +
                              quoted(root + "/exec-info") +
                              ", --flag]\n"
                              "      env: [{name: NW_TEST, value: 'yes'}]\n"
                              "      provideClusterInfo: true\n      interactiveMode: Never\n"))),
       "config"},
      {"exec v1beta1: a command relative to the kubeconfig, interactiveMode left out",
       at("config", file(cluster(), user("    exec:\n"
                                         "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                                         "      command: ./plugins/v1beta1-token\n"))),
       "config"},
      {"exec: a plugin that answers a client certificate",
       at("config", file(cluster(), user("    exec:\n"
                                         "      apiVersion: client.authentication.k8s.io/v1\n"
                                         "      command: ./plugins/cert\n"
                                         "      interactiveMode: IfAvailable\n"))),
       "config",
       {},
       {},
       "client certificate"},
      {"$KUBECONFIG: two files merged, a missing one and an empty element skipped",
       [&](const TempDir& d) {
         d.write("a.yaml", "apiVersion: v1\nclusters:\n" + cluster() + "users:\n" + tokenUser);
         d.write("b.yaml",
                 "apiVersion: v1\ncurrent-context: sut\n"
                 "clusters:\n- name: sut\n  cluster: {server: 'https://127.0.0.1:9'}\n"
                 "contexts:\n- name: sut\n  context: {cluster: sut, user: me}\n"
                 "users:\n- name: me\n  user: {token: wrong}\n");
       },
       "",
       {"KUBECONFIG=" + root + "/a.yaml:" + root + "/missing.yaml::" + root + "/b.yaml"}},
      {"~/.kube/config when neither --kubeconfig nor $KUBECONFIG is set",
       at("home/.kube/config", file(cluster(), tokenUser)), ""},
      {"--context choosing a context other than the current one",
       at("config", "apiVersion: v1\ncurrent-context: elsewhere\nclusters:\n" + cluster() +
                        "- name: elsewhere\n  cluster: {server: 'https://127.0.0.1:9'}\n"
                        "contexts:\n- name: sut\n  context: {cluster: sut, user: me}\n"
                        "- name: elsewhere\n  context: {cluster: elsewhere, user: me}\n"
                        "users:\n" +
                        tokenUser),
       "config",
       {},
       "sut"},
  };

  std::string node;
  for (const Shape& shape : shapes) {
    CAPTURE(shape.name);
    if ((shape.needs == "client certificate" && server.clientCertPem.empty()) ||
        (shape.needs == "server name" && server.serverName.empty()) ||
        (shape.needs == "the fake server's key" && !httpsProxy)) {
      MESSAGE("skipped for this server (it gives no " << shape.needs << "): " << shape.name);
      continue;
    }
    shape.write(dir);
    std::vector<std::string> env = {basePath, "HOME=" + root + "/home"};
    env.insert(env.end(), shape.env.begin(), shape.env.end());
    std::string flags;
    if (!shape.kubeconfig.empty()) flags += " --kubeconfig '" + root + "/" + shape.kubeconfig + "'";
    if (!shape.context.empty()) flags += " --context " + shape.context;
    const auto proxyBefore = proxy.requests().size();
    const auto httpsProxyBefore = httpsProxy ? httpsProxy->requests().size() : 0;
    const auto socksBefore = socks.requests().size();
    const auto socksWithPasswordBefore = socksWithPassword.requests().size();
    fs::remove(dir.path / "plugin-runs");

    const Run kubectl = shell(
        dir, env, std::string(kKubectl) + flags + " get --raw /api/v1/nodes --request-timeout=30s");
    CHECK_MESSAGE(kubectl.status == 0, "kubectl: " << kubectl.err);
    if (kubectl.status != 0) continue;
    const Json nodes = Json::parse(kubectl.out);
    REQUIRE(!nodes["items"].empty());
    if (node.empty()) node = nodes["items"][0]["metadata"]["name"].get<std::string>();
    const std::string kubectlInfo = slurp(root + "/exec-info");
    fs::remove(dir.path / "exec-info");

    // Where kubectl's own resolution is the point, nodewarden runs as its plugin.
    const std::string nodewarden =
        shape.kubeconfig.empty()
            ? std::string(kKubectl) + " nodewarden explain eviction --node " + node + " -o json"
            : std::string(NODEWARDEN_BINARY) + " explain eviction" + flags + " --node " + node +
                  " -o json";
    const Run ours = shell(dir, env, nodewarden);
    CHECK_MESSAGE(ours.status == 0, "nodewarden: " << ours.err);
    if (ours.status == 0) CHECK(Json::parse(ours.out)["node"] == node);

    if (shape.kubeconfig.empty()) {
      // The daemons resolve the same way, without kubectl around them.
      const std::string log = daemonLog(dir, env);
      CHECK_MESSAGE(log.find("listed ") != std::string::npos, log);
      CHECK_MESSAGE(log.find(server.url) != std::string::npos, log);
    }
    if (shape.name.starts_with("proxy-url: through an HTTP")) {
      // Both went through the proxy, each with CONNECT to the server.
      auto seen = proxy.requests();
      CHECK(seen.size() >= proxyBefore + 2);
      for (std::size_t i = proxyBefore; i < seen.size(); ++i) CHECK(seen[i].method == "CONNECT");
    }
    if (shape.name.starts_with("proxy-url: through an https")) {
      auto seen = httpsProxy->requests();
      CHECK(seen.size() >= httpsProxyBefore + 2);
      for (std::size_t i = httpsProxyBefore; i < seen.size(); ++i)
        CHECK(seen[i].method == "CONNECT");
      CHECK(httpsProxy->tlsHandshakes() >= 2);
    }
    if (shape.name.starts_with("proxy-url: through a socks5")) {
      // Both went through the proxy, kubectl and nodewarden alike, and authenticated alike.
      const bool password = shape.name.find("password") != std::string::npos;
      auto seen = password ? socksWithPassword.requests() : socks.requests();
      const std::size_t before = password ? socksWithPasswordBefore : socksBefore;
      CHECK(seen.size() >= before + 2);
      for (std::size_t i = before; i < seen.size(); ++i) {
        CAPTURE(i);
        CHECK(seen[i].reply == 0);
        CHECK(seen[i].methods ==
              (password ? std::vector<unsigned>{0, 2} : std::vector<unsigned>{0}));
        if (password) CHECK(seen[i].password == "pa:ss@word");
      }
    }
    if (shape.name.starts_with("exec")) {
      const std::string runs = slurp(root + "/plugin-runs");
      CHECK_MESSAGE(std::count(runs.begin(), runs.end(), '\n') >= 2, runs);
    }
    if (shape.name.starts_with("exec v1:")) {
      // The same KUBERNETES_EXEC_INFO from both, cluster and extension included.
      const std::string ourInfo = slurp(root + "/exec-info");
      REQUIRE_MESSAGE(!kubectlInfo.empty(), "kubectl did not run the plugin with the info");
      REQUIRE_MESSAGE(!ourInfo.empty(), "nodewarden did not run the plugin with the info");
      CHECK(Json::parse(ourInfo) == Json::parse(kubectlInfo));
      CHECK(Json::parse(ourInfo)["spec"]["cluster"]["config"]["audience"] == "side-by-side");
    }
    fs::remove_all(dir.path / "home");
  }
}

TEST_CASE("kubeconfig files kubectl refuses: nodewarden refuses them too, as clearly") {
  if (::access(kKubectl, X_OK) != 0) {
    std::printf("skipped: %s is not installed (this test compares nodewarden with it)\n", kKubectl);
    std::exit(77);
  }
  ServerUnderTest server = serverUnderTest();
  Socks5Proxy socksWithPassword(Socks5ProxyOptions{"proxy-user", "secret", 0});
  Socks5Proxy socksThatRefuses(Socks5ProxyOptions{{}, {}, 2});
  const auto otherCert = makeTestCertificate("127.0.0.1");  // no authority of the file's
  ConnectProxy httpsProxyOtherCa(ConnectProxyOptions{{}, otherCert.certPem, otherCert.keyPem});
  TempDir dir("nodewarden-kubectl-bad");
  const std::string root = dir.path.string();
  const std::string caData = base64(server.caPem);
  auto failing =
      dir.write("plugins/fails", "#!/bin/sh\necho 'credentials expired: run login' >&2\nexit 3\n");
  ::chmod(failing.c_str(), 0755);
  auto odd = dir.write("plugins/odd",
                       "#!/bin/sh\necho "
                       "'{\"apiVersion\":\"client.authentication.k8s.io/"
                       "v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}'\n");
  ::chmod(odd.c_str(), 0755);

  auto config = [&](const std::string& clusterExtra, const std::string& userBody,
                    const std::string& top = "current-context: sut\n",
                    const std::string& url = "") {
    return "apiVersion: v1\n" + top +
           "clusters:\n- name: sut\n  cluster:\n    server: " + (url.empty() ? server.url : url) +
           "\n" + clusterExtra +
           "contexts:\n- name: sut\n  context: {cluster: sut, user: me}\n"
           "users:\n- name: me\n  user:\n" +
           userBody;
  };
  const std::string ca = "    certificate-authority-data: " + caData + "\n";
  const std::string token = "    token: " + server.token + "\n";
  struct Bad {
    std::string name;
    std::string text;
    std::string ours;  // what nodewarden's message must contain
  };
  const std::vector<Bad> bad = {
      {"YAML that does not parse", "clusters: [\n", ": line "},
      {"a tab in the indentation", config(ca, "\ttoken: x\n"), "tabs are not allowed"},
      {"a number where a string goes", config(ca, "    token: 12345\n"),
       "users[0].user.token: expected a string, got a number"},
      {"a name twice in a list", config(ca, token) + "- name: me\n  user: {token: other}\n",
       "is already in users"},
      {"apiVersion v2", "apiVersion: v2\n" + config(ca, token).substr(15),
       "is not a kubeconfig version"},
      {"no current-context", config(ca, token, ""), "current-context is not set"},
      {"a current-context that is not there", config(ca, token, "current-context: gone\n"),
       "no such context"},
      {"a certificate authority file that is not there",
       config("    certificate-authority: absent.crt\n", token), "absent.crt"},
      {"certificate-authority and certificate-authority-data both",
       config(ca + "    certificate-authority: absent.crt\n", token), "are both set"},
      {"insecure-skip-tls-verify with a certificate authority",
       config(ca + "    insecure-skip-tls-verify: true\n", token),
       "insecure-skip-tls-verify with a certificate authority"},
      {"a client certificate without its key",
       config(ca, "    client-certificate-data: " + base64(server.caPem) + "\n"),
       "needs both the certificate and its key"},
      {"exec v1 without interactiveMode",
       config(ca, "    exec: {apiVersion: client.authentication.k8s.io/v1, command: x}\n"),
       "interactiveMode: not set"},
      {"exec of an API version that no longer exists",
       config(ca,
              "    exec: {apiVersion: client.authentication.k8s.io/v1alpha1, command: x, "
              "interactiveMode: Never}\n"),
       "is not client.authentication.k8s.io/v1 or v1beta1"},
      {"an exec plugin that is not installed",
       config(ca,
              "    exec: {apiVersion: client.authentication.k8s.io/v1, command: "
              "nw-not-installed, interactiveMode: Never, installHint: 'apt install nw-plugin'}\n"),
       "install hint: apt install nw-plugin"},
      {"an exec plugin that fails",
       config(ca,
              "    exec: {apiVersion: client.authentication.k8s.io/v1, command: ./plugins/fails, "
              "interactiveMode: Never}\n"),
       "exited with status 3; its standard error: credentials expired: run login"},
      {"an exec plugin with interactiveMode Always and no terminal",
       config(ca,
              "    exec: {apiVersion: client.authentication.k8s.io/v1, command: ./plugins/odd, "
              "interactiveMode: Always}\n"),
       "standard input is not a terminal"},
      {"an exec plugin that answers another API version",
       config(ca,
              "    exec: {apiVersion: client.authentication.k8s.io/v1, command: ./plugins/odd, "
              "interactiveMode: Never}\n"),
       "configured for client.authentication.k8s.io/v1 but answered"},
      {"the removed gcp auth-provider", config(ca, "    auth-provider: {name: gcp}\n"),
       "use an exec credential plugin instead"},
      {"an oidc auth-provider (kubectl sends its id-token: 401)",
       config(ca,
              "    auth-provider: {name: oidc, config: {client-id: x, id-token: x, "
              "idp-issuer-url: 'https://127.0.0.1:9'}}\n"),
       "use an exec credential plugin instead"},
      {"basic authentication (the API server has not taken it since 1.19: 401)",
       config(ca, "    username: admin\n    password: secret\n"), "basic authentication"},
      {"an ftp:// server", config("", token, "current-context: sut\n", "ftp://127.0.0.1:21"),
       "expected an https:// or http:// URL"},
      {"a proxy-url that is not a proxy URL",
       config(ca + "    proxy-url: ftp://127.0.0.1:21\n", token), "unsupported scheme"},
      {"a socks5:// proxy that wants a password, none given",
       config(ca + "    proxy-url: " + socksWithPassword.url() + "\n", token),
       "the proxy accepts none of the authentication methods offered"},
      {"a socks5:// proxy given the wrong password",
       config(ca + "    proxy-url: " + socksWithPassword.url("proxy-user:wrong") + "\n", token),
       "the proxy refused the user name and password"},
      {"a socks5:// proxy that refuses the connection",
       config(ca + "    proxy-url: " + socksThatRefuses.url() + "\n", token),
       "connection not allowed by ruleset"},
      {"an https:// proxy whose certificate the file's authority did not sign",
       config(ca + "    proxy-url: " + httpsProxyOtherCa.url() + "\n", token),
       "signed the proxy's certificate"},
      {"a tls-server-name its certificate does not carry",
       config(ca + "    tls-server-name: not-this.example\n", token), "certificate"},
      {"a certificate authority that did not sign its certificate",
       config("    certificate-authority-data: " + base64(server.wrongCaPem) + "\n", token),
       "certificate"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.name);
    const std::string path = dir.write("config", b.text);
    const std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin",
                                          "HOME=" + root + "/home"};
    const Run kubectl = shell(dir, env,
                              std::string(kKubectl) + " --kubeconfig '" + path +
                                  "' get --raw /api/v1/nodes --request-timeout=10s");
    const Run ours = shell(
        dir, env,
        std::string(NODEWARDEN_BINARY) + " explain eviction --node n --kubeconfig '" + path + "'");
    MESSAGE(b.name << "\n  kubectl:    " << trim(kubectl.err)
                   << "\n  nodewarden: " << trim(ours.err));
    CHECK_MESSAGE(kubectl.status != 0, "kubectl accepted it");
    CHECK(ours.status == 1);
    CHECK(ours.err.find(path) != std::string::npos);  // names the file
    CHECK_MESSAGE(ours.err.find(b.ours) != std::string::npos, ours.err);
  }
  // A --kubeconfig that is not there.
  const Run kubectl =
      shell(dir, {"PATH=/usr/bin:/bin"},
            std::string(kKubectl) + " --kubeconfig " + root + "/absent get --raw /api");
  const Run ours =
      shell(dir, {"PATH=/usr/bin:/bin"},
            std::string(NODEWARDEN_BINARY) + " explain eviction --kubeconfig " + root + "/absent");
  MESSAGE("a missing file\n  kubectl:    " << trim(kubectl.err)
                                           << "\n  nodewarden: " << trim(ours.err));
  CHECK(kubectl.status != 0);
  CHECK(ours.status == 1);
  CHECK(ours.err.find(root + "/absent: No such file or directory") != std::string::npos);
}
