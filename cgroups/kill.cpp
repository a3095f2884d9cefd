#include "cgroups/kill.h"

#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <optional>
#include <thread>

#include "cgroups/readers.h"

namespace nodewarden::cgroups {
namespace {

bool pathInLayout(const CgroupDir& dir, const std::string& mount, const std::string& relative) {
  return dir.valid() && dir.path() == mount + "/" + relative;
}

bool neverSignal(pid_t pid) {
  return pid == ::getpid() || pid <= 1;
}

// What signalAll() did, with the first refusal: kill(2) failing other than with
// ESRCH.
struct Sent {
  SignalReport report;
  std::size_t refused = 0;
  int refusedErrno = 0;
  pid_t refusedPid = 0;
};

// Sends `signal` to each PID; ESRCH (already gone) is normal.
Sent signalAll(const std::vector<pid_t>& pids, int signal) {
  Sent sent;
  for (pid_t pid : pids) {
    if (neverSignal(pid)) {
      ++sent.report.skipped;
      continue;
    }
    if (::kill(pid, signal) == 0) {
      ++sent.report.signalled;
      continue;
    }
    const int saved = errno;
    if (saved == ESRCH) continue;
    if (sent.refused++ == 0) {
      sent.refusedErrno = saved;
      sent.refusedPid = pid;
    }
  }
  return sent;
}

// A process the kernel would not signal keeps the pod from ever emptying: an
// error naming the call and its errno, at once, rather than rounds that cannot
// succeed. EPERM is a missing CAP_KILL (another user's process) or an LSM's
// denial.
std::optional<Error> refusal(const Sent& sent, int signal, const std::string& uid) {
  if (sent.refused == 0) return std::nullopt;
  const char* name = signal == SIGKILL ? "SIGKILL" : signal == SIGTERM ? "SIGTERM" : "a signal";
  Error error = errnoError(
      "signalling pod " + uid + ": kill(" + std::to_string(sent.refusedPid) + ", " + name + ")",
      sent.refusedErrno);
  if (sent.refusedErrno == EPERM) {
    error.message +=
        " (EPERM: nodewarden lacks CAP_KILL for another user's "
        "process, or an LSM denies it)";
  }
  if (sent.refused > 1) error.message += "; " + std::to_string(sent.refused) + " processes refused";
  return error;
}

std::vector<pid_t> unique(std::vector<pid_t> pids) {
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

}  // namespace

Result<void> PodKiller::check(const PodCgroup& pod) const {
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
  return {};
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
  const Sent sent = signalAll(unique(std::move(pids)), signal);
  if (auto refused = refusal(sent, signal, pod.uid)) return *refused;
  return sent.report;
}

Result<KillReport> PodKiller::killRound(const PodCgroup& pod) const {
  auto allowed = check(pod);
  if (!allowed) return allowed.error();
  const auto started = std::chrono::steady_clock::now();
  KillReport report;
  report.rounds = 1;
  // cgroup.kill handles forks racing with the kill; it only helps when the
  // pod's processes are in the cgroup2 tree (always on v2; on hybrid only if
  // the runtime put them there).
  if (pod.unified) {
    auto inUnified = readProcsRecursive(*pod.unified);
    if (inUnified && !inUnified->empty()) {
      auto written = writeFileAt(pod.unified->fd(), "cgroup.kill", "1");
      if (written) {
        report.method = "cgroup.kill";
        report.signalled = inUnified->size();
      } else if (written.error().sysErrno != ENOENT) {
        return written.error().withContext("killing pod " + pod.uid + " via " +
                                           pod.unified->path());
      }
    }
  }
  if (report.method.empty()) {
    // Frozen processes cannot fork between the listing and the signal.
    const bool freeze = pod.freezer.has_value();
    report.method = freeze ? "freezer+SIGKILL" : "SIGKILL";
    if (freeze) (void)writeFileAt(pod.freezer->fd(), "freezer.state", "FROZEN");
    auto left = processes(pod);
    Sent sent;
    if (left) sent = signalAll(*left, SIGKILL);
    report.signalled = sent.report.signalled;
    if (freeze) (void)writeFileAt(pod.freezer->fd(), "freezer.state", "THAWED");
    if (!left && !isGone(left.error())) return left.error();
    if (auto refused = refusal(sent, SIGKILL, pod.uid)) return *refused;
  }
  if (auto left = processes(pod)) {
    std::erase_if(left.value(), neverSignal);
    report.remaining = left->size();
  }
  report.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - started);
  return report;
}

Result<KillReport> PodKiller::killPod(const PodCgroup& pod,
                                      std::chrono::milliseconds timeout) const {
  auto allowed = check(pod);
  if (!allowed) return allowed.error();
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + timeout;
  KillReport report;
  auto lastRound = started;
  for (;;) {
    auto left = processes(pod);
    if (!left) {
      if (!isGone(left.error())) return left.error();
      left = std::vector<pid_t>{};
    }
    std::erase_if(left.value(), neverSignal);
    report.remaining = left->size();
    const auto now = std::chrono::steady_clock::now();
    if (left->empty() || now >= deadline) break;
    // A new round when none ran yet or the last one is 20 ms old: killed
    // processes need a moment to exit, and signalling them again meanwhile only
    // costs.
    if (report.rounds == 0 || now - lastRound >= std::chrono::milliseconds(20)) {
      auto round = killRound(pod);
      if (!round) return round.error();
      if (report.method.empty() || round->method != "SIGKILL") report.method = round->method;
      report.signalled += round->signalled;
      ++report.rounds;
      lastRound = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (report.method.empty()) report.method = "none needed";
  report.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - started);
  return report;
}

}  // namespace nodewarden::cgroups
