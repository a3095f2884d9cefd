// The demo: build a kubelet-shaped sandbox node (a kubepods cgroup with a memory limit),
// start each scenario pod as a real process that allocates and touches memory, run the
// agent against it in this process, show a live table, and report.
#include "demo/demo.h"
#include "demo/plot.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "base/args.h"
#include "base/files.h"
#include "cgroups/readers.h"
#include "cgroups/sandbox.h"
#include "demo/episodes.h"
#include "demo/run.h"
#include "node/agent.h"
#include "policy/files.h"
#include "policy/json_reader.h"
#include "server/log.h"

namespace nodewarden::demo {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using node::Agent;
using node::AgentOptions;
using node::cgroupActuator;
using node::EvictionRecord;
using node::Recorder;
using node::StaticPodSource;
constexpr std::int64_t kMiB = 1024 * 1024;

// The scenario and policy the README's first command runs (examples/demo/ holds copies).
const char* kDefaultScenario = R"({
  "description": "A 1 GiB node. prod/search leaks memory; two batch pods and a critical agent share the node. The kernel's OOM killer would take the biggest process (search); nodewarden evicts by priority, then usage over request.",
  "nodeMemory": "1Gi",
  "durationSeconds": 24,
  "pods": [
    { "namespace": "kube-system", "name": "node-exporter", "priorityClassName": "system-node-critical",
      "requests": { "memory": "64Mi", "cpu": "50m" }, "load": { "startMiB": 48 } },
    { "namespace": "prod", "name": "payments", "priority": 100000,
      "requests": { "memory": "256Mi", "cpu": "500m" }, "load": { "startMiB": 200, "cpuMillicores": 100 } },
    { "namespace": "prod", "name": "search", "priority": 10000,
      "requests": { "memory": "300Mi", "cpu": "250m" },
      "load": { "startMiB": 120, "growMiBPerSecond": 25, "maxMiB": 480, "startAfterSeconds": 2 } },
    { "namespace": "batch", "name": "report-builder", "priority": 0,
      "requests": { "memory": "256Mi" }, "load": { "startMiB": 220 } },
    { "namespace": "batch", "name": "log-shipper", "priority": 0, "load": { "startMiB": 96 } }
  ]
})";

const char* kDefaultPolicy = R"({
  "evictionHard": { "allocatableMemory.available": "100Mi" },
  "evictionSoft": { "allocatableMemory.available": "160Mi" },
  "evictionSoftGracePeriod": { "allocatableMemory.available": "2s" },
  "evictionMinimumReclaim": { "allocatableMemory.available": "32Mi" },
  "evictionMaxPodGracePeriod": 2,
  "evictionPressureTransitionPeriod": "10s",
  "evictionMaxPodsPerCycle": 5,
  "ranking": "priority",
  "housekeepingInterval": "1s"
})";

const char* kDemoUsage =
    "usage: nodewarden demo [--policy FILE] [--scenario FILE] [--baseline] [--report FILE]\n"
    "                       [--plot FILE.svg] [--kubelet-like] [--duration SECONDS] [--quiet]\n"
    "                       [--state-dir DIR] [--node NAME]\n"
    "\n"
    "As root: builds a sandbox node (a kubepods cgroup with the scenario's memory limit, in\n"
    "the kubelet's cgroupfs layout), starts each pod as a real process that allocates and\n"
    "touches memory, runs the agent against it, shows a live table, and ends with a report:\n"
    "evictions in order with reasons and latencies, and the kernel OOM kills (with the agent:\n"
    "none). Everything it created is removed at the end, on Ctrl-C and on failure.\n"
    "\n"
    "Options:\n"
    "  --policy FILE      eviction policy (default: the demo's, in examples/demo/policy.json)\n"
    "  --scenario FILE    pods and their load (default: examples/demo/scenario.json)\n"
    "  --baseline         run the scenario without the agent: the kernel's OOM killer decides\n"
    "  --kubelet-like     the agent with the kubelet's cadence: 10 s polling, no kernel\n"
    "                     notifications, one pod per cycle\n"
    "  --report FILE      write {\"evictions\": [...], \"kernelOomKills\": N, \"survivors\": "
    "[...]}\n"
    "  --plot FILE.svg    draw the run: each pod's and the node's memory every 100 ms, the\n"
    "                     threshold and the limit, every eviction and kernel OOM kill marked\n"
    "  --duration SECONDS override the scenario's duration\n"
    "  --node NAME        the sandbox node's name in logs and records (default demo-node)\n"
    "  --state-dir DIR    where the flight recorder keeps the run's pressure episode and\n"
    "                     decisions (default /var/lib/nodewarden, as the agent's); the report\n"
    "                     names the episode file and replays it. With --baseline the agent\n"
    "                     only watches and records (a dry run) while the kernel decides\n"
    "  --quiet            no live table, only the report\n";

struct Load {
  std::int64_t startMiB = 0;
  double growMiBPerSecond = 0;
  std::int64_t maxMiB = 0;
  double startAfterSeconds = 0;
  std::int64_t cpuMillicores = 0;
};

struct DemoPod {
  std::string ns;
  std::string name;
  std::string uid;
  std::string qos;
  policy::Json object;  // the Pod object written to the manifests directory
  Load load;
  std::string cgroup;  // relative path
  pid_t pid = 0;
  std::string state = "pending";  // running, evicted, oom-killed, exited
  std::string key() const { return ns + "/" + name; }
};

struct Scenario {
  std::int64_t nodeMemory = 0;
  double durationSeconds = 20;
  // End before durationSeconds once every growing pod has reached its peak or is gone (and
  // a second more has passed for the agent to act): the outcome is then decided, however
  // slowly a loaded machine got there. durationSeconds stays the bound.
  bool endWhenSettled = false;
  std::string description;
  std::vector<DemoPod> pods;
};

std::optional<Scenario> parseScenario(const std::string& text, policy::Diagnostics& diagnostics) {
  auto json = policy::parseJsonText(text, diagnostics);
  if (!json) return std::nullopt;
  Scenario scenario;
  policy::JsonObject root(*json, "", diagnostics);
  if (!root.valid()) return std::nullopt;
  scenario.description = root.string("description").value_or("");
  if (auto memory = root.quantity("nodeMemory")) {
    scenario.nodeMemory = memory->value();
    if (scenario.nodeMemory < 64 * kMiB) {
      diagnostics.add(root.pathOf("nodeMemory"), "expected at least 64Mi");
    }
  } else {
    diagnostics.add(root.pathOf("nodeMemory"), "required: the sandbox node's memory, e.g. \"1Gi\"");
  }
  if (auto duration = root.integer("durationSeconds", 1, 3600))
    scenario.durationSeconds = double(*duration);
  scenario.endWhenSettled = root.boolean("endWhenSettled").value_or(false);
  int index = 0;
  root.forEach("pods", [&](const policy::Json& item, const std::string& path) {
    policy::JsonObject pod(item, path, diagnostics);
    if (!pod.valid()) return;
    DemoPod demo;
    demo.ns = pod.string("namespace").value_or("default");
    demo.name = pod.requiredString("name");
    char uid[64];
    std::snprintf(uid, sizeof uid, "d3e0c0de-%04x-4000-8000-%012x", ::getpid() & 0xffff, ++index);
    demo.uid = uid;
    policy::JsonObject load = pod.object("load");
    if (load.valid()) {
      demo.load.startMiB = load.integer("startMiB", 0, 1 << 20).value_or(0);
      demo.load.maxMiB = load.integer("maxMiB", 0, 1 << 20).value_or(demo.load.startMiB);
      demo.load.growMiBPerSecond = double(load.integer("growMiBPerSecond", 0, 1 << 16).value_or(0));
      demo.load.startAfterSeconds = double(load.integer("startAfterSeconds", 0, 3600).value_or(0));
      demo.load.cpuMillicores = load.integer("cpuMillicores", 0, 1000).value_or(0);
    }
    policy::Json requests = policy::Json::object();
    for (const auto& [name, quantity] : pod.quantityMap("requests", true)) {
      requests[name] = quantity.toString();
    }
    policy::Json container = {{"name", "main"}, {"resources", {{"requests", requests}}}};
    if (auto limits = pod.member("limits")) container["resources"]["limits"] = *limits;
    policy::Json spec = {{"containers", policy::Json::array({container})},
                         {"terminationGracePeriodSeconds", 5}};
    if (auto priority = pod.integer("priority", -2147483648LL, 1000000000))
      spec["priority"] = *priority;
    if (auto className = pod.string("priorityClassName")) spec["priorityClassName"] = *className;
    demo.object = {{"apiVersion", "v1"},
                   {"kind", "Pod"},
                   {"metadata", {{"name", demo.name}, {"namespace", demo.ns}, {"uid", demo.uid}}},
                   {"spec", spec},
                   {"status", {{"phase", "Running"}}}};
    demo.qos = requests.empty() ? "besteffort" : "burstable";
    scenario.pods.push_back(std::move(demo));
  });
  if (scenario.pods.empty()) diagnostics.add(root.pathOf("pods"), "expected at least one pod");
  if (!diagnostics.empty()) return std::nullopt;
  return scenario;
}

// An eviction's latency (crossing → signal) in its two parts: crossing → threshold met, the
// soft threshold's grace period from the policy (0 for a hard threshold), and threshold met →
// signal, the agent's reaction. The grace is capped at the latency, so the two add up to it.
struct LatencySplit {
  double graceMs = 0;
  double reactionMs = 0;
};

LatencySplit splitLatency(const EvictionRecord& record, const policy::Policy& policy) {
  double graceMs = 0;
  if (!record.order.threshold.hard) {
    for (const policy::Threshold& t : policy.thresholds) {
      if (t.signal == record.order.threshold.signal && !t.hard())
        graceMs = std::chrono::duration<double, std::milli>(t.gracePeriod).count();
    }
  }
  graceMs = std::clamp(graceMs, 0.0, std::max(record.latencyMs, 0.0));
  return {graceMs, record.latencyMs - graceMs};
}

double tenths(double value) {
  return std::round(value * 10) / 10;
}

std::string mib(std::int64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.0fMi", double(bytes) / double(kMiB));
  return buffer;
}

}  // namespace

int runDemoLoad(const std::vector<std::string>& argv) {
  auto args = parseArgs(
      argv, {"start-mib", "max-mib", "grow-mib-per-s", "start-after", "cpu-millicores", "lifetime"},
      {});
  if (!args) {
    std::cerr << "nodewarden demo-load: " << args.error().message << "\n";
    return kExitUsage;
  }
  auto number = [&](const char* name, double fallback) {
    auto text = args->value(name);
    return text ? std::strtod(text->c_str(), nullptr) : fallback;
  };
  const auto startMiB = std::int64_t(number("start-mib", 0));
  const auto maxMiB = std::max(startMiB, std::int64_t(number("max-mib", double(startMiB))));
  const double grow = number("grow-mib-per-s", 0);
  const double startAfter = number("start-after", 0);
  const double cpu = std::clamp(number("cpu-millicores", 0), 0.0, 1000.0) / 1000.0;
  const double lifetime = std::clamp(number("lifetime", 60), 1.0, 3600.0);
  // A graceful stop (SIGTERM) takes a moment, like a real server draining.
  std::signal(SIGTERM, [](int) {
    ::usleep(200000);
    ::_exit(0);
  });
  const std::size_t reserve = std::size_t(maxMiB) * kMiB;
  char* memory = nullptr;
  if (reserve > 0) {
    void* mapped = ::mmap(nullptr, reserve, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mapped == MAP_FAILED) return 1;
    memory = static_cast<char*>(mapped);
  }
  std::int64_t touchedMiB = 0;
  auto touchUpTo = [&](std::int64_t target) {
    for (; touchedMiB < std::min(target, maxMiB); ++touchedMiB) {
      for (std::int64_t offset = 0; offset < kMiB; offset += 4096)
        memory[touchedMiB * kMiB + offset] = 1;
    }
  };
  touchUpTo(startMiB);
  const auto begin = std::chrono::steady_clock::now();
  while (true) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (elapsed >= lifetime) break;
    if (elapsed >= startAfter && grow > 0)
      touchUpTo(startMiB + std::int64_t((elapsed - startAfter) * grow));
    // Burn `cpu` of each 20 ms slice.
    const auto sliceEnd = std::chrono::steady_clock::now() + 20ms;
    const auto busyEnd =
        std::chrono::steady_clock::now() + std::chrono::microseconds(std::int64_t(cpu * 20000));
    volatile std::uint64_t spin = 0;
    while (std::chrono::steady_clock::now() < busyEnd) spin = spin + 1;
    std::this_thread::sleep_until(sliceEnd);
  }
  return 0;
}

int runDemo(const std::vector<std::string>& argv) {
  auto args =
      parseArgs(argv, {"policy", "scenario", "report", "duration", "plot", "state-dir", "node"},
                {"baseline", "kubelet-like", "quiet", "help"});
  if (!args) {
    std::cerr << "nodewarden demo: " << args.error().message << "\n\n" << kDemoUsage;
    return kExitUsage;
  }
  if (args->flag("help")) {
    std::cout << kDemoUsage;
    return kExitOk;
  }
  const bool baseline = args->flag("baseline");
  const bool kubeletLike = args->flag("kubelet-like");
  const bool quiet = args->flag("quiet");

  // Inputs first: a bad file changes nothing.
  std::string scenarioText = kDefaultScenario;
  std::string scenarioName = "the built-in scenario (examples/demo/scenario.json)";
  if (auto path = args->value("scenario")) {
    auto text = readFile(*path);
    if (!text) {
      std::cerr << text.error().message << "\n";
      return kExitBadInput;
    }
    scenarioText = *text;
    scenarioName = *path;
  }
  policy::Diagnostics diagnostics;
  auto scenario = parseScenario(scenarioText, diagnostics);
  if (!scenario) {
    for (const Error& error : diagnostics.errors())
      std::cerr << scenarioName << ": " << error.message << "\n";
    return kExitBadInput;
  }
  if (auto duration = args->value("duration"))
    scenario->durationSeconds = std::clamp(std::strtod(duration->c_str(), nullptr), 1.0, 3600.0);
  policy::Policy policy;
  std::string policyText = kDefaultPolicy;
  if (auto path = args->value("policy")) {
    auto loaded = policy::loadPolicy(&*path);
    if (!loaded) {
      std::cerr << loaded.error().message << "\n";
      return kExitBadInput;
    }
    policy = *loaded;
  } else {
    policy::Diagnostics policyDiagnostics;
    policy = *policy::parsePolicyText(policyText, policyDiagnostics);
  }
  if (kubeletLike) {
    policy.maxPodsPerCycle = 1;
    policy.housekeepingInterval = 10s;
  }

  if (::geteuid() != 0) {
    std::cerr << "nodewarden demo: needs root (it creates cgroups and moves processes into them)\n";
    return kExitBadInput;
  }
  auto hierarchy = cgroups::discoverHierarchy({});
  if (!hierarchy) {
    std::cerr << "nodewarden demo: " << hierarchy.error().message << "\n";
    return kExitBadInput;
  }
  cgroups::removeStaleSandboxes(*hierarchy, "nodewarden-demo");
  cgroups::SandboxOptions sandboxOptions;
  sandboxOptions.name = "nodewarden-demo-" + std::to_string(::getpid());
  sandboxOptions.memoryLimit = std::uint64_t(scenario->nodeMemory);
  auto created = cgroups::Sandbox::create(*hierarchy, sandboxOptions);
  if (!created) {
    std::cerr << "nodewarden demo: " << created.error().message << "\n";
    return kExitBadInput;
  }
  cgroups::Sandbox sandbox = std::move(created).value();
  if (hierarchy->memoryVersion == cgroups::Version::V1) {
    // No swap escape: the limit is the node's memory.
    (void)sandbox.writeMemoryFile(sandbox.kubepods(), "memory.memsw.limit_in_bytes",
                                  std::to_string(scenario->nodeMemory));
  }
  const std::filesystem::path manifests =
      std::filesystem::temp_directory_path() / ("nodewarden-demo-" + std::to_string(::getpid()));
  std::filesystem::create_directories(manifests);
  struct RemoveDir {
    std::filesystem::path path;
    ~RemoveDir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } removeManifests{manifests};

  std::cout
      << "nodewarden demo: " << scenario->description << "\n"
      << "  node: " << sandbox.hierarchy().memory << "/" << sandbox.kubepods() << " limited to "
      << mib(scenario->nodeMemory) << "; " << scenario->pods.size() << " pods; "
      << scenario->durationSeconds << " s; "
      << (baseline
              ? "NO eviction (baseline: the agent only records; the kernel's OOM killer decides)"
          : kubeletLike ? "agent with kubelet-like settings (10 s polling, 1 pod per cycle)"
                        : "agent with kernel notifications")
      << "\n";

  // Pods: cgroup, manifest, process.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  const auto started = std::chrono::steady_clock::now();
  for (DemoPod& pod : scenario->pods) {
    auto rel = sandbox.addPod(pod.uid, pod.qos);
    if (!rel) {
      std::cerr << "nodewarden demo: " << rel.error().message << "\n";
      return kExitBadInput;
    }
    pod.cgroup = *rel;
    std::ofstream(manifests / (pod.ns + "_" + pod.name + ".json")) << pod.object.dump(2);
    std::vector<std::string> loadArgs = {self,
                                         "demo-load",
                                         "--start-mib",
                                         std::to_string(pod.load.startMiB),
                                         "--max-mib",
                                         std::to_string(pod.load.maxMiB),
                                         "--grow-mib-per-s",
                                         std::to_string(pod.load.growMiBPerSecond),
                                         "--start-after",
                                         std::to_string(pod.load.startAfterSeconds),
                                         "--cpu-millicores",
                                         std::to_string(pod.load.cpuMillicores),
                                         "--lifetime",
                                         std::to_string(scenario->durationSeconds + 30)};
    auto pid = sandbox.spawn(pod.cgroup, [&] {
      std::vector<char*> raw;
      for (std::string& arg : loadArgs) raw.push_back(arg.data());
      raw.push_back(nullptr);
      ::execv(raw[0], raw.data());
      return 127;
    });
    if (!pid) {
      std::cerr << "nodewarden demo: " << pid.error().message << "\n";
      return kExitBadInput;
    }
    pod.pid = *pid;
    pod.state = "running";
  }

  asio::io_context io;
  server::configureLogging(server::LogFormat::Text,
                           quiet ? server::LogLevel::Error : server::LogLevel::Warn);
  std::unique_ptr<Agent> agent;
  {  // --baseline: the agent only watches and records, as a dry run; the kernel decides.
    AgentOptions options;
    options.nodeName = args->value("node").value_or("demo-node");
    options.scan.nodeFsPath = "";  // the demo is about memory
    options.notifications = !kubeletLike;
    options.systemdNotify = false;
    options.dryRun = baseline;
    if (baseline) server::configureLogging(server::LogFormat::Text, server::LogLevel::Error);
    node::RecorderOptions recorder;
    recorder.nodeName = options.nodeName;
    recorder.stateDir = args->value("state-dir").value_or("/var/lib/nodewarden");
    recorder.dryRun = baseline;
    options.recorder = recorder;
    cgroups::PodCgroups pods(*hierarchy, sandbox.kubepods());
    agent = std::make_unique<Agent>(
        io, options, policy, std::move(pods),
        std::make_unique<StaticPodSource>(manifests.string(), options.nodeName),
        baseline ? node::dryRunActuator() : cgroupActuator());
    auto ok = agent->start();
    if (!ok) {
      std::cerr << "nodewarden demo: " << ok.error().message << "\n";
      return kExitBadInput;
    }
  }

  // OOM kills: v1 counts them on the victim's own cgroup (memory.oom_control oom_kill), v2
  // hierarchically (memory.events): sum kubepods and every pod cgroup, v1 and v2 alike.
  auto kubepodsDir = cgroups::CgroupDir::open(hierarchy->memory + "/" + sandbox.kubepods(),
                                              hierarchy->memoryVersion);
  std::vector<cgroups::CgroupDir> podDirs;
  for (const DemoPod& pod : scenario->pods) {
    if (auto dir = cgroups::CgroupDir::open(hierarchy->memory + "/" + pod.cgroup,
                                            hierarchy->memoryVersion)) {
      podDirs.push_back(std::move(dir).value());
    }
  }
  std::string buffer;
  auto oomKills = [&]() -> std::uint64_t {
    if (!kubepodsDir) return 0;
    auto kills = cgroups::readOomKills(*kubepodsDir, buffer);
    std::uint64_t total = kills ? *kills : 0;
    if (hierarchy->memoryVersion == cgroups::Version::V1) {
      for (const cgroups::CgroupDir& dir : podDirs) {
        if (auto podKills = cgroups::readOomKills(dir, buffer)) total += *podKills;
      }
    }
    return total;
  };
  const std::uint64_t oomBefore = oomKills();

  std::map<std::string, policy::Signal> evictedUids;
  std::vector<PlotMark> oomMarks;
  auto reap = [&] {
    for (DemoPod& pod : scenario->pods) {
      if (pod.pid <= 0) continue;
      int status = 0;
      if (::waitpid(pod.pid, &status, WNOHANG) != pod.pid) continue;
      pod.pid = 0;
      const bool evicted = evictedUids.contains(pod.uid);
      if (evicted) {
        pod.state = "evicted";
      } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
        pod.state = "oom-killed";
        oomMarks.push_back(PlotMark{
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
            "OOM kill " + pod.key(), true});
        std::cout << "  !! the kernel's OOM killer killed " << pod.key() << "\n";
      } else {
        pod.state = "exited";
      }
    }
  };
  if (agent && !baseline) {
    agent->onEviction = [&](const EvictionRecord& record) {
      evictedUids[record.order.uid] = record.order.threshold.signal;
    };
  }

  // --plot: every pod's and the node's memory, sampled every 100 ms.
  const std::optional<std::string> plotPath = args->value("plot");
  Plot plot;
  std::vector<std::optional<cgroups::CgroupDir>> plotDirs;
  for (const DemoPod& pod : scenario->pods) {
    plot.series.push_back(PlotSeries{pod.key(), {}});
    auto dir =
        cgroups::CgroupDir::open(hierarchy->memory + "/" + pod.cgroup, hierarchy->memoryVersion);
    plotDirs.push_back(dir ? std::optional<cgroups::CgroupDir>(std::move(dir).value())
                           : std::nullopt);
  }
  plot.series.push_back(PlotSeries{"node", {}});
  // Set by finish(): a timer's handler already queued when finish() cancels it runs with no
  // error, so every handler checks this too, or it would re-arm and io.run() never return.
  bool finished = false;
  asio::steady_timer sampler(io);
  std::function<void()> sample = [&] {
    reap();
    plot.seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    for (std::size_t i = 0; i < scenario->pods.size(); ++i) {
      double value = -1;
      if (scenario->pods[i].state == "running" && plotDirs[i]) {
        if (auto usage = cgroups::readWorkingSet(*plotDirs[i], buffer)) {
          value = double(usage->workingSet) / double(kMiB);
        }
      }
      plot.series[i].mib.push_back(value);
    }
    double node = -1;
    if (kubepodsDir) {
      if (auto memory = cgroups::readWorkingSet(*kubepodsDir, buffer)) {
        node = double(memory->workingSet) / double(kMiB);
      }
    }
    plot.series.back().mib.push_back(node);
    sampler.expires_after(100ms);
    sampler.async_wait([&](const boost::system::error_code& ec) {
      if (!ec && !finished) sample();
    });
  };
  if (plotPath) sample();

  bool interrupted = false;
  asio::signal_set stopSignals(io, SIGINT, SIGTERM);
  asio::steady_timer tick(io);
  auto finish = [&] {
    finished = true;
    tick.cancel();
    sampler.cancel();
    stopSignals.cancel();
    if (agent) agent->stop();
  };
  stopSignals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    interrupted = true;
    std::cout << "\ninterrupted: cleaning up\n";
    finish();
  });
  double settledAt = -1;  // seconds into the run when every growing pod peaked or went
  std::function<void()> onTick = [&] {
    reap();
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (!quiet) {
      std::string line;
      char head[64];
      std::snprintf(head, sizeof head, "t=%4.1fs", elapsed);
      line += head;
      if (kubepodsDir) {
        if (auto memory = cgroups::readMemory(*kubepodsDir, buffer)) {
          line +=
              "  node " + mib(std::int64_t(memory->workingSet)) + "/" + mib(scenario->nodeMemory);
        }
      }
      for (const DemoPod& pod : scenario->pods) {
        line += "  " + pod.name + ":";
        if (pod.state == "running") {
          auto dir = cgroups::CgroupDir::open(hierarchy->memory + "/" + pod.cgroup,
                                              hierarchy->memoryVersion);
          auto usage = dir ? cgroups::readWorkingSet(*dir, buffer)
                           : Result<cgroups::MemoryReading>(Error{"gone"});
          line += usage ? mib(std::int64_t(usage->workingSet)) : std::string("?");
        } else {
          line += pod.state;
        }
      }
      std::cout << line << "\n" << std::flush;
    }
    if (elapsed >= scenario->durationSeconds) return finish();
    if (scenario->endWhenSettled) {
      bool settled = true;
      for (const DemoPod& pod : scenario->pods) {
        if (pod.load.growMiBPerSecond <= 0 || pod.state != "running") continue;
        auto dir = cgroups::CgroupDir::open(hierarchy->memory + "/" + pod.cgroup,
                                            hierarchy->memoryVersion);
        auto usage =
            dir ? cgroups::readMemoryUsage(*dir, buffer) : Result<std::uint64_t>(Error{"gone"});
        if (!usage || std::int64_t(*usage) < pod.load.maxMiB * kMiB) settled = false;
      }
      if (settled && settledAt < 0) settledAt = elapsed;
      if (settledAt >= 0 && elapsed >= settledAt + 1.0) return finish();
    }
    tick.expires_after(1s);
    tick.async_wait([&](const boost::system::error_code& ec) {
      if (!ec && !finished) onTick();
    });
  };
  tick.expires_after(200ms);
  tick.async_wait([&](const boost::system::error_code& ec) {
    if (!ec && !finished) onTick();
  });
  io.run();
  reap();
  const std::uint64_t kernelKills = oomKills() - oomBefore;

  // The report.
  std::cout << "\nreport ("
            << (baseline      ? "baseline, no agent"
                : kubeletLike ? "kubelet-like agent"
                              : "nodewarden agent")
            << ")\n";
  policy::OrderedJson report;
  report["evictions"] = policy::OrderedJson::array();
  if (agent && !baseline) {
    int n = 0;
    for (const EvictionRecord& record : agent->evictions()) {
      const double at = std::chrono::duration<double>(record.signalledAt - started).count();
      const LatencySplit split = splitLatency(record, policy);
      std::printf(
          "  %d. t=%.1fs evicted %s (%s, %s threshold, grace %llds): latency %.1f ms "
          "(threshold's grace %.1f ms + agent's reaction %.1f ms)\n     %s\n",
          ++n, at, record.order.pod.c_str(),
          std::string(policy::toString(record.order.threshold.signal)).c_str(),
          record.order.threshold.hard ? "hard" : "soft",
          static_cast<long long>(record.order.gracePeriodSeconds), record.latencyMs, split.graceMs,
          split.reactionMs, record.order.message.c_str());
      policy::OrderedJson entry;
      entry["pod"] = record.order.pod;
      entry["signal"] = std::string(policy::toString(record.order.threshold.signal));
      entry["latencyMs"] = tenths(record.latencyMs);
      entry["graceMs"] = tenths(split.graceMs);
      entry["reactionMs"] = tenths(split.reactionMs);
      report["evictions"].push_back(entry);
    }
    if (n == 0) std::cout << "  no evictions\n";
  }
  report["kernelOomKills"] = kernelKills;
  report["survivors"] = policy::OrderedJson::array();
  std::vector<std::string> oomVictims;
  for (const DemoPod& pod : scenario->pods) {
    if (pod.state == "running" || pod.state == "exited") report["survivors"].push_back(pod.key());
    if (pod.state == "oom-killed") oomVictims.push_back(pod.key());
  }
  std::cout << "  kernel OOM kills: " << kernelKills;
  if (!oomVictims.empty()) {
    std::cout << " (the kernel chose:";
    for (const std::string& victim : oomVictims) std::cout << " " << victim;
    std::cout << ")";
  }
  std::cout << "\n  survivors:";
  for (const auto& survivor : report["survivors"]) std::cout << " " << survivor.get<std::string>();
  std::cout << "\n";
  // The flight recorder's episode, replayed (agent->stop() in finish() wrote it whole).
  if (Recorder* recorder = agent ? agent->recorder() : nullptr) {
    const std::vector<std::string> episodes = recorder->episodeFiles();
    if (episodes.empty())
      std::cout << "  episode: none recorded (" << recorder->stateDir() << ")\n";
    report["episodes"] = summarizeEpisodes(episodes, std::cout);
  }
  if (plotPath) {
    plot.title = baseline      ? "baseline: no agent, the kernel's OOM killer decides"
                 : kubeletLike ? "kubelet-like agent (10 s polling, one pod per cycle)"
                               : "nodewarden agent";
    plot.limitMiB = double(scenario->nodeMemory) / double(kMiB);
    for (const policy::Threshold& t : policy.thresholds) {
      if (t.signal != policy::Signal::AllocatableMemoryAvailable &&
          t.signal != policy::Signal::MemoryAvailable) {
        continue;
      }
      const double line =
          double(scenario->nodeMemory - t.value.resolve(scenario->nodeMemory).value()) /
          double(kMiB);
      if (plot.thresholdMiB < 0 || line < plot.thresholdMiB) {
        plot.thresholdMiB = line;
        plot.thresholdLabel = std::string(policy::toString(t.signal)) + " < " + t.value.text +
                              (t.hard() ? "" : " (soft)");
      }
    }
    if (agent && !baseline) {
      // Each crossing once (evictions of one cycle share it), then each signal with the
      // agent's reaction: the grace period is the gap between the two.
      std::vector<SteadyTime> crossings;
      for (const EvictionRecord& record : agent->evictions()) {
        if (std::find(crossings.begin(), crossings.end(), record.crossedAt) != crossings.end())
          continue;
        crossings.push_back(record.crossedAt);
        const LatencySplit split = splitLatency(record, policy);
        char label[128];
        std::snprintf(label, sizeof label, "%s crossed (%s, grace %.1f s)",
                      std::string(policy::toString(record.order.threshold.signal)).c_str(),
                      record.order.threshold.hard ? "hard" : "soft", split.graceMs / 1000);
        plot.marks.push_back(PlotMark{
            std::chrono::duration<double>(record.crossedAt - started).count(), label, false});
      }
      for (const EvictionRecord& record : agent->evictions()) {
        char reaction[64];
        std::snprintf(reaction, sizeof reaction, ", reaction %.1f ms",
                      splitLatency(record, policy).reactionMs);
        plot.marks.push_back(
            PlotMark{std::chrono::duration<double>(record.signalledAt - started).count(),
                     "evicted " + record.order.pod + reaction, false});
      }
    }
    plot.marks.insert(plot.marks.end(), oomMarks.begin(), oomMarks.end());
    std::ofstream out(*plotPath);
    out << renderPlotSvg(plot);
    if (!out) {
      std::cerr << "nodewarden demo: cannot write " << *plotPath << "\n";
      return kExitBadInput;
    }
    std::cout << "  plot: " << *plotPath << "\n";
  }
  if (auto path = args->value("report")) {
    std::ofstream out(*path);
    out << report.dump(2) << "\n";
    if (!out) {
      std::cerr << "nodewarden demo: cannot write " << *path << "\n";
      return kExitBadInput;
    }
  }
  agent.reset();
  auto destroyed = sandbox.destroy();
  if (!destroyed) std::cerr << "nodewarden demo: " << destroyed.error().message << "\n";
  return interrupted ? 130 : kExitOk;
}

}  // namespace nodewarden::demo
