// `nodewarden agent`: options → hierarchy, pod source, actuator → the Agent on one loop.
#include <unistd.h>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <iostream>

#include "node/agent.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "policy/files.h"
#include "node/kube_source.h"
#include "server/log.h"
#include "webhook/webhook.h"
#include "kube/client.h"
#include "kube/writer.h"

namespace nodewarden::agent {
namespace {

const char* kAgentUsage =
    "usage: nodewarden agent [--policy FILE] [--node NAME] [--source kubernetes|static]\n"
    "                        [--manifests DIR] [--kubeconfig FILE] [--cgroup-root DIR]\n"
    "                        [--kubepods-cgroup PATH] [--listen ADDR:PORT] [--dry-run]\n"
    "                        [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]\n"
    "                        [--admission-routes] [--log-format text|json]\n"
    "\n"
    "Watches this node's pod cgroups and evicts pods, in the policy's order, before the\n"
    "kernel's OOM killer has to act. Runs until SIGTERM or SIGINT; SIGHUP reloads the policy\n"
    "(so does any change to the policy file; an invalid file is rejected and the last good\n"
    "policy kept).\n"
    "\n"
    "Options:\n"
    "  --policy FILE          eviction policy (docs/reference.md §4; see 'nodewarden check-policy').\n"
    "                         Default: the kubelet's hard thresholds.\n"
    "  --node NAME            this node's name. Default: $NODE_NAME, then the host name.\n"
    "  --source kubernetes|static\n"
    "                         where pod objects come from (default: kubernetes, or static when\n"
    "                         --manifests is given). kubernetes: this node's pods, priority\n"
    "                         classes, disruption budgets and Node object are listed and watched\n"
    "                         from the API server; evictions are recorded there after the local\n"
    "                         kill (status Failed/Evicted, an Evicted event, DELETE) and node\n"
    "                         pressure is published as NodewardenMemoryPressure & co.\n"
    "  --kubeconfig FILE      for --source kubernetes: the API server and credentials (its\n"
    "                         current context). Default: $KUBECONFIG, else the in-cluster\n"
    "                         service account.\n"
    "  --manifests DIR        for --source static: one Pod object per *.json file, matched to\n"
    "                         cgroups by metadata.uid; re-read when files change.\n"
    "  --cgroup-root DIR      where the cgroup hierarchies are mounted (default /sys/fs/cgroup;\n"
    "                         /host/sys/fs/cgroup in a DaemonSet).\n"
    "  --kubepods-cgroup PATH the pods' parent cgroup below each hierarchy root. Default:\n"
    "                         kubepods.slice or kubepods, whichever exists.\n"
    "  --listen ADDR:PORT     HTTP: /healthz /readyz /metrics /v1/state, and with\n"
    "                         --admission-routes POST /v1/admit and /v1/admission-review\n"
    "                         (default 127.0.0.1:10290; 'off' disables it; a DaemonSet listens\n"
    "                         on 0.0.0.0 for the kubelet's probes).\n"
    "  --admission-routes     serve POST /v1/admit and /v1/admission-review, which can lead to\n"
    "                         evictions (off by default: 404). Beyond a loopback --listen\n"
    "                         they need --tls-client-ca (else exit 2).\n"
    "  --tls-cert FILE, --tls-key FILE\n"
    "                         serve HTTPS with this PEM pair (reloaded when the files change).\n"
    "  --tls-client-ca FILE   CA certificates (PEM): the admission routes then answer only a\n"
    "                         client whose certificate they sign (403 otherwise); probes and\n"
    "                         /metrics need none.\n"
    "  --dry-run              decide and log evictions, never signal a process.\n"
    "  --log-format text|json one line per event: logfmt-style text (default) or JSON lines.\n"
    "  --nodefs PATH          the filesystem of nodefs signals (default /var/lib/kubelet;\n"
    "                         signals are not observed when it does not exist).\n"
    "  --imagefs PATH         the container runtime's filesystem for imagefs signals.\n"
    "  --no-notifications     poll only (for comparisons); default: kernel memory thresholds\n"
    "                         and PSI triggers wake the loop at once.\n"
    "\n"
    "Exit status: 0 after SIGTERM/SIGINT, 1 bad input or start failure, 2 usage error.\n";

constexpr std::chrono::seconds kInitialSyncWait{10};
constexpr std::chrono::seconds kDrainWait{5};

// 127.0.0.0/8, ::1 and "localhost": only this host can connect.
bool isLoopbackAddress(const std::string& address) {
  if (address == "localhost") return true;
  boost::system::error_code ec;
  const auto ip = boost::asio::ip::make_address(address, ec);
  return !ec && ip.is_loopback();
}

std::string defaultNodeName() {
  if (const char* env = std::getenv("NODE_NAME"); env != nullptr && *env != '\0') return env;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') return host;
  return "localhost";
}

}  // namespace

int runAgent(const std::vector<std::string>& argv) {
  auto args = parseArgs(argv,
                        {"policy", "node", "source", "manifests", "kubeconfig", "cgroup-root",
                         "kubepods-cgroup", "listen", "log-format", "nodefs", "imagefs",
                         "tls-cert", "tls-key", "tls-client-ca"},
                        {"dry-run", "help", "no-notifications", "admission-routes"});
  if (!args) {
    std::cerr << "nodewarden agent: " << args.error().message << "\n\n" << kAgentUsage;
    return kExitUsage;
  }
  if (args->flag("help")) {
    std::cout << kAgentUsage;
    return kExitOk;
  }
  if (!args->positional.empty()) {
    std::cerr << "nodewarden agent: unexpected argument \"" << args->positional[0] << "\"\n\n"
              << kAgentUsage;
    return kExitUsage;
  }
  const std::string logFormat = args->value("log-format").value_or("text");
  if (logFormat != "text" && logFormat != "json") {
    std::cerr << "nodewarden agent: --log-format must be text or json, got \"" << logFormat
              << "\"\n";
    return kExitUsage;
  }
  server::configureLogging(logFormat == "json" ? server::LogFormat::Json : server::LogFormat::Text);
  const auto manifests = args->value("manifests");
  const std::string source = args->value("source").value_or(manifests ? "static" : "kubernetes");
  if (source != "static" && source != "kubernetes") {
    std::cerr << "nodewarden agent: --source must be static or kubernetes, got \"" << source
              << "\"\n";
    return kExitUsage;
  }
  const bool fromApi = source == "kubernetes";
  if (!fromApi && !manifests) {
    std::cerr << "nodewarden agent: --source static needs --manifests DIR\n\n" << kAgentUsage;
    return kExitUsage;
  }
  if (fromApi && manifests) {
    std::cerr << "nodewarden agent: --manifests is for --source static; pods come from the API "
                 "server with --source kubernetes\n";
    return kExitUsage;
  }
  if (!fromApi && args->value("kubeconfig")) {
    std::cerr << "nodewarden agent: --kubeconfig is for --source kubernetes\n";
    return kExitUsage;
  }
  std::optional<kube::ClusterConfig> cluster;
  if (fromApi) {
    auto config = kube::resolveClusterConfig(args->value("kubeconfig"));
    if (!config) {
      std::cerr << "nodewarden agent: " << config.error().message << "\n";
      return kExitBadInput;
    }
    cluster = std::move(config).value();
  }

  AgentOptions options;
  options.nodeName = args->value("node").value_or(defaultNodeName());
  options.policyPath = args->value("policy");
  options.dryRun = args->flag("dry-run");
  options.notifications = !args->flag("no-notifications");
  options.scan.nodeFsPath = args->value("nodefs").value_or("/var/lib/kubelet");
  options.scan.imageFsPath = args->value("imagefs").value_or("");
  // Swap per pod is read only where swap is on (NodeSwap); /v1/state shows it, and
  // memoryRankingCountsSwap ranks by it.
  if (auto meminfo = cgroups::readMemInfo(options.scan.procRoot)) {
    options.scan.podSwap = meminfo->swapTotal > 0;
  }
  const std::string listen = args->value("listen").value_or("127.0.0.1:10290");
  if (listen != "off") {
    auto address = server::parseListenAddress(listen);
    if (!address) {
      std::cerr << "nodewarden agent: --listen: " << address.error().message << "\n";
      return kExitUsage;
    }
    server::HttpServerOptions http;
    http.address = address->first;
    http.port = address->second;
    http.tlsCertFile = args->value("tls-cert").value_or("");
    http.tlsKeyFile = args->value("tls-key").value_or("");
    http.tlsClientCaFile = args->value("tls-client-ca").value_or("");
    if (http.tlsCertFile.empty() != http.tlsKeyFile.empty()) {
      std::cerr << "nodewarden agent: --tls-cert and --tls-key go together (both or neither)\n";
      return kExitUsage;
    }
    if (!http.tlsClientCaFile.empty() && http.tlsCertFile.empty()) {
      std::cerr << "nodewarden agent: --tls-client-ca needs --tls-cert and --tls-key (client "
                   "certificates are verified over TLS only)\n";
      return kExitUsage;
    }
    options.admissionRoutes = args->flag("admission-routes");
    // docs/reference.md §7: beyond loopback, routes that can evict answer only a verified client.
    if (options.admissionRoutes && !isLoopbackAddress(http.address) &&
        http.tlsClientCaFile.empty()) {
      std::cerr << "nodewarden agent: --admission-routes on " << listen
                << " (not loopback) needs TLS with a verified client certificate: add "
                   "--tls-client-ca FILE with --tls-cert FILE and --tls-key FILE\n";
      return kExitUsage;
    }
    options.http = http;
  } else if (args->flag("admission-routes")) {
    std::cerr << "nodewarden agent: --admission-routes needs the HTTP server (--listen is off)\n";
    return kExitUsage;
  }

  auto policy = policy::loadPolicy(options.policyPath ? &*options.policyPath : nullptr);
  if (!policy) {
    std::cerr << policy.error().message << "\n";
    return kExitBadInput;
  }
  for (const auto& warning : policy->warnings) {
    server::logEvent(server::LogLevel::Warn, "policy-warning", {{"warning", warning}});
  }
  cgroups::DiscoverOptions discover;
  discover.root = args->value("cgroup-root").value_or("/sys/fs/cgroup");
  auto hierarchy = cgroups::discoverHierarchy(discover);
  if (!hierarchy) {
    std::cerr << "nodewarden agent: " << hierarchy.error().message << "\n";
    return kExitBadInput;
  }
  auto kubepods = cgroups::PodCgroups::findKubepods(*hierarchy, args->value("kubepods-cgroup"));
  if (!kubepods) {
    std::cerr << "nodewarden agent: " << kubepods.error().message << "\n";
    return kExitBadInput;
  }
  // Up to 10 descriptors per pod cgroup are kept open.
  constexpr std::uint64_t kWantedFiles = 1 << 16;
  if (auto limit = cgroups::raiseOpenFileLimit(kWantedFiles); !limit || *limit < kWantedFiles) {
    server::logEvent(server::LogLevel::Warn, "open-file-limit",
             {{"limit", limit ? static_cast<std::int64_t>(*limit) : std::int64_t(-1)},
              {"wanted", static_cast<std::int64_t>(kWantedFiles)},
              {"pods_supported", limit ? static_cast<std::int64_t>(*limit / 10) : std::int64_t(0)},
              {"fix", "raise LimitNOFILE (the unit sets 1048576) or run with CAP_SYS_RESOURCE"}});
  }

  boost::asio::io_context io;
  cgroups::PodCgroups pods(*hierarchy, *kubepods);
  const bool dryRun = options.dryRun;
  const std::string nodeName = options.nodeName;
  ActuatorFactory makeActuator = dryRun ? dryRunActuator() : cgroupActuator();

  // With the API: the client and the writer outlive the agent (declared first, destroyed
  // last); the source is owned by the agent and reached through `apiSource`.
  std::unique_ptr<kube::Client> client;
  std::unique_ptr<kube::ApiWriter> writer;
  std::unique_ptr<ApiAdmissionActions> admissionActions;
  KubernetesPodSource* apiSource = nullptr;
  std::unique_ptr<PodSource> podSource;
  if (fromApi) {
    server::logEvent(server::LogLevel::Info, "api-server", {{"config", cluster->description}, {"node", nodeName}});
    client = std::make_unique<kube::Client>(io, *cluster);
    kube::WriterOptions writerOptions;
    writerOptions.nodeName = nodeName;
    writer = std::make_unique<kube::ApiWriter>(io, *client, writerOptions);
    writer->onOutcome = [](const kube::WriteOutcome& outcome) {
      server::logEvent(outcome.ok ? server::LogLevel::Info : server::LogLevel::Warn, "api-write",
               {{"what", outcome.what}, {"pod", outcome.pod}, {"ok", outcome.ok},
                {"attempts", outcome.attempts}, {"status", static_cast<int>(outcome.status)},
                {"detail", outcome.detail}});
    };
    auto apiPods = std::make_unique<KubernetesPodSource>(io, *client, nodeName);
    apiSource = apiPods.get();
    podSource = std::move(apiPods);
    if (!dryRun) {
      admissionActions = std::make_unique<ApiAdmissionActions>(*writer);
      options.admissionActions = admissionActions.get();
      makeActuator = [local = std::move(makeActuator), &writer](
                         boost::asio::io_context& context, cgroups::PodCgroups& cgroups) {
        return std::make_unique<ApiRecordingActuator>(local(context, cgroups), *writer);
      };
    }
  } else {
    podSource = std::make_unique<StaticPodSource>(*manifests, nodeName);
  }
  Agent agent(io, std::move(options), std::move(policy).value(), std::move(pods),
              std::move(podSource), makeActuator);
  if (apiSource != nullptr) {
    apiSource->start();
    // The first decisions should know the pods' priorities: wait (bounded) for the first
    // lists. An unreachable API server does not keep the agent from protecting the node.
    const auto deadline = std::chrono::steady_clock::now() + kInitialSyncWait;
    while (!apiSource->synced() && std::chrono::steady_clock::now() < deadline)
      io.run_one_for(std::chrono::milliseconds(100));
    if (apiSource->synced()) {
      server::logEvent(server::LogLevel::Info, "api-synced",
               {{"pods", static_cast<std::int64_t>(apiSource->current().pods.size())}});
    } else {
      server::logEvent(server::LogLevel::Warn, "api-not-synced",
               {{"waited_s", static_cast<std::int64_t>(kInitialSyncWait.count())},
                {"effect", "starting anyway; pods the API has not listed rank as unknown "
                           "(priority 0) until it answers"}});
    }
    if (!dryRun) {
      agent.onCycle = [&writer, nodeName](const policy::EvictionDecision& decision) {
        publishNodeConditions(*writer, nodeName, decision);
      };
    }
  }
  auto started = agent.start();
  if (!started) {
    server::logEvent(server::LogLevel::Error, "start-failed", {{"error", started.error().message}});
    return kExitBadInput;
  }
  boost::asio::signal_set stopSignals(io, SIGINT, SIGTERM);
  boost::asio::signal_set hup(io, SIGHUP);
  stopSignals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    server::logEvent(server::LogLevel::Info, "stopping", {{"signal", signal == SIGINT ? "SIGINT" : "SIGTERM"}});
    // Drain: no new cycles or requests; evictions already under way finish, then run() returns.
    agent.stop();
    hup.cancel();
    if (apiSource != nullptr) apiSource->stop();
  });
  std::function<void()> waitHup = [&] {
    hup.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec || agent.stopped()) return;
      server::logEvent(server::LogLevel::Info, "reload", {{"signal", "SIGHUP"}});
      agent.reloadPolicy();
      waitHup();
    });
  };
  waitHup();
  io.run();
  if (writer && writer->pending() > 0) {
    // Evictions already done locally should reach the API: a bounded drain.
    server::logEvent(server::LogLevel::Info, "api-drain", {{"pending", static_cast<std::int64_t>(writer->pending())}});
    io.restart();
    const auto deadline = std::chrono::steady_clock::now() + kDrainWait;
    while (writer->pending() > 0 && std::chrono::steady_clock::now() < deadline)
      io.run_one_for(std::chrono::milliseconds(100));
    if (writer->pending() > 0)
      server::logEvent(server::LogLevel::Warn, "api-drain-incomplete",
               {{"pending", static_cast<std::int64_t>(writer->pending())}});
  }
  server::logEvent(server::LogLevel::Info, "stopped",
           {{"evictions", static_cast<std::int64_t>(agent.evictions().size())}});
  return kExitOk;
}

}  // namespace nodewarden::agent
