// node/detectors.h on an in-code cgroup tree (tests/support/cgroup_tree.h): the poller's
// lines are placed from the figures the cycle read — nothing is read again to place them —
// and a crossing, or a change of kubepods' memory.events, wakes the loop with its trigger.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <optional>
#include <vector>

#include "cgroups/hierarchy.h"
#include "node/detectors.h"
#include "server/log.h"
#include "tests/support/cgroup_tree.h"

using namespace nodewarden;
using namespace nodewarden::node;
using namespace nodewarden::testing;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

// A cgroup v2 root with kubepods limited to 1 GiB, and an empty /proc.
struct Node {
  CgroupTree tree{{
      dir("cg",
          {file("cgroup.controllers", "cpu memory pids\n"),
           dir("kubepods", {file("cgroup.controllers", "cpu memory pids\n"),
                            file("memory.max", std::to_string(1024 * kMiB) + "\n"),
                            file("memory.current", std::to_string(800 * kMiB) + "\n"),
                            file("memory.stat", "anon 0\nfile 0\ninactive_file 0\n"),
                            file("memory.high", "max\n"),
                            file("memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")})}),
      dir("proc"),
  }};
  cgroups::PodCgroups pods;

  Node() : pods(hierarchy(), "kubepods") { REQUIRE(pods.refresh()); }

  cgroups::Hierarchy hierarchy() const {
    cgroups::DiscoverOptions discover;
    discover.root = tree.path("cg").string();
    discover.useLibcgroup = false;
    auto h = cgroups::discoverHierarchy(discover);
    REQUIRE(h);
    return *h;
  }
};

// The decision a cycle made: allocatableMemory.available with a hard threshold of 100 MiB.
policy::EvictionDecision decisionWith(std::int64_t available) {
  policy::EvictionDecision decision;
  policy::SignalStatus status;
  status.key = {policy::Signal::AllocatableMemoryAvailable, true};
  status.capacity = 1024 * kMiB;
  status.threshold = 100 * kMiB;
  status.available = available;
  decision.signals.push_back(status);
  return decision;
}

struct Wake {
  Trigger trigger;
  std::optional<SteadyTime> at;
};

// Runs the loop until `done` or 3 s (bounded).
void runUntil(boost::asio::io_context& io, const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + 3s;
  while (!done() && std::chrono::steady_clock::now() < until) {
    io.restart();
    io.run_for(5ms);
  }
}

}  // namespace

TEST_CASE("the poller's usage line comes from the cycle's reading, and a crossing wakes the loop") {
  server::configureLogging(server::LogFormat::Text, server::LogLevel::Error);
  Node node;
  boost::asio::io_context io;
  std::vector<Wake> wakes;
  DetectorOptions options;
  options.procRoot = node.tree.path("proc").string();
  options.kernelWakeups = false;
  Detectors detectors(io, node.pods, steadyClock(), options,
                      [&](Trigger trigger, std::optional<SteadyTime> at) {
                        wakes.push_back({trigger, at});
                      });
  // What the cycle read: 800 MiB used, 50 MiB of it inactive file. The line is where the
  // working set reaches capacity − threshold: 1024 − 100 + 50 = 974 MiB of usage.
  cgroups::NodeReading reading;
  reading.kubepods = cgroups::MemoryReading{800 * kMiB, 50 * kMiB, 750 * kMiB, 1024 * kMiB};
  // memory.stat is gone from the tree: placing the line must not read it.
  node.tree.remove("cg/kubepods/memory.stat");
  detectors.follow(decisionWith(274 * kMiB), reading, 1000ms);
  REQUIRE(detectors.armed().size() == 1);
  CHECK(detectors.armed()[0].find("memory.current") != std::string::npos);

  node.tree.write("cg/kubepods/memory.current", std::to_string(973 * kMiB) + "\n");
  runUntil(io, [&] { return false; });  // 3 s below the line: no wake-up
  CHECK(wakes.empty());

  node.tree.write("cg/kubepods/memory.current", std::to_string(974 * kMiB) + "\n");
  runUntil(io, [&] { return !wakes.empty(); });
  REQUIRE(wakes.size() == 1);
  CHECK(toString(wakes[0].trigger) == "memory-poll");
  REQUIRE(wakes[0].at.has_value());  // dated by the last poll below the line
  CHECK(*wakes[0].at <= std::chrono::steady_clock::now());
  detectors.stop();
}

TEST_CASE("the cycle's reading far below the line stands for a poll until the next cycle") {
  server::configureLogging(server::LogFormat::Text, server::LogLevel::Error);
  Node node;
  boost::asio::io_context io;
  std::vector<Wake> wakes;
  DetectorOptions options;
  options.procRoot = node.tree.path("proc").string();
  options.kernelWakeups = false;
  Detectors detectors(io, node.pods, steadyClock(), options,
                      [&](Trigger trigger, std::optional<SteadyTime> at) {
                        wakes.push_back({trigger, at});
                      });
  // The cycle read 10 MiB: 914 MiB below the line (924 MiB), 223 ms at the assumed growth,
  // past the 100 ms ceiling — the next cycle, due within 100 ms, reads before a poll would.
  // The file says the line is crossed: a poll would wake the loop at once.
  node.tree.write("cg/kubepods/memory.current", std::to_string(974 * kMiB) + "\n");
  cgroups::NodeReading reading;
  reading.kubepods = cgroups::MemoryReading{10 * kMiB, 0, 10 * kMiB, 1024 * kMiB};
  const auto followed = std::chrono::steady_clock::now();
  detectors.follow(decisionWith(1014 * kMiB), reading, 100ms);
  REQUIRE(detectors.armed().size() == 1);
  // No poll while a cycle was due (until 150 ms after follow()). Run to 130 ms after it; a
  // test thread held off the CPU past 150 ms (a loaded machine) cannot tell, so it does not
  // check then rather than fail.
  io.run_until(followed + 130ms);
  if (std::chrono::steady_clock::now() - followed < 150ms) CHECK(wakes.empty());
  // No cycle came: the poll runs half an interval after the next cycle was due.
  runUntil(io, [&] { return !wakes.empty(); });
  REQUIRE(wakes.size() == 1);
  CHECK(toString(wakes[0].trigger) == "memory-poll");
  CHECK(std::chrono::steady_clock::now() - followed >= 150ms);
  detectors.stop();
}

TEST_CASE("a v1 threshold is re-armed when its point moved: by 1 MiB near it, 1/64 far off") {
  server::configureLogging(server::LogFormat::Text, server::LogLevel::Error);
  // A v1 memory hierarchy: cgroup.event_control is a plain file here, so arming "succeeds"
  // and what is armed shows in armed().
  CgroupTree tree{
      {dir("cg", {dir("memory", {dir("kubepods", {file("memory.usage_in_bytes", "0\n"),
                                                  file("memory.limit_in_bytes", "1073741824\n"),
                                                  file("cgroup.event_control", "")})})}),
       dir("proc")}};
  cgroups::DiscoverOptions discover;
  discover.root = tree.path("cg").string();
  discover.useLibcgroup = false;
  auto h = cgroups::discoverHierarchy(discover);
  REQUIRE(h);
  cgroups::PodCgroups pods(*h, "kubepods");
  REQUIRE(pods.refresh());
  boost::asio::io_context io;
  DetectorOptions options;
  options.procRoot = tree.path("proc").string();
  Detectors detectors(io, pods, steadyClock(), options, [](Trigger, std::optional<SteadyTime>) {});
  // The point armed: capacity − threshold + inactive_file, in bytes.
  auto armedAt = [&] {
    for (const std::string& name : detectors.armed()) {
      if (name.rfind("memory threshold", 0) != 0) continue;
      const std::size_t at = name.find(" at ");
      return std::stoll(name.substr(at + 4, name.find(' ', at + 4) - at - 4));
    }
    return -1LL;
  };
  auto follow = [&](std::int64_t usage, std::int64_t inactive) {
    cgroups::NodeReading reading;
    reading.kubepods = cgroups::MemoryReading{std::uint64_t(usage), std::uint64_t(inactive),
                                              std::uint64_t(usage - inactive), 1024 * kMiB};
    detectors.follow(decisionWith(1024 * kMiB - (usage - inactive)), reading, 1000ms);
  };
  follow(10 * kMiB, 0);
  CHECK(armedAt() == 924 * kMiB);
  // 914 MiB below it: a drift of 5 MiB (under 1/64 of that) leaves it.
  follow(10 * kMiB, 5 * kMiB);
  CHECK(armedAt() == 924 * kMiB);
  // 29 MiB below it: the same drift re-arms it where it now is.
  follow(900 * kMiB, 5 * kMiB);
  CHECK(armedAt() == 929 * kMiB);
  // Under 1 MiB: left.
  follow(900 * kMiB, 5 * kMiB + kMiB / 2);
  CHECK(armedAt() == 929 * kMiB);
  detectors.stop();
}

TEST_CASE("no reading of kubepods, no line; a threshold of another signal places none") {
  server::configureLogging(server::LogFormat::Text, server::LogLevel::Error);
  Node node;
  boost::asio::io_context io;
  DetectorOptions options;
  options.procRoot = node.tree.path("proc").string();
  options.kernelWakeups = false;
  Detectors detectors(io, node.pods, steadyClock(), options,
                      [](Trigger, std::optional<SteadyTime>) {});
  detectors.follow(decisionWith(274 * kMiB), cgroups::NodeReading{}, 1000ms);
  CHECK(detectors.armed().empty());
  policy::EvictionDecision pids = decisionWith(274 * kMiB);
  pids.signals[0].key.signal = policy::Signal::PidAvailable;
  cgroups::NodeReading reading;
  reading.kubepods = cgroups::MemoryReading{800 * kMiB, 0, 800 * kMiB, 1024 * kMiB};
  detectors.follow(pids, reading, 1000ms);
  CHECK(detectors.armed().empty());
  detectors.stop();
}

TEST_CASE("on cgroup v2 a change of kubepods' memory.events wakes the loop") {
  server::configureLogging(server::LogFormat::Text, server::LogLevel::Error);
  Node node;
  boost::asio::io_context io;
  std::vector<Wake> wakes;
  DetectorOptions options;
  options.procRoot = node.tree.path("proc").string();  // no pressure files: PSI is left out
  Detectors detectors(io, node.pods, steadyClock(), options,
                      [&](Trigger trigger, std::optional<SteadyTime> at) {
                        wakes.push_back({trigger, at});
                      });
  detectors.armPressure();
  const std::vector<std::string> armed = detectors.armed();
  REQUIRE(armed.size() == 1);
  CHECK(armed[0].find("memory.events") != std::string::npos);
  node.tree.write("cg/kubepods/memory.events", "low 0\nhigh 1\nmax 0\noom 0\noom_kill 0\n");
  runUntil(io, [&] { return !wakes.empty(); });
  REQUIRE(wakes.size() == 1);
  CHECK(toString(wakes[0].trigger) == "memory-events");
  CHECK(wakes[0].at.has_value());
  detectors.stop();
}

TEST_CASE("memoryHighEdge puts kubepods' memory.high on the line, follows it and gives it back") {
  server::configureLogging(server::LogFormat::Text, server::LogLevel::Error);
  Node node;
  boost::asio::io_context io;
  DetectorOptions options;
  options.procRoot = node.tree.path("proc").string();
  options.memoryHighEdge = true;
  Detectors detectors(io, node.pods, steadyClock(), options,
                      [](Trigger, std::optional<SteadyTime>) {});
  const auto high = [&] { return node.tree.read("cg/kubepods/memory.high"); };
  cgroups::NodeReading reading;
  reading.kubepods = cgroups::MemoryReading{800 * kMiB, 50 * kMiB, 750 * kMiB, 1024 * kMiB};
  detectors.follow(decisionWith(274 * kMiB), reading, 1000ms);
  CHECK(high() == std::to_string(974 * kMiB));  // 1024 − 100 + 50 MiB of inactive file

  // inactive_file drifts by less than 1 MiB: left alone; by more: the point follows.
  reading.kubepods->inactiveFile = 50 * kMiB + 512 * 1024;
  detectors.follow(decisionWith(274 * kMiB), reading, 1000ms);
  CHECK(high() == std::to_string(974 * kMiB));
  reading.kubepods->inactiveFile = 60 * kMiB;
  detectors.follow(decisionWith(274 * kMiB), reading, 1000ms);
  CHECK(high() == std::to_string(984 * kMiB));

  // A soft threshold alone places nothing: its pods are not due until its grace ends.
  policy::EvictionDecision soft = decisionWith(274 * kMiB);
  soft.signals[0].key.hard = false;
  detectors.follow(soft, reading, 1000ms);
  CHECK(high() == "max");
  detectors.follow(decisionWith(274 * kMiB), reading, 1000ms);
  CHECK(high() == std::to_string(984 * kMiB));

  // The threshold goes away (a new policy): the value found comes back; stop() does it too.
  policy::EvictionDecision none;
  detectors.follow(none, reading, 1000ms);
  CHECK(high() == "max");
  detectors.follow(decisionWith(274 * kMiB), reading, 1000ms);
  CHECK(high() == std::to_string(984 * kMiB));
  detectors.stop();
  CHECK(high() == "max");
}

TEST_CASE("without memoryHighEdge, and with kernel wake-ups off, memory.high is never written") {
  server::configureLogging(server::LogFormat::Text, server::LogLevel::Error);
  for (const bool edge : {false, true}) {
    Node node;
    boost::asio::io_context io;
    DetectorOptions options;
    options.procRoot = node.tree.path("proc").string();
    options.memoryHighEdge = edge;
    options.kernelWakeups = false;  // with the edge on, this alone keeps it off
    if (!edge) options.kernelWakeups = true;
    Detectors detectors(io, node.pods, steadyClock(), options,
                        [](Trigger, std::optional<SteadyTime>) {});
    cgroups::NodeReading reading;
    reading.kubepods = cgroups::MemoryReading{800 * kMiB, 50 * kMiB, 750 * kMiB, 1024 * kMiB};
    detectors.follow(decisionWith(274 * kMiB), reading, 1000ms);
    CHECK(node.tree.read("cg/kubepods/memory.high") == "max\n");
    detectors.stop();
  }
}
