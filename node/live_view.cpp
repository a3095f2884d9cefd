#include "node/live_view.h"

#include <set>
#include <unordered_map>
#include <unordered_set>

#include "node/snapshot_builder.h"

namespace nodewarden::node {

std::map<std::string, std::string> LiveView::rebuild(const PodSet& set,
                                                     const cgroups::PodCgroups& index,
                                                     const std::string& nodeName, unsigned cpus) {
  // Objects: the source's, by UID; pods that ended (Succeeded, Failed) are not on the node.
  std::unordered_map<std::string_view, const policy::Pod*> objects;
  objects.reserve(set.pods.size());
  for (const policy::Pod& pod : set.pods) {
    if (pod.phase == "Succeeded" || pod.phase == "Failed") continue;
    objects.emplace(pod.uid, &pod);
  }
  nodeName_ = set.node ? set.node->name : nodeName;
  if (!set.node) madeUp_ = madeUpNode(nodeName_, node_, cpus);

  // The entries follow the index in place: a pod that stays keeps its entry (and figures).
  std::erase_if(pods_, [&](const auto& entry) { return index.find(entry.first) == nullptr; });
  std::map<std::string, std::string> withoutObject;
  for (const auto& [uid, cgroup] : index.pods()) {
    auto [at, added] = pods_.try_emplace(uid);
    Entry& entry = at->second;
    if (added) entry.figures.uid = uid;  // never read yet: no figures
    if (auto object = objects.find(uid); object != objects.end()) {
      entry.pod = object->second;
      continue;
    }
    auto made = unknown_.find(uid);
    if (made == unknown_.end()) {
      made = unknown_.emplace(uid, podWithoutObject(uid, nodeName_, set.priorityClasses)).first;
    }
    entry.pod = &made->second;
    withoutObject.emplace(uid, cgroup->relativePath);
  }
  std::erase_if(unknown_, [&](const auto& made) {
    auto entry = pods_.find(made.first);
    return entry == pods_.end() || entry->second.pod != &made.second;
  });

  view_.name = nodeName_;
  view_.node = set.node ? &*set.node : &madeUp_;
  view_.stats = &node_;
  view_.pods.clear();
  view_.podStats.clear();
  view_.pods.reserve(pods_.size());
  view_.podStats.reserve(pods_.size());
  for (const auto& [uid, entry] : pods_) {
    view_.pods.push_back(entry.pod);
    view_.podStats.push_back(&entry.figures);
  }
  // Each pod's position by key: the rankings' last tie-break, total over the view.
  policy::assignKeyOrder(view_);

  // As snapshot() lists the pods: the set's objects (ended ones too), then made-up ones.
  ++recorded_.version;
  std::vector<RecordedPod>& recorded = recorded_.pods;
  recorded.clear();
  recorded.reserve(set.pods.size() + unknown_.size());
  std::unordered_set<std::string_view> inSet;
  inSet.reserve(set.pods.size());
  for (const policy::Pod& pod : set.pods) {
    inSet.insert(pod.uid);
    auto entry = pods_.find(pod.uid);
    recorded.push_back({&pod, entry == pods_.end() ? nullptr : &entry->second.figures});
  }
  for (const auto& [uid, entry] : pods_) {
    if (inSet.contains(uid)) continue;
    recorded.push_back({entry.pod, &entry.figures});
  }
  return withoutObject;
}

void LiveView::setNodeStats(const policy::NodeStats& stats) {
  node_ = stats;
}

policy::PodStats* LiveView::figures(std::string_view uid) {
  auto it = pods_.find(uid);
  return it == pods_.end() ? nullptr : &it->second.figures;
}

const policy::Pod* LiveView::pod(std::string_view uid) const {
  auto it = pods_.find(uid);
  return it == pods_.end() ? nullptr : it->second.pod;
}

policy::NodeView LiveView::only(const std::function<bool(std::string_view uid)>& keep) const {
  policy::NodeView kept;
  kept.name = view_.name;
  kept.node = view_.node;
  kept.stats = view_.stats;
  kept.pods.reserve(view_.pods.size());
  kept.podStats.reserve(view_.pods.size());
  kept.keyOrder.reserve(view_.pods.size());
  for (std::size_t i = 0; i < view_.pods.size(); ++i) {
    if (!keep(view_.pods[i]->uid)) continue;
    kept.pods.push_back(view_.pods[i]);
    kept.podStats.push_back(view_.podStats[i]);
    kept.keyOrder.push_back(view_.keyOrder[i]);  // a total order stays total on a subset
  }
  return kept;
}

policy::Snapshot LiveView::snapshot(const PodSet& set,
                                    const std::vector<std::string>& conditions) const {
  policy::Summary summary;
  summary.node = node_;
  SnapshotInputs inputs;
  for (const auto& [uid, entry] : pods_) {
    summary.pods.push_back(entry.figures);
    // The paths only name pods without an object, which rebuild() reported: not kept here.
    inputs.podCgroups.emplace(uid, std::string());
  }
  inputs.pods = &set;
  inputs.summary = &summary;
  inputs.nodeName = nodeName_;
  inputs.conditions = conditions;
  inputs.cpus = view_.node != nullptr && view_.node->capacity.contains("cpu")
                    ? unsigned(view_.node->capacity.at("cpu").value())
                    : 1;
  return buildSnapshot(inputs).snapshot;
}

}  // namespace nodewarden::node
