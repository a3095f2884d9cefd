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

namespace {

// What the command line asks for.
struct DemoSettings {
  bool baseline = false;     // the agent only records; the kernel's OOM killer decides
  bool kubeletLike = false;  // 10 s polling, no kernel notifications, one pod per cycle
  bool quiet = false;        // no live table
  std::string nodeName;
  std::string stateDir;
  std::optional<std::string> plotPath;
  std::optional<std::string> reportPath;
};

// The state the steps of a run share. Members are destroyed in reverse: the agent and the
// timers before the io_context, the manifests before the sandbox that holds the pods.
struct DemoRun {
  DemoSettings settings;
  Scenario scenario;
  policy::Policy policy;

  std::optional<cgroups::Hierarchy> hierarchy;
  std::optional<cgroups::Sandbox> sandbox;
  struct RemoveDir {
    std::filesystem::path path;
    ~RemoveDir() {
      std::error_code ignored;
      if (!path.empty()) std::filesystem::remove_all(path, ignored);
    }
  } manifests;
  SteadyTime started{};

  asio::io_context io;
  std::unique_ptr<Agent> agent;

  // OOM kills: v1 counts them on the victim's own cgroup (memory.oom_control oom_kill), v2
  // hierarchically (memory.events): kubepods and every pod cgroup are summed, v1 and v2 alike.
  std::optional<cgroups::CgroupDir> kubepodsDir;
  std::vector<cgroups::CgroupDir> podDirs;
  std::uint64_t oomBefore = 0;
  std::uint64_t kernelKills = 0;
  std::string buffer;  // reads of cgroup files

  std::map<std::string, policy::Signal> evictedUids;
  std::vector<PlotMark> oomMarks;
  Plot plot;
  std::vector<std::optional<cgroups::CgroupDir>> plotDirs;

  // Set by finish(): a timer's handler already queued when finish() cancels it runs with no
  // error, so every handler checks this too, or it would re-arm and io.run() never return.
  bool finished = false;
  bool interrupted = false;
  double settledAt = -1;  // seconds into the run when every growing pod peaked or went
  asio::steady_timer sampler{io};
  asio::steady_timer tick{io};
  asio::signal_set stopSignals{io, SIGINT, SIGTERM};

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  std::string cgroupPath(const std::string& relative) const {
    return hierarchy->memory + "/" + relative;
  }
};

// Inputs first: a bad file changes nothing. An error's message is what to print.
Result<void> readInputs(const Args& args, DemoRun& run) {
  DemoSettings& settings = run.settings;
  settings.baseline = args.flag("baseline");
  settings.kubeletLike = args.flag("kubelet-like");
  settings.quiet = args.flag("quiet");
  settings.nodeName = args.value("node").value_or("demo-node");
  settings.stateDir = args.value("state-dir").value_or("/var/lib/nodewarden");
  settings.plotPath = args.value("plot");
  settings.reportPath = args.value("report");

  std::string scenarioText = kDefaultScenario;
  std::string scenarioName = "the built-in scenario (examples/demo/scenario.json)";
  if (auto path = args.value("scenario")) {
    auto text = readFile(*path);
    if (!text) return text.error();
    scenarioText = *text;
    scenarioName = *path;
  }
  policy::Diagnostics diagnostics;
  auto scenario = parseScenario(scenarioText, diagnostics);
  if (!scenario) {
    std::string message;
    for (const Error& error : diagnostics.errors()) {
      message += (message.empty() ? "" : "\n") + scenarioName + ": " + error.message;
    }
    return Error{message};
  }
  run.scenario = std::move(*scenario);
  if (auto duration = args.value("duration")) {
    run.scenario.durationSeconds = std::clamp(std::strtod(duration->c_str(), nullptr), 1.0, 3600.0);
  }
  if (auto path = args.value("policy")) {
    auto loaded = policy::loadPolicy(&*path);
    if (!loaded) return loaded.error();
    run.policy = *loaded;
  } else {
    policy::Diagnostics policyDiagnostics;
    run.policy = *policy::parsePolicyText(kDefaultPolicy, policyDiagnostics);
  }
  if (settings.kubeletLike) {
    run.policy.maxPodsPerCycle = 1;
    run.policy.housekeepingInterval = 10s;
  }
  return {};
}

// The sandbox node: a kubepods cgroup limited to the scenario's memory, and a manifests
// directory for the pod source.
Result<void> setUpSandbox(DemoRun& run) {
  if (::geteuid() != 0) {
    return Error{"needs root (it creates cgroups and moves processes into them)"};
  }
  auto hierarchy = cgroups::discoverHierarchy({});
  if (!hierarchy) return hierarchy.error();
  run.hierarchy = std::move(hierarchy).value();
  cgroups::removeStaleSandboxes(*run.hierarchy, "nodewarden-demo");
  cgroups::SandboxOptions options;
  options.name = "nodewarden-demo-" + std::to_string(::getpid());
  options.memoryLimit = std::uint64_t(run.scenario.nodeMemory);
  auto created = cgroups::Sandbox::create(*run.hierarchy, options);
  if (!created) return created.error();
  run.sandbox.emplace(std::move(created).value());
  if (run.hierarchy->memoryVersion == cgroups::Version::V1) {
    // No swap escape: the limit is the node's memory.
    (void)run.sandbox->writeMemoryFile(run.sandbox->kubepods(), "memory.memsw.limit_in_bytes",
                                       std::to_string(run.scenario.nodeMemory));
  }
  run.manifests.path =
      std::filesystem::temp_directory_path() / ("nodewarden-demo-" + std::to_string(::getpid()));
  std::filesystem::create_directories(run.manifests.path);
  return {};
}

void printHeader(const DemoRun& run) {
  const DemoSettings& settings = run.settings;
  std::cout << "nodewarden demo: " << run.scenario.description << "\n"
            << "  node: " << run.sandbox->hierarchy().memory << "/" << run.sandbox->kubepods()
            << " limited to " << mib(run.scenario.nodeMemory) << "; " << run.scenario.pods.size()
            << " pods; " << run.scenario.durationSeconds << " s; "
            << (settings.baseline ? "NO eviction (baseline: the agent only records; the kernel's "
                                    "OOM killer decides)"
                : settings.kubeletLike
                    ? "agent with kubelet-like settings (10 s polling, 1 pod per cycle)"
                    : "agent with kernel notifications")
            << "\n";
}

// Each pod: its cgroup, its manifest, and its process (this binary's demo-load).
Result<void> startPods(DemoRun& run) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  run.started = std::chrono::steady_clock::now();
  for (DemoPod& pod : run.scenario.pods) {
    auto relative = run.sandbox->addPod(pod.uid, pod.qos);
    if (!relative) return relative.error();
    pod.cgroup = *relative;
    std::ofstream(run.manifests.path / (pod.ns + "_" + pod.name + ".json")) << pod.object.dump(2);
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
                                         std::to_string(run.scenario.durationSeconds + 30)};
    auto pid = run.sandbox->spawn(pod.cgroup, [&] {
      std::vector<char*> raw;
      for (std::string& arg : loadArgs) raw.push_back(arg.data());
      raw.push_back(nullptr);
      ::execv(raw[0], raw.data());
      return 127;
    });
    if (!pid) return pid.error();
    pod.pid = *pid;
    pod.state = "running";
  }
  return {};
}

// The agent over the sandbox, in this process. --baseline: it only watches and records, as a
// dry run; the kernel decides.
Result<void> startAgent(DemoRun& run) {
  const DemoSettings& settings = run.settings;
  server::configureLogging(server::LogFormat::Text,
                           settings.quiet ? server::LogLevel::Error : server::LogLevel::Warn);
  AgentOptions options;
  options.nodeName = settings.nodeName;
  options.scan.nodeFsPath = "";  // the demo is about memory
  options.notifications = !settings.kubeletLike;
  options.systemdNotify = false;
  options.dryRun = settings.baseline;
  if (settings.baseline) server::configureLogging(server::LogFormat::Text, server::LogLevel::Error);
  node::RecorderOptions recorder;
  recorder.nodeName = options.nodeName;
  recorder.stateDir = settings.stateDir;
  recorder.dryRun = settings.baseline;
  options.recorder = recorder;
  cgroups::PodCgroups pods(*run.hierarchy, run.sandbox->kubepods());
  run.agent = std::make_unique<Agent>(
      run.io, options, run.policy, std::move(pods),
      std::make_unique<StaticPodSource>(run.manifests.path.string(), options.nodeName),
      settings.baseline ? node::dryRunActuator() : cgroupActuator());
  if (auto ok = run.agent->start(); !ok) return ok.error();
  if (!settings.baseline) {
    run.agent->onEviction = [&run](const EvictionRecord& record) {
      run.evictedUids[record.order.uid] = record.order.threshold.signal;
    };
  }
  return {};
}

std::uint64_t oomKills(DemoRun& run) {
  if (!run.kubepodsDir) return 0;
  auto kills = cgroups::readOomKills(*run.kubepodsDir, run.buffer);
  std::uint64_t total = kills ? *kills : 0;
  if (run.hierarchy->memoryVersion == cgroups::Version::V1) {
    for (const cgroups::CgroupDir& dir : run.podDirs) {
      if (auto podKills = cgroups::readOomKills(dir, run.buffer)) total += *podKills;
    }
  }
  return total;
}

void countOomKillsFromNow(DemoRun& run) {
  const cgroups::Version version = run.hierarchy->memoryVersion;
  if (auto dir = cgroups::CgroupDir::open(run.cgroupPath(run.sandbox->kubepods()), version)) {
    run.kubepodsDir = std::move(dir).value();
  }
  for (const DemoPod& pod : run.scenario.pods) {
    if (auto dir = cgroups::CgroupDir::open(run.cgroupPath(pod.cgroup), version)) {
      run.podDirs.push_back(std::move(dir).value());
    }
  }
  run.oomBefore = oomKills(run);
}

// Pods whose process ended: evicted (the agent ordered it), OOM-killed (SIGKILL otherwise)
// or exited.
void reap(DemoRun& run) {
  for (DemoPod& pod : run.scenario.pods) {
    if (pod.pid <= 0) continue;
    int status = 0;
    if (::waitpid(pod.pid, &status, WNOHANG) != pod.pid) continue;
    pod.pid = 0;
    if (run.evictedUids.contains(pod.uid)) {
      pod.state = "evicted";
    } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
      pod.state = "oom-killed";
      run.oomMarks.push_back(PlotMark{run.elapsed(), "OOM kill " + pod.key(), true});
      std::cout << "  !! the kernel's OOM killer killed " << pod.key() << "\n";
    } else {
      pod.state = "exited";
    }
  }
}

// --plot: every pod's and the node's memory, every 100 ms.
void sample(DemoRun& run) {
  reap(run);
  run.plot.seconds.push_back(run.elapsed());
  for (std::size_t i = 0; i < run.scenario.pods.size(); ++i) {
    double value = -1;
    if (run.scenario.pods[i].state == "running" && run.plotDirs[i]) {
      if (auto usage = cgroups::readWorkingSet(*run.plotDirs[i], run.buffer)) {
        value = double(usage->workingSet) / double(kMiB);
      }
    }
    run.plot.series[i].mib.push_back(value);
  }
  double node = -1;
  if (run.kubepodsDir) {
    if (auto memory = cgroups::readWorkingSet(*run.kubepodsDir, run.buffer)) {
      node = double(memory->workingSet) / double(kMiB);
    }
  }
  run.plot.series.back().mib.push_back(node);
  run.sampler.expires_after(100ms);
  run.sampler.async_wait([&run](const boost::system::error_code& ec) {
    if (!ec && !run.finished) sample(run);
  });
}

void startSampling(DemoRun& run) {
  for (const DemoPod& pod : run.scenario.pods) {
    run.plot.series.push_back(PlotSeries{pod.key(), {}});
    auto dir = cgroups::CgroupDir::open(run.cgroupPath(pod.cgroup), run.hierarchy->memoryVersion);
    run.plotDirs.push_back(dir ? std::optional<cgroups::CgroupDir>(std::move(dir).value())
                               : std::nullopt);
  }
  run.plot.series.push_back(PlotSeries{"node", {}});
  if (run.settings.plotPath) sample(run);
}

void finish(DemoRun& run) {
  run.finished = true;
  run.tick.cancel();
  run.sampler.cancel();
  run.stopSignals.cancel();
  if (run.agent) run.agent->stop();
}

// The live table's line: the node's and each pod's working set, or how the pod ended.
void printLiveLine(DemoRun& run, double elapsed) {
  std::string line;
  char head[64];
  std::snprintf(head, sizeof head, "t=%4.1fs", elapsed);
  line += head;
  if (run.kubepodsDir) {
    if (auto memory = cgroups::readMemory(*run.kubepodsDir, run.buffer)) {
      line +=
          "  node " + mib(std::int64_t(memory->workingSet)) + "/" + mib(run.scenario.nodeMemory);
    }
  }
  for (const DemoPod& pod : run.scenario.pods) {
    line += "  " + pod.name + ":";
    if (pod.state == "running") {
      auto dir = cgroups::CgroupDir::open(run.cgroupPath(pod.cgroup), run.hierarchy->memoryVersion);
      auto usage = dir ? cgroups::readWorkingSet(*dir, run.buffer)
                       : Result<cgroups::MemoryReading>(Error{"gone"});
      line += usage ? mib(std::int64_t(usage->workingSet)) : std::string("?");
    } else {
      line += pod.state;
    }
  }
  std::cout << line << "\n" << std::flush;
}

// endWhenSettled: every growing pod at its peak or gone, and a second more for the agent.
bool settled(DemoRun& run, double elapsed) {
  bool peaked = true;
  for (const DemoPod& pod : run.scenario.pods) {
    if (pod.load.growMiBPerSecond <= 0 || pod.state != "running") continue;
    auto dir = cgroups::CgroupDir::open(run.cgroupPath(pod.cgroup), run.hierarchy->memoryVersion);
    auto usage =
        dir ? cgroups::readMemoryUsage(*dir, run.buffer) : Result<std::uint64_t>(Error{"gone"});
    if (!usage || std::int64_t(*usage) < pod.load.maxMiB * kMiB) peaked = false;
  }
  if (peaked && run.settledAt < 0) run.settledAt = elapsed;
  return run.settledAt >= 0 && elapsed >= run.settledAt + 1.0;
}

void scheduleTick(DemoRun& run, std::chrono::milliseconds after);

void onTick(DemoRun& run) {
  reap(run);
  const double elapsed = run.elapsed();
  if (!run.settings.quiet) printLiveLine(run, elapsed);
  if (elapsed >= run.scenario.durationSeconds) return finish(run);
  if (run.scenario.endWhenSettled && settled(run, elapsed)) return finish(run);
  scheduleTick(run, 1s);
}

void scheduleTick(DemoRun& run, std::chrono::milliseconds after) {
  run.tick.expires_after(after);
  run.tick.async_wait([&run](const boost::system::error_code& ec) {
    if (!ec && !run.finished) onTick(run);
  });
}

// The pressure: the pods run and the agent acts until the scenario's end (or Ctrl-C).
void drivePressure(DemoRun& run) {
  run.stopSignals.async_wait([&run](const boost::system::error_code& ec, int) {
    if (ec) return;
    run.interrupted = true;
    std::cout << "\ninterrupted: cleaning up\n";
    finish(run);
  });
  scheduleTick(run, 200ms);
  run.io.run();
  reap(run);
  run.kernelKills = oomKills(run) - run.oomBefore;
}

// The agent's evictions in order, with the latency split, as text and into the report.
void reportEvictions(const DemoRun& run, policy::OrderedJson& report) {
  report["evictions"] = policy::OrderedJson::array();
  if (!run.agent || run.settings.baseline) return;
  int n = 0;
  for (const EvictionRecord& record : run.agent->evictions()) {
    const double at = std::chrono::duration<double>(record.signalledAt - run.started).count();
    const LatencySplit split = splitLatency(record, run.policy);
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

// The kernel's OOM kills, the pods still standing, and the flight recorder's episode.
void reportOutcome(const DemoRun& run, policy::OrderedJson& report) {
  report["kernelOomKills"] = run.kernelKills;
  report["survivors"] = policy::OrderedJson::array();
  std::vector<std::string> oomVictims;
  for (const DemoPod& pod : run.scenario.pods) {
    if (pod.state == "running" || pod.state == "exited") report["survivors"].push_back(pod.key());
    if (pod.state == "oom-killed") oomVictims.push_back(pod.key());
  }
  std::cout << "  kernel OOM kills: " << run.kernelKills;
  if (!oomVictims.empty()) {
    std::cout << " (the kernel chose:";
    for (const std::string& victim : oomVictims) std::cout << " " << victim;
    std::cout << ")";
  }
  std::cout << "\n  survivors:";
  for (const auto& survivor : report["survivors"]) std::cout << " " << survivor.get<std::string>();
  std::cout << "\n";
  // The episode, replayed (agent->stop() in finish() wrote it whole).
  if (Recorder* recorder = run.agent ? run.agent->recorder() : nullptr) {
    const std::vector<std::string> episodes = recorder->episodeFiles();
    if (episodes.empty())
      std::cout << "  episode: none recorded (" << recorder->stateDir() << ")\n";
    report["episodes"] = summarizeEpisodes(episodes, std::cout);
  }
}

// The plot's threshold line (the lowest memory threshold) and its marks: each crossing once
// (evictions of one cycle share it), each signal with the agent's reaction (the grace period
// is the gap between the two), each kernel OOM kill.
void finishPlot(DemoRun& run) {
  const DemoSettings& settings = run.settings;
  Plot& plot = run.plot;
  plot.title = settings.baseline      ? "baseline: no agent, the kernel's OOM killer decides"
               : settings.kubeletLike ? "kubelet-like agent (10 s polling, one pod per cycle)"
                                      : "nodewarden agent";
  plot.limitMiB = double(run.scenario.nodeMemory) / double(kMiB);
  for (const policy::Threshold& t : run.policy.thresholds) {
    if (t.signal != policy::Signal::AllocatableMemoryAvailable &&
        t.signal != policy::Signal::MemoryAvailable) {
      continue;
    }
    const double line =
        double(run.scenario.nodeMemory - t.value.resolve(run.scenario.nodeMemory).value()) /
        double(kMiB);
    if (plot.thresholdMiB < 0 || line < plot.thresholdMiB) {
      plot.thresholdMiB = line;
      plot.thresholdLabel = std::string(policy::toString(t.signal)) + " < " + t.value.text +
                            (t.hard() ? "" : " (soft)");
    }
  }
  if (run.agent && !settings.baseline) {
    std::vector<SteadyTime> crossings;
    for (const EvictionRecord& record : run.agent->evictions()) {
      if (std::find(crossings.begin(), crossings.end(), record.crossedAt) != crossings.end())
        continue;
      crossings.push_back(record.crossedAt);
      const LatencySplit split = splitLatency(record, run.policy);
      char label[128];
      std::snprintf(label, sizeof label, "%s crossed (%s, grace %.1f s)",
                    std::string(policy::toString(record.order.threshold.signal)).c_str(),
                    record.order.threshold.hard ? "hard" : "soft", split.graceMs / 1000);
      plot.marks.push_back(PlotMark{
          std::chrono::duration<double>(record.crossedAt - run.started).count(), label, false});
    }
    for (const EvictionRecord& record : run.agent->evictions()) {
      char reaction[64];
      std::snprintf(reaction, sizeof reaction, ", reaction %.1f ms",
                    splitLatency(record, run.policy).reactionMs);
      plot.marks.push_back(
          PlotMark{std::chrono::duration<double>(record.signalledAt - run.started).count(),
                   "evicted " + record.order.pod + reaction, false});
    }
  }
  plot.marks.insert(plot.marks.end(), run.oomMarks.begin(), run.oomMarks.end());
}

Result<void> writeText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) return Error{"cannot write " + path};
  return {};
}

// The report: text on stdout, then the files --plot and --report ask for.
Result<void> report(DemoRun& run) {
  const DemoSettings& settings = run.settings;
  std::cout << "\nreport ("
            << (settings.baseline      ? "baseline, no agent"
                : settings.kubeletLike ? "kubelet-like agent"
                                       : "nodewarden agent")
            << ")\n";
  policy::OrderedJson json;
  reportEvictions(run, json);
  reportOutcome(run, json);
  if (settings.plotPath) {
    finishPlot(run);
    if (auto written = writeText(*settings.plotPath, renderPlotSvg(run.plot)); !written) {
      return written;
    }
    std::cout << "  plot: " << *settings.plotPath << "\n";
  }
  if (settings.reportPath) return writeText(*settings.reportPath, json.dump(2) + "\n");
  return {};
}

}  // namespace

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
  DemoRun run;
  if (auto read = readInputs(*args, run); !read) {
    std::cerr << read.error().message << "\n";
    return kExitBadInput;
  }
  if (auto ready = setUpSandbox(run); !ready) {
    std::cerr << "nodewarden demo: " << ready.error().message << "\n";
    return kExitBadInput;
  }
  printHeader(run);
  for (auto step : {startPods, startAgent}) {
    if (auto done = step(run); !done) {
      std::cerr << "nodewarden demo: " << done.error().message << "\n";
      return kExitBadInput;
    }
  }
  countOomKillsFromNow(run);
  startSampling(run);
  drivePressure(run);
  if (auto reported = report(run); !reported) {
    std::cerr << "nodewarden demo: " << reported.error().message << "\n";
    return kExitBadInput;
  }
  run.agent.reset();
  auto destroyed = run.sandbox->destroy();
  if (!destroyed) std::cerr << "nodewarden demo: " << destroyed.error().message << "\n";
  return run.interrupted ? 130 : kExitOk;
}

}  // namespace nodewarden::demo
