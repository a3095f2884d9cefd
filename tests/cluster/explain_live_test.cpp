// `nodewarden explain … --kubeconfig` against the real API server (docs/reference.md §1): the same
// objects, read through the API (the stats through the node proxy, answered by a stand-in
// kubelet), give byte for byte the output `--snapshot` gives over what `kubectl get … -o
// json` printed of them — for eviction, admission and preemption, as JSON and as a table.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/cluster/cluster_env.h"

using nodewarden::cluster::Cluster;
using nodewarden::cluster::ClusterOptions;
using nodewarden::cluster::example;
using nodewarden::cluster::Json;
using nodewarden::cluster::readJson;
using nodewarden::cluster::Run;

namespace {

std::string slurpFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Run runNodewarden(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {NODEWARDEN_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return nodewarden::cluster::run(argv);
}

// `explain ARGS` over the cluster (--kubeconfig) and over the kubectl snapshot of it
// (--snapshot), as JSON and as a table: each pair the same, byte for byte.
void checkSameAnswers(const Cluster& cluster, const std::string& snapshotFile,
                      const std::vector<std::string>& args, const char* what) {
  for (const std::string format : {"json", "table"}) {
    CAPTURE(what);
    CAPTURE(format);
    std::vector<std::string> live = {"explain"}, file = {"explain"};
    live.insert(live.end(), args.begin(), args.end());
    file.insert(file.end(), args.begin(), args.end());
    live.insert(live.end(), {"--kubeconfig", cluster.kubeconfig(), "-o", format});
    file.insert(file.end(), {"--snapshot", snapshotFile, "-o", format});
    const Run fromCluster = runNodewarden(live);
    const Run fromFile = runNodewarden(file);
    REQUIRE_MESSAGE(fromFile.status == 0, fromFile.err);
    REQUIRE_MESSAGE(fromCluster.status == 0, fromCluster.err);
    CHECK(fromCluster.out == fromFile.out);
    if (format == "json") CHECK(Json::accept(fromCluster.out));
  }
}

}  // namespace

TEST_CASE("explain --kubeconfig answers as --snapshot over kubectl's view of the real cluster") {
  // node-1 of examples/current and both nodes of the preemption example have a stand-in
  // kubelet; only node-1 has stats (the others' proxy answers 404, on both paths alike).
  ClusterOptions options;
  options.kubelets = {"node-1", "node-2"};
  Cluster cluster(options);
  nodewarden::testing::TempDir files("nw-explain-live");

  // examples/current: memory pressure on node-1 (stats through the node proxy), an
  // in-place resize, pod-level resources.
  const auto uids =
      nodewarden::cluster::loadSnapshot(cluster, readJson(example("current/snapshot.json")));
  const std::string snapshotFile =
      files.write("kubectl-snapshot.json", nodewarden::cluster::kubectlSnapshot(cluster).dump(2));

  checkSameAnswers(cluster, snapshotFile, {"eviction", "--node", "node-1"}, "eviction");
  // The answer is about the stats the stand-in served through the API server: pressure,
  // and a victim.
  const Run eviction = runNodewarden({"explain", "eviction", "--kubeconfig", cluster.kubeconfig(),
                                      "--node", "node-1", "-o", "json"});
  const Json verdict = Json::parse(eviction.out);
  REQUIRE_MESSAGE(!verdict["evict"].empty(), eviction.out);
  // And it is the example's own answer: nothing the example states was lost on the way
  // through the real API server (the in-place resize's allocated resources included).
  const Run fromExample = runNodewarden(
      {"explain", "eviction", "--snapshot", example("current/snapshot.json"), "-o", "json"});
  CHECK(eviction.out == fromExample.out);
  const std::string requests = cluster.kubeletRequests("node-1");
  CHECK_MESSAGE(
      requests.find("GET /stats/summary kube-apiserver-kubelet-client") != std::string::npos,
      requests);

  checkSameAnswers(
      cluster, snapshotFile,
      {"admission", "--node", "node-1", "--pod", example("current/besteffort-pod.json")},
      "admission, BestEffort pod");
  checkSameAnswers(
      cluster, snapshotFile,
      {"admission", "--node", "node-1", "--pod", example("current/pod-level-pod.json")},
      "admission, pod-level resources");

  // --save-snapshot keeps what was read: the same answer again from the file.
  const Run saved =
      runNodewarden({"explain", "eviction", "--kubeconfig", cluster.kubeconfig(), "--node",
                     "node-1", "--save-snapshot", files.path / "saved.json", "-o", "json"});
  REQUIRE_MESSAGE(saved.status == 0, saved.err);
  const Run again = runNodewarden({"explain", "eviction", "--snapshot", files.path / "saved.json",
                                   "--node", "node-1", "-o", "json"});
  CHECK(again.out == saved.out);
  CHECK(saved.out == eviction.out);
  CHECK(uids.size() == 3);

  // A user with a ServiceAccount token (the TokenRequest API, as `kubectl create token`):
  // each right RBAC refuses is named in kubectl's words, and the rights explain needs —
  // list on nodes, pods, priorityclasses, poddisruptionbudgets; get on nodes/proxy — are
  // enough for the same answer as the cluster admin's.
  cluster.kubectlJson("create serviceaccount explainer -n default -o json");
  const Run token = cluster.kubectl("create token explainer -n default");
  REQUIRE_MESSAGE(token.status == 0, token.err);
  const std::string tokenKubeconfig = files.write(
      "token.kubeconfig",
      "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority: " +
          cluster.info()["caFile"].get<std::string>() + "\n    server: " + cluster.server() +
          "\n  name: lane\ncontexts:\n- context:\n    cluster: lane\n    user: explainer\n"
          "  name: lane\ncurrent-context: lane\nusers:\n- name: explainer\n  user:\n    token: " +
          token.out.substr(0, token.out.find('\n')) + "\n");
  // A token the server does not know: refused as kubectl is refused, and not blamed on RBAC.
  std::string wrongToken = slurpFile(tokenKubeconfig);
  wrongToken.replace(wrongToken.find("token: ") + 7, std::string::npos, "not-a-token\n");
  const Run unknown =
      runNodewarden({"explain", "eviction", "--kubeconfig",
                     files.write("wrong-token.kubeconfig", wrongToken), "--node", "node-1"});
  CHECK(unknown.status == 1);
  CHECK_MESSAGE(unknown.err.find("401 Unauthorized") != std::string::npos, unknown.err);
  CHECK_MESSAGE(
      unknown.err.find("did not accept the kubeconfig's credentials") != std::string::npos,
      unknown.err);
  CHECK(unknown.err.find("auth can-i") == std::string::npos);
  const std::vector<std::string> asExplainer = {
      "explain", "eviction", "--kubeconfig", tokenKubeconfig, "--node", "node-1", "-o", "json"};
  const Run refused = runNodewarden(asExplainer);
  CHECK(refused.status == 1);
  CHECK_MESSAGE(refused.err.find("403") != std::string::npos, refused.err);
  CHECK_MESSAGE(refused.err.find(
                    "nodewarden needs list on nodes; check with: kubectl auth can-i list nodes") !=
                    std::string::npos,
                refused.err);
  CHECK(refused.out.empty());
  cluster.kubectlJson(
      "create clusterrole explain-lists --verb=list "
      "--resource=nodes,pods,priorityclasses.scheduling.k8s.io,poddisruptionbudgets.policy -o "
      "json");
  cluster.kubectlJson(
      "create clusterrolebinding explainer-lists --clusterrole=explain-lists "
      "--serviceaccount=default:explainer -o json");
  // RBAC changes reach the authorizer through its informer: wait until they have.
  Run listsOnly;
  REQUIRE(cluster.waitUntil(
      [&] {
        listsOnly = runNodewarden(asExplainer);
        return listsOnly.status == 0;
      },
      60));
  // Without nodes/proxy the stats are missing, said so, and the answer changes.
  CHECK_MESSAGE(listsOnly.err.find("nodewarden needs get on nodes/proxy") != std::string::npos,
                listsOnly.err);
  CHECK(listsOnly.out != eviction.out);
  cluster.kubectlJson("create clusterrole explain-proxy --verb=get --resource=nodes/proxy -o json");
  cluster.kubectlJson(
      "create clusterrolebinding explainer-proxy --clusterrole=explain-proxy "
      "--serviceaccount=default:explainer -o json");
  Run allowed;
  REQUIRE(cluster.waitUntil(
      [&] {
        allowed = runNodewarden(asExplainer);
        return allowed.status == 0 && allowed.err.empty();
      },
      60));
  CHECK(allowed.out == eviction.out);
}

TEST_CASE(
    "explain preemption --kubeconfig: budgets as the real disruption controller computed them") {
  ClusterOptions options;
  options.kubelets = {"node-1", "node-2"};
  Cluster cluster(options);
  nodewarden::testing::TempDir files("nw-explain-live");

  // Two budgets over bare pods (minAvailable): their status comes from the real
  // disruption controller, not from the example file.
  nodewarden::cluster::loadSnapshot(cluster,
                                    readJson(example("preemption/pdb-green-not-blue.json")));
  const Json snapshot = nodewarden::cluster::kubectlSnapshot(cluster);
  for (const auto& pdb : snapshot["podDisruptionBudgets"]["items"]) {
    CAPTURE(pdb["metadata"]["name"]);
    CHECK(pdb["status"]["currentHealthy"] == 3);
    CHECK(pdb["status"]["expectedPods"] == 3);
    CHECK(pdb["status"]["disruptionsAllowed"] == (pdb["metadata"]["name"] == "green" ? 1 : 0));
  }
  const std::string snapshotFile = files.write("kubectl-snapshot.json", snapshot.dump(2));
  checkSameAnswers(cluster, snapshotFile,
                   {"preemption", "--pod", example("preemption/pdb-green-not-blue-pod.json")},
                   "preemption");
  // The budgets' status the real controller computed is the one the example states, so the
  // answer is the example's own: green-1 on node-2 (green allows one disruption, blue none).
  const Run preemption =
      runNodewarden({"explain", "preemption", "--kubeconfig", cluster.kubeconfig(), "--pod",
                     example("preemption/pdb-green-not-blue-pod.json"), "-o", "json"});
  const Run fromExample = runNodewarden(
      {"explain", "preemption", "--snapshot", example("preemption/pdb-green-not-blue.json"),
       "--pod", example("preemption/pdb-green-not-blue-pod.json"), "-o", "json"});
  REQUIRE_MESSAGE(preemption.status == 0, preemption.err);
  CHECK(preemption.out == fromExample.out);
  CHECK(Json::parse(preemption.out)["victims"] == Json::array({"shop/green-1"}));
}
