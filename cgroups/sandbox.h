// A kubelet-shaped cgroup tree that nodewarden creates itself: for the real-cgroup tests, the
// benchmarks and `nodewarden demo`. It makes `<name>/kubepods` (or `<name>/kubepods.slice`)
// in every hierarchy (v1 memory, cpuacct, pids, freezer and the cgroup2 mount), adds pod
// cgroups in the driver's naming, starts processes inside them, and removes everything it
// made — processes first — when destroyed, also when a test fails.
//
// It only ever touches directories it created. Not thread-safe.
#pragma once

#include <sys/types.h>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "cgroups/hierarchy.h"
#include "cgroups/pods.h"

namespace nodewarden::cgroups {

struct SandboxOptions {
  // The sandbox's top directory below each hierarchy root. Its name should start with a
  // prefix removeStaleSandboxes() knows, followed by "-<pid>" of the owner.
  std::string name;
  Driver driver = Driver::Cgroupfs;
  // A memory limit on the kubepods cgroup: the sandbox "node"'s allocatable memory.
  std::optional<std::uint64_t> memoryLimit;
  // Also create the pod cgroups in the cgroup2 mount (hybrid); false leaves pods v1-only,
  // as a kubelet on a pure v1 host would.
  bool useUnified = true;
  // Also create them in the v1 freezer hierarchy.
  bool useFreezer = true;
};

class Sandbox {
 public:
  static Result<Sandbox> create(const Hierarchy& hierarchy, SandboxOptions options);
  Sandbox(Sandbox&& other) noexcept;
  Sandbox& operator=(Sandbox&&) = delete;
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;
  ~Sandbox();

  const Hierarchy& hierarchy() const { return hierarchy_; }
  // The kubepods cgroup relative to each hierarchy root (give it to PodCgroups).
  const std::string& kubepods() const { return kubepods_; }
  const std::string& top() const { return options_.name; }

  // Creates a pod cgroup (and its QoS tier when needed); returns its relative path.
  Result<std::string> addPod(const std::string& uid, const std::string& qos);
  // Creates a child cgroup (a container) below a pod's relative path.
  Result<std::string> addChild(const std::string& parentRelative, const std::string& name);
  // Moves `pid` into the cgroup at `relative` in every hierarchy where it exists.
  Result<void> movePid(const std::string& relative, pid_t pid);
  // Writes a file of the memory hierarchy's cgroup at `relative` (e.g. a limit).
  Result<void> writeMemoryFile(const std::string& relative, const std::string& file,
                               const std::string& value);

  // Forks a child that runs `body` inside the cgroup at `relative` (moved there before
  // `body` starts) and then exits with body's return value. The child is killed and reaped
  // when the sandbox is destroyed if it is still running.
  Result<pid_t> spawn(const std::string& relative, const std::function<int()>& body);
  // Reaps children that exited; returns how many. `pid` = -1 for any of ours.
  int reap();

  // Removes one pod's cgroups (processes killed first). Returns false if something stayed.
  Result<void> removeCgroup(const std::string& relative);

  // Kills every process in the sandbox, removes every cgroup it created (deepest first),
  // and reaps its children. Bounded: about 5 s at most. Safe to call twice.
  Result<void> destroy();

 private:
  Sandbox() = default;
  std::vector<std::string> mounts() const;  // every hierarchy mount the sandbox uses
  Result<void> makeDir(const std::string& relative);
  Result<void> delegateControllers(const std::string& parent);

  Hierarchy hierarchy_;
  SandboxOptions options_;
  std::string kubepods_;
  std::vector<std::string> created_;  // relative paths, in creation order
  std::vector<pid_t> children_;
  bool destroyed_ = true;
};

// Removes sandboxes left by a process that died (a crashed test): directories directly
// below each hierarchy root named "<prefix>-<pid>-…" or "<prefix>-<pid>" whose pid is not
// alive. Returns how many were removed.
int removeStaleSandboxes(const Hierarchy& hierarchy, const std::string& prefix);

}  // namespace nodewarden::cgroups
