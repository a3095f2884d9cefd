// Killing a pod's processes through its cgroups.
//
// Safety rules, checked on every call: the pod must be one PodCgroups found below the
// kubepods cgroup it manages (its path inside the layout, its UID in its name); the
// agent's own process, and PID 1, are never signalled; a pod whose cgroups hold the agent
// itself is refused outright (cgroup.kill would take the agent with it).
//
// Graceful termination is the caller's: signalPod(SIGTERM), wait the grace period (the
// agent uses a timer, never a sleep), then killRound() until processes() is empty (or
// killPod(), which waits). Each call lists the pod's processes once: one recursive read of
// cgroup.procs, which is also where the agent looks for itself. Not thread-safe.
#pragma once

#include <sys/types.h>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "cgroups/pods.h"

namespace nodewarden::cgroups {

struct SignalReport {
  std::size_t signalled = 0;  // processes the signal was sent to
  std::size_t skipped = 0;    // the agent itself or PID 1 (never signalled)
};

// How a SIGKILL round reached the pod's processes.
enum class KillMethod : std::uint8_t {
  CgroupKill,      // cgroup.kill (cgroup v2, Linux 5.14+): the kernel kills the subtree, forks too
  FreezerSigkill,  // v1: freeze the pod, SIGKILL every PID listed, thaw
  Sigkill,         // SIGKILL every PID listed
};
// "cgroup.kill", "freezer+SIGKILL", "SIGKILL": the log's words.
std::string_view toString(KillMethod method);

struct KillReport {
  // The last round's method; nullopt when killPod() found nothing to kill.
  std::optional<KillMethod> method;
  int rounds = 0;
  std::size_t signalled = 0;
  std::size_t remaining = 0;  // processes still there when the deadline passed (0 = success)
  std::chrono::microseconds elapsed{0};
};

class PodKiller {
 public:
  // `pods` is the index whose layout bounds what may be killed; it must outlive the killer.
  explicit PodKiller(const PodCgroups& pods) : pods_(pods) {}

  // Refuses a pod outside the managed layout (no I/O). Whether the pod holds this process is
  // seen in the listing each signalling call below makes, and refused there.
  Result<void> check(const PodCgroup& pod) const;

  // Sends `signal` once to every process of the pod (listed once, in the memory hierarchy,
  // which holds every process of a pod). Fails, naming the call and its errno, when the
  // kernel refuses it for any process (EPERM: no CAP_KILL for another user's process, or an
  // LSM's denial): the pod could never empty.
  Result<SignalReport> signalPod(const PodCgroup& pod, int signal) const;

  // SIGKILLs the pod until no process is left or `timeout` passes: cgroup.kill where the
  // kernel has it (v2, 5.14+) and the pod's processes are in the cgroup2 tree; otherwise,
  // with the v1 freezer, freeze → SIGKILL every PID → thaw; otherwise SIGKILL in rounds.
  // Blocks at most `timeout` (it waits for the processes to exit).
  Result<KillReport> killPod(const PodCgroup& pod, std::chrono::milliseconds timeout) const;

  // One SIGKILL round that does not wait: cgroup.kill when the kernel has it and the pod's
  // processes are in the cgroup2 tree (always on v2; on a hybrid host when its cgroup.events
  // says "populated 1"), else (freeze →) SIGKILL every PID listed (→ thaw); a process forked
  // between the listing and the freeze is left to the next round. Call again while
  // processes() is not empty; the agent does so from a timer. Fails like signalPod() when
  // a SIGKILL is refused (after thawing). `remaining` is not filled (that is a second read).
  Result<KillReport> killRound(const PodCgroup& pod) const;

  // The PIDs currently in the pod (the memory hierarchy, the authoritative one for pods).
  Result<std::vector<pid_t>> processes(const PodCgroup& pod) const;
  // Whether any process is left in the pod: cgroup.events "populated" where the pod has a
  // cgroup2 directory of its memory (one small read, no walk); else processes() is empty.
  Result<bool> populated(const PodCgroup& pod) const;

 private:
  const PodCgroups& pods_;
};

}  // namespace nodewarden::cgroups
