#include "node/snapshot_builder.h"

#include <algorithm>
#include <set>
#include <string_view>

namespace nodewarden::node {

policy::Node madeUpNode(const std::string& name, const policy::NodeStats& stats, unsigned cpus) {
  policy::Node node;
  node.name = name;
  node.hasAllocatable = true;
  node.capacity["cpu"] =
      policy::Quantity::fromValue(std::max(1u, cpus), policy::QuantityFormat::DecimalSI);
  node.capacity["pods"] = policy::Quantity::fromValue(110, policy::QuantityFormat::DecimalSI);
  if (stats.memoryAvailableBytes && stats.memoryWorkingSetBytes) {
    node.capacity["memory"] = policy::Quantity::fromValue(
        std::int64_t(*stats.memoryAvailableBytes + *stats.memoryWorkingSetBytes),
        policy::QuantityFormat::BinarySI);
  }
  node.allocatable = node.capacity;
  if (stats.podsMemoryAvailableBytes && stats.podsMemoryWorkingSetBytes) {
    node.allocatable["memory"] = policy::Quantity::fromValue(
        std::int64_t(*stats.podsMemoryAvailableBytes + *stats.podsMemoryWorkingSetBytes),
        policy::QuantityFormat::BinarySI);
  }
  return node;
}

namespace {

// The object of a pod cgroup without one, before it is resolved.
policy::Pod unresolvedPodWithoutObject(const std::string& uid, const std::string& nodeName) {
  policy::Pod pod;
  pod.ns = "unknown";
  pod.name = uid;
  pod.uid = uid;
  pod.nodeName = nodeName;
  pod.phase = "Running";
  return pod;
}

}  // namespace

policy::Pod podWithoutObject(const std::string& uid, const std::string& nodeName,
                             const std::vector<policy::PriorityClass>& classes) {
  policy::Pod pod = unresolvedPodWithoutObject(uid, nodeName);
  policy::resolvePod(pod, classes);
  return pod;
}

namespace {

void setConditions(policy::Node& node, const std::vector<std::string>& conditions) {
  for (const std::string& condition : conditions) {
    auto it = std::find_if(node.conditions.begin(), node.conditions.end(),
                           [&](const policy::NodeCondition& c) { return c.type == condition; });
    if (it == node.conditions.end()) {
      node.conditions.push_back({condition, "True"});
    } else {
      it->status = "True";
    }
  }
}

// (Pods with several containers need the runtime's container IDs to split usage.)
void attributeToSoleContainers(policy::Snapshot& snapshot, const std::string& nodeName) {
  std::map<std::string_view, const policy::Pod*> byUid;
  for (const policy::Pod& pod : snapshot.pods) byUid.emplace(pod.uid, &pod);
  for (policy::PodStats& stats : snapshot.stats[nodeName].pods) {
    auto it = byUid.find(stats.uid);
    if (it != byUid.end()) attributeToSoleContainer(stats, *it->second);
  }
}

}  // namespace

void attributeToSoleContainer(policy::PodStats& stats, const policy::Pod& pod) {
  if (!stats.memoryWorkingSetBytes || !stats.containers.empty()) return;
  if (pod.containers.size() != 1) return;
  policy::ContainerStats container;
  container.name = pod.containers[0].name;
  container.memoryWorkingSetBytes = stats.memoryWorkingSetBytes;
  stats.containers.push_back(std::move(container));
}

BuiltSnapshot buildSnapshot(const SnapshotInputs& inputs) {
  const PodSet& set = *inputs.pods;
  BuiltSnapshot built;
  policy::Snapshot& snapshot = built.snapshot;
  snapshot.priorityClasses = set.priorityClasses;
  snapshot.podDisruptionBudgets = set.podDisruptionBudgets;

  policy::Node node =
      set.node ? *set.node : madeUpNode(inputs.nodeName, inputs.summary->node, inputs.cpus);
  setConditions(node, inputs.conditions);
  const std::string nodeName = node.name;
  snapshot.nodes.push_back(std::move(node));

  std::set<std::string, std::less<>> known;
  for (const policy::Pod& pod : set.pods) {
    policy::Pod copy = pod;
    copy.nodeName = nodeName;
    known.insert(copy.uid);
    snapshot.pods.push_back(std::move(copy));
  }
  std::vector<policy::Pod> unknown;
  for (const auto& [uid, path] : inputs.podCgroups) {
    if (known.contains(uid)) continue;
    // Resolved below, together (resolvePods numbers the pods it resolves as one set).
    unknown.push_back(unresolvedPodWithoutObject(uid, nodeName));
    built.withoutObject.emplace(uid, path);
  }
  policy::resolvePods(unknown, snapshot.priorityClasses);
  for (policy::Pod& pod : unknown) snapshot.pods.push_back(std::move(pod));
  snapshot.stats[nodeName] = *inputs.summary;
  attributeToSoleContainers(snapshot, nodeName);
  return built;
}

}  // namespace nodewarden::node
