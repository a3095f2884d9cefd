// kube/exec_plugin: the plugin's input (KUBERNETES_EXEC_INFO) and output (ExecCredential)
// checked on strings, the PATH lookup on a temporary tree, and real plugins — small shell
// scripts the test writes — run to their end, to their failure and past their time.
#include "kube/exec_plugin.h"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/kube/fake_apiserver.h"
#include "tests/support/temp_dir.h"

namespace kube = nodewarden::kube;
using Json = nlohmann::json;
using nodewarden::Result;
using nodewarden::testing::makeTestCertificate;
using nodewarden::testing::TempDir;
using namespace std::chrono_literals;

namespace {

const char* kV1 = "client.authentication.k8s.io/v1";

std::string script(const TempDir& dir, const std::string& name, const std::string& body) {
  std::string path = dir.write(name, "#!/bin/sh\n" + body);
  ::chmod(path.c_str(), 0755);
  return path;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

kube::ClusterConfig clusterWith(const std::string& command, std::vector<std::string> args = {}) {
  kube::ClusterConfig c;
  c.host = "10.0.0.1";
  c.port = "6443";
  c.server = "https://10.0.0.1:6443";
  kube::ExecConfig exec;
  exec.apiVersion = kV1;
  exec.command = command;
  exec.args = std::move(args);
  exec.interactiveMode = kube::ExecConfig::Interactive::Never;
  exec.user = "robot";
  c.exec = exec;
  return c;
}

// Runs the plugin of `cluster` to its end (bounded).
Result<kube::ExecCredential> run(const kube::ClusterConfig& cluster,
                                 kube::ExecRunOptions options = {}) {
  boost::asio::io_context io;
  std::optional<Result<kube::ExecCredential>> out;
  auto handle = kube::ExecRun::start(io, cluster, options,
                                     [&](Result<kube::ExecCredential> r) { out = std::move(r); });
  REQUIRE_FALSE(out);  // never from inside start()
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!out && std::chrono::steady_clock::now() < deadline) io.run_one_for(50ms);
  REQUIRE(out);
  return std::move(*out);
}

std::string credential(const std::string& status, const std::string& apiVersion = kV1) {
  return R"({"kind":"ExecCredential","apiVersion":")" + apiVersion + R"(","status":)" + status +
         "}";
}

}  // namespace

TEST_CASE("exec plugin: the ExecCredential it answers, checked as client-go checks it") {
  auto token = kube::parseExecCredential(
      credential(R"({"token":"abc","expirationTimestamp":"2030-01-02T03:04:05Z"})"), kV1);
  REQUIRE_MESSAGE(token.ok(), token.error().message);
  CHECK(token->token == "abc");
  REQUIRE(token->expiry);
  CHECK(
      std::chrono::duration_cast<std::chrono::seconds>(token->expiry->time_since_epoch()).count() ==
      1893553445);

  auto pair = makeTestCertificate("plugin-user");
  auto cert = kube::parseExecCredential(
      credential(
          Json{{"clientCertificateData", pair.certPem}, {"clientKeyData", pair.keyPem}}.dump()),
      kV1);
  REQUIRE_MESSAGE(cert.ok(), cert.error().message);
  CHECK(cert->clientCertPem == pair.certPem);
  CHECK_FALSE(cert->expiry);

  auto yaml = kube::parseExecCredential(
      "apiVersion: client.authentication.k8s.io/v1beta1\nstatus: {token: from-yaml}\n",
      "client.authentication.k8s.io/v1beta1");
  REQUIRE_MESSAGE(yaml.ok(), yaml.error().message);
  CHECK(yaml->token == "from-yaml");

  auto error = [](const std::string& output) {
    auto r = kube::parseExecCredential(output, kV1);
    REQUIRE_FALSE(r.ok());
    return r.error().message;
  };
  CHECK(error(credential(R"({"token":"x"})", "client.authentication.k8s.io/v1beta1")) ==
        "the plugin is configured for client.authentication.k8s.io/v1 but answered "
        "client.authentication.k8s.io/v1beta1");
  CHECK(error(R"({"status":{"token":"x"}})") ==
        "the plugin is configured for client.authentication.k8s.io/v1 but answered without an "
        "apiVersion");
  CHECK(error(R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Pod"})") ==
        "the plugin answered a Pod, not an ExecCredential");
  CHECK(error(R"({"apiVersion":"client.authentication.k8s.io/v1"})") ==
        "the plugin returned no status");
  CHECK(error(credential("{}")) ==
        "the plugin returned neither a token nor a client certificate and key");
  CHECK(error(credential(Json{{"clientCertificateData", pair.certPem}}.dump())) ==
        "the plugin returned a client certificate or a key, not both");
  auto other = makeTestCertificate("someone-else");
  CHECK(
      error(credential(
          Json{{"clientCertificateData", pair.certPem}, {"clientKeyData", other.keyPem}}.dump())) ==
      "the plugin's client certificate: clientKeyData does not match clientCertificateData");
  CHECK(error(credential(R"({"token":"x","expirationTimestamp":"tomorrow"})"))
            .starts_with("status.expirationTimestamp: "));
  CHECK(error("hello").starts_with("decoding its output: expected an ExecCredential object"));
  CHECK(error(credential(R"({"token":7})")) ==
        "decoding its output: status: token: expected a string");
}

TEST_CASE("exec plugin: KUBERNETES_EXEC_INFO, with the cluster only when asked for") {
  kube::ClusterConfig cluster = clusterWith("x");
  cluster.tlsServerName = "api.internal";
  cluster.proxyUrl = "http://127.0.0.1:3128";
  Json plain = Json::parse(kube::execInfo(*cluster.exec, cluster, false, "CA"));
  CHECK(plain == Json::parse(R"({"kind":"ExecCredential","apiVersion":")" + std::string(kV1) +
                             R"(","spec":{"interactive":false}})"));
  cluster.exec->provideClusterInfo = true;
  cluster.exec->clusterExtension = R"({"audience":"x"})";
  Json full = Json::parse(kube::execInfo(*cluster.exec, cluster, true, "CA"));
  CHECK(full["spec"]["interactive"] == true);
  CHECK(full["spec"]["cluster"] == Json{{"server", "https://10.0.0.1:6443"},
                                        {"tls-server-name", "api.internal"},
                                        {"certificate-authority-data", "Q0E="},
                                        {"proxy-url", "http://127.0.0.1:3128"},
                                        {"config", {{"audience", "x"}}}});
}

TEST_CASE("exec plugin: the command is found as Go's exec.LookPath finds it") {
  TempDir dir;
  std::string found = script(dir, "b/tool", "exit 0\n");
  dir.write("a/tool", "not executable");
  script(dir, "c/tool", "exit 0\n");
  const std::string path = "relative:" + (dir.path / "a").string() +
                           "::" + (dir.path / "b").string() + ":" + (dir.path / "c").string();
  auto tool = kube::findExecutable("tool", path);
  REQUIRE_MESSAGE(tool.ok(), tool.error().message);
  CHECK(*tool == found);
  auto direct = kube::findExecutable(found, "");
  REQUIRE(direct.ok());
  CHECK(*direct == found);
  auto missing = kube::findExecutable("gke-gcloud-auth-plugin", path);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "executable gke-gcloud-auth-plugin not found in $PATH");
  auto notExecutable = kube::findExecutable((dir.path / "a/tool").string(), "");
  REQUIRE_FALSE(notExecutable.ok());
  CHECK(notExecutable.error().message ==
        "executable " + (dir.path / "a/tool").string() + " not found");
}

TEST_CASE("exec plugin: a real plugin gets its args, env and KUBERNETES_EXEC_INFO") {
  TempDir dir;
  std::string plugin =
      script(dir, "plugin",
             "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$1\"\n"
             "[ -t 0 ] && exit 9\n"      // its stdin is not the test's terminal
             "read nothing && exit 8\n"  // and holds nothing (/dev/null)
             "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",'\n"
             "printf '\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s-%s\"}}' "
             "\"$2\" \"$REGION\"\n");
  kube::ClusterConfig cluster = clusterWith(plugin, {(dir.path / "info").string(), "arg"});
  cluster.exec->env = {{"REGION", "eu"}};
  cluster.exec->provideClusterInfo = true;
  cluster.caData = "PEM";
  auto answer = run(cluster);
  REQUIRE_MESSAGE(answer.ok(), answer.error().message);
  CHECK(answer->token == "arg-eu");
  Json info = Json::parse(slurp((dir.path / "info").string()));
  CHECK(info["spec"]["interactive"] == false);
  CHECK(info["spec"]["cluster"]["server"] == "https://10.0.0.1:6443");
  CHECK(info["spec"]["cluster"]["certificate-authority-data"] == "UEVN");
}

TEST_CASE("exec plugin: failures say which plugin, what happened, its stderr and the hint") {
  TempDir dir;
  SUBCASE("exits non-zero") {
    std::string plugin = script(dir, "fails", "echo 'token expired, run: login' >&2\nexit 3\n");
    kube::ClusterConfig cluster = clusterWith(plugin);
    cluster.exec->installHint = "install it with apt install plugin";
    auto answer = run(cluster);
    REQUIRE_FALSE(answer.ok());
    CHECK(answer.error().message ==
          "exec credential plugin " + plugin +
              " of user \"robot\": exited with status 3; its standard error: token expired, run: "
              "login; install hint: install it with apt install plugin");
  }
  SUBCASE("not installed") {
    kube::ClusterConfig cluster = clusterWith("nodewarden-test-no-such-plugin");
    cluster.exec->installHint = "see https://example.com/install";
    auto answer = run(cluster);
    REQUIRE_FALSE(answer.ok());
    CHECK(answer.error().message ==
          "exec credential plugin nodewarden-test-no-such-plugin of user \"robot\": executable "
          "nodewarden-test-no-such-plugin not found in $PATH; install hint: see "
          "https://example.com/install");
  }
  SUBCASE("answers nonsense") {
    std::string plugin = script(dir, "nonsense", "echo '{\"apiVersion\": \"v1\"}'\n");
    auto answer = run(clusterWith(plugin));
    REQUIRE_FALSE(answer.ok());
    CHECK(answer.error().message ==
          "exec credential plugin " + plugin +
              " of user \"robot\": the plugin is configured for client.authentication.k8s.io/v1 "
              "but answered v1");
  }
  SUBCASE("runs too long: killed with what it started") {
    std::string plugin = script(dir, "slow", "sleep 30 &\nsleep 30\n");
    const auto began = std::chrono::steady_clock::now();
    auto answer = run(clusterWith(plugin), kube::ExecRunOptions{false, 300ms});
    REQUIRE_FALSE(answer.ok());
    CHECK(answer.error().message ==
          "exec credential plugin " + plugin +
              " of user \"robot\": did not finish within 300 ms and was killed");
    CHECK(std::chrono::steady_clock::now() - began < 15s);  // not the 30 s of its sleeps
  }
  SUBCASE("interactiveMode Always without a terminal") {
    std::string plugin = script(dir, "interactive", "exit 0\n");
    kube::ClusterConfig cluster = clusterWith(plugin);
    cluster.exec->interactiveMode = kube::ExecConfig::Interactive::Always;
    auto answer = run(cluster);
    REQUIRE_FALSE(answer.ok());
    CHECK(answer.error().message ==
          "exec credential plugin " + plugin +
              " of user \"robot\": interactiveMode is Always but standard input is not a "
              "terminal (the agent and the webhook never have one)");
  }
}

TEST_CASE("exec plugin: destroying the run kills the plugin and calls nothing") {
  TempDir dir;
  std::string marker = (dir.path / "still-running").string();
  std::string plugin = script(dir, "slow", "sleep 2\ntouch '" + marker + "'\n");
  boost::asio::io_context io;
  bool called = false;
  auto handle = kube::ExecRun::start(io, clusterWith(plugin), {},
                                     [&](Result<kube::ExecCredential>) { called = true; });
  io.run_for(100ms);
  handle.reset();
  io.run_for(100ms);
  CHECK_FALSE(called);
  // Killed, so it never gets to write the marker (its sleep would end after 2 s).
  struct stat st {};
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < deadline) io.run_for(100ms);
  CHECK(::stat(marker.c_str(), &st) != 0);
}
