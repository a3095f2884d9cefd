// `nodewarden agent`: options → hierarchy, pod source, actuator → the Agent on one loop,
// until SIGTERM (server/daemon.h).
#include "node/run.h"

#include <unistd.h>
#include <cstdlib>
#include <iostream>

#include <boost/asio/ip/address.hpp>

#include "base/args.h"
#include "kube/client.h"
#include "kube/writer.h"
#include "node/agent.h"
#include "node/kube_source.h"
#include "node/routes.h"
#include "policy/files.h"
#include "server/daemon.h"
#include "server/log.h"
#include "webhook/admission_actions.h"

namespace nodewarden::node {
namespace {

const char* kAgentUsage =
    "usage: nodewarden agent [--policy FILE] [--node NAME] [--source kubernetes|static]\n"
    "                        [--manifests DIR] [--kubeconfig FILE] [--cgroup-root DIR]\n"
    "                        [--kubepods-cgroup PATH] [--listen ADDR:PORT] [--dry-run]\n"
    "                        [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]\n"
    "                        [--admission-routes] [--log-format text|json]\n"
    "                        [--static-pod-manifests DIR] [--pod-cache FILE]\n"
    "                        [--eviction-journal FILE] [--state-dir DIR]\n"
    "                        [--decision-log FILE|-] [--record-preroll DURATION]\n"
    "                        [--record-settle DURATION] [--nice N] [--realtime N]\n"
    "                        [--no-notifications] [--memory-high-edge]\n"
    "\n"
    "Watches this node's pod cgroups and evicts pods, in the policy's order, before the\n"
    "kernel's OOM killer has to act. Runs until SIGTERM or SIGINT; SIGHUP reloads the policy\n"
    "(so does any change to the policy file; an invalid file is rejected and the last good\n"
    "policy kept).\n"
    "\n"
    "Options:\n"
    "  --policy FILE          eviction policy (docs/reference.md §4; see 'nodewarden "
    "check-policy').\n"
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
    "                         current context). Default: $KUBECONFIG, then ~/.kube/config,\n"
    "                         then the in-cluster service account.\n"
    "  --static-pod-manifests DIR\n"
    "                         for --source kubernetes: the kubelet's static pod manifests\n"
    "                         (YAML or JSON), known as static (critical) pods until the API\n"
    "                         server first lists this node's pods (default\n"
    "                         /etc/kubernetes/manifests; '' for none).\n"
    "  --pod-cache FILE       for --source kubernetes: keep the last pod list in FILE (written\n"
    "                         atomically, checksummed) and, at start, rank pods by it until the\n"
    "                         API server answers (default: no cache; the DaemonSet uses\n"
    "                         /var/lib/nodewarden/pods.json). A corrupt file is ignored.\n"
    "  --eviction-journal FILE\n"
    "                         keep the evictions under way in FILE, so that an agent restarted\n"
    "                         in the middle of one finishes it, at the kill time first given,\n"
    "                         and chooses no second victim meanwhile (default: none; the\n"
    "                         DaemonSet uses /var/lib/nodewarden/evictions.json).\n"
    "  --state-dir DIR        the flight recorder's files (default /var/lib/nodewarden): each\n"
    "                         pressure episode under DIR/episodes/ (replay it with 'nodewarden\n"
    "                         replay'), each decision under DIR/decisions/ ('nodewarden why'),\n"
    "                         both bounded, oldest removed first. '' keeps them in memory only.\n"
    "  --decision-log FILE|-  every decision also as a JSON line to FILE (appended) or, with\n"
    "                         '-', to standard output: for the OpenTelemetry Collector, Loki or\n"
    "                         Vector.\n"
    "  --record-preroll DURATION\n"
    "                         how much of what came before an episode it keeps (default 30s)\n"
    "  --record-settle DURATION\n"
    "                         how long the node stays calm before an episode ends (default 10s)\n"
    "  --manifests DIR        for --source static: one Pod object per *.json file, matched to\n"
    "                         cgroups by metadata.uid; re-read when files change.\n"
    "  --cgroup-root DIR      where the cgroup hierarchies are mounted (default /sys/fs/cgroup;\n"
    "                         /host/sys/fs/cgroup in a DaemonSet).\n"
    "  --kubepods-cgroup PATH the pods' parent cgroup below each hierarchy root. Default:\n"
    "                         kubepods.slice or kubepods, whichever exists.\n"
    "  --listen ADDR:PORT     HTTP: /healthz /readyz /metrics /v1/state /v1/decisions, and with\n"
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
    "  --memory-high-edge     cgroup v2: set kubepods' memory.high where the allocatable\n"
    "                         memory threshold is met, so that the kernel's memory.events\n"
    "                         wake the loop at the crossing (restored on exit). Pods are\n"
    "                         throttled above it, i.e. only past the eviction line.\n"
    "  --nice N               the niceness of the agent's loop thread, -20..19 (default: as\n"
    "                         started; the unit sets Nice=-20, the DaemonSet --nice=-20):\n"
    "                         notifications are answered ahead of busy pods. Below the\n"
    "                         current value it needs CAP_SYS_NICE, else a warning.\n"
    "  --realtime N           the loop thread under SCHED_FIFO at priority N, 1..99 (0, the\n"
    "                         default: none; the unit and the DaemonSet pass 1): a\n"
    "                         notification preempts busy pods at once instead of waiting out\n"
    "                         their time slice. Needs CAP_SYS_NICE; refused, it warns once\n"
    "                         and the loop runs on at --nice.\n"
    "\n"
    "Exit status: 0 after SIGTERM/SIGINT, 1 bad input or start failure, 2 usage error.\n";

constexpr std::chrono::seconds kInitialSyncWait{10};
constexpr const char* kDefaultStateDir = "/var/lib/nodewarden";
// After SIGTERM: evictions in flight finish (their grace, at most evictionMaxPodGracePeriod,
// plus the actuator's 10 s to give up) and the API writes queued get this much more.
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

// What the command line asks for, checked for shape (every error here is a usage error).
struct AgentCommand {
  AgentOptions options;
  std::optional<server::HttpServerOptions> http;  // nullopt: --listen off
  RouteOptions routes;
  bool fromApi = true;
  std::optional<std::string> manifests;
  std::optional<std::string> kubeconfig;
  KubernetesSourceOptions api;
  std::string cgroupRoot;
  std::optional<std::string> kubepodsCgroup;
};

// --listen, TLS and --admission-routes (docs/reference.md §7). nullopt: --listen off.
Result<std::optional<server::HttpServerOptions>> httpOptions(const Args& args,
                                                             bool admissionRoutes) {
  const std::string listen = args.value("listen").value_or("127.0.0.1:10290");
  if (listen == "off") {
    if (admissionRoutes) return Error{"--admission-routes needs the HTTP server (--listen is off)"};
    return std::optional<server::HttpServerOptions>();
  }
  auto address = server::parseListenAddress(listen);
  if (!address) return address.error().withContext("--listen");
  server::HttpServerOptions http;
  http.address = address->first;
  http.port = address->second;
  http.tlsCertFile = args.value("tls-cert").value_or("");
  http.tlsKeyFile = args.value("tls-key").value_or("");
  http.tlsClientCaFile = args.value("tls-client-ca").value_or("");
  if (http.tlsCertFile.empty() != http.tlsKeyFile.empty()) {
    return Error{"--tls-cert and --tls-key go together (both or neither)"};
  }
  if (!http.tlsClientCaFile.empty() && http.tlsCertFile.empty()) {
    return Error{
        "--tls-client-ca needs --tls-cert and --tls-key (client certificates are "
        "verified over TLS only)"};
  }
  // Beyond loopback, routes that can evict answer only a verified client.
  if (admissionRoutes && !isLoopbackAddress(http.address) && http.tlsClientCaFile.empty()) {
    return Error{"--admission-routes on " + listen +
                 " (not loopback) needs TLS with a verified client certificate: add "
                 "--tls-client-ca FILE with --tls-cert FILE and --tls-key FILE"};
  }
  return std::optional<server::HttpServerOptions>(http);
}

Result<AgentCommand> agentCommand(const Args& args) {
  AgentCommand command;
  command.manifests = args.value("manifests");
  command.kubeconfig = args.value("kubeconfig");
  const std::string source =
      args.value("source").value_or(command.manifests ? "static" : "kubernetes");
  if (source != "static" && source != "kubernetes") {
    return Error{"--source must be static or kubernetes, got \"" + source + "\""};
  }
  command.fromApi = source == "kubernetes";
  if (!command.fromApi && !command.manifests) {
    return Error{"--source static needs --manifests DIR\n\n" + std::string(kAgentUsage)};
  }
  if (command.fromApi && command.manifests) {
    return Error{
        "--manifests is for --source static; pods come from the API server with "
        "--source kubernetes"};
  }
  for (const char* apiOnly : {"kubeconfig", "static-pod-manifests", "pod-cache"}) {
    if (!command.fromApi && args.value(apiOnly)) {
      return Error{"--" + std::string(apiOnly) + " is for --source kubernetes"};
    }
  }
  command.api.staticPodPath =
      args.value("static-pod-manifests").value_or(kube::kDefaultStaticPodPath);
  command.api.podCacheFile = args.value("pod-cache").value_or("");
  AgentOptions& options = command.options;
  options.nodeName = args.value("node").value_or(defaultNodeName());
  options.policyPath = args.value("policy");
  options.dryRun = args.flag("dry-run");
  options.notifications = !args.flag("no-notifications");
  options.memoryHighEdge = args.flag("memory-high-edge");
  options.journalPath = args.value("eviction-journal");
  options.scan.nodeFsPath = args.value("nodefs").value_or("/var/lib/kubelet");
  options.scan.imageFsPath = args.value("imagefs").value_or("");
  // Swap per pod is read only where swap is on (NodeSwap); /v1/state shows it, and
  // memoryRankingCountsSwap ranks by it.
  if (auto meminfo = cgroups::readMemInfo(options.scan.procRoot)) {
    options.scan.podSwap = meminfo->swapTotal > 0;
  }
  command.routes.admissionRoutes = args.flag("admission-routes");
  if (auto nice = args.value("nice")) {
    char* end = nullptr;
    const long value = std::strtol(nice->c_str(), &end, 10);
    if (nice->empty() || *end != '\0' || value < -20 || value > 19) {
      return Error{"--nice " + *nice + ": expected a niceness from -20 to 19"};
    }
    options.loopNice = int(value);
  }
  if (auto realtime = args.value("realtime")) {
    char* end = nullptr;
    const long value = std::strtol(realtime->c_str(), &end, 10);
    if (realtime->empty() || *end != '\0' || value < 0 || value > 99) {
      return Error{"--realtime " + *realtime +
                   ": expected a SCHED_FIFO priority from 1 to 99, or 0 for none"};
    }
    if (value > 0) options.loopRealtime = int(value);
  }
  RecorderOptions recorder;
  recorder.nodeName = options.nodeName;
  recorder.stateDir = args.value("state-dir").value_or(kDefaultStateDir);
  recorder.decisionLog = args.value("decision-log").value_or("");
  recorder.dryRun = options.dryRun;
  recorder.procRoot = options.scan.procRoot;
  for (const auto& [flag, field] : {std::pair{"record-preroll", &recorder.preroll},
                                    std::pair{"record-settle", &recorder.settle}}) {
    if (auto text = args.value(flag)) {
      auto duration = policy::parseGoDuration(*text);
      if (!duration || duration->count() < 0) {
        return Error{"--" + std::string(flag) + " " + *text + ": expected a duration such as 30s"};
      }
      *field = *duration;
    }
  }
  options.recorder = recorder;
  auto http = httpOptions(args, command.routes.admissionRoutes);
  if (!http) return http.error();
  command.http = *http;
  command.routes.verifiedClientsOnly = command.http && !command.http->tlsClientCaFile.empty();
  command.cgroupRoot = args.value("cgroup-root").value_or("/sys/fs/cgroup");
  command.kubepodsCgroup = args.value("kubepods-cgroup");
  return command;
}

// The pods' cgroups: the hierarchy and the kubepods cgroup below it.
Result<cgroups::PodCgroups> openPodCgroups(const AgentCommand& command) {
  cgroups::DiscoverOptions discover;
  discover.root = command.cgroupRoot;
  // The mount points from /proc/self/mountinfo, the kernel's own view (which wins over
  // libcgroup's wherever they differ): libcgroup's listing would only cross-check it, in notes
  // the agent does not show, and its cgroup_init() clears tables of ~0.8 MiB that would then
  // stay resident for the agent's life.
  discover.useLibcgroup = false;
  auto hierarchy = cgroups::discoverHierarchy(discover);
  if (!hierarchy) return hierarchy.error();
  auto kubepods = cgroups::PodCgroups::findKubepods(*hierarchy, command.kubepodsCgroup);
  if (!kubepods) return kubepods.error();
  return cgroups::PodCgroups(*hierarchy, *kubepods);
}

void raiseOpenFileLimit() {
  // Up to 10 descriptors per pod cgroup are kept open.
  constexpr std::uint64_t kWanted = 1 << 16;
  auto limit = cgroups::raiseOpenFileLimit(kWanted);
  if (limit && *limit >= kWanted) return;
  server::logEvent(
      server::LogLevel::Warn, "open-file-limit",
      {{"limit", limit ? static_cast<std::int64_t>(*limit) : std::int64_t(-1)},
       {"wanted", static_cast<std::int64_t>(kWanted)},
       {"pods_supported", limit ? static_cast<std::int64_t>(*limit / 10) : std::int64_t(0)},
       {"fix", "raise LimitNOFILE (the unit sets 1048576) or run with CAP_SYS_RESOURCE"}});
}

}  // namespace

ApiWiring::ApiWiring() = default;
ApiWiring::~ApiWiring() = default;

std::unique_ptr<PodSource> ApiWiring::wire(boost::asio::io_context& io, kube::ClusterConfig cluster,
                                           const KubernetesSourceOptions& sourceOptions,
                                           AgentOptions& options, ActuatorFactory& makeActuator) {
  server::logEvent(server::LogLevel::Info, "api-server",
                   {{"config", cluster.description}, {"node", options.nodeName}});
  client = std::make_unique<kube::Client>(io, std::move(cluster));
  kube::WriterOptions writerOptions;
  writerOptions.nodeName = options.nodeName;
  writer = std::make_unique<kube::ApiWriter>(io, *client, writerOptions);
  writer->onOutcome = [](const kube::WriteOutcome& outcome) {
    server::logEvent(outcome.ok ? server::LogLevel::Info : server::LogLevel::Warn, "api-write",
                     {{"what", outcome.what},
                      {"pod", outcome.pod},
                      {"ok", outcome.ok},
                      {"attempts", outcome.attempts},
                      {"status", static_cast<int>(outcome.status)},
                      {"detail", outcome.detail}});
  };
  auto pods = std::make_unique<KubernetesPodSource>(io, *client, options.nodeName, sourceOptions);
  source = pods.get();
  if (!options.dryRun) {
    admissionActions = std::make_unique<webhook::ApiAdmissionActions>(*writer);
    makeActuator = [local = std::move(makeActuator), w = writer.get(), p = pods.get()](
                       boost::asio::io_context& context, cgroups::PodCgroups& cgroups,
                       const Clock& clock) {
      return std::make_unique<ApiRecordingActuator>(
          local(context, cgroups, clock), *w, [p](const std::string& key, const std::string& uid) {
            return p->podGeneration(key, uid);
          });
    };
  }
  return pods;
}

void ApiWiring::awaitFirstList(boost::asio::io_context& io) const {
  source->start();
  const auto deadline = std::chrono::steady_clock::now() + kInitialSyncWait;
  while (!source->synced() && std::chrono::steady_clock::now() < deadline) {
    io.run_one_for(std::chrono::milliseconds(100));
  }
  if (source->synced()) {
    server::logEvent(server::LogLevel::Info, "api-synced",
                     {{"pods", static_cast<std::int64_t>(source->current().pods.size())}});
    return;
  }
  server::logEvent(server::LogLevel::Warn, "api-not-synced",
                   {{"waited_s", static_cast<std::int64_t>(kInitialSyncWait.count())},
                    {"effect",
                     "starting anyway; pods the API has not listed rank as unknown "
                     "(priority 0) until it answers"}});
}

std::size_t ApiWiring::pendingWrites() const {
  return writer ? writer->pending() : 0;
}

int runAgent(const std::vector<std::string>& argv) {
  auto parsed =
      parseCommand("agent", argv,
                   {"policy",
                    "node",
                    "source",
                    "manifests",
                    "kubeconfig",
                    "cgroup-root",
                    "kubepods-cgroup",
                    "listen",
                    "log-format",
                    "nodefs",
                    "imagefs",
                    "tls-cert",
                    "tls-key",
                    "tls-client-ca",
                    "static-pod-manifests",
                    "pod-cache",
                    "eviction-journal",
                    "state-dir",
                    "decision-log",
                    "record-preroll",
                    "record-settle",
                    "nice",
                    "realtime"},
                   {"dry-run", "help", "no-notifications", "admission-routes", "memory-high-edge"},
                   kAgentUsage, std::cout, std::cerr);
  if (const int* exit = std::get_if<int>(&parsed)) return *exit;
  const Args& args = std::get<Args>(parsed);
  server::configureLogging(args.value("log-format") == "json" ? server::LogFormat::Json
                                                              : server::LogFormat::Text);
  auto command = agentCommand(args);
  if (!command) {
    std::cerr << "nodewarden agent: " << command.error().message << "\n";
    return kExitUsage;
  }
  AgentOptions& options = command->options;
  std::optional<kube::ClusterConfig> cluster;
  if (command->fromApi) {
    auto config = kube::resolveClusterConfig(command->kubeconfig);
    if (!config) {
      std::cerr << "nodewarden agent: " << config.error().message << "\n";
      return kExitBadInput;
    }
    cluster = std::move(config).value();
  }
  auto policy = policy::loadPolicy(options.policyPath ? &*options.policyPath : nullptr);
  if (!policy) {
    std::cerr << policy.error().message << "\n";
    return kExitBadInput;
  }
  for (const auto& warning : policy->warnings) {
    server::logEvent(server::LogLevel::Warn, "policy-warning", {{"warning", warning}});
  }
  auto pods = openPodCgroups(*command);
  if (!pods) {
    std::cerr << "nodewarden agent: " << pods.error().message << "\n";
    return kExitBadInput;
  }
  raiseOpenFileLimit();

  boost::asio::io_context io;
  ActuatorFactory makeActuator = options.dryRun ? dryRunActuator() : cgroupActuator();
  ApiWiring api;
  std::unique_ptr<PodSource> source =
      cluster ? api.wire(io, std::move(*cluster), command->api, options, makeActuator)
              : std::make_unique<StaticPodSource>(*command->manifests, options.nodeName);
  const std::chrono::seconds drainFor = std::chrono::seconds(policy->maxPodGracePeriodSeconds) +
                                        std::chrono::seconds(10) + kDrainWait;
  Agent agent(io, std::move(options), std::move(policy).value(), std::move(pods).value(),
              std::move(source), makeActuator);
  if (api.source != nullptr) {
    api.awaitFirstList(io);
    if (!agent.options().dryRun) {
      agent.onCycle = [&api,
                       node = agent.options().nodeName](const policy::EvictionDecision& decision) {
        publishNodeConditions(*api.writer, node, decision);
      };
    }
  }
  // The routes answer from the agent (routes.h) on a server this command owns; the port is
  // bound before the first cycle, so that a taken port leaves nothing running.
  command->routes.admissionActions = api.admissionActions.get();
  std::unique_ptr<server::HttpServer> http;
  std::string listen = "off";
  if (command->http) {
    http = agentServer(io, *command->http, agent, command->routes);
    if (auto started = http->start(); !started) {
      server::logEvent(server::LogLevel::Error, "start-failed",
                       {{"error", started.error().message}});
      return kExitBadInput;
    }
    listen = command->http->address + ":" + std::to_string(http->port());
  }
  if (auto started = agent.start(listen); !started) {
    server::logEvent(server::LogLevel::Error, "start-failed", {{"error", started.error().message}});
    return kExitBadInput;
  }
  server::DaemonHooks hooks;
  hooks.stop = [&] {
    agent.stop();            // no new cycles; evictions under way finish
    if (http) http->stop();  // no new requests
    if (api.source != nullptr) api.source->stop();
  };
  hooks.reload = [&] { agent.reloadPolicy(); };
  hooks.pending = [&] { return agent.inFlight() + api.pendingWrites(); };
  hooks.drainFor = drainFor;
  server::runUntilStopped(io, hooks);
  server::logEvent(server::LogLevel::Info, "stopped",
                   {{"evictions", static_cast<std::int64_t>(agent.evictions().size())}});
  return kExitOk;
}

}  // namespace nodewarden::node
