// node/live_view.h: what the flight recorder samples every cycle (recorded()) is the pod list
// of the admission snapshot (snapshot()) — the same pods in the same order with the same
// figures — without a copy: the source's objects and the figures the agent writes in place.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cgroups/detect.h"
#include "cgroups/pods.h"
#include "node/live_view.h"
#include "tests/support/cgroup_tree.h"

using namespace nodewarden;
using namespace nodewarden::node;
using namespace nodewarden::testing;

namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;
const std::string kRunning = "00000000-0000-0000-0000-00000000000a";
const std::string kEnded = "00000000-0000-0000-0000-00000000000b";
const std::string kNoObject = "00000000-0000-0000-0000-00000000000c";
const std::string kNoCgroup = "00000000-0000-0000-0000-00000000000d";

policy::Pod pod(const std::string& name, const std::string& uid, const std::string& phase) {
  policy::Pod p;
  p.name = name;
  p.ns = "default";
  p.uid = uid;
  p.phase = phase;
  p.nodeName = "node-1";
  return p;
}

cgroups::Hierarchy hierarchyOf(const CgroupTree& tree) {
  cgroups::DiscoverOptions discover;
  discover.root = tree.path("cg").string();
  discover.useLibcgroup = false;
  auto h = cgroups::discoverHierarchy(discover);
  REQUIRE(h);
  return *h;
}

// The snapshot's figures of `uid`, nullptr when it has none.
const policy::PodStats* snapshotFigures(const policy::Snapshot& snapshot, const std::string& uid) {
  for (const policy::PodStats& s : snapshot.stats.at(snapshot.nodes.at(0).name).pods) {
    if (s.uid == uid) return &s;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("the recorder's pods are the admission snapshot's, in its order, copying none") {
  // Three pod cgroups: one with a running pod's object, one whose object has ended, one with
  // no object; and a pod object with no cgroup.
  CgroupTree tree({dir("cg", {file("cgroup.controllers", "cpu memory pids\n"),
                              dir("kubepods", {file("cgroup.controllers", "cpu memory pids\n"),
                                               podV2(kRunning, podFiles(10 * kMiB)),
                                               podV2(kEnded, podFiles(20 * kMiB)),
                                               podV2(kNoObject, podFiles(30 * kMiB))})})});
  cgroups::PodCgroups index(hierarchyOf(tree), "kubepods");
  REQUIRE(index.refresh());
  REQUIRE(index.size() == 3);

  PodSet set;
  set.pods = {pod("no-cgroup", kNoCgroup, "Running"), pod("running", kRunning, "Running"),
              pod("ended", kEnded, "Succeeded")};
  policy::resolvePods(set.pods, set.priorityClasses);

  LiveView view;
  view.rebuild(set, index, "node-1", 2);
  REQUIRE(view.figures(kRunning) != nullptr);
  view.figures(kRunning)->memoryWorkingSetBytes = 10 * kMiB;
  view.figures(kEnded)->memoryWorkingSetBytes = 20 * kMiB;
  view.figures(kNoObject)->memoryWorkingSetBytes = 30 * kMiB;
  CHECK(view.figures(kNoCgroup) == nullptr);

  const policy::Snapshot snapshot = view.snapshot(set, {});
  const std::vector<RecordedPod>& recorded = view.recorded();
  REQUIRE(recorded.size() == snapshot.pods.size());
  REQUIRE(recorded.size() == 4);
  for (std::size_t i = 0; i < recorded.size(); ++i) {
    CAPTURE(i);
    const policy::Pod& copy = snapshot.pods[i];
    CHECK(recorded[i].pod->uid == copy.uid);
    CHECK(recorded[i].pod->key == copy.key);
    CHECK(recorded[i].pod->priority == copy.priority);
    CHECK(recorded[i].pod->qos == copy.qos);
    const policy::PodStats* figures = snapshotFigures(snapshot, copy.uid);
    REQUIRE((recorded[i].figures == nullptr) == (figures == nullptr));
    if (figures != nullptr) {
      CHECK(recorded[i].figures->memoryWorkingSetBytes == figures->memoryWorkingSetBytes);
    }
  }
  // The set's objects themselves, in the set's order, then the made-up one.
  CHECK(recorded[0].pod == &set.pods[0]);
  CHECK(recorded[1].pod == &set.pods[1]);
  CHECK(recorded[2].pod == &set.pods[2]);  // ended: its object, as the snapshot has it
  CHECK(recorded[3].pod->uid == kNoObject);
  CHECK(recorded[3].pod->ns == "unknown");
  CHECK(recorded[0].figures == nullptr);  // no cgroup, no figures

  // A figure read anew is where the recorder looks, without a rebuild.
  view.figures(kRunning)->memoryWorkingSetBytes = 15 * kMiB;
  CHECK(view.recorded()[1].figures->memoryWorkingSetBytes == 15 * kMiB);

  // A pod cgroup gone: the next rebuild leaves it out.
  tree.remove("cg/kubepods/pod" + kNoObject);
  REQUIRE(index.refresh());
  view.rebuild(set, index, "node-1", 2);
  CHECK(view.recorded().size() == 3);
  CHECK(view.snapshot(set, {}).pods.size() == 3);
}
