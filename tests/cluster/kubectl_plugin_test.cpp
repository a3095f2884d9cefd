// `kubectl nodewarden …` against the real API server: the real kubectl finds the binary as
// kubectl-nodewarden on the PATH and runs it with its own environment ($KUBECONFIG), and
// the plugin answers byte for byte what `nodewarden explain --snapshot` answers over
// `kubectl get … -o json` of the same objects, stats included (through the node proxy).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/cluster/cluster_env.h"

using nodewarden::cluster::Cluster;
using nodewarden::cluster::ClusterOptions;
using nodewarden::cluster::example;
using nodewarden::cluster::Json;
using nodewarden::cluster::readJson;
using nodewarden::cluster::Run;

namespace {}  // namespace

TEST_CASE("kubectl nodewarden explain answers over $KUBECONFIG's real cluster as --snapshot does") {
  ClusterOptions options;
  options.kubelets = {"node-1"};
  Cluster cluster(options);
  nodewarden::testing::TempDir files("nw-kubectl-plugin");
  const std::string bin = (files.path / "bin").string();
  std::filesystem::create_directory(bin);
  std::filesystem::create_symlink(NODEWARDEN_BINARY, bin + "/kubectl-nodewarden");

  nodewarden::cluster::loadSnapshot(cluster, readJson(example("current/snapshot.json")));
  const std::string snapshotFile =
      files.write("kubectl-snapshot.json", nodewarden::cluster::kubectlSnapshot(cluster).dump(2));

  // kubectl's environment: the plugin's directory first on the PATH, the cluster's
  // kubeconfig in $KUBECONFIG, a HOME of its own.
  const char* path = std::getenv("PATH");
  const std::map<std::string, std::string> env = {
      {"PATH", bin + ":" + (path != nullptr ? path : "/usr/bin:/bin")},
      {"KUBECONFIG", cluster.kubeconfig()},
      {"HOME", files.path.string()}};
  const std::string kubectl = nodewarden::cluster::kubectlPath();
  const Run list = nodewarden::cluster::run({kubectl, "plugin", "list"}, "", env);
  CHECK_MESSAGE(list.out.find(bin + "/kubectl-nodewarden") != std::string::npos,
                list.out << list.err);

  const std::string besteffort = example("current/besteffort-pod.json");
  const std::vector<std::vector<std::string>> commands = {
      {"explain", "eviction", "--node", "node-1"},
      {"explain", "eviction"},  // one node: --node may be omitted
      {"explain", "admission", "--node", "node-1", "--pod", besteffort},
      {"explain", "preemption", "--pod", besteffort},
  };
  for (const auto& command : commands) {
    for (const std::string format : {"json", "table"}) {
      std::vector<std::string> plugin = {kubectl, "nodewarden"}, file = {NODEWARDEN_BINARY};
      plugin.insert(plugin.end(), command.begin(), command.end());
      file.insert(file.end(), command.begin(), command.end());
      plugin.insert(plugin.end(), {"-o", format});
      file.insert(file.end(), {"--snapshot", snapshotFile, "-o", format});
      CAPTURE(command[1]);
      CAPTURE(format);
      const Run fromPlugin = nodewarden::cluster::run(plugin, "", env);
      const Run fromFile = nodewarden::cluster::run(file);
      REQUIRE_MESSAGE(fromFile.status == 0, fromFile.err);
      REQUIRE_MESSAGE(fromPlugin.status == 0, fromPlugin.err);
      CHECK(fromPlugin.out == fromFile.out);
    }
  }
  // The stats came through the API server's node proxy, from the stand-in kubelet.
  const std::string requests = cluster.kubeletRequests("node-1");
  CHECK_MESSAGE(
      requests.find("GET /stats/summary kube-apiserver-kubelet-client") != std::string::npos,
      requests);

  // kubectl's own --context, as a plugin takes it (the launcher's context is nodewarden-test).
  const Run context = nodewarden::cluster::run(
      {kubectl, "nodewarden", "explain", "eviction", "--context", "nodewarden-test", "-o", "json"},
      "", env);
  REQUIRE_MESSAGE(context.status == 0, context.err);
  const Run fromFile = nodewarden::cluster::run(
      {NODEWARDEN_BINARY, "explain", "eviction", "--snapshot", snapshotFile, "-o", "json"});
  CHECK(context.out == fromFile.out);
}
