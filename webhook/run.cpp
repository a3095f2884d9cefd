// `nodewarden webhook`: options → WebhookService (webhook/service.h) → one loop until
// SIGTERM (server/daemon.h).
#include "webhook/run.h"

#include <iostream>
#include <variant>

#include <boost/asio/io_context.hpp>

#include "base/args.h"
#include "kube/config.h"
#include "policy/files.h"
#include "server/daemon.h"
#include "server/log.h"
#include "webhook/service.h"

namespace nodewarden::webhook {
namespace {

const char* kWebhookUsage =
    "usage: nodewarden webhook [--policy FILE] [--kubeconfig FILE] [--listen ADDR:PORT]\n"
    "                          [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]\n"
    "                          [--log-format text|json] [--decision-log FILE|-]\n"
    "\n"
    "The binding admission webhook: the API server asks it about every pods/binding (the\n"
    "scheduler placing a pod on a node), and it answers with nodewarden's admission verdict\n"
    "(docs/reference.md §5) from a cache of the cluster: admit; reject (unknown priority class, "
    "node\n"
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
    "  --policy FILE          the policy (docs/reference.md §4); the webhook uses "
    "neverEvictPriority.\n"
    "                         Default: the built-in defaults.\n"
    "  --kubeconfig FILE      the API server and credentials. Default: $KUBECONFIG, then\n"
    "                         ~/.kube/config, then the in-cluster service account.\n"
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
    "  --decision-log FILE|-  every verdict (and each preemption's victim) also as a JSON\n"
    "                         line, the shape of 'nodewarden why' records, to FILE (appended)\n"
    "                         or, with '-', standard output.\n"
    "\n"
    "Exit status: 0 after SIGTERM/SIGINT, 1 bad input or start failure, 2 usage error.\n";

// What the command line asks for, checked for shape (every error here is a usage error).
struct WebhookCommand {
  WebhookOptions service;
  std::optional<std::string> kubeconfig;
  server::LogFormat logFormat = server::LogFormat::Text;
};

Result<WebhookCommand> webhookCommand(const Args& args) {
  WebhookCommand command;
  WebhookOptions& options = command.service;
  const auto tlsCert = args.value("tls-cert");
  const auto tlsKey = args.value("tls-key");
  if (tlsCert.has_value() != tlsKey.has_value()) {
    const std::string missing =
        tlsCert ? "--tls-cert needs --tls-key" : "--tls-key needs --tls-cert";
    return Error{missing + " (both or neither)\n\n" + kWebhookUsage};
  }
  if ((tlsCert && tlsCert->empty()) || (tlsKey && tlsKey->empty())) {
    return Error{"--tls-cert and --tls-key need file names"};
  }
  const auto tlsClientCa = args.value("tls-client-ca");
  if (tlsClientCa && (tlsClientCa->empty() || !tlsCert)) {
    return Error{
        "--tls-client-ca needs a file name and --tls-cert/--tls-key (client "
        "certificates are verified over TLS only)"};
  }
  options.tlsCertFile = tlsCert.value_or("");
  options.tlsKeyFile = tlsKey.value_or("");
  options.tlsClientCaFile = tlsClientCa.value_or("");
  options.listen = args.value("listen").value_or("0.0.0.0:8443");
  auto address = server::parseListenAddress(options.listen);
  if (!address) return address.error().withContext("--listen");
  options.address = address->first;
  options.port = address->second;
  options.policyPath = args.value("policy");
  options.decisionLog = args.value("decision-log").value_or("");
  command.kubeconfig = args.value("kubeconfig");
  if (args.value("log-format") == "json") command.logFormat = server::LogFormat::Json;
  return command;
}

// The command line, or the exit code to return now (printed what was wrong).
std::variant<WebhookCommand, int> parseWebhookCommand(const std::vector<std::string>& argv) {
  auto parsed = parseCommand("webhook", argv,
                             {"policy", "kubeconfig", "listen", "tls-cert", "tls-key",
                              "tls-client-ca", "log-format", "decision-log"},
                             {"help"}, kWebhookUsage, std::cout, std::cerr);
  if (const int* exit = std::get_if<int>(&parsed)) return *exit;
  auto command = webhookCommand(std::get<Args>(parsed));
  if (!command) {
    const std::string& message = command.error().message;
    std::cerr << "nodewarden webhook: " << message << (message.ends_with('\n') ? "" : "\n");
    return kExitUsage;
  }
  return std::move(command).value();
}

}  // namespace

int runWebhook(const std::vector<std::string>& argv) {
  auto parsed = parseWebhookCommand(argv);
  if (const int* exit = std::get_if<int>(&parsed)) return *exit;
  WebhookCommand& command = std::get<WebhookCommand>(parsed);
  server::configureLogging(command.logFormat);
  const std::optional<std::string>& policyPath = command.service.policyPath;
  auto policy = policy::loadPolicy(policyPath ? &*policyPath : nullptr);
  if (!policy) {
    std::cerr << policy.error().message << "\n";
    return kExitBadInput;
  }
  auto cluster = kube::resolveClusterConfig(command.kubeconfig);
  if (!cluster) {
    std::cerr << "nodewarden webhook: " << cluster.error().message << "\n";
    return kExitBadInput;
  }

  boost::asio::io_context io;
  WebhookService service(io, std::move(command.service), std::move(policy).value(),
                         std::move(cluster).value());
  if (auto started = service.start(); !started) {
    server::logEvent(server::LogLevel::Error, "start-failed", {{"error", started.error().message}});
    return kExitBadInput;
  }
  server::runUntilStopped(io, service.daemonHooks());
  server::logEvent(server::LogLevel::Info, "stopped", {});
  return kExitOk;
}

}  // namespace nodewarden::webhook
