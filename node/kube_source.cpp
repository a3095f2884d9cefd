#include "node/kube_source.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>

#include "server/log.h"
#include "policy/policy.h"

namespace nodewarden::node {
namespace {

kube::ReflectorLog reflectorLog(std::string kind) {
  return [kind = std::move(kind)](const std::string& event, const std::string& detail) {
    server::logEvent(server::LogLevel::Info, "api-" + event, {{"kind", kind}, {"detail", detail}});
  };
}

}  // namespace

KubernetesPodSource::KubernetesPodSource(boost::asio::io_context& io, kube::Client& client,
                                         std::string nodeName)
    : nodeName_(std::move(nodeName)),
      pods_("Pod", policy::parsePod),
      classes_("PriorityClass", policy::parsePriorityClass),
      budgets_("PodDisruptionBudget", policy::parsePodDisruptionBudget),
      nodes_("Node", policy::parseNode),
      pending_("Pod", policy::parsePod) {
  description_ = "Kubernetes API (" + client.config().description + "), pods of node " + nodeName_;
  auto add = [&](std::string path, std::string selector, kube::StoreSink& sink, std::string kind) {
    kube::ReflectorOptions options;
    options.listPath = std::move(path);
    options.fieldSelector = std::move(selector);
    reflectors_.push_back(std::make_unique<kube::Reflector>(io, client, std::move(options), sink,
                                                            reflectorLog(std::move(kind))));
  };
  // The kubelet's own selector for its pods; the node by name, for its conditions and
  // allocatable (admission at /v1/admit and /v1/admission-review).
  add("/api/v1/pods", "spec.nodeName=" + nodeName_, pods_, "Pod");
  add("/apis/scheduling.k8s.io/v1/priorityclasses", "", classes_, "PriorityClass");
  add("/apis/policy/v1/poddisruptionbudgets", "", budgets_, "PodDisruptionBudget");
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

bool KubernetesPodSource::refresh() {
  collectProblems();
  const std::uint64_t versions[5] = {pods_.version(), classes_.version(), budgets_.version(),
                                     nodes_.version(), pending_.version()};
  const bool nodeChanged = !std::equal(versions, versions + 4, seenVersions_);
  const bool pendingChanged = versions[4] != seenVersions_[4];
  std::copy(std::begin(versions), std::end(versions), std::begin(seenVersions_));
  if (nodeChanged) {
    set_.pods.clear();
    set_.pods.reserve(pods_.objects().size());
    for (const auto& [key, pod] : pods_.objects()) set_.pods.push_back(pod);
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
  // Unscheduled pods come and go all the time in a busy cluster; they do not change what
  // this node runs, so they do not make the agent re-read every pod cgroup.
  return nodeChanged;
}

ApiRecordingActuator::ApiRecordingActuator(std::unique_ptr<Actuator> local, kube::ApiWriter& writer)
    : local_(std::move(local)), writer_(writer) {}

void ApiRecordingActuator::evict(const EvictionOrder& order, Done done) {
  local_->evict(order, [this, order, done = std::move(done)](const EvictionOutcome& outcome) {
    // Only a pod whose processes are really gone is marked Failed: the kubelet's status
    // manager owns a running pod's status.
    if (outcome.emptied && !outcome.dryRun) {
      kube::EvictedPod evicted;
      const auto slash = order.pod.find('/');
      evicted.pod.ns = order.pod.substr(0, slash);
      evicted.pod.name = slash == std::string::npos ? order.pod : order.pod.substr(slash + 1);
      evicted.pod.uid = order.uid;
      evicted.signal = std::string(policy::toString(order.signal));
      evicted.resource = std::string(policy::starvedResource(order.signal));
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
