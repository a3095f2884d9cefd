#include "cgroups/kill.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <thread>
#include <unistd.h>

#include "cgroups/readers.h"

namespace nodewarden::cgroups {
namespace {

bool pathInLayout(const CgroupDir& dir, const std::string& mount, const std::string& relative) {
  return dir.valid() && dir.path() == mount + "/" + relative;
}

bool neverSignal(pid_t pid) { return pid == ::getpid() || pid <= 1; }

// Sends `signal` to each PID; ESRCH (already gone) is normal.
SignalReport signalAll(const std::vector<pid_t>& pids, int signal) {
  SignalReport report;
  for (pid_t pid : pids) {
    if (neverSignal(pid)) {
      ++report.skipped;
      continue;
    }
    if (::kill(pid, signal) == 0) ++report.signalled;
  }
  return report;
}

std::vector<pid_t> unique(std::vector<pid_t> pids) {
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

}  // namespace

Result<bool> PodKiller::check(const PodCgroup& pod) const {
  const std::string& kubepods = pods_.kubepods();
  const Hierarchy& h = pods_.hierarchy();
  const std::string where = "refusing to kill pod " + pod.uid + " (" + pod.relativePath + ")";
  if (!pod.relativePath.starts_with(kubepods + "/") ||
      pod.relativePath.find("/../") != std::string::npos || pod.relativePath.ends_with("/..")) {
    return Error{where + ": not below the managed kubepods cgroup " + kubepods};
  }
  const std::size_t slash = pod.relativePath.rfind('/');
  const std::string name = pod.relativePath.substr(slash + 1);
  auto parsed = parsePodCgroupName(name, pods_.driver(), pod.qos);
  if (!parsed || parsed->uid != pod.uid) {
    return Error{where + ": the directory name is not the pod cgroup of UID " + pod.uid};
  }
  if (pods_.find(pod.uid) != &pod) {
    return Error{where + ": not a pod of the managed index"};
  }
  if (!pathInLayout(pod.memory, h.memory, pod.relativePath) ||
      (pod.unified && !pathInLayout(*pod.unified, h.unified, pod.relativePath)) ||
      (pod.freezer && !pathInLayout(*pod.freezer, h.freezer, pod.relativePath))) {
    return Error{where + ": a cgroup directory is outside the managed hierarchies"};
  }
  for (const CgroupDir* dir : {&pod.memory, pod.unified ? &*pod.unified : nullptr}) {
    if (dir == nullptr) continue;
    auto pids = readProcsRecursive(*dir);
    if (!pids) return pids.error();
    if (std::find(pids->begin(), pids->end(), ::getpid()) != pids->end()) {
      return Error{where + ": it holds nodewarden's own process " + std::to_string(::getpid())};
    }
  }
  return true;
}

Result<std::vector<pid_t>> PodKiller::processes(const PodCgroup& pod) const {
  auto pids = readProcsRecursive(pod.memory);
  if (!pids) return pids.error();
  return unique(std::move(pids).value());
}

Result<SignalReport> PodKiller::signalPod(const PodCgroup& pod, int signal) const {
  auto allowed = check(pod);
  if (!allowed) return allowed.error();
  std::vector<pid_t> pids;
  for (const CgroupDir* dir : {&pod.memory, pod.unified ? &*pod.unified : nullptr}) {
    if (dir == nullptr) continue;
    auto found = readProcsRecursive(*dir);
    if (!found) {
      if (isGone(found.error())) continue;
      return found.error();
    }
    pids.insert(pids.end(), found->begin(), found->end());
  }
  return signalAll(unique(std::move(pids)), signal);
}

Result<KillReport> PodKiller::killPod(const PodCgroup& pod,
                                      std::chrono::milliseconds timeout) const {
  auto allowed = check(pod);
  if (!allowed) return allowed.error();
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + timeout;
  KillReport report;

  // cgroup.kill handles forks racing with the kill; it only helps when the pod's processes
  // are in the cgroup2 tree (always on v2; on hybrid only if the runtime put them there).
  bool usedCgroupKill = false;
  if (pod.unified) {
    auto inUnified = readProcsRecursive(*pod.unified);
    if (inUnified && !inUnified->empty()) {
      if (auto written = writeFileAt(pod.unified->fd(), "cgroup.kill", "1")) {
        usedCgroupKill = true;
        report.method = "cgroup.kill";
        report.signalled += inUnified->size();
      } else if (written.error().sysErrno != ENOENT) {
        return written.error().withContext("killing pod " + pod.uid + " via " +
                                           pod.unified->path());
      }
    }
  }
  const bool freeze = !usedCgroupKill && pod.freezer.has_value();
  if (!usedCgroupKill) report.method = freeze ? "freezer+SIGKILL" : "SIGKILL";

  // Rounds: each signals whatever is left, then gives the processes a moment to exit.
  for (;;) {
    auto left = processes(pod);
    if (!left) {
      if (isGone(left.error())) {
        report.remaining = 0;
        break;
      }
      return left.error();
    }
    std::erase_if(left.value(), neverSignal);
    report.remaining = left->size();
    if (left->empty() || std::chrono::steady_clock::now() >= deadline) break;
    ++report.rounds;
    if (!usedCgroupKill || report.rounds > 1) {
      // Frozen processes cannot fork between the listing and the signal.
      if (freeze) (void)writeFileAt(pod.freezer->fd(), "freezer.state", "FROZEN");
      if (freeze) {
        // Re-list inside the freeze: anything forked before it is now visible.
        if (auto frozen = processes(pod)) left = std::move(frozen);
      }
      report.signalled += signalAll(*left, SIGKILL).signalled;
      if (freeze) (void)writeFileAt(pod.freezer->fd(), "freezer.state", "THAWED");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  report.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - started);
  return report;
}

}  // namespace nodewarden::cgroups
