// Finding the cgroup hierarchies below an injectable root (docs/conventions.md §3).
//
// On a real root (/sys/fs/cgroup or a host mount of it, e.g. /host/sys/fs/cgroup) the mounts
// come from libcgroup and are cross-checked against /proc/self/mountinfo; disagreements are
// reported in `notes()`. A root that is a plain directory tree (the test fixtures) is
// recognised by its files: `cgroup.controllers` at the top means cgroup v2, per-controller
// subdirectories (`memory/`, `cpu,cpuacct/`, `pids/`, …) mean v1, and `unified/` next to them
// means hybrid.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "cgroups/parsers.h"

namespace nodewarden::cgroups {

enum class Mode {
  Legacy,   // v1 controllers only
  Hybrid,   // v1 controllers plus a cgroup2 mount (usually unified/) without them
  Unified,  // cgroup v2 only
};
const char* toString(Mode mode);

// Where each controller's hierarchy is mounted (absolute paths), empty when absent.
struct Hierarchy {
  Mode mode = Mode::Legacy;
  std::string root;     // the injected root, as given
  std::string memory;   // v1 memory mount, or the v2 mount when memory is on v2
  std::string cpuacct;  // v1 cpuacct mount, or the v2 mount (cpu.stat)
  std::string pids;     // v1 pids mount, or the v2 mount
  std::string freezer;  // v1 freezer mount; v2 has cgroup.freeze in the unified mount
  std::string unified;  // the cgroup2 mount (PSI, cgroup.kill, memory.events), if any
  Version memoryVersion = Version::V1;
  Version cpuVersion = Version::V1;
  Version pidsVersion = Version::V1;
  // Controllers the cgroup2 mount offers (its cgroup.controllers), e.g. "memory", "cpu".
  std::vector<std::string> unifiedControllers;
  // How the hierarchies were found and anything odd (libcgroup and mountinfo disagreeing).
  std::vector<std::string> notes;
};

struct DiscoverOptions {
  std::string root = "/sys/fs/cgroup";
  std::string mountInfoPath = "/proc/self/mountinfo";
  // Ask libcgroup for the mount points (only meaningful for the host's real mounts).
  bool useLibcgroup = true;
};

// Finds the hierarchies below `options.root`. An error when nothing usable is there: no
// memory hierarchy in any version.
Result<Hierarchy> discoverHierarchy(const DiscoverOptions& options);

// Pure part of discovery: the mounts (from mountinfo or libcgroup) below `root` turned into a
// Hierarchy. `unifiedControllers` is the content of the cgroup2 mount's cgroup.controllers.
Result<Hierarchy> hierarchyFromMounts(const std::string& root,
                                      const std::vector<CgroupMount>& mounts,
                                      std::string_view unifiedControllers);

}  // namespace nodewarden::cgroups
