#include "cgroups/kill.h"

#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <optional>
#include <thread>

#include "cgroups/parsers.h"
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

// cgroup.kill, or a freeze, would take this very process with the pod.
bool holdsSelf(const std::vector<pid_t>& pids) {
  return std::find(pids.begin(), pids.end(), ::getpid()) != pids.end();
}

std::string selfText() {
  return "it holds nodewarden's own process " + std::to_string(::getpid());
}

std::string refusing(const PodCgroup& pod) {
  return "refusing to kill pod " + pod.uid + " (" + pod.relativePath + ")";
}

}  // namespace

std::string_view toString(KillMethod method) {
  switch (method) {
    case KillMethod::CgroupKill:
      return "cgroup.kill";
    case KillMethod::FreezerSigkill:
      return "freezer+SIGKILL";
    case KillMethod::Sigkill:
      return "SIGKILL";
  }
  return "SIGKILL";
}

Result<void> PodKiller::check(const PodCgroup& pod) const {
  const std::string& kubepods = pods_.kubepods();
  const Hierarchy& h = pods_.hierarchy();
  // Only the layout is checked here, without I/O; whether the pod holds this process is seen
  // in the one listing each signalling call makes (holdsSelf).
  if (!pod.relativePath.starts_with(kubepods + "/") ||
      pod.relativePath.find("/../") != std::string::npos || pod.relativePath.ends_with("/..")) {
    return Error{refusing(pod) + ": not below the managed kubepods cgroup " + kubepods};
  }
  const std::size_t slash = pod.relativePath.rfind('/');
  const std::string name = pod.relativePath.substr(slash + 1);
  auto parsed = parsePodCgroupName(name, pods_.driver(), pod.qos);
  if (!parsed || parsed->uid != pod.uid) {
    return Error{refusing(pod) + ": the directory name is not the pod cgroup of UID " + pod.uid};
  }
  if (pods_.find(pod.uid) != &pod) {
    return Error{refusing(pod) + ": not a pod of the managed index"};
  }
  if (!pathInLayout(pod.memory, h.memory, pod.relativePath) ||
      (pod.unified && !pathInLayout(*pod.unified, h.unified, pod.relativePath)) ||
      (pod.freezer && !pathInLayout(*pod.freezer, h.freezer, pod.relativePath))) {
    return Error{refusing(pod) + ": a cgroup directory is outside the managed hierarchies"};
  }
  return {};
}

Result<std::vector<pid_t>> PodKiller::processes(const PodCgroup& pod) const {
  auto pids = readProcsRecursive(pod.memory);
  if (!pids) return pids.error();
  return unique(std::move(pids).value());
}

Result<bool> PodKiller::populated(const PodCgroup& pod) const {
  if (pod.memory.version() == Version::V2) return hasProcesses(pod);
  // On v1 the listing also tells this process (never signalled) apart.
  auto left = processes(pod);
  if (!left) {
    if (isGone(left.error())) return false;
    return left.error();
  }
  std::erase_if(left.value(), neverSignal);
  return !left->empty();
}

Result<SignalReport> PodKiller::signalPod(const PodCgroup& pod, int signal) const {
  auto allowed = check(pod);
  if (!allowed) return allowed.error();
  auto pids = processes(pod);
  if (!pids) {
    if (isGone(pids.error())) return SignalReport{};
    return pids.error();
  }
  if (holdsSelf(*pids)) return Error{refusing(pod) + ": " + selfText()};
  const Sent sent = signalAll(*pids, signal);
  if (auto refused = refusal(sent, signal, pod.uid)) return *refused;
  return sent.report;
}

Result<KillReport> PodKiller::killRound(const PodCgroup& pod) const {
  auto allowed = check(pod);
  if (!allowed) return allowed.error();
  const auto started = std::chrono::steady_clock::now();
  KillReport report;
  report.rounds = 1;
  // cgroup.kill handles forks racing with the kill; it only helps when the pod's processes
  // are in the cgroup2 tree: always on v2 (the memory directory is the cgroup2 one); on a
  // hybrid host only if the runtime put them there, which its cgroup.events tells.
  const CgroupDir* killDir = nullptr;
  if (pod.unified) {
    if (pod.memory.version() == Version::V2) {
      killDir = &*pod.unified;
    } else {
      std::string buffer;
      auto events = pod.unified->read(CgroupDir::File::CgroupEvents, buffer);
      if (events) {
        auto value = findFlatKey(*events, "populated");
        if (value && *value && **value != 0) killDir = &*pod.unified;
      }
    }
  }
  // The one listing of this round: what is signalled, and where this process is looked for.
  auto listed = readProcsRecursive(killDir != nullptr ? *killDir : pod.memory);
  if (!listed) {
    if (!isGone(listed.error())) return listed.error();
    listed = std::vector<pid_t>{};
  }
  const std::vector<pid_t> pids = unique(std::move(listed).value());
  if (holdsSelf(pids)) return Error{refusing(pod) + ": " + selfText()};
  bool killed = false;
  if (killDir != nullptr) {
    auto written = writeFileAt(killDir->fd(), "cgroup.kill", "1");
    if (written) {
      report.method = KillMethod::CgroupKill;
      report.signalled = pids.size();
      killed = true;
    } else if (written.error().sysErrno != ENOENT) {  // ENOENT: a kernel before 5.14
      return written.error().withContext("killing pod " + pod.uid + " via " + killDir->path());
    }
  }
  if (!killed) {
    // Frozen processes cannot fork between the signal and their death.
    const bool freeze = pod.freezer.has_value();
    report.method = freeze ? KillMethod::FreezerSigkill : KillMethod::Sigkill;
    if (freeze) (void)writeFileAt(pod.freezer->fd(), "freezer.state", "FROZEN");
    const Sent sent = signalAll(pids, SIGKILL);
    report.signalled = sent.report.signalled;
    if (freeze) (void)writeFileAt(pod.freezer->fd(), "freezer.state", "THAWED");
    if (auto refused = refusal(sent, SIGKILL, pod.uid)) return *refused;
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
    if (report.rounds == 0 && holdsSelf(*left)) return Error{refusing(pod) + ": " + selfText()};
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
      if (!report.method || round->method != KillMethod::Sigkill) report.method = round->method;
      report.signalled += round->signalled;
      ++report.rounds;
      lastRound = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  report.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - started);
  return report;
}

}  // namespace nodewarden::cgroups
