// bench_cgroups: what reading and watching pod cgroups costs on this machine's real kernel, in a
// sandbox of kubelet-shaped pod cgroups (qosMix); what it times, its targets and exit codes are
// in kUsage. Single threaded, not pinned. The sandbox goes on every path out (or with the next
// run after a kill).

#include <libcgroup.h>
#include <sys/resource.h>

#include "bench/support/process.h"
#include "bench/support/report.h"
#include "bench/support/sandbox.h"
#include "cgroups/notify.h"
#include "cgroups/readers.h"

namespace nodewarden::bench {
namespace {

using cgroups::CgroupDir;
using cgroups::PodCgroup;

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

constexpr const char* kUsage =
    "usage: bench_cgroups [--sizes N[,N...]] [--quick] [--help]\n"
    "\n"
    "Times nodewarden's cgroup readers (beside libcgroup's), v1 memory threshold notifications\n"
    "(beside a pipe), scan, discovery and refresh on real cgroups it creates\n"
    "(\"nodewarden-bench-<pid>\" below each hierarchy root) and removes again. Needs root.\n"
    "  --sizes 100,1000   pod cgroups for the scan and discovery (default 100,1000,5000;\n"
    "                     with --quick 100,1000); each from 100 to 20000\n"
    "  --quick            fewer repetitions and 10 notification trials (a smoke run)\n"
    "  --help             this text\n"
    "Targets: <= 2 us per pod usage-only, <= 20 us per pod full read, <= 25 ms for a\n"
    "full scan of 1000 pods, notification p99 <= 5 ms. A missed target prints MISSES but\n"
    "does not change the exit status. Exit 77: the machine cannot run it; 1: a read failed;\n"
    "130: SIGINT/SIGTERM.\n";

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

// Whether `result` holds a value (a number goes to gSink); if not, `error` keeps the first.
template <typename T>
bool kept(const Result<T>& result, std::string& error) {
  if (!result && error.empty()) error = result.error().message;
  if constexpr (std::is_arithmetic_v<T>) {
    if (result) gSink = gSink + std::uint64_t(*result);
  }
  return bool(result);
}

// Passes over the read set within `budget`, each read timed alone (the timer included); no
// samples once a read failed.
template <typename F>
Samples timeEachRead(const Budget& budget, F&& readOne) {
  std::vector<double> nanos;
  bool failed = false;
  measure(budget, [&] {
    for (std::size_t i = 0; i < kReadPods && !failed && !stopped(); ++i) {
      const auto t0 = steadyNow();
      failed = !readOne(i);
      nanos.push_back(nanosSince(t0));
    }
    return 0.0;
  });
  return failed ? Samples{} : Samples::from(std::move(nanos));
}

// One run: the sandbox (run() owns and destroys it), the pod cgroups made in it so far (UIDs,
// paths below each hierarchy root), their index, and the figures the targets judge.
struct Bench {
  cgroups::Sandbox& sandbox;
  const cgroups::Hierarchy& h;
  const Budgets& budgets;
  cgroups::PodCgroups index{h, sandbox.kubepods()};
  std::vector<std::string> uids{}, relatives{};
  Random rng{kSeed};
  Samples usage{}, full{};  // readMemoryUsage; readMemory + readCpuNanos + readProcessCount
  std::optional<double> notifyP99Ms{}, scanMs{};  // scanMs: the median at 1,000 pods

  // Adds pod cgroups until there are `target`; the error when one cannot be made (e.g. the
  // kernel's 65,535 memory cgroup IDs are used up).
  std::optional<Error> growTo(std::size_t target) {
    while (uids.size() < target && !stopped()) {
      std::string uid = rng.uuid();
      auto relative = sandbox.addPod(uid, qosMix(uids.size()));
      if (!relative) return relative.error();
      uids.push_back(std::move(uid));
      relatives.push_back(*relative);
    }
    return std::nullopt;
  }
  // Whether a refresh of the index finds every pod made; says why not.
  bool refreshed() {
    auto result = index.refresh();
    const auto found = [&](const std::string& uid) { return index.find(uid) != nullptr; };
    if (result && std::all_of(uids.begin(), uids.end(), found)) return true;
    std::fprintf(stderr, "the pod index found %zu pods, expected %zu%s%s\n", index.size(),
                 uids.size(), result ? "" : ": ", result ? "" : result.error().message.c_str());
    return false;
  }
};

// The read set, its busy pods' 8 MiB charged; 0, or the exit status when it cannot be had.
int setUpReadSet(Bench& b) {
  std::printf("== set-up: %zu pod cgroups, %zu of them running a process holding %llu MiB ==\n\n",
              kReadPods, kBusyPods, static_cast<unsigned long long>(kBusyBytes / kMi));
  if (auto failed = b.growTo(kReadPods)) {
    std::printf("cannot create pod cgroups: %s\n", failed->message.c_str());
    return 77;
  }
  for (std::size_t i = 0; i < kBusyPods && !stopped(); ++i) {
    auto child = b.sandbox.spawn(b.relatives[i],
                                 [self = ::getpid()] { return holdMemory(kBusyBytes, self); });
    if (!child) {
      std::printf("cannot start a process in a pod cgroup: %s\n", child.error().message.c_str());
      return 77;
    }
  }
  if (!b.refreshed()) return 1;
  std::string buffer;
  for (std::size_t i = 0, wait = 0; i < kBusyPods && wait < 1000 && !stopped(); ++wait) {
    auto usage = cgroups::readMemoryUsage(b.index.find(b.uids[i])->memory, buffer);
    const bool charged = usage && *usage >= kBusyBytes;
    i += charged;
    if (!charged) sleepMillis(10);  // bounded: 10 s in all
  }
  return stopped() ? 130 : 0;
}

// Reads one pod fully, as scanNode does.
bool readFull(const PodCgroup& pod, std::string& buffer, std::string& error) {
  auto memory = cgroups::readMemory(pod.memory, buffer);
  if (!kept(memory, error)) return false;
  gSink = gSink + memory->workingSet;
  return (!pod.cpu || kept(cgroups::readCpuNanos(*pod.cpu, buffer), error)) &&
         kept(cgroups::readProcessCount(pod, buffer), error);
}

// nodewarden's readers on kept-open descriptors, printed (b.usage, b.full); false when a read
// failed.
bool measureOurReads(Bench& b) {
  std::printf("== per-pod reads, nodewarden readers on kept-open descriptors (%zu pods) ==\n",
              kReadPods);
  std::vector<const PodCgroup*> pods;
  std::string buffer, error;
  for (const std::string& uid : b.uids) pods.push_back(b.index.find(uid));
  for (const PodCgroup* pod : pods) readFull(*pod, buffer, error);  // opens every file
  auto each = [&](const char* label, auto&& readOne) {
    if (!error.empty()) return Samples{};
    const Samples s =
        timeEachRead(b.budgets.reads, [&](std::size_t i) { return readOne(*pods[i]); });
    if (error.empty()) printLine(label, s);
    return s;
  };
  b.usage = each("usage only: readMemoryUsage", [&](const PodCgroup& pod) {
    return kept(cgroups::readMemoryUsage(pod.memory, buffer), error);
  });
  b.full = each("full: readMemory+readCpuNanos+readProcessCount",
                [&](const PodCgroup& pod) { return readFull(pod, buffer, error); });
  each("  readMemory (usage + memory.stat + limit)",
       [&](const PodCgroup& pod) { return kept(cgroups::readMemory(pod.memory, buffer), error); });
  each("    memory.stat pread alone (not parsed)", [&](const PodCgroup& pod) {
    return kept(pod.memory.read(CgroupDir::File::MemoryStat, buffer), error);
  });
  if (!error.empty()) std::fprintf(stderr, "reading a pod cgroup failed: %s\n", error.c_str());
  return error.empty();
}

// cgroup_read_value_begin + end: the first line of one control file ("memory.usage_in_bytes").
Result<std::uint64_t> readValue(const std::string& relative, const char* file) {
  std::string name = file, controller(file, std::strchr(file, '.'));  // the API takes char*
  char buffer[128];
  void* handle = nullptr;
  const int rc = cgroup_read_value_begin(controller.c_str(), relative.c_str(), name.data(), &handle,
                                         buffer, sizeof buffer);
  if (handle != nullptr) cgroup_read_value_end(&handle);
  if (rc == 0) return cgroups::parseUint(buffer);
  return Error{"cgroup_read_value_begin, " + relative + "/" + file + ": " + cgroup_strerror(rc)};
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
  return Error{"cgroup_read_stats_begin, " + relative + ": " + cgroup_strerror(rc)};
}

// The value API's usage: cgroup_get_cgroup loads the cgroup from the kernel (only
// `controller`'s files when one is added, the documented way to limit what is loaded; else
// every hierarchy's), then the value comes from the copy. cgroup_get_cgroup's return code.
int valueApiUsage(const std::string& relative, const char* controller) {
  cgroup* group = cgroup_new_cgroup(relative.c_str());
  if (group == nullptr) return ECGFAIL;
  if (controller != nullptr) cgroup_add_controller(group, controller);
  const int rc = cgroup_get_cgroup(group);
  cgroup_controller* memory = rc == 0 ? cgroup_get_controller(group, "memory") : nullptr;
  u_int64_t value = 0;
  if (memory != nullptr) cgroup_get_value_uint64(memory, "memory.usage_in_bytes", &value);
  gSink = gSink + value;
  cgroup_free(&group);
  return rc;
}

// The same reads through libcgroup, in a table beside nodewarden's.
void measureLibcgroup(const Bench& b) {
  std::printf("\n== the same reads through libcgroup ==\n");  // discoverHierarchy ran cgroup_init
  const std::vector<std::string>& pods = b.relatives;
  // cgroup_get_cgroup fails on some hosts once a controller was added: it is then timed with
  // none added, loading every hierarchy's files.
  const char* controller = "memory";
  if (const int rc = valueApiUsage(pods[0], controller); rc != 0) {
    std::printf("  cgroup_get_cgroup after add_controller: memory=%d (%s)", rc,
                cgroup_strerror(rc));
    for (const char* other : {"cpuacct", "pids", "freezer"})
      std::printf(" %s=%d", other, valueApiUsage(pods[0], other));
    controller = nullptr;
    std::printf("; with none: %d\n", valueApiUsage(pods[0], controller));
  }
  const Samples valueUsage = timeEachRead(
      b.budgets.valueApi, [&](std::size_t i) { return valueApiUsage(pods[i], controller) == 0; });
  std::string error;
  const bool cpu = !b.h.cpuacct.empty() && b.h.cpuVersion == cgroups::Version::V1;
  const bool pids = !b.h.pids.empty() && b.h.pidsVersion == cgroups::Version::V1;
  const Samples readUsage = timeEachRead(b.budgets.readValue, [&](std::size_t i) {
    return kept(readValue(pods[i], "memory.usage_in_bytes"), error);
  });
  const Samples readFull = timeEachRead(b.budgets.readValue, [&](std::size_t i) {
    auto usage = readValue(pods[i], "memory.usage_in_bytes");
    auto inactive = readInactiveFile(pods[i]);
    if (!kept(usage, error) || !kept(inactive, error)) return false;
    gSink = gSink + cgroups::workingSet(*usage, *inactive);
    return kept(readValue(pods[i], "memory.limit_in_bytes"), error) &&
           (!cpu || kept(readValue(pods[i], "cpuacct.usage"), error)) &&
           (!pids || kept(readValue(pods[i], "pids.current"), error));
  });
  if (!error.empty()) std::printf("  cgroup_read_value path failed: %s\n", error.c_str());
  std::printf(
      "  per pod (each read timed alone)                median us     p99 us  vs nodewarden\n");
  auto row = [](const char* label, const Samples& s, const Samples& nodewarden) {
    if (s.count() == 0) return (void)std::printf("    %-44s %10s %10s\n", label, "failed", "-");
    std::printf("    %-44s %10.2f %10.2f   %6.1fx\n", label, s.median() * 1e-3, s.p99() * 1e-3,
                s.median() / std::max(1.0, nodewarden.median()));
  };
  row("usage  nodewarden readMemoryUsage", b.usage, b.usage);
  row(controller != nullptr ? "usage  libcgroup get_cgroup+get_value"
                            : "usage  libcgroup get_cgroup(all)+get_value",
      valueUsage, b.usage);
  row("usage  libcgroup read_value_begin/end", readUsage, b.usage);
  row("full   nodewarden (5 files)", b.full, b.full);
  row("full   libcgroup read_value x4 + stats", readFull, b.full);
}

const std::size_t gPageSize = std::size_t(::sysconf(_SC_PAGESIZE));

// Shared by the notification child and the parent (MAP_SHARED; the parent zeroes it before each
// trial, so its pages are charged to the parent's cgroup, not the pod's).
struct TouchLog {
  std::int64_t pingPage;  // the child writes 'p' on its ready pipe after touching it (-1: never)
  std::int64_t touchedAt[kTouchBytes / 4096];  // when page i was about to be touched
};

// The child, in the pod cgroup: says 'r' once its memory is mapped; on 'g' touches it page by
// page, logging each touch (and saying 'p' after the ping page); then says 'd' and exits.
int touchOnSignal(int readyFd, int goFd, TouchLog& log, pid_t parent) {
  static constexpr char kReady = 'r', kPing = 'p', kDone = 'd';
  if (!dieWithParent(parent)) return 0;
  volatile char* bytes = mapSmallPages(kTouchBytes);
  char go = 0;
  if (bytes == nullptr || ::write(readyFd, &kReady, 1) != 1) return 2;
  if (::read(goFd, &go, 1) != 1 || go != 'g') return 4;
  const std::int64_t ping = log.pingPage;
  for (std::size_t i = 0; i < kTouchBytes / gPageSize && !stopped(); ++i) {
    log.touchedAt[i] = monotonicNanos();
    bytes[i * gPageSize] = 1;
    if (std::int64_t(i) == ping && ::write(readyFd, &kPing, 1) != 1) return 6;
  }
  return ::write(readyFd, &kDone, 1) == 1 ? 0 : 5;
}

// One trial with a fresh child in the pod cgroup `relative`: the latency, or why not ("" on a
// stop). A baseline trial arms no threshold: the child writes its ready pipe right after
// touching the crossing page. Same child, same loop, same wake-up through the scheduler: what
// the threshold adds is the kernel's own delay in noticing the crossing.
Result<double> runTrial(Bench& b, const std::string& relative, const CgroupDir& dir, TouchLog& log,
                        bool baseline) {
  // The first page whose touch takes the usage above the threshold, at one page a touch. An
  // estimate: v1 looks at thresholds once every 128 page charge events per CPU, charges up to
  // 64 pages ahead (per-CPU stock), and charges page tables too.
  const std::size_t crossing = std::size_t(kThresholdMargin / gPageSize);
  std::memset(&log, 0, sizeof log);
  log.pingPage = baseline ? std::int64_t(crossing) : -1;
  Pipe ready, go;
  if (!ready.ok || !go.ok) return Error{std::string("pipe: ") + std::strerror(errno)};
  auto child = b.sandbox.spawn(relative, [&, self = ::getpid()] {
    ::close(ready.fd[0]);
    ::close(go.fd[1]);
    return touchOnSignal(ready.fd[1], go.fd[0], log, self);
  });
  ready.close(1);
  go.close(0);
  if (!child) return child.error();
  const Result<double> latency = [&]() -> Result<double> {
    std::string buffer;
    if (readByte(ready.fd[0], 5000) != 'r') return Error{"the child did not get ready"};
    auto before = cgroups::readMemoryUsage(dir, buffer);
    if (!before) return before.error();
    std::optional<cgroups::MemoryThresholdNotifier> notifier;  // v1: replaced, never moved
    if (!baseline) {
      auto armed = cgroups::MemoryThresholdNotifier::arm(dir, *before + kThresholdMargin);
      if (!armed) return armed.error();
      notifier.emplace(std::move(armed).value());
    }
    if (::write(go.fd[1], "g", 1) != 1) return Error{"writing the go signal failed"};
    const int n = waitReadable(baseline ? ready.fd[0] : notifier->fd(), 5000);
    const std::int64_t wokeAt = monotonicNanos();
    if (stopped()) return Error{""};
    if (n <= 0) return Error{baseline ? "no ping within 5 s" : "no threshold event within 5 s"};
    if (baseline && readByte(ready.fd[0], 1000) != 'p') return Error{"the ping was not 'p'"};
    if (readByte(ready.fd[0], 10000) != 'd') return Error{"the child did not finish touching"};
    return double(wokeAt - log.touchedAt[crossing]);
  }();
  // Kills the child if it still runs and waits (bounded) without reaping, then lets the sandbox
  // reap: it kills the children it recorded at the end, so it must forget them.
  ::kill(*child, SIGKILL);
  for (int i = 0; i < 5000 && !exited(*child); ++i) sleepMillis(1);
  b.sandbox.reap();
  return latency;
}

// Measures and prints the notification, threshold and baseline trials alternately in one pod
// cgroup so that both see the same machine; b.notifyP99Ms once the threshold trials measured.
void measureNotification(Bench& b) {
  std::printf(
      "\n== v1 memory threshold notification (MemoryThresholdNotifier) ==\n"
      "  per trial: a fresh child touches 128 MiB page by page (small pages) in a pod cgroup\n"
      "  armed at usage + 64 MiB; latency = wake from poll() - touch of the crossing page\n");
  std::fflush(stdout);
  if (b.h.memoryVersion != cgroups::Version::V1) {
    std::printf("  skipped: the memory controller is on cgroup v2 (no cgroup.event_control)\n");
    return;
  }
  auto relative = b.sandbox.addPod(b.rng.uuid(), "burstable");
  auto dir = relative ? CgroupDir::open(b.h.memory + "/" + *relative, cgroups::Version::V1)
                      : Result<CgroupDir>(relative.error());
  void* log =  // left mapped until the process exits
      ::mmap(nullptr, sizeof(TouchLog), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (!dir || log == MAP_FAILED) {
    if (relative) (void)b.sandbox.removeCgroup(*relative);
    return (void)std::printf("  skipped: %s\n", dir ? "mmap failed" : dir.error().message.c_str());
  }
  std::vector<double> latencyNs[2];  // wake − touch of the crossing page (may be negative)
  int attempted[2] = {0, 0};
  std::string firstError[2];
  const auto start = steadyNow();
  for (int trial = 0; trial < 2 * b.budgets.trials && !stopped() &&
                      nanosSince(start) * 1e-9 < b.budgets.trialSeconds;
       ++trial) {
    const int k = trial % 2;
    ++attempted[k];
    auto latency = runTrial(b, *relative, *dir, *static_cast<TouchLog*>(log), k == 1);
    if (latency) latencyNs[k].push_back(*latency);
    if (!latency && !latency.error().message.empty() && firstError[k].empty()) {
      firstError[k] = "trial " + std::to_string(trial) + ": " + latency.error().message;
    }
  }
  (void)b.sandbox.removeCgroup(*relative);
  static constexpr const char* kTitles[] = {
      "threshold (eventfd from cgroup.event_control):",
      "baseline (no threshold: the child writes a pipe right after touching that page):"};
  Samples latency[2];
  for (int k = 0; k < 2; ++k) {
    const Samples& s = latency[k] = Samples::from(latencyNs[k]);
    std::printf("  %s\n    trials: %d attempted, %zu measured\n", kTitles[k], attempted[k],
                s.count());
    if (!firstError[k].empty()) std::printf("    first failure: %s\n", firstError[k].c_str());
    if (s.count() == 0) continue;
    std::printf("    latency            p50 %8.3f ms  p99 %8.3f ms  max %8.3f ms  min %8.3f ms\n",
                s.median() * 1e-6, s.p99() * 1e-6, s.max() * 1e-6, s.min() * 1e-6);
  }
  const auto& [threshold, baseline] = latency;
  if (threshold.count() == 0) return;
  b.notifyP99Ms = threshold.p99() * 1e-6;
  if (baseline.count() == 0) return;
  std::printf(
      "    threshold - baseline: p50 %+.3f ms, p99 %+.3f ms (the kernel's own delay in noticing)\n",
      (threshold.median() - baseline.median()) * 1e-6, (threshold.p99() - baseline.p99()) * 1e-6);
}

// Times and prints the scans, discoveries and refreshes finding nothing at the index's size:
// the scan's median, or nullopt when a discovery or a refresh failed.
std::optional<double> measureScanAndDiscovery(cgroups::PodCgroups& index, const Budgets& budgets) {
  std::string failed;
  const Samples scan = measure(budgets.scan, 1, [&] {  // the untimed first opens new pods' files
    const auto t0 = steadyNow();
    cgroups::ScanResult result = cgroups::scanNode(index, {}, steadyNow());
    const double ns = nanosSince(t0);
    if (!result.errors.empty() && failed.empty()) failed = result.errors[0].message;
    doNotOptimize(result);
    return ns;
  });
  printLine("scanNode", scan, true);
  if (!failed.empty()) std::printf("      a scan failed to read: %s\n", failed.c_str());
  failed.clear();
  // Closes every pod's control files, keeping the peak at kDescriptorsPerPod during discovery.
  for (const auto& [uid, pod] : index.pods()) {
    pod->memory.closeFiles();
    for (const auto* dir : {&pod->cpu, &pod->pids, &pod->unified, &pod->freezer}) {
      if (*dir) (*dir)->closeFiles();
    }
  }
  std::vector<double> mounts, refreshes;  // the parts of a discovery
  const Samples discover = measure(budgets.discovery, [&] {
    if (!failed.empty()) return 0.0;
    const auto t0 = steadyNow();
    auto hierarchy = cgroups::discoverHierarchy({});
    const double discovered = nanosSince(t0);
    if (!hierarchy) {
      failed = "discoverHierarchy failed: " + hierarchy.error().message;
      return 0.0;
    }
    cgroups::PodCgroups fresh(std::move(hierarchy).value(), index.kubepods());
    auto refreshed = fresh.refresh();
    const double ns = nanosSince(t0);  // closing the fresh index is not timed
    mounts.push_back(discovered);
    refreshes.push_back(ns - discovered);
    if (!refreshed || fresh.size() != index.size()) {
      failed = "a fresh refresh found " + std::to_string(fresh.size()) + " pods, expected " +
               std::to_string(index.size()) + (refreshed ? "" : ": " + refreshed.error().message);
    }
    return ns;
  });
  // Whether a refresh finding nothing reports nothing is tests/cgroups' to check.
  const Samples noop = measure(failed.empty() ? budgets.noopRefresh : Budget{0, 0, 0}, [&] {
    const auto t0 = steadyNow();
    auto refreshed = index.refresh();
    const double ns = nanosSince(t0);
    if (!refreshed) failed = "a refresh with nothing changed failed";
    return ns;
  });
  if (!failed.empty()) {
    std::fprintf(stderr, "%s\n", failed.c_str());
    return std::nullopt;
  }
  printLine("discoverHierarchy + fresh refresh", discover, true);
  printLine("  discoverHierarchy", Samples::from(std::move(mounts)), true);
  printLine("  refresh of a new PodCgroups", Samples::from(std::move(refreshes)), true);
  printLine("refresh, nothing changed", noop, true);
  return scan.median();
}

// The measurements and the verdicts, on a sandbox that run() owns and destroys whatever this
// returns.
int runMeasurements(Bench& b, const std::vector<std::size_t>& sizes) {
  if (const int status = setUpReadSet(b)) return status;
  if (!measureOurReads(b) || stopped()) return stopped() ? 130 : 1;
  measureLibcgroup(b);
  if (!stopped()) measureNotification(b);
  if (stopped()) return 130;
  std::printf(
      "\n== full scan (scanNode) and discovery (discoverHierarchy + PodCgroups::refresh) ==\n");
  for (std::size_t size : sizes) {
    std::printf("  -- %s pod cgroups (each in memory, cpuacct, pids, freezer, unified) --\n",
                withCommas(size).c_str());
    std::fflush(stdout);
    auto failed = b.growTo(size);
    if (stopped()) return 130;
    if (failed) {
      std::printf("  cannot create more pod cgroups at %s: %s; stopping here\n",
                  withCommas(b.uids.size()).c_str(), failed->message.c_str());
      break;
    }
    const auto scanNs = b.refreshed() ? measureScanAndDiscovery(b.index, b.budgets) : std::nullopt;
    if (!scanNs) return stopped() ? 130 : 1;
    if (size == 1000) b.scanMs = *scanNs * 1e-6;
  }
  std::printf("\ntargets (verdicts on the median, notification on p99):\n");
  auto target = [](const char* label, std::optional<double> value, const char* unit, double limit,
                   const char* absent = "not measured") {
    if (!value) return (void)std::printf("  %-25s %s\n", label, absent);
    std::printf("  %-25s %8.2f %s  <= %5.0f %s  %s\n", label, *value, unit, limit, unit,
                verdict(*value <= limit));
  };
  target("usage-only read per pod", b.usage.median() * 1e-3, "us", 2);
  target("full read per pod", b.full.median() * 1e-3, "us", 20);
  target("full scan of 1,000 pods", b.scanMs, "ms", 25, "skipped (no 1,000-pod size in this run)");
  target("notification p99", b.notifyP99Ms, "ms", 5,
         b.h.memoryVersion == cgroups::Version::V1 ? "not measured" : "skipped (cgroup v2)");
  return 0;
}

// Raises RLIMIT_NOFILE for the largest size; a size that still does not fit becomes the largest
// multiple of 100 that does (the figures say which size was measured). Empty: skip (exit 77).
std::vector<std::size_t> fitOpenFileLimit(const std::vector<std::size_t>& sizes) {
  auto descriptors = [](std::size_t pods) { return pods * kDescriptorsPerPod + kDescriptorSlack; };
  auto limit = cgroups::raiseOpenFileLimit(descriptors(sizes.back()));
  if (!limit) {
    std::printf("bench_cgroups: skipped: %s\n", limit.error().message.c_str());
    return {};
  }
  rlimit hard{};
  ::getrlimit(RLIMIT_NOFILE, &hard);
  std::printf(
      "open file limit (RLIMIT_NOFILE soft): %s; wanted %s (%llu per pod + %llu)\n"
      "  (the hard limit is %s; raising it needs CAP_SYS_RESOURCE, which this process %s)\n",
      withCommas(*limit).c_str(), withCommas(descriptors(sizes.back())).c_str(),
      static_cast<unsigned long long>(kDescriptorsPerPod),
      static_cast<unsigned long long>(kDescriptorSlack),
      withCommas(std::uint64_t(hard.rlim_max)).c_str(),
      cgroups::hasCapSysResource() ? "has" : "lacks");
  const std::size_t fits = (*limit - std::min(*limit, kDescriptorSlack)) / kDescriptorsPerPod;
  std::vector<std::size_t> kept;
  for (std::size_t size : sizes) {
    const std::size_t pods = size <= fits ? size : fits / 100 * 100;
    const bool measured = pods >= kReadPods && (kept.empty() || kept.back() < pods);
    if (measured) kept.push_back(pods);
    if (pods == size) continue;
    std::printf(
        "  %s pods would need %s descriptors: %s\n", withCommas(size).c_str(),
        withCommas(descriptors(size)).c_str(),
        measured ? ("measuring " + withCommas(pods) + " pods instead").c_str() : "not measured");
  }
  if (kept.empty()) std::printf("bench_cgroups: skipped: the open file limit is too low\n");
  return kept;
}

int run(int argc, char** argv) {
  static constexpr std::size_t kSizes[] = {100, 1000, 5000};  // without --sizes (--quick: 2)
  std::vector<std::size_t> sizes;
  bool quick = false;
  // At least the per-pod read set (part of every size); at most 20,000 so that 5 hierarchies
  // stay well below the kernel's 65,535 memory cgroup IDs.
  Args args(kUsage);
  args.flag("--quick", quick).numbers("--sizes", sizes, kReadPods, std::size_t(20'000));
  if (auto status = args.parse(argc, argv)) return *status;
  if (sizes.empty()) sizes.assign(kSizes, kSizes + (quick ? 2 : 3));
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  const Budgets& budgets = quick ? kQuickBudgets : kFullBudgets;

  auto h = hierarchyForSandbox("bench_cgroups", "it creates cgroups and moves processes into them");
  if (!h) return 77;
  printEnvironment("nodewarden cgroup benchmark",
                   "; this binary only (cgroups/ is compiled with the same flags)", false, true);
  printHierarchy(*h);
  std::printf("  mode: %s\n\n", quick ? "--quick" : "full");
  std::fflush(stdout);
  installStopHandlers();
  sizes = fitOpenFileLimit(sizes);
  auto sandbox =
      sizes.empty() ? std::nullopt : openSandbox(*h, "bench_cgroups", "nodewarden-bench");
  if (!sandbox) return 77;
  std::printf("\n");
  Bench b{*sandbox, *h, budgets};
  const int status = runMeasurements(b, sizes);
  if (stopped()) std::printf("\ninterrupted: removing the sandbox\n");
  const bool removed = closeSandbox(*sandbox);
  return stopped() ? 130 : !removed && status == 0 ? 1 : status;
}

}  // namespace
}  // namespace nodewarden::bench

int main(int argc, char** argv) {
  return nodewarden::bench::run(argc, argv);
}
