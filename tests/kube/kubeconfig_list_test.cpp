// kube/config: where the kubeconfig comes from (docs/reference.md §1.10) — --kubeconfig, then
// $KUBECONFIG's files merged by kubectl's rules, then ~/.kube/config, then the in-cluster
// service account for the daemons only — on literal files, with the environment injected.
#include "kube/config.h"
#include "tests/support/temp_dir.h"

#include <doctest/doctest.h>

#include <map>
#include <string>

using nodewarden::kube::loadKubeconfigList;
using nodewarden::kube::resolveClusterConfig;
using nodewarden::kube::ResolveOptions;
using nodewarden::testing::TempDir;

namespace {

// What kubectl merges: the first file to set a name, or current-context, wins.
const char* kFirst =
    "apiVersion: v1\n"
    "clusters:\n"
    "- name: shared\n"
    "  cluster: {server: 'https://10.0.0.1:6443', insecure-skip-tls-verify: true}\n"
    "contexts:\n"
    "- name: dev\n"
    "  context: {cluster: shared, user: alice, namespace: first}\n"
    "users:\n"
    "- name: alice\n"
    "  user: {token: alice-from-first}\n";
const char* kSecond =
    "apiVersion: v1\n"
    "current-context: dev\n"
    "clusters:\n"
    "- name: shared\n"
    "  cluster: {server: 'https://10.0.0.2:6443', insecure-skip-tls-verify: true}\n"
    "- name: only-second\n"
    "  cluster: {server: 'https://10.0.0.3:6443', insecure-skip-tls-verify: true}\n"
    "contexts:\n"
    "- name: dev\n"
    "  context: {cluster: only-second, user: bob}\n"
    "- name: prod\n"
    "  context: {cluster: only-second, user: bob}\n"
    "users:\n"
    "- name: alice\n"
    "  user: {token: alice-from-second}\n"
    "- name: bob\n"
    "  user: {tokenFile: bob.token}\n";

struct Env {
  std::map<std::string, std::string> vars;
  std::function<const char*(const char*)> get() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

}  // namespace

TEST_CASE("kubeconfig lists: the first file to set a name or current-context wins") {
  TempDir dir;
  std::string first = dir.write("a/first", kFirst);
  std::string second = dir.write("b/second", kSecond);
  dir.write("b/bob.token", "bob-token\n");

  auto merged = loadKubeconfigList({first, (dir.path / "missing").string(), "", second});
  REQUIRE(merged);
  REQUIRE_MESSAGE(merged->ok(), merged->error().message);
  // current-context from the second file; the context "dev", its cluster and user from the
  // first, which defined them first.
  CHECK((*merged)->host == "10.0.0.1");
  CHECK((*merged)->token == "alice-from-first");
  CHECK((*merged)->namespaceName == "first");
  CHECK((*merged)->description ==
        "kubeconfig " + first + ":" + second + ", context dev (https://10.0.0.1:6443)");

  SUBCASE("a context only the second file has; its relative paths against its own directory") {
    auto prod = loadKubeconfigList({first, second}, std::string("prod"));
    REQUIRE(prod);
    REQUIRE_MESSAGE(prod->ok(), prod->error().message);
    CHECK((*prod)->host == "10.0.0.3");
    CHECK((*prod)->tokenFile == dir.path.string() + "/b/bob.token");
  }
  SUBCASE("the other order") {
    auto swapped = loadKubeconfigList({second, first});
    REQUIRE(swapped);
    REQUIRE_MESSAGE(swapped->ok(), swapped->error().message);
    CHECK((*swapped)->host == "10.0.0.3");
    CHECK((*swapped)->tokenFile == dir.path.string() + "/b/bob.token");
  }
  SUBCASE("no file of the list exists: nothing") {
    CHECK_FALSE(loadKubeconfigList({(dir.path / "x").string(), "", (dir.path / "y").string()}));
  }
  SUBCASE("a file that exists but does not load fails the whole list, as in kubectl") {
    std::string bad = dir.write("bad", "clusters: [\n");
    auto failed = loadKubeconfigList({first, bad, second});
    REQUIRE(failed);
    REQUIRE_FALSE(failed->ok());
    CHECK(failed->error().message.starts_with("kubeconfig " + bad + ": line "));
  }
  SUBCASE("an entry's problem names the file it came from") {
    std::string broken =
        dir.write("broken",
                  "current-context: x\n"
                  "contexts: [{name: x, context: {cluster: shared, user: carol}}]\n"
                  "users: [{name: carol, user: {username: c, password: p}}]\n");
    auto failed = loadKubeconfigList({broken, first});
    REQUIRE(failed);
    REQUIRE_FALSE(failed->ok());
    CHECK(failed->error().message.starts_with("kubeconfig " + broken +
                                              ": users[0].user: basic authentication"));
  }
}

TEST_CASE("resolveClusterConfig: --kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster") {
  TempDir dir;
  std::string first = dir.write("first", kFirst);
  std::string second = dir.write("second", kSecond);
  dir.write("bob.token", "bob-token\n");
  std::string home = dir.write("home/.kube/config", kSecond);
  dir.write("home/.kube/bob.token", "bob\n");
  dir.write("sa/token", "sa-token\n");
  dir.write("sa/ca.crt", "not read here\n");
  Env env;
  env.vars["HOME"] = (dir.path / "home").string();
  ResolveOptions options;
  options.getEnv = env.get();
  options.serviceAccountDir = (dir.path / "sa").string();

  SUBCASE("--kubeconfig: that one file, even with $KUBECONFIG set") {
    env.vars["KUBECONFIG"] = first + ":" + second;
    auto config = resolveClusterConfig(second, options);
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    CHECK(config->host == "10.0.0.3");
  }
  SUBCASE("--kubeconfig naming a file that does not exist is an error") {
    auto config = resolveClusterConfig((dir.path / "absent").string(), options);
    REQUIRE_FALSE(config.ok());
    CHECK(config.error().message ==
          "kubeconfig " + (dir.path / "absent").string() + ": No such file or directory");
  }
  SUBCASE("$KUBECONFIG: its files merged; ~/.kube/config not read") {
    env.vars["KUBECONFIG"] = ":" + first + "::" + second + ":";
    auto config = resolveClusterConfig(std::nullopt, options);
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    CHECK(config->host == "10.0.0.1");
    options.context = "prod";
    auto prod = resolveClusterConfig(std::nullopt, options);
    REQUIRE_MESSAGE(prod.ok(), prod.error().message);
    CHECK(prod->host == "10.0.0.3");
  }
  SUBCASE("an empty $KUBECONFIG is not set: ~/.kube/config") {
    env.vars["KUBECONFIG"] = "";
    auto config = resolveClusterConfig(std::nullopt, options);
    REQUIRE_MESSAGE(config.ok(), config.error().message);
    CHECK(config->description.starts_with("kubeconfig " + home + ", context dev"));
    CHECK(config->tokenFile == dir.path.string() + "/home/.kube/bob.token");
  }
  SUBCASE("no kubeconfig found: in-cluster for the daemons, an error for explain") {
    env.vars["KUBECONFIG"] = (dir.path / "none").string();
    env.vars["KUBERNETES_SERVICE_HOST"] = "10.96.0.1";
    env.vars["KUBERNETES_SERVICE_PORT"] = "443";
    auto daemon = resolveClusterConfig(std::nullopt, options);
    REQUIRE_MESSAGE(daemon.ok(), daemon.error().message);
    CHECK(daemon->description == "in-cluster service account (https://10.96.0.1:443)");
    options.inClusterFallback = false;
    auto cli = resolveClusterConfig(std::nullopt, options);
    REQUIRE_FALSE(cli.ok());
    CHECK(cli.error().message ==
          "no kubeconfig: no file of $KUBECONFIG (" + (dir.path / "none").string() + ") exists");
  }
  SUBCASE("neither, nor in a cluster: says where it looked") {
    env.vars["HOME"] = (dir.path / "nobody").string();
    auto config = resolveClusterConfig(std::nullopt, options);
    REQUIRE_FALSE(config.ok());
    CHECK(config.error().message == "no kubeconfig (no --kubeconfig, $KUBECONFIG is not set and " +
                                        (dir.path / "nobody").string() +
                                        "/.kube/config does not exist): not running in a cluster: "
                                        "KUBERNETES_SERVICE_HOST is not set");
  }
}
