// Readers, the pod index and the scan on this machine's real cgroups, with real processes.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <unistd.h>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "cgroups/readers.h"
#include "tests/cgroups/real_env.h"

using namespace nodewarden;
using namespace nodewarden::cgroups;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kMiB = 1024 * 1024;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::uint64_t kernelFigure(const std::string& path) {
  return std::stoull(slurp(path));
}

// The named key of a flat keyed file, read independently of the parsers under test.
std::uint64_t kernelStat(const std::string& path, const std::string& key) {
  std::istringstream in(slurp(path));
  std::string name;
  std::uint64_t value = 0;
  while (in >> name >> value) {
    if (name == key) return value;
  }
  FAIL("no " << key << " in " << path);
  return 0;
}

// memory.usage_in_bytes (v1) or memory.current (v2) of the cgroup at `memoryPath`.
std::uint64_t kernelUsage(const std::string& memoryPath) {
  const bool v1 = test::realHierarchy().memoryVersion == Version::V1;
  return kernelFigure(memoryPath + (v1 ? "/memory.usage_in_bytes" : "/memory.current"));
}

// Waits (bounded) until the pod's memory usage reaches `bytes`.
void waitForUsage(const std::string& memoryPath, std::uint64_t bytes) {
  for (int i = 0; i < 500; ++i) {
    if (kernelUsage(memoryPath) >= bytes) return;
    std::this_thread::sleep_for(10ms);
  }
  FAIL("usage of " << memoryPath << " never reached " << bytes);
}

const char* uidA = "0b4c6f1e-1111-4a2b-9c3d-00000000000a";
const char* uidB = "0b4c6f1e-2222-4a2b-9c3d-00000000000b";
const char* uidC = "0b4c6f1e-3333-4a2b-9c3d-00000000000c";

}  // namespace

TEST_CASE("discovery finds this machine's hierarchies and libcgroup agrees with mountinfo") {
  const Hierarchy& h = test::realHierarchy();
  CHECK_FALSE(h.memory.empty());
  CHECK(slurp("/proc/self/mountinfo").find(" " + h.memory + " ") != std::string::npos);
  if (h.memoryVersion == Version::V1) {
    CHECK(std::ifstream(h.memory + "/memory.usage_in_bytes").good());
  } else {
    CHECK(std::ifstream(h.memory + "/cgroup.controllers").good());
  }
  bool agreed = false;
  for (const std::string& note : h.notes) {
    CHECK(note.find("libcgroup has controller") == std::string::npos);
    agreed = agreed || note.starts_with("libcgroup agrees");
  }
  CHECK(agreed);
  INFO("mode: " << toString(h.mode));
}

TEST_CASE("the pod index maps kubelet pod cgroups to UIDs in both drivers") {
  for (Driver driver : {Driver::Cgroupfs, Driver::Systemd}) {
    CAPTURE(static_cast<int>(driver));
    Sandbox sandbox = test::makeSandbox(driver);
    const std::string a = sandbox.addPod(uidA, "guaranteed").value();
    const std::string b = sandbox.addPod(uidB, "burstable").value();
    const std::string c = sandbox.addPod(uidC, "besteffort").value();
    REQUIRE(sandbox.addChild(b, std::string("cri-containerd-") + std::string(64, 'a') + ".scope"));

    PodCgroups pods(test::realHierarchy(), sandbox.kubepods());
    CHECK((pods.driver() == driver));
    auto refreshed = pods.refresh();
    REQUIRE(refreshed);
    CHECK(refreshed->added.size() == 3);
    CHECK(refreshed->errors.empty());
    REQUIRE(pods.find(uidA) != nullptr);
    CHECK(pods.find(uidA)->qos == "guaranteed");
    CHECK(pods.find(uidB)->qos == "burstable");
    CHECK(pods.find(uidC)->qos == "besteffort");
    CHECK(pods.find(uidB)->relativePath == b);
    CHECK(pods.find(uidB)->cpu.has_value());
    CHECK(pods.find(uidB)->pids.has_value());
    if (driver == Driver::Systemd) {
      CHECK(b.find("kubepods-burstable.slice/"
                   "kubepods-burstable-pod0b4c6f1e_2222_4a2b_9c3d_00000000000b.slice") !=
            std::string::npos);
    } else {
      CHECK(b.ends_with("kubepods/burstable/pod0b4c6f1e-2222-4a2b-9c3d-00000000000b"));
    }

    // Nothing changed: nothing reported.
    auto again = pods.refresh();
    REQUIRE(again);
    CHECK(again->added.empty());
    CHECK(again->removed.empty());

    // A pod goes away, another is recreated under the same name: removed, then added fresh.
    REQUIRE(sandbox.removeCgroup(c));
    REQUIRE(sandbox.removeCgroup(a));
    REQUIRE(sandbox.addPod(uidA, "guaranteed"));
    auto changed = pods.refresh();
    REQUIRE(changed);
    CHECK(changed->added == std::vector<std::string>{uidA});
    CHECK(changed->removed.size() == 2);
    CHECK(pods.size() == 2);
    CHECK(pods.find(uidC) == nullptr);
  }
}

TEST_CASE("readers report what the kernel reports for a pod with real processes") {
  Sandbox sandbox = test::makeSandbox();
  const std::string rel = sandbox.addPod(uidB, "burstable").value();
  const std::string container = sandbox.addChild(rel, std::string(64, 'b')).value();
  REQUIRE(sandbox.spawn(container, [] { return test::allocateAndSleep(64 * kMiB); }));
  REQUIRE(sandbox.spawn(container, [] { return test::allocateAndSleep(32 * kMiB); }));
  // A second container (cgroup v2 allows processes only in leaves once a cgroup hands
  // controllers down, and a kubelet's pod holds none itself).
  const std::string second = sandbox.addChild(rel, std::string(64, 'e')).value();
  REQUIRE(sandbox.spawn(second, [] { return test::burnCpu(); }));
  const Hierarchy& h = test::realHierarchy();
  const std::string memoryPath = h.memory + "/" + rel;
  waitForUsage(memoryPath, 96 * kMiB);

  PodCgroups pods(h, sandbox.kubepods());
  REQUIRE(pods.refresh());
  const PodCgroup* pod = pods.find(uidB);
  REQUIRE(pod != nullptr);
  std::string buffer;

  // Usage: the same file the kernel shows, read through the kept-open descriptor.
  const std::uint64_t before = kernelUsage(memoryPath);
  const std::uint64_t usage = readMemoryUsage(pod->memory, buffer).value();
  const std::uint64_t after = kernelUsage(memoryPath);
  CHECK(usage >= std::min(before, after) - 4 * kMiB);
  CHECK(usage <= std::max(before, after) + 4 * kMiB);
  CHECK(usage >= 96 * kMiB);

  auto memory = readMemory(pod->memory, buffer);
  REQUIRE(memory);
  const char* inactiveKey =
      h.memoryVersion == Version::V1 ? "total_inactive_file" : "inactive_file";
  CHECK(memory->inactiveFile == kernelStat(memoryPath + "/memory.stat", inactiveKey));
  CHECK(memory->workingSet == memory->usage - std::min(memory->usage, memory->inactiveFile));
  CHECK(memory->workingSet >= 96 * kMiB);  // anonymous memory, no swap: all of it is working set
  CHECK_FALSE(memory->limit.has_value());  // no limit set: the kernel's huge value is unlimited

  // A limit appears as written.
  REQUIRE(sandbox.writeMemoryFile(
      rel, h.memoryVersion == Version::V1 ? "memory.limit_in_bytes" : "memory.max",
      std::to_string(512 * kMiB)));
  auto limited = readMemory(pod->memory, buffer);
  REQUIRE(limited);
  CHECK(limited->limit == std::optional<std::uint64_t>(512 * kMiB));

  // Three processes in the pod's two container cgroups.
  CHECK(readProcessCount(*pod, buffer).value() == 3);

  // CPU: one process burning a core for ~1 s shows as roughly 1e9 nanocores.
  REQUIRE(pod->cpu.has_value());
  auto kernelCpu = [&] {
    const std::string dir = h.cpuacct + "/" + rel;
    return h.cpuVersion == Version::V1 ? kernelFigure(dir + "/cpuacct.usage")
                                       : kernelStat(dir + "/cpu.stat", "usage_usec") * 1000;
  };
  const std::uint64_t cpuBefore = kernelCpu();
  const std::uint64_t cpu0 = readCpuNanos(*pod->cpu, buffer).value();
  const std::uint64_t cpuAfter = kernelCpu();
  CHECK(cpu0 >= cpuBefore);
  CHECK(cpu0 <= cpuAfter);
  // The rate is checked against the kernel's own counter read around each scan, so the
  // check holds however busy the machine is (the burner's share of a core varies with load).
  const std::uint64_t k0a = kernelCpu();
  auto t0 = std::chrono::steady_clock::now();
  auto scan0 =
      scanNode(pods, ScanOptions{.procRoot = "/proc", .nodeFsPath = "/", .imageFsPath = ""}, t0);
  const std::uint64_t k0b = kernelCpu();
  std::this_thread::sleep_for(1s);
  const std::uint64_t k1a = kernelCpu();
  auto t1 = std::chrono::steady_clock::now();
  auto scan1 =
      scanNode(pods, ScanOptions{.procRoot = "/proc", .nodeFsPath = "/", .imageFsPath = ""}, t1);
  const std::uint64_t k1b = kernelCpu();
  REQUIRE(scan0.summary.pods.size() == 1);
  REQUIRE(scan1.summary.pods.size() == 1);
  CHECK_FALSE(scan0.summary.pods[0].cpuUsageNanoCores.has_value());  // first sight: no rate yet
  REQUIRE(scan1.summary.pods[0].cpuUsageNanoCores.has_value());
  const std::uint64_t nanoCores = *scan1.summary.pods[0].cpuUsageNanoCores;
  const double seconds = std::chrono::duration<double>(t1 - t0).count();
  const double lowest = double(k1a - k0b) / seconds;   // CPU time surely between the scans
  const double highest = double(k1b - k0a) / seconds;  // at most this
  INFO("nanocores: " << nanoCores << ", kernel between " << lowest << " and " << highest);
  CHECK(double(nanoCores) >= lowest * 0.99);
  CHECK(double(nanoCores) <= highest * 1.01);
  CHECK(nanoCores > 10'000'000);     // the burner got some CPU in a second, however busy
  CHECK(nanoCores < 1'150'000'000);  // one single-threaded process: at most one core
  CHECK(scan1.errors.empty());
  CHECK(scan1.summary.pods[0].uid == uidB);
  CHECK(*scan1.summary.pods[0].memoryWorkingSetBytes >= 96 * kMiB);
  CHECK(*scan1.summary.pods[0].processCount == 3);

  // Node figures: kubepods working set includes the pod; node and filesystem figures are there.
  const NodeStats& node = scan1.summary.node;
  REQUIRE(node.podsMemoryWorkingSetBytes.has_value());
  CHECK(*node.podsMemoryWorkingSetBytes >= 96 * kMiB);
  CHECK_FALSE(node.podsMemoryAvailableBytes.has_value());  // kubepods has no limit here
  REQUIRE(node.memoryAvailableBytes.has_value());
  CHECK(*node.memoryAvailableBytes > 0);
  CHECK(node.maxPid.value() == kernelFigure("/proc/sys/kernel/pid_max"));
  CHECK(node.curProc.value() > 3);
  REQUIRE(node.nodeFs.capacityBytes.has_value());
  CHECK(*node.nodeFs.availableBytes <= *node.nodeFs.capacityBytes);
}

TEST_CASE("the kubepods limit gives the allocatable figures") {
  Sandbox sandbox = test::makeSandbox(Driver::Cgroupfs, true, true, 256 * kMiB);
  const std::string rel = sandbox.addPod(uidA, "guaranteed").value();
  REQUIRE(sandbox.spawn(rel, [] { return test::allocateAndSleep(40 * kMiB); }));
  waitForUsage(test::realHierarchy().memory + "/" + rel, 40 * kMiB);
  PodCgroups pods(test::realHierarchy(), sandbox.kubepods());
  REQUIRE(pods.refresh());
  auto scan = scanNode(pods, ScanOptions{.procRoot = "/proc", .nodeFsPath = "", .imageFsPath = ""},
                       std::chrono::steady_clock::now());
  const NodeStats& node = scan.summary.node;
  REQUIRE(node.podsMemoryAvailableBytes.has_value());
  CHECK(*node.podsMemoryWorkingSetBytes >= 40 * kMiB);
  CHECK(*node.podsMemoryAvailableBytes + *node.podsMemoryWorkingSetBytes == 256 * kMiB);
}

TEST_CASE("a cgroup removed mid-scan is a normal event, not an error") {
  Sandbox sandbox = test::makeSandbox();
  std::vector<std::string> rels;
  for (int i = 0; i < 40; ++i) {
    char uid[64];
    std::snprintf(uid, sizeof uid, "9f00a000-0000-4000-8000-%012d", i);
    rels.push_back(sandbox.addPod(uid, i % 2 == 0 ? "burstable" : "besteffort").value());
  }
  PodCgroups pods(test::realHierarchy(), sandbox.kubepods());
  REQUIRE(pods.refresh());
  REQUIRE(pods.size() == 40);
  // Remove half behind the index's back: their descriptors stay open, reads fail with ENODEV.
  for (std::size_t i = 0; i < rels.size(); i += 2) REQUIRE(sandbox.removeCgroup(rels[i]));
  auto scan = scanNode(pods, ScanOptions{.procRoot = "/proc", .nodeFsPath = "", .imageFsPath = ""},
                       std::chrono::steady_clock::now());
  CHECK(scan.vanished.size() == 20);
  CHECK(scan.summary.pods.size() == 20);
  for (const Error& error : scan.errors) FAIL_CHECK(error.message);

  // Removing while another thread scans in a loop: no errors other than vanished pods.
  Sandbox busy = test::makeSandbox();
  std::vector<std::string> busyRels;
  for (int i = 0; i < 60; ++i) {
    char uid[64];
    std::snprintf(uid, sizeof uid, "9f00b000-0000-4000-8000-%012d", i);
    busyRels.push_back(busy.addPod(uid, "burstable").value());
  }
  PodCgroups busyPods(test::realHierarchy(), busy.kubepods());
  REQUIRE(busyPods.refresh());
  std::size_t vanished = 0;
  std::vector<std::string> errors;
  std::thread remover([&] {
    for (const std::string& rel : busyRels) {
      (void)busy.removeCgroup(rel);
    }
  });
  for (int round = 0; round < 200 && busyPods.size() > 0; ++round) {
    auto s =
        scanNode(busyPods, ScanOptions{.procRoot = "/proc", .nodeFsPath = "", .imageFsPath = ""},
                 std::chrono::steady_clock::now());
    vanished += s.vanished.size();
    for (const Error& error : s.errors) errors.push_back(error.message);
    auto refreshed = busyPods.refresh();
    REQUIRE(refreshed);
    for (const Error& error : refreshed->errors) errors.push_back(error.message);
  }
  remover.join();
  for (const std::string& error : errors) FAIL_CHECK(error);
  REQUIRE(busyPods.refresh());
  CHECK(busyPods.size() == 0);
}

TEST_CASE("system-wide PSI and per-cgroup PSI read as the kernel prints them") {
  auto memory = readSystemPressure("/proc", "memory");
  if (!memory) {
    MESSAGE("no /proc/pressure on this kernel: " << memory.error().message);
    return;
  }
  CHECK(memory->full.has_value());
  CHECK(memory->some.avg10 >= 0);
  const Hierarchy& h = test::realHierarchy();
  if (h.unified.empty()) return;
  Sandbox sandbox = test::makeSandbox();
  const std::string rel = sandbox.addPod(uidA, "guaranteed").value();
  PodCgroups pods(h, sandbox.kubepods());
  REQUIRE(pods.refresh());
  REQUIRE(pods.find(uidA)->unified.has_value());
  auto pressure = readPressure(*pods.find(uidA)->unified, "memory");
  REQUIRE(pressure);
  CHECK(pressure->some.totalMicros == 0);  // an empty cgroup never stalled
}

TEST_CASE("swap usage: read where the kernel accounts it, absent (not an error) where not") {
  Sandbox sandbox = test::makeSandbox();
  const std::string rel = sandbox.addPod(uidA, "burstable").value();
  REQUIRE(sandbox.spawn(rel, [] { return test::allocateAndSleep(8 * kMiB); }));
  const Hierarchy& h = test::realHierarchy();
  waitForUsage(h.memory + "/" + rel, 8 * kMiB);
  PodCgroups pods(h, sandbox.kubepods());
  REQUIRE(pods.refresh());
  const PodCgroup* pod = pods.find(uidA);
  REQUIRE(pod != nullptr);
  std::string buffer;
  auto swap = readSwapUsage(pod->memory, buffer);
  REQUIRE_MESSAGE(swap, (swap ? "" : swap.error().message));
  const std::string file =
      h.memoryVersion == Version::V1 ? "/memory.memsw.usage_in_bytes" : "/memory.swap.current";
  struct stat st {};
  const bool accounted = ::stat((h.memory + "/" + rel + file).c_str(), &st) == 0;
  CHECK(swap->has_value() == accounted);
  if (swap->has_value()) {
    // No memory pressure here: nothing is swapped out (and machines of this project have no
    // swap), so the figure is the kernel's 0 — read through the parser, not assumed.
    CHECK(**swap <= 8 * kMiB);
    MESSAGE("swap of a pod using 8 MiB: " << **swap << " bytes (" << file << ")");
  } else {
    MESSAGE("no " << file << " on this kernel: swap usage is unknown, not 0");
  }
}
