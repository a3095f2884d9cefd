// The binding admission webhook (docs/reference.md §5, §7 POST /v1/admission-review): the API server
// sends an admission.k8s.io/v1 AdmissionReview for every pods/binding CREATE (the scheduler
// binding a pod to a node); the webhook answers with the §5 verdict for that pod on that node,
// computed from a cache of the cluster (ClusterCache), and for `preempt` asks the cluster to
// evict the victims and to nominate the pod to the node (AdmissionActions).
//
// It fails open, like failurePolicy: Ignore: a review it cannot judge (the pod or the node is
// not in the cache yet, a review of something other than pods/binding) is allowed with a
// warning that says why. A body that is not an AdmissionReview is answered 400.
//
// Threading: everything here belongs to one thread (the webhook's Asio loop), which also
// feeds the stores behind the cache; nothing is locked.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "server/http_server.h"
#include "kube/reflector.h"
#include "policy/admission.h"
#include "policy/model.h"
#include "policy/policy.h"
#include "base/result.h"

namespace nodewarden::kube {
class ApiWriter;
}  // namespace nodewarden::kube

namespace nodewarden::server {
class MetricsRegistry;
class CounterFamily;
class HistogramFamily;
}  // namespace nodewarden::server

namespace nodewarden::webhook {

// ---------------------------------------------------------------------------------------------
// The AdmissionReview request

// What nodewarden reads of an AdmissionReview (admission.k8s.io/v1). For a pods/binding CREATE
// the Binding's fields are filled in; for any other review only the request's identity.
struct BindingReview {
  std::string uid;                                       // request.uid, echoed in the response
  std::string kindGroup, kindVersion, kind;              // request.kind
  std::string resourceGroup, resourceVersion, resource;  // request.resource
  std::string subResource;                               // request.subResource
  std::string operation;                                 // CREATE, UPDATE, ...
  std::string ns;                                        // request.namespace
  std::string name;                                      // request.name
  bool dryRun = false;
  // True for a pods/binding CREATE (core group); the fields below are set only then.
  bool isBinding = false;
  std::string podNamespace;      // object.metadata.namespace, else request.namespace
  std::string podName;           // object.metadata.name, else request.name
  std::string podUid;            // object.metadata.uid; may be empty
  std::string targetApiVersion;  // object.target.apiVersion; may be empty (the scheduler omits it)
  std::string node;              // object.target.name (object.target.kind is "Node")

  std::string podKey() const { return podNamespace + "/" + podName; }
};

// Parses an AdmissionReview. Errors name the JSON path: `apiVersion: expected
// "admission.k8s.io/v1", got "admission.k8s.io/v1beta1"`, `request.uid: missing (a string is
// required)`, `request.object.target.name: expected a string, got 12`; several problems are
// joined with "; ". A review that is not a pods/binding CREATE is not an error (isBinding is
// false). Pure; any thread.
Result<BindingReview> parseBindingReview(std::string_view body);

// The AdmissionReview answer for `uid`. `status` is omitted when allowed; `warnings` when
// empty. Pure.
struct ReviewAnswer {
  bool allowed = true;
  unsigned code = 403;  // status.code when denied
  std::string reason;   // status.reason: the §5 reason ("OutOfmemory")
  std::string message;  // status.message: the §5 reason too, as docs/reference.md §7 says
  // For people: "<reason>: <message>[: victims]", in status.details.causes[0].message.
  std::string detail;
  std::vector<std::string> warnings;
};
std::string admissionReviewResponse(const std::string& uid, const ReviewAnswer& answer);

// ---------------------------------------------------------------------------------------------
// The cluster as the webhook sees it

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

  // The pod "namespace/name", resolved (priority, preemption policy, QoS, requests; docs/reference.md
  // §3) against the cluster's priority classes; null when unknown.
  virtual const policy::Pod* findPod(std::string_view key) const = 0;

  // The node with the pods bound to it (phase neither Succeeded nor Failed) and the pods
  // nominated to it (status.nominatedNodeName, not bound), as admitPod wants it; nullopt when
  // the node is unknown. The node's pressure conditions are the kubelet's plus nodewarden's
  // own (NodewardenMemoryPressure "True" counts as MemoryPressure, and so on).
  virtual std::optional<policy::NodeInfo> nodeInfo(std::string_view node) const = 0;

  virtual const std::vector<policy::PodDisruptionBudget>& podDisruptionBudgets() const = 0;
  virtual const std::vector<policy::PriorityClass>& priorityClasses() const = 0;
};

// `node` with nodewarden's own pressure conditions (kube::kMemoryPressureCondition, ...)
// mapped to the kubelet's: a "True" NodewardenMemoryPressure sets MemoryPressure "True"
// (added when absent). Returns false and leaves `node` alone when there is nothing to map.
bool applyNodewardenConditions(policy::Node& node);

// A cache over one fixed snapshot (docs/reference.md §2): for tests, `explain`, and the agent's own
// node. Its pods are resolved on construction; refresh() does nothing.
class SnapshotClusterCache final : public ClusterCache {
 public:
  explicit SnapshotClusterCache(policy::Snapshot snapshot);
  // Replaces the whole snapshot (pointers handed out before become invalid).
  void reset(policy::Snapshot snapshot);
  const policy::Snapshot& snapshot() const { return snapshot_; }

  void refresh() override {}
  const policy::Pod* findPod(std::string_view key) const override;
  std::optional<policy::NodeInfo> nodeInfo(std::string_view node) const override;
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
// podSink() instead of the pod store itself, and every watch event costs the cache one pod
// (O(log n)) at the next refresh(). Changes the sink did not see (the store fed directly, a
// relist) and any change of the priority classes make refresh() rebuild the whole index; the
// stores' version() numbers tell. Nodes are read from their store per lookup; disruption
// budgets and priority classes are copied when their store's version changes.
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

// ---------------------------------------------------------------------------------------------
// What a verdict does

// The side effects of admission verdicts; the real one writes to the API (ApiAdmissionActions),
// tests record. Calls happen on the webhook's thread and must not block.
class AdmissionActions {
 public:
  virtual ~AdmissionActions() = default;
  // `preemptor` preempts on `node`: evict each victim through the Eviction API (reason
  // Preempting) and set the preemptor's status.nominatedNodeName to `node`.
  virtual void preempt(const policy::Pod& preemptor, const std::string& node,
                       const std::vector<const policy::Pod*>& victims) = 0;
  // Clears `pod`'s status.nominatedNodeName (it lost its reservation to a more important pod).
  virtual void clearNomination(const policy::Pod& pod) = 0;
};

// Records every call, for tests and dry runs.
class RecordingAdmissionActions final : public AdmissionActions {
 public:
  struct Call {
    std::string what;  // "preempt" or "clearNomination"
    std::string pod;   // "ns/name" of the preemptor or of the pod losing its nomination
    std::string node;  // for preempt
    std::vector<std::string> victims;  // for preempt, "ns/name" in the order given
  };
  void preempt(const policy::Pod& preemptor, const std::string& node,
               const std::vector<const policy::Pod*>& victims) override;
  void clearNomination(const policy::Pod& pod) override;
  std::vector<Call> calls;
};

// The actions through kube::ApiWriter (which queues and retries, never blocking): preempt →
// ApiWriter::preempt (Eviction API per victim) and ApiWriter::nominate; clearNomination →
// ApiWriter::nominate(pod, ""). The writer must outlive this object.
class ApiAdmissionActions final : public AdmissionActions {
 public:
  explicit ApiAdmissionActions(kube::ApiWriter& writer) : writer_(writer) {}
  void preempt(const policy::Pod& preemptor, const std::string& node,
               const std::vector<const policy::Pod*>& victims) override;
  void clearNomination(const policy::Pod& pod) override;

 private:
  kube::ApiWriter& writer_;
};

// ---------------------------------------------------------------------------------------------
// The webhook

// One answered review, for the log line and tests.
struct ReviewRecord {
  std::string uid;
  std::string pod;  // "ns/name" ("" when the review is not a binding)
  std::string node;
  // "admit", "reject", "wait", "preempt" (docs/reference.md §5) or "allow-unchecked" (failed open).
  std::string verdict;
  std::string reason;  // the §5 reason, or why it failed open: NotABinding, PodNotFound, ...
  std::string message;
  std::vector<std::string> victims;  // for preempt, sorted by pod key
  std::vector<std::string> nominationsCleared;
  bool allowed = true;
  bool dryRun = false;
  bool acted = false;  // actions were requested (never for dryRun)
  double seconds = 0;  // time spent deciding
};

struct BindingWebhookOptions {
  // A victim whose eviction was requested for the same preemptor less than this long ago is
  // not requested again (the cache may not show it terminating yet); likewise a nomination
  // cleared less than this long ago.
  std::chrono::seconds actionMemory{120};
  // Steady clock (tests step it).
  std::function<std::chrono::steady_clock::time_point()> now;
  // Told about every answered review (the command logs one line per verdict).
  std::function<void(const ReviewRecord&)> onReview;
};

class BindingWebhook {
 public:
  // `cache` and `actions` must outlive the webhook. With `metrics` it counts
  // nodewarden_admissions_total{verdict,reason}, nodewarden_admission_review_errors_total and
  // nodewarden_admission_review_duration_seconds there.
  BindingWebhook(ClusterCache& cache, AdmissionActions& actions, policy::Policy policy,
                 server::MetricsRegistry* metrics = nullptr, BindingWebhookOptions options = {});

  // POST /v1/admission-review. 200 with an AdmissionReview for every review (allowed or not);
  // 400 {"error": "..."} for a body that is not one; 405 for a method other than POST.
  server::HttpResponse handle(const server::HttpRequest& request);

  // The policy for later reviews (SIGHUP).
  void setPolicy(policy::Policy policy) { policy_ = std::move(policy); }
  const policy::Policy& policy() const { return policy_; }

 private:
  ReviewRecord review(const BindingReview& review, ReviewAnswer& answer);
  bool recentlyDone(const std::string& key, std::chrono::steady_clock::time_point now);

  ClusterCache& cache_;
  AdmissionActions& actions_;
  policy::Policy policy_;
  BindingWebhookOptions options_;
  server::CounterFamily* admissions_ = nullptr;
  server::CounterFamily* errors_ = nullptr;
  server::HistogramFamily* duration_ = nullptr;
  // Actions requested recently, by "evict/<preemptor uid>/<victim uid>" or "clear/<uid>".
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> done_;
};

// The command's pieces, exposed for tests: the bucket bounds of the review duration histogram,
// from 50 µs to 1 s.
std::vector<double> reviewDurationBuckets();

}  // namespace nodewarden::webhook
