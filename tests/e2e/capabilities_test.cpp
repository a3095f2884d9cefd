// Least privilege, proven on the kernel (issue 14): the real agent, started as root with only
// the capabilities systemd/kubernetes/daemonset.yaml adds (as effective and permitted sets,
// those a container runtime gives a root container with `drop: [ALL], add: [KILL, SYS_NICE]`),
// against pods whose processes run as another user (65534, as a container's usually do). With that
// set it reads the pod's usage, arms its kernel notifications and evicts it (SIGTERM, then
// SIGKILL). Without CAP_KILL the kernel refuses every signal to another user's process; the
// agent names the refusal (EPERM, CAP_KILL) in its eviction-failed line, leaves the pod alone
// and keeps running. cgroup.kill (v2, or a hybrid host's cgroup2 tree) is the kernel's own
// kill and needs no capability: the last case shows that too. CAP_SYS_NICE is for --nice=-20
// (the loop thread's niceness): taken with it, refused and logged without it.
//
// Why the other candidates are left out (the first case runs without them): DAC_OVERRIDE and
// DAC_READ_SEARCH (the cgroup files, /proc/pressure and the agent's own files are root's, and
// the agent, UID 0, reads and writes them as their owner), SYS_PTRACE (it reads no other
// process's restricted /proc files), SYS_RESOURCE (PSI trigger windows are then multiples of
// 2 s, checked below; RLIMIT_NOFILE goes up to the hard limit the runtime gives).
// Not reproduced here: the bounding set and no_new_privs (they matter only for programs the
// agent would execute; it executes none) and the RuntimeDefault seccomp profile.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/e2e_env.h"

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;

namespace {

using CapMask = std::uint64_t;
constexpr CapMask capBit(int cap) {
  return CapMask{1} << cap;
}
// What the DaemonSet adds after dropping ALL (tests/systemd/kustomize.sh checks the manifest
// against the same list).
constexpr CapMask kDaemonSetCaps = capBit(CAP_KILL) | capBit(CAP_SYS_NICE);
constexpr uid_t kPodUser = 65534;  // nobody
constexpr gid_t kPodGroup = 65534;

int capget(__user_cap_data_struct (&data)[2]) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  return int(::syscall(SYS_capget, &header, data));
}
int capset(__user_cap_data_struct (&data)[2]) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  return int(::syscall(SYS_capset, &header, data));
}

// While alive, a program this process starts as root gets exactly `caps` (permitted and
// effective) instead of every capability: SECBIT_NOROOT keeps root's exec from granting the
// full set, and the ambient set carries `caps` across the exec. This process keeps its own
// capabilities; the destructor restores its inheritable and ambient sets and securebits.
// Not thread-safe (the test is single-threaded while an agent starts).
class ExecCapabilities {
 public:
  explicit ExecCapabilities(CapMask caps) {
    securebits_ = ::prctl(PR_GET_SECUREBITS);
    if (securebits_ < 0 || capget(saved_) != 0) {
      error_ = std::string("reading this process's capabilities: ") + std::strerror(errno);
      return;
    }
    __user_cap_data_struct data[2] = {saved_[0], saved_[1]};
    data[0].inheritable = std::uint32_t(caps);
    data[1].inheritable = std::uint32_t(caps >> 32);
    if (capset(data) != 0) {
      error_ = std::string("capset (inheritable): ") + std::strerror(errno);
      return;
    }
    changed_ = true;
    ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    for (int cap = 0; cap < 64; ++cap) {
      if ((caps & capBit(cap)) == 0) continue;
      if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0) {
        error_ = "raising ambient capability " + std::to_string(cap) + ": " + std::strerror(errno);
        return;
      }
    }
    if (::prctl(PR_SET_SECUREBITS, securebits_ | SECBIT_NOROOT, 0, 0, 0) != 0) {
      error_ = std::string("PR_SET_SECUREBITS (SECBIT_NOROOT): ") + std::strerror(errno);
    }
  }
  ~ExecCapabilities() {
    if (!changed_) return;
    ::prctl(PR_SET_SECUREBITS, securebits_, 0, 0, 0);
    ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    capset(saved_);
  }
  ExecCapabilities(const ExecCapabilities&) = delete;
  ExecCapabilities& operator=(const ExecCapabilities&) = delete;
  // Empty when in force.
  const std::string& error() const { return error_; }

 private:
  int securebits_ = 0;
  __user_cap_data_struct saved_[2] = {};
  bool changed_ = false;
  std::string error_;
};

// A process's capability set `field` ("CapEff", "CapPrm") from /proc/PID/status.
std::optional<CapMask> capabilitiesOf(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with(field + ":"))
      return std::strtoull(line.c_str() + field.size() + 1, nullptr, 16);
  }
  return std::nullopt;
}

// The sandbox "node". On a memory hierarchy of cgroup v1 the pods are left out of the cgroup2
// mount, as on a pure v1 node, so that killing goes through kill(2) (freezer, SIGKILL each
// PID, thaw) — the path CAP_KILL guards; `withUnified` puts them there too (cgroup.kill, on a
// hybrid host). On cgroup v2 every kill is cgroup.kill.
cgroups::Sandbox makeNode(bool withUnified) {
  const cgroups::Hierarchy& h = hierarchy();
  if (h.memoryVersion != cgroups::Version::V1) return makeSandbox(256 * kMiB);
  static int counter = 0;
  cgroups::SandboxOptions options;
  options.name =
      "nodewarden-e2e-" + std::to_string(::getpid()) + "-caps" + std::to_string(++counter);
  options.memoryLimit = 256 * kMiB;
  options.useUnified = withUnified;
  auto sandbox = cgroups::Sandbox::create(h, options);
  if (!sandbox) FAIL(sandbox.error().message);
  (void)sandbox->writeMemoryFile(sandbox->kubepods(), "memory.memsw.limit_in_bytes",
                                 std::to_string(256 * kMiB));
  return std::move(sandbox).value();
}

// A pod process as a container's usually is: user and group 65534, not the agent's. It
// allocates and touches `bytes`, then sleeps (ending by itself after 120 s). On SIGTERM:
// exits 42 (`polite`, so the test sees the SIGTERM arrived) or ignores it.
pid_t spawnPodProcess(cgroups::Sandbox& sandbox, const std::string& relative, std::uint64_t bytes,
                      bool polite) {
  int ready[2];
  REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
  auto pid = sandbox.spawn(relative, [&] {
    const int out = ready[1];
    // Only stdio and the ready pipe: nothing of the test's (the agent's log) stays open here.
    if (out > 3) ::close_range(3, unsigned(out) - 1, 0);
    ::close_range(unsigned(out) + 1, ~0U, 0);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kPodGroup, kPodGroup, kPodGroup) != 0 ||
        ::setresuid(kPodUser, kPodUser, kPodUser) != 0) {
      return 4;
    }
    // After the user change, which clears it: never outlive a test killed by a timeout.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (polite) {
      std::signal(SIGTERM, [](int) { ::_exit(42); });
    } else {
      std::signal(SIGTERM, SIG_IGN);
    }
    void* memory =
        ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return 2;
    std::memset(memory, 0x5a, bytes);
    if (::write(out, "r", 1) != 1) return 3;
    ::close(out);
    for (int i = 0; i < 1200; ++i) ::usleep(100000);
    return 0;
  });
  ::close(ready[1]);
  if (!pid) {
    ::close(ready[0]);
    FAIL("spawning into " << relative << ": " << pid.error().message);
  }
  pollfd p{ready[0], POLLIN, 0};
  char byte = 0;
  const bool ok = ::poll(&p, 1, 20000) == 1 && ::read(ready[0], &byte, 1) == 1 && byte == 'r';
  ::close(ready[0]);
  REQUIRE_MESSAGE(ok, "the pod process in " << relative << " did not start as user " << kPodUser
                                            << " and allocate within 20 s");
  return *pid;
}

// Waits (bounded) for each of the sandbox's children `pids` to end and reaps it; nullopt for
// one still running. The sandbox then forgets the reaped ones (it reaps whatever ended, so it
// is told only once every status is here), and never signals a reused PID.
std::vector<std::optional<int>> waitExits(cgroups::Sandbox& sandbox, const std::vector<pid_t>& pids,
                                          Millis timeout) {
  std::vector<std::optional<int>> statuses(pids.size());
  waitUntil(
      [&] {
        bool all = true;
        for (std::size_t i = 0; i < pids.size(); ++i) {
          int value = 0;
          if (!statuses[i] && ::waitpid(pids[i], &value, WNOHANG) == pids[i]) statuses[i] = value;
          all = all && statuses[i].has_value();
        }
        return all;
      },
      timeout, Millis(5));
  sandbox.reap();
  return statuses;
}

std::string describe(const std::optional<int>& status) {
  if (!status) return "still running";
  if (WIFEXITED(*status)) return "exited " + std::to_string(WEXITSTATUS(*status));
  if (WIFSIGNALED(*status)) return std::string("killed by ") + ::strsignal(WTERMSIG(*status));
  return "status " + std::to_string(*status);
}

// The policies: allocatableMemory.available below 100Mi, evicted at once (SIGKILL) or after
// 1 s, the pod's grace capped at 1 s (SIGTERM, then SIGKILL).
constexpr const char* kHardPolicy = R"({
  "evictionHard": { "allocatableMemory.available": "100Mi" },
  "housekeepingInterval": "1s"
})";
constexpr const char* kSoftPolicy = R"({
  "evictionSoft": { "allocatableMemory.available": "100Mi" },
  "evictionSoftGracePeriod": { "allocatableMemory.available": "1s" },
  "evictionMaxPodGracePeriod": 1,
  "housekeepingInterval": "1s"
})";

// A sandbox node with one pod to evict and the pressure that makes the agent evict it:
//   batch (best-effort, priority 0, grace 1 s): two processes of user 65534, 24 MiB each —
//     `polite` exits 42 on SIGTERM, `stubborn` ignores it and needs SIGKILL;
//   node-agent (system-node-critical, never evicted): the pressure, a process of root's.
// Hard or soft, the threshold is allocatableMemory.available 100Mi of 256 MiB; the pressure
// brings available to 70 MiB, so batch alone (48 MiB and more) is the victim and, with it
// gone, nothing else is needed.
struct Node {
  cgroups::Sandbox sandbox;
  TempDir manifests;
  TempDir files;
  PodSpec batch = PodSpec("e2e", "batch").withPriority(0).withGrace(1);
  PodSpec nodeAgent = PodSpec("kube-system", "node-agent")
                          .withClass("system-node-critical")
                          .request("memory", "128Mi");
  std::string batchCgroup;
  std::string nodeAgentCgroup;
  pid_t polite = -1;
  pid_t stubborn = -1;

  Node(bool hard, bool withUnified) : sandbox(makeNode(withUnified)) {
    writeFile(files.file("policy.json"), hard ? kHardPolicy : kSoftPolicy);
    batchCgroup = addPod(sandbox, &manifests, batch);
    nodeAgentCgroup = addPod(sandbox, &manifests, nodeAgent);
    polite = spawnPodProcess(sandbox, batchCgroup, 24 * kMiB, true);
    stubborn = spawnPodProcess(sandbox, batchCgroup, 24 * kMiB, false);
  }

  AgentConfig agentConfig() {
    AgentConfig config;
    config.policyFile = files.file("policy.json");
    config.manifestsDir = manifests.path();
    config.kubepods = sandbox.kubepods();
    // The DaemonSet's state directory: the agent writes its journal there (as root, the
    // owner, without CAP_DAC_OVERRIDE).
    config.extraArgs = {"--eviction-journal", files.file("evictions.json"), "--nice=-20",
                        "--realtime=1"};
    return config;
  }

  void pressure() {
    (void)spawnAllocatorTo(sandbox, nodeAgentCgroup, 70 * std::int64_t(kMiB), OnTerm::Die, 60);
  }
};

// Starts the agent with exactly `caps` and checks it runs with them.
std::unique_ptr<AgentProcess> startAgent(const AgentConfig& config, CapMask caps) {
  std::unique_ptr<AgentProcess> agent;
  {
    ExecCapabilities restricted(caps);
    REQUIRE_MESSAGE(restricted.error().empty(), restricted.error());
    agent = std::make_unique<AgentProcess>(config);
  }
  const auto effective = capabilitiesOf(agent->pid(), "CapEff");
  const auto permitted = capabilitiesOf(agent->pid(), "CapPrm");
  REQUIRE(effective.has_value());
  REQUIRE(permitted.has_value());
  CHECK_MESSAGE(*effective == caps,
                "the agent's effective capabilities are " << std::hex << *effective);
  CHECK(*permitted == caps);
  return agent;
}

// Whether this test process may take SCHED_FIFO (as root, it has CAP_SYS_NICE): asked on a
// thread of its own, which then ends.
bool realtimeAllowed() {
  bool allowed = false;
  std::thread([&] {
    const sched_param one{1};
    allowed = ::sched_setscheduler(0, SCHED_FIFO, &one) == 0;
  }).join();
  return allowed;
}

bool onV1() {
  return hierarchy().memoryVersion == cgroups::Version::V1;
}

}  // namespace

TEST_CASE(
    "with the DaemonSet's KILL and SYS_NICE the agent reads, arms and evicts a pod of another "
    "user") {
  Node node(/*hard=*/false, /*withUnified=*/false);
  const std::unique_ptr<AgentProcess> agent = startAgent(node.agentConfig(), kDaemonSetCaps);

  // Its kernel notifications, armed without CAP_SYS_RESOURCE (PSI windows of 2 s) or any DAC
  // capability: the node's PSI trigger, and the v1 usage threshold or the v2 kubepods PSI
  // trigger and memory.events watch.
  const auto detectors = agent->waitForEvent("detectors", 10s);
  REQUIRE_MESSAGE(detectors.has_value(), agent->logText());
  const std::string armed = detectors->field("armed");
  CAPTURE(armed);
  struct stat procPressure {};
  if (::stat("/proc/pressure/memory", &procPressure) == 0) {
    CHECK(armed.find("PSI /proc/pressure/memory \"some 100000 2000000\"") != std::string::npos);
  }
  if (onV1()) {
    CHECK(armed.find("memory threshold allocatableMemory.available") != std::string::npos);
  } else {
    CHECK(armed.find(node.sandbox.kubepods() + "/memory.pressure") != std::string::npos);
    CHECK(armed.find("inotify ") != std::string::npos);
  }
  for (const LogLine& line : agent->events("notification-unavailable")) {
    // Only v2's notice that it has no memory thresholds; nothing refused.
    CHECK_MESSAGE(line.field("what") == "memory thresholds", line.raw);
  }
  // --nice=-20 with CAP_SYS_NICE: its loop thread took it.
  const auto priority = agent->waitForEvent("loop-priority", 5s);
  REQUIRE_MESSAGE(priority.has_value(), agent->logText());
  CHECK_MESSAGE(priority->field("level") == "info", priority->raw);
  CHECK(priority->number("nice") == -20);
  // --realtime=1 with CAP_SYS_NICE: its loop thread is SCHED_FIFO, where this machine allows
  // realtime at all (on cgroup v1 with realtime group scheduling, a cgroup without realtime
  // runtime refuses even root); either way said once, and the agent runs on.
  const auto realtime = agent->waitForEvent("loop-realtime", 5s);
  REQUIRE_MESSAGE(realtime.has_value(), agent->logText());
  CHECK(agent->events("loop-realtime").size() == 1);
  if (realtimeAllowed()) {
    CHECK_MESSAGE(realtime->field("level") == "info", realtime->raw);
    CHECK(realtime->number("priority") == 1);
  } else {
    CHECK_MESSAGE(realtime->field("level") == "warn", realtime->raw);
  }

  const std::size_t mark = agent->lines().size();
  node.pressure();
  const auto evict = agent->waitForEvent("evict", 10s, mark);
  REQUIRE_MESSAGE(evict.has_value(), agent->logText());
  CHECK(evict->field("pod") == node.batch.key());
  CHECK(evict->field("kind") == "soft");
  // Its usage, read from its cgroup: both processes' pages.
  CHECK(evict->number("usage") >= double(48 * kMiB));

  // SIGTERM reached the polite process of user 65534; SIGKILL, after the 1 s grace, the one
  // that ignored it.
  const auto statuses = waitExits(node.sandbox, {node.polite, node.stubborn}, 5s);
  const std::optional<int>& politeStatus = statuses[0];
  const std::optional<int>& stubbornStatus = statuses[1];
  CHECK_MESSAGE((politeStatus && WIFEXITED(*politeStatus) && WEXITSTATUS(*politeStatus) == 42),
                "polite process: " << describe(politeStatus) << "\n"
                                   << agent->logText());
  CHECK_MESSAGE(
      (stubbornStatus && WIFSIGNALED(*stubbornStatus) && WTERMSIG(*stubbornStatus) == SIGKILL),
      "stubborn process: " << describe(stubbornStatus));
  const auto evicted = agent->waitForEvent("evicted", 10s, mark);
  REQUIRE_MESSAGE(evicted.has_value(), agent->logText());
  CHECK(evicted->field("pod") == node.batch.key());
  CHECK(evicted->field("method") ==
        (onV1() ? "SIGTERM, then freezer+SIGKILL" : "SIGTERM, then cgroup.kill"));
  CHECK(evicted->number("processes") >= 2);
  CHECK(agent->events("eviction-failed").empty());
  // RLIMIT_NOFILE: raised up to the hard limit the agent was given, without CAP_SYS_RESOURCE.
  // Only a hard limit below 65536 makes it warn (`open-file-limit`): the runtime sets that
  // limit, and CAP_SYS_RESOURCE would be needed to go above it.
  rlimit files{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &files) == 0);
  if (files.rlim_max >= 65536) CHECK(agent->events("open-file-limit").empty());

  if (std::getenv("E2E_VERBOSE")) MESSAGE(agent->logText());
  const std::optional<int> status = agent->stop();
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
}

TEST_CASE("without CAP_KILL a soft eviction of another user's pod is refused with EPERM") {
  Node node(/*hard=*/false, /*withUnified=*/false);
  const std::unique_ptr<AgentProcess> agent = startAgent(node.agentConfig(), 0);
  // --nice=-20 without CAP_SYS_NICE: refused, said, and the agent runs on at its niceness.
  const auto priority = agent->waitForEvent("loop-priority", 10s);
  REQUIRE_MESSAGE(priority.has_value(), agent->logText());
  CHECK_MESSAGE(priority->field("level") == "warn", priority->raw);
  CHECK(priority->field("error").find("setpriority") != std::string::npos);
  // --realtime=1 without it: refused (unless RLIMIT_RTPRIO allows priority 1 to anyone), said
  // once, and the agent runs on.
  const auto realtime = agent->waitForEvent("loop-realtime", 5s);
  REQUIRE_MESSAGE(realtime.has_value(), agent->logText());
  CHECK(agent->events("loop-realtime").size() == 1);
  rlimit rtprio{};
  if (::getrlimit(RLIMIT_RTPRIO, &rtprio) == 0 && rtprio.rlim_cur == 0) {
    CHECK_MESSAGE(realtime->field("level") == "warn", realtime->raw);
    CHECK(realtime->field("error").find("sched_setscheduler") != std::string::npos);
  }

  const std::size_t mark = agent->lines().size();
  node.pressure();
  const auto evict = agent->waitForEvent("evict", 10s, mark);
  REQUIRE_MESSAGE(evict.has_value(), agent->logText());
  CHECK(evict->field("pod") == node.batch.key());
  // SIGTERM is refused at once (v1 and v2 alike: kill(2) to another user needs CAP_KILL), the
  // eviction fails and says why.
  const auto failed = agent->waitForEvent("eviction-failed", 5s, mark);
  REQUIRE_MESSAGE(failed.has_value(), agent->logText());
  CAPTURE(failed->raw);
  CHECK(failed->field("pod") == node.batch.key());
  CHECK(failed->field("error").find("Operation not permitted") != std::string::npos);
  CHECK(failed->field("error").find("SIGTERM") != std::string::npos);
  CHECK(failed->field("error").find("CAP_KILL") != std::string::npos);
  CHECK(agent->events("evicted").empty());

  // The pod is untouched, the agent alive and serving.
  std::this_thread::sleep_for(1500ms);  // past the pod's grace: no SIGKILL follows either
  CHECK(alive(node.polite));
  CHECK(alive(node.stubborn));
  CHECK(agent->running());
  CHECK(httpRequest(agent->port(), "GET", "/healthz").status == 200);
  if (std::getenv("E2E_VERBOSE")) MESSAGE(agent->logText());
  const std::optional<int> status = agent->stop();
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
}

TEST_CASE("without CAP_KILL a hard eviction is refused where it takes kill(2), not cgroup.kill") {
  // The layouts this host has: v1 kills with kill(2) (refused); cgroup.kill, on v2 or on a
  // hybrid host's cgroup2 tree, is the kernel's own and works without any capability.
  std::vector<bool> layouts;  // withUnified
  if (onV1()) layouts.push_back(false);
  if (!onV1() || !hierarchy().unified.empty()) layouts.push_back(true);
  for (const bool withUnified : layouts) {
    Node node(/*hard=*/true, withUnified);
    // cgroup.kill needs Linux 5.14; without it the v2 path is kill(2) as well.
    bool cgroupKill = false;
    if (withUnified || !onV1()) {
      struct stat st {};
      cgroupKill =
          ::stat((hierarchy().unified + "/" + node.batchCgroup + "/cgroup.kill").c_str(), &st) == 0;
    }
    CAPTURE(withUnified);
    CAPTURE(cgroupKill);
    const std::unique_ptr<AgentProcess> agent = startAgent(node.agentConfig(), 0);
    const std::size_t mark = agent->lines().size();
    node.pressure();
    const auto evict = agent->waitForEvent("evict", 10s, mark);
    REQUIRE_MESSAGE(evict.has_value(), agent->logText());
    CHECK(evict->field("pod") == node.batch.key());
    CHECK(evict->field("kind") == "hard");
    if (cgroupKill) {
      const auto evicted = agent->waitForEvent("evicted", 5s, mark);
      REQUIRE_MESSAGE(evicted.has_value(), agent->logText());
      CHECK(evicted->field("method") == "cgroup.kill");
      for (const std::optional<int>& status :
           waitExits(node.sandbox, {node.polite, node.stubborn}, 5s)) {
        CHECK_MESSAGE((status && WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL),
                      describe(status));
      }
    } else {
      const auto failed = agent->waitForEvent("eviction-failed", 5s, mark);
      REQUIRE_MESSAGE(failed.has_value(), agent->logText());
      CAPTURE(failed->raw);
      CHECK(failed->field("error").find("Operation not permitted") != std::string::npos);
      CHECK(failed->field("error").find("SIGKILL") != std::string::npos);
      CHECK(failed->field("error").find("CAP_KILL") != std::string::npos);
      CHECK(agent->events("evicted").empty());
      CHECK(alive(node.polite));
      CHECK(alive(node.stubborn));
      // Thawed again: the refused kill leaves no frozen pod behind.
      if (!hierarchy().freezer.empty()) {
        std::ifstream state(hierarchy().freezer + "/" + node.batchCgroup + "/freezer.state");
        std::string text;
        std::getline(state, text);
        CHECK(text == "THAWED");
      }
    }
    CHECK(agent->running());
    CHECK(httpRequest(agent->port(), "GET", "/healthz").status == 200);
    if (std::getenv("E2E_VERBOSE")) MESSAGE(agent->logText());
    const std::optional<int> status = agent->stop();
    REQUIRE(status.has_value());
    CHECK(WIFEXITED(*status));
    CHECK(WEXITSTATUS(*status) == 0);
  }
}
