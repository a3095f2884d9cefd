// Readers: open (once), pread, and hand the text to a pure parser. The scan turns a node's
// cgroups into the same Summary model that policy/ reads from kubelet stats.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "cgroups/parsers.h"
#include "cgroups/pods.h"
#include "policy/model.h"

namespace nodewarden::cgroups {

using policy::FsStats;
using policy::NodeStats;
using policy::PodStats;
using policy::Summary;

// memory.usage_in_bytes / memory.current: the cheapest figure (one pread).
Result<std::uint64_t> readMemoryUsage(const CgroupDir& dir, std::string& buffer);

struct MemoryReading {
  std::uint64_t usage = 0;
  std::uint64_t inactiveFile = 0;
  std::uint64_t workingSet = 0;        // usage − inactive_file, floored at 0
  std::optional<std::uint64_t> limit;  // nullopt: unlimited
};
// Swap in use by the cgroup and its descendants: v2 memory.swap.current; v1
// memory.memsw.usage_in_bytes − memory.usage_in_bytes. nullopt where the kernel keeps no
// swap accounting (no such file: swap off at boot, or v1 without swapaccount=1).
Result<std::optional<std::uint64_t>> readSwapUsage(const CgroupDir& dir, std::string& buffer);

// Usage, memory.stat and the limit.
Result<MemoryReading> readMemory(const CgroupDir& dir, std::string& buffer);
// Usage and memory.stat only (limit left empty): what a pod's scan needs, one pread less.
Result<MemoryReading> readWorkingSet(const CgroupDir& dir, std::string& buffer);

// Cumulative CPU time in nanoseconds: cpuacct.usage (v1) or cpu.stat usage_usec (v2).
Result<std::uint64_t> readCpuNanos(const CgroupDir& dir, std::string& buffer);

// Processes in the cgroup and its descendants: pids.current when the pids controller is
// there, otherwise the PIDs in cgroup.procs of the whole subtree.
Result<std::uint64_t> readProcessCount(const PodCgroup& pod, std::string& buffer);

// PSI of a cgroup2 directory ("memory", "cpu" or "io").
Result<Pressure> readPressure(const CgroupDir& dir, const std::string& resource);
// System-wide PSI: <procRoot>/pressure/<resource>.
Result<Pressure> readSystemPressure(const std::string& procRoot, const std::string& resource);

Result<MemoryEvents> readMemoryEvents(const CgroupDir& dir, std::string& buffer);  // v2
Result<OomControl> readOomControl(const CgroupDir& dir, std::string& buffer);      // v1
// OOM kills in a memory cgroup: v2 memory.events oom_kill, v1 memory.oom_control oom_kill.
Result<std::uint64_t> readOomKills(const CgroupDir& dir, std::string& buffer);

// Every PID in `dir`'s cgroup.procs and in its descendants' (depth-first, bounded depth).
// Vanishing children are skipped.
Result<std::vector<pid_t>> readProcsRecursive(const CgroupDir& dir);
// Whether any process is left in the pod: its cgroup.events "populated" where the pod's
// memory directory is cgroup v2 (one small read, no walk), else its processes listed. false
// when the cgroup is gone.
Result<bool> hasProcesses(const PodCgroup& pod);

// The memory working set of the container cgroups directly below a pod's memory cgroup whose
// names carry one of `runtimeIds` (containerIdFromCgroupName: "<id>",
// "cri-containerd-<id>.scope", "crio-<id>.scope", ...; others, the sandbox's among them, are
// not opened). Read once for a message, not on every scan: the directories are opened and
// closed here. A child vanishing meanwhile is skipped.
struct ContainerMemory {
  std::string runtimeId;
  std::uint64_t workingSet = 0;
};
Result<std::vector<ContainerMemory>> readContainerWorkingSets(
    const CgroupDir& pod, const std::vector<std::string_view>& runtimeIds, std::string& buffer);

// Node figures.
Result<MemInfo> readMemInfo(const std::string& procRoot);
Result<std::uint64_t> readPidMax(const std::string& procRoot);
// Processes and threads on the system (sysinfo(2).procs, as the kubelet's pidlimit reads).
Result<std::uint64_t> readRunningProcesses();
// statvfs of a path: bytes and inodes available to unprivileged users, and capacity.
Result<FsStats> readFilesystem(const std::string& path);

struct ScanOptions {
  std::string procRoot = "/proc";
  // The filesystem of the kubelet's root dir (nodefs) and the container runtime's (imagefs);
  // empty: not read.
  std::string nodeFsPath = "/var/lib/kubelet";
  std::string imageFsPath;
  // Read every pod cgroup (working set, CPU, processes). false reads the node's figures only.
  bool podFigures = true;
  // With pod figures, also each pod's swap usage (readSwapUsage): one more file a pod, worth
  // reading only where swap is on (NodeSwap).
  bool podSwap = false;
};

// The node's own figures, read every cycle whatever the number of pods (a dozen reads): the
// signals' inputs, and the raw memory readings behind them, which the detectors use to place
// their usage lines (capacity − threshold + inactive_file) without reading them again.
struct NodeReading {
  NodeStats stats;
  // The memory hierarchy's root as cgroup v1 reports it (memory.usage_in_bytes and
  // memory.stat); nullopt on v2, whose root has no usage file (the stats come from its
  // memory.stat there), and when unreadable.
  std::optional<MemoryReading> root;
  std::optional<MemoryReading> kubepods;  // usage, memory.stat, limit; nullopt when unreadable
  std::vector<Error> errors;
};
NodeReading readNodeFigures(const PodCgroups& pods, const ScanOptions& options);

// One pod's figures, as a scan reads them: working set (usage and memory.stat), swap when
// asked, the CPU rate since the pod's previous reading (kept in PodCgroup), the process count.
struct PodReading {
  PodStats stats;  // uid and figures; names are the caller's
  // memory.current / memory.usage_in_bytes behind the working set: never below it, so an
  // upper bound on what the pod's working set was when read.
  std::optional<std::uint64_t> memoryUsage;
  bool gone = false;          // the cgroup vanished while read (a normal event)
  std::vector<Error> errors;  // figures that could not be read, the cgroup still there
};
PodReading readPodFigures(PodCgroup& pod, const ScanOptions& options,
                          std::chrono::steady_clock::time_point now, std::string& buffer);

struct ScanResult {
  Summary summary;                    // pods by UID (PodStats::uid; names are filled by the caller)
  NodeReading node;                   // the raw node readings (summary.node holds its stats)
  std::vector<Error> errors;          // figures that could not be read (never a vanished cgroup)
  std::vector<std::string> vanished;  // UIDs of pod cgroups that disappeared while read
  std::chrono::nanoseconds duration{0};
};

// Reads the node and, with options.podFigures, every pod in `pods`. CPU usage is a rate over
// the time since the previous reading of the same pod (absent on a pod's first), kept in
// PodCgroup. `now` is the time of the scan (the caller's clock, so tests can step it).
ScanResult scanNode(PodCgroups& pods, const ScanOptions& options,
                    std::chrono::steady_clock::time_point now);

}  // namespace nodewarden::cgroups
