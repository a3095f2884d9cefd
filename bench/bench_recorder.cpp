// The flight recorder's cost (node/recorder.h) and the replay's speed (record/replay.h), at
// the kubelet's default of 110 pods on a node:
//   1. CPU: Recorder::cycle() as the agent calls it, on an idle node (one cycle a second, the
//      pods' figures re-read every 30 s) and inside an episode (every cycle a full scan, the
//      writer thread encoding and writing the file), with the kernel reads it does itself
//      (memory PSI and OOM counters: /proc/pressure/memory and /proc/vmstat on this host).
//   2. Memory: what the recorder holds at its bounds (the ring filled at an episode's
//      cadence, the decision records full), by its own account and by the heap's.
//   3. Episode size: bytes per pod-second, every pod's figures moving at every sample.
//   4. Replay: the episode of part 3 decoded and replayed, × real time.
// No root needed: the recorder is given a pod index with no cgroups (the OOM counters of pods
// are read only when the node's moved). Figures print; nothing is asserted.
//
// Run: ninja -C BUILD bench/bench_recorder && BUILD/bench/bench_recorder [--pods N] [--quick]
#include <malloc.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/files.h"
#include "bench/support/program.h"
#include "node/recorder.h"
#include "policy/eviction.h"
#include "record/episode.h"
#include "record/replay.h"

using namespace nodewarden;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kMi = 1024 * 1024;

struct Node {
  policy::Snapshot snapshot;
  policy::Policy policy;
};

// N pods in three priorities, with requests and working sets; the pods' cgroup of 8 GiB.
Node makeNode(int pods, bench::Random& random) {
  Node node;
  policy::Diagnostics diagnostics;
  node.policy = *policy::parsePolicyText(
      R"({"evictionHard": {"allocatableMemory.available": "256Mi", "memory.available": "100Mi"},
          "evictionMinimumReclaim": {"allocatableMemory.available": "64Mi"}})",
      diagnostics);
  policy::Node n;
  n.name = "bench-node";
  n.capacity["memory"] = policy::Quantity::fromValue(16LL << 30, policy::QuantityFormat::BinarySI);
  n.allocatable["memory"] =
      policy::Quantity::fromValue(8LL << 30, policy::QuantityFormat::BinarySI);
  node.snapshot.nodes.push_back(n);
  policy::Summary& summary = node.snapshot.stats[n.name];
  std::uint64_t used = 0;
  for (int i = 0; i < pods; ++i) {
    policy::Pod pod;
    pod.ns = "ns-" + std::to_string(i % 7);
    pod.name = "pod-" + std::to_string(i);
    pod.uid = random.uuid();
    pod.nodeName = n.name;
    pod.phase = "Running";
    pod.priority = (i % 3) * 1000;
    pod.qos = i % 4 == 0 ? policy::QosClass::BestEffort : policy::QosClass::Burstable;
    pod.terminationGracePeriodSeconds = 30;
    if (pod.qos != policy::QosClass::BestEffort)
      pod.rankingRequests["memory"] = std::int64_t(32 * kMi);
    node.snapshot.pods.push_back(pod);
    policy::PodStats stats;
    stats.uid = pod.uid;
    stats.memoryWorkingSetBytes = std::uint64_t(random.between(8, 64)) * kMi;
    stats.memoryUsageBytes = *stats.memoryWorkingSetBytes + 4 * kMi;
    stats.processCount = 3;
    used += *stats.memoryWorkingSetBytes;
    summary.pods.push_back(stats);
  }
  policy::resolvePods(node.snapshot.pods, {});
  summary.node.memoryWorkingSetBytes = used + 2048 * kMi;
  summary.node.memoryAvailableBytes = (16ULL << 30) - *summary.node.memoryWorkingSetBytes;
  summary.node.podsMemoryWorkingSetBytes = used;
  summary.node.podsMemoryAvailableBytes = (8ULL << 30) - used;
  summary.node.maxPid = 4194304;
  summary.node.curProc = 900;
  return node;
}

// Every pod's figures move by a few pages, as two kernel readings do; the node's follow.
void jitter(Node& node, bench::Random& random) {
  policy::Summary& summary = node.snapshot.stats["bench-node"];
  std::uint64_t used = 0;
  for (policy::PodStats& s : summary.pods) {
    const std::int64_t pages = random.between(-16, 16);
    s.memoryWorkingSetBytes = std::uint64_t(std::int64_t(*s.memoryWorkingSetBytes) + pages * 4096);
    s.memoryUsageBytes = *s.memoryWorkingSetBytes + 4 * kMi;
    used += *s.memoryWorkingSetBytes;
  }
  summary.node.podsMemoryWorkingSetBytes = used;
  summary.node.podsMemoryAvailableBytes = (8ULL << 30) - used;
  summary.node.memoryWorkingSetBytes = used + 2048 * kMi;
  summary.node.memoryAvailableBytes = (16ULL << 30) - *summary.node.memoryWorkingSetBytes;
}

// CPU time, not wall time: the machine these figures come from is shared, and a wall clock
// counts the time another process had the core.
double threadCpuNanos() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

double processCpuNanos() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

// One agent cycle's call into the recorder: the view, the decision and its state.
struct Cycle {
  policy::EvictionState state;
  void run(node::Recorder& recorder, const Node& node, SteadyTime now) {
    const policy::NodeView view = policy::makeNodeView(node.snapshot, "bench-node");
    auto result = policy::evaluateEviction(view, node.policy, state, now, policy::Rankings::Needed);
    state = std::move(result.next);
    recorder.cycle(view, node.snapshot, state, result.decision, node.policy, now);
  }
};

// The recorder as the agent opens it, on `dir` ("": no episodes on disk), for makeNode's node.
std::unique_ptr<node::Recorder> openRecorder(const std::string& dir,
                                             const cgroups::PodCgroups& index, const Clock& clock,
                                             bool longEpisodes = false, bool settleFast = false) {
  node::RecorderOptions options;
  options.nodeName = "bench-node";
  options.stateDir = dir;
  if (longEpisodes) options.maxEpisode = std::chrono::hours(24);
  if (settleFast) options.settle = std::chrono::seconds(1);
  auto recorder = std::make_unique<node::Recorder>(options, index, clock);
  (void)recorder->open();
  return recorder;
}

}  // namespace

int main(int argc, char** argv) {
  int pods = 110;
  bool quick = false;
  bench::Args args("usage: bench_recorder [--pods N] [--quick] [--help]\n");
  args.flag("--quick", quick).number("--pods", pods, 1, 100000);
  if (auto status = args.parse(argc, argv)) return *status;
  const int iterations = quick ? 300 : 3000;
  std::printf("bench_recorder: %d pods, %s, %s\n\n", pods, bench::cpuModel().c_str(),
              bench::buildFlavour().c_str());
  bench::Random random(22);
  const fs::path dir = fs::temp_directory_path() / ("bench-recorder-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  cgroups::Hierarchy hierarchy;  // no cgroups: node-level kernel reads only
  cgroups::PodCgroups index(hierarchy, "kubepods");
  ManualClock clock;

  // ---- 1. CPU ----
  double idleNs = 0, fullNs = 0, episodeLoopNs = 0, episodeCpuNs = 0;
  {
    Node node = makeNode(pods, random);
    auto recorder = openRecorder("", index, clock);  // no episode here: the plain cycle
    Cycle cycle;
    SteadyTime now = clock.now();
    for (int i = 0; i < 50; ++i) cycle.run(*recorder, node, now += 1s);  // warm up
    // An idle cycle: node figures only; the pods' (the snapshot) unchanged. Only the
    // recorder's call is timed.
    policy::Summary& summary = node.snapshot.stats["bench-node"];
    std::vector<double> idleOnly, fullOnly;
    for (int i = 0; i < iterations; ++i) {
      summary.node.memoryAvailableBytes = *summary.node.memoryAvailableBytes + std::uint64_t(i % 3);
      const policy::NodeView view = policy::makeNodeView(node.snapshot, "bench-node");
      auto result =
          policy::evaluateEviction(view, node.policy, cycle.state, now, policy::Rankings::Needed);
      now += 1s;
      const double started = threadCpuNanos();
      recorder->cycle(view, node.snapshot, result.next, result.decision, node.policy, now);
      idleOnly.push_back(threadCpuNanos() - started);
    }
    // A full scan: the agent rebuilds its snapshot (new storage, new figures).
    for (int i = 0; i < iterations; ++i) {
      jitter(node, random);
      Node fresh = node;  // new storage, as buildSnapshot gives
      const policy::NodeView view = policy::makeNodeView(fresh.snapshot, "bench-node");
      auto result =
          policy::evaluateEviction(view, fresh.policy, cycle.state, now, policy::Rankings::Needed);
      now += 1s;
      const double started = threadCpuNanos();
      recorder->cycle(view, fresh.snapshot, result.next, result.decision, fresh.policy, now);
      fullOnly.push_back(threadCpuNanos() - started);
      std::swap(node, fresh);
    }
    idleNs = bench::Samples::from(idleOnly).median();
    fullNs = bench::Samples::from(fullOnly).median();
    recorder->stop();
  }
  {
    // Inside an episode: a threshold met at every cycle, a full scan at every cycle, the file
    // written by the writer thread. The process's CPU time (both threads) over the same loop
    // with and without the recorder's call: the difference is the recorder's.
    auto episodeLoop = [&](bool record, std::vector<double>& loop) {
      Node node = makeNode(pods, random);
      auto recorder = openRecorder((dir / (record ? "cpu" : "none")).string(), index, clock, true);
      Cycle cycle;
      SteadyTime now = clock.now();
      const double cpuBefore = processCpuNanos();
      for (int i = 0; i < iterations; ++i) {
        jitter(node, random);
        node.snapshot.stats["bench-node"].node.podsMemoryAvailableBytes = 200 * kMi;  // met
        Node fresh = node;
        const policy::NodeView view = policy::makeNodeView(fresh.snapshot, "bench-node");
        auto result = policy::evaluateEviction(view, fresh.policy, cycle.state, now,
                                               policy::Rankings::Needed);
        cycle.state = result.next;
        now += 100ms;
        if (record) {
          const double started = threadCpuNanos();
          recorder->cycle(view, fresh.snapshot, result.next, result.decision, fresh.policy, now);
          loop.push_back(threadCpuNanos() - started);
        }
        std::swap(node, fresh);
      }
      recorder->stop(std::chrono::seconds(60));
      return (processCpuNanos() - cpuBefore) / iterations;
    };
    std::vector<double> loop, unused;
    const double without = episodeLoop(false, unused);
    const double with = episodeLoop(true, loop);
    episodeCpuNs = with - without;
    episodeLoopNs = bench::Samples::from(loop).median();
  }
  const double idleCpu = (idleNs * 29.0 / 30.0 + fullNs / 30.0) / 1e9 * 100.0;  // % of a core
  std::printf("1. CPU time (medians of %d calls)\n", iterations);
  std::printf("   idle cycle (node figures only):        %8.1f us\n", idleNs / 1000);
  std::printf("   cycle after a full scan:               %8.1f us\n", fullNs / 1000);
  std::printf(
      "   an idle node (1 cycle/s, a full scan every 30 s): %.4f %% of a core (budget 0.05 %%)\n",
      idleCpu);
  std::printf("   in an episode, per cycle: %.1f us on the loop, %.1f us with the writer thread\n",
              episodeLoopNs / 1000, episodeCpuNs / 1000);
  std::printf("   an episode at 10 cycles/s: %.3f %% of a core\n\n", episodeCpuNs * 10 / 1e9 * 100);

  // ---- 2. Memory ----
  {
    Node node = makeNode(pods, random);
    const std::size_t heapBefore = bench::heapInUse(false);
    auto recorder = openRecorder((dir / "memory").string(), index, clock);
    Cycle cycle;
    SteadyTime now = clock.now();
    // The ring at an episode's cadence without an episode (nothing met): 10 full scans a
    // second over the pre-roll, until the ring's bound holds it.
    for (int i = 0; i < (quick ? 400 : 1200); ++i) {
      jitter(node, random);
      Node fresh = node;
      cycle.run(*recorder, fresh, now += 100ms);
      std::swap(node, fresh);
    }
    // The decision records at their bound.
    for (int i = 0; i < 6000; ++i) {
      record::DecisionRecord r;
      r.time = 1'780'000'000'000'000 + i;
      r.kind = record::DecisionKind::Eviction;
      r.pod = node.snapshot.pods[std::size_t(i) % node.snapshot.pods.size()].key;
      r.uid = node.snapshot.pods[std::size_t(i) % node.snapshot.pods.size()].uid;
      r.signal = "allocatableMemory.available";
      r.observed = 200 * kMi;
      r.threshold = 256 * kMi;
      r.rank = 1;
      r.action = "evict";
      r.reason =
          "The node was low on resource: memory. Threshold quantity: 256Mi, available: 204800Ki. ";
      r.latencyMs = 3.2;
      recorder->decision(std::move(r));
    }
    // Once the writer caught up (its queue is memory too, but bounded apart).
    for (int i = 0; i < 600 && recorder->memoryBytes() > 0; ++i) {
      const std::size_t before = recorder->memoryBytes();
      std::this_thread::sleep_for(50ms);
      if (recorder->memoryBytes() == before) break;
    }
    const std::size_t own = recorder->memoryBytes();
    const std::size_t samples = recorder->ringSamples();
    const std::size_t heap = bench::heapInUse(false) - heapBefore;
    std::printf(
        "2. Memory at %d pods, the ring full at 10 samples/s (%zu samples kept) and 6,000 "
        "decision records offered\n",
        pods, samples);
    std::printf(
        "   by the recorder's own account: %.2f MiB; heap growth: %.2f MiB (budget 4 MiB)\n\n",
        double(own) / double(kMi), double(heap) / double(kMi));
    recorder.reset();
  }

  // ---- 3. Episode size, 4. replay ----
  {
    Node node = makeNode(pods, random);
    auto recorder = openRecorder((dir / "episode").string(), index, clock, true, true);
    Cycle cycle;
    SteadyTime now = clock.now();
    const int seconds = quick ? 30 : 60;
    const int perSecond = 10;
    for (int i = 0; i < seconds * perSecond; ++i) {
      jitter(node, random);
      node.snapshot.stats["bench-node"].node.podsMemoryAvailableBytes = 200 * kMi;
      Node fresh = node;
      cycle.run(*recorder, fresh, now += std::chrono::milliseconds(1000 / perSecond));
      std::swap(node, fresh);
    }
    recorder->stop(std::chrono::seconds(30));
    const auto files = recorder->episodeFiles();
    if (files.empty()) {
      std::printf("3. no episode was written\n");
      return 1;
    }
    const auto bytes = readFile(files.front());
    auto episode = record::decodeEpisode(*bytes);
    if (!episode) {
      std::printf("3. %s: %s\n", files.front().c_str(), episode.error().message.c_str());
      return 1;
    }
    const double span = double(episode->samples.back().t - episode->samples.front().t) / 1e9;
    std::printf(
        "3. Episode: %zu samples over %.1f s at %d samples/s, %d pods: %zu bytes, %.1f "
        "bytes per pod-second (%.2f per pod-sample; every pod's figures moving)\n\n",
        episode->samples.size(), span, perSecond, pods, bytes->size(),
        double(bytes->size()) / (span * pods),
        double(bytes->size()) / (double(episode->samples.size()) * pods));
    std::vector<double> decode, fidelity, counterfactual;
    record::ReplayOptions candidate;
    policy::Diagnostics diagnostics;
    candidate.policy = *policy::parsePolicyText(
        R"({"evictionHard": {"allocatableMemory.available": "300Mi"}})", diagnostics);
    for (int i = 0; i < (quick ? 3 : 10); ++i) {
      double started = threadCpuNanos();
      auto decoded = record::decodeEpisode(*bytes);
      decode.push_back(threadCpuNanos() - started);
      started = threadCpuNanos();
      auto r = record::replay(*decoded);
      fidelity.push_back(threadCpuNanos() - started);
      bench::gSink = bench::gSink + r.decisions.size();
      if (r.fidelity != record::Fidelity::Identical) std::printf("   fidelity: NOT identical\n");
      started = threadCpuNanos();
      auto c = record::replay(*decoded, candidate);
      counterfactual.push_back(threadCpuNanos() - started);
      bench::gSink = bench::gSink + c.decisions.size();
    }
    const double d = bench::Samples::from(decode).median() / 1e6;
    const double f = bench::Samples::from(fidelity).median() / 1e6;
    const double c = bench::Samples::from(counterfactual).median() / 1e6;
    std::printf(
        "4. Replay of that episode (CPU time, medians): decode %.1f ms; fidelity with the recorded "
        "policy %.1f ms = %.0fx real time (decode included: %.0fx); a candidate policy "
        "(simulation and bounds) %.1f ms = %.0fx\n",
        d, f, span * 1000 / f, span * 1000 / (f + d), c, span * 1000 / c);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
