// bench_cgroups: what reading and watching pod cgroups costs on this machine's real kernel.
//
// In a sandbox of kubelet-shaped pod cgroups ("nodewarden-bench-<pid>" below each hierarchy
// root, qosMix) it times: readMemoryUsage, and readMemory + readCpuNanos + readProcessCount, on
// 100 pods (10 holding 8 MiB), each read alone on descriptors already open, then the same
// through libcgroup; a v1 memory threshold armed 64 MiB above a pod's usage while a child
// touches 128 MiB page by page, from the touch of the crossing page to poll() returning, beside
// a baseline where the child writes a pipe at that page; and at 100, 1,000 and 5,000 pod
// cgroups (as many as RLIMIT_NOFILE allows) scanNode, discovery + a fresh index, and a refresh
// finding nothing. Exit 0 after a run (a missed target only prints MISSES), 77 when the machine
// cannot run it, 1 when a read fails, 130 after SIGINT/SIGTERM. The sandbox goes on every path
// out (or with the next run after a kill). Single threaded, not pinned; times from steady_clock.

#include <libcgroup.h>
#include <sys/resource.h>

#include <atomic>
#include <memory>

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
constexpr std::size_t kReadPods = 100, kBusyPods = 10;  // the read set; its first 10 hold 8 MiB
constexpr std::size_t kBusyBytes = 8 * kMi;
constexpr std::uint64_t kThresholdMargin = 64 * kMi;  // threshold = usage + 64 MiB
constexpr std::size_t kTouchBytes = 128 * kMi;        // what the notification child touches
// A scanned pod holds 5 directories and 5 control files open; discovery closes the files and
// opens a fresh index's 5 directories beside the old: 10 a pod at the peak either way.
constexpr std::uint64_t kDescriptorsPerPod = 10;
constexpr std::uint64_t kDescriptorSlack = 512;  // stdio, pipes, libcgroup, the node's files
constexpr double kUsageTargetMicros = 2, kFullTargetMicros = 20;
constexpr std::size_t kScanTargetPods = 1000;
constexpr double kScanTargetMillis = 25, kNotifyP99TargetMillis = 5;

constexpr const char* kUsage =
    "usage: bench_cgroups [--sizes N[,N...]] [--quick] [--trials N] [--help]\n"
    "\n"
    "Times nodewarden's cgroup readers, scan, discovery and v1 memory threshold\n"
    "notifications on real cgroups it creates (\"nodewarden-bench-<pid>\" below each hierarchy\n"
    "root) and removes again. Needs root.\n"
    "  --sizes 100,1000   pod cgroups for the scan and discovery (default 100,1000,5000;\n"
    "                     with --quick 100,1000); each from 100 to 20000\n"
    "  --quick            fewer repetitions and 10 notification trials (a smoke run)\n"
    "  --trials N         notification trials (default 50, --quick 10), 1 to 10000\n"
    "  --help             this text\n"
    "Targets: <= 2 us per pod usage-only, <= 20 us per pod full read, <= 25 ms for a\n"
    "full scan of 1000 pods, notification p99 <= 5 ms. A missed target prints MISSES but\n"
    "does not change the exit status. Exit 77: the machine cannot run it.\n";

// Passes over the read set; the same through cgroup_read_value_* and cgroup_get_cgroup; scans;
// discoveries; refreshes finding nothing; the notification trials and their wall time.
struct Budgets {
  Budget reads, readValue, valueApi, scan, discovery, noopRefresh;
  int trials;
  double trialSeconds;
};
constexpr Budgets kQuickBudgets = {{3, 50, .3}, {2, 20, .3}, {1, 3, .3}, {3, 10, .5},
                                   {2, 5, 1},   {3, 20, .3}, 10,         30};
constexpr Budgets kFullBudgets = {{20, 5000, 2}, {10, 500, 2},   {3, 50, 2}, {10, 300, 4},
                                  {5, 40, 5},    {20, 500, 1.5}, 50,         300};

// Per-pod reads in microseconds, scans and discovery in milliseconds.
void printLine(const char* label, const Samples& s, bool millis = false) {
  printSamplesLine(44, label, s, millis ? 1e6 : 1e3, millis ? "ms" : "us");
}

// Whether `result` holds a value (added to gSink when `sink`); if not, `error` keeps the first.
template <typename T>
bool kept(const Result<T>& result, std::string& error, bool sink = false) {
  if (!result && error.empty()) error = result.error().message;
  if constexpr (std::is_arithmetic_v<T>) {
    if (result && sink) gSink = gSink + std::uint64_t(*result);
  }
  return bool(result);
}

struct BenchPod {
  std::string uid, relative;  // relative: below each hierarchy root (for libcgroup)
};

// Adds pod cgroups until there are `target`; the error when one cannot be made (e.g. the
// kernel's 65,535 memory cgroup IDs are used up).
std::optional<Error> growTo(Sandbox& sandbox, std::vector<BenchPod>& pods, std::size_t target,
                            Random& rng) {
  while (pods.size() < target && !stopped()) {
    std::string uid = rng.uuid();
    auto relative = sandbox.addPod(uid, qosMix(pods.size()));
    if (!relative) return relative.error();
    pods.push_back({std::move(uid), *relative});
  }
  return std::nullopt;
}

// Reads one pod fully, as scanNode does.
bool readFull(const PodCgroup& pod, std::string& buffer, std::string& error) {
  auto memory = cgroups::readMemory(pod.memory, buffer);
  if (!kept(memory, error)) return false;
  gSink = gSink + memory->workingSet;
  if (pod.cpu && !kept(cgroups::readCpuNanos(*pod.cpu, buffer), error, true)) return false;
  return kept(cgroups::readProcessCount(pod, buffer), error, true);
}

// Passes over `pods` reads within `budget`, each read timed alone (`nanos` in read order), and
// the median of a whole pass per pod (timer included). The first failed read ends the reading.
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
      r.failed = !readOne(i);
      r.nanos.push_back(nanosSince(t0));
    }
    return nanosSince(passStart) / double(pods);
  });
  r.passPerPod = passes.median();
  return r;
}

struct OurReads {
  Samples usage, full;  // readMemoryUsage; readMemory + readCpuNanos + readProcessCount
};

// nodewarden's readers on kept-open descriptors, printed; nullopt when a read failed.
std::optional<OurReads> measureOurReads(const std::vector<const PodCgroup*>& pods,
                                        const Budgets& budgets) {
  std::string buffer, error;
  bool failed = false;
  for (const PodCgroup* pod : pods) failed = failed || !readFull(*pod, buffer, error);  // opens
  const Samples timer = measure({1000, 100000, 0.05}, [] { return nanosSince(steadyNow()); });
  std::printf("    (each read timed alone; timer overhead %.0f ns per timed read is included)\n",
              timer.median());
  std::vector<double> inOrder;  // the last kind of read's times, in read order
  // Times one kind of read and prints it, with its target when it has one.
  auto each = [&](const char* label, double targetUs, auto&& readOne) {
    EachRead e = failed ? EachRead{} : timeEachRead(budgets.reads, pods.size(), readOne);
    failed = failed || e.failed;
    const Samples s = Samples::from(e.nanos);
    inOrder = std::move(e.nanos);
    if (!failed) printLine(label, s);
    if (!failed && targetUs > 0) {
      std::printf("      target <= %.0f us (median): %s;  a whole pass: %.2f us per pod\n",
                  targetUs, verdict(s.median() * 1e-3 <= targetUs), e.passPerPod * 1e-3);
    }
    return s;
  };
  OurReads r;
  r.usage = each("usage only: readMemoryUsage", kUsageTargetMicros, [&](std::size_t i) {
    return kept(cgroups::readMemoryUsage(pods[i]->memory, buffer), error, true);
  });
  r.full = each("full: readMemory+readCpuNanos+readProcessCount", kFullTargetMicros,
                [&](std::size_t i) { return readFull(*pods[i], buffer, error); });
  std::vector<double> byPod[2];  // the full reads of the busy pods, of the empty pods
  for (std::size_t k = 0; k < inOrder.size(); ++k) {
    byPod[k % pods.size() < kBusyPods ? 0 : 1].push_back(inOrder[k]);
  }
  if (!failed) {
    printLine("  full, the 10 pods with a process", Samples::from(std::move(byPod[0])));
    printLine("  full, the 90 empty pods", Samples::from(std::move(byPod[1])));
  }
  each("  readMemory (usage + memory.stat + limit)", 0,
       [&](std::size_t i) { return kept(cgroups::readMemory(pods[i]->memory, buffer), error); });
  each("    memory.stat pread alone (not parsed)", 0, [&](std::size_t i) {
    return kept(pods[i]->memory.read(CgroupDir::File::MemoryStat, buffer), error);
  });
  each("  readCpuNanos (cpuacct.usage)", 0, [&](std::size_t i) {
    return !pods[i]->cpu || kept(cgroups::readCpuNanos(*pods[i]->cpu, buffer), error);
  });
  each("  readProcessCount (pids.current)", 0,
       [&](std::size_t i) { return kept(cgroups::readProcessCount(*pods[i], buffer), error); });
  if (!failed) return r;
  std::fprintf(stderr, "reading a pod cgroup failed: %s\n", error.c_str());
  return std::nullopt;
}

// "memory" of "memory.usage_in_bytes".
std::string controllerOf(std::string_view file) {
  return std::string(file.substr(0, file.find('.')));
}

// cgroup_read_value_begin + end: the first line of one control file.
Result<std::uint64_t> readValue(const std::string& relative, const char* file) {
  char name[64], buffer[128];
  std::snprintf(name, sizeof name, "%s", file);  // the API takes a mutable name
  const std::string controller = controllerOf(file);
  void* handle = nullptr;
  const int rc = cgroup_read_value_begin(controller.c_str(), relative.c_str(), name, &handle,
                                         buffer, sizeof buffer);
  if (handle != nullptr) cgroup_read_value_end(&handle);
  if (rc == 0) return cgroups::parseUint(buffer);
  return Error{"cgroup_read_value_begin(" + controller + ", " + relative + ", " + file +
               "): " + cgroup_strerror(rc)};
}

// cgroup_read_stats_begin/next/end over memory.stat: the hierarchical inactive_file.
Result<std::uint64_t> readInactiveFile(const std::string& relative) {
  void* handle = nullptr;
  cgroup_stat stat{};
  Result<std::uint64_t> inactive = Error{"memory.stat of " + relative + ": no total_inactive_file"};
  int rc = cgroup_read_stats_begin("memory", relative.c_str(), &handle, &stat);
  for (; rc == 0; rc = cgroup_read_stats_next(&handle, &stat)) {
    if (std::strcmp(stat.name, "total_inactive_file") == 0)
      inactive = cgroups::parseUint(stat.value);
  }
  if (handle != nullptr) cgroup_read_stats_end(&handle);
  if (rc == ECGEOF) return inactive;
  return Error{"cgroup_read_stats_begin(memory, " + relative + "): " + cgroup_strerror(rc)};
}

// The value API: cgroup_get_cgroup loads the cgroup from the kernel (only `controller`'s files
// when one is added, the documented way to limit what is loaded; else every hierarchy's), then
// values come from the copy. `full`: also the limit, CPU, processes, and memory.stat.
struct ValueApi {
  int rc = 0, lastErrno = 0;  // cgroup_get_cgroup's; errno with ECGOTHER
  int valueRc = 0;            // the first failed cgroup_get_value_uint64's
  std::uint64_t usage = 0;
};

ValueApi valueApi(const std::string& relative, const char* controller, bool full) {
  ValueApi out;
  cgroup* group = cgroup_new_cgroup(relative.c_str());
  if (group == nullptr) return {ECGFAIL};
  if (controller != nullptr) cgroup_add_controller(group, controller);
  out.rc = cgroup_get_cgroup(group);
  if (out.rc == ECGOTHER) out.lastErrno = cgroup_get_last_errno();
  auto get = [&](const char* name) {
    u_int64_t value = 0;
    cgroup_controller* c = cgroup_get_controller(group, controllerOf(name).c_str());
    const int rc = c == nullptr ? ECGROUPVALUENOTEXIST : cgroup_get_value_uint64(c, name, &value);
    if (out.valueRc == 0) out.valueRc = rc;
    gSink = gSink + value;
    return value;
  };
  if (out.rc == 0) out.usage = get("memory.usage_in_bytes");
  if (out.rc == 0 && full) {
    for (const char* file : {"memory.limit_in_bytes", "cpuacct.usage", "pids.current"}) get(file);
    // memory.stat is a "stats" file: the value API does not carry it.
    if (auto inactive = readInactiveFile(relative)) gSink = gSink + *inactive;
  }
  cgroup_free(&group);
  return out;
}

// Probes the value API on `pod` and prints what works: the controller to add for the timed runs
// (nullptr: none, so every hierarchy), or nullopt when it cannot be timed here.
std::optional<const char*> probeValueApi(const std::string& pod) {
  auto note = [](const ValueApi& r) {
    return r.valueRc == 0 ? "usage " + withCommas(r.usage) + " bytes"
                          : std::string("cgroup_get_value_uint64: ") + cgroup_strerror(r.valueRc);
  };
  const ValueApi memory = valueApi(pod, "memory", false);
  if (memory.rc == 0) {
    std::printf("  value API: new_cgroup + add_controller(memory) + get_cgroup works here; %s\n",
                note(memory).c_str());
    return "memory";
  }
  std::printf(
      "  value API: cgroup_get_cgroup(\"%s\") after add_controller(memory) failed: %d (%s)%s%s\n"
      "    cgroup_get_cgroup on the same pod by controller added first:",
      pod.c_str(), memory.rc, cgroup_strerror(memory.rc), memory.lastErrno != 0 ? "; errno: " : "",
      memory.lastErrno != 0 ? std::strerror(memory.lastErrno) : "");
  ValueApi all;  // with no controller added
  for (const char* controller : {"", "memory", "cpuacct", "pids", "freezer"}) {
    const ValueApi r = valueApi(pod, *controller != '\0' ? controller : nullptr, false);
    if (*controller == '\0') all = r;
    std::printf(" %s=%s", *controller != '\0' ? controller : "(none)",
                r.rc == 0 ? "ok" : std::to_string(r.rc).c_str());
  }
  if (all.rc != 0) {
    std::printf("\n    so the value API cannot be timed here\n");
    return std::nullopt;
  }
  std::printf(
      "\n    with no controller added it works (it then loads every hierarchy's files): that\n"
      "    variant is timed below as the value API; %s\n",
      note(all).c_str());
  return nullptr;
}

void measureLibcgroup(const std::vector<BenchPod>& pods, const cgroups::Hierarchy& h,
                      const Budgets& budgets, const OurReads& ours) {
  // discoverHierarchy already ran cgroup_init once; again only re-reads the mount table.
  const int initRc = cgroup_init();
  std::printf("  cgroup_init(): %d%s%s\n", initRc, initRc == 0 ? " (ok)" : ": ",
              initRc == 0 ? "" : cgroup_strerror(initRc));
  if (initRc != 0) return;
  auto perPod = [&](const Budget& budget, auto&& readOne) {
    return Samples::from(timeEachRead(budget, kReadPods, readOne).nanos);
  };
  const std::optional<const char*> controller = probeValueApi(pods[0].relative);
  Samples valueUsage, valueFull, readUsage, readFull;
  // With only memory added, cpuacct.usage and pids.current are not loaded: the full figure then
  // lacks them (its label says so).
  for (bool full : {false, true}) {
    if (!controller) break;
    (full ? valueFull : valueUsage) = perPod(budgets.valueApi, [&](std::size_t i) {
      return valueApi(pods[i].relative, *controller, full).rc == 0;
    });
  }
  std::printf(
      "  also timed: cgroup_read_value_begin/end per file, cgroup_read_stats_begin/next/end for "
      "memory.stat\n");
  std::string error;
  const bool cpu = !h.cpuacct.empty() && h.cpuVersion == cgroups::Version::V1;
  const bool pids = !h.pids.empty() && h.pidsVersion == cgroups::Version::V1;
  const auto pod0Usage = readValue(pods[0].relative, "memory.usage_in_bytes");
  if (kept(pod0Usage, error)) {
    readUsage = perPod(budgets.readValue, [&](std::size_t i) {
      return kept(readValue(pods[i].relative, "memory.usage_in_bytes"), error, true);
    });
    readFull = perPod(budgets.readValue, [&](std::size_t i) {
      const std::string& pod = pods[i].relative;
      auto usage = readValue(pod, "memory.usage_in_bytes");
      auto inactive = kept(usage, error) ? readInactiveFile(pod) : usage;
      auto limit = kept(inactive, error) ? readValue(pod, "memory.limit_in_bytes") : inactive;
      if (!kept(limit, error)) return false;
      gSink = gSink + cgroups::workingSet(*usage, *inactive) + *limit;
      return (!cpu || kept(readValue(pod, "cpuacct.usage"), error, true)) &&
             (!pids || kept(readValue(pod, "pids.current"), error, true));
    });
  }
  if (!error.empty()) {
    std::printf("  cgroup_read_value path failed: %s\n", error.c_str());
  } else {
    std::printf("  sanity: busy pod 0 usage via libcgroup %s bytes\n",
                withCommas(*pod0Usage).c_str());
  }
  const bool all = controller && *controller == nullptr;
  const std::pair<const char*, const Samples*> rows[] = {
      {"usage  nodewarden readMemoryUsage", &ours.usage},
      {all ? "usage  libcgroup get_cgroup(all)+get_value" : "usage  libcgroup get_cgroup+get_value",
       &valueUsage},
      {"usage  libcgroup read_value_begin/end", &readUsage},
      {"full   nodewarden (5 files)", &ours.full},
      {all ? "full   libcgroup get_cgroup(all)+4 values+stats"
           : "full   libcgroup get_cgroup+2 values+stats",
       &valueFull},
      {"full   libcgroup read_value x4 + stats", &readFull}};
  std::printf(
      "  per pod (each read timed alone)                median us     p99 us  vs nodewarden\n");
  for (std::size_t k = 0; k < std::size(rows); ++k) {
    const auto& [label, s] = rows[k];
    const double reference = std::max(1.0, (k < 3 ? ours.usage : ours.full).median());
    if (s->count() == 0) {
      std::printf("    %-44s %10s %10s\n", label, "failed", "-");
    } else {
      std::printf("    %-44s %10.2f %10.2f   %6.1fx\n", label, s->median() * 1e-3, s->p99() * 1e-3,
                  s->median() / reference);
    }
  }
}

const std::size_t gPageSize = std::size_t(::sysconf(_SC_PAGESIZE));

// Shared by the notification child and the parent (MAP_SHARED; the parent zeroes it before each
// trial, so its pages are charged to the parent's cgroup, not the pod's).
struct TouchLog {
  std::int64_t progress;  // pages touched so far (atomic_ref)
  std::int64_t pingPage;  // the child writes 'p' on its ready pipe after touching it (-1: never)
  std::int64_t touchedAt[kTouchBytes / 4096];  // when page i was about to be touched
};

// The child, in the pod cgroup: says 'r' once its memory is mapped; on 'g' touches it page by
// page, logging each touch (and saying 'p' after the ping page); then says 'd' and exits.
int touchOnSignal(int readyFd, int goFd, TouchLog& log, pid_t parent) {
  static constexpr char kReady = 'r', kPing = 'p', kDone = 'd';
  const std::size_t pages = kTouchBytes / gPageSize;
  if (!dieWithParent(parent)) return 0;
  volatile char* bytes = mapSmallPages(kTouchBytes);
  char go = 0;
  if (bytes == nullptr || ::write(readyFd, &kReady, 1) != 1) return 2;
  if (::read(goFd, &go, 1) != 1 || go != 'g') return 4;
  const std::int64_t ping = log.pingPage;
  for (std::size_t i = 0; i < pages && !stopped(); ++i) {
    log.touchedAt[i] = monotonicNanos();
    bytes[i * gPageSize] = 1;
    std::atomic_ref(log.progress).store(std::int64_t(i + 1), std::memory_order_release);
    if (std::int64_t(i) == ping && ::write(readyFd, &kPing, 1) != 1) return 6;
  }
  return ::write(readyFd, &kDone, 1) == 1 ? 0 : 5;
}

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

// A trial once its child runs: nullopt when measured, else why not ("" on a stop). In a baseline
// trial no threshold is armed: the child writes its ready pipe right after touching the
// crossing page. Same child, same loop, same wake-up through the scheduler: what the threshold
// adds is the kernel's own delay in noticing the crossing.
std::optional<std::string> measureTrial(const CgroupDir& dir, TouchLog& log, bool baseline,
                                        int readyFd, int goFd, NotifyFigures& f) {
  std::string buffer;
  if (readByte(readyFd, 5000) != 'r') return "the child did not get ready";
  auto before = cgroups::readMemoryUsage(dir, buffer);
  if (!before) return before.error().message;
  const std::uint64_t threshold = *before + kThresholdMargin;
  // The first page whose touch takes the usage above it, at one page a touch from `before`.
  const std::size_t crossing = std::size_t(kThresholdMargin / gPageSize);
  log.pingPage = baseline ? std::int64_t(crossing) : -1;
  std::optional<cgroups::MemoryThresholdNotifier> notifier;  // v1: replaced, never moved
  if (!baseline) {
    auto armed = cgroups::MemoryThresholdNotifier::arm(dir, threshold);
    if (!armed) return armed.error().message;
    notifier.emplace(std::move(armed).value());
  }
  static constexpr char kGo = 'g';
  if (::write(goFd, &kGo, 1) != 1) return "writing the go signal failed";
  const int n = waitReadable(baseline ? readyFd : notifier->fd(), 5000);
  const std::int64_t wokeAt = monotonicNanos();
  const std::int64_t progressAtWake = std::atomic_ref(log.progress).load(std::memory_order_acquire);
  if (stopped()) return "";
  f.timedOut += n <= 0;
  if (n <= 0) return baseline ? "no ping within 5 s" : "no threshold event within 5 s";
  auto usageAtWake = cgroups::readMemoryUsage(dir, buffer);
  if (baseline && readByte(readyFd, 1000) != 'p') return "the child's ping was not 'p'";
  if (readByte(readyFd, 10000) != 'd') return "the child did not finish touching its memory";
  const std::size_t last = kTouchBytes / gPageSize - 1;
  f.latencyNs.push_back(double(wokeAt - log.touchedAt[crossing]));
  f.early += wokeAt < log.touchedAt[crossing];
  f.pagesLate.push_back(double(progressAtWake) - double(crossing));
  f.pageTouchNs.push_back(double(log.touchedAt[last] - log.touchedAt[0]) / double(last));
  if (usageAtWake) f.wakeUsageOver.push_back(double(*usageAtWake) - double(threshold));
  return std::nullopt;
}

// `trials` threshold trials and as many baseline trials in the pod cgroup `relative`,
// alternating so that both see the same machine, within `seconds`: {threshold, baseline}.
std::array<NotifyFigures, 2> runTrials(Sandbox& sandbox, const std::string& relative,
                                       const CgroupDir& dir, TouchLog& log,
                                       const Budgets& budgets) {
  std::array<NotifyFigures, 2> figures;
  const auto start = steadyNow();
  for (int trial = 0;
       trial < 2 * budgets.trials && !stopped() && nanosSince(start) * 1e-9 < budgets.trialSeconds;
       ++trial) {
    NotifyFigures& f = figures[trial % 2];
    ++f.attempted;
    std::memset(&log, 0, sizeof log);
    Pipe ready, go;
    Result<pid_t> child = Error{std::string("pipe: ") + std::strerror(errno)};
    if (ready.ok && go.ok) {
      child = sandbox.spawn(relative, [&, self = ::getpid()] {
        ::close(ready.fd[0]);
        ::close(go.fd[1]);
        return touchOnSignal(ready.fd[1], go.fd[0], log, self);
      });
    }
    ready.close(1);
    go.close(0);
    const auto why = child ? measureTrial(dir, log, trial % 2 == 1, ready.fd[0], go.fd[1], f)
                           : std::optional(child.error().message);
    if (why && !why->empty() && f.firstError.empty()) {
      f.firstError = "trial " + std::to_string(trial) + ": " + *why;
    }
    if (!child) break;
    // Kills the child if it still runs and waits (bounded) without reaping, then lets the
    // sandbox reap: it kills the children it recorded at the end, so it must forget them.
    ::kill(*child, SIGKILL);
    for (int i = 0; i < 5000 && !exited(*child); ++i) sleepMillis(1);
    sandbox.reap();
  }
  return figures;
}

// Prints one kind of trial; its latencies when any were measured.
std::optional<Samples> printTrials(const char* title, const NotifyFigures& nf) {
  const Samples lat = Samples::from(nf.latencyNs);
  std::printf(
      "  %s\n    trials: %d attempted, %zu measured, %d timed out (5 s), %d woke before the "
      "estimated crossing\n",
      title, nf.attempted, lat.count(), nf.timedOut, nf.early);
  if (!nf.firstError.empty()) std::printf("    first failure: %s\n", nf.firstError.c_str());
  if (lat.count() == 0) return std::nullopt;
  const Samples late = Samples::from(nf.pagesLate);
  const double over = Samples::from(nf.wakeUsageOver).median();
  std::printf(
      "    latency            p50 %8.3f ms  p99 %8.3f ms  max %8.3f ms  min %8.3f ms\n"
      "    pages touched past the crossing page at wake: p50 %.0f  p99 %.0f  max %.0f\n"
      "    usage at wake - threshold: p50 %s%s bytes;  child's time per page touch: p50 %.2f us\n",
      lat.median() * 1e-6, lat.p99() * 1e-6, lat.nanos.back() * 1e-6, lat.min() * 1e-6,
      late.median(), late.p99(), late.nanos.back(), over < 0 ? "-" : "",
      withCommas(std::uint64_t(std::abs(over))).c_str(),
      Samples::from(nf.pageTouchNs).median() * 1e-3);
  return lat;
}

// Measures and prints the notification; the threshold trials' p99 in ms when measured.
std::optional<double> measureNotification(Sandbox& sandbox, const cgroups::Hierarchy& h,
                                          const Budgets& budgets, Random& rng, double usageUs) {
  std::printf(
      "== v1 memory threshold notification (MemoryThresholdNotifier) ==\n"
      "  per trial: a fresh child in a fresh-armed pod cgroup; threshold = usage + 64 MiB;\n"
      "  the child touches 128 MiB page by page (MADV_NOHUGEPAGE), logging each touch;\n"
      "  latency = parent's wake from poll(eventfd) - touch of the first page that takes\n"
      "  the usage (+4 KiB per page) above the threshold\n");
  std::fflush(stdout);
  auto relative = sandbox.addPod(rng.uuid(), "burstable");
  auto dir = relative ? CgroupDir::open(h.memory + "/" + *relative, cgroups::Version::V1)
                      : Result<CgroupDir>(relative.error());
  void* log =
      ::mmap(nullptr, sizeof(TouchLog), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  std::string skipped = log == MAP_FAILED ? "mmap of the touch log failed" : "";
  if (h.memoryVersion != cgroups::Version::V1) {
    skipped = "the memory controller is on cgroup v2 (no cgroup.event_control thresholds)";
  } else if (!dir) {
    skipped = "cannot make the pod cgroup: " + dir.error().message;
  }
  std::array<NotifyFigures, 2> nf;
  if (skipped.empty())
    nf = runTrials(sandbox, *relative, *dir, *static_cast<TouchLog*>(log), budgets);
  if (log != MAP_FAILED) ::munmap(log, sizeof(TouchLog));
  if (relative) (void)sandbox.removeCgroup(*relative);
  if (!skipped.empty()) {
    std::printf("  skipped: %s\n", skipped.c_str());
    return std::nullopt;
  }
  std::optional<double> p99Ms;
  auto threshold = printTrials("threshold (eventfd from cgroup.event_control):", nf[0]);
  if (threshold) {
    p99Ms = threshold->p99() * 1e-6;
    std::printf("      target p99 <= %.0f ms: %s\n", kNotifyP99TargetMillis,
                verdict(*p99Ms <= kNotifyP99TargetMillis));
  }
  auto baseline = printTrials(
      "baseline (no threshold: the child writes a pipe right after touching that page):", nf[1]);
  if (threshold && baseline) {
    std::printf(
        "    threshold - baseline: p50 %+.3f ms, p99 %+.3f ms (the kernel's own delay in "
        "noticing)\n",
        (threshold->median() - baseline->median()) * 1e-6,
        (threshold->p99() - baseline->p99()) * 1e-6);
  }
  const double touchUs = Samples::from(nf[0].pageTouchNs).median() * 1e-3;
  std::printf(
      "  why the crossing time is an estimate: v1 looks at thresholds once every 128 page charge\n"
      "  events per CPU, charges memory.usage_in_bytes up to 64 pages ahead (per-CPU stock),\n"
      "  and page tables are charged too: at %.2f us per page that is about +-%.2f ms\n"
      "  polling memory.usage_in_bytes instead (computed, not measured: a crossing lands at a\n"
      "  uniformly random point of the interval; one read costs %.2f us a pod, above):\n",
      touchUs, 128 * touchUs * 1e-3, usageUs);
  for (double interval : {1.0, 10.0}) {
    std::printf("    every %4.0f s: detection delay mean %6.0f ms, p99 %6.0f ms, max %6.0f ms\n",
                interval, interval * 500, interval * 990, interval * 1000);
  }
  return p99Ms;
}

// Closes every pod's control files (keeping the directories), as after a fresh refresh.
void closeControlFiles(const PodCgroups& index) {
  for (const auto& [uid, pod] : index.pods()) {
    pod->memory.closeFiles();
    for (const auto* dir : {&pod->cpu, &pod->pids, &pod->unified, &pod->freezer}) {
      if (*dir) (*dir)->closeFiles();
    }
  }
}

// Times and prints the scans, discoveries and refreshes finding nothing at one size: the scan's
// median, or nullopt when one of them failed.
std::optional<double> measureScanAndDiscovery(PodCgroups& index, const Sandbox& sandbox,
                                              const Budgets& budgets) {
  std::size_t scanned = 0, errors = 0;  // by the last scan
  std::string firstError;
  auto scanOnce = [&] {
    const auto t0 = steadyNow();
    cgroups::ScanResult result = cgroups::scanNode(index, {}, steadyNow());
    const double ns = nanosSince(t0);
    scanned = result.summary.pods.size();
    errors = result.errors.size();
    if (errors > 0 && firstError.empty()) firstError = ", first: " + result.errors[0].message;
    doNotOptimize(result);
    return ns;
  };
  closeControlFiles(index);  // so the first scan opens every file at every size
  std::printf("    first scan (opens every control file)      %8.2f ms\n", scanOnce() * 1e-6);
  const Samples scan = measure(budgets.scan, scanOnce);
  printLine("scanNode", scan, true);
  std::printf("      %.2f us per pod (median); %zu pods in the summary; %zu read errors%s\n",
              scan.median() * 1e-3 / double(index.size()), scanned, errors, firstError.c_str());
  if (index.size() == kScanTargetPods) {
    std::printf("      target <= %.0f ms (median): %s\n", kScanTargetMillis,
                verdict(scan.median() * 1e-6 <= kScanTargetMillis));
  }
  closeControlFiles(index);      // keeps the peak at 10 descriptors a pod (kDescriptorsPerPod)
  std::vector<double> parts[3];  // discoverHierarchy, the refresh, closing (untimed)
  std::string failed;
  auto ns = [](SteadyTime from, SteadyTime to) {
    return std::chrono::duration<double, std::nano>(to - from).count();
  };
  const Samples discover = measure(budgets.discovery, [&] {
    const auto t0 = steadyNow();
    auto hierarchy = cgroups::discoverHierarchy({});
    const auto t1 = steadyNow();
    if (!hierarchy) {
      failed = "discoverHierarchy failed: " + hierarchy.error().message;
      requestStop();
      return 0.0;
    }
    auto fresh = std::make_unique<PodCgroups>(std::move(hierarchy).value(), sandbox.kubepods());
    auto refreshed = fresh->refresh();
    const auto t2 = steadyNow();
    if (!refreshed || fresh->size() != index.size()) {
      failed = "a fresh refresh found " + std::to_string(fresh->size()) + " pods, expected " +
               std::to_string(index.size()) + (refreshed ? "" : ": " + refreshed.error().message);
      requestStop();
    }
    const auto t3 = steadyNow();
    fresh.reset();
    parts[2].push_back(nanosSince(t3));
    parts[0].push_back(ns(t0, t1));
    parts[1].push_back(ns(t1, t2));
    return ns(t0, t2);
  });
  const Samples noop = measure(failed.empty() ? budgets.noopRefresh : Budget{0, 0, 0}, [&] {
    const auto t0 = steadyNow();
    auto refreshed = index.refresh();
    const double took = nanosSince(t0);
    if (!refreshed || !refreshed->added.empty() || !refreshed->removed.empty()) {
      failed = "a refresh with nothing changed reported changes or failed";
    }
    return took;
  });
  if (!failed.empty()) {
    std::fprintf(stderr, "%s\n", failed.c_str());
    return std::nullopt;
  }
  printLine("discoverHierarchy + fresh refresh", discover, true);
  printLine("  discoverHierarchy", Samples::from(std::move(parts[0])), true);
  printLine("  refresh of a new PodCgroups", Samples::from(std::move(parts[1])), true);
  printLine("  (untimed) destroying it: closing dirs", Samples::from(std::move(parts[2])), true);
  printLine("refresh, nothing changed", noop, true);
  return scan.median();
}

// What the measurements share: the sandbox (run() owns and destroys it), the pod cgroups made
// in it so far and their index.
struct Bench {
  Bench(Sandbox& s, const cgroups::Hierarchy& hierarchy, const Budgets& b)
      : sandbox(s), h(hierarchy), budgets(b) {}
  Sandbox& sandbox;
  const cgroups::Hierarchy& h;
  const Budgets& budgets;
  PodCgroups index{h, sandbox.kubepods()};
  std::vector<BenchPod> pods;
  Random rng{kSeed};
  double createSeconds = 0;  // making all of them
};

// Fills `set` with the read set's index entries once its busy pods' 8 MiB is charged; 0, or the
// exit status when it cannot be had.
int setUpReadSet(Bench& b, std::vector<const PodCgroup*>& set) {
  auto& [sandbox, h, budgets, index, pods, rng, createSeconds] = b;
  const auto start = steadyNow();
  if (auto failed = growTo(sandbox, pods, kReadPods, rng)) {
    std::printf("cannot create pod cgroups: %s\n", failed->message.c_str());
    return 77;
  }
  createSeconds = nanosSince(start) * 1e-9;
  for (std::size_t i = 0; i < kBusyPods && !stopped(); ++i) {
    auto child = sandbox.spawn(pods[i].relative,
                               [self = ::getpid()] { return holdMemory(kBusyBytes, self); });
    if (!child) {
      std::printf("cannot start a process in a pod cgroup: %s\n", child.error().message.c_str());
      return 77;
    }
  }
  auto refreshed = index.refresh();
  for (const BenchPod& pod : pods) set.push_back(index.find(pod.uid));
  if (!refreshed || index.size() != pods.size() || std::count(set.begin(), set.end(), nullptr)) {
    std::fprintf(stderr, "the pod index found %zu pods, expected %zu%s%s\n", index.size(),
                 pods.size(), refreshed ? "" : ": ",
                 refreshed ? "" : refreshed.error().message.c_str());
    return 1;
  }
  std::string buffer;
  for (int wait = 0; wait < 1000 && !stopped(); ++wait) {  // bounded: 10 s
    std::size_t charged = 0;
    for (std::size_t i = 0; i < kBusyPods; ++i) {
      auto usage = cgroups::readMemoryUsage(set[i]->memory, buffer);
      charged += usage && *usage >= kBusyBytes;
    }
    if (charged == kBusyPods) break;
    sleepMillis(10);
  }
  return 0;
}

// The scan and discovery at each size, on the same growing tree, with the scan's median at
// kScanTargetPods in `scanMs` when measured there; 0 or the exit status.
int measureSizes(Bench& b, const std::vector<std::size_t>& sizes, std::optional<double>& scanMs) {
  auto& [sandbox, h, budgets, index, pods, rng, createSeconds] = b;
  for (std::size_t size : sizes) {
    std::printf("  -- %s pod cgroups (each in memory, cpuacct, pids, freezer, unified) --\n",
                withCommas(size).c_str());
    std::fflush(stdout);
    const std::size_t before = pods.size();
    auto start = steadyNow();
    auto failed = growTo(sandbox, pods, size, rng);
    const double seconds = nanosSince(start) * 1e-9;
    createSeconds += seconds;
    if (stopped()) return 130;
    if (failed) {
      std::printf("  cannot create more pod cgroups at %s: %s; stopping here\n",
                  withCommas(pods.size()).c_str(), failed->message.c_str());
      break;
    }
    start = steadyNow();
    auto refreshed = index.refresh();
    const double refreshNs = nanosSince(start);
    if (!refreshed || index.size() != pods.size()) {
      std::fprintf(stderr, "the pod index found %zu pods, expected %zu\n", index.size(), size);
      return 1;
    }
    std::printf(
        "    created %s more in %.2f s (%.2f ms per pod); all %s took %.2f s; the refresh that "
        "found them: %.2f ms\n",
        withCommas(size - before).c_str(), seconds,
        size > before ? seconds * 1e3 / double(size - before) : 0.0, withCommas(size).c_str(),
        createSeconds, refreshNs * 1e-6);
    std::fflush(stdout);
    const auto scanNs = measureScanAndDiscovery(index, sandbox, budgets);
    if (!scanNs) return stopped() ? 130 : 1;
    if (size == kScanTargetPods) scanMs = *scanNs * 1e-6;
  }
  return 0;
}

// The measurements, on a sandbox that run() owns and destroys whatever this returns.
int runMeasurements(Sandbox& sandbox, const cgroups::Hierarchy& h,
                    const std::vector<std::size_t>& sizes, const Budgets& budgets) {
  Bench b(sandbox, h, budgets);
  std::printf("== set-up: %zu pod cgroups, %zu of them running a process holding %llu MiB ==\n",
              kReadPods, kBusyPods, static_cast<unsigned long long>(kBusyBytes / kMi));
  std::vector<const PodCgroup*> set;
  if (const int status = setUpReadSet(b, set)) return status;
  std::string buffer;
  std::uint64_t usage[2] = {0, 0};  // of the busy pods, of the empty pods
  for (std::size_t i = 0; i < kReadPods; ++i) {
    auto read = cgroups::readMemoryUsage(set[i]->memory, buffer);
    usage[i < kBusyPods ? 0 : 1] += read ? *read : 0;
  }
  std::printf(
      "  created in %.2f s; busy pods' memory.usage_in_bytes: %.1f MiB on average; empty pods': "
      "%s bytes on average\n\n",
      b.createSeconds, double(usage[0]) / double(kBusyPods) / double(kMi),
      withCommas(usage[1] / (kReadPods - kBusyPods)).c_str());
  std::fflush(stdout);
  if (stopped()) return 130;

  std::printf("== per-pod reads, nodewarden readers on kept-open descriptors (%zu pods) ==\n",
              kReadPods);
  const auto ours = measureOurReads(set, budgets);
  if (stopped() || !ours) return stopped() ? 130 : 1;
  std::printf("\n== the same reads through libcgroup ==\n");
  measureLibcgroup(b.pods, h, budgets, *ours);
  std::printf("\n");
  std::fflush(stdout);
  if (stopped()) return 130;
  const double usageUs = ours->usage.median() * 1e-3, fullUs = ours->full.median() * 1e-3;
  const auto notifyP99Ms = measureNotification(sandbox, h, budgets, b.rng, usageUs);
  std::printf("\n");
  if (stopped()) return 130;
  std::printf(
      "== full scan (scanNode) and discovery (discoverHierarchy + PodCgroups::refresh) ==\n");
  std::optional<double> scanMs;
  if (const int status = measureSizes(b, sizes, scanMs)) return status;

  std::printf("\ntargets (verdicts on the median, notification on p99):\n");
  const std::tuple<const char*, std::optional<double>, const char*, double, const char*> rows[] = {
      {"usage-only read per pod", usageUs, "us", kUsageTargetMicros, ""},
      {"full read per pod", fullUs, "us", kFullTargetMicros, ""},
      {"full scan of 1,000 pods", scanMs, "ms", kScanTargetMillis,
       "not measured (1000 not in --sizes)"},
      {"notification p99", notifyP99Ms, "ms", kNotifyP99TargetMillis, "not measured"}};
  for (const auto& [label, value, unit, limit, absent] : rows) {
    if (!value) {
      std::printf("  %-25s %s\n", label, absent);
    } else {
      std::printf("  %-25s %8.2f %s  <= %5.0f %s  %s\n", label, *value, unit, limit, unit,
                  verdict(*value <= limit));
    }
  }
  std::printf(
      "\nOn a shared VM medians move between runs: run it twice before trusting a verdict near "
      "its target.\n");
  return 0;
}

std::uint64_t descriptorsFor(std::size_t pods) {
  return std::uint64_t(pods) * kDescriptorsPerPod + kDescriptorSlack;
}

// Raises RLIMIT_NOFILE for the largest size; a size that still does not fit becomes the largest
// multiple of 100 that does (the figures say which size was measured). Empty: skip (exit 77).
std::vector<std::size_t> fitOpenFileLimit(const std::vector<std::size_t>& sizes) {
  const std::uint64_t wanted = descriptorsFor(sizes.back());
  auto limit = cgroups::raiseOpenFileLimit(wanted);
  if (!limit) {
    std::printf("bench_cgroups: skipped: %s\n", limit.error().message.c_str());
    return {};
  }
  std::printf("open file limit (RLIMIT_NOFILE soft): %s; wanted %s (%llu per pod + %llu)\n",
              withCommas(*limit).c_str(), withCommas(wanted).c_str(),
              static_cast<unsigned long long>(kDescriptorsPerPod),
              static_cast<unsigned long long>(kDescriptorSlack));
  if (*limit >= wanted) return sizes;
  const std::size_t fit =
      (*limit - std::min(*limit, kDescriptorSlack)) / kDescriptorsPerPod / 100 * 100;
  std::vector<std::size_t> kept;
  for (std::size_t size : sizes) {
    const bool fits = descriptorsFor(size) <= *limit;
    const bool replace = !fits && fit >= kReadPods && (kept.empty() || kept.back() < fit);
    if (!fits) {
      std::printf(
          "  %s pods would need %s descriptors: %s\n", withCommas(size).c_str(),
          withCommas(descriptorsFor(size)).c_str(),
          replace ? ("measuring " + withCommas(fit) + " pods instead").c_str() : "not measured");
    }
    if (fits || replace) kept.push_back(fits ? size : fit);
  }
  rlimit hard{};
  ::getrlimit(RLIMIT_NOFILE, &hard);
  std::printf(
      "  (the hard limit is %s; raising it needs CAP_SYS_RESOURCE, which this process %s)\n",
      withCommas(std::uint64_t(hard.rlim_max)).c_str(),
      cgroups::hasCapSysResource() ? "has" : "lacks");
  if (kept.empty()) {
    std::printf("bench_cgroups: skipped: the open file limit is too low even for %zu pods\n",
                kReadPods);
  }
  return kept;
}

int run(int argc, char** argv) {
  std::vector<std::size_t> sizes;  // none given: 100,1000,5000 (--quick 100,1000)
  bool quick = false;
  int trials = 0;
  Args args(kUsage);
  // At least the per-pod read set (part of every size); at most 20,000 so that 5 hierarchies
  // stay well below the kernel's 65,535 memory cgroup IDs.
  args.flag("--quick", quick)
      .numbers("--sizes", sizes, kReadPods, std::size_t(20'000))
      .number("--trials", trials, 1, 10000);
  if (auto status = args.parse(argc, argv)) return *status;
  if (sizes.empty()) {
    sizes = {100, 1000};
    if (!quick) sizes.push_back(5000);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  Budgets budgets = quick ? kQuickBudgets : kFullBudgets;
  if (trials > 0) budgets.trials = trials;

  auto h = hierarchyForSandbox("bench_cgroups", "it creates cgroups and moves processes into them");
  if (!h) return 77;
  printEnvironment("nodewarden cgroup benchmark",
                   "; this binary only (cgroups/ is compiled with the same flags)", false, true);
  printHierarchy(*h);
  std::printf("  mode: %s; single threaded, not pinned; times from steady_clock\n\n",
              quick ? "--quick" : "full");
  std::fflush(stdout);
  installStopHandlers();
  sizes = fitOpenFileLimit(sizes);
  if (sizes.empty()) return 77;
  auto sandbox = openSandbox(*h, "bench_cgroups", "nodewarden-bench");
  if (!sandbox) return 77;
  std::printf("sandbox: %s/%s (and the same below the other hierarchy roots)\n\n",
              h->memory.c_str(), sandbox->kubepods().c_str());
  std::fflush(stdout);

  const auto start = steadyNow();
  int status = runMeasurements(*sandbox, *h, sizes, budgets);
  if (stopped()) std::printf("\ninterrupted: removing the sandbox\n");
  const bool removed = closeSandbox(*sandbox);
  std::printf("total wall time %.1f s (sink %llu)\n", nanosSince(start) * 1e-9,
              static_cast<unsigned long long>(gSink));
  return stopped() ? 130 : !removed && status == 0 ? 1 : status;
}

}  // namespace
}  // namespace nodewarden::bench

int main(int argc, char** argv) {
  return nodewarden::bench::run(argc, argv);
}
