// bench_eviction: how fast the eviction decision core turns a snapshot into a plan. Per node size,
// one node under memory pressure (kubectlSnapshot, bench/support/generator.h) as kubectl indents
// it and compact as the API server sends it: policy::parseSnapshotText on both, and makeNodeView +
// evaluateEviction ("rank+plan") as the agent runs it and building every ranking (as `explain`
// does). Options, targets, exit statuses: kUsage.
#include <fstream>

#include "bench/support/generator.h"
#include "bench/support/report.h"
#include "policy/eviction.h"
#include "policy/policy.h"

using namespace nodewarden;
using namespace nodewarden::bench;

namespace {

constexpr std::uint64_t kSeed = 0x6e6f64657761726eULL;  // "nodewarn"
constexpr double kParseTargetMBps = 50;

// About 6 s per size in all (more at 10,000 pods, where one parse takes seconds).
struct Budgets {
  Budget parse, parseCompact, plan, planExtra;
  int warmups;
};
constexpr Budgets kFull{{1, 200, 2.0}, {1, 200, 1.0}, {50, 20000, 2.0}, {20, 5000, 0.4}, 3};
constexpr Budgets kQuick{{1, 50, 0.3}, {1, 50, 0.2}, {20, 2000, 0.3}, {10, 1000, 0.1}, 1};

// The shipped example's shape: hard thresholds, a soft memory threshold past its grace period,
// a minimum reclaim, at most 5 pods per cycle.
constexpr std::string_view kPolicy = R"({"evictionHard": {"memory.available": "100Mi",
    "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%",
    "pid.available": "5%"}, "evictionSoft": {"memory.available": "1Gi"},
    "evictionSoftGracePeriod": {"memory.available": "30s"}, "evictionMaxPodGracePeriod": 30,
    "evictionMinimumReclaim": {"memory.available": "512Mi"}, "evictionMaxPodsPerCycle": 5,
    "ranking": "priority"})";

// Appends its summary row to `rows`; false when the snapshot does not parse or yields no plan.
bool runSize(int podCount, const Budgets& b, const policy::Policy& policy,
             const std::string& writeDir, std::vector<std::string>& rows) {
  std::printf("== %s pods ==\n", withCommas(std::uint64_t(podCount)).c_str());
  KubectlSnapshot gen = kubectlSnapshot(kSeed ^ std::uint64_t(podCount), podCount);
  const std::string_view text = gen.text, node = gen.nodeName;
  const std::size_t bytes = gen.text.size(), compactBytes = gen.compact.size();
  if (!writeDir.empty()) {
    const std::string path = writeDir + "/snapshot-" + std::to_string(podCount) + ".json";
    std::ofstream out(path, std::ios::binary);
    std::printf("  wrote %s%s\n", path.c_str(), out << gen.text ? "" : " (FAILED)");
  }
  // The snapshot must parse and make a plan before anything is timed.
  policy::Diagnostics diagnostics;
  auto snapshot = policy::parseSnapshotText(text, diagnostics);
  if (!snapshot) {
    std::fprintf(stderr, "generated snapshot does not parse:\n%s\n", diagnostics.joined().c_str());
    return false;
  }
  const SteadyTime now = SteadyTime{} + std::chrono::hours(24 * 400);
  const policy::EvictionState state = policy::assumeGraceElapsed(policy, now);
  const auto check =
      policy::evaluateEviction(policy::makeNodeView(*snapshot, node), policy, state, now);
  std::printf("  compact: %s bytes, %s bytes/pod; plan (bench policy): %zu evictions\n",
              withCommas(compactBytes).c_str(),
              withCommas(compactBytes / std::size_t(podCount)).c_str(),
              check.decision.evict.size());
  if (check.decision.evict.empty()) {
    std::fprintf(stderr, "no eviction planned: the generated node is not under pressure\n");
    return false;
  }
  auto parse = [](std::string_view t) {
    return timed([t] {
      policy::Diagnostics d;
      return policy::parseSnapshotText(t, d);
    });
  };
  const double parseNs = measure(b.parse, parse(text)).median();
  const double compactNs = measure(b.parseCompact, parse(gen.compact)).median();
  gen.compact = std::string();  // keeps the footprint down at 10,000 pods
  // rank+plan: the agent's path builds only the rankings the plan needs; explain builds all.
  auto rankPlan = [&](policy::Rankings mode) {
    return [&, mode] {
      std::optional<policy::NodeView> v;
      std::optional<policy::EvictionResult> result;
      const SteadyTime t0 = steadyNow();
      v.emplace(policy::makeNodeView(*snapshot, node));
      result.emplace(policy::evaluateEviction(*v, policy, state, now, mode));
      gSink = gSink + result->decision.evict.size();
      return nanosSince(t0);  // the view and the result are freed outside the timed part
    };
  };
  const Samples plan = measure(b.plan, b.warmups, rankPlan(policy::Rankings::Needed));
  printSamplesLine(38, "makeNodeView + evaluateEviction", plan, 1e3, "us");
  printSamplesLine(38, "rank+plan, every ranking (explain)",
                   measure(b.planExtra, rankPlan(policy::Rankings::All)), 1e3, "us");
  std::printf("\n");
  std::fflush(stdout);
  const double mbps = double(bytes) / parseNs * 1e3, rp = plan.median() * 1e-3;
  const double compactMbps = double(compactBytes) / compactNs * 1e3;
  const int target = podCount == 110 ? 50 : podCount == 1000 ? 1000 : podCount == 10000 ? 15000 : 0;
  char row[256];
  std::snprintf(row, sizeof row,
                "%7s | %12s %7s %8.1f %7.1f %5s | %8.1f %7.1f %5s | %10.1f %10.1f %8s %5s",
                withCommas(std::uint64_t(podCount)).c_str(), withCommas(bytes).c_str(),
                withCommas(bytes / std::size_t(podCount)).c_str(), parseNs * 1e-6, mbps,
                passOrMiss(mbps >= kParseTargetMBps), compactNs * 1e-6, compactMbps,
                passOrMiss(compactMbps >= kParseTargetMBps), rp, plan.p99() * 1e-3,
                target > 0 ? std::to_string(target).c_str() : "-",
                target > 0 ? passOrMiss(rp <= target) : "-");
  rows.push_back(row);
  return true;
}

constexpr const char* kUsage =
    "usage: bench_eviction [--sizes N,...] [--quick] [--write-snapshot DIR]\n"
    "Times the eviction decision core on synthetic kubectl-shaped snapshots.\n"
    "  --sizes           pods per node to run (default 110,1000,10000)\n"
    "  --quick           fewer iterations (smoke run; figures are noisier)\n"
    "  --write-snapshot  also write each generated snapshot to DIR/snapshot-N.json\n"
    "Targets: rank+plan <= 50 us (110 pods), <= 1 ms (1,000), <= 15 ms (10,000); parse >= 50\n"
    "MB/s; a miss prints MISS and leaves the exit status 0. Exit status 1 when the snapshot\n"
    "or the policy does not parse or yields no plan, 2 on bad arguments.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {110, 1000, 10000};
  bool quick = false;
  std::string writeDir;
  Args args(kUsage);
  args.flag("--quick", quick)
      .numbers("--sizes", sizes, 10, 200'000)
      .value("--write-snapshot", "a directory",
             [&](std::string_view v) { return !(writeDir = std::string(v)).empty(); });
  if (auto status = args.parse(argc, argv)) return *status;
  printEnvironment(
      "nodewarden eviction benchmark",
      "; this binary only (policy/ is compiled with the same flags)", false, false,
      ", nlohmann_json " + nlohmann::json::meta()["version"]["string"].get<std::string>());
  std::printf("\n");
  policy::Diagnostics diagnostics;
  const auto rules = policy::parsePolicyText(kPolicy, diagnostics);
  if (!rules) {
    std::fprintf(stderr, "the bench policy does not parse:\n%s\n", diagnostics.joined().c_str());
    return 1;
  }
  std::vector<std::string> rows;  // the summary's, printed at the end
  for (int n : sizes) {
    if (!runSize(n, quick ? kQuick : kFull, *rules, writeDir, rows)) return 1;
  }
  std::printf("== summary (verdicts on the median; targets as in --help; MB = 10^6 bytes) ==\n");
  const char* kHeader = "%7s | %12s %7s %8s %7s %5s | %8s %7s %5s | %10s %10s %8s %5s\n";
  std::printf(kHeader, "pods", "kubectl B", "B/pod", "parse ms", "MB/s", "", "compact", "MB/s", "",
              "rank+plan", "p99", "target", "");
  std::printf(kHeader, "", "", "", "", "", "", "parse ms", "", "", "median us", "us", "us", "");
  for (const std::string& row : rows) std::printf("%s\n", row.c_str());
  return 0;
}
