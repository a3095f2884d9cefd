// bench_soak: the real `nodewarden agent` kept busy for a long time, measured from outside:
// under slowloris connections, then over a long soak with churn and a pressure episode a
// minute (what, how and the targets: printUsage below, or --help). Every 10 s of the soak the
// agent's VmRSS, open descriptors and CPU time are sampled; a table per minute and the first
// five minutes against the last five say whether they stay flat.
//
// The agent is the binary a node runs (static pod source, JSON log to a file here); every
// cgroup is this program's ("nodewarden-bench-soak-<pid>" below each hierarchy root) and is
// removed again, also after SIGINT/SIGTERM. Every loop is bounded in count and in time.
// Exit status: 0 after a run; 77 when the machine cannot run it (not root, no memory
// hierarchy); 1 when the set-up fails; 130 after SIGINT/SIGTERM. A missed target prints
// MISSES and does not change the exit status.

#include <deque>
#include <map>

#include "bench/support/agent_process.h"
#include "bench/support/sandbox.h"
#include "cgroups/hierarchy.h"
#include "cgroups/readers.h"
#include "cgroups/sandbox.h"

#ifndef NODEWARDEN_EXE
#error "NODEWARDEN_EXE (the nodewarden binary's path) must be defined by the build"
#endif

namespace nodewarden::bench {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using cgroups::Sandbox;

constexpr std::uint64_t kSeed = 0x736f616b21212121ULL;  // "soak!!!!"
constexpr std::int64_t kMi = 1024 * 1024;
constexpr const char* kSandboxPrefix = "nodewarden-bench-soak";
constexpr const char* kNodeName = "soak-node";
constexpr std::int64_t kNodeMemory = 1024 * kMi;  // kubepods memory limit
constexpr std::int64_t kHogTarget = 900 * kMi;    // the hog stops growing here (below the limit)
constexpr std::int64_t kHogRate = 256 * kMi;      // bytes a second
constexpr const char* kPolicy = R"({
  "evictionHard": { "allocatableMemory.available": "200Mi" },
  "housekeepingInterval": "1s"
})";

// Targets.
constexpr double kProbeTargetMs = 1000;    // /healthz under slowloris
constexpr double kRssGrowthTargetMiB = 5;  // last five minutes against the first five
constexpr double kFdGrowthTarget = 5;

struct Settings {
  int minutes = 30;
  int pods = 1000;
  int churnPerSecond = 5;
  int slowClients = 1000;
  int slowSeconds = 30;
  bool skipSlowloris = false;
  bool skipSoak = false;
};

// ------------------------------------------------------------------------------- the agent

std::size_t openDescriptors(pid_t pid) {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// The node: P pod cgroups with manifests, the running agent, its log.
class Node {
 public:
  Node(Sandbox& sandbox, fs::path dir) : sandbox_(sandbox), dir_(std::move(dir)) {}
  ~Node() { stop(); }

  // Creates the pods and starts the agent; "" on success.
  std::string start(int pods) {
    manifests_ = dir_ / "manifests";
    std::error_code ec;
    fs::create_directories(manifests_, ec);
    const fs::path policy = dir_ / "policy.json";
    if (ec || !writeText(policy, kPolicy)) return "cannot write in " + dir_.string();
    const auto started = steadyNow();
    for (int i = 0; i < pods && !stopped(); ++i) {
      if (std::string error = addIdlePod(); !error.empty()) return error;
    }
    std::printf("  %d pod cgroups (and manifests) created in %.1f s\n", pods,
                nanosSince(started) * 1e-9);
    log_ = dir_ / "agent.log";
    pid_ = startProcess(agentCommand(NODEWARDEN_EXE, manifests_.string(), sandbox_.kubepods(),
                                     policy.string(), kNodeName, "127.0.0.1:0", "/nonexistent"),
                        log_);
    return awaitAgent(
        pid_, log_, 60,
        [&](const Json& line) { return line.value("event", "") == "ready" && port_ != 0; }, &port_);
  }

  void stop() {
    if (pid_ > 0) exitStatus_ = describeStatus(stopProcess(pid_, 15));
    pid_ = -1;
  }

  // Replaces the oldest idle pod by a new one.
  std::string churnOne() {
    if (!idle_.empty()) {
      const Idle old = idle_.front();
      idle_.pop_front();
      (void)sandbox_.removeCgroup(old.relative);
      std::error_code ignored;
      fs::remove(old.manifest, ignored);
    }
    return addIdlePod();
  }

  // A fresh priority-0 pod whose one process grows toward kHogTarget at kHogRate and holds it
  // (bounded: 60 s); returns its UID and cgroup, or an error.
  struct Hog {
    std::string uid;
    std::string relative;
    fs::path manifest;
    pid_t pid = -1;
  };
  Result<Hog> startHog(int index) {
    Hog hog;
    hog.uid = rng_.uuid();
    const std::string name = "hog-" + std::to_string(index);
    hog.manifest = manifests_ / ("batch_" + name + ".json");
    if (!writeText(hog.manifest, podManifest("batch", name, hog.uid, 0, {}, {}).dump(2))) {
      return Error{"cannot write " + hog.manifest.string()};
    }
    sleepMillis(300);  // the agent reads its manifests on every cycle; give it one
    auto relative = sandbox_.addPod(hog.uid, "besteffort");
    if (!relative) return relative.error();
    hog.relative = *relative;
    const pid_t parent = ::getpid();
    auto child = sandbox_.spawn(hog.relative, [parent] { return grow(parent); });
    if (!child) return child.error();
    hog.pid = *child;
    return hog;
  }

  void removeHog(const Hog& hog) {
    if (!hog.relative.empty()) (void)sandbox_.removeCgroup(hog.relative);
    sandbox_.reap();
    std::error_code ignored;
    fs::remove(hog.manifest, ignored);
  }

  pid_t pid() const { return pid_; }
  std::uint16_t port() const { return port_; }
  const fs::path& log() const { return log_; }
  const std::string& exitStatus() const { return exitStatus_; }
  std::size_t idlePods() const { return idle_.size(); }

 private:
  struct Idle {
    std::string relative;
    fs::path manifest;
  };

  std::string addIdlePod() {
    static constexpr const char* kMix[] = {"guaranteed", "burstable", "besteffort", "burstable",
                                           "burstable"};
    const int i = serial_++;
    const std::string qos = kMix[i % 5];
    const std::string uid = rng_.uuid();
    char name[32];
    std::snprintf(name, sizeof name, "pod-%06d", i);
    Idle pod;
    pod.manifest = manifests_ / ("soak_" + std::string(name) + ".json");
    // Idle pods outrank the hogs: an eviction of one of them is a wrong victim.
    if (!writeText(pod.manifest, idlePodManifest("soak", name, uid, 1000, qos).dump(2)))
      return "cannot write a manifest in " + manifests_.string();
    auto relative = sandbox_.addPod(uid, qos);
    if (!relative) return "cannot create a pod cgroup: " + relative.error().message;
    pod.relative = *relative;
    idle_.push_back(std::move(pod));
    return {};
  }

  static int grow(pid_t parent) {
    if (!dieWithParent(parent)) return 0;
    const std::size_t step = std::size_t(kHogRate / 100);  // every 10 ms
    void* memory = ::mmap(nullptr, std::size_t(kHogTarget), PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return 2;
    auto* bytes = static_cast<unsigned char*>(memory);
    for (std::size_t done = 0; done < std::size_t(kHogTarget) && !stopped(); done += step) {
      std::memset(bytes + done, 0x5a, std::min(step, std::size_t(kHogTarget) - done));
      sleepMillis(10);
    }
    for (int i = 0; i < 600 && !stopped(); ++i) sleepMillis(100);  // hold: 60 s at most
    return 0;
  }

  Sandbox& sandbox_;
  fs::path dir_;
  fs::path manifests_;
  fs::path log_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
  std::string exitStatus_ = "not started";
  std::deque<Idle> idle_;
  int serial_ = 0;
  Random rng_{kSeed};
};

// ------------------------------------------------------------------------------- slowloris

struct SlowlorisFigures {
  std::vector<double> probeMs;
  int probeFailures = 0;
  int probesNotOk = 0;
  std::map<int, int> probeStatuses;
  std::size_t connects = 0;
  std::size_t closedByAgent = 0;
  std::size_t heldAtEnd = 0;
  double rssBeforeMiB = 0, rssMaxMiB = 0, rssAfterMiB = 0;
  std::size_t fdsBefore = 0, fdsMax = 0, fdsAfter = 0;
};

SlowlorisFigures slowloris(const Node& node, int clients, int seconds) {
  SlowlorisFigures f;
  const ProcSample before = sampleProcess(node.pid());
  f.rssBeforeMiB = f.rssMaxMiB = double(before.rssKiB) / 1024;
  f.fdsBefore = f.fdsMax = openDescriptors(node.pid());
  const std::string header = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
  struct Slow {
    int fd = -1;
    std::size_t sent = 0;
    std::int64_t nextByte = 0;
  };
  std::vector<Slow> slow(static_cast<std::size_t>(clients));
  const std::int64_t end = monotonicNanos() + std::int64_t(seconds) * 1'000'000'000;
  std::int64_t nextProbe = monotonicNanos();
  std::int64_t nextSample = monotonicNanos();
  Random rng(kSeed ^ 0x510);
  std::vector<pollfd> polls;
  for (int round = 0; round < seconds * 1000 && monotonicNanos() < end && !stopped(); ++round) {
    const std::int64_t now = monotonicNanos();
    for (Slow& s : slow) {
      if (s.fd < 0) {
        s.fd = connectLoopback(node.port(), false);
        s.sent = 0;
        s.nextByte = now + rng.between(0, 1000) * 1'000'000;
        if (s.fd >= 0) ++f.connects;
        continue;
      }
      if (now < s.nextByte) continue;
      // One byte a second: the header first, then an endless header value.
      const char byte = s.sent < header.size() ? header[s.sent] : 'x';
      if (::send(s.fd, &byte, 1, MSG_NOSIGNAL) == 1) {
        ++s.sent;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN) {
        ::close(s.fd);
        s.fd = -1;
        ++f.closedByAgent;
        continue;
      }
      s.nextByte = now + 1'000'000'000;
    }
    // Connections the agent closed: readable with EOF (or an answer: a 408/400 then EOF).
    polls.clear();
    for (const Slow& s : slow)
      if (s.fd >= 0) polls.push_back({s.fd, POLLIN, 0});
    if (::poll(polls.data(), polls.size(), 0) > 0) {
      for (const pollfd& p : polls) {
        if ((p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        char sink[512];
        const ssize_t n = ::recv(p.fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n > 0) continue;  // an answer; EOF follows
        for (Slow& s : slow) {
          if (s.fd == p.fd) {
            ::close(s.fd);
            s.fd = -1;
            ++f.closedByAgent;
            break;
          }
        }
      }
    }
    if (now >= nextProbe) {
      // The whole answer (the agent closes after it) within 5 s, or a failure.
      const Exchange probe = exchange(node.port(), "/healthz", 5000ms);
      if (probe.ended && !probe.failed && probe.status != 0) {
        f.probeMs.push_back(probe.nanos * 1e-6);
        ++f.probeStatuses[probe.status];
        if (probe.status != 200) ++f.probesNotOk;
      } else {
        ++f.probeFailures;
      }
      nextProbe = monotonicNanos() + 100'000'000;
    }
    if (now >= nextSample) {
      const ProcSample s = sampleProcess(node.pid());
      f.rssMaxMiB = std::max(f.rssMaxMiB, double(s.rssKiB) / 1024);
      f.fdsMax = std::max(f.fdsMax, openDescriptors(node.pid()));
      nextSample = now + 500'000'000;
    }
    sleepMillis(1);
  }
  for (Slow& s : slow) {
    if (s.fd >= 0) {
      ++f.heldAtEnd;
      ::close(s.fd);
    }
  }
  sleepMillis(2000);  // the agent notices the closes
  f.rssAfterMiB = double(sampleProcess(node.pid()).rssKiB) / 1024;
  f.fdsAfter = openDescriptors(node.pid());
  return f;
}

// ------------------------------------------------------------------------------- soak

struct Sample {
  double minute = 0;
  double rssMiB = 0;
  std::size_t fds = 0;
  double cpuPercent = 0;  // of one core since the previous sample
};

struct SoakFigures {
  std::vector<Sample> samples;
  int episodes = 0;
  int evicted = 0;       // hogs the agent evicted
  int wrongVictims = 0;  // evictions of a pod that was not the episode's hog
  int hogsSurvived = 0;  // still alive 30 s into the episode
  int kernelOomKills = 0;
  std::vector<double> killMs;     // the agent's own crossing → signalled, per eviction
  std::vector<double> hogLifeMs;  // hog start → its process gone (includes its growth)
  std::size_t churned = 0;
  std::string firstProblem;
};

// Eviction lines ("evict") of the agent's log from byte `from` on; advances `from`.
std::vector<Json> newEvictions(const fs::path& log, std::size_t& from) {
  std::vector<Json> out;
  const std::string text = readText(log);
  std::size_t at = from;
  for (std::size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    Json line = Json::parse(std::string_view(text).substr(at, nl - at), nullptr, false);
    if (line.is_object() && line.value("event", std::string()) == "evict") out.push_back(line);
  }
  from = at;
  return out;
}

SoakFigures soak(Node& node, Sandbox& sandbox, const cgroups::Hierarchy& h, int minutes,
                 int churnPerSecond) {
  SoakFigures f;
  std::string buffer;
  auto kubepods = cgroups::CgroupDir::open(h.memory + "/" + sandbox.kubepods(), h.memoryVersion);
  auto oomKills = [&]() -> std::uint64_t {
    if (!kubepods) return 0;
    auto kills = cgroups::readOomKills(*kubepods, buffer);
    return kills ? *kills : 0;
  };
  const std::uint64_t oomBefore = oomKills();
  std::size_t logOffset = readText(node.log()).size();
  const std::int64_t start = monotonicNanos();
  const std::int64_t end = start + std::int64_t(minutes) * 60'000'000'000;
  ProcSample previous = sampleProcess(node.pid());
  std::int64_t nextSample = start;
  std::int64_t nextChurn = start;
  std::int64_t nextEpisode = start + 20'000'000'000;  // the first one after 20 s
  std::optional<Node::Hog> hog;
  std::int64_t hogStart = 0;
  auto endEpisode = [&] {
    if (!hog) return;
    node.removeHog(*hog);
    hog.reset();
  };
  for (std::int64_t i = 0; i < std::int64_t(minutes) * 60'000 && !stopped(); ++i) {
    const std::int64_t now = monotonicNanos();
    if (now >= end) break;
    if (now >= nextChurn) {
      for (int k = 0; k < churnPerSecond; ++k) {
        if (std::string error = node.churnOne(); !error.empty()) {
          if (f.firstProblem.empty()) f.firstProblem = "churn: " + error;
        } else {
          ++f.churned;
        }
      }
      nextChurn += 1'000'000'000;
    }
    if (now >= nextEpisode && !hog) {
      auto started = node.startHog(f.episodes);
      ++f.episodes;
      if (!started) {
        if (f.firstProblem.empty()) f.firstProblem = "hog: " + started.error().message;
      } else {
        hog = *started;
        hogStart = monotonicNanos();
      }
      nextEpisode += 60'000'000'000;
    }
    if (hog) {
      for (const Json& line : newEvictions(node.log(), logOffset)) {
        if (line.value("uid", std::string()) == hog->uid) {
          ++f.evicted;
          f.killMs.push_back(line.value("latency_ms", -1.0));
        } else {
          ++f.wrongVictims;
          if (f.firstProblem.empty()) f.firstProblem = "wrong victim: " + line.dump();
        }
      }
      siginfo_t info{};
      const bool gone = ::waitid(P_PID, id_t(hog->pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                        info.si_pid == hog->pid;
      if (gone) {
        f.hogLifeMs.push_back(double(monotonicNanos() - hogStart) * 1e-6);
        endEpisode();
      } else if (now - hogStart > 30'000'000'000) {
        ++f.hogsSurvived;
        if (f.firstProblem.empty()) f.firstProblem = "a hog lived 30 s: not evicted";
        endEpisode();
      }
    } else {
      for (const Json& line : newEvictions(node.log(), logOffset)) {
        ++f.wrongVictims;
        if (f.firstProblem.empty()) f.firstProblem = "eviction outside an episode: " + line.dump();
      }
    }
    if (now >= nextSample) {
      const ProcSample s = sampleProcess(node.pid());
      if (!s.ok) {
        f.firstProblem = "the agent is gone";
        break;
      }
      Sample row;
      row.minute = double(now - start) / 60e9;
      row.rssMiB = double(s.rssKiB) / 1024;
      row.fds = openDescriptors(node.pid());
      if (s.wallNs > previous.wallNs) {
        row.cpuPercent = double(s.ticks - previous.ticks) / double(::sysconf(_SC_CLK_TCK)) /
                         (double(s.wallNs - previous.wallNs) * 1e-9) * 100.0;
      }
      previous = s;
      f.samples.push_back(row);
      nextSample += 10'000'000'000;
    }
    sleepMillis(10);
  }
  endEpisode();
  f.kernelOomKills = int(oomKills() - oomBefore);
  return f;
}

// Mean of the samples whose minute is in [from, to).
std::optional<Sample> meanOver(const std::vector<Sample>& samples, double from, double to) {
  Sample sum;
  int n = 0;
  for (const Sample& s : samples) {
    if (s.minute < from || s.minute >= to) continue;
    sum.rssMiB += s.rssMiB;
    sum.fds += s.fds;
    sum.cpuPercent += s.cpuPercent;
    ++n;
  }
  if (n == 0) return std::nullopt;
  sum.rssMiB /= n;
  sum.fds /= std::size_t(n);
  sum.cpuPercent /= n;
  return sum;
}

// ------------------------------------------------------------------------------- main

void printUsage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: bench_soak [--minutes M] [--pods P] [--churn C] [--slow-clients N]\n"
      "                  [--slow-seconds S] [--skip-slowloris] [--skip-soak] [--quick] [--help]\n"
      "\n"
      "Runs the nodewarden binary (%s) as a node does, over P pod cgroups\n"
      "(default 1,000) it creates below \"%s-<pid>\" and removes again. Needs root.\n"
      "  1. slowloris: N connections (default 1,000) sending a header a byte a second and\n"
      "     reconnecting when closed, for S seconds (default 30); GET /healthz every 100 ms\n"
      "  2. soak: M minutes (default 30); C pods (default 5) replaced every second; a pressure\n"
      "     episode a minute (a priority-0 hog at 256 MiB/s under a 1 GiB kubepods with\n"
      "     allocatableMemory.available < 200Mi); VmRSS, descriptors, CPU every 10 s\n"
      "  --quick   2 minutes of soak, 10 s of slowloris\n"
      "Targets: /healthz p99 <= %.0f ms under slowloris; over the soak the last five minutes'\n"
      "RSS within %.0f MiB and descriptors within %.0f of the first five; every hog evicted,\n"
      "no other pod, no kernel OOM kill. Misses print MISSES; the exit status stays 0.\n",
      NODEWARDEN_EXE, kSandboxPrefix, kProbeTargetMs, kRssGrowthTargetMiB, kFdGrowthTarget);
}

int run(int argc, char** argv) {
  Settings settings;
  Args args(printUsage);
  args.number("--minutes", settings.minutes, 1, 600)
      .number("--pods", settings.pods, 0, 5000)
      .number("--churn", settings.churnPerSecond, 0, 1000)
      .number("--slow-clients", settings.slowClients, 1, 5000)
      .number("--slow-seconds", settings.slowSeconds, 1, 3600)
      .flag("--skip-slowloris", settings.skipSlowloris)
      .flag("--skip-soak", settings.skipSoak)
      .flag("--quick", [&] {
        settings.minutes = 2;
        settings.slowSeconds = 10;
      });
  if (auto status = args.parse(argc, argv)) return *status;
  auto hierarchy = hierarchyForSandbox("bench_soak", "it creates cgroups");
  if (!hierarchy) return 77;
  const cgroups::Hierarchy& h = *hierarchy;
  if (::access(NODEWARDEN_EXE, X_OK) != 0) {
    std::printf("bench_soak: skipped: the nodewarden binary %s is not there\n", NODEWARDEN_EXE);
    return 77;
  }
  installStopHandlers();
  (void)cgroups::raiseOpenFileLimit(std::uint64_t(settings.slowClients) * 2 + 1024);
  std::printf("bench_soak: %s; %ld cores; load %s", buildFlavour().c_str(),
              ::sysconf(_SC_NPROCESSORS_ONLN), readText("/proc/loadavg").c_str());
  std::printf("  memory hierarchy %s (cgroup %s)\n\n", h.memory.c_str(),
              h.memoryVersion == cgroups::Version::V1 ? "v1" : "v2");

  auto opened = openSandbox(h, "bench_soak", kSandboxPrefix, std::uint64_t(kNodeMemory));
  if (!opened) return 77;
  Sandbox& sandbox = *opened;
  TempDir temp{fs::temp_directory_path() / sandbox.top()};
  std::error_code ec;
  fs::create_directories(temp.path, ec);
  int status = 0;
  {
    Node node(sandbox, temp.path);
    if (std::string error = node.start(settings.pods); !error.empty()) {
      std::printf("cannot start: %s\n", error.c_str());
      node.stop();
      (void)sandbox.destroy();
      return stopped() ? 130 : 1;
    }
    std::printf("  agent pid %d ready on 127.0.0.1:%u\n\n", int(node.pid()), unsigned(node.port()));

    std::optional<double> probeP99;
    if (!settings.skipSlowloris && !stopped()) {
      std::printf("== 1. slowloris: %d connections, a header byte a second each, %d s ==\n",
                  settings.slowClients, settings.slowSeconds);
      std::fflush(stdout);
      const SlowlorisFigures f = slowloris(node, settings.slowClients, settings.slowSeconds);
      const Millis ms(f.probeMs);
      std::printf(
          "  GET /healthz every 100 ms: %zu answered (%d not ok), %d failed; p50 %.1f ms,"
          " p99 %.1f ms, max %.1f ms\n",
          ms.n(), f.probesNotOk, f.probeFailures, ms.p50(), ms.p99(), ms.max());
      std::string statuses;
      for (const auto& [code, n] : f.probeStatuses)
        statuses += " " + std::to_string(code) + "x" + std::to_string(n);
      std::printf("  /healthz answers:%s\n", statuses.c_str());
      std::printf("  slow connections: %zu opened, %zu closed by the agent, %zu open at the end\n",
                  f.connects, f.closedByAgent, f.heldAtEnd);
      std::printf(
          "  agent VmRSS %.1f MiB before, %.1f at most, %.1f after; descriptors %zu,"
          " %zu at most, %zu after\n\n",
          f.rssBeforeMiB, f.rssMaxMiB, f.rssAfterMiB, f.fdsBefore, f.fdsMax, f.fdsAfter);
      if (ms.n() > 0 && f.probeFailures == 0) probeP99 = ms.p99();
    }

    std::optional<SoakFigures> soaked;
    if (!settings.skipSoak && !stopped()) {
      std::printf("== 2. soak: %d minutes, %d pods, %d replaced a second, an episode a minute ==\n",
                  settings.minutes, settings.pods, settings.churnPerSecond);
      std::fflush(stdout);
      SoakFigures f = soak(node, sandbox, h, settings.minutes, settings.churnPerSecond);
      std::printf("  %6s %10s %6s %10s\n", "minute", "VmRSS MiB", "fds", "CPU %");
      for (int m = 0; m < settings.minutes; ++m) {
        if (auto row = meanOver(f.samples, m, m + 1)) {
          std::printf("  %6d %10.1f %6zu %10.2f\n", m + 1, row->rssMiB, row->fds, row->cpuPercent);
        }
      }
      const Millis kill(f.killMs);
      const Millis life(f.hogLifeMs);
      std::printf(
          "  pods replaced: %zu; episodes %d: %d hogs evicted, %d survived 30 s, %d wrong"
          " victims, %d kernel OOM kills\n",
          f.churned, f.episodes, f.evicted, f.hogsSurvived, f.wrongVictims, f.kernelOomKills);
      std::printf(
          "  the agent's crossing -> signalled: p50 %.1f ms, max %.1f ms; hog start ->"
          " gone: p50 %.0f ms, max %.0f ms\n",
          kill.p50(), kill.max(), life.p50(), life.max());
      if (!f.firstProblem.empty()) std::printf("  first problem: %s\n", f.firstProblem.c_str());
      std::printf("\n");
      soaked = std::move(f);
    }

    std::printf("== targets ==\n");
    if (probeP99) {
      std::printf("  /healthz p99 under slowloris          %8.1f ms  <= %5.0f ms   %s\n", *probeP99,
                  kProbeTargetMs, verdict(*probeP99 <= kProbeTargetMs));
    }
    if (soaked) {
      const double span = std::min(5.0, settings.minutes / 2.0);
      auto first = meanOver(soaked->samples, 0, span);
      auto last = meanOver(soaked->samples, settings.minutes - span, settings.minutes + 1);
      if (first && last) {
        const double rss = last->rssMiB - first->rssMiB;
        const double fds = double(last->fds) - double(first->fds);
        std::printf("  RSS, last %.0f min - first %.0f min      %+8.1f MiB <= %5.0f MiB  %s\n",
                    span, span, rss, kRssGrowthTargetMiB, verdict(rss <= kRssGrowthTargetMiB));
        std::printf("  fds, last %.0f min - first %.0f min      %+8.0f     <= %5.0f      %s\n",
                    span, span, fds, kFdGrowthTarget, verdict(fds <= kFdGrowthTarget));
        std::printf("  CPU %%, first %.0f min %.2f, last %.0f min %.2f\n", span, first->cpuPercent,
                    span, last->cpuPercent);
      }
      const bool clean = soaked->evicted == soaked->episodes && soaked->wrongVictims == 0 &&
                         soaked->kernelOomKills == 0;
      std::printf("  every hog evicted, nothing else, no OOM kill              %s\n",
                  verdict(clean));
    }
    node.stop();
    std::printf("  agent stopped with SIGTERM: %s\n", node.exitStatus().c_str());
  }
  if (stopped()) status = 130;
  if (!closeSandbox(sandbox) && status == 0) status = 1;
  return status;
}

}  // namespace
}  // namespace nodewarden::bench

int main(int argc, char** argv) {
  return nodewarden::bench::run(argc, argv);
}
