#include "node/kube_source.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <cerrno>

#include "policy/policy.h"
#include "server/log.h"

namespace nodewarden::node {
namespace {

kube::ReflectorLog reflectorLog(std::string kind) {
  return [kind = std::move(kind)](const std::string& event, const std::string& detail) {
    server::logEvent(server::LogLevel::Info, "api-" + event, {{"kind", kind}, {"detail", detail}});
  };
}

// Static pods the cache or the store does not already hold (by UID, or by the mirror pod's
// namespace/name).
void addStaticPods(std::vector<policy::Pod>& pods, const std::vector<policy::Pod>& staticPods) {
  for (const policy::Pod& pod : staticPods) {
    const bool known = std::any_of(pods.begin(), pods.end(), [&](const policy::Pod& p) {
      return p.uid == pod.uid || (p.ns == pod.ns && p.name == pod.name);
    });
    if (!known) pods.push_back(pod);
  }
}

}  // namespace

KubernetesPodSource::KubernetesPodSource(boost::asio::io_context& io, kube::Client& client,
                                         std::string nodeName, KubernetesSourceOptions options)
    : nodeName_(std::move(nodeName)),
      pods_("Pod", policy::parsePod),
      classes_("PriorityClass", policy::parsePriorityClass),
      budgets_("PodDisruptionBudget", policy::parsePodDisruptionBudget),
      nodes_("Node", policy::parseNode),
      pending_("Pod", policy::parsePod) {
  description_ = "Kubernetes API (" + client.config().description + "), pods of node " + nodeName_;
  auto add = [&](std::string path, std::string selector, kube::StoreSink& sink, std::string kind) {
    kube::ReflectorOptions reflector;
    reflector.listPath = std::move(path);
    reflector.fieldSelector = std::move(selector);
    kinds_.push_back(kind);
    reflectors_.push_back(std::make_unique<kube::Reflector>(io, client, std::move(reflector), sink,
                                                            reflectorLog(std::move(kind))));
  };
  if (!options.podCacheFile.empty()) {
    cache_ = std::make_unique<PodListCache>(options.podCacheFile, nodeName_, pods_);
    auto cached = PodListCache::load(options.podCacheFile, nodeName_);
    if (cached) {
      pods_.replace(std::move(cached).value());
      server::logEvent(server::LogLevel::Info, "pod-cache-loaded",
                       {{"file", options.podCacheFile},
                        {"pods", static_cast<std::int64_t>(pods_.objects().size())},
                        {"until", "the API server lists this node's pods"}});
    } else if (cached.error().sysErrno != ENOENT) {
      server::logEvent(server::LogLevel::Warn, "pod-cache-ignored",
                       {{"file", options.podCacheFile}, {"error", cached.error().message}});
    }
  }
  if (!options.staticPodPath.empty()) {
    kube::StaticPods found = kube::readStaticPods(options.staticPodPath, nodeName_);
    staticPods_ = std::move(found.pods);
    for (const kube::StaticPodProblem& problem : found.problems) {
      problems_.push_back("static pod manifest " + problem.file + ": " + problem.message);
    }
    if (!staticPods_.empty()) {
      server::logEvent(server::LogLevel::Info, "static-pods",
                       {{"path", options.staticPodPath},
                        {"pods", static_cast<std::int64_t>(staticPods_.size())},
                        {"until", "the API server lists this node's pods"}});
    }
  }
  // The kubelet's own selector for this node's pods, through the cache when there is one.
  add("/api/v1/pods", "spec.nodeName=" + nodeName_,
      cache_ ? static_cast<kube::StoreSink&>(*cache_) : pods_, "Pod");
  add("/apis/scheduling.k8s.io/v1/priorityclasses", "", classes_, "PriorityClass");
  add("/apis/policy/v1/poddisruptionbudgets", "", budgets_, "PodDisruptionBudget");
  // The node by name, for its conditions and allocatable (admission at /v1/admit and
  // /v1/admission-review).
  add("/api/v1/nodes", "metadata.name=" + nodeName_, nodes_, "Node");
  // Unscheduled pods, as the scheduler watches them: a binding under review names one of
  // them, and those nominated to this node hold room here.
  add("/api/v1/pods", "spec.nodeName=", pending_, "Pod (unscheduled)");
}

KubernetesPodSource::~KubernetesPodSource() {
  stop();
}

void KubernetesPodSource::start() {
  for (auto& reflector : reflectors_) reflector->start();
}

void KubernetesPodSource::stop() {
  for (auto& reflector : reflectors_) reflector->stop();
}

bool KubernetesPodSource::synced() const {
  return std::all_of(reflectors_.begin(), reflectors_.end(),
                     [](const auto& reflector) { return reflector->synced(); });
}

bool KubernetesPodSource::connected() const {
  return std::all_of(reflectors_.begin(), reflectors_.end(),
                     [](const auto& reflector) { return reflector->connected(); });
}

const kube::Reflector::Stats& KubernetesPodSource::podStats() const {
  return reflectors_.front()->stats();
}

std::vector<WatchCounts> KubernetesPodSource::watchCounts() const {
  std::vector<WatchCounts> counts;
  for (std::size_t i = 0; i < reflectors_.size(); ++i) {
    const kube::Reflector::Stats& stats = reflectors_[i]->stats();
    counts.push_back({.resource = kinds_[i],
                      .lists = stats.lists,
                      .watches = stats.watches,
                      .events = stats.events,
                      .bookmarks = stats.bookmarks,
                      .relistsGone = stats.relists410,
                      .badEvents = stats.badEvents,
                      .failures = stats.failures});
  }
  return counts;
}

std::string KubernetesPodSource::describe() const {
  return description_;
}

std::vector<std::string> KubernetesPodSource::takeProblems() {
  collectProblems();
  return std::exchange(problems_, {});
}

void KubernetesPodSource::collectProblems() {
  for (auto&& list : {pods_.takeProblems(), classes_.takeProblems(), budgets_.takeProblems(),
                      nodes_.takeProblems(), pending_.takeProblems()})
    problems_.insert(problems_.end(), list.begin(), list.end());
}

// The cache is written only from a real list (never from itself), at most every kFlushEvery;
// a failure is logged once per text and changes nothing else.
void KubernetesPodSource::flushCache() {
  if (!cache_ || !podsListed_ || !cache_->dirty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - lastFlush_ < PodListCache::kFlushEvery) return;
  lastFlush_ = now;
  auto written = cache_->flush();
  if (written) {
    lastFlushError_.clear();
  } else if (written.error().message != lastFlushError_) {
    lastFlushError_ = written.error().message;
    server::logEvent(server::LogLevel::Warn, "pod-cache-write-failed",
                     {{"file", cache_->path()},
                      {"error", lastFlushError_},
                      {"effect", "none on protection; the next start waits for the API"}});
  }
}

bool KubernetesPodSource::refresh() {
  collectProblems();
  const std::uint64_t versions[5] = {pods_.version(), classes_.version(), budgets_.version(),
                                     nodes_.version(), pending_.version()};
  const bool listedNow = reflectors_.front()->synced();
  const bool nodeChanged =
      !std::equal(versions, versions + 4, seenVersions_) || listedNow != podsListed_;
  podsListed_ = listedNow;
  const bool pendingChanged = versions[4] != seenVersions_[4];
  std::copy(std::begin(versions), std::end(versions), std::begin(seenVersions_));
  if (nodeChanged) {
    set_.pods.clear();
    set_.pods.reserve(pods_.objects().size());
    for (const auto& [key, pod] : pods_.objects()) set_.pods.push_back(pod);
    if (!podsListed_) addStaticPods(set_.pods, staticPods_);
    set_.priorityClasses.clear();
    for (const auto& [key, priorityClass] : classes_.objects())
      set_.priorityClasses.push_back(priorityClass);
    set_.podDisruptionBudgets.clear();
    for (const auto& [key, budget] : budgets_.objects())
      set_.podDisruptionBudgets.push_back(budget);
    set_.node.reset();
    if (auto it = nodes_.objects().find(nodeName_); it != nodes_.objects().end())
      set_.node = it->second;
    policy::resolvePods(set_.pods, set_.priorityClasses);
  }
  if (nodeChanged || pendingChanged) {
    set_.pending.clear();
    set_.pending.reserve(pending_.objects().size());
    for (const auto& [key, pod] : pending_.objects()) set_.pending.push_back(pod);
    policy::resolvePods(set_.pending, set_.priorityClasses);
  }
  flushCache();
  // Unscheduled pods come and go all the time in a busy cluster; they do not change what
  // this node runs, so they do not make the agent re-read every pod cgroup.
  return nodeChanged;
}

std::int64_t KubernetesPodSource::podGeneration(const std::string& key,
                                                const std::string& uid) const {
  auto it = pods_.objects().find(key);
  if (it == pods_.objects().end() || it->second.uid != uid) return 0;
  return it->second.generation;
}

ApiRecordingActuator::ApiRecordingActuator(std::unique_ptr<Actuator> local, kube::ApiWriter& writer,
                                           GenerationOf generationOf)
    : local_(std::move(local)), writer_(writer), generationOf_(std::move(generationOf)) {}

void ApiRecordingActuator::evict(const EvictionOrder& order, Done done) {
  local_->evict(order, [this, order, done = std::move(done)](const EvictionOutcome& outcome) {
    // Only a pod whose processes are really gone is marked Failed: the kubelet's status
    // manager owns a running pod's status. A pod cgroup without an object in the API
    // (podWithoutObject(): "unknown/<uid>", e.g. a pod deleted before its cgroup went) has
    // nothing there to record: its writes would only meet 404s.
    const bool withoutObject = order.pod == "unknown/" + order.uid;
    if (outcome.emptied && !order.dryRun && !withoutObject) {
      kube::EvictedPod evicted;
      const auto slash = order.pod.find('/');
      evicted.pod.ns = order.pod.substr(0, slash);
      evicted.pod.name = slash == std::string::npos ? order.pod : order.pod.substr(slash + 1);
      evicted.pod.uid = order.uid;
      if (generationOf_) evicted.generation = generationOf_(order.pod, order.uid);
      evicted.signal = std::string(policy::toString(order.threshold.signal));
      evicted.resource = std::string(policy::starvedResource(order.threshold.signal));
      evicted.message = order.message;
      evicted.gracePeriodSeconds = order.gracePeriodSeconds;
      writer_.podEvicted(evicted);
    }
    done(outcome);
  });
}

void publishNodeConditions(kube::ApiWriter& writer, const std::string& node,
                           const policy::EvictionDecision& decision) {
  // The kubelet's reasons (KubeletHasInsufficientMemory, …) with our name in front.
  struct Mapping {
    const char* kubelet;
    const char* ours;
    const char* pressureReason;
    const char* clearReason;
  };
  static constexpr Mapping kMappings[] = {
      {"MemoryPressure", kube::kMemoryPressureCondition, "NodewardenHasInsufficientMemory",
       "NodewardenHasSufficientMemory"},
      {"DiskPressure", kube::kDiskPressureCondition, "NodewardenHasDiskPressure",
       "NodewardenHasNoDiskPressure"},
      {"PIDPressure", kube::kPidPressureCondition, "NodewardenHasInsufficientPID",
       "NodewardenHasSufficientPID"},
  };
  for (const Mapping& mapping : kMappings) {
    const bool on = std::find(decision.conditions.begin(), decision.conditions.end(),
                              mapping.kubelet) != decision.conditions.end();
    // Thresholds, not the moving figures: the condition is written when it changes, not on
    // every cycle.
    std::string message;
    for (const auto& signal : decision.signals) {
      if (policy::nodeConditionFor(signal.key.signal) != mapping.kubelet || !signal.met) continue;
      if (!message.empty()) message += "; ";
      message += std::string(policy::toString(signal.key.signal)) + " below its " +
                 (signal.key.hard ? "hard" : "soft") + " threshold " + signal.thresholdText;
    }
    if (on && message.empty()) message = "threshold met within the pressure transition period";
    if (!on) message = "no eviction threshold met";
    writer.setNodeCondition(node, mapping.ours, on,
                            on ? mapping.pressureReason : mapping.clearReason, message);
  }
}

}  // namespace nodewarden::node
