#include "webhook/service.h"

#include <chrono>
#include <cstdint>
#include <utility>

#include "policy/files.h"
#include "server/log.h"

namespace nodewarden::webhook {

namespace {

// The housekeeping period: objects the stores skipped are logged this often at most.
constexpr std::chrono::seconds kHousekeeping{10};
// After SIGTERM, the preemption writes already queued get this long.
constexpr std::chrono::seconds kDrainWait{5};

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

// One line per answered review; failing open is a warning.
void logReview(const ReviewRecord& record) {
  const server::LogLevel level =
      record.verdict == ReviewVerdict::FailedOpen ? server::LogLevel::Warn : server::LogLevel::Info;
  server::logEvent(level, "admission-review",
                   {{"pod", record.pod},
                    {"node", record.node},
                    {"verdict", reviewVerdictName(record.verdict)},
                    {"reason", record.reason},
                    {"victims", joined(record.victims)},
                    {"nominations_cleared", joined(record.nominationsCleared)},
                    {"allowed", record.allowed},
                    {"dry_run", record.dryRun},
                    {"uid", record.uid},
                    {"ms", record.seconds * 1000.0},
                    {"message", record.message}});
}

void logWrite(const kube::WriteOutcome& outcome) {
  server::logEvent(outcome.ok ? server::LogLevel::Info : server::LogLevel::Warn, "api-write",
                   {{"what", outcome.what},
                    {"pod", outcome.pod},
                    {"ok", outcome.ok},
                    {"attempts", outcome.attempts},
                    {"status", static_cast<std::int64_t>(outcome.status)},
                    {"detail", outcome.detail}});
}

// A write the API server made wait (a disruption budget's 429 on an eviction, no answer, a
// 5xx): retried after `retry_in_ms`.
void logRetry(const kube::WriteOutcome& retry) {
  server::logEvent(server::LogLevel::Warn, "api-write-retry",
                   {{"what", retry.what},
                    {"pod", retry.pod},
                    {"attempts", retry.attempts},
                    {"status", static_cast<std::int64_t>(retry.status)},
                    {"retry_in_ms", static_cast<std::int64_t>(retry.retryIn.count())},
                    {"detail", retry.detail}});
}

kube::WriterOptions writerOptions() {
  kube::WriterOptions options;
  options.component = "nodewarden-webhook";
  return options;
}

BindingWebhookOptions bindingOptions(DecisionLog& decisionLog, MissFetcher& fetcher) {
  BindingWebhookOptions options;
  options.fetcher = &fetcher;
  options.onReview = [&decisionLog](const ReviewRecord& record) {
    logReview(record);
    decisionLog.write(record);
  };
  return options;
}

server::HttpServerOptions httpOptions(const WebhookOptions& options) {
  server::HttpServerOptions http;
  http.address = options.address;
  http.port = options.port;
  http.bodyLimit = 4u << 20;  // a review of a large object (and its oldObject) stays under this
  http.timeout = std::chrono::seconds(10);
  http.maxConnections = 256;
  // A review waiting on its GET answers within its budget (timeoutSeconds is at most 30 s);
  // this only bounds a slot should something never answer.
  http.answerTimeout = std::chrono::seconds(30);
  http.tlsCertFile = options.tlsCertFile;
  http.tlsKeyFile = options.tlsKeyFile;
  http.tlsClientCaFile = options.tlsClientCaFile;
  http.onProblem = [](const std::string& problem) {
    server::logEvent(server::LogLevel::Warn, "http-problem", {{"problem", problem}});
  };
  return http;
}

server::Probe liveness() {
  server::Probe probe{true, policy::OrderedJson::object()};
  probe.body["status"] = "ok";
  return probe;
}

}  // namespace

WebhookService::WebhookService(boost::asio::io_context& io, WebhookOptions options,
                               policy::Policy policy, kube::ClusterConfig cluster)
    : io_(io),
      options_(std::move(options)),
      apiDescription_(cluster.description),
      client_(io, std::move(cluster)),
      pods_("Pod", policy::parsePod),
      nodes_("Node", policy::parseNode),
      classes_("PriorityClass", policy::parsePriorityClass),
      pdbs_("PodDisruptionBudget", policy::parsePodDisruptionBudget),
      cache_(pods_, nodes_, classes_, pdbs_),
      writer_(io, client_, writerOptions()),
      actions_(writer_),
      fetcher_(io, client_),
      webhook_(cache_, actions_, std::move(policy), &metrics_,
               bindingOptions(decisionLog_, fetcher_)),
      routes_{server::ProbeRoutes{liveness, [this] { return readiness(); },
                                  [this] { return metrics_.render(); }},
              !options_.tlsClientCaFile.empty()},
      server_(io, httpOptions(options_),
              server::AsyncHttpHandler(
                  [this](const server::HttpRequest& request, server::HttpRespond respond) {
                    serveWebhookAsync(webhook_, routes_, request, std::move(respond));
                  })),
      housekeeping_(io) {
  writer_.onOutcome = logWrite;
  server::CounterFamily& retries = metrics_.counter(
      "nodewarden_api_write_retries_total",
      "API writes answered with a retryable status and tried again, by write and HTTP status "
      "(code 0: no answer); an eviction a disruption budget refuses counts here as 429.",
      {"what", "code"});
  writer_.onRetry = [&retries](const kube::WriteOutcome& retry) {
    logRetry(retry);
    retries.add({retry.what, std::to_string(retry.status)});
  };
  watch("pods", "/api/v1/pods", cache_.podSink());
  watch("nodes", "/api/v1/nodes", nodes_);
  watch("priorityclasses", "/apis/scheduling.k8s.io/v1/priorityclasses", classes_);
  watch("poddisruptionbudgets", "/apis/policy/v1/poddisruptionbudgets", pdbs_);
}

WebhookService::~WebhookService() = default;

void WebhookService::watch(std::string name, std::string path, kube::StoreSink& sink) {
  kube::ReflectorOptions options;
  options.listPath = std::move(path);
  auto log = [name](const std::string& event, const std::string& detail) {
    server::logEvent(server::LogLevel::Info, "reflector",
                     {{"resource", name}, {"event", event}, {"detail", detail}});
  };
  watched_.push_back(
      Watched{name, std::make_unique<kube::Reflector>(io_, client_, options, sink, log)});
}

server::Probe WebhookService::readiness() const {
  std::vector<std::string> missing;
  for (const Watched& w : watched_) {
    if (!w.reflector->synced()) missing.push_back(w.name);
  }
  server::Probe probe{missing.empty(), policy::OrderedJson::object()};
  probe.body["status"] =
      missing.empty() ? "ready" : "not ready: not listed yet: " + joined(missing);
  if (!missing.empty()) probe.body["notSynced"] = missing;
  return probe;
}

Result<void> WebhookService::start() {
  if (!options_.decisionLog.empty()) {
    if (auto opened = decisionLog_.open(options_.decisionLog); !opened) return opened.error();
  }
  if (auto started = server_.start(); !started) return started.error();
  const bool tls = !options_.tlsCertFile.empty();
  if (!tls) {
    server::logEvent(server::LogLevel::Warn, "plain-http",
                     {{"listen", options_.listen},
                      {"warning",
                       "serving plain HTTP: the API server calls webhooks over HTTPS only; use "
                       "--tls-cert and --tls-key unless a TLS-terminating proxy is in front"}});
  }
  server::logEvent(server::LogLevel::Info, "started",
                   {{"listen", options_.listen},
                    {"port", static_cast<std::int64_t>(server_.port())},
                    {"tls", tls},
                    {"api", apiDescription_}});
  for (Watched& w : watched_) w.reflector->start();
  scheduleHousekeeping();
  return {};
}

// Objects the stores skipped, logged in batches.
void WebhookService::scheduleHousekeeping() {
  housekeeping_.expires_after(kHousekeeping);
  housekeeping_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    auto report = [](std::vector<std::string> problems) {
      for (const std::string& problem : problems) {
        server::logEvent(server::LogLevel::Warn, "object-skipped", {{"problem", problem}});
      }
    };
    report(pods_.takeProblems());
    report(nodes_.takeProblems());
    report(classes_.takeProblems());
    report(pdbs_.takeProblems());
    scheduleHousekeeping();
  });
}

void WebhookService::stop() {
  stopping_ = true;
  server_.stop();
  for (Watched& w : watched_) w.reflector->stop();
  housekeeping_.cancel();
}

void WebhookService::reload() {
  const std::optional<std::string>& path = options_.policyPath;
  auto reloaded = policy::loadPolicy(path ? &*path : nullptr);
  if (reloaded) {
    webhook_.setPolicy(std::move(reloaded).value());
    server::logEvent(server::LogLevel::Info, "policy-reloaded",
                     {{"file", path.value_or("(defaults)")}});
  } else {
    server::logEvent(server::LogLevel::Error, "policy-reload-rejected",
                     {{"errors", reloaded.error().message}, {"kept", "the last good policy"}});
  }
  if (!options_.tlsCertFile.empty()) {
    auto tls = server_.reloadTls();
    if (tls && *tls) {
      server::logEvent(server::LogLevel::Info, "reload", {{"tls", "new certificate"}});
    }
    // A failure was reported through onProblem already.
  }
}

server::DaemonHooks WebhookService::daemonHooks() {
  server::DaemonHooks hooks;
  hooks.stop = [this] { stop(); };
  hooks.reload = [this] { reload(); };
  hooks.pending = [this] { return writer_.pending(); };
  hooks.drainFor = kDrainWait;
  return hooks;
}

}  // namespace nodewarden::webhook
