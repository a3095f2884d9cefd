// `nodewarden explain … --kubeconfig` (docs/reference.md §1): the same objects read from a
// cluster — here the strict fake API server of tests/kube/ on 127.0.0.1 — give the same
// answers as the snapshot file they came from; --save-snapshot keeps what was read.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>
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

struct Run {
  int status = -1;
  std::string out;
  std::string err;
};

Run runBinary(const TempDir& files, const std::string& args) {
  const std::string out = files.file("stdout"), err = files.file("stderr");
  const std::string command =
      std::string("'") + NODEWARDEN_BINARY + "' " + args + " > '" + out + "' 2> '" + err + "'";
  const int status = std::system(command.c_str());
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  return Run{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

json exampleSnapshot() {
  std::ifstream in(std::string(NODEWARDEN_SOURCE_ROOT) + "/examples/current/snapshot.json");
  REQUIRE(in.good());
  return json::parse(in);
}

// The example's objects in the fake API server, as a cluster would hold them.
void load(FakeApiServer& server, const json& snapshot) {
  for (json node : snapshot["nodes"]) {
    node["apiVersion"] = "v1";
    node["kind"] = "Node";
    server.upsertNode(node);
  }
  for (json pod : snapshot["pods"]) {
    pod["apiVersion"] = "v1";
    pod["kind"] = "Pod";
    server.upsertPod(pod);
  }
  for (json pc : snapshot["priorityClasses"]) {
    pc["apiVersion"] = "scheduling.k8s.io/v1";
    pc["kind"] = "PriorityClass";
    server.upsertPriorityClass(pc);
  }
  for (const auto& [node, summary] : snapshot["stats"].items()) server.setNodeStats(node, summary);
}

}  // namespace

TEST_CASE("explain --kubeconfig answers as --snapshot does over the same objects") {
  TempDir files;
  const json snapshot = exampleSnapshot();
  const std::string snapshotFile =
      std::string(NODEWARDEN_SOURCE_ROOT) + "/examples/current/snapshot.json";
  FakeApiServerOptions options;
  options.token = "explain-token";
  FakeApiServer server(options);
  load(server, snapshot);
  writeFile(files.file("kubeconfig"), kubeconfigFor(server, "", "explain-token"));

  const Run fromFile = runBinary(files, "explain eviction --snapshot " + snapshotFile + " -o json");
  REQUIRE_MESSAGE(fromFile.status == 0, fromFile.err);
  const Run live =
      runBinary(files, "explain eviction --kubeconfig " + files.file("kubeconfig") +
                           " --save-snapshot " + files.file("saved.json") + " -o json");
  REQUIRE_MESSAGE(live.status == 0, live.err);
  CHECK(json::parse(live.out) == json::parse(fromFile.out));
  CHECK(json::parse(live.out)["evict"][0]["pod"] == "batch/resizer");

  // What was read, saved, is a snapshot that gives the same answer again.
  const Run saved =
      runBinary(files, "explain eviction --snapshot " + files.file("saved.json") + " -o json");
  REQUIRE_MESSAGE(saved.status == 0, saved.err);
  CHECK(json::parse(saved.out) == json::parse(fromFile.out));

  // Admission over the live cluster: the stats-derived MemoryPressure turns a BestEffort pod
  // away, as over the file.
  const std::string pod =
      std::string(NODEWARDEN_SOURCE_ROOT) + "/examples/current/besteffort-pod.json";
  const Run admitFile = runBinary(files, "explain admission --snapshot " + snapshotFile +
                                             " --node node-1 --pod " + pod + " -o json");
  const Run admitLive =
      runBinary(files, "explain admission --kubeconfig " + files.file("kubeconfig") +
                           " --node node-1 --pod " + pod + " -o json");
  REQUIRE_MESSAGE(admitLive.status == 0, admitLive.err);
  CHECK(json::parse(admitLive.out) == json::parse(admitFile.out));
  CHECK(json::parse(admitLive.out)["reason"] == "Evicted");

  // Every list was paged as kubectl pages (limit=500) and the stats came through the proxy.
  bool summaryRead = false;
  for (const auto& request : server.requests()) {
    if (request.path == "/api/v1/pods") CHECK(request.query.find("limit=500") != std::string::npos);
    if (request.path == "/api/v1/nodes/node-1/proxy/stats/summary") summaryRead = true;
  }
  CHECK(summaryRead);
}

TEST_CASE("explain --kubeconfig: a cluster that cannot be read is exit 1, naming it") {
  TempDir files;
  FakeApiServerOptions options;
  options.token = "right";
  FakeApiServer server(options);
  writeFile(files.file("kubeconfig"), kubeconfigFor(server, "", "wrong"));
  const Run denied = runBinary(files, "explain eviction --kubeconfig " + files.file("kubeconfig"));
  CHECK(denied.status == 1);
  CHECK(denied.err.find("the cluster of " + files.file("kubeconfig")) != std::string::npos);
  CHECK(denied.err.find("401") != std::string::npos);
  // A 401 is the credentials, not a missing right (403: tests/cluster/explain_live_test.cpp,
  // against the real RBAC).
  CHECK(denied.err.find("did not accept the kubeconfig's credentials") != std::string::npos);
  CHECK(denied.err.find("kubectl auth can-i") == std::string::npos);
  CHECK(denied.out.empty());

  const Run both = runBinary(
      files, "explain eviction --kubeconfig " + files.file("kubeconfig") + " --snapshot x.json");
  CHECK(both.status == 2);
  const Run missing = runBinary(files, "explain preemption --pod x.json");
  CHECK(missing.status == 2);
  CHECK(missing.err.find("--snapshot FILE or --kubeconfig FILE") != std::string::npos);
}
