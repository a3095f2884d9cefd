// Kernel notifications on real cgroups: v1 memory thresholds, PSI triggers, v2 file events.
#include <doctest/doctest.h>

#include <poll.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <thread>

#include "cgroups/detect.h"
#include "cgroups/notify.h"
#include "cgroups/readers.h"
#include "tests/cgroups/real_env.h"

using namespace nodewarden;
using namespace nodewarden::cgroups;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kMiB = 1024 * 1024;
const char* kUid = "5e7a1c00-0000-4000-8000-00000000abcd";

// Polls one descriptor for `events`, bounded by `timeout`. Returns revents (0 on timeout).
short waitFor(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
  return n > 0 ? p.revents : 0;
}

}  // namespace

TEST_CASE("a v1 memory threshold eventfd fires when a child process crosses it") {
  const Hierarchy& h = test::realHierarchy();
  if (h.memoryVersion != Version::V1) {
    MESSAGE("memory is on cgroup v2 here: thresholds are v1-only (covered by the error test)");
    return;
  }
  Sandbox sandbox = test::makeSandbox();
  const std::string rel = sandbox.addPod(kUid, "burstable").value();
  PodCgroups pods(h, sandbox.kubepods());
  REQUIRE(pods.refresh());
  PodCgroup* pod = pods.find(kUid);
  REQUIRE(pod != nullptr);
  std::string buffer;
  const std::uint64_t base = readMemoryUsage(pod->memory, buffer).value();

  auto notifier = MemoryThresholdNotifier::arm(pod->memory, base + 48 * kMiB);
  REQUIRE_MESSAGE(notifier, (notifier ? "" : notifier.error().message));
  CHECK(notifier->threshold() == base + 48 * kMiB);
  CHECK(notifier->consume().value() == 0);  // nothing yet
  CHECK(waitFor(notifier->fd(), POLLIN, 50ms) == 0);

  // A child below the threshold does not wake it; one above does.
  REQUIRE(sandbox.spawn(rel, [] { return test::allocateAndSleep(16 * kMiB); }));
  CHECK(waitFor(notifier->fd(), POLLIN, 300ms) == 0);
  const auto spawned = std::chrono::steady_clock::now();
  REQUIRE(sandbox.spawn(rel, [] { return test::allocateAndSleep(64 * kMiB); }));
  CHECK((waitFor(notifier->fd(), POLLIN, 5000ms) & POLLIN) != 0);
  const auto woke = std::chrono::steady_clock::now();
  CHECK(notifier->consume().value() >= 1);
  CHECK(readMemoryUsage(pod->memory, buffer).value() >= base + 48 * kMiB);
  MESSAGE("woken " << std::chrono::duration<double, std::milli>(woke - spawned).count()
                   << " ms after starting a 64 MiB allocation");

  // Crossing back down (the child is killed) notifies too: "in any direction".
  REQUIRE(sandbox.removeCgroup(rel));
  CHECK((waitFor(notifier->fd(), POLLIN, 5000ms) & POLLIN) != 0);
}

TEST_CASE("re-arming a threshold: the new notifier fires, the dropped one is gone") {
  const Hierarchy& h = test::realHierarchy();
  if (h.memoryVersion != Version::V1) return;
  Sandbox sandbox = test::makeSandbox();
  const std::string rel = sandbox.addPod(kUid, "guaranteed").value();
  PodCgroups pods(h, sandbox.kubepods());
  REQUIRE(pods.refresh());
  std::string buffer;
  const PodCgroup* pod = pods.find(kUid);
  const std::uint64_t base = readMemoryUsage(pod->memory, buffer).value();
  auto high = MemoryThresholdNotifier::arm(pod->memory, base + 512 * kMiB);
  REQUIRE(high);
  auto low = MemoryThresholdNotifier::arm(pod->memory, base + 24 * kMiB);
  REQUIRE(low);
  REQUIRE(sandbox.spawn(rel, [] { return test::allocateAndSleep(40 * kMiB); }));
  CHECK((waitFor(low->fd(), POLLIN, 5000ms) & POLLIN) != 0);
  CHECK(waitFor(high->fd(), POLLIN, 100ms) == 0);  // never reached
}

TEST_CASE("threshold and PSI notifiers say clearly when they cannot work") {
  const Hierarchy& h = test::realHierarchy();
  Sandbox sandbox = test::makeSandbox();
  (void)sandbox.addPod(kUid, "burstable").value();
  PodCgroups pods(h, sandbox.kubepods());
  REQUIRE(pods.refresh());
  const PodCgroup* pod = pods.find(kUid);
  if (pod->unified) {
    // cgroup2 has no cgroup.event_control.
    auto onV2 = MemoryThresholdNotifier::arm(*pod->unified, 1 << 20);
    REQUIRE_FALSE(onV2);
    CHECK(onV2.error().message.find("need cgroup v1") != std::string::npos);
  }
  if (pod->memory.version() == Version::V1) {
    auto psiOnV1 = PsiTrigger::armAt(pod->memory, "memory", PressureKind::Some, 100000, 2000000);
    REQUIRE_FALSE(psiOnV1);
    CHECK(psiOnV1.error().message.find("cgroup v1") != std::string::npos);
  }
  auto badWindow = PsiTrigger::arm("/proc/pressure/memory", PressureKind::Some, 100000, 100000);
  REQUIRE_FALSE(badWindow);
  CHECK(badWindow.error().message.find("500ms") != std::string::npos);
  auto missing = PsiTrigger::arm(h.memory + "/no-such-dir/memory.pressure", PressureKind::Some,
                                 100000, 2000000);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.find("no such file") != std::string::npos);
}

TEST_CASE("PSI triggers arm on /proc/pressure and on a cgroup2 directory; POLLERR when it goes") {
  // Without CAP_SYS_RESOURCE (as in this project's containers) windows must be multiples of
  // 2 s; a 1 s window is refused with that reason before the kernel is asked.
  if (!hasCapSysResource()) {
    auto subSecond = PsiTrigger::arm("/proc/pressure/memory", PressureKind::Some, 150000, 1000000);
    REQUIRE_FALSE(subSecond);
    CHECK(subSecond.error().message.find("multiple of 2s") != std::string::npos);
  }
  auto system = PsiTrigger::arm("/proc/pressure/memory", PressureKind::Some, 150000, 2000000);
  if (!system) {
    MESSAGE("PSI unavailable here: " << system.error().message);
    return;
  }
  CHECK(system->trigger() == "some 150000 2000000");
  CHECK((system->check().value() == PsiTrigger::Event::None));
  CHECK(system->read().value().some.avg10 >= 0);
  // One trigger per descriptor: a second arm opens its own.
  auto full = PsiTrigger::arm("/proc/pressure/memory", PressureKind::Full, 500000, 2000000);
  REQUIRE(full);

  const Hierarchy& h = test::realHierarchy();
  if (h.unified.empty()) return;
  Sandbox sandbox = test::makeSandbox();
  const std::string rel = sandbox.addPod(kUid, "burstable").value();
  PodCgroups pods(h, sandbox.kubepods());
  REQUIRE(pods.refresh());
  const PodCgroup* pod = pods.find(kUid);
  REQUIRE(pod->unified.has_value());
  auto trigger = PsiTrigger::armAt(*pod->unified, "memory", PressureKind::Some, 100000, 2000000);
  REQUIRE_MESSAGE(trigger, (trigger ? "" : trigger.error().message));
  CHECK(trigger->path() == pod->unified->path() + "/memory.pressure");
  CHECK((trigger->check().value() == PsiTrigger::Event::None));
  // The cgroup is removed: the kernel reports POLLERR on the trigger ("event source is gone").
  REQUIRE(sandbox.removeCgroup(rel));
  PsiTrigger::Event event = PsiTrigger::Event::None;
  for (int i = 0; i < 100 && event == PsiTrigger::Event::None; ++i) {
    event = trigger->check().value();
    if (event == PsiTrigger::Event::None) std::this_thread::sleep_for(10ms);
  }
  CHECK((event == PsiTrigger::Event::Gone));
}

TEST_CASE("a cgroup2 file-modified watch fires on cgroup.events when a process joins") {
  const Hierarchy& h = test::realHierarchy();
  if (h.unified.empty()) {
    MESSAGE("no cgroup2 mount here");
    return;
  }
  Sandbox sandbox = test::makeSandbox();
  const std::string rel = sandbox.addPod(kUid, "burstable").value();
  // memory.events needs the v2 memory controller (absent on hybrid hosts); cgroup.events is
  // the same kernel mechanism and exists on every cgroup2 directory.
  auto watcher = FileModifiedWatcher::watch(h.unified + "/" + rel + "/cgroup.events");
  REQUIRE(watcher);
  CHECK(watcher->consume().value() == 0);
  auto child =
      sandbox.spawn(rel, [] { return test::allocateAndSleep(1 * kMiB); });  // populated 0→1
  REQUIRE(child);
  CHECK((waitFor(watcher->fd(), POLLIN, 2000ms) & POLLIN) != 0);
  CHECK(watcher->consume().value() >= 1);
  // The last process leaves (populated 1→0): another event. (The kernel batches these
  // notifications by ~20 ms and drops them if the cgroup is removed meanwhile.)
  ::kill(*child, SIGKILL);
  CHECK((waitFor(watcher->fd(), POLLIN, 2000ms) & POLLIN) != 0);
  CHECK(watcher->consume().value() >= 1);
  REQUIRE(sandbox.removeCgroup(rel));

  auto nowhere = FileModifiedWatcher::watch(h.unified + "/no-such-cgroup/memory.events");
  REQUIRE_FALSE(nowhere);
  CHECK(isGone(nowhere.error()));
}

TEST_CASE("the memory line poller sees a real allocation cross its line, v1 and v2 alike") {
  const Hierarchy& h = test::realHierarchy();
  Sandbox sandbox = test::makeSandbox();
  const std::string rel = sandbox.addPod(kUid, "burstable").value();
  PodCgroups pods(h, sandbox.kubepods());
  REQUIRE(pods.refresh());
  const PodCgroup* pod = pods.find(kUid);
  REQUIRE(pod != nullptr);
  std::string buffer;
  const std::uint64_t base = readMemoryUsage(pod->memory, buffer).value();
  MemoryLinePoller poller([&]() { return readMemoryUsage(pod->memory, buffer); }, PollTuning{});
  poller.setLines({base + 48 * kMiB});

  auto first = poller.poll(std::chrono::steady_clock::now());
  REQUIRE_MESSAGE(first, (first ? "" : first.error().message));
  CHECK_FALSE(first->crossed);
  CHECK(first->next < 1s);  // 48 MiB at the assumed 1 GiB/s, over 4: about 12 ms

  // Poll at the pace it asks for while a child allocates 64 MiB: the crossing is seen once.
  REQUIRE(sandbox.spawn(rel, [] { return test::allocateAndSleep(64 * kMiB); }));
  const auto started = std::chrono::steady_clock::now();
  int crossings = 0;
  int polls = 0;
  std::chrono::nanoseconds next = first->next;
  while (std::chrono::steady_clock::now() - started < 10s && crossings == 0) {
    std::this_thread::sleep_for(next);
    auto sample = poller.poll(std::chrono::steady_clock::now());
    REQUIRE(sample);
    ++polls;
    if (sample->crossed) {
      ++crossings;
      CHECK(sample->usage >= base + 48 * kMiB);
      CHECK(sample->crossedAfter <= std::chrono::steady_clock::now());
    }
    next = sample->next;
  }
  CHECK(crossings == 1);
  const auto seen = std::chrono::steady_clock::now();
  // Past the line the pace stays quick (to see a fall and a new rise), and no second report.
  auto after = poller.poll(std::chrono::steady_clock::now());
  REQUIRE(after);
  CHECK_FALSE(after->crossed);
  CHECK(after->next <= 20ms);
  MESSAGE("line crossed and seen "
          << std::chrono::duration<double, std::milli>(seen - started).count()
          << " ms after starting a 64 MiB allocation, in " << polls << " polls");
}

TEST_CASE("cgroup v2: memory.high on a pod makes its memory.events notify when a child passes it") {
  // The kernel edge of --memory-high-edge (node/detectors.h): the first charges past
  // memory.high raise memory.events' "high", which an inotify watch sees at once.
  const Hierarchy& h = test::realHierarchy();
  if (h.memoryVersion != Version::V2) {
    MESSAGE("memory is not on cgroup v2 here (the VM lane runs this)");
    return;
  }
  Sandbox sandbox = test::makeSandbox();
  const std::string rel = sandbox.addPod(kUid, "burstable").value();
  PodCgroups pods(h, sandbox.kubepods());
  REQUIRE(pods.refresh());
  const PodCgroup* pod = pods.find(kUid);
  REQUIRE(pod != nullptr);
  std::string buffer;
  const std::uint64_t base = readMemoryUsage(pod->memory, buffer).value();
  REQUIRE(sandbox.writeMemoryFile(rel, "memory.high", std::to_string(base + 32 * kMiB)));
  auto watcher = FileModifiedWatcher::watch(h.memory + "/" + rel + "/memory.events");
  REQUIRE(watcher);
  CHECK(watcher->consume().value() == 0);
  CHECK(pod->memory.readOnce("memory.events").value().find("\nhigh 0\n") != std::string::npos);

  const auto started = std::chrono::steady_clock::now();
  auto child = sandbox.spawn(rel, [] { return test::allocateAndSleep(64 * kMiB); });
  REQUIRE(child);
  REQUIRE((waitFor(watcher->fd(), POLLIN, 5000ms) & POLLIN) != 0);
  const auto seen = std::chrono::steady_clock::now();
  CHECK(watcher->consume().value() >= 1);
  const std::string events = pod->memory.readOnce("memory.events").value();
  CHECK_MESSAGE(events.find("\nhigh 0\n") == std::string::npos, events);
  MESSAGE("memory.events notified "
          << std::chrono::duration<double, std::milli>(seen - started).count()
          << " ms after a child started allocating 64 MiB with memory.high 32 MiB above");
  ::kill(*child, SIGKILL);
}
