// `nodewarden agent`: options → hierarchy, pod source, actuator → the Agent on one loop.
#include <unistd.h>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <iostream>

#include "agent/agent.h"
#include "agent/cli.h"
#include "agent/commands.h"
#include "agent/files.h"
#include "agent/log.h"

namespace nodewarden::agent {
namespace {

const char* kAgentUsage =
    "usage: nodewarden agent [--policy FILE] [--node NAME] [--source static] [--manifests DIR]\n"
    "                        [--cgroup-root DIR] [--kubepods-cgroup PATH] [--listen ADDR:PORT]\n"
    "                        [--dry-run] [--log-format text|json]\n"
    "\n"
    "Watches this node's pod cgroups and evicts pods, in the policy's order, before the\n"
    "kernel's OOM killer has to act. Runs until SIGTERM or SIGINT; SIGHUP reloads the policy\n"
    "(so does any change to the policy file; an invalid file is rejected and the last good\n"
    "policy kept).\n"
    "\n"
    "Options:\n"
    "  --policy FILE          eviction policy (CONTRACT §4; see 'nodewarden check-policy').\n"
    "                         Default: the kubelet's hard thresholds.\n"
    "  --node NAME            this node's name. Default: $NODE_NAME, then the host name.\n"
    "  --source static        where pods come from (default static; 'kubernetes' arrives with\n"
    "                         the Kubernetes integration).\n"
    "  --manifests DIR        for --source static: one Pod object per *.json file, matched to\n"
    "                         cgroups by metadata.uid; re-read when files change.\n"
    "  --cgroup-root DIR      where the cgroup hierarchies are mounted (default /sys/fs/cgroup;\n"
    "                         /host/sys/fs/cgroup in a DaemonSet).\n"
    "  --kubepods-cgroup PATH the pods' parent cgroup below each hierarchy root. Default:\n"
    "                         kubepods.slice or kubepods, whichever exists.\n"
    "  --listen ADDR:PORT     HTTP: /healthz /readyz /metrics /v1/state POST /v1/admit\n"
    "                         (default 127.0.0.1:10290; 'off' disables it).\n"
    "  --dry-run              decide and log evictions, never signal a process.\n"
    "  --log-format text|json one line per event: logfmt-style text (default) or JSON lines.\n"
    "  --nodefs PATH          the filesystem of nodefs signals (default /var/lib/kubelet;\n"
    "                         signals are not observed when it does not exist).\n"
    "  --imagefs PATH         the container runtime's filesystem for imagefs signals.\n"
    "  --no-notifications     poll only (for comparisons); default: kernel memory thresholds\n"
    "                         and PSI triggers wake the loop at once.\n"
    "\n"
    "Exit status: 0 after SIGTERM/SIGINT, 1 bad input or start failure, 2 usage error.\n";

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
                         "kubepods-cgroup", "listen", "log-format", "nodefs", "imagefs"},
                        {"dry-run", "help", "no-notifications"});
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
  configureLogging(logFormat == "json" ? LogFormat::Json : LogFormat::Text);
  const std::string source = args->value("source").value_or("static");
  if (source == "kubernetes") {
    std::cerr << "nodewarden agent: --source kubernetes is not available in this version yet; "
                 "use --source static --manifests DIR\n";
    return kExitUsage;
  }
  if (source != "static") {
    std::cerr << "nodewarden agent: --source must be static or kubernetes, got \"" << source
              << "\"\n";
    return kExitUsage;
  }
  const auto manifests = args->value("manifests");
  if (!manifests) {
    std::cerr << "nodewarden agent: --source static needs --manifests DIR\n\n" << kAgentUsage;
    return kExitUsage;
  }

  AgentOptions options;
  options.nodeName = args->value("node").value_or(defaultNodeName());
  options.policyPath = args->value("policy");
  options.dryRun = args->flag("dry-run");
  options.notifications = !args->flag("no-notifications");
  options.scan.nodeFsPath = args->value("nodefs").value_or("/var/lib/kubelet");
  options.scan.imageFsPath = args->value("imagefs").value_or("");
  const std::string listen = args->value("listen").value_or("127.0.0.1:10290");
  if (listen != "off") {
    auto address = parseListenAddress(listen);
    if (!address) {
      std::cerr << "nodewarden agent: --listen: " << address.error().message << "\n";
      return kExitUsage;
    }
    HttpServerOptions http;
    http.address = address->first;
    http.port = address->second;
    options.http = http;
  }

  auto policy = loadPolicy(options.policyPath ? &*options.policyPath : nullptr);
  if (!policy) {
    std::cerr << policy.error().message << "\n";
    return kExitBadInput;
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
    logEvent(LogLevel::Warn, "open-file-limit",
             {{"limit", limit ? static_cast<std::int64_t>(*limit) : std::int64_t(-1)},
              {"wanted", static_cast<std::int64_t>(kWantedFiles)},
              {"pods_supported", limit ? static_cast<std::int64_t>(*limit / 10) : std::int64_t(0)},
              {"fix", "raise LimitNOFILE (the unit sets 1048576) or run with CAP_SYS_RESOURCE"}});
  }

  boost::asio::io_context io;
  cgroups::PodCgroups pods(*hierarchy, *kubepods);
  auto podSource = std::make_unique<StaticPodSource>(*manifests, options.nodeName);
  const bool dryRun = options.dryRun;
  Agent agent(io, std::move(options), std::move(policy).value(), std::move(pods),
              std::move(podSource), dryRun ? dryRunActuator() : cgroupActuator());
  auto started = agent.start();
  if (!started) {
    logEvent(LogLevel::Error, "start-failed", {{"error", started.error().message}});
    return kExitBadInput;
  }
  boost::asio::signal_set stopSignals(io, SIGINT, SIGTERM);
  boost::asio::signal_set hup(io, SIGHUP);
  stopSignals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    logEvent(LogLevel::Info, "stopping", {{"signal", signal == SIGINT ? "SIGINT" : "SIGTERM"}});
    // Drain: no new cycles or requests; evictions already under way finish, then run() returns.
    agent.stop();
    hup.cancel();
  });
  std::function<void()> waitHup = [&] {
    hup.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec || agent.stopped()) return;
      logEvent(LogLevel::Info, "reload", {{"signal", "SIGHUP"}});
      agent.reloadPolicy();
      waitHup();
    });
  };
  waitHup();
  io.run();
  logEvent(LogLevel::Info, "stopped",
           {{"evictions", static_cast<std::int64_t>(agent.evictions().size())}});
  return kExitOk;
}

}  // namespace nodewarden::agent
