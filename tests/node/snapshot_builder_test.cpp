// node/snapshot_builder.h alone: the snapshot from a pod set and a scan, without I/O.
#include <doctest/doctest.h>

#include "node/snapshot_builder.h"

using namespace nodewarden;
using namespace nodewarden::node;

namespace {

constexpr std::int64_t kGiB = 1024 * 1024 * 1024;

policy::Pod pod(const std::string& name, const std::string& uid, int containers = 1) {
  policy::Pod p;
  p.ns = "default";
  p.name = name;
  p.uid = uid;
  p.phase = "Running";
  for (int i = 0; i < containers; ++i) {
    policy::Container c;
    c.name = "c" + std::to_string(i);
    p.containers.push_back(c);
  }
  return p;
}

policy::Summary summary() {
  policy::Summary s;
  s.node.memoryAvailableBytes = 6 * kGiB;
  s.node.memoryWorkingSetBytes = 2 * kGiB;
  s.node.podsMemoryAvailableBytes = 3 * kGiB;
  s.node.podsMemoryWorkingSetBytes = 1 * kGiB;
  for (const char* uid : {"u1", "u2", "u3"}) {
    policy::PodStats stats;
    stats.uid = uid;
    stats.memoryWorkingSetBytes = 100 << 20;
    s.pods.push_back(stats);
  }
  return s;
}

}  // namespace

TEST_CASE("without a Node object the node is made up from the kernel's figures") {
  PodSet set;
  set.pods = {pod("a", "u1")};
  const policy::Summary scan = summary();
  SnapshotInputs inputs;
  inputs.pods = &set;
  inputs.summary = &scan;
  inputs.podCgroups = {{"u1", "kubepods/podu1"}};
  inputs.nodeName = "worker-1";
  inputs.conditions = {"MemoryPressure"};
  inputs.cpus = 4;
  const BuiltSnapshot built = buildSnapshot(inputs);
  REQUIRE(built.snapshot.nodes.size() == 1);
  const policy::Node& node = built.snapshot.nodes[0];
  CHECK(node.name == "worker-1");
  CHECK(node.capacity.at("cpu").value() == 4);
  CHECK(node.capacity.at("pods").value() == 110);
  CHECK(node.capacity.at("memory").value() == 8 * kGiB);
  CHECK(node.allocatable.at("memory").value() == 4 * kGiB);
  REQUIRE(node.conditions.size() == 1);
  CHECK(node.conditions[0].type == "MemoryPressure");
  CHECK(node.conditions[0].status == "True");
  REQUIRE(built.snapshot.pods.size() == 1);
  CHECK(built.snapshot.pods[0].nodeName == "worker-1");
  CHECK(built.withoutObject.empty());
}

TEST_CASE("the source's Node object is kept, its observed condition set to True") {
  PodSet set;
  policy::Node node;
  node.name = "from-api";
  node.conditions = {{"MemoryPressure", "False"}, {"Ready", "True"}};
  set.node = node;
  const policy::Summary scan = summary();
  SnapshotInputs inputs;
  inputs.pods = &set;
  inputs.summary = &scan;
  inputs.nodeName = "ignored";
  inputs.conditions = {"MemoryPressure"};
  const BuiltSnapshot built = buildSnapshot(inputs);
  const policy::Node& kept = built.snapshot.nodes.at(0);
  CHECK(kept.name == "from-api");
  REQUIRE(kept.conditions.size() == 2);
  CHECK(kept.conditions[0].status == "True");
  CHECK(built.snapshot.stats.count("from-api") == 1);
}

TEST_CASE("pod cgroups without a pod object rank as priority 0 in namespace unknown") {
  PodSet set;
  set.pods = {pod("a", "u1")};
  const policy::Summary scan = summary();
  SnapshotInputs inputs;
  inputs.pods = &set;
  inputs.summary = &scan;
  inputs.podCgroups = {{"u1", "kubepods/podu1"}, {"u2", "kubepods/besteffort/podu2"}};
  inputs.nodeName = "n";
  const BuiltSnapshot built = buildSnapshot(inputs);
  REQUIRE(built.snapshot.pods.size() == 2);
  const policy::Pod& unknown = built.snapshot.pods[1];
  CHECK(unknown.ns == "unknown");
  CHECK(unknown.name == "u2");
  CHECK(unknown.priority == 0);
  CHECK(unknown.nodeName == "n");
  CHECK(built.withoutObject ==
        std::map<std::string, std::string>{{"u2", "kubepods/besteffort/podu2"}});
}

TEST_CASE("a pod with one container gets its pod's working set as the container's") {
  PodSet set;
  set.pods = {pod("one", "u1", 1), pod("two", "u3", 2)};
  const policy::Summary scan = summary();
  SnapshotInputs inputs;
  inputs.pods = &set;
  inputs.summary = &scan;
  inputs.nodeName = "n";
  const BuiltSnapshot built = buildSnapshot(inputs);
  const auto& stats = built.snapshot.stats.at("n").pods;
  REQUIRE(stats.size() == 3);
  REQUIRE(stats[0].containers.size() == 1);
  CHECK(stats[0].containers[0].name == "c0");
  CHECK(stats[0].containers[0].memoryWorkingSetBytes == stats[0].memoryWorkingSetBytes);
  CHECK(stats[1].containers.empty());  // u2: no pod object
  CHECK(stats[2].containers.empty());  // u3: two containers, usage cannot be split
}

TEST_CASE("figures read into the snapshot later get the sole container's share the same way") {
  PodSet set;
  set.pods = {pod("one", "u1", 1), pod("two", "u3", 2)};
  policy::PodStats fresh;
  fresh.uid = "u1";
  fresh.memoryWorkingSetBytes = 7 * kGiB;
  attributeToSoleContainer(fresh, set.pods[0]);
  REQUIRE(fresh.containers.size() == 1);
  CHECK(fresh.containers[0].name == "c0");
  CHECK(fresh.containers[0].memoryWorkingSetBytes == 7 * kGiB);
  // Applied twice, still one container; a pod with two containers gets none.
  attributeToSoleContainer(fresh, set.pods[0]);
  CHECK(fresh.containers.size() == 1);
  policy::PodStats two;
  two.uid = "u3";
  two.memoryWorkingSetBytes = kGiB;
  attributeToSoleContainer(two, set.pods[1]);
  CHECK(two.containers.empty());
  // No working set read: nothing to attribute.
  policy::PodStats none;
  attributeToSoleContainer(none, set.pods[0]);
  CHECK(none.containers.empty());
}
