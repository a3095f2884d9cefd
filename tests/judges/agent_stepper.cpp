// agent_stepper: the node agent's own decision, cycle by cycle, on the judge's inputs.
//
//   agent_stepper [STEPS.json]     (standard input without an argument)
//
// STEPS is one JSON object:
//
//   {"node": "node-1",
//    "policy": {…a policy file…},
//    "cycles": [{"atMs": 0, "snapshot": {…a snapshot, docs/reference.md §2…}}, …]}
//
// Each cycle's snapshot is laid out as files — a cgroup v2 tree of plain directories and a
// /proc of its own, what the agent's readers read (cgroups/readers.h) — and node::Agent, the
// agent's real loop with its own EvictionState, victims first and eviction tracker, runs its
// cycle at `atMs` on a clock of its own (base/clock.h's ManualClock, started at an arbitrary
// origin), with a recording actuator: nothing is killed, and an order stays in flight until
// the pod's cgroup leaves the tree (the next cycle whose snapshot no longer runs the pod),
// when the actuator reports it emptied, as the cgroup killer would.
//
// What each figure of a snapshot's kubelet summary (stats[node]) becomes:
//
//   node.memory.workingSetBytes  WS   cg/memory.stat: anon WS, file 0, inactive_file 0 (the
//                                     v2 root's usage is anon + file, its working set that
//                                     less inactive_file)
//   node.memory.availableBytes   A    proc/meminfo MemTotal: (A + WS) / 1024 kB (the agent's
//                                     memory.available is MemTotal − WS, its capacity
//                                     MemTotal, as the kubelet's is A + WS). When A + WS is
//                                     not a whole number of KiB (a node whose working set
//                                     exceeds its memory), MemTotal is rounded up and WS with
//                                     it: A stays exact, the capacity is up to 1023 bytes
//                                     more, and a policy with a percentage of it for
//                                     memory.available (threshold or minimum reclaim) makes
//                                     the cycle one that cannot be laid out
//   systemContainers "pods"           cg/kubepods: memory.max PA + PWS; memory.current the
//     .memory.availableBytes     PA   larger of PWS and the pods' memory.current together;
//     .memory.workingSetBytes    PWS  memory.stat inactive_file the rest (its working set
//                                     is PWS: allocatableMemory.available is PA)
//   pods[].memory.workingSetBytes W   cg/kubepods[/burstable|/besteffort]/pod<UID> by the
//   pods[].memory.usageBytes     U    pod's QoS class: memory.current max(U, W), memory.stat
//                                     inactive_file max(U, W) − W; without W the pod's
//                                     directory has no memory files (a pod in the summary
//                                     without memory figures counts 0, as to the kubelet)
//   pods[].process_stats          –   pids.current (not judged: see below)
//   pods[].containers[]           CW  cg/…/pod<UID>/<ID>: memory.current CW, memory.stat anon
//     .memory.workingSetBytes         CW, inactive_file 0 — the container's cgroup, named by
//                                     the runtime ID the pod's status gives the container
//                                     (status.containerStatuses[].containerID; one the stepper
//                                     makes up from the UID and the name where the snapshot has
//                                     none, given to the agent with the pod). The agent reads
//                                     the victim's for the message's container part.
//
// A pod of the snapshot bound to the node and not Succeeded or Failed has a cgroup; one the
// summary does not list cannot be laid out (the agent reads every pod cgroup itself: a pod
// runs with figures or does not run). The filesystem and PID signals cannot be laid out as
// files (the agent reads them with statvfs(2) of real paths and sysinfo(2)): the agent is
// given no filesystem path and no pid_max, so those signals are unobserved.
//
// Output: one JSON line per cycle,
//   {"cycle":N,"atMs":T,"agentCycles":K,
//    "evict":[{"pod":…,"uid":…,"signal":…,"kind":"hard"|"soft","gracePeriodSeconds":…,
//              "message":…}],
//    "conditions":[…]}
// Exit 0; 3 when a cycle cannot be laid out (the reason on standard error, after the lines
// of the cycles before it); 2 on bad input.
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "base/clock.h"
#include "cgroups/hierarchy.h"
#include "cgroups/pods.h"
#include "node/actuator.h"
#include "node/agent.h"
#include "node/pod_source.h"
#include "policy/json_reader.h"
#include "policy/model.h"
#include "policy/policy.h"
#include "server/log.h"
#include "tests/support/cgroup_tree.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace nodewarden;
namespace fs = std::filesystem;

// The pods of each cycle, as a pod source hands them to the agent. Every set given stays
// alive until the end: the agent's view points into the current one until it rebuilds.
class CyclePodSource final : public node::PodSource {
 public:
  void set(node::PodSet pods) {
    sets_.push_back(std::make_unique<node::PodSet>(std::move(pods)));
    changed_ = true;
  }
  bool refresh() override { return std::exchange(changed_, false); }
  const node::PodSet& current() const override { return *sets_.back(); }
  std::vector<std::string> takeProblems() override { return {}; }
  std::string describe() const override { return "the judge's cycles"; }

 private:
  std::deque<std::unique_ptr<node::PodSet>> sets_;
  bool changed_ = false;
};

struct CannotLayOut {
  std::string reason;
};

void writeFile(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// A runtime's container ID (64 hex digits) made up from the pod's UID and the container's
// name, the same every cycle.
std::string madeUpRuntimeId(const std::string& uid, const std::string& name) {
  std::string id;
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a
  for (int part = 0; part < 4; ++part) {
    for (char c : uid + "/" + name + "#" + std::to_string(part)) {
      hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    }
    static constexpr char kHex[] = "0123456789abcdef";
    for (int shift = 60; shift >= 0; shift -= 4) id += kHex[(hash >> shift) & 0xf];
  }
  return id;
}

// Every container of the pod with a runtime ID (its status's, or one made up).
void giveRuntimeIds(policy::Pod& pod) {
  for (std::vector<policy::Container>* list : {&pod.containers, &pod.initContainers}) {
    for (policy::Container& container : *list) {
      if (container.runtimeId.empty())
        container.runtimeId = madeUpRuntimeId(pod.uid, container.name);
    }
  }
}

bool runsHere(const policy::Pod& pod, const std::string& node) {
  return pod.nodeName == node && pod.phase != "Succeeded" && pod.phase != "Failed";
}

const policy::PodStats* statsOf(const policy::Summary& summary, const policy::Pod& pod) {
  for (const policy::PodStats& s : summary.pods) {
    if (!s.uid.empty() && s.uid == pod.uid) return &s;
  }
  for (const policy::PodStats& s : summary.pods) {
    if (s.uid.empty() && s.ns == pod.ns && s.name == pod.name) return &s;
  }
  return nullptr;
}

std::string tierOf(const policy::Pod& pod) {
  switch (pod.qos) {
    case policy::QosClass::Guaranteed:
      return "";
    case policy::QosClass::Burstable:
      return "burstable";
    case policy::QosClass::BestEffort:
      return "besteffort";
  }
  return "besteffort";
}

// The files of one cycle. Pod directories of the previous cycle that no longer run are
// removed; their UIDs are returned.
class Layout {
 public:
  // `policy`: whether memory.available's capacity counts (a percentage of it).
  Layout(const fs::path& root, const policy::Policy& policy)
      : cg_(root / "cg"), proc_(root / "proc") {
    for (const policy::Threshold& t : policy.thresholds) {
      if (t.signal != policy::Signal::MemoryAvailable) continue;
      if (!t.value.quantity || (!t.minReclaim.quantity && t.minReclaim.percentage > 0)) {
        capacityMatters_ = true;
      }
    }
    writeFile(cg_ / "cgroup.controllers", "cpu memory pids\n");
    writeFile(cg_ / "kubepods/cgroup.controllers", "cpu memory pids\n");
    writeFile(cg_ / "kubepods/cgroup.subtree_control", "cpu memory pids\n");
    fs::create_directories(cg_ / "kubepods/burstable");
    fs::create_directories(cg_ / "kubepods/besteffort");
  }
  const fs::path& cg() const { return cg_; }
  const fs::path& proc() const { return proc_; }

  std::vector<std::string> write(const policy::Snapshot& snapshot, const std::string& node) {
    auto found = snapshot.stats.find(node);
    if (found == snapshot.stats.end()) throw CannotLayOut{"no stats for node " + node};
    const policy::Summary& summary = found->second;
    const policy::NodeStats& stats = summary.node;
    if (!stats.memoryAvailableBytes || !stats.memoryWorkingSetBytes) {
      throw CannotLayOut{"the node has no memory figures"};
    }
    const std::uint64_t available = *stats.memoryAvailableBytes;
    std::uint64_t workingSet = *stats.memoryWorkingSetBytes;
    // MemTotal is in KiB: a capacity between two is rounded up, the working set with it, so
    // that the available figure stays the kubelet's to the byte. Only a threshold or minimum
    // reclaim in percent of the capacity could tell; with one, the cycle is refused.
    const std::uint64_t total = (available + workingSet + 1023) / 1024 * 1024;
    if (total != available + workingSet && capacityMatters_) {
      throw CannotLayOut{"memory.available's capacity (available " + std::to_string(available) +
                         " + working set " + std::to_string(workingSet) +
                         " bytes) is not a whole number of KiB, which /proc/meminfo states, and "
                         "the policy has a percentage of it for memory.available"};
    }
    workingSet = total - available;
    writeFile(proc_ / "meminfo", "MemTotal: " + std::to_string(total / 1024) +
                                     " kB\nMemFree: " + std::to_string(available / 1024) +
                                     " kB\nMemAvailable: " + std::to_string(available / 1024) +
                                     " kB\nInactive(file): 0 kB\nSwapTotal: 0 kB\n");
    writeFile(cg_ / "memory.stat",
              "anon " + std::to_string(workingSet) + "\nfile 0\ninactive_file 0\n");

    // The pods that run here, with their figures.
    std::map<std::string, fs::path> now;
    std::uint64_t podsUsage = 0;
    for (const policy::Pod& pod : snapshot.pods) {
      if (!runsHere(pod, node)) continue;
      const policy::PodStats* figures = statsOf(summary, pod);
      if (figures == nullptr) {
        throw CannotLayOut{"pod " + pod.key +
                           " runs on the node but the summary does not list it (the agent reads "
                           "every pod cgroup: a pod has figures or does not run)"};
      }
      const fs::path dir = cg_ / "kubepods" / tierOf(pod) / ("pod" + pod.uid);
      auto moved = cgroups_.find(pod.uid);
      if (moved != cgroups_.end() && moved->second != dir) fs::remove_all(moved->second);
      now[pod.uid] = dir;
      testing::PodFiles files;
      files.cpuMicros = 1000;
      testing::TreeEntry entry = testing::podV2(pod.uid, files);
      std::vector<testing::TreeEntry> kept;
      for (testing::TreeEntry& file : entry.entries) {
        if (file.name.starts_with("memory.")) continue;
        if (file.name == "pids.current" && figures->processCount) {
          file.content = std::to_string(*figures->processCount) + "\n";
        }
        kept.push_back(std::move(file));
      }
      if (figures->memoryWorkingSetBytes) {
        const std::uint64_t ws = *figures->memoryWorkingSetBytes;
        const std::uint64_t usage = std::max(ws, figures->memoryUsageBytes.value_or(ws));
        podsUsage += usage;
        kept.push_back(testing::file("memory.current", std::to_string(usage) + "\n"));
        kept.push_back(testing::file(
            "memory.stat", "anon " + std::to_string(ws) + "\nfile " + std::to_string(usage - ws) +
                               "\ninactive_file " + std::to_string(usage - ws) + "\n"));
        kept.push_back(testing::file("memory.max", "max\n"));
        kept.push_back(testing::file("memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"));
      } else {
        for (const char* name : {"memory.current", "memory.stat"}) fs::remove(dir / name);
      }
      entry.entries = std::move(kept);
      testing::materialize(entry, dir.parent_path());
      writeContainers(dir, pod, *figures);
    }
    std::vector<std::string> gone;
    for (const auto& [uid, dir] : cgroups_) {
      if (now.contains(uid)) continue;
      fs::remove_all(dir);
      gone.push_back(uid);
    }
    cgroups_ = std::move(now);

    // kubepods: its working set is the pods' system container's.
    if (stats.podsMemoryAvailableBytes && stats.podsMemoryWorkingSetBytes) {
      const std::uint64_t pws = *stats.podsMemoryWorkingSetBytes;
      const std::uint64_t usage = std::max(pws, podsUsage);
      writeFile(cg_ / "kubepods/memory.max",
                std::to_string(*stats.podsMemoryAvailableBytes + pws) + "\n");
      writeFile(cg_ / "kubepods/memory.current", std::to_string(usage) + "\n");
      writeFile(cg_ / "kubepods/memory.stat", "anon " + std::to_string(pws) + "\nfile " +
                                                  std::to_string(usage - pws) + "\ninactive_file " +
                                                  std::to_string(usage - pws) + "\n");
    } else {
      // No allocatable figures: an unlimited kubepods, the signal unobserved.
      writeFile(cg_ / "kubepods/memory.max", "max\n");
      writeFile(cg_ / "kubepods/memory.current", std::to_string(podsUsage) + "\n");
      writeFile(cg_ / "kubepods/memory.stat",
                "anon " + std::to_string(podsUsage) + "\nfile 0\ninactive_file 0\n");
    }
    return gone;
  }

 private:
  // The container cgroups below the pod's: those of the summary's containers with a memory
  // figure, and no others (a container gone since the last cycle has no directory).
  static void writeContainers(const fs::path& podDir, const policy::Pod& spec,
                              const policy::PodStats& figures) {
    for (const fs::directory_entry& child : fs::directory_iterator(podDir)) {
      if (child.is_directory()) fs::remove_all(child.path());
    }
    policy::Pod pod = spec;
    giveRuntimeIds(pod);
    for (const policy::ContainerStats& container : figures.containers) {
      if (!container.memoryWorkingSetBytes) continue;
      const policy::Container* named = nullptr;
      for (const std::vector<policy::Container>* list : {&pod.containers, &pod.initContainers}) {
        for (const policy::Container& c : *list) {
          if (c.name == container.name) named = &c;
        }
      }
      if (named == nullptr) continue;
      const std::string ws = std::to_string(*container.memoryWorkingSetBytes);
      writeFile(podDir / named->runtimeId / "memory.current", ws + "\n");
      writeFile(podDir / named->runtimeId / "memory.stat",
                "anon " + ws + "\nfile 0\ninactive_file 0\n");
    }
  }

  fs::path cg_;
  fs::path proc_;
  bool capacityMatters_ = false;
  std::map<std::string, fs::path> cgroups_;  // by UID: the pod directories written
};

node::PodSet podSetOf(const policy::Snapshot& snapshot, const std::string& node) {
  node::PodSet set;
  for (const policy::Pod& pod : snapshot.pods) {
    if (pod.nodeName != node) continue;
    set.pods.push_back(pod);
    giveRuntimeIds(set.pods.back());
  }
  set.priorityClasses = snapshot.priorityClasses;
  set.podDisruptionBudgets = snapshot.podDisruptionBudgets;
  if (const policy::Node* n = snapshot.findNode(node)) set.node = *n;
  policy::resolvePods(set.pods, set.priorityClasses);
  return set;
}

int fail(int code, const std::string& message) {
  std::cerr << "agent_stepper: " << message << "\n";
  return code;
}

int run(const std::string& text) {
  policy::Diagnostics diagnostics;
  auto input = policy::parseJsonText(text, diagnostics);
  if (!input || !input->is_object())
    return fail(2, "expected a JSON object: " + diagnostics.joined());
  const policy::Json& steps = *input;
  if (!steps.contains("node") || !steps["node"].is_string()) {
    return fail(2, ".node: expected the node's name");
  }
  const std::string nodeName = steps["node"].get<std::string>();
  if (!steps.contains("policy") || !steps["policy"].is_object()) {
    return fail(2, ".policy: expected a policy object");
  }
  auto policy = policy::parsePolicyText(steps["policy"].dump(), diagnostics);
  if (!policy) return fail(2, ".policy: " + diagnostics.joined());
  if (!steps.contains("cycles") || !steps["cycles"].is_array() || steps["cycles"].empty()) {
    return fail(2, ".cycles: expected a non-empty array");
  }

  // Only errors: the agent logs every order (evict, Warn) and unreadable figures.
  server::configureLogging(server::LogFormat::Json, server::LogLevel::Error);
  testing::TempDir root("nodewarden-agent-stepper");
  Layout layout(root.path, *policy);
  ManualClock clock;
  const SteadyTime origin = clock.now();
  boost::asio::io_context io;
  auto* source = new CyclePodSource();
  std::unique_ptr<node::PodSource> ownedSource(source);
  node::RecordingActuator* actuator = nullptr;
  std::vector<node::EvictionOrder> orders;  // this cycle's
  std::unique_ptr<node::Agent> agent;

  std::optional<std::int64_t> lastAt;
  const policy::Json& cycles = steps["cycles"];
  for (std::size_t i = 0; i < cycles.size(); ++i) {
    const policy::Json& cycle = cycles[i];
    const std::string where = ".cycles[" + std::to_string(i) + "]";
    if (!cycle.is_object() || !cycle.contains("atMs") || !cycle["atMs"].is_number_integer() ||
        !cycle.contains("snapshot")) {
      return fail(2, where + ": expected {\"atMs\": integer, \"snapshot\": {…}}");
    }
    const std::int64_t at = cycle["atMs"].get<std::int64_t>();
    if (lastAt && at < *lastAt) return fail(2, where + ".atMs: before the previous cycle's");
    lastAt = at;
    policy::Diagnostics snapshotDiagnostics;
    auto snapshot = policy::parseSnapshot(cycle["snapshot"], snapshotDiagnostics);
    if (!snapshot) return fail(2, where + ".snapshot: " + snapshotDiagnostics.joined());

    clock.set(origin + std::chrono::milliseconds(at));
    std::vector<std::string> gone;
    try {
      gone = layout.write(*snapshot, nodeName);
    } catch (const CannotLayOut& e) {
      return fail(3, where + ": cannot be laid out: " + e.reason);
    }
    source->set(podSetOf(*snapshot, nodeName));
    orders.clear();
    std::uint64_t before = 0;
    if (!agent) {
      cgroups::DiscoverOptions discover;
      discover.root = layout.cg().string();
      discover.useLibcgroup = false;
      auto hierarchy = cgroups::discoverHierarchy(discover);
      if (!hierarchy) return fail(2, "the cgroup tree: " + hierarchy.error().message);
      node::AgentOptions options;
      options.nodeName = nodeName;
      options.scan.procRoot = layout.proc().string();
      options.scan.nodeFsPath = "";  // statvfs(2) of a real path: not laid out
      options.notifications = false;
      options.systemdNotify = false;
      // Cycles run when the judge says; the timer would run one more at the same time.
      options.intervalOverride = std::chrono::hours(24 * 365);
      agent = std::make_unique<node::Agent>(
          io, options, *policy, cgroups::PodCgroups(*hierarchy, "kubepods"), std::move(ownedSource),
          [&](boost::asio::io_context&, cgroups::PodCgroups&,
              const Clock&) -> std::unique_ptr<node::Actuator> {
            auto made = std::make_unique<node::RecordingActuator>(false);
            made->onOrder = [&](const node::EvictionOrder& order) { orders.push_back(order); };
            actuator = made.get();
            return made;
          },
          clock);
      if (auto started = agent->start(); !started) {
        return fail(2, "the agent did not start: " + started.error().message);
      }
    } else {
      before = agent->cycles();
      // An evicted pod's cgroup is gone: the actuator says it emptied (a cycle follows at
      // once, as after a real kill).
      for (const std::string& uid : gone) actuator->complete(uid);
      io.poll();
      io.restart();
      if (agent->cycles() == before) agent->cycle(node::Trigger::Timer);
    }
    io.poll();
    io.restart();

    policy::OrderedJson line;
    line["cycle"] = i;
    line["atMs"] = at;
    line["agentCycles"] = agent->cycles() - before;
    policy::OrderedJson evict = policy::OrderedJson::array();
    for (const node::EvictionOrder& order : orders) {
      policy::OrderedJson e;
      e["pod"] = order.pod;
      e["uid"] = order.uid;
      e["signal"] = std::string(policy::toString(order.threshold.signal));
      e["kind"] = order.threshold.hard ? "hard" : "soft";
      e["gracePeriodSeconds"] = order.gracePeriodSeconds;
      e["message"] = order.message;
      evict.push_back(std::move(e));
    }
    line["evict"] = std::move(evict);
    line["conditions"] = agent->lastDecision().conditions;
    std::cout << line.dump() << "\n" << std::flush;
  }
  agent->stop();
  io.poll();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) return fail(2, "usage: agent_stepper [STEPS.json]");
  std::string text;
  if (argc == 2 && std::string(argv[1]) != "-") {
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) return fail(2, std::string("cannot read ") + argv[1]);
    text.assign(std::istreambuf_iterator<char>(in), {});
  } else {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
  }
  return run(text);
}
