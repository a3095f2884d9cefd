// bench_cgroups: what reading and watching pod cgroups costs on this machine's real kernel.
//
// It builds a kubelet-shaped tree with cgroups::Sandbox ("nodewarden-bench-<pid>" below every
// hierarchy root it uses: v1 memory, cpuacct, pids, freezer and the cgroup2 mount), fills it
// with pod cgroups (2 guaranteed, 5 burstable, 3 besteffort in every 10) and times, in order:
//   per-pod reads  readMemoryUsage alone, and readMemory + readCpuNanos + readProcessCount, on
//                  100 pods of which 10 run a process holding 8 MiB; every read is timed on
//                  its own, with the descriptors already open (the agent's steady state);
//   libcgroup      the same figures through libcgroup: its value API (cgroup_get_cgroup) when
//                  that works here, and cgroup_read_value_* / cgroup_read_stats_* in any case;
//   notification   a v1 memory threshold (MemoryThresholdNotifier) armed 64 MiB above a pod's
//                  usage while a child touches 128 MiB page by page: the time from the touch of
//                  the page that crosses the threshold to the parent's poll() returning, next
//                  to a baseline where the child wakes the parent through a pipe instead;
//   full scan      scanNode over 100, 1,000 and 5,000 pod cgroups, and how long creating them
//                  took (a size needing more descriptors than RLIMIT_NOFILE allows, 10 a pod,
//                  is replaced by the largest size that fits, and the output says so);
//   discovery      discoverHierarchy + a fresh PodCgroups::refresh, and a refresh that finds
//                  nothing changed, at each of those sizes.
// Figures are printed next to their targets with meets/misses; a miss never changes the exit
// status (this is not a test). Exit status: 0 after a run; 77 when the machine cannot run it
// (not root, no memory hierarchy, cgroups or processes cannot be placed); 1 when a read fails,
// which would make the figures meaningless; 130 after SIGINT/SIGTERM. Every path out of run()
// destroys the sandbox (children killed, cgroups removed); children also die with the
// benchmark (PR_SET_PDEATHSIG), and a sandbox left by a killed run is removed by the next.
//
// Single threaded, nothing pinned. Times come from std::chrono::steady_clock (CLOCK_MONOTONIC;
// the notification child and parent share that clock).

#include <fcntl.h>
#include <libcgroup.h>
#include <sys/resource.h>

#include <atomic>
#include <charconv>
#include <memory>
#include <type_traits>

#include "bench/support/process.h"
#include "bench/support/report.h"
#include "bench/support/sandbox.h"
#include "cgroups/hierarchy.h"
#include "cgroups/notify.h"
#include "cgroups/parsers.h"
#include "cgroups/pods.h"
#include "cgroups/readers.h"
#include "cgroups/sandbox.h"

namespace nodewarden::bench {
namespace {

using cgroups::CgroupDir;
using cgroups::PodCgroup;
using cgroups::PodCgroups;
using cgroups::Sandbox;

constexpr std::uint64_t kSeed = 0x6367726f75707321ULL;  // "cgroups!"
constexpr std::uint64_t kMi = 1024 * 1024;
constexpr const char* kSandboxPrefix = "nodewarden-bench";

// The per-pod read set: 100 pods, the first 10 of them running a process that holds 8 MiB.
constexpr std::size_t kReadPods = 100;
constexpr std::size_t kBusyPods = 10;
constexpr std::size_t kBusyBytes = 8 * kMi;

// Notification trial: threshold at usage + 64 MiB, the child touches 128 MiB.
constexpr std::uint64_t kThresholdMargin = 64 * kMi;
constexpr std::size_t kTouchBytes = 128 * kMi;

// Open descriptors: a scanned pod holds 5 directories (memory, cpuacct, pids, freezer,
// unified) and 5 control files (usage, memory.stat, limit, cpuacct.usage, pids.current).
// Discovery closes the scanning index's files first, then a fresh index opens 5 directories
// per pod next to the old one's 5: 10 per pod at the peak either way.
constexpr std::uint64_t kDescriptorsPerPod = 10;
constexpr std::uint64_t kDescriptorSlack = 512;  // stdio, pipes, libcgroup, the node's files

// Targets.
constexpr double kUsageTargetMicros = 2;
constexpr double kFullTargetMicros = 20;
constexpr int kScanTargetPods = 1000;
constexpr double kScanTargetMillis = 25;
constexpr double kNotifyP99TargetMillis = 5;

// ---------------------------------------------------------------------------------------------
// Measuring.

struct Budgets {
  Budget readPasses;       // passes over the read set, each read timed on its own
  Budget libcgroupPasses;  // the same through cgroup_read_value_*
  Budget valueApiPasses;   // cgroup_get_cgroup per pod: slow, fewer passes
  Budget scan;
  Budget discovery;     // discoverHierarchy + a fresh refresh (plus closing, untimed)
  Budget noopRefresh;   // refresh with nothing changed
  int trials;           // notification trials
  double trialSeconds;  // wall-time bound on all trials together
};

Budgets budgetsFor(bool quick) {
  if (quick) {
    return {{3, 50, 0.3}, {2, 20, 0.3}, {1, 3, 0.3}, {3, 10, 0.5},
            {2, 5, 1.0},  {3, 20, 0.3}, 10,          30.0};
  }
  return {{20, 5000, 2.0}, {10, 500, 2.0}, {3, 50, 2.0}, {10, 300, 4.0},
          {5, 40, 5.0},    {20, 500, 1.5}, 50,           300.0};
}

// Per-pod reads in microseconds, scans and discovery in milliseconds.
void printMicrosLine(const char* label, const Samples& s) {
  printSamplesLine(44, label, s, 1e3, "us");
}
void printMillisLine(const char* label, const Samples& s) {
  printSamplesLine(44, label, s, 1e6, "ms");
}

// ---------------------------------------------------------------------------------------------
// Child bodies. They run in a process forked by Sandbox::spawn, already inside the pod cgroup,
// and exit with the benchmark (PR_SET_PDEATHSIG) so a killed run leaves no process behind.

// Shared between the notification child and the parent (MAP_SHARED, touched by the parent
// first so the pages are charged to the parent's cgroup, not to the pod being measured).
// [0] is the number of pages touched so far; [1] the page after whose touch the child writes
// 'p' on its ready pipe (-1: never); [2 + i] is when page i was about to be touched.
struct TouchLog {
  std::int64_t* slots = nullptr;
  std::size_t pages = 0;
  std::size_t bytes() const { return (pages + 2) * sizeof(std::int64_t); }
  std::atomic_ref<std::int64_t> progress() const { return std::atomic_ref<std::int64_t>(slots[0]); }
  std::int64_t& pingPage() const { return slots[1]; }
  std::int64_t& touchedAt(std::size_t page) const { return slots[2 + page]; }
};

// Says 'r' on `readyFd` once its memory is mapped; on 'g' from `goFd` touches it page by
// page, logging each touch's time (and saying 'p' after the ping page, if any); says 'd';
// then waits for EOF on `goFd` before exiting (so the memory is freed only after the parent
// has its figures).
int touchOnSignal(int readyFd, int goFd, const TouchLog& touchLog, std::size_t pageSize,
                  pid_t parent) {
  if (!dieWithParent(parent)) return 0;
  volatile char* bytes = mapSmallPages(touchLog.pages * pageSize);
  if (bytes == nullptr) return 2;
  char byte = 'r';
  if (::write(readyFd, &byte, 1) != 1) return 3;
  if (::read(goFd, &byte, 1) != 1 || byte != 'g') return 4;
  const std::int64_t ping = touchLog.pingPage();
  for (std::size_t i = 0; i < touchLog.pages && !stopped(); ++i) {
    touchLog.touchedAt(i) = monotonicNanos();
    bytes[i * pageSize] = 1;
    touchLog.progress().store(std::int64_t(i + 1), std::memory_order_release);
    if (std::int64_t(i) == ping) {
      byte = 'p';
      if (::write(readyFd, &byte, 1) != 1) return 6;
    }
  }
  byte = 'd';
  if (::write(readyFd, &byte, 1) != 1) return 5;
  while (::read(goFd, &byte, 1) > 0) {
  }
  return 0;
}

// Waits (bounded) for `pid` to exit without reaping it, then lets the sandbox reap: the
// sandbox kills its recorded children at the end, so it must be the one to forget them.
void awaitExit(Sandbox& sandbox, pid_t pid) {
  for (int i = 0; i < 5000 && !exited(pid); ++i) sleepMillis(1);
  sandbox.reap();
}

// ---------------------------------------------------------------------------------------------
// The pods.

struct BenchPod {
  std::string uid;
  std::string qos;
  std::string relative;
};

// Adds pod cgroups until `pods` holds `target`, printing progress every 2 s. Returns the error
// when a cgroup cannot be made (e.g. the kernel's 65,535 memory cgroup IDs are used up).
std::optional<Error> growTo(Sandbox& sandbox, std::vector<BenchPod>& pods, std::size_t target,
                            Random& rng) {
  auto lastReport = steadyNow();
  while (pods.size() < target && !stopped()) {
    BenchPod pod{rng.uuid(), qosMix(pods.size()), {}};
    auto relative = sandbox.addPod(pod.uid, pod.qos);
    if (!relative) return relative.error();
    pod.relative = *relative;
    pods.push_back(std::move(pod));
    if (nanosSince(lastReport) > 2e9) {
      std::printf("    ... %s / %s pod cgroups\n", withCommas(pods.size()).c_str(),
                  withCommas(target).c_str());
      std::fflush(stdout);
      lastReport = steadyNow();
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Per-pod reads with nodewarden's readers.

struct ReadSet {
  std::vector<const PodCgroup*> pods;  // the first kReadPods, in creation order
  std::vector<bool> busy;
  std::vector<std::string> relative;  // for libcgroup, relative to each hierarchy root
};

struct OurReads {
  Samples usage;         // readMemoryUsage
  Samples full;          // readMemory + readCpuNanos + readProcessCount
  Samples fullBusy;      // the same, pods with a process only
  Samples fullIdle;      // the same, empty pods only
  Samples memory;        // readMemory alone (usage, memory.stat, limit)
  Samples statPread;     // memory.stat pread alone, not parsed
  Samples cpu;           // readCpuNanos alone
  Samples processes;     // readProcessCount alone
  Samples timer;         // two steady_clock reads back to back
  double usagePass = 0;  // median of a whole usage pass, per pod
  double fullPass = 0;
};

// Whether `result` holds a value (added to gSink when `sink`); if not, its error is `error`.
template <typename T>
bool kept(const Result<T>& result, std::string& error, bool sink = false) {
  if (!result) {
    error = result.error().message;
    return false;
  }
  if constexpr (std::is_arithmetic_v<T>) {
    if (sink) gSink = gSink + std::uint64_t(*result);
  }
  return true;
}

// Reads one pod fully, as scanNode does; false (with the error in `error`) when a read fails.
bool readFull(const PodCgroup& pod, std::string& buffer, std::string& error) {
  auto memory = cgroups::readMemory(pod.memory, buffer);
  if (!kept(memory, error)) return false;
  gSink = gSink + memory->workingSet;
  if (pod.cpu && !kept(cgroups::readCpuNanos(*pod.cpu, buffer), error, true)) return false;
  return kept(cgroups::readProcessCount(pod, buffer), error, true);
}

// Passes over `pods` read sets within `budget`, each read timed on its own (so p99 is the tail
// of single reads); also the median of a whole pass per pod (which includes the timer's own
// cost once per read). The first failed read ends the reading.
struct EachRead {
  std::vector<double> nanos;
  double passPerPod = 0;
  bool failed = false;
};

template <typename F>
EachRead timeEachRead(const Budget& budget, std::size_t pods, F&& readOne) {
  EachRead r;
  const Samples passes = measure(budget, [&] {
    const auto passStart = steadyNow();
    for (std::size_t i = 0; i < pods && !r.failed && !stopped(); ++i) {
      const auto t0 = steadyNow();
      const bool ok = readOne(i);
      r.nanos.push_back(nanosSince(t0));
      r.failed = r.failed || !ok;
    }
    return nanosSince(passStart) / double(pods);
  });
  r.passPerPod = passes.median();
  return r;
}

std::optional<OurReads> measureOurReads(const ReadSet& set, const Budgets& budgets) {
  OurReads r;
  std::string buffer;
  std::string error;
  // One untimed pass opens every control file the timed passes read.
  for (const PodCgroup* pod : set.pods) {
    if (!readFull(*pod, buffer, error)) {
      std::fprintf(stderr, "reading a pod cgroup failed: %s\n", error.c_str());
      return std::nullopt;
    }
  }
  r.timer = measure({1000, 100000, 0.05}, [] {
    const auto t0 = steadyNow();
    return nanosSince(t0);
  });

  bool failed = false;
  auto each = [&](Samples& into, auto&& readOne) {
    EachRead e = timeEachRead(budgets.readPasses, set.pods.size(), readOne);
    failed = failed || e.failed;
    into = Samples::from(e.nanos);
    return e;
  };
  const auto& pods = set.pods;
  r.usagePass = each(r.usage, [&](std::size_t i) {
                  return kept(cgroups::readMemoryUsage(pods[i]->memory, buffer), error, true);
                }).passPerPod;
  const EachRead full =
      each(r.full, [&](std::size_t i) { return readFull(*pods[i], buffer, error); });
  r.fullPass = full.passPerPod;
  std::vector<double> busyNs, idleNs;
  for (std::size_t k = 0; k < full.nanos.size(); ++k) {
    (set.busy[k % pods.size()] ? busyNs : idleNs).push_back(full.nanos[k]);
  }
  r.fullBusy = Samples::from(std::move(busyNs));
  r.fullIdle = Samples::from(std::move(idleNs));
  each(r.memory,
       [&](std::size_t i) { return kept(cgroups::readMemory(pods[i]->memory, buffer), error); });
  each(r.statPread, [&](std::size_t i) {
    return kept(pods[i]->memory.read(CgroupDir::File::MemoryStat, buffer), error);
  });
  each(r.cpu, [&](std::size_t i) {
    return !pods[i]->cpu || kept(cgroups::readCpuNanos(*pods[i]->cpu, buffer), error);
  });
  each(r.processes,
       [&](std::size_t i) { return kept(cgroups::readProcessCount(*pods[i], buffer), error); });
  if (failed) {
    std::fprintf(stderr, "reading a pod cgroup failed: %s\n", error.c_str());
    return std::nullopt;
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// The same reads through libcgroup.

struct LibcgroupReads {
  int initRc = 0;
  int getCgroupRc = 0;  // new + add_controller("memory") + get_cgroup on pod 0; 0 = works
  int getCgroupErrno = 0;
  int getCgroupAllRc = 0;    // the same without add_controller (loads every hierarchy)
  bool timedAll = false;     // the timed value-API figures are of the variant without it
  std::string getValueNote;  // what cgroup_get_value_uint64 said on the first pod
  // cgroup_get_cgroup on the same pod with one controller added (or none: every hierarchy).
  std::vector<std::pair<std::string, int>> getCgroupByController;
  Samples valueApiUsage;          // new + add_controller + get_cgroup + get_value + free
  Samples valueApiFull;           // the same with four values, plus read_stats for memory.stat
  Samples readValueUsage;         // cgroup_read_value_begin/end on memory.usage_in_bytes
  Samples readValueFull;          // read_value x4 + read_stats (memory.stat)
  std::string error;              // the first failure of the read_value path, if any
  std::uint64_t sampleUsage = 0;  // busy pod 0's usage via read_value (sanity)
};

// cgroup_read_value_begin + end: the first line of one control file.
Result<std::uint64_t> libcgroupReadValue(const char* controller, const std::string& relative,
                                         const char* file) {
  char name[64];
  std::snprintf(name, sizeof name, "%s", file);  // the API takes a mutable name
  char buffer[128];
  void* handle = nullptr;
  const int rc =
      cgroup_read_value_begin(controller, relative.c_str(), name, &handle, buffer, sizeof buffer);
  if (handle != nullptr) cgroup_read_value_end(&handle);
  if (rc != 0) {
    return Error{std::string("cgroup_read_value_begin(") + controller + ", " + relative + ", " +
                 file + "): " + cgroup_strerror(rc)};
  }
  return cgroups::parseUint(buffer);
}

// cgroup_read_stats_begin/next/end over memory.stat: the hierarchical inactive_file.
Result<std::uint64_t> libcgroupInactiveFile(const std::string& relative) {
  void* handle = nullptr;
  cgroup_stat stat{};
  std::optional<std::uint64_t> inactive;
  int rc = cgroup_read_stats_begin("memory", relative.c_str(), &handle, &stat);
  while (rc == 0) {
    if (std::strcmp(stat.name, "total_inactive_file") == 0) {
      std::string_view value = stat.value;
      while (!value.empty() && (value.back() == '\n' || value.back() == ' '))
        value.remove_suffix(1);
      std::uint64_t v = 0;
      if (std::from_chars(value.data(), value.data() + value.size(), v).ec == std::errc()) {
        inactive = v;
      }
    }
    rc = cgroup_read_stats_next(&handle, &stat);
  }
  if (handle != nullptr) cgroup_read_stats_end(&handle);
  if (rc != ECGEOF) {
    return Error{"cgroup_read_stats_begin(memory, " + relative + "): " + cgroup_strerror(rc)};
  }
  if (!inactive) return Error{"memory.stat of " + relative + ": no total_inactive_file"};
  return *inactive;
}

// The value API: loads the cgroup from the kernel and takes values from the copy.
struct ValueApiResult {
  int rc = 0;
  int lastErrno = 0;
  int valueRc = 0;
  std::uint64_t usage = 0;
};

// `addMemory`: name the memory controller first (the documented way to limit what is
// loaded); otherwise cgroup_get_cgroup loads every hierarchy the cgroup exists in.
ValueApiResult libcgroupValueApi(const std::string& relative, bool addMemory, bool full) {
  ValueApiResult out;
  cgroup* group = cgroup_new_cgroup(relative.c_str());
  if (group == nullptr) {
    out.rc = ECGFAIL;
    return out;
  }
  if (addMemory) cgroup_add_controller(group, "memory");
  out.rc = cgroup_get_cgroup(group);
  if (out.rc == ECGOTHER) out.lastErrno = cgroup_get_last_errno();
  if (out.rc == 0) {
    u_int64_t value = 0;
    // Keeps the first failure.
    auto get = [&](const char* controller, const char* name) {
      cgroup_controller* c = cgroup_get_controller(group, controller);
      const int rc = c == nullptr ? ECGROUPVALUENOTEXIST : cgroup_get_value_uint64(c, name, &value);
      if (out.valueRc == 0) out.valueRc = rc;
      gSink = gSink + value;
      return value;
    };
    out.usage = get("memory", "memory.usage_in_bytes");
    if (full) {
      get("memory", "memory.limit_in_bytes");
      get("cpuacct", "cpuacct.usage");
      get("pids", "pids.current");
    }
  }
  cgroup_free(&group);
  if (full && out.rc == 0) {
    // memory.stat is a "stats" file: the value API does not carry it.
    if (auto inactive = libcgroupInactiveFile(relative)) gSink = gSink + *inactive;
  }
  return out;
}

LibcgroupReads measureLibcgroup(const ReadSet& set, const cgroups::Hierarchy& h,
                                const Budgets& budgets) {
  LibcgroupReads r;
  // discoverHierarchy already ran cgroup_init once; the brief is to call it first, and doing
  // so again only re-reads the mount table.
  r.initRc = cgroup_init();
  if (r.initRc != 0) return r;

  const ValueApiResult probe = libcgroupValueApi(set.relative[0], true, false);
  r.getCgroupRc = probe.rc;
  r.getCgroupErrno = probe.lastErrno;
  const ValueApiResult probeAll = libcgroupValueApi(set.relative[0], false, false);
  r.getCgroupAllRc = probeAll.rc;
  // Time the documented sequence when it works, else the variant that does.
  const bool addMemory = probe.rc == 0;
  r.timedAll = !addMemory && probeAll.rc == 0;
  const ValueApiResult& timedProbe = addMemory ? probe : probeAll;
  for (const char* controller : {"", "memory", "cpuacct", "pids", "freezer"}) {
    cgroup* group = cgroup_new_cgroup(set.relative[0].c_str());
    if (group == nullptr) continue;
    if (*controller != '\0') cgroup_add_controller(group, controller);
    r.getCgroupByController.emplace_back(*controller != '\0' ? controller : "(none)",
                                         cgroup_get_cgroup(group));
    cgroup_free(&group);
  }
  if (timedProbe.rc == 0) {
    r.getValueNote = timedProbe.valueRc == 0 ? "usage " + withCommas(timedProbe.usage) + " bytes"
                                             : std::string("cgroup_get_value_uint64: ") +
                                                   cgroup_strerror(timedProbe.valueRc);
  }

  auto perPodPasses = [&](const Budget& budget, auto&& readOne) {
    return Samples::from(timeEachRead(budget, set.relative.size(), readOne).nanos);
  };

  if (timedProbe.rc == 0) {
    r.valueApiUsage = perPodPasses(budgets.valueApiPasses, [&](std::size_t i) {
      return libcgroupValueApi(set.relative[i], addMemory, false).rc == 0;
    });
    // With only memory added, cpuacct.usage and pids.current are not loaded: the full
    // figure then lacks them (it is printed as such).
    r.valueApiFull = perPodPasses(budgets.valueApiPasses, [&](std::size_t i) {
      return libcgroupValueApi(set.relative[i], addMemory, true).rc == 0;
    });
  }

  auto fail = [&](const Error& e) {
    if (r.error.empty()) r.error = e.message;
    return false;
  };
  if (auto usage = libcgroupReadValue("memory", set.relative[0], "memory.usage_in_bytes")) {
    r.sampleUsage = *usage;
  } else {
    fail(usage.error());
    return r;
  }
  r.readValueUsage = perPodPasses(budgets.libcgroupPasses, [&](std::size_t i) {
    auto usage = libcgroupReadValue("memory", set.relative[i], "memory.usage_in_bytes");
    if (!usage) return fail(usage.error());
    gSink = gSink + *usage;
    return true;
  });
  const bool haveCpu = !h.cpuacct.empty() && h.cpuVersion == cgroups::Version::V1;
  const bool havePids = !h.pids.empty() && h.pidsVersion == cgroups::Version::V1;
  r.readValueFull = perPodPasses(budgets.libcgroupPasses, [&](std::size_t i) {
    const std::string& rel = set.relative[i];
    auto usage = libcgroupReadValue("memory", rel, "memory.usage_in_bytes");
    if (!usage) return fail(usage.error());
    auto inactive = libcgroupInactiveFile(rel);
    if (!inactive) return fail(inactive.error());
    auto limit = libcgroupReadValue("memory", rel, "memory.limit_in_bytes");
    if (!limit) return fail(limit.error());
    gSink = gSink + cgroups::workingSet(*usage, *inactive) + *limit;
    if (haveCpu) {
      auto cpu = libcgroupReadValue("cpuacct", rel, "cpuacct.usage");
      if (!cpu) return fail(cpu.error());
      gSink = gSink + *cpu;
    }
    if (havePids) {
      auto pids = libcgroupReadValue("pids", rel, "pids.current");
      if (!pids) return fail(pids.error());
      gSink = gSink + *pids;
    }
    return true;
  });
  return r;
}

// ---------------------------------------------------------------------------------------------
// Notification latency.

struct NotifyFigures {
  std::string firstError;  // the first failed trial's reason
  int attempted = 0;
  int timedOut = 0;                   // no event within 5 s of the go signal
  int early = 0;                      // woke before the estimated crossing page was touched
  std::vector<double> latencyNs;      // wake − touch of the crossing page (may be negative)
  std::vector<double> pagesLate;      // pages touched at wake − the crossing page index
  std::vector<double> pageTouchNs;    // the child's average time per page touch
  std::vector<double> wakeUsageOver;  // usage read right after waking − threshold, bytes
};

struct NotifyResults {
  std::string skipped;  // why nothing ran, if nothing did
  NotifyFigures threshold;
  NotifyFigures baseline;
};

// Runs `trials` threshold trials and as many baseline trials, alternating, so both see the
// same machine. In a baseline trial no threshold is armed: the child itself writes to a pipe
// right after touching the crossing page and the parent waits on that pipe. Same child, same
// loop, same wake-up through the scheduler: what the threshold adds beyond the baseline is
// the kernel's own delay in noticing the crossing.
NotifyResults measureNotification(Sandbox& sandbox, const cgroups::Hierarchy& h, int trials,
                                  double seconds, Random& rng) {
  NotifyResults results;
  std::string& skipped = results.skipped;
  if (h.memoryVersion != cgroups::Version::V1) {
    skipped = "the memory controller is on cgroup v2 (no cgroup.event_control thresholds)";
    return results;
  }
  auto relative = sandbox.addPod(rng.uuid(), "burstable");
  if (!relative) {
    skipped = "cannot create the pod cgroup: " + relative.error().message;
    return results;
  }
  auto dir = CgroupDir::open(h.memory + "/" + *relative, cgroups::Version::V1);
  if (!dir) {
    skipped = dir.error().message;
    return results;
  }
  const std::size_t pageSize = std::size_t(::sysconf(_SC_PAGESIZE));
  TouchLog touchLog;
  touchLog.pages = kTouchBytes / pageSize;
  void* shared =
      ::mmap(nullptr, touchLog.bytes(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    skipped = std::string("mmap of the shared touch log: ") + std::strerror(errno);
    return results;
  }
  touchLog.slots = static_cast<std::int64_t*>(shared);
  const pid_t self = ::getpid();
  std::string buffer;
  const auto start = steadyNow();

  for (int trial = 0; trial < 2 * trials && !stopped() && nanosSince(start) * 1e-9 < seconds;
       ++trial) {
    const bool baseline = trial % 2 == 1;
    NotifyFigures& f = baseline ? results.baseline : results.threshold;
    ++f.attempted;
    std::memset(shared, 0, touchLog.bytes());  // also keeps the pages charged to the parent
    auto failTrial = [&](const std::string& why) {
      if (f.firstError.empty()) f.firstError = "trial " + std::to_string(trial) + ": " + why;
    };
    int ready[2];
    int go[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) {
      failTrial(std::string("pipe: ") + std::strerror(errno));
      break;
    }
    if (::pipe2(go, O_CLOEXEC) != 0) {
      failTrial(std::string("pipe: ") + std::strerror(errno));
      ::close(ready[0]);
      ::close(ready[1]);
      break;
    }
    auto child = sandbox.spawn(*relative,
                               [&, readyW = ready[1], goR = go[0], readyR = ready[0], goW = go[1]] {
                                 ::close(readyR);
                                 ::close(goW);
                                 return touchOnSignal(readyW, goR, touchLog, pageSize, self);
                               });
    ::close(ready[1]);
    ::close(go[0]);
    if (!child) {
      failTrial(child.error().message);
      ::close(ready[0]);
      ::close(go[1]);
      break;
    }
    bool ok = false;
    do {
      if (readByte(ready[0], 5000) != 'r') {
        failTrial("the child did not get ready");
        break;
      }
      auto before = cgroups::readMemoryUsage(*dir, buffer);
      if (!before) {
        failTrial(before.error().message);
        break;
      }
      const std::uint64_t threshold = *before + kThresholdMargin;
      // The first page whose touch takes the usage above the threshold, counting 4 KiB per
      // page from the usage read just before the go signal.
      const std::size_t crossing = std::size_t((threshold - *before) / pageSize);
      if (crossing >= touchLog.pages) break;
      touchLog.pingPage() = baseline ? std::int64_t(crossing) : -1;
      // A fresh notifier each trial: a v1 threshold cannot be moved, only replaced.
      std::optional<cgroups::MemoryThresholdNotifier> notifier;
      if (!baseline) {
        auto armed = cgroups::MemoryThresholdNotifier::arm(*dir, threshold);
        if (!armed) {
          failTrial(armed.error().message);
          break;
        }
        notifier.emplace(std::move(armed).value());
      }
      const char goByte = 'g';
      if (::write(go[1], &goByte, 1) != 1) {
        failTrial("writing the go signal failed");
        break;
      }
      const std::int64_t goAt = monotonicNanos();
      pollfd p{baseline ? ready[0] : notifier->fd(), POLLIN, 0};
      int n = 0;
      while (!stopped()) {
        const std::int64_t left = 5000 - (monotonicNanos() - goAt) / 1'000'000;
        if (left <= 0) break;
        n = ::poll(&p, 1, int(left));
        if (n >= 0 || errno != EINTR) break;
      }
      const std::int64_t wokeAt = monotonicNanos();
      const std::int64_t progressAtWake = touchLog.progress().load(std::memory_order_acquire);
      if (stopped()) break;
      if (n <= 0) {
        ++f.timedOut;
        failTrial(baseline ? "no ping within 5 s" : "no threshold event within 5 s");
        break;
      }
      auto usageAtWake = cgroups::readMemoryUsage(*dir, buffer);
      if (baseline && readByte(ready[0], 1000) != 'p') {
        failTrial("the child's ping was not 'p'");
        break;
      }
      if (readByte(ready[0], 10000) != 'd') {
        failTrial("the child did not finish touching its memory");
        break;
      }
      const double latency = double(wokeAt - touchLog.touchedAt(crossing));
      f.latencyNs.push_back(latency);
      if (latency < 0) ++f.early;
      f.pagesLate.push_back(double(progressAtWake) - double(crossing));
      f.pageTouchNs.push_back(
          double(touchLog.touchedAt(touchLog.pages - 1) - touchLog.touchedAt(0)) /
          double(touchLog.pages - 1));
      if (usageAtWake) f.wakeUsageOver.push_back(double(*usageAtWake) - double(threshold));
      ok = true;
    } while (false);
    ::close(go[1]);  // EOF: the child exits (or, if it never got 'g', gives up)
    ::close(ready[0]);
    if (!ok) ::kill(*child, SIGKILL);
    awaitExit(sandbox, *child);
  }
  ::munmap(shared, touchLog.bytes());
  (void)sandbox.removeCgroup(*relative);
  return results;
}

// ---------------------------------------------------------------------------------------------
// Scan and discovery at one size.

struct SizeFigures {
  std::size_t pods = 0;
  double createSeconds = 0;  // cumulative: every pod cgroup up to this size
  double refreshAddNs = 0;   // the incremental refresh that picked up the new pods
  double firstScanNs = 0;    // opens every control file
  Samples scan;
  std::size_t scanPods = 0;
  std::size_t scanErrors = 0;
  std::string scanError;
  Samples discover;      // discoverHierarchy + new PodCgroups + refresh
  Samples discoverOnly;  // the discoverHierarchy part
  Samples refreshFresh;  // the refresh part
  Samples closeFresh;    // destroying that PodCgroups (closing its descriptors), untimed above
  Samples noopRefresh;
};

// Closes every pod's control files (keeping the directories), as after a fresh refresh.
void closeControlFiles(const PodCgroups& index) {
  for (const auto& [uid, pod] : index.pods()) {
    pod->memory.closeFiles();
    for (const auto* dir : {&pod->cpu, &pod->pids, &pod->unified, &pod->freezer}) {
      if (*dir) (*dir)->closeFiles();
    }
  }
}

bool measureScanAndDiscovery(SizeFigures& s, PodCgroups& index, const Sandbox& sandbox,
                             const Budgets& budgets) {
  cgroups::ScanOptions options;
  auto scanOnce = [&] {
    const auto t0 = steadyNow();
    cgroups::ScanResult result = cgroups::scanNode(index, options, steadyNow());
    const double ns = nanosSince(t0);
    s.scanPods = result.summary.pods.size();
    s.scanErrors = result.errors.size();
    if (!result.errors.empty() && s.scanError.empty()) s.scanError = result.errors[0].message;
    doNotOptimize(result);
    return ns;
  };
  closeControlFiles(index);  // so the first scan opens every file at every size
  s.firstScanNs = scanOnce();
  s.scan = measure(budgets.scan, scanOnce);

  // Keeps the peak at 10 descriptors per pod (see kDescriptorsPerPod).
  closeControlFiles(index);
  std::vector<double> discoverNs, refreshNs, closeNs;
  bool failed = false;
  s.discover = measure(budgets.discovery, [&] {
    const auto t0 = steadyNow();
    auto hierarchy = cgroups::discoverHierarchy({});
    const auto t1 = steadyNow();
    if (!hierarchy) {
      std::fprintf(stderr, "discoverHierarchy failed: %s\n", hierarchy.error().message.c_str());
      failed = true;
      requestStop();
      return 0.0;
    }
    auto fresh = std::make_unique<PodCgroups>(std::move(hierarchy).value(), sandbox.kubepods());
    auto refreshed = fresh->refresh();
    const auto t2 = steadyNow();
    if (!refreshed || fresh->size() != index.size()) {
      std::fprintf(stderr, "a fresh refresh found %zu pods, expected %zu%s%s\n", fresh->size(),
                   index.size(), refreshed ? "" : ": ",
                   refreshed ? "" : refreshed.error().message.c_str());
      failed = true;
      requestStop();
    }
    const auto t3 = steadyNow();
    fresh.reset();
    closeNs.push_back(nanosSince(t3));
    using Nanos = std::chrono::duration<double, std::nano>;
    discoverNs.push_back(Nanos(t1 - t0).count());
    refreshNs.push_back(Nanos(t2 - t1).count());
    return Nanos(t2 - t0).count();
  });
  s.discoverOnly = Samples::from(std::move(discoverNs));
  s.refreshFresh = Samples::from(std::move(refreshNs));
  s.closeFresh = Samples::from(std::move(closeNs));
  if (failed) return false;

  s.noopRefresh = measure(budgets.noopRefresh, [&] {
    const auto t0 = steadyNow();
    auto refreshed = index.refresh();
    const double ns = nanosSince(t0);
    if (!refreshed || !refreshed->added.empty() || !refreshed->removed.empty()) failed = true;
    return ns;
  });
  if (failed) {
    std::fprintf(stderr, "a refresh with nothing changed reported changes or failed\n");
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------

void printUsage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: bench_cgroups [--sizes N[,N...]] [--quick] [--trials N] [--help]\n"
      "\n"
      "Times nodewarden's cgroup readers, scan, discovery and v1 memory threshold\n"
      "notifications on real cgroups it creates (\"%s-<pid>\" below each hierarchy\n"
      "root) and removes again. Needs root.\n"
      "  --sizes 100,1000   pod cgroups for the scan and discovery (default 100,1000,5000;\n"
      "                     with --quick 100,1000); each from 100 to 20000\n"
      "  --quick            fewer repetitions and 10 notification trials (a smoke run)\n"
      "  --trials N         notification trials (default 50, --quick 10), 1 to 10000\n"
      "  --help             this text\n"
      "Targets: <= %.0f us per pod usage-only, <= %.0f us per pod full read, <= %.0f ms for a\n"
      "full scan of %d pods, notification p99 <= %.0f ms. A missed target prints MISSES but\n"
      "does not change the exit status. Exit 77: the machine cannot run it.\n",
      kSandboxPrefix, kUsageTargetMicros, kFullTargetMicros, kScanTargetMillis, kScanTargetPods,
      kNotifyP99TargetMillis);
}

// At least the per-pod read set (it is part of every size); at most 20,000 so that 5
// hierarchies stay well below the kernel's 65,535 memory cgroup IDs. Sorted, no repeats.
std::optional<std::vector<std::size_t>> parseSizes(std::string_view text) {
  auto sizes = parseBoundedList<std::size_t>(text, kReadPods, 20'000);
  if (!sizes) return std::nullopt;
  std::sort(sizes->begin(), sizes->end());
  sizes->erase(std::unique(sizes->begin(), sizes->end()), sizes->end());
  return sizes;
}

// The measurements, on a sandbox that run() owns and destroys whatever this returns.
int runMeasurements(Sandbox& sandbox, const cgroups::Hierarchy& h,
                    const std::vector<std::size_t>& sizes, const Budgets& budgets) {
  Random rng(kSeed);
  const pid_t self = ::getpid();
  std::vector<BenchPod> pods;

  // --- the per-pod read set.
  std::printf("== set-up: %zu pod cgroups, %zu of them running a process holding %llu MiB ==\n",
              kReadPods, kBusyPods, static_cast<unsigned long long>(kBusyBytes / kMi));
  const auto createStart = steadyNow();
  if (auto failed = growTo(sandbox, pods, kReadPods, rng)) {
    std::printf("cannot create pod cgroups: %s\n", failed->message.c_str());
    return 77;
  }
  double createSeconds = nanosSince(createStart) * 1e-9;
  for (std::size_t i = 0; i < kBusyPods && !stopped(); ++i) {
    auto child = sandbox.spawn(pods[i].relative, [self] { return holdMemory(kBusyBytes, self); });
    if (!child) {
      std::printf("cannot start a process in a pod cgroup: %s\n", child.error().message.c_str());
      return 77;
    }
  }
  PodCgroups index(h, sandbox.kubepods());
  {
    auto refreshed = index.refresh();
    if (!refreshed || index.size() != pods.size()) {
      std::fprintf(stderr, "the pod index found %zu pods, expected %zu%s%s\n", index.size(),
                   pods.size(), refreshed ? "" : ": ",
                   refreshed ? "" : refreshed.error().message.c_str());
      return 1;
    }
  }
  ReadSet set;
  for (std::size_t i = 0; i < kReadPods; ++i) {
    set.pods.push_back(index.find(pods[i].uid));
    set.busy.push_back(i < kBusyPods);
    set.relative.push_back(pods[i].relative);
    if (set.pods.back() == nullptr) {
      std::fprintf(stderr, "pod %s not in the index\n", pods[i].uid.c_str());
      return 1;
    }
  }
  // The children's 8 MiB must be charged before the reads mean anything (bounded: 10 s).
  std::string buffer;
  std::uint64_t busyUsage = 0;
  for (int wait = 0; wait < 1000 && !stopped(); ++wait) {
    busyUsage = 0;
    std::size_t charged = 0;
    for (std::size_t i = 0; i < kBusyPods; ++i) {
      auto usage = cgroups::readMemoryUsage(set.pods[i]->memory, buffer);
      if (usage && *usage >= kBusyBytes) ++charged;
      if (usage) busyUsage += *usage;
    }
    if (charged == kBusyPods) break;
    sleepMillis(10);
  }
  std::uint64_t idleUsage = 0;
  for (std::size_t i = kBusyPods; i < kReadPods; ++i) {
    if (auto usage = cgroups::readMemoryUsage(set.pods[i]->memory, buffer)) idleUsage += *usage;
  }
  std::printf(
      "  created in %.2f s; busy pods' memory.usage_in_bytes: %.1f MiB on average; "
      "empty pods': %s bytes on average\n\n",
      createSeconds, double(busyUsage) / double(kBusyPods) / double(kMi),
      withCommas(idleUsage / (kReadPods - kBusyPods)).c_str());
  std::fflush(stdout);
  if (stopped()) return 130;

  // --- per-pod reads.
  std::printf("== per-pod reads, nodewarden readers on kept-open descriptors (%zu pods) ==\n",
              kReadPods);
  auto ours = measureOurReads(set, budgets);
  if (stopped()) return 130;
  if (!ours) return 1;
  const double usageMedianUs = ours->usage.median() * 1e-3;
  const double fullMedianUs = ours->full.median() * 1e-3;
  std::printf("    (each read timed alone; timer overhead %.0f ns per timed read is included)\n",
              ours->timer.median());
  printMicrosLine("usage only: readMemoryUsage", ours->usage);
  std::printf("      target <= %.0f us (median): %s;  a whole pass: %.2f us per pod\n",
              kUsageTargetMicros, verdict(usageMedianUs <= kUsageTargetMicros),
              ours->usagePass * 1e-3);
  printMicrosLine("full: readMemory+readCpuNanos+readProcessCount", ours->full);
  std::printf("      target <= %.0f us (median): %s;  a whole pass: %.2f us per pod\n",
              kFullTargetMicros, verdict(fullMedianUs <= kFullTargetMicros), ours->fullPass * 1e-3);
  printMicrosLine("  full, the 10 pods with a process", ours->fullBusy);
  printMicrosLine("  full, the 90 empty pods", ours->fullIdle);
  printMicrosLine("  readMemory (usage + memory.stat + limit)", ours->memory);
  printMicrosLine("    memory.stat pread alone (not parsed)", ours->statPread);
  printMicrosLine("  readCpuNanos (cpuacct.usage)", ours->cpu);
  printMicrosLine("  readProcessCount (pids.current)", ours->processes);
  std::printf("\n");
  std::fflush(stdout);
  if (stopped()) return 130;

  // --- libcgroup.
  std::printf("== the same reads through libcgroup ==\n");
  const LibcgroupReads lib = measureLibcgroup(set, h, budgets);
  std::printf("  cgroup_init(): %d%s%s\n", lib.initRc, lib.initRc == 0 ? " (ok)" : ": ",
              lib.initRc == 0 ? "" : cgroup_strerror(lib.initRc));
  if (lib.initRc == 0) {
    if (lib.getCgroupRc == 0) {
      std::printf("  value API: new_cgroup + add_controller(memory) + get_cgroup works here; %s\n",
                  lib.getValueNote.c_str());
    } else {
      std::printf(
          "  value API: cgroup_get_cgroup(\"%s\") after add_controller(memory) failed: "
          "%d (%s)%s%s\n",
          set.relative[0].c_str(), lib.getCgroupRc, cgroup_strerror(lib.getCgroupRc),
          lib.getCgroupErrno != 0 ? "; errno: " : "",
          lib.getCgroupErrno != 0 ? std::strerror(lib.getCgroupErrno) : "");
      std::printf("    cgroup_get_cgroup on the same pod by controller added first:");
      for (const auto& [controller, rc] : lib.getCgroupByController) {
        std::printf(" %s=%s", controller.c_str(), rc == 0 ? "ok" : std::to_string(rc).c_str());
      }
      std::printf("\n");
      if (lib.timedAll) {
        std::printf(
            "    with no controller added it works (it then loads every hierarchy's "
            "files): that\n    variant is timed below as the value API; %s\n",
            lib.getValueNote.c_str());
      } else {
        std::printf("    so the value API cannot be timed here\n");
      }
    }
    std::printf(
        "  also timed: cgroup_read_value_begin/end per file, cgroup_read_stats_begin/next/"
        "end for memory.stat\n");
    if (!lib.error.empty()) {
      std::printf("  cgroup_read_value path failed: %s\n", lib.error.c_str());
    } else {
      std::printf("  sanity: busy pod 0 usage via libcgroup %s bytes\n",
                  withCommas(lib.sampleUsage).c_str());
    }
    std::printf(
        "  per pod (each read timed alone)                median us     p99 us  vs nodewarden"
        "\n");
    auto row = [&](const char* label, const Samples& s, const Samples& reference) {
      if (s.count() == 0) {
        std::printf("    %-44s %10s %10s\n", label, "failed", "-");
        return;
      }
      std::printf("    %-44s %10.2f %10.2f   %6.1fx\n", label, s.median() * 1e-3, s.p99() * 1e-3,
                  s.median() / std::max(1.0, reference.median()));
    };
    row("usage  nodewarden readMemoryUsage", ours->usage, ours->usage);
    row(lib.timedAll ? "usage  libcgroup get_cgroup(all)+get_value"
                     : "usage  libcgroup get_cgroup+get_value",
        lib.valueApiUsage, ours->usage);
    row("usage  libcgroup read_value_begin/end", lib.readValueUsage, ours->usage);
    row("full   nodewarden (5 files)", ours->full, ours->full);
    row(lib.timedAll ? "full   libcgroup get_cgroup(all)+4 values+stats"
                     : "full   libcgroup get_cgroup+2 values+stats",
        lib.valueApiFull, ours->full);
    row("full   libcgroup read_value x4 + stats", lib.readValueFull, ours->full);
  }
  std::printf("\n");
  std::fflush(stdout);
  if (stopped()) return 130;

  // --- notification latency.
  std::printf("== v1 memory threshold notification (MemoryThresholdNotifier) ==\n");
  std::printf(
      "  per trial: a fresh child in a fresh-armed pod cgroup; threshold = usage + 64 MiB;"
      "\n  the child touches 128 MiB page by page (MADV_NOHUGEPAGE), logging each touch;"
      "\n  latency = parent's wake from poll(eventfd) - touch of the first page that takes"
      "\n  the usage (+4 KiB per page) above the threshold\n");
  std::fflush(stdout);
  const NotifyResults nr =
      measureNotification(sandbox, h, budgets.trials, budgets.trialSeconds, rng);
  std::optional<double> notifyP99Ms;
  // Prints one kind of trial; returns its median time per page touch.
  auto printTrials = [](const char* title, const NotifyFigures& nf) {
    const Samples lat = Samples::from(nf.latencyNs);
    const Samples late = Samples::from(nf.pagesLate);
    const Samples touch = Samples::from(nf.pageTouchNs);
    const Samples over = Samples::from(nf.wakeUsageOver);
    std::printf("  %s\n", title);
    std::printf(
        "    trials: %d attempted, %zu measured, %d timed out (5 s), %d woke before the "
        "estimated crossing\n",
        nf.attempted, lat.count(), nf.timedOut, nf.early);
    if (!nf.firstError.empty()) std::printf("    first failure: %s\n", nf.firstError.c_str());
    if (lat.count() == 0) return std::optional<Samples>();
    std::printf("    latency            p50 %8.3f ms  p99 %8.3f ms  max %8.3f ms  min %8.3f ms\n",
                lat.median() * 1e-6, lat.p99() * 1e-6, lat.nanos.back() * 1e-6, lat.min() * 1e-6);
    std::printf(
        "    pages touched past the crossing page at wake: p50 %.0f  p99 %.0f  max %.0f"
        "\n",
        late.median(), late.p99(), late.nanos.back());
    auto signedBytes = [](double v) {
      return v < 0 ? "-" + withCommas(std::uint64_t(-v)) : withCommas(std::uint64_t(v));
    };
    std::printf(
        "    usage at wake - threshold: p50 %s bytes;  child's time per page touch: "
        "p50 %.2f us\n",
        signedBytes(over.median()).c_str(), touch.median() * 1e-3);
    return std::optional<Samples>(lat);
  };
  if (!nr.skipped.empty()) {
    std::printf("  skipped: %s\n", nr.skipped.c_str());
  } else {
    auto threshold = printTrials("threshold (eventfd from cgroup.event_control):", nr.threshold);
    if (threshold) {
      notifyP99Ms = threshold->p99() * 1e-6;
      std::printf("      target p99 <= %.0f ms: %s\n", kNotifyP99TargetMillis,
                  verdict(*notifyP99Ms <= kNotifyP99TargetMillis));
    }
    auto baseline = printTrials(
        "baseline (no threshold: the child writes a pipe right after touching that page):",
        nr.baseline);
    if (threshold && baseline) {
      std::printf(
          "    threshold - baseline: p50 %+.3f ms, p99 %+.3f ms (the kernel's own delay in"
          " noticing)\n",
          (threshold->median() - baseline->median()) * 1e-6,
          (threshold->p99() - baseline->p99()) * 1e-6);
    }
    const Samples touch = Samples::from(nr.threshold.pageTouchNs);
    std::printf(
        "  why the crossing time is an estimate: v1 looks at thresholds once every 128 "
        "page charge\n  events per CPU, charges memory.usage_in_bytes up to 64 pages "
        "ahead (per-CPU stock),\n  and page tables are charged too: at %.2f us per page "
        "that is about +-%.2f ms\n",
        touch.median() * 1e-3, 128 * touch.median() * 1e-6);
    std::printf(
        "  polling memory.usage_in_bytes instead (computed, not measured: a crossing lands "
        "at a\n  uniformly random point of the interval; one read costs %.2f us a pod, "
        "above):\n",
        usageMedianUs);
    for (double interval : {1.0, 10.0}) {
      std::printf("    every %4.0f s: detection delay mean %6.0f ms, p99 %6.0f ms, max %6.0f ms\n",
                  interval, interval * 500, interval * 990, interval * 1000);
    }
  }
  std::printf("\n");
  std::fflush(stdout);
  if (stopped()) return 130;

  // --- scan and discovery, size by size on the same growing tree.
  std::printf(
      "== full scan (scanNode) and discovery (discoverHierarchy + PodCgroups::refresh) "
      "==\n");
  std::vector<SizeFigures> results;
  for (std::size_t size : sizes) {
    SizeFigures s;
    s.pods = size;
    std::printf("  -- %s pod cgroups (each in memory, cpuacct, pids, freezer, unified) --\n",
                withCommas(size).c_str());
    std::fflush(stdout);
    const std::size_t before = pods.size();
    const auto t0 = steadyNow();
    auto failed = growTo(sandbox, pods, size, rng);
    const double grewSeconds = nanosSince(t0) * 1e-9;
    createSeconds += grewSeconds;
    if (stopped()) return 130;
    if (failed) {
      std::printf("  cannot create more pod cgroups at %s: %s; stopping here\n",
                  withCommas(pods.size()).c_str(), failed->message.c_str());
      break;
    }
    s.createSeconds = createSeconds;
    const auto r0 = steadyNow();
    auto refreshed = index.refresh();
    s.refreshAddNs = nanosSince(r0);
    if (!refreshed || index.size() != pods.size()) {
      std::fprintf(stderr, "the pod index found %zu pods, expected %zu\n", index.size(),
                   pods.size());
      return 1;
    }
    std::printf(
        "    created %s more in %.2f s (%.2f ms per pod); all %s took %.2f s; the "
        "refresh that found them: %.2f ms\n",
        withCommas(pods.size() - before).c_str(), grewSeconds,
        pods.size() > before ? grewSeconds * 1e3 / double(pods.size() - before) : 0.0,
        withCommas(pods.size()).c_str(), createSeconds, s.refreshAddNs * 1e-6);
    std::fflush(stdout);
    if (!measureScanAndDiscovery(s, index, sandbox, budgets)) return stopped() ? 130 : 1;
    std::printf("    first scan (opens every control file)      %8.2f ms\n", s.firstScanNs * 1e-6);
    printMillisLine("scanNode", s.scan);
    std::printf("      %.2f us per pod (median); %zu pods in the summary; %zu read errors%s%s\n",
                s.scan.median() * 1e-3 / double(size), s.scanPods, s.scanErrors,
                s.scanError.empty() ? "" : ", first: ", s.scanError.c_str());
    if (size == std::size_t(kScanTargetPods)) {
      std::printf("      target <= %.0f ms (median): %s\n", kScanTargetMillis,
                  verdict(s.scan.median() * 1e-6 <= kScanTargetMillis));
    }
    printMillisLine("discoverHierarchy + fresh refresh", s.discover);
    printMillisLine("  discoverHierarchy", s.discoverOnly);
    printMillisLine("  refresh of a new PodCgroups", s.refreshFresh);
    printMillisLine("  (untimed) destroying it: closing dirs", s.closeFresh);
    printMillisLine("refresh, nothing changed", s.noopRefresh);
    std::fflush(stdout);
    results.push_back(std::move(s));
  }

  // --- summary.
  std::printf("\n== summary ==\n");
  std::printf("%8s | %9s | %9s %9s %9s | %10s %9s | %10s\n", "pods", "create s", "scan ms",
              "p99 ms", "us/pod", "discover", "no-op", "first scan");
  std::printf("%8s | %9s | %9s %9s %9s | %10s %9s | %10s\n", "", "(cumul.)", "median", "", "",
              "ms median", "ms median", "ms");
  for (const SizeFigures& s : results) {
    std::printf("%8s | %9.2f | %9.2f %9.2f %9.2f | %10.2f %9.2f | %10.2f\n",
                withCommas(s.pods).c_str(), s.createSeconds, s.scan.median() * 1e-6,
                s.scan.p99() * 1e-6, s.scan.median() * 1e-3 / double(s.pods),
                s.discover.median() * 1e-6, s.noopRefresh.median() * 1e-6, s.firstScanNs * 1e-6);
  }
  std::printf("\ntargets (verdicts on the median, notification on p99):\n");
  std::printf("  usage-only read per pod   %8.2f us  <= %5.0f us  %s\n", usageMedianUs,
              kUsageTargetMicros, verdict(usageMedianUs <= kUsageTargetMicros));
  std::printf("  full read per pod         %8.2f us  <= %5.0f us  %s\n", fullMedianUs,
              kFullTargetMicros, verdict(fullMedianUs <= kFullTargetMicros));
  const SizeFigures* at1000 = nullptr;
  for (const SizeFigures& s : results) {
    if (s.pods == std::size_t(kScanTargetPods)) at1000 = &s;
  }
  if (at1000 != nullptr) {
    const double ms = at1000->scan.median() * 1e-6;
    std::printf("  full scan of 1,000 pods   %8.2f ms  <= %5.0f ms  %s\n", ms, kScanTargetMillis,
                verdict(ms <= kScanTargetMillis));
  } else {
    std::printf("  full scan of 1,000 pods   not measured (1000 not in --sizes)\n");
  }
  if (notifyP99Ms) {
    std::printf("  notification p99          %8.2f ms  <= %5.0f ms  %s\n", *notifyP99Ms,
                kNotifyP99TargetMillis, verdict(*notifyP99Ms <= kNotifyP99TargetMillis));
  } else {
    std::printf("  notification p99          not measured\n");
  }
  std::printf(
      "\nOn a shared VM medians move between runs: run it twice before trusting a verdict"
      " near its target.\n");
  return 0;
}

int run(int argc, char** argv) {
  std::vector<std::size_t> sizes = {100, 1000, 5000};
  bool sizesGiven = false;
  bool quick = false;
  int trials = 0;
  Args args(printUsage);
  args.flag("--quick", quick)
      .value("--sizes", "numbers from 100 to 20000 separated by commas",
             [&](std::string_view text) {
               auto parsed = parseSizes(text);
               if (parsed) sizes = *parsed;
               sizesGiven = sizesGiven || parsed.has_value();
               return parsed.has_value();
             })
      .number("--trials", trials, 1, 10000);
  if (auto status = args.parse(argc, argv)) return *status;
  if (quick && !sizesGiven) sizes = {100, 1000};
  Budgets budgets = budgetsFor(quick);
  if (trials > 0) budgets.trials = trials;

  auto hierarchy =
      hierarchyForSandbox("bench_cgroups", "it creates cgroups and moves processes into them");
  if (!hierarchy) return 77;
  const cgroups::Hierarchy& h = *hierarchy;
  printEnvironment("nodewarden cgroup benchmark",
                   "; this binary only (cgroups/ is compiled with the same flags)", false, true);
  printHierarchy(h);
  std::printf("  mode: %s; single threaded, not pinned; times from steady_clock\n\n",
              quick ? "--quick" : "full");
  std::fflush(stdout);
  installStopHandlers();

  auto descriptorsFor = [](std::size_t pods) {
    return std::uint64_t(pods) * kDescriptorsPerPod + kDescriptorSlack;
  };
  const std::uint64_t wantedFiles = descriptorsFor(sizes.back());
  auto limit = cgroups::raiseOpenFileLimit(wantedFiles);
  if (!limit) {
    std::printf("bench_cgroups: skipped: %s\n", limit.error().message.c_str());
    return 77;
  }
  std::printf("open file limit (RLIMIT_NOFILE soft): %s; wanted %s (%llu per pod + %llu)\n",
              withCommas(*limit).c_str(), withCommas(wantedFiles).c_str(),
              static_cast<unsigned long long>(kDescriptorsPerPod),
              static_cast<unsigned long long>(kDescriptorSlack));
  if (*limit < wantedFiles) {
    // A size that does not fit is replaced by the largest multiple of 100 that does, so the
    // run still says something about a big node; the figures say which size was measured.
    const std::size_t fit =
        std::size_t((*limit - std::min(*limit, kDescriptorSlack)) / kDescriptorsPerPod / 100 * 100);
    std::vector<std::size_t> kept;
    for (std::size_t size : sizes) {
      if (descriptorsFor(size) <= *limit) {
        kept.push_back(size);
      } else if (fit >= kReadPods && (kept.empty() || kept.back() < fit)) {
        std::printf("  %s pods would need %s descriptors: measuring %s pods instead\n",
                    withCommas(size).c_str(), withCommas(descriptorsFor(size)).c_str(),
                    withCommas(fit).c_str());
        kept.push_back(fit);
      } else {
        std::printf("  %s pods would need %s descriptors: not measured\n", withCommas(size).c_str(),
                    withCommas(descriptorsFor(size)).c_str());
      }
    }
    rlimit hard{};
    ::getrlimit(RLIMIT_NOFILE, &hard);
    std::printf(
        "  (the hard limit is %s; raising it needs CAP_SYS_RESOURCE, which this process "
        "%s)\n",
        withCommas(std::uint64_t(hard.rlim_max)).c_str(),
        cgroups::hasCapSysResource() ? "has" : "lacks");
    if (kept.empty()) {
      std::printf("bench_cgroups: skipped: the open file limit is too low even for %zu pods\n",
                  kReadPods);
      return 77;
    }
    sizes = kept;
  }

  auto opened = openSandbox(h, "bench_cgroups", kSandboxPrefix);
  if (!opened) return 77;
  Sandbox& sandbox = *opened;
  std::printf("sandbox: %s/%s (and the same below the other hierarchy roots)\n\n", h.memory.c_str(),
              sandbox.kubepods().c_str());
  std::fflush(stdout);

  const auto start = steadyNow();
  int status = runMeasurements(sandbox, h, sizes, budgets);
  if (stopped()) {
    std::printf("\ninterrupted: removing the sandbox\n");
    status = 130;
  }

  const bool removed = closeSandbox(sandbox);
  std::printf("total wall time %.1f s (sink %llu)\n", nanosSince(start) * 1e-9,
              static_cast<unsigned long long>(gSink));
  if (!removed && status == 0) status = 1;
  return status;
}

}  // namespace
}  // namespace nodewarden::bench

int main(int argc, char** argv) {
  return nodewarden::bench::run(argc, argv);
}
