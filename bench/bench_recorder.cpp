// bench_recorder: the flight recorder's cost (node/recorder.h) and the replay's speed
// (record/replay.h) at the kubelet's default of 110 pods, in CPU time (the machine is shared):
// 1. Recorder::cycle() as the agent calls it, kernel reads included, on an idle node (a cycle a
// second, a full scan every 30 s) and inside an episode (a full scan every cycle, the writer
// thread encoding and writing the file); 2. memory at its bounds (the ring full at an episode's
// cadence, 6,000 decision records); 3. episode size, every pod's figures moving at every sample;
// 4. that episode's replay. No root needed. Exits 1 when no episode was written, 2 on bad args.
#include <ctime>
#include <filesystem>
#include <thread>

#include "base/clock.h"
#include "base/files.h"
#include "bench/support/report.h"
#include "node/recorder.h"
#include "policy/eviction.h"
#include "record/episode.h"
#include "record/replay.h"

using namespace nodewarden;
using namespace nodewarden::bench;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kMi = 1024 * 1024;
constexpr int kPods = 110;

// The node the agent's loop sees, and the time of its last cycle.
struct Node {
  policy::Snapshot snapshot;
  policy::Policy policy;
  policy::EvictionState state;
  SteadyTime now;
  policy::Summary& summary() { return snapshot.stats["bench-node"]; }
};

// The node's figures from its pods' working sets (`met`: the pods' memory under its threshold).
void setNodeFigures(policy::Summary& summary, bool met) {
  std::uint64_t used = 0;
  for (const policy::PodStats& s : summary.pods) used += *s.memoryWorkingSetBytes;
  policy::NodeStats& stats = summary.node;
  stats.podsMemoryWorkingSetBytes = used;
  stats.podsMemoryAvailableBytes = met ? 200 * kMi : (8ULL << 30) - used;
  stats.memoryWorkingSetBytes = used + 2048 * kMi;
  stats.memoryAvailableBytes = (16ULL << 30) - used - 2048 * kMi;
}

// The CPU time `f()` takes on `clock`, in nanoseconds.
template <typename F>
double cpuTime(F&& f, clockid_t clock = CLOCK_THREAD_CPUTIME_ID) {
  timespec a{}, z{};
  ::clock_gettime(clock, &a);
  f();
  ::clock_gettime(clock, &z);
  return double(z.tv_sec - a.tv_sec) * 1e9 + double(z.tv_nsec - a.tv_nsec);
}

// One agent cycle `step` after the last: the decision, then the recorder's call, timed (if any).
double cycle(node::Recorder* recorder, Node& node, std::chrono::milliseconds step) {
  const SteadyTime now = node.now += step;
  const policy::NodeView view = policy::makeNodeView(node.snapshot, "bench-node");
  auto result =
      policy::evaluateEviction(view, node.policy, node.state, now, policy::Rankings::Needed);
  node.state = std::move(result.next);
  if (recorder == nullptr) return 0;
  return cpuTime(
      [&] { recorder->cycle(view, node.snapshot, node.state, result.decision, node.policy, now); });
}

// `count` cycles `step` apart, each after a full scan (every pod's figures moved by a few pages,
// the node's following, in new storage as buildSnapshot gives): the recorder's CPU time of each.
std::vector<double> scans(node::Recorder* recorder, Node& node, Random& random, int count,
                          std::chrono::milliseconds step, bool met) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i) {
    Node fresh = node;
    for (policy::PodStats& s : fresh.summary().pods) {
      *s.memoryWorkingSetBytes += std::uint64_t(random.between(-16, 16) * 4096);  // pages
      s.memoryUsageBytes = *s.memoryWorkingSetBytes + 4 * kMi;
    }
    setNodeFigures(fresh.summary(), met);
    node = std::move(fresh);
    out.push_back(cycle(recorder, node, step));
  }
  return out;
}

// One of the built-in policy texts; a text that does not parse is this program's bug (exit 1).
policy::Policy builtInPolicy(std::string_view text) {
  policy::Diagnostics diagnostics;
  auto parsed = policy::parsePolicyText(text, diagnostics);
  if (!parsed) {
    std::fprintf(stderr, "a built-in policy does not parse: %s\n", diagnostics.joined().c_str());
    std::exit(1);
  }
  return *std::move(parsed);
}

struct Bench {
  bool quick = false;
  Random random{22};
  fs::path dir = fs::temp_directory_path() / ("bench-recorder-" + std::to_string(::getpid()));
  cgroups::Hierarchy hierarchy;  // no cgroups: node-level kernel reads only
  cgroups::PodCgroups index{hierarchy, "kubepods"};
  ManualClock clock;
  // Parsed before the temporary directory exists (a text that does not parse exits at once).
  const policy::Policy nodePolicy = builtInPolicy(
      R"({"evictionHard": {"allocatableMemory.available": "256Mi", "memory.available": "100Mi"},
          "evictionMinimumReclaim": {"allocatableMemory.available": "64Mi"}})");
  const policy::Policy candidatePolicy =
      builtInPolicy(R"({"evictionHard": {"allocatableMemory.available": "300Mi"}})");

  // kPods running pods of priority 0, BestEffort, with working sets; the pods' cgroup of 8 GiB.
  Node node() {
    Node node;
    node.now = clock.now();
    node.policy = nodePolicy;
    policy::Node& n = node.snapshot.nodes.emplace_back();
    n.name = "bench-node";
    n.capacity["memory"] =
        policy::Quantity::fromValue(16LL << 30, policy::QuantityFormat::BinarySI);
    n.allocatable["memory"] =
        policy::Quantity::fromValue(8LL << 30, policy::QuantityFormat::BinarySI);
    for (int i = 0; i < kPods; ++i) {
      policy::Pod& pod = node.snapshot.pods.emplace_back();
      pod.ns = "ns-" + std::to_string(i % 7);
      pod.name = "pod-" + std::to_string(i);
      pod.uid = random.uuid();
      pod.nodeName = n.name;
      pod.phase = "Running";
      policy::PodStats& stats = node.summary().pods.emplace_back();
      stats.uid = pod.uid;
      stats.memoryWorkingSetBytes = std::uint64_t(random.between(8, 64)) * kMi;
      stats.memoryUsageBytes = *stats.memoryWorkingSetBytes + 4 * kMi;
      stats.processCount = 3;
    }
    policy::resolvePods(node.snapshot.pods, {});
    setNodeFigures(node.summary(), false);
    node.summary().node.maxPid = 4194304;
    node.summary().node.curProc = 900;
    return node;
  }
  // The recorder as the agent opens it, its episodes under dir/`sub` ("": none on disk).
  std::unique_ptr<node::Recorder> open(const std::string& sub, bool longEpisodes = false,
                                       bool settleFast = false) {
    node::RecorderOptions options;
    options.nodeName = "bench-node";
    options.stateDir = sub.empty() ? "" : (dir / sub).string();
    if (longEpisodes) options.maxEpisode = 24h;
    if (settleFast) options.settle = 1s;
    auto recorder = std::make_unique<node::Recorder>(options, index, clock);
    (void)recorder->open();
    return recorder;
  }
};

void cpu(Bench& b, int iterations) {
  std::vector<double> idle;
  Node quiet = b.node();
  auto plain = b.open("");                                     // no episode here: the plain cycle
  for (int i = 0; i < 50; ++i) cycle(plain.get(), quiet, 1s);  // warm up
  for (int i = 0; i < iterations; ++i) {  // idle: the node's figures only, the pods' unchanged
    *quiet.summary().node.memoryAvailableBytes += std::uint64_t(i % 3);
    idle.push_back(cycle(plain.get(), quiet, 1s));
  }
  const std::vector<double> full = scans(plain.get(), quiet, b.random, iterations, 1s, false);
  plain->stop();
  // In an episode (a threshold met every cycle): the process's CPU time (the writer's thread too)
  // over the same loop with and without the recorder.
  auto episodeLoop = [&](bool record) {
    Node node = b.node();
    auto recorder = b.open(record ? "cpu" : "none", true);
    auto loop = [&] {
      scans(record ? recorder.get() : nullptr, node, b.random, iterations, 100ms, true);
      recorder->stop(60s);
    };
    return cpuTime(loop, CLOCK_PROCESS_CPUTIME_ID) / iterations;
  };
  const double without = episodeLoop(false), episodeNs = episodeLoop(true) - without;
  const double idleNs = Samples::from(idle).median(), fullNs = Samples::from(full).median();
  const double idleCpu = (idleNs * 29.0 / 30.0 + fullNs / 30.0) / 1e9 * 100.0;  // % of a core
  std::printf(
      "1. CPU time (medians of %d calls)\n"
      "   idle cycle (node figures only):        %8.1f us\n"
      "   cycle after a full scan:               %8.1f us\n"
      "   an idle node (1 cycle/s, a full scan every 30 s): %.4f %% of a core (budget 0.05 %%)\n"
      "   in an episode, per cycle: %.1f us with the writer thread\n"
      "   an episode at 10 cycles/s: %.3f %% of a core\n\n",
      iterations, idleNs / 1000, fullNs / 1000, idleCpu, episodeNs / 1000,
      episodeNs * 10 / 1e9 * 100);
}

void memory(Bench& b) {
  Node node = b.node();
  const std::size_t heapBefore = heapInUse(false);
  auto recorder = b.open("memory");
  // The ring at an episode's cadence (10 full scans a second, nothing met) until its bound holds.
  scans(recorder.get(), node, b.random, b.quick ? 400 : 1200, 100ms, false);
  record::DecisionRecord r;  // the decision records at their bound
  r.signal = "allocatableMemory.available";
  r.observed = 200 * kMi;
  r.threshold = 256 * kMi;
  r.rank = 1;
  r.action = "evict";
  r.latencyMs = 3.2;
  r.reason =
      "The node was low on resource: memory. Threshold quantity: 256Mi, available: 204800Ki. ";
  for (int i = 0; i < 6000; ++i) {
    r.time = 1'780'000'000'000'000 + i;
    const policy::Pod& pod = node.snapshot.pods[std::size_t(i) % node.snapshot.pods.size()];
    r.pod = pod.key;
    r.uid = pod.uid;
    recorder->decision(r);
  }
  // Once the writer caught up (its queue is memory too, but bounded apart).
  for (int i = 0; i < 600 && recorder->memoryBytes() > 0; ++i) {
    const std::size_t before = recorder->memoryBytes();
    std::this_thread::sleep_for(50ms);
    if (recorder->memoryBytes() == before) break;
  }
  std::printf(
      "2. Memory at %d pods, the ring full at 10 samples/s and 6,000 decision records offered\n"
      "   by the recorder's own account: %.2f MiB; heap growth: %.2f MiB (budget 4 MiB)\n\n",
      kPods, double(recorder->memoryBytes()) / double(kMi),
      double(heapInUse(false) - heapBefore) / double(kMi));
}

// 3. The episode's size, every pod's figures moving at 10 samples a second; 4. its replay.
bool episode(Bench& b) {
  Node node = b.node();
  auto recorder = b.open("episode", true, true);
  scans(recorder.get(), node, b.random, (b.quick ? 30 : 60) * 10, 100ms, true);
  recorder->stop(30s);
  const auto files = recorder->episodeFiles();
  const auto bytes = readFile(files.empty() ? "" : files.front());
  auto episode = record::decodeEpisode(bytes ? std::string_view(*bytes) : "");
  if (!episode) {
    std::printf("3. %s (%s)\n",
                files.empty() ? "no episode was written" : "the episode does not decode",
                episode.error().message.c_str());
    return false;
  }
  const double span = double(episode->samples.back().t - episode->samples.front().t) / 1e9;
  std::printf(
      "3. Episode: %zu samples over %.1f s at 10 samples/s, %d pods: %zu bytes, %.1f bytes per "
      "pod-second (%.2f per pod-sample; every pod's figures moving)\n\n",
      episode->samples.size(), span, kPods, bytes->size(), double(bytes->size()) / (span * kPods),
      double(bytes->size()) / (double(episode->samples.size()) * kPods));
  std::vector<double> decode, fidelity, counterfactual;
  record::ReplayOptions candidate;
  candidate.policy = b.candidatePolicy;
  bool identical = true;  // the replay with the recorded policy decides as the run did
  for (int i = 0; i < (b.quick ? 3 : 10); ++i) {
    std::optional<Result<record::Episode>> decoded;
    record::ReplayResult r, c;
    decode.push_back(cpuTime([&] { decoded.emplace(record::decodeEpisode(*bytes)); }));
    fidelity.push_back(cpuTime([&] { r = record::replay(**decoded); }));
    counterfactual.push_back(cpuTime([&] { c = record::replay(**decoded, candidate); }));
    gSink = gSink + r.decisions.size() + c.decisions.size();
    identical = identical && r.fidelity == record::Fidelity::Identical;
  }
  if (!identical) std::printf("   fidelity: NOT identical\n");
  auto ms = [](std::vector<double> v) { return Samples::from(std::move(v)).median() / 1e6; };
  const double d = ms(decode), f = ms(fidelity), c = ms(counterfactual);
  std::printf(
      "4. Replay of that episode (CPU time, medians): decode %.1f ms; fidelity with the recorded "
      "policy %.1f ms = %.0fx real time (decode included: %.0fx); a candidate policy "
      "(simulation and bounds) %.1f ms = %.0fx\n",
      d, f, span * 1000 / f, span * 1000 / (f + d), c, span * 1000 / c);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  Args args("usage: bench_recorder [--quick] [--help]\n");
  args.flag("--quick", b.quick);
  if (auto status = args.parse(argc, argv)) return *status;
  std::printf("bench_recorder: %d pods, %s, %s\n\n", kPods, cpuModel().c_str(),
              buildFlavour().c_str());
  fs::create_directories(b.dir);
  cpu(b, b.quick ? 300 : 3000);
  memory(b);
  const bool written = episode(b);
  std::error_code ec;
  fs::remove_all(b.dir, ec);
  return written ? 0 : 1;
}
