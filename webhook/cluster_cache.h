// The cluster as the binding webhook sees it: what policy::admitPod needs to know about pods,
// nodes, disruption budgets and priority classes, over one fixed snapshot
// (SnapshotClusterCache) or over the reflectors' stores (StoreClusterCache).
//
// Threading: a cache belongs to one thread (the webhook's Asio loop, which also feeds the
// stores behind a StoreClusterCache); nothing is locked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kube/reflector.h"
#include "policy/admission.h"
#include "policy/model.h"

namespace nodewarden::webhook {

// What admitPod needs to know about the cluster, kept current by its sources (reflectors).
//
// Pointers and NodeInfos returned refer into the cache and stay valid until the next
// refresh() (or the destruction of the cache); the sources may change meanwhile without
// affecting them. Lookups never refresh by themselves, so one review sees one consistent
// state: call refresh() once, then look up.
class ClusterCache {
 public:
  virtual ~ClusterCache() = default;

  // Brings the derived indexes up to date with the sources; cheap when nothing changed.
  virtual void refresh() = 0;

  // The pod "namespace/name", resolved (priority, preemption policy, QoS, requests;
  // docs/reference.md §3) against the cluster's priority classes; null when unknown.
  virtual const policy::Pod* findPod(std::string_view key) const = 0;

  // The node with the pods bound to it (phase neither Succeeded nor Failed) and the pods
  // nominated to it (status.nominatedNodeName, not bound), as admitPod wants it; nullopt when
  // the node is unknown. The node's pressure conditions are the kubelet's plus nodewarden's
  // own (NodewardenMemoryPressure "True" counts as MemoryPressure, and so on).
  virtual std::optional<policy::NodeInfo> nodeInfo(std::string_view node) const = 0;

  // nodeInfo() for a node the cache has not seen (fetched from the API server): `node`,
  // which must outlive the result, with the pods the cache has bound and nominated to it.
  virtual policy::NodeInfo nodeInfoWith(const policy::Node& node) const = 0;

  virtual const std::vector<policy::PodDisruptionBudget>& podDisruptionBudgets() const = 0;
  virtual const std::vector<policy::PriorityClass>& priorityClasses() const = 0;
};

// `node` with nodewarden's own pressure conditions (kube::kMemoryPressureCondition, ...)
// mapped to the kubelet's: a "True" NodewardenMemoryPressure sets MemoryPressure "True"
// (added when absent). Returns false and leaves `node` alone when there is nothing to map.
bool applyNodewardenConditions(policy::Node& node);

// A cache over one fixed snapshot (docs/reference.md §2): the agent's own node (its POST
// /v1/admission-review) and tests. Its pods are resolved and nodewarden's conditions mapped on
// construction; refresh() does nothing.
class SnapshotClusterCache final : public ClusterCache {
 public:
  explicit SnapshotClusterCache(policy::Snapshot snapshot);
  // Replaces the whole snapshot (pointers handed out before become invalid).
  void reset(policy::Snapshot snapshot);
  const policy::Snapshot& snapshot() const { return snapshot_; }

  void refresh() override {}
  const policy::Pod* findPod(std::string_view key) const override;
  std::optional<policy::NodeInfo> nodeInfo(std::string_view node) const override;
  policy::NodeInfo nodeInfoWith(const policy::Node& node) const override;
  const std::vector<policy::PodDisruptionBudget>& podDisruptionBudgets() const override {
    return snapshot_.podDisruptionBudgets;
  }
  const std::vector<policy::PriorityClass>& priorityClasses() const override {
    return snapshot_.priorityClasses;
  }

 private:
  void build();

  policy::Snapshot snapshot_;
  policy::ClusterIndex index_;
  std::unordered_map<std::string_view, std::size_t> nodeByName_;
  std::unordered_map<std::string_view, const policy::Pod*> podByKey_;
};

// A cache over the reflectors' stores (kube/reflector.h). The stores stay owned by the caller
// and must outlive the cache.
//
// The pods are indexed by spec.nodeName and status.nominatedNodeName and resolved against the
// priority classes once, then kept up to date incrementally: give the pods reflector
// podSink() instead of the pod store itself, and every watch event costs the cache the update
// of that one pod (and of its node's lists) at the next refresh(). Changes the sink did not
// see (the store fed directly, a relist) and any change of the priority classes make
// refresh() rebuild the whole index; the stores' version() numbers tell. A node is copied
// from its store, its conditions mapped, at its first lookup, and the copy serves until a
// refresh() finds the node store changed; disruption budgets and priority classes are copied
// when their store's version changes.
class StoreClusterCache final : public ClusterCache {
 public:
  StoreClusterCache(kube::Store<policy::Pod>& pods, kube::Store<policy::Node>& nodes,
                    kube::Store<policy::PriorityClass>& priorityClasses,
                    kube::Store<policy::PodDisruptionBudget>& pdbs);
  ~StoreClusterCache() override;
  StoreClusterCache(const StoreClusterCache&) = delete;
  StoreClusterCache& operator=(const StoreClusterCache&) = delete;

  // Forwards everything to the pod store and remembers which pods changed.
  kube::StoreSink& podSink();

  void refresh() override;
  const policy::Pod* findPod(std::string_view key) const override;
  std::optional<policy::NodeInfo> nodeInfo(std::string_view node) const override;
  policy::NodeInfo nodeInfoWith(const policy::Node& node) const override;
  const std::vector<policy::PodDisruptionBudget>& podDisruptionBudgets() const override {
    return pdbs_;
  }
  const std::vector<policy::PriorityClass>& priorityClasses() const override { return classes_; }

  // For tests and metrics: whole-index rebuilds and single-pod updates so far.
  std::uint64_t fullRebuilds() const { return fullRebuilds_; }
  std::uint64_t podUpdates() const { return podUpdates_; }

 private:
  class PodSink;
  struct Entry;
  void rebuildPods();
  void updatePod(const std::string& key);
  void unindex(Entry& entry);
  void index(Entry& entry);

  kube::Store<policy::Pod>& podStore_;
  kube::Store<policy::Node>& nodeStore_;
  kube::Store<policy::PriorityClass>& classStore_;
  kube::Store<policy::PodDisruptionBudget>& pdbStore_;
  std::unique_ptr<PodSink> sink_;

  std::vector<policy::PriorityClass> classes_;
  std::vector<policy::PodDisruptionBudget> pdbs_;
  std::unordered_map<std::string, std::unique_ptr<Entry>> pods_;                // by "ns/name"
  std::unordered_map<std::string, std::vector<const policy::Pod*>> bound_;      // by node
  std::unordered_map<std::string, std::vector<const policy::Pod*>> nominated_;  // by node
  // A node with nodewarden's conditions mapped, per node name, valid for nodesVersion_.
  mutable std::unordered_map<std::string, policy::Node> mappedNodes_;
  mutable std::uint64_t mappedNodesVersion_ = 0;

  std::uint64_t podsVersion_ = 0, classesVersion_ = 0, pdbsVersion_ = 0;
  bool built_ = false;
  std::uint64_t fullRebuilds_ = 0, podUpdates_ = 0;
};

}  // namespace nodewarden::webhook
