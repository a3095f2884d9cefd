// `explain --kubeconfig` over more pods than one page: nodewarden lists 500 at a time, as
// kubectl does, and follows the real API server's continue tokens to the last page.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "tests/cluster/cluster_env.h"

using nodewarden::cluster::Cluster;
using nodewarden::cluster::ClusterOptions;
using nodewarden::cluster::Json;
using nodewarden::cluster::Run;

TEST_CASE("explain --kubeconfig reads every page of a real list (more than 500 pods)") {
  ClusterOptions options;
  options.kubelets = {"node-1"};
  Cluster cluster(options);
  nodewarden::testing::TempDir files("nw-explain-paging");

  std::ifstream in(std::string(NODEWARDEN_SOURCE_ROOT) + "/examples/current/snapshot.json");
  Json snapshot = Json::parse(in);
  // 520 more pods on node-1, each with a working set in the stats, so each is ranked.
  constexpr int kExtra = 520;
  for (int i = 0; i < kExtra; ++i) {
    const std::string name = "filler-" + std::to_string(i);
    snapshot["pods"].push_back(
        {{"metadata", {{"name", name}, {"namespace", "fill"}}},
         {"spec", {{"nodeName", "node-1"}, {"containers", Json::array({{{"name", "main"}}})}}},
         {"status", {{"phase", "Running"}, {"startTime", "2026-11-20T11:00:00Z"}}}});
    snapshot["stats"]["node-1"]["pods"].push_back(
        {{"podRef", {{"name", name}, {"namespace", "fill"}}},
         {"memory", {{"workingSetBytes", 1048576 * (i + 1)}}}});
  }
  nodewarden::cluster::loadSnapshot(cluster, snapshot);
  const Json kubectlView = nodewarden::cluster::kubectlSnapshot(cluster);
  REQUIRE(kubectlView["pods"]["items"].size() == kExtra + 3);
  const std::string snapshotFile = files.write("kubectl-snapshot.json", kubectlView.dump());

  const Run live =
      nodewarden::cluster::run({NODEWARDEN_BINARY, "explain", "eviction", "--kubeconfig",
                                cluster.kubeconfig(), "--node", "node-1", "-o", "json"});
  const Run file = nodewarden::cluster::run({NODEWARDEN_BINARY, "explain", "eviction", "--snapshot",
                                             snapshotFile, "--node", "node-1", "-o", "json"});
  REQUIRE_MESSAGE(live.status == 0, live.err);
  REQUIRE_MESSAGE(file.status == 0, file.err);
  CHECK(live.out == file.out);
  CHECK(Json::parse(live.out)["ranking"]["memory"].size() == kExtra + 3);
}
