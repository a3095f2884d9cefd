#include "node/routes.h"

#include <chrono>
#include <string_view>

#include "policy/admission.h"
#include "server/http_json.h"
#include "server/log.h"
#include "server/probes.h"
#include "webhook/binding_webhook.h"

namespace nodewarden::node {

namespace {

policy::WallMicros wallNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string percentDecode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    auto hex = [](char h) -> int {
      if (h >= '0' && h <= '9') return h - '0';
      if (h >= 'a' && h <= 'f') return h - 'a' + 10;
      if (h >= 'A' && h <= 'F') return h - 'A' + 10;
      return -1;
    };
    if (c == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out.push_back(char(hex(text[i + 1]) * 16 + hex(text[i + 2])));
      i += 2;
    } else {
      out.push_back(c == '+' ? ' ' : c);
    }
  }
  return out;
}

server::Probe liveness(const AgentSurface& agent) {
  server::Probe probe;
  probe.ok = agent.healthy();
  probe.body["status"] = probe.ok ? "ok" : "stalled";
  const auto last = agent.lastCycleAt();
  probe.body["lastCycleSecondsAgo"] =
      last ? std::chrono::duration<double>(agent.clock().now() - *last).count() : -1.0;
  return probe;
}

server::Probe readiness(const AgentSurface& agent) {
  server::Probe probe;
  probe.ok = agent.ready();
  probe.body["status"] = probe.ok ? "ready" : "not ready: no full scan yet";
  return probe;
}

// The admission routes can lead to evictions: off unless --admission-routes, and with
// --tls-client-ca only for a client whose certificate verified.
std::optional<server::HttpResponse> admissionDoor(const AgentSurface& agent,
                                                  const RouteOptions& options,
                                                  const server::HttpRequest& request,
                                                  const std::string& path) {
  if (!options.admissionRoutes) {
    return server::errorResponse(404, "no such path: " + path +
                                          " (the admission routes are off: start the agent "
                                          "with --admission-routes)");
  }
  if (options.verifiedClientsOnly && !request.clientCertificateVerified) {
    return server::errorResponse(403, request.method + " " + path +
                                          " needs a client certificate signed by the "
                                          "--tls-client-ca authority");
  }
  if (request.method != "POST") return server::methodNotAllowed(request);
  if (!agent.ready()) return server::errorResponse(503, "no full scan yet");
  return std::nullopt;
}

server::HttpResponse admitOne(AgentSurface& agent, const server::HttpRequest& request) {
  const policy::Snapshot& snapshot = agent.snapshot();
  policy::Diagnostics diagnostics;
  auto json = policy::parseKubernetesJsonText(request.body, diagnostics);
  std::optional<policy::Pod> pod;
  if (json) pod = policy::parsePod(*json, "", diagnostics);
  if (!pod) return server::errorResponse(400, "request body: " + diagnostics.joined());
  policy::resolvePod(*pod, snapshot.priorityClasses);
  const policy::ClusterIndex cluster = policy::buildClusterIndex(snapshot);
  const policy::NodeInfo* node =
      snapshot.nodes.empty() ? nullptr : cluster.find(snapshot.nodes[0].name);
  if (node == nullptr) return server::errorResponse(503, "this node is not known yet");
  const policy::AdmissionDecision decision =
      policy::admitPod(*pod, *node, snapshot.podDisruptionBudgets, agent.policy());
  const std::string verdict(policy::verdictName(decision.verdict));
  agent.metrics().admissions.add({verdict, decision.reason});
  if (Recorder* recorder = agent.recorder()) {
    std::vector<std::string> victims;
    for (const policy::Pod* victim : decision.victims) victims.push_back(victim->key);
    for (record::DecisionRecord& r :
         record::admissionRecords(wallNow(), decision.node, decision.pod, pod->uid, verdict,
                                  decision.reason, decision.message, victims, false)) {
      recorder->decision(std::move(r));
    }
  }
  server::logEvent(server::LogLevel::Info, "admission",
                   {{"pod", decision.pod},
                    {"verdict", verdict},
                    {"reason", decision.reason},
                    {"message", decision.message}});
  return server::jsonResponse(200, policy::admissionToJson(decision));
}

// This node as the agent sees it (its pods, its live pressure conditions) plus the
// unscheduled pods its source knows (the pod under review is one of them). A binding to
// another node is not this agent's to judge: the webhook fails open and says so.
server::HttpResponse reviewBinding(AgentSurface& agent, const RouteOptions& routes,
                                   const server::HttpRequest& request) {
  const policy::Snapshot& snapshot = agent.snapshot();
  policy::Snapshot cluster;
  cluster.nodes = snapshot.nodes;
  cluster.pods = snapshot.pods;
  cluster.pods.insert(cluster.pods.end(), agent.pendingPods().begin(), agent.pendingPods().end());
  cluster.priorityClasses = snapshot.priorityClasses;
  cluster.podDisruptionBudgets = snapshot.podDisruptionBudgets;
  webhook::SnapshotClusterCache cache(std::move(cluster));
  webhook::RecordingAdmissionActions recorder;  // static source: decided, not acted on
  webhook::AdmissionActions* acting = routes.admissionActions;
  webhook::AdmissionActions& actions = acting != nullptr ? *acting : recorder;
  webhook::BindingWebhookOptions options;
  options.onReview = [&agent, acting](const webhook::ReviewRecord& record) {
    const char* verdict = webhook::reviewVerdictName(record.verdict);
    if (record.verdict != webhook::ReviewVerdict::FailedOpen) {
      agent.metrics().admissions.add({verdict, record.reason});
      if (Recorder* flight = agent.recorder()) {
        for (record::DecisionRecord& r : record::admissionRecords(
                 wallNow(), record.node, record.pod, "", verdict, record.reason, record.message,
                 record.victims, record.dryRun)) {
          flight->decision(std::move(r));
        }
      }
    }
    std::string victims;
    for (const auto& victim : record.victims) victims += (victims.empty() ? "" : ",") + victim;
    server::logEvent(record.allowed ? server::LogLevel::Info : server::LogLevel::Warn,
                     "admission-review",
                     {{"pod", record.pod},
                      {"node", record.node},
                      {"verdict", verdict},
                      {"reason", record.reason},
                      {"message", record.message},
                      {"victims", victims},
                      {"dry_run", record.dryRun},
                      {"acted", record.acted && acting != nullptr}});
  };
  webhook::BindingWebhook hook(cache, actions, agent.policy(), nullptr, std::move(options));
  return hook.handle(request);
}

// GET /v1/decisions?pod=NS/NAME: the pod's decision records (docs/reference.md §8).
server::HttpResponse decisions(AgentSurface& agent, const server::HttpRequest& request) {
  if (!server::isRead(request)) return server::methodNotAllowed(request);
  std::optional<std::string> pod;
  const std::size_t question = request.target.find('?');
  if (question != std::string::npos) {
    std::string_view query = std::string_view(request.target).substr(question + 1);
    while (!query.empty()) {
      const std::size_t amp = query.find('&');
      const std::string_view pair = query.substr(0, amp);
      if (pair.starts_with("pod=")) pod = percentDecode(pair.substr(4));
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
  }
  if (!pod || pod->find('/') == std::string::npos) {
    return server::errorResponse(400, "GET /v1/decisions needs ?pod=NAMESPACE/NAME");
  }
  Recorder* recorder = agent.recorder();
  const std::vector<record::DecisionRecord> records =
      recorder != nullptr ? recorder->decisionsFor(*pod) : std::vector<record::DecisionRecord>{};
  return server::jsonResponse(200, record::whyJson(*pod, records));
}

}  // namespace

server::HttpResponse serveAgent(AgentSurface& agent, const RouteOptions& options,
                                const server::HttpRequest& request) {
  const server::ProbeRoutes probes{[&] { return liveness(agent); },
                                   [&] { return readiness(agent); },
                                   [&] { return agent.metricsText(); }};
  if (auto answered = server::serveProbes(request, probes)) return *answered;

  const std::string path = server::requestPath(request);
  if (path == "/v1/state") {
    if (!server::isRead(request)) return server::methodNotAllowed(request);
    if (!agent.ready()) return server::errorResponse(503, "no full scan yet");
    return server::jsonResponse(200, agent.stateJson());
  }
  if (path == "/v1/decisions") return decisions(agent, request);
  if (path == "/v1/admit" || path == "/v1/admission-review") {
    if (auto refused = admissionDoor(agent, options, request, path)) return *refused;
    return path == "/v1/admit" ? admitOne(agent, request) : reviewBinding(agent, options, request);
  }
  return server::errorResponse(
      404, "no such path: " + path +
               (options.admissionRoutes
                    ? " (try /healthz, /readyz, /metrics, /v1/state, /v1/decisions, POST "
                      "/v1/admit, POST /v1/admission-review)"
                    : " (try /healthz, /readyz, /metrics, /v1/state, /v1/decisions)"));
}

std::unique_ptr<server::HttpServer> agentServer(boost::asio::io_context& io,
                                                server::HttpServerOptions http, AgentSurface& agent,
                                                RouteOptions options) {
  if (!http.onProblem) {
    http.onProblem = [](const std::string& problem) {
      server::logEvent(server::LogLevel::Warn, "http-problem", {{"problem", problem}});
    };
  }
  return std::make_unique<server::HttpServer>(
      io, std::move(http), [&agent, options](const server::HttpRequest& request) {
        return serveAgent(agent, options, request);
      });
}

}  // namespace nodewarden::node
