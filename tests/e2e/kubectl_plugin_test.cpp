// `kubectl nodewarden …`: the binary installed as kubectl-nodewarden is found by a real
// kubectl's plugin discovery and, given no source, reads the cluster as kubectl does
// ($KUBECONFIG) — here the fake API server of tests/kube/ holding examples/current.
// Skips (77) where no kubectl is installed: it is not a dependency of nodewarden.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/kube_env.h"

using namespace nodewarden::e2e;
using nlohmann::json;
using nodewarden::testing::FakeApiServer;
using nodewarden::testing::FakeApiServerOptions;

namespace {

std::string findKubectl() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = dir + "/kubectl";
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

struct Run {
  int status = -1;
  std::string out;
  std::string err;
};

Run shell(const TempDir& files, const std::string& command) {
  const std::string out = files.file("stdout"), err = files.file("stderr");
  const int status = std::system((command + " > '" + out + "' 2> '" + err + "'").c_str());
  auto slurp = [](const std::string& file) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  return Run{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

}  // namespace

TEST_CASE("kubectl nodewarden: plugin discovery, and explain over $KUBECONFIG's cluster") {
  const std::string kubectl = findKubectl();
  if (kubectl.empty()) {
    std::printf("skipped: no kubectl on the PATH (the plugin test needs a real kubectl)\n");
    std::exit(77);
  }
  TempDir files;
  std::filesystem::create_directory(files.file("bin"));
  std::filesystem::create_symlink(NODEWARDEN_BINARY, files.file("bin/kubectl-nodewarden"));

  std::ifstream in(std::string(NODEWARDEN_SOURCE_ROOT) + "/examples/current/snapshot.json");
  const json snapshot = json::parse(in);
  FakeApiServerOptions options;
  options.token = "plugin-token";
  FakeApiServer server(options);
  for (json node : snapshot["nodes"]) server.upsertNode(node);
  for (json pod : snapshot["pods"]) server.upsertPod(pod);
  for (json pc : snapshot["priorityClasses"]) server.upsertPriorityClass(pc);
  for (const auto& [node, summary] : snapshot["stats"].items()) server.setNodeStats(node, summary);
  writeFile(files.file("kubeconfig"), kubeconfigFor(server, "", "plugin-token"));

  // kubectl's own environment: the plugin directory first on the PATH, its kubeconfig.
  const std::string env = "PATH='" + files.file("bin") + "':\"$PATH\" KUBECONFIG='" +
                          files.file("kubeconfig") + "' HOME='" + files.path() + "' ";
  const Run list = shell(files, env + "'" + kubectl + "' plugin list");
  CHECK_MESSAGE(list.out.find(files.file("bin/kubectl-nodewarden")) != std::string::npos,
                list.out << list.err);

  const Run version = shell(files, env + "'" + kubectl + "' nodewarden version");
  REQUIRE_MESSAGE(version.status == 0, version.err);
  CHECK(version.out.starts_with("nodewarden "));

  const Run fromFile =
      shell(files, std::string("'") + NODEWARDEN_BINARY + "' explain eviction --snapshot '" +
                       NODEWARDEN_SOURCE_ROOT + "/examples/current/snapshot.json' -o json");
  REQUIRE_MESSAGE(fromFile.status == 0, fromFile.err);
  const Run live =
      shell(files, env + "'" + kubectl + "' nodewarden explain eviction --node node-1 -o json");
  REQUIRE_MESSAGE(live.status == 0, live.err);
  CHECK(json::parse(live.out) == json::parse(fromFile.out));
  // kubectl's --context, as a plugin takes it.
  const Run context =
      shell(files, env + "'" + kubectl +
                       "' nodewarden explain eviction --context e2e --node node-1 -o json");
  REQUIRE_MESSAGE(context.status == 0, context.err);
  CHECK(json::parse(context.out) == json::parse(fromFile.out));
  // Not as a plugin, a source stays required (no cluster is guessed at).
  const Run plain =
      shell(files, env + "'" + NODEWARDEN_BINARY + "' explain eviction --node node-1");
  CHECK(plain.status == 2);
}
