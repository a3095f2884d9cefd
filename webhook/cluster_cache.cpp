#include "webhook/cluster_cache.h"

#include <algorithm>
#include <set>
#include <utility>

#include "kube/writer.h"  // kube::kubeletConditionFor

namespace nodewarden::webhook {

bool applyNodewardenConditions(policy::Node& node) {
  std::vector<std::string> pressing;
  for (const policy::NodeCondition& c : node.conditions) {
    if (c.status != "True") continue;
    std::string kubelet = kube::kubeletConditionFor(c.type);
    if (!kubelet.empty()) pressing.push_back(std::move(kubelet));
  }
  if (pressing.empty()) return false;
  for (const std::string& type : pressing) {
    auto it = std::find_if(node.conditions.begin(), node.conditions.end(),
                           [&](const policy::NodeCondition& c) { return c.type == type; });
    if (it == node.conditions.end()) {
      node.conditions.push_back({type, "True"});
    } else {
      it->status = "True";
    }
  }
  return true;
}

SnapshotClusterCache::SnapshotClusterCache(policy::Snapshot snapshot)
    : snapshot_(std::move(snapshot)) {
  build();
}

void SnapshotClusterCache::reset(policy::Snapshot snapshot) {
  snapshot_ = std::move(snapshot);
  build();
}

void SnapshotClusterCache::build() {
  policy::resolvePods(snapshot_.pods, snapshot_.priorityClasses);
  for (policy::Node& node : snapshot_.nodes) applyNodewardenConditions(node);
  index_ = policy::buildClusterIndex(snapshot_);
  nodeByName_.clear();
  for (std::size_t i = 0; i < index_.nodes.size(); ++i) {
    nodeByName_.emplace(index_.nodes[i].node->name, i);
  }
  podByKey_.clear();
  for (const policy::Pod& pod : snapshot_.pods) podByKey_.emplace(pod.key, &pod);
}

const policy::Pod* SnapshotClusterCache::findPod(std::string_view key) const {
  auto it = podByKey_.find(key);
  return it == podByKey_.end() ? nullptr : it->second;
}

std::optional<policy::NodeInfo> SnapshotClusterCache::nodeInfo(std::string_view node) const {
  auto it = nodeByName_.find(node);
  if (it == nodeByName_.end()) return std::nullopt;
  return index_.nodes[it->second];
}

policy::NodeInfo SnapshotClusterCache::nodeInfoWith(const policy::Node& node) const {
  policy::NodeInfo info;
  if (auto it = nodeByName_.find(node.name); it != nodeByName_.end())
    info = index_.nodes[it->second];
  info.node = &node;
  return info;
}

// One resolved pod and where it is indexed.
struct StoreClusterCache::Entry {
  policy::Pod pod;
  std::string boundTo;      // the node whose bound_ list holds it, or ""
  std::string nominatedTo;  // the node whose nominated_ list holds it, or ""
};

// Stands between the pods reflector and the pod store: forwards every change and notes
// which keys changed, so refresh() can update those pods alone.
class StoreClusterCache::PodSink final : public kube::StoreSink {
 public:
  explicit PodSink(kube::Store<policy::Pod>& store) : store_(store) {}

  void replace(std::vector<policy::Json> items) override {
    store_.replace(std::move(items));
    relisted = true;
    dirty.clear();
    seenVersion = store_.version();
  }
  void apply(const std::string& type, const policy::Json& object) override {
    const bool current = seenVersion == store_.version();
    const std::uint64_t before = store_.version();
    store_.apply(type, object);
    if (store_.version() != before) {
      std::string key = keyOf(object);
      if (key.empty()) {
        relisted = true;  // cannot tell which pod: rebuild (cannot happen for a stored pod)
      } else {
        dirty.insert(std::move(key));
      }
    }
    // Only when every earlier change went through here too is the dirty set complete.
    if (current) seenVersion = store_.version();
  }

  static std::string keyOf(const policy::Json& object) {
    if (!object.is_object()) return {};
    auto meta = object.find("metadata");
    if (meta == object.end() || !meta->is_object()) return {};
    auto name = meta->find("name");
    auto ns = meta->find("namespace");
    if (name == meta->end() || !name->is_string()) return {};
    if (ns == meta->end() || !ns->is_string()) return {};
    return ns->get<std::string>() + "/" + name->get<std::string>();
  }

  kube::Store<policy::Pod>& store_;
  std::set<std::string> dirty;
  bool relisted = false;
  std::uint64_t seenVersion = 0;
};

StoreClusterCache::StoreClusterCache(kube::Store<policy::Pod>& pods,
                                     kube::Store<policy::Node>& nodes,
                                     kube::Store<policy::PriorityClass>& priorityClasses,
                                     kube::Store<policy::PodDisruptionBudget>& pdbs)
    : podStore_(pods),
      nodeStore_(nodes),
      classStore_(priorityClasses),
      pdbStore_(pdbs),
      sink_(std::make_unique<PodSink>(pods)) {
  sink_->seenVersion = pods.version();
}

StoreClusterCache::~StoreClusterCache() = default;

kube::StoreSink& StoreClusterCache::podSink() {
  return *sink_;
}

void StoreClusterCache::refresh() {
  if (nodeStore_.version() != mappedNodesVersion_) {
    mappedNodes_.clear();
    mappedNodesVersion_ = nodeStore_.version();
  }
  if (!built_ || pdbStore_.version() != pdbsVersion_) {
    pdbs_.clear();
    pdbs_.reserve(pdbStore_.objects().size());
    for (const auto& [key, pdb] : pdbStore_.objects()) pdbs_.push_back(pdb);
    pdbsVersion_ = pdbStore_.version();
  }
  bool rebuild = !built_;
  if (!built_ || classStore_.version() != classesVersion_) {
    classes_.clear();
    classes_.reserve(classStore_.objects().size());
    for (const auto& [name, cls] : classStore_.objects()) classes_.push_back(cls);
    classesVersion_ = classStore_.version();
    rebuild = true;  // every pod's priority may change
  }
  if (!rebuild && podStore_.version() != podsVersion_) {
    // The dirty set is complete only when the sink saw every change up to now.
    rebuild = sink_->relisted || sink_->seenVersion != podStore_.version();
    if (!rebuild) {
      for (const std::string& key : sink_->dirty) updatePod(key);
    }
  }
  if (rebuild) rebuildPods();
  sink_->dirty.clear();
  sink_->relisted = false;
  sink_->seenVersion = podStore_.version();
  podsVersion_ = podStore_.version();
  built_ = true;
}

void StoreClusterCache::rebuildPods() {
  ++fullRebuilds_;
  pods_.clear();
  bound_.clear();
  nominated_.clear();
  pods_.reserve(podStore_.objects().size());
  for (const auto& [key, pod] : podStore_.objects()) {
    auto entry = std::make_unique<Entry>();
    entry->pod = pod;
    policy::resolvePod(entry->pod, classes_);
    index(*entry);
    pods_.emplace(key, std::move(entry));
  }
}

void StoreClusterCache::updatePod(const std::string& key) {
  ++podUpdates_;
  auto it = pods_.find(key);
  if (it != pods_.end()) unindex(*it->second);
  auto stored = podStore_.objects().find(key);
  if (stored == podStore_.objects().end()) {
    if (it != pods_.end()) pods_.erase(it);
    return;
  }
  if (it == pods_.end()) it = pods_.emplace(key, std::make_unique<Entry>()).first;
  Entry& entry = *it->second;
  entry.pod = stored->second;
  policy::resolvePod(entry.pod, classes_);
  index(entry);
}

void StoreClusterCache::index(Entry& entry) {
  const policy::Pod& pod = entry.pod;
  entry.boundTo.clear();
  entry.nominatedTo.clear();
  if (pod.phase == "Succeeded" || pod.phase == "Failed") return;
  if (!pod.nodeName.empty()) {
    entry.boundTo = pod.nodeName;
    bound_[pod.nodeName].push_back(&pod);
  } else if (!pod.nominatedNodeName.empty()) {
    entry.nominatedTo = pod.nominatedNodeName;
    nominated_[pod.nominatedNodeName].push_back(&pod);
  }
}

void StoreClusterCache::unindex(Entry& entry) {
  auto drop = [&](std::unordered_map<std::string, std::vector<const policy::Pod*>>& lists,
                  const std::string& node) {
    if (node.empty()) return;
    auto list = lists.find(node);
    if (list == lists.end()) return;
    auto& pods = list->second;
    pods.erase(std::remove(pods.begin(), pods.end(), &entry.pod), pods.end());
    if (pods.empty()) lists.erase(list);
  };
  drop(bound_, entry.boundTo);
  drop(nominated_, entry.nominatedTo);
  entry.boundTo.clear();
  entry.nominatedTo.clear();
}

const policy::Pod* StoreClusterCache::findPod(std::string_view key) const {
  auto it = pods_.find(std::string(key));
  return it == pods_.end() ? nullptr : &it->second->pod;
}

std::optional<policy::NodeInfo> StoreClusterCache::nodeInfo(std::string_view name) const {
  const std::string key(name);
  auto mapped = mappedNodes_.find(key);
  if (mapped == mappedNodes_.end()) {
    auto stored = nodeStore_.objects().find(key);
    if (stored == nodeStore_.objects().end()) return std::nullopt;
    // A copy: the store may change before the next refresh().
    policy::Node node = stored->second;
    applyNodewardenConditions(node);
    mapped = mappedNodes_.emplace(key, std::move(node)).first;
  }
  policy::NodeInfo info;
  info.node = &mapped->second;
  if (auto it = bound_.find(key); it != bound_.end()) info.pods = it->second;
  if (auto it = nominated_.find(key); it != nominated_.end()) info.nominated = it->second;
  return info;
}

policy::NodeInfo StoreClusterCache::nodeInfoWith(const policy::Node& node) const {
  policy::NodeInfo info;
  info.node = &node;
  if (auto it = bound_.find(node.name); it != bound_.end()) info.pods = it->second;
  if (auto it = nominated_.find(node.name); it != nominated_.end()) info.nominated = it->second;
  return info;
}

}  // namespace nodewarden::webhook
