// node/actuator.h's cgroup actuator on an in-code cgroup tree (tests/support/cgroup_tree.h)
// whose cgroup.procs lists this test's own children: the first signal is out when evict()
// returns, a round lists cgroup.procs once, SIGKILL waits for the grace period on the
// injected clock, the outcome says how the pod was stopped, and a pod holding the agent is
// never signalled. Real cgroups and the kernel's cgroup.kill are e2e's and tests/cgroups'.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <csignal>
#include <optional>

#include "cgroups/hierarchy.h"
#include "node/actuator.h"
#include "tests/support/cgroup_tree.h"

using namespace nodewarden;
using namespace nodewarden::node;
using namespace nodewarden::testing;
using namespace std::chrono_literals;

namespace {

const std::string kUid = "00000000-0000-4000-8000-0000000000a1";

// A child that says 't' on `pipe` at SIGTERM and keeps running; killed at the end.
struct Child {
  pid_t pid = -1;
  int pipe = -1;
  Child() {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      static int out;
      out = fds[1];
      ::signal(SIGTERM, [](int) {
        const char t = 't';
        (void)!::write(out, &t, 1);
      });
      const char ready = 'r';
      (void)!::write(out, &ready, 1);
      for (int i = 0; i < 600; ++i) ::usleep(50000);  // bounded: 30 s
      ::_exit(0);
    }
    ::close(fds[1]);
    pipe = fds[0];
    // Its handler is in place before anything signals it (it inherited doctest's).
    pollfd p{pipe, POLLIN, 0};
    char byte = 0;
    REQUIRE(::poll(&p, 1, 5000) == 1);
    REQUIRE(::read(pipe, &byte, 1) == 1);
    REQUIRE(byte == 'r');
  }
  ~Child() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::close(pipe);
  }
  // Whether 't' arrived within a second.
  bool terminated() const {
    pollfd p{pipe, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) return false;
    char byte = 0;
    return ::read(pipe, &byte, 1) == 1 && byte == 't';
  }
  bool exited() const {
    siginfo_t info{};
    return ::waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == pid;
  }
};

// A pure cgroup v2 tree, or a v1 memory hierarchy alone, with one pod listing `pids`.
struct Node {
  bool v2;
  CgroupTree tree;
  cgroups::PodCgroups pods;
  std::string podDir;  // relative to the tree

  Node(bool isV2, const std::vector<pid_t>& pids)
      : v2(isV2),
        tree(isV2 ? std::vector<TreeEntry>{dir(
                        "cg", {file("cgroup.controllers", "cpu memory pids\n"),
                               dir("kubepods", {file("cgroup.controllers", "cpu memory pids\n"),
                                                podV2(kUid, podFiles(1, pids))})})}
                  : std::vector<TreeEntry>{dir(
                        "cg", {dir("memory",
                                   {dir("kubepods", {podV1Memory(kUid, podFiles(1, pids))})})})}),
        pods(hierarchy(), "kubepods"),
        podDir(std::string(isV2 ? "cg" : "cg/memory") + "/kubepods/pod" + kUid) {
    REQUIRE(pods.refresh());
    REQUIRE(pods.find(kUid) != nullptr);
  }

  cgroups::Hierarchy hierarchy() const {
    cgroups::DiscoverOptions discover;
    discover.root = tree.path("cg").string();
    discover.useLibcgroup = false;
    auto h = cgroups::discoverHierarchy(discover);
    REQUIRE(h);
    return *h;
  }

  // The pod's processes are gone, as the kernel would show it.
  void empty() const {
    tree.write(podDir + "/cgroup.procs", "");
    if (v2) tree.write(podDir + "/cgroup.events", "populated 0\nfrozen 0\n");
  }
};

EvictionOrder orderFor(std::int64_t grace) {
  EvictionOrder order;
  order.uid = kUid;
  order.pod = "default/victim";
  order.threshold = {policy::Signal::AllocatableMemoryAvailable, grace == 0};
  order.gracePeriodSeconds = grace;
  order.message = "The node was low on resource: memory. ";
  return order;
}

// Runs the loop until `done` or `limit` (bounded).
void runUntil(boost::asio::io_context& io, const std::function<bool()>& done,
              std::chrono::milliseconds limit = 5000ms) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < until) {
    io.restart();
    io.run_for(5ms);
  }
}

// Counts the opens of cgroup.procs below a directory (inotify IN_OPEN on the files).
struct OpenCounter {
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  explicit OpenCounter(const std::string& file) {
    REQUIRE(fd >= 0);
    REQUIRE(::inotify_add_watch(fd, file.c_str(), IN_OPEN) >= 0);
  }
  ~OpenCounter() { ::close(fd); }
  int count() const {
    alignas(inotify_event) char buffer[4096];
    int opens = 0;
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n <= 0) return opens;
      for (ssize_t at = 0; at < n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
        if (event->mask & IN_OPEN) ++opens;
        at += ssize_t(sizeof(inotify_event) + event->len);
      }
    }
  }
};

}  // namespace

TEST_CASE("grace 0 on v2: cgroup.kill is written before evict() returns, after one listing") {
  Child child;
  Node node(true, {child.pid});
  boost::asio::io_context io;
  ManualClock clock;
  CgroupActuator actuator(io, node.pods, clock);
  OpenCounter opens(node.tree.path(node.podDir + "/cgroup.procs").string());
  std::optional<EvictionOutcome> outcome;
  actuator.evict(orderFor(0), [&](const EvictionOutcome& o) { outcome = o; });
  CHECK(node.tree.read(node.podDir + "/cgroup.kill") == "1");
  CHECK(opens.count() == 1);
  CHECK_FALSE(outcome);  // the pod still runs (this tree is no kernel)
  runUntil(
      io, [] { return false; }, 300ms);
  CHECK_FALSE(outcome);
  CHECK(opens.count() == 0);  // emptiness is read from cgroup.events on v2, not cgroup.procs
  node.empty();
  runUntil(io, [&] { return outcome.has_value(); });
  REQUIRE(outcome);
  CHECK(outcome->emptied);
  CHECK_FALSE(outcome->terminated);
  REQUIRE(outcome->killed);
  CHECK(toString(*outcome->killed) == "cgroup.kill");
  CHECK(outcome->processes == 1);
  CHECK(outcome->elapsed == 0us);  // times come from the injected clock, which stood still
  CHECK(methodText(orderFor(0), *outcome) == "cgroup.kill");
}

TEST_CASE("a grace period: SIGTERM at once, SIGKILL when the injected clock says it is over") {
  Child child;
  Node node(true, {child.pid});
  boost::asio::io_context io;
  ManualClock clock;
  CgroupActuator actuator(io, node.pods, clock);
  std::optional<EvictionOutcome> outcome;
  actuator.evict(orderFor(5), [&](const EvictionOutcome& o) { outcome = o; });
  CHECK(child.terminated());
  CHECK(node.tree.read(node.podDir + "/cgroup.kill").empty());
  runUntil(
      io, [] { return false; }, 300ms);  // real time passes; the clock does not
  CHECK(node.tree.read(node.podDir + "/cgroup.kill").empty());
  clock.advance(5s);
  runUntil(io, [&] { return !node.tree.read(node.podDir + "/cgroup.kill").empty(); });
  CHECK(node.tree.read(node.podDir + "/cgroup.kill") == "1");
  node.empty();
  runUntil(io, [&] { return outcome.has_value(); });
  REQUIRE(outcome);
  CHECK(outcome->emptied);
  CHECK(outcome->terminated);
  REQUIRE(outcome->killed);
  CHECK(methodText(orderFor(5), *outcome) == "SIGTERM, then cgroup.kill");
  CHECK(outcome->elapsed == 5s);
}

TEST_CASE("grace 0 on v1: SIGKILL to every PID listed, emptiness from cgroup.procs") {
  Child child;
  Node node(false, {child.pid});
  boost::asio::io_context io;
  CgroupActuator actuator(io, node.pods);
  OpenCounter opens(node.tree.path(node.podDir + "/cgroup.procs").string());
  std::optional<EvictionOutcome> outcome;
  actuator.evict(orderFor(0), [&](const EvictionOutcome& o) { outcome = o; });
  CHECK(opens.count() == 1);
  runUntil(io, [&] { return child.exited(); });
  CHECK(child.exited());
  node.empty();
  runUntil(io, [&] { return outcome.has_value(); });
  REQUIRE(outcome);
  CHECK(outcome->emptied);
  REQUIRE(outcome->killed);
  CHECK(toString(*outcome->killed) == "SIGKILL");
  CHECK(methodText(orderFor(0), *outcome) == "SIGKILL");
}

TEST_CASE("a pod whose cgroup lists the agent itself is refused, nothing signalled") {
  Child child;
  Node node(true, {child.pid, ::getpid()});
  boost::asio::io_context io;
  CgroupActuator actuator(io, node.pods);
  std::optional<EvictionOutcome> outcome;
  actuator.evict(orderFor(0), [&](const EvictionOutcome& o) { outcome = o; });
  CHECK(node.tree.read(node.podDir + "/cgroup.kill").empty());
  runUntil(io, [&] { return outcome.has_value(); });
  REQUIRE(outcome);
  CHECK_FALSE(outcome->emptied);
  CHECK(outcome->error.find("own process") != std::string::npos);
  CHECK_FALSE(outcome->killed);
  // A soft eviction of it: no SIGTERM either.
  std::optional<EvictionOutcome> soft;
  actuator.evict(orderFor(5), [&](const EvictionOutcome& o) { soft = o; });
  CHECK_FALSE(child.terminated());
  runUntil(io, [&] { return soft.has_value(); });
  REQUIRE(soft);
  CHECK_FALSE(soft->terminated);
  CHECK(soft->error.find("own process") != std::string::npos);
}

TEST_CASE("an order for a pod without a cgroup completes at once, from the loop") {
  Child child;
  Node node(true, {child.pid});
  boost::asio::io_context io;
  CgroupActuator actuator(io, node.pods);
  EvictionOrder order = orderFor(0);
  order.uid = "00000000-0000-4000-8000-0000000000ff";
  std::optional<EvictionOutcome> outcome;
  actuator.evict(order, [&](const EvictionOutcome& o) { outcome = o; });
  CHECK_FALSE(outcome);  // never inside evict()
  runUntil(io, [&] { return outcome.has_value(); });
  REQUIRE(outcome);
  CHECK_FALSE(outcome->emptied);
  CHECK(outcome->error == "no cgroup for this pod on the node");
  CHECK(methodText(order, *outcome) == "none");
}
