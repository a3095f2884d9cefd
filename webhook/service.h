// `nodewarden webhook` as a service (docs/reference.md §1, §7): four reflectors (pods, nodes,
// priority classes, disruption budgets) keep a StoreClusterCache current; the HTTP(S) server
// answers AdmissionReviews from it through serveWebhook (webhook/routes.h); preemption goes
// through kube::ApiWriter. The service owns every piece as a member, built in declaration
// order and destroyed in reverse, so nothing outlives what it refers to.
//
// Threading: construct, start and destroy it on the thread that runs `io` (or before `io`
// runs); everything it does happens on that loop.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/result.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/reflector.h"
#include "kube/writer.h"
#include "policy/model.h"
#include "policy/policy.h"
#include "server/daemon.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "webhook/admission_actions.h"
#include "webhook/binding_webhook.h"
#include "webhook/cluster_cache.h"
#include "webhook/decision_log.h"
#include "webhook/miss_fetch.h"
#include "webhook/routes.h"

namespace nodewarden::webhook {

// What the command line asks of the service.
struct WebhookOptions {
  std::optional<std::string> policyPath;  // --policy, re-read on SIGHUP; none: the defaults
  std::string listen;                     // --listen as given, for the logs
  std::string address;                    // its host
  std::uint16_t port = 8443;              // its port (0: any free port)
  // --tls-cert, --tls-key, --tls-client-ca; empty: none (plain HTTP without the pair).
  std::string tlsCertFile, tlsKeyFile, tlsClientCaFile;
  // --decision-log: "" none, "-" standard output, else a file (appended).
  std::string decisionLog;
};

class WebhookService {
 public:
  // Builds every piece; opens and starts nothing. `io` must outlive the service.
  WebhookService(boost::asio::io_context& io, WebhookOptions options, policy::Policy policy,
                 kube::ClusterConfig cluster);
  ~WebhookService();
  WebhookService(const WebhookService&) = delete;
  WebhookService& operator=(const WebhookService&) = delete;

  // Opens the decision log, listens (with TLS, after loading the pair), then starts the
  // reflectors and the housekeeping; logs "plain-http" without TLS, and "started". An error
  // names the file, the address or the TLS file, and nothing is started.
  Result<void> start();

  // For server::runUntilStopped: stop ends the server, the watches and the housekeeping;
  // reload re-reads the policy (a bad file keeps the last good policy) and the TLS pair;
  // preemption writes already queued get up to 5 s to drain.
  server::DaemonHooks daemonHooks();

 private:
  struct Watched {
    std::string name;  // for /readyz and logs: "pods"
    std::unique_ptr<kube::Reflector> reflector;
  };

  void watch(std::string name, std::string path, kube::StoreSink& sink);
  server::Probe readiness() const;
  void scheduleHousekeeping();
  void stop();
  void reload();

  boost::asio::io_context& io_;
  WebhookOptions options_;
  std::string apiDescription_;
  kube::Client client_;
  kube::Store<policy::Pod> pods_;
  kube::Store<policy::Node> nodes_;
  kube::Store<policy::PriorityClass> classes_;
  kube::Store<policy::PodDisruptionBudget> pdbs_;
  StoreClusterCache cache_;
  kube::ApiWriter writer_;
  ApiAdmissionActions actions_;
  ApiMissFetcher fetcher_;  // the GET of what the cache misses, before webhook_
  server::MetricsRegistry metrics_;
  DecisionLog decisionLog_;  // before webhook_, whose reviews it writes
  BindingWebhook webhook_;
  std::vector<Watched> watched_;
  WebhookRoutes routes_;
  server::HttpServer server_;
  boost::asio::steady_timer housekeeping_;
  bool stopping_ = false;
};

}  // namespace nodewarden::webhook
