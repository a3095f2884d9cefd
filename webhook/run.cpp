// `nodewarden webhook`: the binding admission webhook as a cluster service. Four reflectors
// (pods, nodes, priority classes, disruption budgets) keep a StoreClusterCache current; the
// HTTPS server answers AdmissionReviews from it; preemption goes through kube::ApiWriter.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <iostream>

#include "base/args.h"
#include "webhook/run.h"
#include "policy/files.h"
#include "server/http_server.h"
#include "server/daemon.h"
#include "server/http_json.h"
#include "server/log.h"
#include "server/probes.h"
#include "server/metrics.h"
#include "webhook/binding_webhook.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/reflector.h"
#include "kube/writer.h"

namespace nodewarden::webhook {
namespace {

const char* kWebhookUsage =
    "usage: nodewarden webhook [--policy FILE] [--kubeconfig FILE] [--listen ADDR:PORT]\n"
    "                          [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]\n"
    "                          [--log-format text|json]\n"
    "\n"
    "The binding admission webhook: the API server asks it about every pods/binding (the\n"
    "scheduler placing a pod on a node), and it answers with nodewarden's admission verdict\n"
    "(docs/reference.md §5) from a cache of the cluster: admit; reject (unknown priority class, node\n"
    "pressure, selector or taints, no room and no preemption allowed); wait (room comes once\n"
    "terminating pods are gone); or preempt (the victims are evicted through the Eviction API\n"
    "and the pod is nominated to the node; the binding is denied until they are gone). A\n"
    "review it cannot judge (pod or node not cached yet) is allowed with a warning. Register\n"
    "it with failurePolicy: Ignore for pods/binding CREATE.\n"
    "\n"
    "Runs until SIGTERM or SIGINT; SIGHUP reloads the policy and the TLS files (the TLS files\n"
    "are also re-read when they change, checked at most once a minute).\n"
    "\n"
    "Options:\n"
    "  --policy FILE          the policy (docs/reference.md §4); the webhook uses neverEvictPriority.\n"
    "                         Default: the built-in defaults.\n"
    "  --kubeconfig FILE      the API server and credentials. Default: $KUBECONFIG, then the\n"
    "                         in-cluster service account.\n"
    "  --listen ADDR:PORT     where to serve (default 0.0.0.0:8443):\n"
    "                         POST /v1/admission-review, GET /healthz, /readyz, /metrics.\n"
    "  --tls-cert FILE        the serving certificate (PEM, chain allowed), valid for\n"
    "                         <service>.<namespace>.svc; needs --tls-key.\n"
    "  --tls-key FILE         its private key (PEM, unencrypted).\n"
    "  --tls-client-ca FILE   CA certificates (PEM): POST /v1/admission-review then needs a\n"
    "                         client certificate they sign (the API server's, named in its\n"
    "                         AdmissionConfiguration); probes and /metrics do not.\n"
    "                         Without both, plain HTTP (the API server will not call it; for\n"
    "                         tests or behind a TLS-terminating proxy only).\n"
    "  --log-format text|json one line per event: logfmt-style text (default) or JSON lines.\n"
    "\n"
    "Exit status: 0 after SIGTERM/SIGINT, 1 bad input or start failure, 2 usage error.\n";

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

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

struct Watched {
  std::string name;  // for /readyz and logs: "pods"
  std::unique_ptr<kube::Reflector> reflector;
};

}  // namespace

int runWebhook(const std::vector<std::string>& argv) {
  auto parsed = parseCommand(
      "webhook", argv,
      {"policy", "kubeconfig", "listen", "tls-cert", "tls-key", "tls-client-ca", "log-format"},
      {"help"}, kWebhookUsage, std::cout, std::cerr);
  if (const int* exit = std::get_if<int>(&parsed)) return *exit;
  const Args* args = &std::get<Args>(parsed);
  const std::string logFormat = args->value("log-format").value_or("text");
  const auto tlsCert = args->value("tls-cert");
  const auto tlsKey = args->value("tls-key");
  if (tlsCert.has_value() != tlsKey.has_value()) {
    std::cerr << "nodewarden webhook: "
              << (tlsCert ? "--tls-cert needs --tls-key" : "--tls-key needs --tls-cert")
              << " (both or neither)\n\n"
              << kWebhookUsage;
    return kExitUsage;
  }
  if ((tlsCert && tlsCert->empty()) || (tlsKey && tlsKey->empty())) {
    std::cerr << "nodewarden webhook: --tls-cert and --tls-key need file names\n";
    return kExitUsage;
  }
  const auto tlsClientCa = args->value("tls-client-ca");
  if (tlsClientCa && (tlsClientCa->empty() || !tlsCert)) {
    std::cerr << "nodewarden webhook: --tls-client-ca needs a file name and --tls-cert/--tls-key "
                 "(client certificates are verified over TLS only)\n";
    return kExitUsage;
  }
  const std::string listen = args->value("listen").value_or("0.0.0.0:8443");
  auto address = server::parseListenAddress(listen);
  if (!address) {
    std::cerr << "nodewarden webhook: --listen: " << address.error().message << "\n";
    return kExitUsage;
  }
  server::configureLogging(logFormat == "json" ? server::LogFormat::Json : server::LogFormat::Text);

  const std::optional<std::string> policyPath = args->value("policy");
  auto policy = policy::loadPolicy(policyPath ? &*policyPath : nullptr);
  if (!policy) {
    std::cerr << policy.error().message << "\n";
    return kExitBadInput;
  }
  auto cluster = kube::resolveClusterConfig(args->value("kubeconfig"));
  if (!cluster) {
    std::cerr << "nodewarden webhook: " << cluster.error().message << "\n";
    return kExitBadInput;
  }

  boost::asio::io_context io;
  const std::string apiDescription = cluster->description;
  kube::Client client(io, std::move(cluster).value());

  kube::Store<policy::Pod> pods("Pod", policy::parsePod);
  kube::Store<policy::Node> nodes("Node", policy::parseNode);
  kube::Store<policy::PriorityClass> classes("PriorityClass", policy::parsePriorityClass);
  kube::Store<policy::PodDisruptionBudget> pdbs("PodDisruptionBudget",
                                                policy::parsePodDisruptionBudget);
  StoreClusterCache cache(pods, nodes, classes, pdbs);

  kube::WriterOptions writerOptions;
  writerOptions.component = "nodewarden-webhook";
  kube::ApiWriter writer(io, client, writerOptions);
  writer.onOutcome = [](const kube::WriteOutcome& outcome) {
    server::logEvent(outcome.ok ? server::LogLevel::Info : server::LogLevel::Warn, "api-write",
             {{"what", outcome.what},
              {"pod", outcome.pod},
              {"ok", outcome.ok},
              {"attempts", outcome.attempts},
              {"status", static_cast<std::int64_t>(outcome.status)},
              {"detail", outcome.detail}});
  };
  ApiAdmissionActions actions(writer);

  server::MetricsRegistry metrics;
  BindingWebhookOptions webhookOptions;
  webhookOptions.onReview = logReview;
  BindingWebhook webhook(cache, actions, std::move(policy).value(), &metrics, webhookOptions);

  std::vector<Watched> watched;
  auto watch = [&](std::string name, std::string path, kube::StoreSink& sink) {
    kube::ReflectorOptions options;
    options.listPath = std::move(path);
    auto log = [name](const std::string& event, const std::string& detail) {
      server::logEvent(server::LogLevel::Info, "reflector",
               {{"resource", name}, {"event", event}, {"detail", detail}});
    };
    watched.push_back(
        Watched{name, std::make_unique<kube::Reflector>(io, client, options, sink, log)});
  };
  watch("pods", "/api/v1/pods", cache.podSink());
  watch("nodes", "/api/v1/nodes", nodes);
  watch("priorityclasses", "/apis/scheduling.k8s.io/v1/priorityclasses", classes);
  watch("poddisruptionbudgets", "/apis/policy/v1/poddisruptionbudgets", pdbs);

  auto notSynced = [&] {
    std::vector<std::string> out;
    for (const Watched& w : watched) {
      if (!w.reflector->synced()) out.push_back(w.name);
    }
    return out;
  };
  // /healthz, /readyz and /metrics as the agent serves them (server/probes.h).
  const server::ProbeRoutes probes{
      [] {
        server::Probe probe{true, policy::OrderedJson::object()};
        probe.body["status"] = "ok";
        return probe;
      },
      [&] {
        const std::vector<std::string> missing = notSynced();
        server::Probe probe{missing.empty(), policy::OrderedJson::object()};
        probe.body["status"] =
            missing.empty() ? "ready" : "not ready: not listed yet: " + joined(missing);
        if (!missing.empty()) probe.body["notSynced"] = missing;
        return probe;
      },
      [&] { return metrics.render(); }};
  auto route = [&](const server::HttpRequest& request) -> server::HttpResponse {
    if (auto answered = server::serveProbes(request, probes)) return *answered;
    const std::string path = server::requestPath(request);
    if (path == "/v1/admission-review") {
      // With --tls-client-ca only a client with a verified certificate (the API server, as its
      // admission configuration names one) may ask for a decision that can evict.
      if (tlsClientCa && !request.clientCertificateVerified) {
        return server::errorResponse(403, "POST /v1/admission-review needs a client certificate "
                                          "signed by the --tls-client-ca authority");
      }
      return webhook.handle(request);
    }
    return server::errorResponse(
        404, "no such path: " + path + " (try POST /v1/admission-review, /healthz, /readyz, /metrics)");
  };

  server::HttpServerOptions http;
  http.address = address->first;
  http.port = address->second;
  http.bodyLimit = 4u << 20;  // a review of a large object (and its oldObject) stays under this
  http.timeout = std::chrono::seconds(10);
  http.maxConnections = 256;
  http.tlsCertFile = tlsCert.value_or("");
  http.tlsKeyFile = tlsKey.value_or("");
  http.tlsClientCaFile = tlsClientCa.value_or("");
  http.onProblem = [](const std::string& problem) {
    server::logEvent(server::LogLevel::Warn, "http-problem", {{"problem", problem}});
  };
  server::HttpServer server(io, http, route);
  auto started = server.start();
  if (!started) {
    server::logEvent(server::LogLevel::Error, "start-failed", {{"error", started.error().message}});
    return kExitBadInput;
  }
  if (!tlsCert) {
    server::logEvent(server::LogLevel::Warn, "plain-http",
             {{"listen", listen},
              {"warning",
               "serving plain HTTP: the API server calls webhooks over HTTPS only; use "
               "--tls-cert and --tls-key unless a TLS-terminating proxy is in front"}});
  }
  server::logEvent(server::LogLevel::Info, "started",
           {{"listen", listen},
            {"port", static_cast<std::int64_t>(server.port())},
            {"tls", tlsCert.has_value()},
            {"api", apiDescription}});
  for (Watched& w : watched) w.reflector->start();

  // Housekeeping: objects the stores skipped, once a minute at most per batch.
  boost::asio::steady_timer housekeeping(io);
  bool stopping = false;
  std::function<void()> tick = [&] {
    housekeeping.expires_after(std::chrono::seconds(10));
    housekeeping.async_wait([&](const boost::system::error_code& ec) {
      if (ec || stopping) return;
      auto report = [](std::vector<std::string> problems) {
        for (const std::string& problem : problems) {
          server::logEvent(server::LogLevel::Warn, "object-skipped", {{"problem", problem}});
        }
      };
      report(pods.takeProblems());
      report(nodes.takeProblems());
      report(classes.takeProblems());
      report(pdbs.takeProblems());
      tick();
    });
  };
  tick();

  server::DaemonHooks hooks;
  hooks.stop = [&] {
    stopping = true;
    server.stop();
    for (Watched& w : watched) w.reflector->stop();
    housekeeping.cancel();
  };
  hooks.reload = [&] {
    auto reloaded = policy::loadPolicy(policyPath ? &*policyPath : nullptr);
    if (reloaded) {
      webhook.setPolicy(std::move(reloaded).value());
      server::logEvent(server::LogLevel::Info, "policy-reloaded",
                       {{"file", policyPath.value_or("(defaults)")}});
    } else {
      server::logEvent(server::LogLevel::Error, "policy-reload-rejected",
                       {{"errors", reloaded.error().message}, {"kept", "the last good policy"}});
    }
    if (tlsCert) {
      auto tls = server.reloadTls();
      if (tls && *tls) server::logEvent(server::LogLevel::Info, "reload", {{"tls", "new certificate"}});
      // A failure was reported through onProblem already.
    }
  };
  // Preemption writes already queued get up to 5 s; then the loop ends regardless.
  hooks.pending = [&] { return writer.pending(); };
  hooks.drainFor = std::chrono::seconds(5);
  server::runUntilStopped(io, hooks);
  server::logEvent(server::LogLevel::Info, "stopped", {});
  return kExitOk;
}

}  // namespace nodewarden::webhook
