// The kubelet's pod cgroup layout and the PodCgroups index (pod UID → its cgroups).
//
// Layout (the kubelet's pkg/kubelet/cm; docs/reference.md §1.3):
//   cgroupfs driver: <kubepods>/pod<uid>, <kubepods>/burstable/pod<uid>,
//                    <kubepods>/besteffort/pod<uid>
//   systemd driver:  kubepods.slice/kubepods-pod<uid_>.slice,
//                    kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice,
//                    … with '-' in the UID written as '_'.
// Container cgroups of containerd, CRI-O and Docker sit below a pod's cgroup; pod figures
// are read at the pod level (hierarchical counters), so they only matter for killing and
// reporting.
//
// Threading: PodCgroups is not thread-safe; the agent uses it from its one event-loop thread.
#pragma once

#include <sys/types.h>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "cgroups/fs.h"
#include "cgroups/hierarchy.h"

namespace nodewarden::cgroups {

enum class Driver { Cgroupfs, Systemd };

// What a pod cgroup's directory name says.
struct PodCgroupName {
  std::string uid;  // with dashes, as in metadata.uid
  std::string qos;  // "guaranteed", "burstable" or "besteffort"
};

// Recognises a pod directory name: "pod<uid>" (cgroupfs) or
// "kubepods[-<qos>]-pod<uid_>.slice" (systemd). `qosFromParent` is the tier of the directory
// it was found in (cgroupfs names do not carry it). Returns nullopt for anything else.
std::optional<PodCgroupName> parsePodCgroupName(std::string_view name, Driver driver,
                                                std::string_view qosFromParent);
// Recognises a QoS tier directory: "burstable"/"besteffort" or
// "kubepods-burstable.slice"/"kubepods-besteffort.slice". Returns the tier.
std::optional<std::string> parseQosDirName(std::string_view name, Driver driver);
// The pod's cgroup path relative to a hierarchy root, the inverse of the two above. Used by
// tests and the demo to build a kubelet-shaped tree. `qos` is "guaranteed", "burstable" or
// "besteffort"; `kubepods` is e.g. "kubepods" or "kubepods.slice" (or a nested path).
std::string podCgroupPath(std::string_view kubepods, Driver driver, std::string_view qos,
                          std::string_view uid);
// The container ID in a runtime's cgroup name: "cri-containerd-<id>.scope", "crio-<id>.scope",
// "crio-<id>", "docker-<id>.scope", or a bare 64-hex "<id>". nullopt for conmon and others.
std::optional<std::string> containerIdFromCgroupName(std::string_view name);

// The driver a kubepods path implies: a last component ending in ".slice" means systemd.
Driver driverForKubepods(std::string_view kubepods);

// One cgroup directory in one hierarchy, held open so a cgroup recreated under the same name
// is never misread (reads on a removed cgroup fail with ENODEV/ENOENT). Control files read
// on every scan keep their own descriptors (pread at offset 0 regenerates the content).
class CgroupDir {
 public:
  // The files read often enough to keep open.
  enum class File {
    MemoryUsage,  // memory.usage_in_bytes (v1) / memory.current (v2)
    MemoryStat,
    MemoryLimit,  // memory.limit_in_bytes (v1) / memory.max (v2)
    CpuUsage,     // cpuacct.usage (v1) / cpu.stat (v2)
    PidsCurrent,
    MemoryPressure,  // v2 only
    MemoryEvents,    // v2 only
    OomControl,      // v1 only
    CgroupEvents,    // v2 only: cgroup.events ("populated", "frozen")
    Count
  };
  static const char* fileName(File file, Version version);

  CgroupDir() = default;
  // Opens `path` (absolute). The version says which file names apply.
  static Result<CgroupDir> open(const std::string& path, Version version);
  // Opens `root`/`below`, keeping both strings shared rather than a path of its own: a pod's
  // directories in five hierarchies share one `below` and each hierarchy's directories one
  // `root` (a node of 1,000 pods holds 5,000 of them).
  static Result<CgroupDir> open(std::shared_ptr<const std::string> root,
                                std::shared_ptr<const std::string> below, Version version);

  bool valid() const { return dir_.valid(); }
  int fd() const { return dir_.get(); }
  Version version() const { return version_; }
  std::string path() const { return below_ ? *root_ + "/" + *below_ : root_ ? *root_ : ""; }
  // The part below the hierarchy's root when opened with one (null otherwise).
  const std::shared_ptr<const std::string>& below() const { return below_; }
  ino_t inode() const { return inode_; }

  // Reads `file` into `buffer` (opening it on first use). The returned view points into
  // `buffer`. Errors name the file and the cgroup ("memory.stat of /sys/...: No such device").
  Result<std::string_view> read(File file, std::string& buffer) const;
  // Reads any control file by name (opened and closed each time).
  Result<std::string> readOnce(const std::string& name) const;
  // Drops the cached file descriptors (keeps the directory).
  void closeFiles() const;

 private:
  UniqueFd dir_;
  Version version_ = Version::V1;
  std::shared_ptr<const std::string> root_;  // the whole path when `below_` is null
  std::shared_ptr<const std::string> below_;
  ino_t inode_ = 0;
  mutable UniqueFd files_[static_cast<int>(File::Count)];
};

// A pod's cgroups, one per hierarchy the pod exists in.
struct PodCgroup {
  std::string uid;
  std::string qos;
  std::string relativePath;       // below each hierarchy root, e.g. "kubepods/burstable/pod<uid>"
  CgroupDir memory;               // always present
  std::optional<CgroupDir> cpu;   // cpuacct (v1) or the v2 directory
  std::optional<CgroupDir> pids;  // pids controller (v1 or v2)
  std::optional<CgroupDir> unified;  // the cgroup2 directory: PSI, cgroup.kill, memory.events
  std::optional<CgroupDir> freezer;  // v1 freezer
  // CPU rate state: the previous cumulative reading and when it was taken.
  std::optional<std::uint64_t> lastCpuNanos;
  std::chrono::steady_clock::time_point lastCpuAt{};
};

// What a refresh changed.
struct RefreshResult {
  std::vector<std::string> added;    // UIDs
  std::vector<std::string> removed;  // UIDs (vanished or recreated)
  std::vector<Error> errors;         // problems that did not stop the refresh
};

// The index of pod cgroups below the kubepods cgroup, refreshed incrementally.
class PodCgroups {
 public:
  // `kubepods` is relative to each hierarchy's root ("kubepods", "kubepods.slice", or a
  // nested path such as "nodewarden-demo/kubepods"). Use findKubepods() for the default.
  PodCgroups(Hierarchy hierarchy, std::string kubepods);

  // The contract's default: "kubepods.slice" or "kubepods", whichever exists in the memory
  // hierarchy; `override` (from --kubepods-cgroup) must exist when given.
  static Result<std::string> findKubepods(const Hierarchy& hierarchy,
                                          const std::optional<std::string>& override);

  // Lists the kubepods tree and opens new pod cgroups; drops vanished ones and re-opens
  // those recreated under the same name (different inode). A cgroup vanishing mid-refresh
  // is normal and not an error. Only an unreadable kubepods cgroup is an error.
  Result<RefreshResult> refresh();
  // Whether a pod cgroup may have appeared, gone or been recreated since the last refresh()
  // or update(): an inotify watch on the kubepods directory and its QoS tiers (the kubelet and
  // the runtimes make and remove pod cgroups with mkdir and rmdir there), read without
  // blocking — one read(2) when nothing happened, however many pods there are. True before
  // the first refresh and whenever the watch could not be set up: callers then refresh.
  bool mayHaveChanged();
  // Brings the index up to date from what the watch saw: each pod directory made or removed
  // below kubepods or a tier is opened or dropped, so the cost is that of the changes, not
  // of the pods. A tier made or removed, events lost (the queue overflowed) or no watch at
  // all: a full refresh() instead. Also opens the hierarchies a new pod lacked when it was
  // first seen (a runtime makes a pod's directories one hierarchy after the other).
  Result<RefreshResult> update();
  // The watch's descriptor (readable when something changed), for an event loop to wait on;
  // -1 without a watch. A refresh() may replace it (kubepods recreated): ask again after one.
  int changeFd() const { return changes_.get(); }

  const Hierarchy& hierarchy() const { return hierarchy_; }
  const std::string& kubepods() const { return kubepods_; }
  Driver driver() const { return driver_; }
  // The kubepods cgroup itself (memory hierarchy), opened by the first refresh.
  const CgroupDir& kubepodsMemory() const { return kubepodsMemory_; }
  // The memory hierarchy's root cgroup (the node's figures on v1), opened once with its
  // files kept open like a pod's. Invalid if it cannot be opened.
  const CgroupDir& rootMemory() const;
  const std::optional<CgroupDir>& kubepodsUnified() const { return kubepodsUnified_; }

  std::size_t size() const { return pods_.size(); }
  PodCgroup* find(std::string_view uid);
  const PodCgroup* find(std::string_view uid) const;
  // All pods, by UID.
  const std::map<std::string, std::unique_ptr<PodCgroup>, std::less<>>& pods() const {
    return pods_;
  }
  std::map<std::string, std::unique_ptr<PodCgroup>, std::less<>>& pods() { return pods_; }

 private:
  Result<std::unique_ptr<PodCgroup>> openPod(const PodCgroupName& name,
                                             const std::string& relativePath) const;
  // Reads every pending inotify event into pending_; true when there was one.
  bool readChanges();
  void watchDirectory(const std::string& path, const std::string& tier);
  // Opens the pod directory `child` of `parent` (relative to the memory root) and indexes it;
  // nullopt when it is not a pod's or has gone already.
  void openChild(const std::string& parent, const std::string& child, const std::string& qos,
                 RefreshResult& result);
  // Opens the optional hierarchies a pod lacked.
  void complete(PodCgroup& pod) const;
  // The optional hierarchies (cpuacct, pids, unified, freezer) in which the kubepods cgroup
  // exists, as a bit each (kOptional…): a pod is looked for only there.
  unsigned optionalHierarchiesWithKubepods() const;
  // Whether `pod` lacks one of the optional hierarchies the kubepods cgroup has.
  bool lacksHierarchy(const PodCgroup& pod) const;

  Hierarchy hierarchy_;
  // hierarchy_'s mount points, shared by the pod directories opened below them.
  std::shared_ptr<const std::string> memoryRoot_, cpuacctRoot_, pidsRoot_, unifiedRoot_,
      freezerRoot_;
  std::string kubepods_;
  Driver driver_;
  CgroupDir kubepodsMemory_;
  mutable CgroupDir rootMemory_;
  std::optional<CgroupDir> kubepodsUnified_;
  std::map<std::string, std::unique_ptr<PodCgroup>, std::less<>> pods_;
  UniqueFd changes_;  // inotify on kubepods and its tiers; invalid: unknown, refresh
  std::map<int, std::string> watched_;  // watch descriptor → tier directory ("": kubepods)
  std::vector<char> pending_;           // events read, not applied yet
  bool overflowed_ = false;             // events were lost: a full refresh is needed
  // Pods opened without some optional hierarchy, and the update()s left to look for it.
  std::map<std::string, int, std::less<>> incomplete_;
  // optionalHierarchiesWithKubepods() as of the last refresh (all until then).
  unsigned withKubepods_ = ~0u;
};

// Raises RLIMIT_NOFILE towards `wanted` (soft and, with CAP_SYS_RESOURCE, hard; capped by
// /proc/sys/fs/nr_open). Returns the soft limit reached, which may be LOWER than `wanted`
// (no CAP_SYS_RESOURCE and a low hard limit): callers compare. A pod cgroup holds up to 10
// descriptors (a directory and the files read every cycle, per hierarchy).
Result<std::uint64_t> raiseOpenFileLimit(std::uint64_t wanted);

// Grows this process's descriptor table now, so that it holds at least `slots` descriptors
// (capped by RLIMIT_NOFILE). The kernel grows the table, doubling it, when an open finds no
// free slot; in a process with more than one thread it first waits for an RCU grace period
// (expand_fdtable calls synchronize_rcu), milliseconds on a busy node. A kill opens a few
// descriptors (the pod's cgroup.procs listing, cgroup.kill): reserved beforehand, those opens
// never wait. Returns the table's size as far as this call knows it (≥ `slots` when capped
// by nothing).
Result<std::uint64_t> reserveDescriptorTable(std::uint64_t slots);

}  // namespace nodewarden::cgroups
