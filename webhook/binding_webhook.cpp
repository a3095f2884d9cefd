#include "webhook/binding_webhook.h"

#include <utility>

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

std::string uidOrKey(const policy::Pod& pod) {
  return pod.uid.empty() ? pod.key : pod.uid;
}

}  // namespace

std::vector<double> reviewDurationBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
          0.01,    0.025,  0.05,    0.1,    0.25,  0.5,    1};
}

BindingWebhook::BindingWebhook(ClusterCache& cache, AdmissionActions& actions,
                               policy::Policy policy, server::MetricsRegistry* metrics,
                               BindingWebhookOptions options)
    : cache_(cache), actions_(actions), policy_(std::move(policy)), options_(std::move(options)) {
  if (!options_.now) options_.now = [] { return std::chrono::steady_clock::now(); };
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

server::HttpResponse BindingWebhook::handle(const server::HttpRequest& request) {
  const auto started = std::chrono::steady_clock::now();
  if (request.method != "POST") {
    if (errors_ != nullptr) errors_->add({});
    return server::errorResponse(405, request.method + " is not allowed: POST an AdmissionReview");
  }
  Result<BindingReview> parsed = parseBindingReview(request.body);
  if (!parsed) {
    if (errors_ != nullptr) errors_->add({});
    return server::errorResponse(
        400, "not an admission.k8s.io/v1 AdmissionReview: " + parsed.error().message);
  }
  ReviewAnswer answer;
  ReviewRecord record = review(*parsed, answer);
  record.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (admissions_ != nullptr) admissions_->add({record.verdict, record.reason});
  if (duration_ != nullptr) duration_->observe({}, record.seconds);
  if (options_.onReview) options_.onReview(record);
  return server::HttpResponse{200, "application/json", admissionReviewResponse(parsed->uid, answer)};
}

bool BindingWebhook::recentlyDone(const std::string& key,
                                  std::chrono::steady_clock::time_point now) {
  if (done_.size() > 4096) {
    for (auto it = done_.begin(); it != done_.end();) {
      it = now - it->second >= options_.actionMemory ? done_.erase(it) : std::next(it);
    }
  }
  auto it = done_.find(key);
  return it != done_.end() && now - it->second < options_.actionMemory;
}

ReviewRecord BindingWebhook::review(const BindingReview& r, ReviewAnswer& answer) {
  ReviewRecord record;
  record.uid = r.uid;
  record.dryRun = r.dryRun;
  auto failOpen = [&](std::string reason, std::string warning) {
    record.verdict = "allow-unchecked";
    record.reason = std::move(reason);
    record.message = warning;
    answer.allowed = true;
    answer.warnings.push_back(std::move(warning));
    return record;
  };
  if (!r.isBinding) {
    return failOpen("NotABinding", "nodewarden only reviews pods/binding (got " +
                                       (r.resource.empty() ? std::string("?") : r.resource) +
                                       (r.subResource.empty() ? "" : "/" + r.subResource) + " " +
                                       (r.operation.empty() ? std::string("?") : r.operation) +
                                       ")");
  }
  record.pod = r.podKey();
  record.node = r.node;

  cache_.refresh();
  const policy::Pod* pod = cache_.findPod(record.pod);
  if (pod == nullptr) {
    return failOpen("PodNotFound", "nodewarden: pod " + record.pod +
                                       " is not in its cache yet; allowed unchecked");
  }
  if (!r.podUid.empty() && !pod->uid.empty() && pod->uid != r.podUid) {
    return failOpen("PodNotFound", "nodewarden: its cache has an older pod " + record.pod +
                                       " (uid " + pod->uid + "); allowed unchecked");
  }
  if (!pod->nodeName.empty()) {
    return failOpen("AlreadyBound", "nodewarden: pod " + record.pod + " is bound to " +
                                        pod->nodeName + " already; allowed unchecked");
  }
  const std::optional<policy::NodeInfo> node = cache_.nodeInfo(r.node);
  if (!node) {
    return failOpen("NodeNotFound",
                    "nodewarden: node " + r.node + " is not in its cache yet; allowed unchecked");
  }
  if (!node->node->hasAllocatable) {
    return failOpen("NodeNotFound", "nodewarden: node " + r.node +
                                        " has no status.allocatable yet; allowed unchecked");
  }

  const policy::AdmissionDecision decision =
      policy::admitPod(*pod, *node, cache_.podDisruptionBudgets(), policy_);
  record.verdict = policy::verdictName(decision.verdict);
  record.reason = decision.reason;
  record.message = decision.message;
  for (const policy::Pod* victim : decision.victims) record.victims.push_back(victim->key);
  for (const policy::Pod* p : decision.nominatedPodsToClear) {
    record.nominationsCleared.push_back(p->key);
  }
  answer.allowed = decision.verdict == policy::Verdict::Admit;
  record.allowed = answer.allowed;
  if (!answer.allowed) {
    answer.code = 403;
    answer.reason = decision.reason;
    // docs/reference.md §7: the §5 reason is status.message; the whole story is in the details.
    answer.message = decision.reason;
    answer.detail = decision.reason + ": " + decision.message;
    if (decision.verdict == policy::Verdict::Preempt) {
      answer.detail += ": " + victimList(decision.victims);
    }
  }
  if (r.dryRun) return record;

  const auto now = options_.now();
  if (decision.verdict == policy::Verdict::Preempt) {
    // Victims already asked to leave for this pod: the cache may not show them terminating
    // yet, and a second eviction would only repeat the first.
    std::vector<const policy::Pod*> fresh;
    for (const policy::Pod* victim : decision.victims) {
      const std::string key = "evict/" + uidOrKey(*pod) + "/" + uidOrKey(*victim);
      if (!recentlyDone(key, now)) fresh.push_back(victim);
    }
    if (!fresh.empty()) {
      actions_.preempt(*pod, r.node, fresh);
      record.acted = true;
      for (const policy::Pod* victim : fresh) {
        done_["evict/" + uidOrKey(*pod) + "/" + uidOrKey(*victim)] = now;
      }
    }
  }
  for (const policy::Pod* p : decision.nominatedPodsToClear) {
    const std::string key = "clear/" + uidOrKey(*p) + "/" + r.node;
    if (recentlyDone(key, now)) continue;
    actions_.clearNomination(*p);
    record.acted = true;
    done_[key] = now;
  }
  return record;
}

}  // namespace nodewarden::webhook
