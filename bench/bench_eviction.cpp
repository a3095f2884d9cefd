// bench_eviction: how fast the eviction decision core turns a snapshot into a plan.
//
// For each node size (110, 1,000 and 10,000 pods by default) it generates, with a fixed seed,
// a snapshot shaped like `kubectl get pods -A -o json` plus a NodeList, a PriorityClassList
// and the node's kubelet Summary, as JSON text in memory: once indented as kubectl prints it
// and once compact as the API server sends it
// (kubectl::SnapshotGenerator, bench/support/generator.h). It then times
//   parse      policy::parseSnapshotText (JSON parse, model, resolve), in ms and MB/s, on both
//              texts, and split into JSON parse / model build / JSON document destruction;
//   rank+plan  makeNodeView + evaluateEviction, median and p99 per call, with a policy that
//              has a soft threshold and evictionMaxPodsPerCycle 5, and with Policy::defaults();
//   eval only  evaluateEviction on a prebuilt view. Figures are printed next to their targets with
// PASS/MISS; a missed target never changes the exit status (this is not a test). The exit
// status is non-zero only when the generated snapshot does not parse or yields no plan, which
// would make the figures meaningless.
//
// Single threaded; nothing is pinned. Times come from std::chrono::steady_clock.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "bench/support/generator.h"
#include "bench/support/program.h"
#include "policy/eviction.h"
#include "policy/model.h"
#include "policy/policy.h"

namespace nodewarden::bench {
namespace {

constexpr std::uint64_t kSeed = 0x6e6f64657761726eULL;  // "nodewarn"

using kubectl::GeneratedSnapshot;
using kubectl::kNodeName;
using kubectl::SnapshotGenerator;

// ---------------------------------------------------------------------------------------------
// Measuring.

// Per size, the full run spends about 2 s on parse, 1 s on the compact parse, 1.5 s on the
// parse split, 2 s on rank+plan and 1 s on evaluateEviction alone, plus smaller parts: about
// 10 s per size, a little more at 10,000 pods where single iterations take seconds.
struct Budgets {
  Budget parse;         // parseSnapshotText on the kubectl text
  Budget parseCompact;  // parseSnapshotText on the compact text
  Budget parseSplit;    // its three steps
  Budget parsePart;     // parsePod, parseSummary, resolvePods, Snapshot destruction alone
  Budget plan;          // makeNodeView + evaluateEviction
  Budget evalOnly;      // evaluateEviction on a prebuilt view
  Budget planExtra;     // makeNodeView alone, other policies
  int warmups;
};

Budgets budgetsFor(bool quick) {
  if (quick) {
    return {{1, 50, 0.3},    {1, 50, 0.2},     {1, 50, 0.2},    {1, 200, 0.1},
            {20, 2000, 0.3}, {20, 2000, 0.15}, {10, 1000, 0.1}, 1};
  }
  return {{1, 200, 2.0},    {1, 200, 1.0},    {1, 200, 1.5},   {1, 1000, 0.4},
          {50, 20000, 2.0}, {50, 20000, 1.0}, {20, 5000, 0.4}, 3};
}

// ---------------------------------------------------------------------------------------------
// One size.

struct Target {
  double rankPlanMicros;  // 0 when the size has no target
};

Target targetFor(int pods) {
  if (pods == 110) return {50};
  if (pods == 1000) return {1000};
  if (pods == 10000) return {15000};
  return {0};
}
constexpr double kParseTargetMBps = 50;

struct SizeResult {
  int pods = 0;
  std::size_t bytes = 0;
  std::size_t compactBytes = 0;
  Samples parse, parseCompact, splitTotal, jsonParse, jsonFree, model, resolve, parsePods,
      parseStats, snapshotFree;
  Samples view, rankPlan, evalOnly, rankPlanDefaults, rankPlanKubelet, rankPlanAll,
      rankPlanWithFree;
  double generateMillis = 0;
};

double mbPerSecond(std::size_t bytes, double nanos) {
  return double(bytes) / nanos * 1e3;
}

policy::Policy benchPolicy() {
  // The shipped example's shape: hard thresholds, a soft memory threshold past its grace
  // period, a minimum reclaim, at most 5 pods per cycle.
  constexpr std::string_view kText = R"({
    "evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%",
                     "nodefs.inodesFree": "5%", "imagefs.available": "15%",
                     "pid.available": "5%"},
    "evictionSoft": {"memory.available": "1Gi"},
    "evictionSoftGracePeriod": {"memory.available": "30s"},
    "evictionMinimumReclaim": {"memory.available": "512Mi"},
    "evictionMaxPodGracePeriod": 30,
    "evictionMaxPodsPerCycle": 5,
    "ranking": "priority"
  })";
  policy::Diagnostics diagnostics;
  auto p = policy::parsePolicyText(kText, diagnostics);
  if (!p) {
    std::fprintf(stderr, "bench policy does not parse:\n%s\n", diagnostics.joined().c_str());
    std::exit(1);
  }
  return *p;
}

constexpr int kLabelWidth = 38;

std::optional<SizeResult> runSize(int podCount, const Budgets& budgets,
                                  const std::string& writeDir) {
  SizeResult r;
  r.pods = podCount;
  std::printf("== %s pods ==\n", withCommas(std::uint64_t(podCount)).c_str());

  const auto genStart = steadyNow();
  GeneratedSnapshot gen = SnapshotGenerator(kSeed ^ std::uint64_t(podCount)).generate(podCount);
  r.generateMillis = nanosSince(genStart) * 1e-6;
  r.bytes = gen.text.size();
  r.compactBytes = gen.compact.size();
  const std::string_view text = gen.text;
  if (!writeDir.empty()) {
    const std::string path = writeDir + "/snapshot-" + std::to_string(podCount) + ".json";
    std::ofstream out(path, std::ios::binary);
    out << gen.text;
    std::printf("  wrote %s%s\n", path.c_str(), out ? "" : " (FAILED)");
  }

  // Check that the snapshot is usable before timing anything.
  policy::Diagnostics diagnostics;
  auto snapshot = policy::parseSnapshotText(text, diagnostics);
  if (!snapshot) {
    std::fprintf(stderr, "generated snapshot (%d pods) does not parse:\n%s\n", podCount,
                 diagnostics.joined().c_str());
    return std::nullopt;
  }
  const policy::Policy policy = benchPolicy();
  const policy::Policy defaults = policy::Policy::defaults();
  policy::Policy kubelet = policy;
  kubelet.ranking = policy::RankingMode::Kubelet;
  const SteadyTime now = SteadyTime{} + std::chrono::hours(24 * 400);
  const policy::EvictionState state = policy::assumeGraceElapsed(policy, now);
  const policy::EvictionState emptyState;

  const policy::NodeView view = policy::makeNodeView(*snapshot, kNodeName);
  const policy::EvictionResult check = policy::evaluateEviction(view, policy, state, now);
  const policy::EvictionResult checkDefaults =
      policy::evaluateEviction(view, defaults, emptyState, now);
  std::size_t withStats = 0;
  for (const auto* ps : view.podStats) withStats += ps != nullptr ? 1 : 0;

  const auto perPod = [&](std::size_t bytes) { return withCommas(bytes / std::size_t(podCount)); };
  std::printf("  snapshot as kubectl prints it (4-space indent): %s bytes, %s bytes/pod\n",
              withCommas(r.bytes).c_str(), perPod(r.bytes).c_str());
  std::printf(
      "  same document compact: %s bytes, %s bytes/pod (pod objects %s/pod, kubelet "
      "stats %s/pod); generated in %.0f ms\n",
      withCommas(r.compactBytes).c_str(), perPod(r.compactBytes).c_str(),
      perPod(gen.podsCompactBytes).c_str(), perPod(gen.statsCompactBytes).c_str(),
      r.generateMillis);
  std::printf("  pods: %d in list, %zu in view (%zu with stats); qos:", gen.podsTotal,
              view.pods.size(), withStats);
  for (const auto& [qos, n] : gen.qosCounts) std::printf(" %s=%d", qos.c_str(), n);
  std::printf("\n  signals met (bench policy):");
  for (const auto& st : check.decision.signals) {
    if (st.met) {
      std::printf(" %s%s(avail %s)", std::string(policy::toString(st.key.signal)).c_str(),
                  st.key.hard ? "<hard" : "<soft", withCommas(std::uint64_t(st.available)).c_str());
    }
  }
  std::printf("\n  plan (bench policy): %zu evictions:", check.decision.evict.size());
  for (const auto& e : check.decision.evict) std::printf(" %s", e.pod->key.c_str());
  std::printf("\n  plan (Policy::defaults()): %zu evictions\n",
              checkDefaults.decision.evict.size());
  if (check.decision.evict.empty() || checkDefaults.decision.evict.empty()) {
    std::fprintf(stderr, "no eviction planned: the generated node is not under pressure\n");
    return std::nullopt;
  }

  // --- parse: the whole call, then its steps.
  // The snapshot is freed outside the timed part. (The generated snapshot gives no
  // diagnostics: the Diagnostics constructed and destroyed in a timed part cost nothing.)
  auto parse = [](std::string_view t) {
    return timed([t] {
      policy::Diagnostics d;
      return policy::parseSnapshotText(t, d);
    });
  };
  r.parse = measure(budgets.parse, parse(text));
  r.parseCompact = measure(budgets.parseCompact, parse(gen.compact));
  gen.compact = std::string();  // not needed any more; keep the footprint down at 10,000 pods
  // The three steps parseSnapshotText takes, timed one after the other in each iteration so
  // that they run under the same conditions and add up to the whole call.
  {
    std::vector<double> parseNs, modelNs, freeNs;
    r.splitTotal = measure(budgets.parseSplit, [&] {
      policy::Diagnostics d;
      const auto t0 = steadyNow();
      std::optional<policy::Json> j = policy::Json::parse(text);
      const auto t1 = steadyNow();
      auto s = policy::parseSnapshot(*j, d);
      const auto t2 = steadyNow();
      j.reset();
      const auto t3 = steadyNow();
      doNotOptimize(s);
      using Nanos = std::chrono::duration<double, std::nano>;
      parseNs.push_back(Nanos(t1 - t0).count());
      modelNs.push_back(Nanos(t2 - t1).count());
      freeNs.push_back(Nanos(t3 - t2).count());
      return Nanos(t3 - t0).count();
    });
    r.jsonParse = Samples::from(std::move(parseNs));
    r.model = Samples::from(std::move(modelNs));
    r.jsonFree = Samples::from(std::move(freeNs));
  }
  const policy::Json document = policy::Json::parse(text);
  r.parsePods =
      measure(budgets.parsePart, timed([&] {
                policy::Diagnostics d;
                std::vector<policy::Pod> pods;
                policy::forEachListItem(document["pods"], "pods", d,
                                        [&](const policy::Json& item, const std::string& path) {
                                          if (auto p = policy::parsePod(item, path, d)) {
                                            pods.push_back(std::move(*p));
                                          }
                                        });
                return pods;
              }));
  r.parseStats = measure(budgets.parsePart, timed([&] {
                           policy::Diagnostics d;
                           return policy::parseSummary(document["stats"][kNodeName], "stats", d);
                         }));
  {
    policy::Snapshot copy = *snapshot;
    r.resolve = measure(budgets.parsePart, timed([&] {
                          policy::resolvePods(copy.pods, copy.priorityClasses);
                          return copy.pods.size();
                        }));
  }
  r.snapshotFree = measure(budgets.parsePart, [&] {
    auto s = std::make_unique<policy::Snapshot>(*snapshot);
    doNotOptimize(*s);
    const auto t0 = steadyNow();
    s.reset();
    return nanosSince(t0);
  });

  // --- rank+plan.
  // The agent's path builds only the rankings the plan needs; explain builds all of them.
  auto rankPlan = [&](const policy::Policy& p, const policy::EvictionState& st,
                      policy::Rankings mode = policy::Rankings::Needed) {
    return [&, pp = &p, sp = &st, mode] {
      std::optional<policy::NodeView> v;
      std::optional<policy::EvictionResult> result;
      const auto t0 = steadyNow();
      v.emplace(policy::makeNodeView(*snapshot, kNodeName));
      result.emplace(policy::evaluateEviction(*v, *pp, *sp, now, mode));
      const double ns = nanosSince(t0);
      doNotOptimize(*result);
      return ns;  // freed outside the timed part
    };
  };
  r.rankPlan = measure(budgets.plan, budgets.warmups, rankPlan(policy, state));
  r.evalOnly =
      measure(budgets.evalOnly, timed([&] {
                return policy::evaluateEviction(view, policy, state, now, policy::Rankings::Needed);
              }));
  r.view =
      measure(budgets.planExtra, timed([&] { return policy::makeNodeView(*snapshot, kNodeName); }));
  r.rankPlanDefaults = measure(budgets.planExtra, rankPlan(defaults, emptyState));
  r.rankPlanKubelet = measure(budgets.planExtra, rankPlan(kubelet, state));
  r.rankPlanAll = measure(budgets.planExtra, rankPlan(policy, state, policy::Rankings::All));
  r.rankPlanWithFree = measure(budgets.planExtra, [&] {
    const auto t0 = steadyNow();
    {
      policy::NodeView v = policy::makeNodeView(*snapshot, kNodeName);
      policy::EvictionResult result =
          policy::evaluateEviction(v, policy, state, now, policy::Rankings::Needed);
      doNotOptimize(result);
      gSink = gSink + result.decision.evict.size();
    }
    return nanosSince(t0);
  });

  // --- per-size detail.
  const double parseNs = r.parse.median();
  std::printf(
      "  parse (parseSnapshotText), kubectl text    median %9.2f ms  p99 %9.2f ms  n=%-3zu "
      "%6.1f MB/s\n",
      parseNs * 1e-6, r.parse.p99() * 1e-6, r.parse.count(), mbPerSecond(r.bytes, parseNs));
  std::printf(
      "  parse (parseSnapshotText), compact text    median %9.2f ms  p99 %9.2f ms  n=%-3zu "
      "%6.1f MB/s\n",
      r.parseCompact.median() * 1e-6, r.parseCompact.p99() * 1e-6, r.parseCompact.count(),
      mbPerSecond(r.compactBytes, r.parseCompact.median()));
  std::printf(
      "   split of the kubectl-text parse (%% of the kubectl-text median above; 1, 2 and 3 are\n"
      "   timed back to back in each iteration, the indented parts alone on a prebuilt DOM):\n");
  printSamplesLine(kLabelWidth, "1 nlohmann::json::parse(text)", r.jsonParse, 1e6, "ms", parseNs);
  printSamplesLine(kLabelWidth, "2 parseSnapshot(json) [model+resolve]", r.model, 1e6, "ms",
                   parseNs);
  printSamplesLine(kLabelWidth, "    parsePod x all pods (alone)", r.parsePods, 1e6, "ms", parseNs);
  printSamplesLine(kLabelWidth, "    parseSummary, the stats (alone)", r.parseStats, 1e6, "ms",
                   parseNs);
  printSamplesLine(kLabelWidth, "    resolvePods (alone)", r.resolve, 1e6, "ms", parseNs);
  printSamplesLine(kLabelWidth, "3 JSON document destruction", r.jsonFree, 1e6, "ms", parseNs);
  printSamplesLine(kLabelWidth, "1+2+3 in one iteration", r.splitTotal, 1e6, "ms", parseNs);
  std::printf("    json::parse alone: %.1f MB/s; model build from the DOM: %.1f us/pod\n",
              mbPerSecond(r.bytes, r.jsonParse.median()),
              r.model.median() * 1e-3 / double(podCount));
  printSamplesLine(kLabelWidth, "(not in parse) Snapshot destruction", r.snapshotFree, 1e6, "ms");
  std::printf("  rank+plan and parts (per call; results are freed outside the timed part):\n");
  printSamplesLine(kLabelWidth, "makeNodeView + evaluateEviction", r.rankPlan, 1e3, "us");
  printSamplesLine(kLabelWidth, "evaluateEviction (view prebuilt)", r.evalOnly, 1e3, "us");
  printSamplesLine(kLabelWidth, "makeNodeView alone", r.view, 1e3, "us");
  printSamplesLine(kLabelWidth, "rank+plan, Policy::defaults()", r.rankPlanDefaults, 1e3, "us");
  printSamplesLine(kLabelWidth, "rank+plan, ranking: kubelet", r.rankPlanKubelet, 1e3, "us");
  printSamplesLine(kLabelWidth, "rank+plan, every ranking (explain)", r.rankPlanAll, 1e3, "us");
  printSamplesLine(kLabelWidth, "rank+plan, freeing view and result too", r.rankPlanWithFree, 1e3,
                   "us");
  std::printf("\n");
  std::fflush(stdout);
  return r;
}

// ---------------------------------------------------------------------------------------------

constexpr const char* kUsage =
    "usage: bench_eviction [--sizes N[,N...]] [--quick] [--write-snapshot DIR] [--help]\n"
    "\n"
    "Times the eviction decision core on synthetic kubectl-shaped snapshots.\n"
    "  --sizes 110,1000   pods per node to run (default 110,1000,10000)\n"
    "  --quick            fewer iterations (smoke run; figures are noisier)\n"
    "  --write-snapshot DIR  also write each generated snapshot to DIR/snapshot-N.json\n"
    "  --help             this text\n"
    "Targets: rank+plan <= 50 us (110 pods), <= 1 ms (1,000), <= 15 ms (10,000);\n"
    "parse >= 50 MB/s. Missed targets print MISS but do not change the exit status.\n";

int run(int argc, char** argv) {
  std::vector<int> sizes = {110, 1000, 10000};
  bool quick = false;
  std::string writeDir;
  Args args(kUsage);
  args.flag("--quick", quick)
      .value("--write-snapshot", "a directory",
             [&](std::string_view v) {
               writeDir = std::string(v);
               return true;
             })
      .value("--sizes", "numbers from 10 to 200000 separated by commas", [&](std::string_view v) {
        auto parsed = parseBoundedList(v, 10, 200'000);
        if (parsed) sizes = *parsed;
        return parsed.has_value();
      });
  if (auto status = args.parse(argc, argv)) return *status;

  const auto start = steadyNow();
  printEnvironment("nodewarden eviction benchmark",
                   "; this binary only (policy/ is compiled with the same flags)", false, false,
                   ", nlohmann_json " + std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                       std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                       std::to_string(NLOHMANN_JSON_VERSION_PATCH));
  std::printf(
      "  mode: %s; single threaded, not pinned; times from steady_clock; MB = 10^6 "
      "bytes\n\n",
      quick ? "--quick" : "full");
  std::fflush(stdout);

  const Budgets budgets = budgetsFor(quick);
  std::vector<SizeResult> results;
  for (int n : sizes) {
    auto r = runSize(n, budgets, writeDir);
    if (!r) return 1;
    results.push_back(std::move(*r));
  }

  std::printf(
      "== summary (verdicts on the median; targets: parse >= %.0f MB/s, rank+plan as "
      "listed; rank+plan = makeNodeView + evaluateEviction with the bench policy; "
      "defaults = the same with Policy::defaults()) ==\n",
      kParseTargetMBps);
  std::printf("%7s | %12s %7s %8s %7s %5s | %8s %7s %5s | %10s %10s %8s %5s | %9s %9s\n", "pods",
              "kubectl B", "B/pod", "parse ms", "MB/s", "", "compact", "MB/s", "", "rank+plan",
              "p99", "target", "", "eval only", "defaults");
  std::printf("%7s | %12s %7s %8s %7s %5s | %8s %7s %5s | %10s %10s %8s %5s | %9s %9s\n", "", "",
              "", "", "", "", "parse ms", "", "", "median us", "us", "us", "", "median us",
              "median us");
  for (const auto& r : results) {
    const double mbps = mbPerSecond(r.bytes, r.parse.median());
    const double compactMbps = mbPerSecond(r.compactBytes, r.parseCompact.median());
    const Target t = targetFor(r.pods);
    const double rp = r.rankPlan.median() * 1e-3;
    char target[32] = "-";
    const char* rpVerdict = "-";
    if (t.rankPlanMicros > 0) {
      std::snprintf(target, sizeof target, "%.0f", t.rankPlanMicros);
      rpVerdict = passOrMiss(rp <= t.rankPlanMicros);
    }
    std::printf(
        "%7s | %12s %7s %8.1f %7.1f %5s | %8.1f %7.1f %5s | %10.1f %10.1f %8s %5s | %9.1f %9.1f\n",
        withCommas(std::uint64_t(r.pods)).c_str(), withCommas(r.bytes).c_str(),
        withCommas(r.bytes / std::size_t(r.pods)).c_str(), r.parse.median() * 1e-6, mbps,
        passOrMiss(mbps >= kParseTargetMBps), r.parseCompact.median() * 1e-6, compactMbps,
        passOrMiss(compactMbps >= kParseTargetMBps), rp, r.rankPlan.p99() * 1e-3, target, rpVerdict,
        r.evalOnly.median() * 1e-3, r.rankPlanDefaults.median() * 1e-3);
  }
  std::printf(
      "\nVerdicts use the median. On a shared VM the medians (and at 10,000 pods even the\n"
      "minima) of the same binary can move by half between runs: run it twice before trusting\n"
      "a PASS/MISS near its target.\n");
  std::printf("\ntotal wall time %.1f s (sink %llu)\n", nanosSince(start) * 1e-9,
              static_cast<unsigned long long>(gSink));
  return 0;
}

}  // namespace
}  // namespace nodewarden::bench

int main(int argc, char** argv) {
  return nodewarden::bench::run(argc, argv);
}
