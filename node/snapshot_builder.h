// Observe, part two: the snapshot the policy decides on, built from what the pod source knows
// (pod objects, the Node object if any, priority classes, PDBs) and what the cgroups say
// (the scan). A pure function of its inputs: no I/O, no clock, no logging — the caller logs
// what `withoutObject` reports (tests/node/snapshot_builder_test.cpp).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "node/pod_source.h"
#include "policy/model.h"

namespace nodewarden::node {

struct SnapshotInputs {
  const PodSet* pods = nullptr;              // the pod source's current set
  const policy::Summary* summary = nullptr;  // the scan: node and pod figures
  // Pod cgroups found on the node: UID → path below the hierarchy root.
  std::map<std::string, std::string> podCgroups;
  std::string nodeName;                 // when the source has no Node object
  std::vector<std::string> conditions;  // node conditions this agent observes now
  unsigned cpus = 1;                    // the machine's CPUs, for a made-up Node
};

struct BuiltSnapshot {
  policy::Snapshot snapshot;
  // Pod cgroups without a pod object (UID → cgroup path): they still use memory, so they
  // rank as priority 0 with no requests, in the namespace "unknown".
  std::map<std::string, std::string> withoutObject;
};

// The whole snapshot. Without a Node object the node is made up from the kernel: capacity
// from the CPUs and the node's memory, allocatable memory from the kubepods limit when there
// is one, the kubelet's default of 110 pods. Every pod of the set is this node's. A pod with
// one container is given its pod's working set as that container's (the kubelet's eviction
// message names containers; cgroups only give pods).
BuiltSnapshot buildSnapshot(const SnapshotInputs& inputs);

// The Node object when the source has none, as buildSnapshot makes it from the kernel's
// figures.
policy::Node madeUpNode(const std::string& name, const policy::NodeStats& stats, unsigned cpus);

// The object of a pod cgroup without one, as buildSnapshot makes it (resolved).
policy::Pod podWithoutObject(const std::string& uid, const std::string& nodeName,
                             const std::vector<policy::PriorityClass>& classes);

// cgroups give usage per pod: a pod with one container used all of it in that container
// (the kubelet's eviction message names containers). Fills `stats`' container from its pod
// figures when `pod` has exactly one container and the stats name none.
void attributeToSoleContainer(policy::PodStats& stats, const policy::Pod& pod);

}  // namespace nodewarden::node
