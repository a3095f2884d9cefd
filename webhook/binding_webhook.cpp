#include "webhook/binding_webhook.h"

#include <cassert>
#include <optional>
#include <utility>
#include <variant>

#include "server/http_json.h"
#include "server/metrics.h"

namespace nodewarden::webhook {

namespace {

// Victim names in a denial message beyond this many are summarized ("and 12 more").
constexpr std::size_t kMaxNamedVictims = 20;

std::string victimList(const std::vector<const policy::Pod*>& victims) {
  std::string out;
  for (std::size_t i = 0; i < victims.size() && i < kMaxNamedVictims; ++i) {
    if (i > 0) out += ", ";
    out += victims[i]->key;
  }
  if (victims.size() > kMaxNamedVictims) {
    out += " and " + std::to_string(victims.size() - kMaxNamedVictims) + " more";
  }
  return out;
}

// The bucket bounds of nodewarden_admission_review_duration_seconds, from 50 µs to 1 s.
std::vector<double> reviewDurationBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
          0.01,    0.025,  0.05,    0.1,    0.25,  0.5,    1};
}

// Why a review cannot be judged, and the warning that says so.
struct Unjudged {
  std::string reason;
  std::string warning;
  // A miss the API server may fill: the pod (absent, or an older one with the same name), the
  // node (absent, or without status.allocatable yet).
  bool podMissing = false;
  bool nodeMissing = false;
};

// What admitPod judges: the pod under review and the node it is to be bound to.
struct Subject {
  const policy::Pod* pod = nullptr;
  policy::NodeInfo node;
};

// The pod and the node of a pods/binding review as the cache knows them, or why the webhook
// cannot judge it. The cache must be refreshed.
std::variant<Subject, Unjudged> subjectOf(const BindingReview& r, const ClusterCache& cache) {
  if (!r.isBinding) {
    return Unjudged{"NotABinding", "nodewarden only reviews pods/binding and bindings (got " +
                                       (r.resource.empty() ? std::string("?") : r.resource) +
                                       (r.subResource.empty() ? "" : "/" + r.subResource) + " " +
                                       (r.operation.empty() ? std::string("?") : r.operation) +
                                       ")"};
  }
  const std::string key = r.podKey();
  const policy::Pod* pod = cache.findPod(key);
  std::optional<Unjudged> podMiss;
  if (pod == nullptr) {
    podMiss = Unjudged{"PodNotFound",
                       "nodewarden: pod " + key + " is not in its cache yet; allowed unchecked"};
  } else if (!r.podUid.empty() && !pod->uid.empty() && pod->uid != r.podUid) {
    podMiss = Unjudged{"PodNotFound", "nodewarden: its cache has an older pod " + key + " (uid " +
                                          pod->uid + "); allowed unchecked"};
  }
  if (podMiss) {
    // Whether the node is missing too, so that one round of fetches gets both.
    std::optional<policy::NodeInfo> node = cache.nodeInfo(r.node);
    podMiss->podMissing = true;
    podMiss->nodeMissing = !node || !node->node->hasAllocatable;
    return *podMiss;
  }
  if (!pod->nodeName.empty()) {
    return Unjudged{"AlreadyBound", "nodewarden: pod " + key + " is bound to " + pod->nodeName +
                                        " already; allowed unchecked"};
  }
  std::optional<policy::NodeInfo> node = cache.nodeInfo(r.node);
  if (!node) {
    return Unjudged{"NodeNotFound",
                    "nodewarden: node " + r.node + " is not in its cache yet; allowed unchecked",
                    false, true};
  }
  if (!node->node->hasAllocatable) {
    return Unjudged{
        "NodeNotFound",
        "nodewarden: node " + r.node + " has no status.allocatable yet; allowed unchecked", false,
        true};
  }
  return Subject{pod, std::move(*node)};
}

}  // namespace

ReviewVerdict reviewVerdictOf(policy::Verdict verdict) {
  switch (verdict) {
    case policy::Verdict::Admit:
      return ReviewVerdict::Admit;
    case policy::Verdict::Reject:
      return ReviewVerdict::Reject;
    case policy::Verdict::Wait:
      return ReviewVerdict::Wait;
    case policy::Verdict::Preempt:
      return ReviewVerdict::Preempt;
  }
  return ReviewVerdict::Reject;  // not reached: every verdict is handled above
}

const char* reviewVerdictName(ReviewVerdict verdict) {
  switch (verdict) {
    case ReviewVerdict::Admit:
      return policy::verdictName(policy::Verdict::Admit);
    case ReviewVerdict::Reject:
      return policy::verdictName(policy::Verdict::Reject);
    case ReviewVerdict::Wait:
      return policy::verdictName(policy::Verdict::Wait);
    case ReviewVerdict::Preempt:
      return policy::verdictName(policy::Verdict::Preempt);
    case ReviewVerdict::FailedOpen:
      return "allow-unchecked";
  }
  return "allow-unchecked";  // not reached
}

ReviewAnswer answerFor(const policy::AdmissionDecision& decision) {
  ReviewAnswer answer;
  answer.allowed = decision.verdict == policy::Verdict::Admit;
  if (answer.allowed) return answer;
  answer.code = 403;
  answer.reason = decision.reason;
  // docs/reference.md §7: the §5 reason is status.message; the whole story is in the details.
  answer.message = decision.reason;
  answer.detail = decision.reason + ": " + decision.message;
  if (decision.verdict == policy::Verdict::Preempt) {
    answer.detail += ": " + victimList(decision.victims);
  }
  return answer;
}

BindingWebhook::BindingWebhook(ClusterCache& cache, AdmissionActions& actions,
                               policy::Policy policy, server::MetricsRegistry* metrics,
                               BindingWebhookOptions options)
    : cache_(cache),
      actions_(actions),
      policy_(std::move(policy)),
      options_(std::move(options)),
      requested_(options_.actionMemory) {
  assert(options_.clock != nullptr);
  if (metrics != nullptr) {
    admissions_ =
        &metrics->counter("nodewarden_admissions_total",
                          "Admission verdicts, by verdict and reason.", {"verdict", "reason"});
    errors_ = &metrics->counter("nodewarden_admission_review_errors_total",
                                "Admission review requests answered 400 or 405.");
    duration_ =
        &metrics->histogram("nodewarden_admission_review_duration_seconds",
                            "Time to decide one AdmissionReview.", {}, reviewDurationBuckets());
  }
}

// A review waiting for what the cache missed.
struct BindingWebhook::Pending {
  BindingReview review;
  Unjudged miss;  // the answer if a fetch fails
  std::chrono::steady_clock::time_point started;
  server::HttpRespond respond;
  int outstanding = 0;
  std::optional<policy::Pod> pod;
  std::optional<policy::Node> node;
  std::string error;  // the first fetch's error
};

server::HttpResponse BindingWebhook::handle(const server::HttpRequest& request) {
  std::optional<server::HttpResponse> out;
  MissFetcher* fetcher = options_.fetcher;
  options_.fetcher = nullptr;  // never fetch here: the answer is due now
  try {
    handleAsync(request, [&out](server::HttpResponse response) { out = std::move(response); });
  } catch (...) {
    options_.fetcher = fetcher;
    throw;
  }
  options_.fetcher = fetcher;
  assert(out.has_value());
  return std::move(*out);
}

void BindingWebhook::handleAsync(const server::HttpRequest& request, server::HttpRespond respond) {
  // The duration histogram measures the real time spent, whatever clock the decisions go by.
  const auto started = std::chrono::steady_clock::now();
  if (request.method != "POST") {
    if (errors_ != nullptr) errors_->add({});
    return respond(
        server::errorResponse(405, request.method + " is not allowed: POST an AdmissionReview"));
  }
  Result<BindingReview> parsed = parseBindingReview(request.body);
  if (!parsed) {
    if (errors_ != nullptr) errors_->add({});
    return respond(server::errorResponse(
        400, "not an admission.k8s.io/v1 AdmissionReview: " + parsed.error().message));
  }
  const BindingReview& r = *parsed;
  if (r.isBinding) cache_.refresh();
  const std::variant<Subject, Unjudged> subject = subjectOf(r, cache_);
  ReviewAnswer answer;
  ReviewRecord record;
  if (const auto* unjudged = std::get_if<Unjudged>(&subject)) {
    const auto budget = reviewBudget(request.target, options_.fallbackBudget);
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    if (options_.fetcher != nullptr && (unjudged->podMissing || unjudged->nodeMissing)) {
      const std::optional<std::chrono::milliseconds> timeout =
          fetchTimeout(budget, spent, options_.margin);
      if (!timeout) {
        Unjudged late = *unjudged;
        late.warning += " (no time left to ask the API server: budget " + secondsText(budget) + ")";
        record = review(r, answer);
        record.message = late.warning;
        answer.warnings = {late.warning};
        return respond(finish(r, record, answer, started));
      }
      auto pending = std::make_shared<Pending>();
      pending->review = r;
      pending->miss = *unjudged;
      pending->started = started;
      pending->respond = std::move(respond);
      pending->outstanding = (unjudged->podMissing ? 1 : 0) + (unjudged->nodeMissing ? 1 : 0);
      std::weak_ptr<bool> alive = alive_;
      if (unjudged->podMissing) {
        options_.fetcher->fetchPod(r.podNamespace, r.podName, *timeout,
                                   [this, alive, pending](Result<policy::Pod> pod) {
                                     if (alive.expired()) return;
                                     if (pod) {
                                       pending->pod = std::move(*pod);
                                     } else if (pending->error.empty()) {
                                       pending->error = pod.error().message;
                                     }
                                     if (--pending->outstanding == 0) fetched(pending);
                                   });
      }
      if (unjudged->nodeMissing) {
        options_.fetcher->fetchNode(r.node, *timeout,
                                    [this, alive, pending](Result<policy::Node> node) {
                                      if (alive.expired()) return;
                                      if (node) {
                                        pending->node = std::move(*node);
                                      } else if (pending->error.empty()) {
                                        pending->error = node.error().message;
                                      }
                                      if (--pending->outstanding == 0) fetched(pending);
                                    });
      }
      return;
    }
  }
  record = review(r, answer);
  respond(finish(r, record, answer, started));
}

// Every fetch of a pending review has ended: judge with what came, or fail open as the miss
// said, the fetch's error added.
void BindingWebhook::fetched(const std::shared_ptr<Pending>& pending) {
  const BindingReview& r = pending->review;
  ReviewAnswer answer;
  ReviewRecord record;
  auto failOpen = [&](const Unjudged& why, const std::string& detail) {
    record = ReviewRecord{};
    record.uid = r.uid;
    record.dryRun = r.dryRun;
    record.pod = r.podKey();
    record.node = r.node;
    record.verdict = ReviewVerdict::FailedOpen;
    record.reason = why.reason;
    record.message = why.warning + (detail.empty() ? "" : " (" + detail + ")");
    answer = ReviewAnswer{};
    answer.warnings.push_back(record.message);
    pending->respond(finish(r, record, answer, pending->started));
  };
  if (!pending->error.empty()) return failOpen(pending->miss, pending->error);

  // The watch may have delivered meanwhile: the cache's objects first, the fetched ones else.
  cache_.refresh();
  const std::string key = r.podKey();
  const policy::Pod* pod = cache_.findPod(key);
  if (pod != nullptr && !r.podUid.empty() && !pod->uid.empty() && pod->uid != r.podUid) {
    pod = nullptr;
  }
  if (pod == nullptr && pending->pod) {
    policy::Pod& fetched = *pending->pod;
    fetched.key = key;
    policy::resolvePod(fetched, cache_.priorityClasses());
    if (!r.podUid.empty() && !fetched.uid.empty() && fetched.uid != r.podUid) {
      return failOpen(Unjudged{"PodNotFound", "nodewarden: the API server has another pod " + key +
                                                  " (uid " + fetched.uid + "); allowed unchecked"},
                      "");
    }
    pod = &fetched;
  }
  if (pod == nullptr) return failOpen(pending->miss, "");
  if (!pod->nodeName.empty()) {
    return failOpen(Unjudged{"AlreadyBound", "nodewarden: pod " + key + " is bound to " +
                                                 pod->nodeName + " already; allowed unchecked"},
                    "");
  }
  std::optional<policy::NodeInfo> node = cache_.nodeInfo(r.node);
  if (!node || !node->node->hasAllocatable) {
    if (pending->node) {
      applyNodewardenConditions(*pending->node);
      node = cache_.nodeInfoWith(*pending->node);
    }
  }
  if (!node) return failOpen(pending->miss, "");
  if (!node->node->hasAllocatable) {
    return failOpen(Unjudged{"NodeNotFound", "nodewarden: node " + r.node +
                                                 " has no status.allocatable yet; allowed "
                                                 "unchecked"},
                    "");
  }
  record = judge(r, *pod, *node, answer);
  pending->respond(finish(r, record, answer, pending->started));
}

server::HttpResponse BindingWebhook::finish(const BindingReview& r, ReviewRecord& record,
                                            const ReviewAnswer& answer,
                                            std::chrono::steady_clock::time_point started) {
  record.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (admissions_ != nullptr) {
    admissions_->add({reviewVerdictName(record.verdict), record.reason});
  }
  if (duration_ != nullptr) duration_->observe({}, record.seconds);
  if (options_.onReview) options_.onReview(record);
  return server::HttpResponse{200, "application/json", admissionReviewResponse(r.uid, answer)};
}

ReviewRecord BindingWebhook::review(const BindingReview& r, ReviewAnswer& answer) {
  ReviewRecord record;
  record.uid = r.uid;
  record.dryRun = r.dryRun;
  if (r.isBinding) {
    record.pod = r.podKey();
    record.node = r.node;
  }
  const std::variant<Subject, Unjudged> subject = subjectOf(r, cache_);
  if (const auto* unjudged = std::get_if<Unjudged>(&subject)) {
    record.verdict = ReviewVerdict::FailedOpen;
    record.reason = unjudged->reason;
    record.message = unjudged->warning;
    answer = ReviewAnswer{};
    answer.warnings.push_back(unjudged->warning);
    return record;
  }
  const Subject& judged = std::get<Subject>(subject);
  return judge(r, *judged.pod, judged.node, answer);
}

ReviewRecord BindingWebhook::judge(const BindingReview& r, const policy::Pod& pod,
                                   const policy::NodeInfo& node, ReviewAnswer& answer) {
  ReviewRecord record;
  record.uid = r.uid;
  record.dryRun = r.dryRun;
  record.pod = r.podKey();
  record.node = r.node;
  const policy::AdmissionDecision decision =
      policy::admitPod(pod, node, cache_.podDisruptionBudgets(), policy_);
  answer = answerFor(decision);
  record.verdict = reviewVerdictOf(decision.verdict);
  record.reason = decision.reason;
  record.message = decision.message;
  record.allowed = answer.allowed;
  for (const policy::Pod* victim : decision.victims) record.victims.push_back(victim->key);
  for (const policy::Pod* p : decision.nominatedPodsToClear) {
    record.nominationsCleared.push_back(p->key);
  }
  if (!r.dryRun) record.acted = act(r, pod, decision);
  return record;
}

// Preempt's evictions and the nominations to clear, each unless requested recently.
bool BindingWebhook::act(const BindingReview& r, const policy::Pod& pod,
                         const policy::AdmissionDecision& decision) {
  bool acted = false;
  const SteadyTime now = options_.clock->now();
  if (decision.verdict == policy::Verdict::Preempt) {
    // Victims already asked to leave for this pod: the cache may not show them terminating
    // yet, and a second eviction would only repeat the first.
    std::vector<const policy::Pod*> fresh;
    std::vector<std::string> keys;
    for (const policy::Pod* victim : decision.victims) {
      std::string key = evictionKey(pod, *victim);
      if (requested_.recent(key, now)) continue;
      fresh.push_back(victim);
      keys.push_back(std::move(key));
    }
    if (!fresh.empty()) {
      actions_.preempt(pod, r.node, fresh);
      acted = true;
      for (const std::string& key : keys) requested_.remember(key, now);
    }
  }
  for (const policy::Pod* p : decision.nominatedPodsToClear) {
    const std::string key = clearNominationKey(*p, r.node);
    if (requested_.recent(key, now)) continue;
    actions_.clearNomination(*p);
    acted = true;
    requested_.remember(key, now);
  }
  return acted;
}

}  // namespace nodewarden::webhook
