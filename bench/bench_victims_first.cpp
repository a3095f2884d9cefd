// bench_victims_first: the CPU of one victims-first decision (node/victims_first.h, the agent's
// `decide` step) at 1,000 pods, the reads served from memory. Scenarios: hog (idle pods of 0–256
// KiB beside one grown from 200 to 600 MiB and a steady one); churned (several priorities and
// requests, 0–40 MiB, a tenth grown, a tenth shrunk, a few gone, a few new: several victims,
// certified by usage reads); quiet (the hog's node far from the threshold). --once NAME makes one
// decision untimed, for callgrind (docs/performance.md). That the victims are a full scan's is
// tests/node/victims_first_test.cpp's to check. Exits 2 on bad arguments.
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>

#include "bench/support/report.h"
#include "node/victims_first.h"
#include "policy/eviction.h"
#include "tests/support/memory_pod.h"

using namespace nodewarden;
using namespace nodewarden::bench;

namespace {

using Bytes = std::optional<std::uint64_t>;
constexpr std::int64_t kKiB = 1024, kMiB = 1024 * kKiB;
constexpr std::uint64_t kSeed = 0x766963746d730031ULL;
constexpr std::int32_t kPriorities[] = {0, 0, 0, 1000, 100000};

// A node as the decision meets it: each pod's figures as last read (none: new) and as a read
// now gives them (none: gone), the view over the first; and the reader serving the second.
struct Node final : node::PodFigureReader {
  std::vector<policy::Pod> pods;
  std::deque<policy::PodStats> last, now;  // parallel to pods
  policy::NodeView stale;                  // what victims first starts from
  policy::NodeStats stats;
  policy::Policy policy;
  std::unordered_map<const policy::Pod*, const policy::PodStats*> nowByPod;
  std::deque<policy::PodStats> reads;  // what read() gave

  void add(int index, std::int32_t priority, std::int64_t request, Bytes lastWs, Bytes nowWs) {
    pods.push_back(testing::memoryPod("bench", index, priority, request));
    for (auto [to, ws] : {std::pair{&last, lastWs}, std::pair{&now, nowWs}}) {
      to->emplace_back().uid = pods.back().uid;
      to->back().memoryWorkingSetBytes = ws;
    }
  }
  Read read(const policy::Pod& pod) override {
    const policy::PodStats& fresh = *nowByPod.at(&pod);
    if (!fresh.memoryWorkingSetBytes) return {};
    return {&reads.emplace_back(fresh), fresh.memoryWorkingSetBytes};
  }
  Bytes usage(const policy::Pod& pod) override { return nowByPod.at(&pod)->memoryWorkingSetBytes; }

  node::VictimsFirstDecision decide() {
    return node::decideVictimsFirst(stale, *stats.podsMemoryWorkingSetBytes, policy,
                                    policy::EvictionState{}, SteadyTime{}, *this);
  }
};

std::unique_ptr<Node> makeNode(std::string_view name, int count) {
  auto s = std::make_unique<Node>();
  const bool churned = name == "churned";
  Random rng(churned ? kSeed + 1 : kSeed);
  for (int i = 0; i < count; ++i) {
    if (!churned) {
      const std::int64_t ws = rng.between(0, 256 * kKiB);  // an idle pod
      s->add(i, 0, 0, ws, ws);
      continue;
    }
    const std::int64_t request = rng.between(0, 3) == 0 ? 0 : rng.between(1, 64) * kMiB;
    const std::int32_t priority = rng.pick(kPriorities);
    const std::int64_t ws = rng.between(0, 40) * kMiB + rng.between(0, kMiB);
    const std::int64_t change = rng.between(0, 19);
    Bytes now = ws;
    if (change == 0) now.reset();                                       // gone
    if (change == 1 || change == 2) *now += rng.between(1, 30) * kMiB;  // grew
    if (change == 3 || change == 4) *now /= 3;                          // shrank
    s->add(i, priority, request, ws, now);
  }
  if (churned) {
    for (int i = 0; i < 3; ++i) s->add(count + i, 1000, 16 * kMiB, {}, rng.between(0, 64) * kMiB);
  } else {
    s->add(count, 0, 0, 200 * kMiB, 600 * kMiB);               // the hog
    s->add(count + 1, 0, 256 * kMiB, 100 * kMiB, 100 * kMiB);  // steady, within its request
  }
  std::uint64_t ws = 0;
  for (const policy::PodStats& stats : s->now) ws += stats.memoryWorkingSetBytes.value_or(0);
  // Available against the 300 Mi threshold: hog 100 Mi; quiet 64 Gi; churned 200 Mi (evict 100).
  s->stats.podsMemoryWorkingSetBytes = ws;
  s->stats.podsMemoryAvailableBytes = (churned ? 200 : name == "hog" ? 100 : 64 * 1024) * kMiB;
  policy::resolvePods(s->pods, {});
  for (std::size_t i = 0; i < s->pods.size(); ++i) {
    s->stale.pods.push_back(&s->pods[i]);
    s->stale.podStats.push_back(&s->last[i]);
    s->nowByPod[&s->pods[i]] = &s->now[i];
  }
  s->stale.name = "bench-node";
  s->stale.stats = &s->stats;
  policy::assignKeyOrder(s->stale);
  policy::Diagnostics diagnostics;
  s->policy = *policy::parsePolicyText(
      R"({"evictionHard": {"allocatableMemory.available": "300Mi"}})", diagnostics);
  s->policy.maxPodsPerCycle = churned ? 5 : 1;  // evictionMaxPodsPerCycle
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string once;
  Args args(
      "usage: bench_victims_first [--quick] [--once hog|churned|quiet]\n"
      "  --once NAME   one decision of that scenario, untimed (for callgrind)\n");
  args.flag("--quick", quick).value("--once", "hog, churned or quiet", [&](std::string_view v) {
    once = std::string(v);
    return v == "hog" || v == "churned" || v == "quiet";
  });
  if (auto status = args.parse(argc, argv)) return *status;
  if (once.empty()) {
    printEnvironment("bench_victims_first (the reads served from memory)", "", true, false);
    std::printf("\n");
  }
  const Budget budget = quick ? Budget{20, 2000, 0.3} : Budget{50, 20000, 2.0};
  for (std::string_view name : {"hog", "churned", "quiet"}) {
    if (!once.empty() && once != name) continue;
    const auto s = makeNode(name, 1000);
    const node::VictimsFirstDecision got = s->decide();  // what it did:
    std::printf("  %-8.*s %zu pods: ", int(name.size()), name.data(), s->pods.size());
    std::string victims;
    if (got.fullScan != node::FullScanReason::None) {
      std::printf("fell back to a full scan (%s)\n", std::string(toString(got.fullScan)).c_str());
    } else {
      for (const policy::Eviction& e : got.result->decision.evict)
        victims += " " + e.pod->name + "(" + std::to_string(e.usage / kMiB) + "Mi)";
      std::printf("victims%s; %zu read whole, %zu usages read, %d rounds, %zu vanished\n",
                  victims.empty() ? " none" : victims.c_str(), got.podsRead, got.usagesRead,
                  got.rounds, got.vanished.size());
    }
    if (!once.empty()) break;  // one decision alone, for callgrind's --toggle-collect
    const Samples decided = measure(budget, 3, [&] {
      s->reads.clear();  // untimed
      return timed([&] { return s->decide(); })();
    });
    printSamplesLine(18, "decideVictimsFirst", decided, 1e3, "us");
  }
  return 0;
}
