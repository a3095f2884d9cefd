// The lane's own proof that its control plane is the real one: the release go.mod names on
// /version, a Node reported as a kubelet reports it, and pods the real kube-scheduler binds
// (or, when nothing fits, leaves Pending with its own reason).
#include <doctest/doctest.h>

#include <string>

#include "tests/cluster/cluster_env.h"
#include "tests/cluster/lane_objects.h"

using nodewarden::cluster::Cluster;
using nodewarden::cluster::Json;

namespace lane = nodewarden::cluster;

namespace {

// A pod requesting `cpu` and 64Mi, for the default scheduler.
Json schedulerPod(const std::string& name, const std::string& cpu) {
  lane::PodShape shape;
  shape.memory = "64Mi";
  shape.cpu = cpu;
  return lane::lanePod("default", name, shape);
}

}  // namespace

TEST_CASE("the lane's control plane is the real one, and its scheduler binds pods") {
  Cluster cluster;
  MESSAGE("control plane ready in " << cluster.readySeconds() << " s");

  // /version answers the release go.mod requires, stamped as upstream's build stamps it.
  const Json version = cluster.kubectlJson("get --raw /version");
  CHECK(version["gitVersion"] == nodewarden::cluster::kubernetesRelease());
  CHECK(cluster.info()["version"] == nodewarden::cluster::kubernetesRelease());
  CHECK(version["gitTreeState"] == "clean");

  // A Node, then its status through the status subresource, as a kubelet registers and
  // reports. The TaintNodesByCondition admission plugin gives every new Node the not-ready
  // taint; the real node-lifecycle controller removes it once Ready is True and the Lease
  // is renewed (the launcher renews it, as a kubelet would).
  const Json created = cluster.create(lane::laneNode("lane-node"));
  CHECK(created["metadata"]["uid"].get<std::string>().size() > 0);
  cluster.replaceStatus("/api/v1/nodes/lane-node", lane::laneNodeStatus("lane-node", "4Gi"));
  Json node;
  const bool untainted = cluster.waitUntil(
      [&] {
        node = cluster.kubectlJson("get node lane-node -o json");
        for (const auto& taint : node["spec"].value("taints", Json::array())) {
          if (taint["key"] == "node.kubernetes.io/not-ready") return false;
        }
        return true;
      },
      120);
  REQUIRE_MESSAGE(untainted, node.dump(2) << cluster.logTail("kube-controller-manager"));
  CHECK(node["status"]["allocatable"]["cpu"] == "2");
  // The node's Lease, renewed by the launcher as a kubelet renews it.
  Json lease;
  REQUIRE(cluster.waitUntil(
      [&] {
        const auto got = cluster.kubectl("get lease lane-node -n kube-node-lease -o json");
        if (got.status == 0) lease = Json::parse(got.out);
        return got.status == 0;
      },
      30));
  CHECK(lease["spec"]["holderIdentity"] == "lane-node");
  CHECK(lease["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]);

  // A pod that fits: the real scheduler binds it and says so in an Event of its own.
  cluster.create(schedulerPod("fits", "500m"));
  Json pod;
  const bool bound = cluster.waitUntil(
      [&] {
        pod = cluster.kubectlJson("get pod fits -n default -o json");
        return pod["spec"].value("nodeName", "") == "lane-node";
      },
      120);
  REQUIRE_MESSAGE(bound, pod.dump(2) << cluster.logTail("kube-scheduler"));
  bool scheduledCondition = false;
  for (const auto& condition : pod["status"]["conditions"]) {
    if (condition["type"] == "PodScheduled") scheduledCondition = condition["status"] == "True";
  }
  CHECK(scheduledCondition);
  Json events;
  const bool recorded = cluster.waitUntil(
      [&] {
        events = cluster.kubectlJson(
            "get events -n default --field-selector involvedObject.name=fits,reason=Scheduled -o "
            "json");
        return !events["items"].empty();
      },
      60);
  REQUIRE(recorded);
  const Json& scheduled = events["items"][0];
  CHECK(scheduled.value("reportingComponent", "") == "default-scheduler");
  CHECK(scheduled["message"].get<std::string>().find("to lane-node") != std::string::npos);

  // A pod that cannot fit (3 cpu on a 2-cpu node, 500m taken): the scheduler leaves it
  // Pending and says why, in its own words.
  cluster.create(schedulerPod("too-big", "3"));
  std::string message;
  const bool refused = cluster.waitUntil(
      [&] {
        pod = cluster.kubectlJson("get pod too-big -n default -o json");
        for (const auto& condition : pod["status"].value("conditions", Json::array())) {
          if (condition["type"] == "PodScheduled" && condition["status"] == "False" &&
              condition.value("reason", "") == "Unschedulable") {
            message = condition.value("message", "");
            return true;
          }
        }
        return false;
      },
      120);
  REQUIRE_MESSAGE(refused, pod.dump(2));
  CHECK(pod["spec"].value("nodeName", "") == "");
  CHECK_MESSAGE(message.find("Insufficient cpu") != std::string::npos, message);
}
