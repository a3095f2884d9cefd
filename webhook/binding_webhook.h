// The binding admission webhook (docs/reference.md §5, §7 POST /v1/admission-review): the API
// server sends an admission.k8s.io/v1 AdmissionReview for every pods/binding CREATE (the
// scheduler binding a pod to a node); the webhook answers with the §5 verdict for that pod on
// that node, computed from a cache of the cluster (webhook/cluster_cache.h), and for `preempt`
// asks the cluster to evict the victims and to nominate the pod to the node
// (webhook/admission_actions.h).
//
// It fails open, like failurePolicy: Ignore: a review it cannot judge (a review of something
// other than pods/binding; the pod or the node not in the cache yet and not to be had from the
// API server within the review's time budget) is allowed with a warning that says why. With a
// MissFetcher (webhook/miss_fetch.h), a pod or node the cache has not seen (the scheduler
// binding before the watch delivered the pod, a node just registered) is fetched with one
// bounded GET and judged; only a GET that fails or runs out of time fails open. A body that is not
// an AdmissionReview is answered 400.
//
// Threading: everything here belongs to one thread (the webhook's Asio loop); nothing is
// locked.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "policy/admission.h"
#include "policy/policy.h"
#include "server/http_server.h"
#include "webhook/admission_actions.h"
#include "webhook/cluster_cache.h"
#include "webhook/miss_fetch.h"
#include "webhook/review.h"

namespace nodewarden::server {
class MetricsRegistry;
class CounterFamily;
class HistogramFamily;
}  // namespace nodewarden::server

namespace nodewarden::webhook {

// What a review ended in: one of the §5 verdicts policy::admitPod gave, or FailedOpen — the
// webhook could not judge the review (the pod or the node not in its cache yet, a pod bound
// already, anything but a pods/binding CREATE) and allowed it with a warning that says why,
// as failurePolicy: Ignore would.
enum class ReviewVerdict { Admit, Reject, Wait, Preempt, FailedOpen };

// The review verdict of a §5 verdict (never FailedOpen). Pure.
ReviewVerdict reviewVerdictOf(policy::Verdict verdict);
// The verdict in logs and in the verdict label of nodewarden_admissions_total:
// policy::verdictName's "admit", "reject", "wait", "preempt", and "allow-unchecked" for
// FailedOpen (docs/reference.md §7). Pure.
const char* reviewVerdictName(ReviewVerdict verdict);

// The AdmissionReview answer to a §5 decision: allowed for admit; otherwise denied with code
// 403, the §5 reason as status.reason and status.message (docs/reference.md §7), and
// "<reason>: <message>" as the cause's message, followed by ": <victims>" for preempt (the
// first 20 named, then "and N more"). Pure.
ReviewAnswer answerFor(const policy::AdmissionDecision& decision);

// One answered review, for the log line and tests.
struct ReviewRecord {
  std::string uid;
  std::string pod;  // "ns/name" ("" when the review is not a binding)
  std::string node;
  ReviewVerdict verdict = ReviewVerdict::FailedOpen;
  // The §5 reason, or why it failed open: NotABinding, PodNotFound, AlreadyBound,
  // NodeNotFound.
  std::string reason;
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
  // The time the action memory goes by (tests step a ManualClock); must outlive the webhook.
  const Clock* clock = &steadyClock();
  // Told about every answered review (the command logs one line per verdict).
  std::function<void(const ReviewRecord&)> onReview;
  // With a fetcher, handleAsync fetches what the cache misses (see above); must outlive the
  // webhook. Without one, a miss fails open at once.
  MissFetcher* fetcher = nullptr;
  // The review's budget when the request names none (reviewBudget), and how much of it is
  // kept back for answering (fetchTimeout): a GET gets the budget minus the time spent so far
  // minus max(margin, a quarter of the budget); under 50 ms left, no GET is made.
  std::chrono::milliseconds fallbackBudget{2000};
  std::chrono::milliseconds margin{250};
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
  // Never fetches: a miss fails open at once (the agent's own route, tests).
  server::HttpResponse handle(const server::HttpRequest& request);
  // The same, answering through `respond`: at once, or after fetching what the cache misses
  // (options.fetcher), within the review's budget. On the webhook's thread.
  void handleAsync(const server::HttpRequest& request, server::HttpRespond respond);

  // The policy for later reviews (SIGHUP).
  void setPolicy(policy::Policy policy) { policy_ = std::move(policy); }
  const policy::Policy& policy() const { return policy_; }

 private:
  struct Pending;
  ReviewRecord review(const BindingReview& review, ReviewAnswer& answer);
  ReviewRecord judge(const BindingReview& review, const policy::Pod& pod,
                     const policy::NodeInfo& node, ReviewAnswer& answer);
  void fetched(const std::shared_ptr<Pending>& pending);
  server::HttpResponse finish(const BindingReview& review, ReviewRecord& record,
                              const ReviewAnswer& answer,
                              std::chrono::steady_clock::time_point started);
  bool act(const BindingReview& review, const policy::Pod& pod,
           const policy::AdmissionDecision& decision);

  ClusterCache& cache_;
  AdmissionActions& actions_;
  policy::Policy policy_;
  BindingWebhookOptions options_;
  server::CounterFamily* admissions_ = nullptr;
  server::CounterFamily* errors_ = nullptr;
  server::HistogramFamily* duration_ = nullptr;
  // Evictions and cleared nominations requested recently (evictionKey, clearNominationKey).
  ActionMemory requested_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for fetches in flight
};

}  // namespace nodewarden::webhook
