// Killing a pod's process tree on real cgroups: every method, nothing outside touched.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "cgroups/kill.h"
#include "cgroups/readers.h"
#include "tests/cgroups/real_env.h"

using namespace nodewarden;
using namespace nodewarden::cgroups;
using namespace std::chrono_literals;

namespace {

const char* kUid = "c0ffee00-0000-4000-8000-000000000001";
const char* kOtherUid = "c0ffee00-0000-4000-8000-000000000002";

// A process that forks `children` grandchildren (which sleep) and then keeps forking
// short-lived ones every few ms, so a kill races with forks. Bounded: ends by itself.
int forkingParent(int children) {
  for (int i = 0; i < children; ++i) {
    if (::fork() == 0) {
      for (int s = 0; s < 600; ++s) ::usleep(100000);
      ::_exit(0);
    }
  }
  for (int i = 0; i < 20000; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::usleep(20000);
      ::_exit(0);
    }
    if (pid > 0) ::waitpid(-1, nullptr, WNOHANG);
    ::usleep(3000);
  }
  return 0;
}

// True while `pid` exists and is not a zombie.
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  if (text.empty()) return false;
  const std::size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

// Waits (bounded) until the pod's cgroup lists `count` processes or more.
std::vector<pid_t> waitForProcesses(const PodKiller& killer, const PodCgroup& pod,
                                    std::size_t count) {
  std::vector<pid_t> pids;
  for (int i = 0; i < 300; ++i) {
    pids = killer.processes(pod).value();
    if (pids.size() >= count) return pids;
    std::this_thread::sleep_for(10ms);
  }
  FAIL("the pod never had " << count << " processes (has " << pids.size() << ")");
  return pids;
}

struct Case {
  const char* name;
  bool unified;
  bool freezer;
  const char* method;
};

}  // namespace

TEST_CASE("killPod empties a forking process tree and touches nothing outside the pod") {
  const Hierarchy& h = test::realHierarchy();
  const Case cases[] = {
      {"cgroup.kill (pod in the cgroup2 tree)", true, true, "cgroup.kill"},
      {"v1 freezer", false, true, "freezer+SIGKILL"},
      {"plain SIGKILL rounds", false, false, "SIGKILL"},
  };
  for (const Case& c : cases) {
    const std::string caseName = c.name;
    CAPTURE(caseName);
    if (c.unified && h.unified.empty()) continue;
    // On pure cgroup v2 every pod is in the cgroup2 tree: only cgroup.kill applies.
    if (!c.unified && h.memoryVersion == Version::V2) continue;
    if (c.freezer && !c.unified && h.freezer.empty()) continue;
    Sandbox sandbox = test::makeSandbox(Driver::Cgroupfs, c.unified, c.freezer);
    const std::string rel = sandbox.addPod(kUid, "burstable").value();
    const std::string container = sandbox.addChild(rel, std::string(64, 'c')).value();
    const std::string otherRel = sandbox.addPod(kOtherUid, "besteffort").value();
    REQUIRE(sandbox.spawn(container, [] { return forkingParent(5); }));
    // The pod's other container (cgroup v2: processes only in leaves).
    const std::string second = sandbox.addChild(rel, std::string(64, 'd')).value();
    REQUIRE(sandbox.spawn(second, [] { return test::allocateAndSleep(4 << 20); }));
    auto neighbour = sandbox.spawn(otherRel, [] { return test::allocateAndSleep(1 << 20); });
    REQUIRE(neighbour);
    // A process of ours outside every pod cgroup.
    const pid_t outsider = ::fork();
    if (outsider == 0) {
      for (int s = 0; s < 600; ++s) ::usleep(100000);
      ::_exit(0);
    }

    PodCgroups pods(h, sandbox.kubepods());
    REQUIRE(pods.refresh());
    const PodCgroup* pod = pods.find(kUid);
    REQUIRE(pod != nullptr);
    CHECK(pod->unified.has_value() == c.unified);
    PodKiller killer(pods);
    const std::vector<pid_t> before = waitForProcesses(killer, *pod, 7);

    auto report = killer.killPod(*pod, 3000ms);
    REQUIRE_MESSAGE(report, (report ? "" : report.error().message));
    REQUIRE(report->method);
    CHECK(toString(*report->method) == c.method);
    CHECK(report->remaining == 0);
    CHECK(killer.processes(*pod).value().empty());
    for (pid_t pid : before) CHECK_FALSE(alive(pid));
    MESSAGE(caseName << ": " << report->rounds << " rounds, " << report->signalled << " signalled, "
                     << report->elapsed.count() << " us");

    // The neighbour pod, the outsider and this process are untouched.
    CHECK(alive(*neighbour));
    CHECK(alive(outsider));
    CHECK(killer.processes(*pods.find(kOtherUid)).value().size() == 1);
    ::kill(outsider, SIGKILL);
    ::waitpid(outsider, nullptr, 0);
  }
}

TEST_CASE("signalPod delivers SIGTERM for a graceful stop; killPod finishes one that ignores it") {
  Sandbox sandbox = test::makeSandbox();
  const std::string rel = sandbox.addPod(kUid, "guaranteed").value();
  auto polite = sandbox.spawn(rel, [] {
    std::signal(SIGTERM, [](int) { ::_exit(42); });
    return test::allocateAndSleep(1 << 20);
  });
  auto stubborn = sandbox.spawn(rel, [] {
    std::signal(SIGTERM, SIG_IGN);
    return test::allocateAndSleep(1 << 20);
  });
  REQUIRE(polite);
  REQUIRE(stubborn);
  PodCgroups pods(test::realHierarchy(), sandbox.kubepods());
  REQUIRE(pods.refresh());
  PodKiller killer(pods);
  const PodCgroup* pod = pods.find(kUid);
  waitForProcesses(killer, *pod, 2);
  std::this_thread::sleep_for(100ms);  // let both install their handlers

  auto sent = killer.signalPod(*pod, SIGTERM);
  REQUIRE(sent);
  CHECK(sent->signalled == 2);
  int status = 0;
  REQUIRE(::waitpid(*polite, &status, 0) == *polite);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 42);
  std::this_thread::sleep_for(200ms);
  CHECK(alive(*stubborn));  // ignored SIGTERM: the grace period would run out

  auto killed = killer.killPod(*pod, 2000ms);
  REQUIRE(killed);
  CHECK(killed->remaining == 0);
  REQUIRE(::waitpid(*stubborn, &status, 0) == *stubborn);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}

TEST_CASE("the killer refuses anything outside the managed layout, and never kills itself") {
  const Hierarchy& h = test::realHierarchy();
  Sandbox sandbox = test::makeSandbox();
  const std::string rel = sandbox.addPod(kUid, "burstable").value();
  PodCgroups pods(h, sandbox.kubepods());
  REQUIRE(pods.refresh());
  PodKiller killer(pods);
  const PodCgroup* managed = pods.find(kUid);
  REQUIRE(killer.check(*managed));

  // A PodCgroup that is not the index's own (e.g. forged or stale) is refused.
  PodCgroup forged;
  forged.uid = kUid;
  forged.qos = "burstable";
  forged.relativePath = rel;
  forged.memory = CgroupDir::open(h.memory + "/" + rel, h.memoryVersion).value();
  auto notIndexed = killer.killPod(forged, 100ms);
  REQUIRE_FALSE(notIndexed);
  CHECK(notIndexed.error().message.find("not a pod of the managed index") != std::string::npos);

  // Paths outside kubepods, or a directory that is not the UID's pod cgroup.
  forged.relativePath = sandbox.top();
  auto outside = killer.signalPod(forged, SIGKILL);
  REQUIRE_FALSE(outside);
  CHECK(outside.error().message.find("not below the managed kubepods cgroup") != std::string::npos);
  forged.relativePath = sandbox.kubepods() + "/burstable/pod" + std::string(kOtherUid);
  auto wrongUid = killer.signalPod(forged, SIGKILL);
  REQUIRE_FALSE(wrongUid);
  CHECK(wrongUid.error().message.find("not the pod cgroup of UID") != std::string::npos);

  // A pod holding this very process is refused (cgroup.kill would take us with it). Move this
  // test process in for the check only, then back where it was.
  std::ifstream selfCgroup("/proc/self/cgroup");
  std::string line;
  std::string originalMemory;
  while (std::getline(selfCgroup, line)) {
    const std::size_t first = line.find(':');
    const std::size_t second = line.find(':', first + 1);
    const std::string controllers = line.substr(first + 1, second - first - 1);
    if (h.memoryVersion == Version::V1 ? controllers.find("memory") != std::string::npos
                                       : controllers.empty()) {
      originalMemory = line.substr(second + 1);
    }
  }
  REQUIRE_FALSE(originalMemory.empty());
  auto moveSelf = [&](const std::string& relative) {
    std::ofstream procs(h.memory + "/" + relative + "/cgroup.procs");
    procs << ::getpid() << std::flush;
    return procs.good();
  };
  struct MoveBack {
    std::function<void()> undo;
    ~MoveBack() { undo(); }
  } moveBack{[&] { moveSelf(originalMemory == "/" ? "" : originalMemory.substr(1)); }};
  REQUIRE(moveSelf(rel));
  auto self = killer.killPod(*managed, 100ms);
  REQUIRE_FALSE(self);
  CHECK(self.error().message.find("own process") != std::string::npos);
  auto selfTerm = killer.signalPod(*managed, SIGTERM);
  REQUIRE_FALSE(selfTerm);
}
