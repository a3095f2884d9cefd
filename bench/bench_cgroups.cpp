// bench_cgroups: what reading and watching pod cgroups costs on this machine's real kernel, in a
// sandbox of kubelet-shaped pod cgroups (qosMix); what it times, its targets and exit codes:
// kUsage. Single threaded, not pinned. The sandbox goes on every path out (or with the next run).

#include <libcgroup.h>
#include <sys/resource.h>

#include "bench/support/process.h"
#include "bench/support/report.h"
#include "bench/support/sandbox.h"
#include "cgroups/notify.h"
#include "cgroups/readers.h"

namespace nodewarden::bench {
namespace {

using cgroups::PodCgroup;

constexpr std::uint64_t kSeed = 0x6367726f75707321ULL;  // "cgroups!"
constexpr std::uint64_t kMi = 1024 * 1024;
constexpr std::size_t kReadPods = 100, kBusyPods = 10;  // the read set; its first 10 hold 8 MiB
constexpr std::size_t kBusyBytes = 8 * kMi;
constexpr std::uint64_t kThresholdMargin = 64 * kMi;  // threshold = usage + 64 MiB
constexpr std::size_t kTouchBytes = 128 * kMi;        // what the notification child touches
// A scanned pod holds 5 directories and 5 control files open; discovery closes the files and
// opens a fresh index's 5 directories beside the old: 10 a pod at the peak either way.
constexpr std::size_t kDescriptorsPerPod = 10;
constexpr std::size_t kDescriptorSlack = 512;  // stdio, pipes, libcgroup, the node's files

constexpr const char* kUsage =
    "usage: bench_cgroups [--sizes N[,N...]] [--quick] [--help]\n"
    "\n"
    "Times nodewarden's cgroup readers (beside libcgroup's), v1 memory threshold notifications\n"
    "(beside a pipe), scan, discovery and refresh on real cgroups it creates\n"
    "(\"nodewarden-bench-<pid>\" below each hierarchy root) and removes again. Needs root.\n"
    "  --sizes 100,1000   pod cgroups to scan and discover, 100-20000 (default 100,1000,5000)\n"
    "  --quick            fewer repetitions, 10 notification trials; default sizes 100,1000\n"
    "Targets: <= 2 us per pod usage-only, <= 20 us per pod full read, <= 25 ms for a\n"
    "full scan of 1000 pods, notification p99 <= 5 ms; a miss prints MISSES, the exit status\n"
    "stays 0. Exit 77: the machine cannot run it; 1: a read failed; 130: SIGINT/SIGTERM.\n";

struct Budgets {
  Budget reads, readValue, valueApi, scan, discovery, noopRefresh;
  int trials;
  double trialSeconds;
};
constexpr Budgets kQuickBudgets = {{3, 50, .3}, {2, 20, .3}, {1, 3, .3}, {3, 10, .5},
                                   {2, 5, 1},   {3, 20, .3}, 10,         30};
constexpr Budgets kFullBudgets = {{20, 5000, 2}, {10, 500, 2},   {3, 50, 2}, {10, 300, 4},
                                  {5, 40, 5},    {20, 500, 1.5}, 50,         300};

void printLine(const char* label, const Samples& s, bool millis = false) {
  printSamplesLine(44, label, s, millis ? 1e6 : 1e3, millis ? "ms" : "us");
}

// Whether `result` holds a value (a number goes to gSink); if not, `error` keeps the first.
template <typename T>
bool kept(const Result<T>& result, std::string& error) {
  if (!result && error.empty()) error = result.error().message;
  if constexpr (std::is_arithmetic_v<T>) gSink = gSink + (result ? std::uint64_t(*result) : 0);
  return bool(result);
}

// Passes over `pods` within `budget`, each read timed alone; no samples once one failed.
template <typename F>
Samples timeEachRead(const std::vector<const PodCgroup*>& pods, const Budget& budget, F&& readOne) {
  std::vector<double> nanos;
  bool failed = false;
  measure(budget, [&] {
    for (std::size_t i = 0; i < pods.size() && !failed && !stopped(); ++i) {
      const auto t0 = steadyNow();
      failed = !readOne(*pods[i]);
      nanos.push_back(nanosSince(t0));
    }
    return 0.0;
  });
  return failed ? Samples{} : Samples::from(std::move(nanos));
}

// One run: the sandbox (run() owns it), its pod cgroups so far and the figures judged at the end.
struct Bench {
  cgroups::Sandbox& sandbox;
  const cgroups::Hierarchy& h;
  const Budgets& budgets;
  cgroups::PodCgroups index{h, sandbox.kubepods()};
  std::vector<std::string> uids{};
  std::vector<const PodCgroup*> readSet{};  // the first kReadPods, in index
  Random rng{kSeed};
  Samples usage{}, full{};  // readMemoryUsage; readMemory + readCpuNanos + readProcessCount
  std::optional<double> notifyP99Ms{}, scanMs{};  // scanMs: the median at 1,000 pods

  // Adds pod cgroups up to `target`; the error when one cannot be made (memory cgroup IDs out).
  std::optional<Error> growTo(std::size_t target) {
    while (uids.size() < target && !stopped()) {
      std::string uid = rng.uuid();
      if (auto made = sandbox.addPod(uid, qosMix(uids.size())); !made) return made.error();
      uids.push_back(std::move(uid));
    }
    return std::nullopt;
  }
  bool refreshed() {  // the index holds every pod made, or it says how many it found
    const bool ok = index.refresh() && index.size() == uids.size();
    if (!ok) std::fprintf(stderr, "the index holds %zu of %zu pods\n", index.size(), uids.size());
    return ok;
  }
};

// The read set, its busy pods' 8 MiB charged; 0, or the exit status when it cannot be had.
int setUpReadSet(Bench& b) {
  std::printf("\n== set-up: %zu pod cgroups, %zu of them running a process holding %llu MiB ==\n\n",
              kReadPods, kBusyPods, static_cast<unsigned long long>(kBusyBytes / kMi));
  auto cannot = [](const char* what, const Error& error) {
    std::printf("cannot %s: %s\n", what, error.message.c_str());
    return 77;
  };
  if (auto failed = b.growTo(kReadPods)) return cannot("create pod cgroups", *failed);
  if (!b.refreshed()) return 1;
  for (const std::string& uid : b.uids) {
    b.readSet.push_back(b.index.find(uid));
    if (b.readSet.back() == nullptr) {
      std::fprintf(stderr, "the index has no pod %s\n", uid.c_str());
      return 1;
    }
  }
  std::string buffer;
  for (std::size_t i = 0; i < kBusyPods && !stopped(); ++i) {
    auto child = b.sandbox.spawn(b.readSet[i]->relativePath,
                                 [self = ::getpid()] { return holdMemory(kBusyBytes, self); });
    if (!child) return cannot("start a process in a pod cgroup", child.error());
    bool charged = false;
    for (int wait = 0; wait < 100 && !charged && !stopped(); ++wait) {  // 1 s at most
      auto usage = cgroups::readMemoryUsage(b.readSet[i]->memory, buffer);
      charged = usage && *usage >= kBusyBytes;
      if (!charged) sleepMillis(10);
    }
    if (!charged && !stopped())
      std::printf("  note: busy pod %zu does not show its %zu MiB after 1 s\n", i,
                  kBusyBytes / kMi);
  }
  return stopped() ? 130 : 0;
}

// Reads one pod fully: scanNode's reads and the limit.
bool readFull(const PodCgroup& pod, std::string& buffer, std::string& error) {
  auto memory = cgroups::readMemory(pod.memory, buffer);
  if (!kept(memory, error)) return false;
  gSink = gSink + memory->workingSet;
  return (!pod.cpu || kept(cgroups::readCpuNanos(*pod.cpu, buffer), error)) &&
         kept(cgroups::readProcessCount(pod, buffer), error);
}

// nodewarden's readers on kept-open descriptors (b.usage, b.full); false when a read failed.
bool measureOurReads(Bench& b) {
  std::printf("== per-pod reads, nodewarden readers on kept-open descriptors (%zu pods) ==\n",
              kReadPods);
  std::string buffer, error;
  for (const PodCgroup* pod : b.readSet) readFull(*pod, buffer, error);  // opens every file
  auto each = [&](const char* label, auto&& readOne) {
    const Samples s = timeEachRead(b.readSet, b.budgets.reads, readOne);
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
    return kept(pod.memory.read(cgroups::CgroupDir::File::MemoryStat, buffer), error);
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
  for (; rc == 0; rc = cgroup_read_stats_next(&handle, &stat))
    if (std::strcmp(stat.name, "total_inactive_file") == 0)
      inactive = cgroups::parseUint(stat.value);
  if (handle != nullptr) cgroup_read_stats_end(&handle);
  if (rc == ECGEOF) return inactive;
  return Error{"cgroup_read_stats_begin, " + relative + ": " + cgroup_strerror(rc)};
}

// The value API's usage: cgroup_get_cgroup loads the cgroup (only `controller`'s files when one
// is added, the documented way; else every hierarchy's), then reads the copy. Its return code.
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

void measureLibcgroup(const Bench& b) {
  std::printf("\n== the same reads through libcgroup ==\n");  // discoverHierarchy ran cgroup_init
  const std::string& first = b.readSet[0]->relativePath;
  // cgroup_get_cgroup fails on some hosts once a controller was added: it is then timed with
  // none added, loading every hierarchy's files.
  const char* controller = "memory";
  if (valueApiUsage(first, controller) != 0) {
    std::printf("  cgroup_get_cgroup after add_controller:");
    for (const char* added : {"memory", "cpuacct", "pids", "freezer"})
      std::printf(" %s=%d", added, valueApiUsage(first, added));
    controller = nullptr;
    std::printf("; with none: %d\n", valueApiUsage(first, controller));
  }
  std::printf(
      "  per pod (each read timed alone)                median us     p99 us  vs nodewarden\n");
  auto row = [&](const char* label, const Budget& budget, const Samples& nodewarden, auto&& read) {
    const Samples s = timeEachRead(b.readSet, budget,
                                   [&](const PodCgroup& pod) { return read(pod.relativePath); });
    if (s.count() == 0) return (void)std::printf("    %-44s %10s %10s\n", label, "failed", "-");
    std::printf("    %-44s %10.2f %10.2f   %6.1fx\n", label, s.median() * 1e-3, s.p99() * 1e-3,
                s.median() / std::max(1.0, nodewarden.median()));
  };
  row(controller != nullptr ? "usage  libcgroup get_cgroup+get_value"
                            : "usage  libcgroup get_cgroup(all)+get_value",
      b.budgets.valueApi, b.usage,
      [&](const std::string& pod) { return valueApiUsage(pod, controller) == 0; });
  std::string error;
  row("usage  libcgroup read_value_begin/end", b.budgets.readValue, b.usage,
      [&](const std::string& pod) { return kept(readValue(pod, "memory.usage_in_bytes"), error); });
  const bool cpu = !b.h.cpuacct.empty() && b.h.cpuVersion == cgroups::Version::V1;
  const bool pids = !b.h.pids.empty() && b.h.pidsVersion == cgroups::Version::V1;
  row("full   libcgroup read_value x4 + stats", b.budgets.readValue, b.full,
      [&](const std::string& pod) {
        auto usage = readValue(pod, "memory.usage_in_bytes");
        auto inactive = readInactiveFile(pod);
        if (!kept(usage, error) || !kept(inactive, error)) return false;
        gSink = gSink + cgroups::workingSet(*usage, *inactive);
        return kept(readValue(pod, "memory.limit_in_bytes"), error) &&
               (!cpu || kept(readValue(pod, "cpuacct.usage"), error)) &&
               (!pids || kept(readValue(pod, "pids.current"), error));
      });
  if (!error.empty()) std::printf("  cgroup_read_value path failed: %s\n", error.c_str());
}

const std::size_t gPageSize = std::size_t(::sysconf(_SC_PAGESIZE));
constexpr std::size_t kTouchedPages = kTouchBytes / 4096;

// One trial with a fresh child (`child` once it runs; the caller kills it): the latency, or why
// not ("" on a stop). A baseline trial arms no threshold: the child says 'p' right after touching
// the crossing page. Same child, same loop, same wake-up through the scheduler: what the
// threshold adds is the kernel's own delay in noticing the crossing.
Result<double> runTrial(Bench& b, const PodCgroup& pod, std::int64_t* touchedAt, bool baseline,
                        pid_t& child) {
  // The first page whose touch takes the usage above the threshold, at one page a touch. An
  // estimate: v1 looks at thresholds once every 128 page charge events per CPU, charges up to
  // 64 pages ahead (per-CPU stock), and charges page tables too.
  const std::size_t crossing = std::size_t(kThresholdMargin / gPageSize);
  std::memset(touchedAt, 0, kTouchedPages * sizeof *touchedAt);  // charged to us, not the pod
  Pipe ready, go;
  if (!ready.ok || !go.ok) return Error{std::string("pipe: ") + std::strerror(errno)};
  auto spawned = b.sandbox.spawn(pod.relativePath, [&, self = ::getpid()] {
    if (!dieWithParent(self)) return 0;
    volatile char* bytes = mapSmallPages(kTouchBytes);
    if (bytes == nullptr || ::write(ready.fd[1], "r", 1) != 1) return 2;
    if (readByte(go.fd[0], 10000) != 'g') return 4;
    for (std::size_t i = 0; i < kTouchBytes / gPageSize && !stopped(); ++i) {
      touchedAt[i] = monotonicNanos();
      bytes[i * gPageSize] = 1;
      if (baseline && i == crossing && ::write(ready.fd[1], "p", 1) != 1) return 6;
    }
    return ::write(ready.fd[1], "d", 1) == 1 ? 0 : 5;
  });
  ready.close(1);
  go.close(0);
  if (!spawned) return spawned.error();
  child = *spawned;
  std::string buffer;
  if (readByte(ready.fd[0], 5000) != 'r') return Error{"the child did not get ready"};
  auto before = cgroups::readMemoryUsage(pod.memory, buffer);
  if (!before) return before.error();
  Result<cgroups::MemoryThresholdNotifier> notifier = Error{"a baseline trial arms none"};
  if (!baseline)
    notifier = cgroups::MemoryThresholdNotifier::arm(pod.memory, *before + kThresholdMargin);
  if (!baseline && !notifier) return notifier.error();
  if (::write(go.fd[1], "g", 1) != 1) return Error{"writing the go signal failed"};
  const int n = waitReadable(baseline ? ready.fd[0] : notifier->fd(), 5000);
  const std::int64_t wokeAt = monotonicNanos();
  if (stopped()) return Error{""};
  if (n <= 0) return Error{baseline ? "no ping within 5 s" : "no threshold event within 5 s"};
  if (baseline && readByte(ready.fd[0], 1000) != 'p') return Error{"the ping was not 'p'"};
  if (readByte(ready.fd[0], 10000) != 'd') return Error{"the child did not finish touching"};
  return double(wokeAt - touchedAt[crossing]);
}

// Threshold and baseline trials alternately in the read set's last pod (no process in it), so
// that both see the same machine; b.notifyP99Ms once the threshold trials measured.
void measureNotification(Bench& b) {
  std::printf(
      "\n== v1 memory threshold notification (MemoryThresholdNotifier) ==\n"
      "  per trial: a fresh child touches 128 MiB page by page (small pages) in a pod cgroup\n"
      "  armed at usage + 64 MiB; latency = wake from poll() - touch of the crossing page\n");
  if (b.h.memoryVersion != cgroups::Version::V1)
    return (void)std::printf(
        "  skipped: the memory controller is on cgroup v2 (no cgroup.event_control)\n");
  void* log = ::mmap(nullptr, kTouchedPages * sizeof(std::int64_t), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);  // left mapped until the process exits
  if (log == MAP_FAILED) return (void)std::printf("  skipped: mmap failed\n");
  Samples latency[2];  // wake − touch of the crossing page (may be negative)
  int trial = 0;       // even: threshold, odd: baseline
  for (const auto start = steadyNow(); trial < 2 * b.budgets.trials && !stopped() &&
                                       nanosSince(start) * 1e-9 < b.budgets.trialSeconds;
       ++trial) {
    pid_t child = 0;
    auto ns = runTrial(b, *b.readSet.back(), static_cast<std::int64_t*>(log), trial % 2, child);
    if (ns) latency[trial % 2].nanos.push_back(*ns);
    if (!ns && !ns.error().message.empty())
      std::printf("  trial %d failed: %s\n", trial, ns.error().message.c_str());
    if (child <= 0) continue;
    // Waited for (bounded), then reaped by the sandbox, which would kill its pid again at the end.
    ::kill(child, SIGKILL);
    for (int i = 0; i < 5000 && !exited(child); ++i) sleepMillis(1);
    b.sandbox.reap();
  }
  static constexpr const char* kTitles[] = {
      "threshold (eventfd from cgroup.event_control):",
      "baseline (no threshold: the child writes a pipe right after touching that page):"};
  for (int k = 0; k < 2; ++k) {
    const Samples& s = latency[k] = Samples::from(std::move(latency[k].nanos));
    std::printf("  %s\n    trials: %d attempted, %zu measured\n", kTitles[k], (trial + 1 - k) / 2,
                s.count());
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

// Scans, discoveries and refreshes finding nothing at the index's size, printed: the scan's
// median, or nullopt when one failed. Each is checked by one more, untimed.
std::optional<double> measureScanAndDiscovery(cgroups::PodCgroups& index, const Budgets& budgets) {
  std::string failed;
  const Samples scan =  // the untimed first opens new pods' files
      measure(budgets.scan, 1, timed([&] { return cgroups::scanNode(index, {}, steadyNow()); }));
  printLine("scanNode", scan, true);
  if (auto last = cgroups::scanNode(index, {}, steadyNow()); !last.errors.empty())
    failed = "a scan failed to read: " + last.errors[0].message;
  // Closes every pod's control files, keeping the peak at kDescriptorsPerPod during discovery.
  for (const auto& [uid, pod] : index.pods()) {
    pod->memory.closeFiles();
    for (const auto* dir : {&pod->cpu, &pod->pids, &pod->unified, &pod->freezer})
      if (*dir) (*dir)->closeFiles();
  }
  std::vector<double> mounts, refreshes;  // the parts of a discovery
  const Samples discover = measure(budgets.discovery, [&] {
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
    if (!refreshed || fresh.size() != index.size())
      failed = "a fresh index found " + std::to_string(fresh.size()) + " pods";
    return ns;
  });
  const Samples noop = measure(budgets.noopRefresh, timed([&] { return index.refresh(); }));
  if (!failed.empty() || !index.refresh()) {
    std::fprintf(stderr, "%s\n", failed.empty() ? "a refresh failed" : failed.c_str());
    return std::nullopt;
  }
  printLine("discoverHierarchy + fresh refresh", discover, true);
  printLine("  discoverHierarchy", Samples::from(std::move(mounts)), true);
  printLine("  refresh of a new PodCgroups", Samples::from(std::move(refreshes)), true);
  printLine("refresh, nothing changed", noop, true);
  return scan.median();
}

// The measurements and the verdicts, on a sandbox that run() destroys whatever this returns.
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
  target("notification p99", b.notifyP99Ms, "ms", 5,  // v2 has no threshold notification
         b.h.memoryVersion == cgroups::Version::V1 ? "not measured" : "skipped (cgroup v2)");
  return 0;
}

// Raises RLIMIT_NOFILE for the largest size; a size that still does not fit becomes the largest
// multiple of 100 that does (the figures say which size was measured). Empty: skip (exit 77).
std::vector<std::size_t> fitOpenFileLimit(const std::vector<std::size_t>& sizes) {
  auto descriptors = [](std::size_t pods) { return pods * kDescriptorsPerPod + kDescriptorSlack; };
  auto limit = cgroups::raiseOpenFileLimit(descriptors(sizes.back()));
  if (!limit) {
    skipped("bench_cgroups", limit.error().message);
    return {};
  }
  rlimit hard{};
  ::getrlimit(RLIMIT_NOFILE, &hard);
  std::printf(
      "open file limit (RLIMIT_NOFILE soft): %s; wanted %s (%zu per pod + %zu)\n"
      "  (the hard limit is %s; raising it needs CAP_SYS_RESOURCE, which this process %s)\n",
      withCommas(*limit).c_str(), withCommas(descriptors(sizes.back())).c_str(), kDescriptorsPerPod,
      kDescriptorSlack, withCommas(hard.rlim_max).c_str(),
      cgroups::hasCapSysResource() ? "has" : "lacks");
  const std::size_t fits =
      (*limit - std::min<std::uint64_t>(*limit, kDescriptorSlack)) / kDescriptorsPerPod;
  std::vector<std::size_t> kept;
  for (std::size_t size : sizes) {
    const std::size_t pods = size <= fits ? size : fits / 100 * 100;
    const bool measured = pods >= kReadPods && (kept.empty() || kept.back() < pods);
    if (measured) kept.push_back(pods);
    if (pods == size) continue;
    std::printf("  %s pods do not fit: %s\n", withCommas(size).c_str(),
                measured ? ("measuring " + withCommas(pods) + " instead").c_str() : "not measured");
  }
  if (kept.empty()) skipped("bench_cgroups", "the open file limit is too low");
  return kept;
}

int run(int argc, char** argv) {
  static constexpr std::size_t kSizes[] = {100, 1000, 5000};  // without --sizes (--quick: 2)
  std::vector<std::size_t> sizes;
  bool quick = false;
  // From the read set's size to 20,000: well below the kernel's 65,535 memory cgroup IDs.
  Args args(kUsage);
  args.flag("--quick", quick).numbers("--sizes", sizes, kReadPods, std::size_t(20'000));
  if (auto status = args.parse(argc, argv)) return *status;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows line by line, also in a pipe
  if (sizes.empty()) sizes.assign(kSizes, kSizes + (quick ? 2 : 3));
  std::ranges::sort(sizes);
  sizes.erase(std::ranges::unique(sizes).begin(), sizes.end());

  auto h = hierarchyForSandbox("bench_cgroups", "it creates cgroups and moves processes into them");
  if (!h) return 77;
  printEnvironment("nodewarden cgroup benchmark",
                   "; this binary only (cgroups/ is compiled with the same flags)", false, true);
  printHierarchy(*h);
  std::printf("  mode: %s\n\n", quick ? "--quick" : "full");
  installStopHandlers();
  sizes = fitOpenFileLimit(sizes);
  auto sandbox =
      sizes.empty() ? std::nullopt : openSandbox(*h, "bench_cgroups", "nodewarden-bench");
  if (!sandbox) return 77;
  Bench b{*sandbox, *h, quick ? kQuickBudgets : kFullBudgets};
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
