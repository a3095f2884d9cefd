// The agent on a real cluster (`--source kubernetes`): the node's pods, the priority classes,
// the disruption budgets and the Node object come from the API server through reflectors
// (list + watch, kube/reflector.h); usage still comes from cgroups, matched by pod UID.
// Evictions are made to stick by recording them in the API after the local kill
// (kube::ApiWriter), and node pressure is published as nodewarden's own node conditions.
//
// The kill path never waits on the network: the cgroup actuator acts at once, and API writes
// are queued behind it. While the API server is unreachable the last synced objects keep
// ranking pods; pods it has not told us about rank as unknown pods (priority 0).
//
// Threading: the agent's loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kube/reflector.h"
#include "kube/static_pods.h"
#include "kube/writer.h"
#include "node/actuator.h"
#include "node/pod_cache.h"
#include "node/pod_source.h"
#include "policy/eviction.h"

namespace nodewarden::node {

// What the source knows before the API server has listed this node's pods once: the
// kubelet's static pod manifests (critical by definition) and the pod list cache of the last
// run. Both are dropped as soon as the first list arrives.
struct KubernetesSourceOptions {
  std::string staticPodPath = kube::kDefaultStaticPodPath;  // "": none
  std::string podCacheFile;                                 // "": no cache (node/pod_cache.h)
};

class KubernetesPodSource final : public PodSource {
 public:
  // `client` must outlive the source. Reads the static pod manifests and the cache; starts
  // nothing else until start().
  KubernetesPodSource(boost::asio::io_context& io, kube::Client& client, std::string nodeName,
                      KubernetesSourceOptions options = {});
  ~KubernetesPodSource() override;
  void start();
  void stop();

  bool refresh() override;
  const PodSet& current() const override { return set_; }
  std::vector<std::string> takeProblems() override;
  std::string describe() const override;
  std::vector<WatchCounts> watchCounts() const override;

  // Every reflector has listed at least once.
  bool synced() const;
  // Every reflector's last request was answered.
  bool connected() const;
  const kube::Reflector::Stats& podStats() const;
  // metadata.generation of the pod `key` ("namespace/name") with this UID, as last listed or
  // watched (0: not known, or the object has none).
  std::int64_t podGeneration(const std::string& key, const std::string& uid) const;

 private:
  std::string nodeName_;
  std::string description_;
  kube::Store<policy::Pod> pods_;
  kube::Store<policy::PriorityClass> classes_;
  kube::Store<policy::PodDisruptionBudget> budgets_;
  kube::Store<policy::Node> nodes_;
  kube::Store<policy::Pod> pending_;  // spec.nodeName="" (for admission reviews)
  void collectProblems();
  void flushCache();

  // Until the pods are listed: the static pods, and whether the cache was used.
  std::vector<policy::Pod> staticPods_;
  std::unique_ptr<PodListCache> cache_;
  bool podsListed_ = false;
  std::chrono::steady_clock::time_point lastFlush_{};
  std::string lastFlushError_;

  std::vector<std::unique_ptr<kube::Reflector>> reflectors_;
  std::vector<std::string> kinds_;  // each reflector's resource, for watchCounts()
  std::vector<std::string> problems_;
  std::uint64_t seenVersions_[5] = {~0ull, ~0ull, ~0ull, ~0ull, ~0ull};
  PodSet set_;
};

// Wraps the local actuator: once a pod's processes are gone, its eviction is recorded in the
// API (status, Event, DELETE) through the writer. Dry runs and failed kills write nothing.
// The pod's generation, for the observedGeneration the kubelet writes with an eviction, is
// asked of `generationOf` (KubernetesPodSource::podGeneration) when the kill is done, as the
// kubelet reads it from the pod object it holds then; none given or 0: left out.
class ApiRecordingActuator final : public Actuator {
 public:
  using GenerationOf = std::function<std::int64_t(const std::string& key, const std::string& uid)>;
  // `writer` must outlive the actuator.
  ApiRecordingActuator(std::unique_ptr<Actuator> local, kube::ApiWriter& writer,
                       GenerationOf generationOf = {});
  void evict(const EvictionOrder& order, Done done) override;
  std::string name() const override { return local_->name() + " + API"; }

 private:
  std::unique_ptr<Actuator> local_;
  kube::ApiWriter& writer_;
  GenerationOf generationOf_;
};

// Publishes the decision's node conditions as nodewarden's own condition types: True while
// the kubelet's condition would be (MemoryPressure → NodewardenMemoryPressure, …), False
// otherwise, with the signals' figures in the message. Only changes are written.
void publishNodeConditions(kube::ApiWriter& writer, const std::string& node,
                           const policy::EvictionDecision& decision);

}  // namespace nodewarden::node
