// bench_victims_first: what one victims-first decision (node/victims_first.h) costs in CPU at
// 1,000 pods, the reads aside — the `decide` step of the path from the kernel's signal to the
// first signal (docs/performance.md).
//
// Each scenario builds, with a fixed seed, a node's pods (policy::resolvePods over made-up
// pods), the figures the last read of each pod gave and the ones a read now gives, and the
// node's figures now; the reader serves the figures from memory (a hash lookup and a PodStats
// per read), so what is measured is the decision itself:
//   hog      idle pods (0–256 KiB each, as empty pod cgroups) beside a pod that grew from
//            200 to 600 MiB since its last read and one steady pod: the threshold crossed, one
//            victim — the bench_agent case;
//   churned  pods of several priorities and requests, 0–40 MiB each, a tenth grown, a tenth
//            shrunk, a few gone, a few new: several victims, certified by usage reads;
//   quiet    the hog's node far from the threshold: nothing to act on.
// For each it prints what the decision did (victims, pods read whole, usages read, rounds,
// fallback), checks that its victims are the ones policy::evaluateEviction picks from every
// pod's fresh figures (the exit status is non-zero when not: the figures would be
// meaningless), and times decideVictimsFirst beside that full evaluation (the reads of a full
// scan left out).
//
// Times depend on the machine's load; instruction counts do not. For those, run one decision
// alone under callgrind and count only decideVictimsFirst:
//   valgrind --tool=callgrind --toggle-collect='nodewarden::node::decideVictimsFirst*'
//       --callgrind-out-file=/tmp/vf.out BUILD/bench/bench_victims_first --once hog
//   (one command line)
//   callgrind_annotate /tmp/vf.out | head -30   (the "PROGRAM TOTALS" line)
//
// Run: ninja -C BUILD bench/bench_victims_first && BUILD/bench/bench_victims_first
//      [--pods 1000] [--quick] [--once hog|churned|quiet]
// Single threaded; nothing is pinned. No root needed.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bench/support/program.h"
#include "node/victims_first.h"
#include "policy/eviction.h"
#include "policy/model.h"
#include "policy/policy.h"
#include "tests/support/memory_pod.h"

namespace nodewarden::bench {
namespace {

constexpr std::int64_t kKiB = 1024;
constexpr std::int64_t kMiB = 1024 * kKiB;
constexpr std::uint64_t kSeed = 0x766963746d730031ULL;

policy::Pod makePod(int index, std::int32_t priority, std::int64_t request) {
  return testing::memoryPod("bench", index, priority, request);
}

// A node as the decision meets it: every pod it may still list, each one's figures as last
// read (none for a new pod) and as a read now gives them (none for a pod gone).
struct Scenario {
  std::string name;
  std::vector<policy::Pod> pods;
  std::vector<std::optional<std::int64_t>> last;  // working set, parallel to pods
  std::vector<std::optional<std::int64_t>> now;
  std::int64_t limit = 0;  // kubepods' memory limit
  int maxPodsPerCycle = 5;

  void add(policy::Pod pod, std::optional<std::int64_t> lastWs, std::optional<std::int64_t> nowWs) {
    pods.push_back(std::move(pod));
    last.push_back(lastWs);
    now.push_back(nowWs);
  }
};

std::int64_t usageNow(const Scenario& s) {
  std::int64_t sum = 0;
  for (const auto& ws : s.now) sum += ws.value_or(0);
  return sum;
}

Scenario hogScenario(int idle, bool quiet) {
  Random rng(kSeed);
  Scenario s;
  s.name = quiet ? "quiet" : "hog";
  for (int i = 0; i < idle; ++i) {
    const std::int64_t ws = rng.between(0, 256 * kKiB);
    s.add(makePod(i, 0, 0), ws, ws);
  }
  s.add(makePod(idle, 0, 0), 200 * kMiB, 600 * kMiB);  // the hog
  // A steady pod within its request.
  s.add(makePod(idle + 1, 0, 256 * kMiB), 100 * kMiB, 100 * kMiB);
  // 100 MiB available against a 300 MiB hard threshold; quiet: 64 GiB.
  s.limit = usageNow(s) + (quiet ? 64 * 1024 * kMiB : 100 * kMiB);
  s.maxPodsPerCycle = 1;
  return s;
}

Scenario churnedScenario(int count) {
  Random rng(kSeed + 1);
  Scenario s;
  s.name = "churned";
  const std::int32_t priorities[] = {0, 0, 0, 1000, 100000};
  for (int i = 0; i < count; ++i) {
    const std::int64_t request = rng.between(0, 3) == 0 ? 0 : rng.between(1, 64) * kMiB;
    policy::Pod pod = makePod(i, rng.pick(priorities), request);
    const std::int64_t ws = rng.between(0, 40) * kMiB + rng.between(0, kMiB);
    const std::int64_t change = rng.between(0, 19);
    std::optional<std::int64_t> now = ws;
    if (change == 0) {
      now.reset();  // gone
    } else if (change <= 2) {
      *now += rng.between(1, 30) * kMiB;  // grew
    } else if (change <= 4) {
      *now /= 3;  // shrank
    }
    s.add(std::move(pod), ws, now);
  }
  for (int i = 0; i < 3; ++i) {  // new, never read
    s.add(makePod(count + i, 1000, 16 * kMiB), std::nullopt, rng.between(0, 64) * kMiB);
  }
  s.limit = usageNow(s) + 200 * kMiB;  // 100 MiB to free with minimum reclaim 0
  s.maxPodsPerCycle = 5;
  return s;
}

class Reader final : public node::PodFigureReader {
 public:
  explicit Reader(const Scenario& s) {
    for (std::size_t i = 0; i < s.pods.size(); ++i) now_[&s.pods[i]] = s.now[i];
  }
  Read read(const policy::Pod& pod) override {
    const auto& ws = now_.at(&pod);
    if (!ws) return {};
    policy::PodStats& stats = store_.emplace_back();
    stats.uid = pod.uid;
    stats.memoryWorkingSetBytes = std::uint64_t(*ws);
    return {&stats, std::uint64_t(*ws)};
  }
  std::optional<std::uint64_t> usage(const policy::Pod& pod) override {
    const auto& ws = now_.at(&pod);
    if (!ws) return std::nullopt;
    return std::uint64_t(*ws);
  }
  void clear() { store_.clear(); }

 private:
  std::unordered_map<const policy::Pod*, std::optional<std::int64_t>> now_;
  std::deque<policy::PodStats> store_;
};

// The scenario made ready to decide: the stale view victims first starts from, the fresh one
// a full scan would evaluate, the node's figures, the policy.
struct Prepared {
  std::unique_ptr<Scenario> scenario;
  policy::Policy policy;
  policy::NodeStats stats;
  std::deque<policy::PodStats> storage;
  policy::NodeView stale;
  policy::NodeView full;
  std::uint64_t kubepodsUsage = 0;
};

std::unique_ptr<Prepared> prepare(Scenario scenario) {
  auto p = std::make_unique<Prepared>();
  p->scenario = std::make_unique<Scenario>(std::move(scenario));
  Scenario& s = *p->scenario;
  policy::resolvePods(s.pods, {});
  policy::Diagnostics diagnostics;
  const std::string text = R"({"evictionHard":{"allocatableMemory.available":"300Mi"},)"
                           R"("evictionMaxPodsPerCycle":)" +
                           std::to_string(s.maxPodsPerCycle) + "}";
  auto policy = policy::parsePolicyText(text, diagnostics);
  if (!policy) {
    std::fprintf(stderr, "policy: %s\n", diagnostics.joined().c_str());
    return nullptr;
  }
  p->policy = *policy;
  const std::int64_t ws = usageNow(s);
  p->kubepodsUsage = std::uint64_t(ws);
  p->stats.podsMemoryWorkingSetBytes = std::uint64_t(ws);
  p->stats.podsMemoryAvailableBytes = std::uint64_t(std::max<std::int64_t>(0, s.limit - ws));
  for (policy::NodeView* view : {&p->stale, &p->full}) {
    view->name = "bench-node";
    view->stats = &p->stats;
  }
  for (std::size_t i = 0; i < s.pods.size(); ++i) {
    policy::PodStats& entry = p->storage.emplace_back();
    entry.uid = s.pods[i].uid;
    if (s.last[i]) entry.memoryWorkingSetBytes = std::uint64_t(*s.last[i]);
    p->stale.pods.push_back(&s.pods[i]);
    p->stale.podStats.push_back(&entry);
    if (!s.now[i]) continue;
    policy::PodStats& fresh = p->storage.emplace_back();
    fresh.uid = s.pods[i].uid;
    fresh.memoryWorkingSetBytes = std::uint64_t(*s.now[i]);
    p->full.pods.push_back(&s.pods[i]);
    p->full.podStats.push_back(&fresh);
  }
  policy::assignKeyOrder(p->stale);
  policy::assignKeyOrder(p->full);
  return p;
}

node::VictimsFirstDecision decideOnce(const Prepared& p, Reader& reader) {
  return node::decideVictimsFirst(p.stale, p.kubepodsUsage, p.policy, policy::EvictionState{},
                                  SteadyTime{}, reader);
}

std::string victims(const std::vector<policy::Eviction>& evict) {
  std::ostringstream out;
  for (const policy::Eviction& e : evict) {
    out << (out.tellp() > 0 ? " " : "") << e.pod->name << "(" << e.usage / kMiB << "Mi)";
  }
  return evict.empty() ? "none" : out.str();
}

// Prints what one decision did; false when its victims are not the full evaluation's.
bool describe(const Prepared& p, const node::VictimsFirstDecision& got) {
  const policy::EvictionResult expected = policy::evaluateEviction(
      p.full, p.policy, policy::EvictionState{}, SteadyTime{}, policy::Rankings::Needed);
  std::printf("  %-8s %zu pods: ", p.scenario->name.c_str(), p.scenario->pods.size());
  if (got.fullScan != node::FullScanReason::None) {
    std::printf("fell back to a full scan (%s)\n", std::string(toString(got.fullScan)).c_str());
    return true;
  }
  const std::string mine = victims(got.result->decision.evict);
  const std::string theirs = victims(expected.decision.evict);
  std::printf("victims %s; %zu read whole, %zu usages read, %d rounds, %zu vanished\n",
              mine.c_str(), got.podsRead, got.usagesRead, got.rounds, got.vanished.size());
  if (mine != theirs) {
    std::printf("    DIFFERS from the full evaluation's victims: %s\n", theirs.c_str());
    return false;
  }
  return true;
}

constexpr const char* kUsage =
    "usage: bench_victims_first [--pods N] [--quick] [--once hog|churned|quiet] [--help]\n"
    "  --pods N      pods on the node (default 1000, 10 to 100000)\n"
    "  --quick       fewer iterations (smoke run; figures are noisier)\n"
    "  --once NAME   one decision of that scenario, untimed (for callgrind)\n";

int run(int argc, char** argv) {
  int pods = 1000;
  bool quick = false;
  std::optional<std::string> once;
  Args args(kUsage);
  args.flag("--quick", quick)
      .number("--pods", pods, 10, 100000)
      .value("--once", "hog, churned or quiet", [&](std::string_view v) {
        once = std::string(v);
        return v == "hog" || v == "churned" || v == "quiet";
      });
  if (auto status = args.parse(argc, argv)) return *status;
  std::vector<std::unique_ptr<Prepared>> scenarios;
  for (std::string_view name : {"hog", "churned", "quiet"}) {
    if (once && *once != name) continue;
    auto prepared =
        prepare(name == "churned" ? churnedScenario(pods) : hogScenario(pods, name == "quiet"));
    if (!prepared) return 1;
    scenarios.push_back(std::move(prepared));
  }
  if (once) {
    // One decision alone, for callgrind's --toggle-collect on decideVictimsFirst.
    Reader reader(*scenarios[0]->scenario);
    const node::VictimsFirstDecision got = decideOnce(*scenarios[0], reader);
    return describe(*scenarios[0], got) ? 0 : 1;
  }

  printEnvironment("bench_victims_first: one victims-first decision, the reads served from memory",
                   "", true, false);
  std::printf("\n");
  bool same = true;
  const Budget budget = quick ? Budget{20, 2000, 0.3} : Budget{50, 20000, 2.0};
  for (const auto& p : scenarios) {
    Reader reader(*p->scenario);
    same = describe(*p, decideOnce(*p, reader)) && same;
    reader.clear();
    const Samples decide = measure(budget, 3, [&] {
      const SteadyTime start = steadyNow();
      node::VictimsFirstDecision got = decideOnce(*p, reader);
      const double ns = nanosSince(start);
      gSink = gSink + got.podsRead;
      reader.clear();
      return ns;
    });
    const Samples full =
        measure(budget, 3, timed([&] {
                  return policy::evaluateEviction(p->full, p->policy, policy::EvictionState{},
                                                  SteadyTime{}, policy::Rankings::Needed);
                }));
    printSamplesLine(44, "decideVictimsFirst", decide, 1e3, "us");
    printSamplesLine(44, "evaluateEviction, every pod fresh (no reads)", full, 1e3, "us");
  }
  return same ? 0 : 1;
}

}  // namespace
}  // namespace nodewarden::bench

int main(int argc, char** argv) {
  return nodewarden::bench::run(argc, argv);
}
