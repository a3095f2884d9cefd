// bench_soak: the real `nodewarden agent` kept busy for a long time and measured from outside
// (the parts and targets: kUsage). Every cgroup is this program's, removed again also after
// SIGINT/SIGTERM. Exit status: 0 after a run (a missed target prints MISSES), 77 when the machine
// cannot run it, 1 when the set-up fails (also without the binary), 130 after SIGINT/SIGTERM.

#include <deque>

#include "bench/support/report.h"
#include "bench/support/sandbox.h"
#include "bench/support/sandbox_node.h"

namespace nodewarden::bench {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kSeed = 0x736f616b21212121ULL;  // "soak!!!!"
constexpr std::int64_t kMi = 1024 * 1024, kSecond = 1'000'000'000;
constexpr int kPods = 1000, kChurnPerSecond = 5, kSlowClients = 1000;
constexpr std::int64_t kHogTarget = 900 * kMi, kHogRate = 256 * kMi;  // bytes, bytes a second
constexpr double kProbeTargetMs = 1000, kRssGrowthTargetMiB = 5, kFdGrowthTarget = 5;

constexpr const char* kUsage =
    "usage: bench_soak [--minutes M] [--skip-soak] [--quick] [--help]\n"
    "Runs the nodewarden binary as a node does over 1,000 pod cgroups it makes (needs root):\n"
    "  1. slowloris: 1,000 connections sending a header a byte a second and reconnecting\n"
    "     when closed, for 30 s; GET /healthz every 100 ms\n"
    "  2. soak: M minutes (default 30), 5 pods replaced every second, a pressure episode a\n"
    "     minute (a priority-0 hog at 256 MiB/s, a 1 GiB kubepods, a hard threshold of\n"
    "     allocatableMemory.available 200Mi); VmRSS, descriptors, CPU every 10 s\n"
    "  --quick       2 minutes of soak, 10 s of slowloris\n"
    "  --skip-soak   part 1 only\n"
    "Targets: /healthz p99 <= 1000 ms; the last five minutes' RSS and descriptors within 5 MiB\n"
    "and 5 of the first five's; every hog evicted, no other pod, no kernel OOM kill.\n";

// The hog's one process: grows to kHogTarget (under kubepods' 1 GiB) at kHogRate, holds it 60 s.
int grow(pid_t parent) {
  if (!dieWithParent(parent)) return 0;
  const std::size_t step = std::size_t(kHogRate / 100), size = std::size_t(kHogTarget);
  void* memory = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return 2;
  for (std::size_t done = 0; done < size && !stopped(); done += step) {
    std::memset(static_cast<char*>(memory) + done, 0x5a, std::min(step, size - done));
    sleepMillis(10);  // step bytes every 10 ms
  }
  for (int i = 0; i < 600 && !stopped(); ++i) sleepMillis(100);
  return 0;
}

// The `serial`-th idle pod (they outrank the hogs: evicting one is a wrong victim), in the mix of
// the documented soak (not qosMix's), added to `pods` (oldest first); "" or why not.
std::string addIdle(AgentNode& node, std::deque<Pod>& pods, int serial) {
  const char* qos = serial % 5 == 0 ? "guaranteed" : serial % 5 == 2 ? "besteffort" : "burstable";
  auto pod = node.addPod("soak", format("pod-%06d", serial), 1000, qos);
  if (pod) pods.push_back(std::move(pod).value());
  return pod ? "" : pod.error().message;
}

// Part 1; returns the probes' p99 when every probe was answered.
std::optional<double> slowloris(const AgentNode& node, int seconds) {
  const ProcSample before = sampleProcess(node.pid, true);
  ProcSample most = before;
  std::size_t connects = 0, closedByAgent = 0, heldAtEnd = 0, probeFailures = 0, probesNotOk = 0;
  std::vector<double> probeMs;
  const std::string header = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
  struct Slow {
    int fd = -1;
    std::size_t sent = 0;
    std::int64_t nextByte = 0;
  };
  std::vector<Slow> slow(kSlowClients);
  std::vector<pollfd> polls(kSlowClients);
  const std::int64_t end = monotonicNanos() + seconds * kSecond;
  std::int64_t nextProbe = monotonicNanos(), nextSample = nextProbe;
  Random rng(kSeed ^ 0x510);
  for (int round = 0; round < seconds * 1000 && monotonicNanos() < end && !stopped(); ++round) {
    const std::int64_t now = monotonicNanos();
    for (std::size_t i = 0; i < slow.size(); ++i) {
      Slow& s = slow[i];
      if (s.fd < 0) {
        s = {connectLoopback(node.port, false), 0, now + rng.between(0, 1000) * 1'000'000};
        connects += s.fd >= 0;
      } else if (now >= s.nextByte) {
        // One byte a second: the header first, then an endless header value.
        const char byte = s.sent < header.size() ? header[s.sent] : 'x';
        s.sent += ::send(s.fd, &byte, 1, MSG_NOSIGNAL) == 1;  // a closed one: polled below
        s.nextByte = now + kSecond;
      }
      polls[i] = {s.fd, POLLIN, 0};  // fd -1 is ignored
    }
    // Connections the agent closed: readable with EOF (or an answer: a 408/400 then EOF).
    (void)::poll(polls.data(), polls.size(), 0);  // revents stay 0 on a failure
    for (std::size_t i = 0; i < polls.size(); ++i) {
      char sink[512];
      if ((polls[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
          ::recv(slow[i].fd, sink, sizeof sink, MSG_DONTWAIT) <= 0) {
        ::close(std::exchange(slow[i].fd, -1));
        ++closedByAgent;
      }
    }
    if (now >= nextProbe) {
      // The whole answer (the agent closes after it) within 5 s, or a failure.
      const Exchange probe = exchange(node.port, "/healthz", 5000ms);
      const bool answered = probe.ended && !probe.failed && probe.status != 0;
      if (answered) probeMs.push_back(probe.nanos * 1e-6);
      probesNotOk += answered && probe.status != 200;
      probeFailures += !answered;
      nextProbe = monotonicNanos() + kSecond / 10;
    }
    if (now >= nextSample) {
      const ProcSample s = sampleProcess(node.pid, true);
      most.rssKiB = std::max(most.rssKiB, s.rssKiB);
      most.fds = std::max(most.fds, s.fds);
      nextSample = now + kSecond / 2;
    }
    sleepMillis(1);
  }
  for (Slow& s : slow) heldAtEnd += s.fd >= 0 && ::close(s.fd) == 0;
  sleepMillis(2000);  // the agent notices the closes
  const ProcSample after = sampleProcess(node.pid, true);
  const Samples ms = Samples::from(probeMs);
  std::printf(
      "  GET /healthz every 100 ms: %zu answered (%zu not ok), %zu failed; p50 %.1f ms,"
      " p99 %.1f ms, max %.1f ms\n"
      "  slow connections: %zu opened, %zu closed by the agent, %zu open at the end\n"
      "  agent VmRSS %.1f MiB before, %.1f at most, %.1f after; descriptors %zu,"
      " %zu at most, %zu after\n\n",
      ms.count(), probesNotOk, probeFailures, ms.median(), ms.p99(), ms.max(), connects,
      closedByAgent, heldAtEnd, before.rssMiB(), most.rssMiB(), after.rssMiB(), before.fds,
      most.fds, after.fds);
  return ms.count() == 0 || probeFailures > 0 ? std::nullopt : std::optional(ms.p99());
}

struct Sample {
  double minute = 0, rssMiB = 0, fds = 0, cpuPercent = 0;  // CPU: of a core since the last one
};

// Mean of the samples whose minute is in [from, to).
std::optional<Sample> meanOver(const std::vector<Sample>& samples, double from, double to) {
  Sample sum;
  int n = 0;
  for (const Sample& s : samples) {
    if (s.minute < from || s.minute >= to) continue;
    sum = {0, sum.rssMiB + s.rssMiB, sum.fds + s.fds, sum.cpuPercent + s.cpuPercent};
    ++n;
  }
  if (n == 0) return std::nullopt;
  return Sample{0, sum.rssMiB / n, sum.fds / n, sum.cpuPercent / n};
}

// Part 2; returns its lines of the targets.
std::string soak(AgentNode& node, std::deque<Pod>& idle, int minutes) {
  std::vector<Sample> samples;
  int episodes = 0, wrongVictims = 0, serial = kPods;  // serial: the next idle pod's
  std::vector<double> killMs;  // the agent's own crossing → signalled, per hog evicted
  std::size_t churned = 0, logOffset = readText(node.log).size();
  const std::uint64_t oomBefore = node.oomKills();
  const std::int64_t start = monotonicNanos(), end = start + minutes * 60 * kSecond;
  ProcSample previous = sampleProcess(node.pid);
  std::int64_t nextSample = start, nextChurn = start, nextEpisode = start + 20 * kSecond;
  std::optional<Pod> hog;
  pid_t hogPid = -1;
  std::int64_t hogStart = 0;
  auto onEviction = [&](const Json& line) {
    if (line.value("event", "") != "evict") return;
    const bool ofHog = hog && line.value("uid", "") == hog->uid;
    if (ofHog) killMs.push_back(line.value("latency_ms", -1.0));
    wrongVictims += !ofHog;
  };
  for (std::int64_t now; !stopped() && (now = monotonicNanos()) < end;) {
    for (int k = 0; now >= nextChurn && k < kChurnPerSecond && !idle.empty(); ++k) {
      node.removePod(idle.front());  // the oldest replaced by a new one
      idle.pop_front();
      churned += addIdle(node, idle, serial++).empty();
    }
    if (now >= nextChurn) nextChurn += kSecond;
    if (now >= nextEpisode && !hog) {
      // The manifest first, and a cycle (300 ms) for the agent to read it.
      if (auto pod = node.addPod("batch", "hog-" + std::to_string(episodes++), 0, "besteffort",
                                 Json::object(), 300)) {
        auto child = node.sandbox.spawn(pod->relative, [p = ::getpid()] { return grow(p); });
        if (!child) {
          node.removePod(*pod);
        } else {
          hog = *pod;
          hogPid = *child;
          hogStart = monotonicNanos();
        }
      }
      nextEpisode += 60 * kSecond;
    }
    forEachLogLine(node.log, onEviction, &logOffset);
    if (hog && (exited(hogPid) || now - hogStart > 30 * kSecond))
      node.removePod(*std::exchange(hog, std::nullopt));
    if (now >= nextSample) {
      const ProcSample s = sampleProcess(node.pid, true);
      if (!s.ok) break;  // the agent is gone
      samples.push_back(
          {double(now - start) / 60e9, s.rssMiB(), double(s.fds), s.cpuPercentSince(previous)});
      previous = s;
      nextSample += 10 * kSecond;
    }
    sleepMillis(10);
  }
  if (hog) node.removePod(*hog);
  const int kernelOomKills = int(node.oomKills() - oomBefore);
  std::printf("  %6s %10s %6s %10s\n", "minute", "VmRSS MiB", "fds", "CPU %");
  for (int m = 0; m < minutes; ++m) {
    if (auto row = meanOver(samples, m, m + 1))
      std::printf("  %6d %10.1f %6.0f %10.2f\n", m + 1, row->rssMiB, row->fds, row->cpuPercent);
  }
  const Samples kill = Samples::from(killMs);  // one per hog evicted
  std::printf(
      "  pods replaced: %zu; episodes %d: %zu hogs evicted, %d wrong victims, %d kernel OOM"
      " kills\n  the agent's crossing -> signalled: p50 %.1f ms, max %.1f ms\n\n",
      churned, episodes, kill.count(), wrongVictims, kernelOomKills, kill.median(), kill.max());
  const double span = std::min(5.0, minutes / 2.0);
  auto first = meanOver(samples, 0, span), last = meanOver(samples, minutes - span, minutes + 1);
  std::string targets;
  if (first && last) {
    const double rss = last->rssMiB - first->rssMiB, fds = last->fds - first->fds;
    targets = format("  RSS, last %.0f min - first %.0f min      %+8.1f MiB <= %5.0f MiB  %s\n",
                     span, span, rss, kRssGrowthTargetMiB, verdict(rss <= kRssGrowthTargetMiB)) +
              format("  fds, last %.0f min - first %.0f min      %+8.0f     <= %5.0f      %s\n",
                     span, span, fds, kFdGrowthTarget, verdict(fds <= kFdGrowthTarget));
  }
  const bool clean = int(kill.count()) == episodes && wrongVictims == 0 && kernelOomKills == 0;
  return targets +
         format("  every hog evicted, nothing else, no OOM kill              %s\n", verdict(clean));
}

int run(int argc, char** argv) {
  int minutes = 30, slowSeconds = 30;
  bool skipSoak = false;
  Args args(kUsage);
  args.number("--minutes", minutes, 1, 600).flag("--skip-soak", skipSoak);
  args.flag("--quick", [&] {
    minutes = 2;
    slowSeconds = 10;
  });
  if (auto status = args.parse(argc, argv)) return *status;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows line by line, also in a pipe
  auto hierarchy = hierarchyForSandbox("bench_soak", "it creates cgroups");
  if (!hierarchy) return 77;
  installStopHandlers();
  (void)cgroups::raiseOpenFileLimit(kSlowClients * 2 + 1024);
  printEnvironment("bench_soak", "", true, false);
  printHierarchy(*hierarchy);
  auto sandbox = openSandbox(*hierarchy, "bench_soak", "nodewarden-bench-soak", 1024 * kMi);
  if (!sandbox) return 77;
  std::string error;
  {
    TempDir temp{std::filesystem::temp_directory_path() / sandbox->top()};
    AgentNode node(*sandbox, temp.path, kSeed);
    std::deque<Pod> idle;
    for (int i = 0; i < kPods && error.empty() && !stopped(); ++i) error = addIdle(node, idle, i);
    if (error.empty())
      error = node.start(R"({ "evictionHard": { "allocatableMemory.available": "200Mi" },)"
                         R"( "housekeepingInterval": "1s" })",
                         "127.0.0.1:0", "/nonexistent", "ready", 60);
    if (error.empty()) {
      std::printf(
          "\n  %d pods; agent pid %d ready on 127.0.0.1:%u\n\n"
          "== 1. slowloris: %d connections, a header byte a second each, %d s ==\n",
          kPods, int(node.pid), unsigned(node.port), kSlowClients, slowSeconds);
      const std::optional<double> probeP99 = slowloris(node, slowSeconds);
      std::string targets;
      if (!skipSoak && !stopped()) {
        std::printf(
            "== 2. soak: %d minutes, %d pods, %d replaced a second, an episode a minute ==\n",
            minutes, kPods, kChurnPerSecond);
        targets = soak(node, idle, minutes);
      }
      std::printf("== targets ==\n");
      if (probeP99)
        std::printf("  /healthz p99 under slowloris          %8.1f ms  <= %5.0f ms   %s\n",
                    *probeP99, kProbeTargetMs, verdict(*probeP99 <= kProbeTargetMs));
      std::printf("%s  agent stopped with SIGTERM: %s\n", targets.c_str(), node.stop(15).c_str());
    }
  }
  if (!error.empty()) std::printf("cannot start: %s\n", error.c_str());
  int status = stopped() ? 130 : error.empty() ? 0 : 1;
  if (!closeSandbox(*sandbox) && status == 0) status = 1;
  return status;
}

}  // namespace
}  // namespace nodewarden::bench

int main(int argc, char** argv) {
  return nodewarden::bench::run(argc, argv);
}
