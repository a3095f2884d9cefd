// The pods the agent decides about, as policy/ sees them (a policy::NodeView), kept up to
// date in place rather than copied every time something changes:
//
//   - the pod objects stay the pod source's (pointed to, never copied);
//   - a pod cgroup without an object gets a made-up one (namespace "unknown", priority 0,
//     no requests), kept here;
//   - each pod's figures, as last read, sit in a map by UID whose entries never move, so a
//     figure read anew is written where every view already points;
//   - the node's figures, and its Node object (the source's, or made up from the kernel's
//     figures as snapshot_builder.h makes one).
//
// rebuild() re-points the view when the pods change (the source's set or the pod cgroups):
// pointer work over the pods, no object copied — cheap enough to run in the cycle that
// decides. snapshot() makes the copy admission needs, only when asked.
//
// Threading: the agent's loop thread.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cgroups/pods.h"
#include "node/pod_source.h"
#include "node/recorder.h"
#include "policy/eviction.h"
#include "policy/model.h"

namespace nodewarden::node {

class LiveView {
 public:
  // The pods changed: the view is pointed at `set`'s objects (which must stay put until the
  // next rebuild) and at a made-up object for each pod cgroup of `index` without one. Figures
  // of pods that stay are kept; a new pod has none until read (it counts 0, as the kubelet
  // counts a pod in its summary without a figure; victims first bounds it). Returns the UIDs of pod
  // cgroups without an object, with their cgroup paths.
  std::map<std::string, std::string> rebuild(const PodSet& set, const cgroups::PodCgroups& index,
                                             const std::string& nodeName, unsigned cpus);
  // The node's figures, every cycle.
  void setNodeStats(const policy::NodeStats& stats);

  // The figures of a pod with a cgroup (to overwrite in place); nullptr for any other UID.
  policy::PodStats* figures(std::string_view uid);
  // Its object (the source's or made up); nullptr for a UID without a cgroup.
  const policy::Pod* pod(std::string_view uid) const;

  // Every pod that runs here (has a cgroup), with its figures; its keyOrder is total.
  const policy::NodeView& all() const { return view_; }
  // The pods of all() that `keep` accepts, in the same order.
  policy::NodeView only(const std::function<bool(std::string_view uid)>& keep) const;

  // The pods a snapshot() would hold, in its order, without a copy: every object of the set
  // of the last rebuild (in its order), then the made-up object of each pod cgroup whose UID
  // the set lacks (by UID); each with its figures (nullptr: a pod without a cgroup). What the
  // flight recorder samples every cycle. Valid until the next rebuild, which gives it a new
  // version.
  const RecordedPods& recorded() const { return recorded_; }

  // A snapshot of the node for admission (a copy of every object): the Node with
  // `conditions`, the pods, priority classes and budgets of `set`, the figures.
  policy::Snapshot snapshot(const PodSet& set, const std::vector<std::string>& conditions) const;

 private:
  struct Entry {
    const policy::Pod* pod = nullptr;
    policy::PodStats figures;
  };
  std::map<std::string, Entry, std::less<>> pods_;           // by UID: every pod cgroup
  std::map<std::string, policy::Pod, std::less<>> unknown_;  // made-up objects, by UID
  policy::NodeStats node_;
  policy::Node madeUp_;  // when the source has no Node object
  std::string nodeName_;
  policy::NodeView view_;
  RecordedPods recorded_;
};

}  // namespace nodewarden::node
