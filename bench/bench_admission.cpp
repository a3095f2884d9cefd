// bench_admission: how fast the admission and preemption core (docs/reference.md §5-§6) decides,
// on policy::Snapshot objects generated with a fixed seed (clusterCase, bench/support/generator.h:
// full nodes, PodDisruptionBudgets of which some allow no disruption). It times
//   admitPod        one admission on one node of 110, 1,000 and 5,000 bound pods (by default)
//                   that ends in a preempt verdict (priority 500,000, several victims needed);
//   selectVictims   selectVictimsOnNode on that node, and selectVictimsOnNodeNaive (a full re-fit
//                   per reprieve, roughly cubic: its first call runs in a child process stopped
//                   after --naive-cap seconds) for the speedup;
//   preemptCluster  over 100 nodes x 110 pods and 1,000 nodes x 50, every node a candidate;
//                   buildClusterIndex apart.
// The naive and incremental selections must agree (victims, order, PDB violations) on every
// generated node (variants per size, every node of each cluster), else exit status 3; a case
// without the intended verdict exits with 1, bad arguments with 2; a missed target prints MISS
// only. Single threaded (the naive child runs while this process waits); times from
// std::chrono::steady_clock.

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "bench/support/generator.h"
#include "bench/support/report.h"
#include "policy/admission.h"
#include "policy/policy.h"

namespace nodewarden::bench {
namespace {

constexpr std::uint64_t kSeed = 0x61646d6974706f64ULL;  // "admitpod"

// About 40 s in all: per node size 1 s on admitPod, 0.6 s alone, up to 2 s on the naive
// selection after its capped first call (about 20 s at 5,000 pods), up to 2 s of variants;
// 3-5 s per cluster shape with its generation and cross-check.
struct Budgets {
  Budget admit, select, naive, index, cluster;
  double naiveCap;        // seconds for one naive call before it is stopped
  int variants;           // extra generated nodes cross-checked per size at most ...
  double variantSeconds;  // ... and as many as the naive selection runs in this time
  int warmups;
};
constexpr Budgets kFull{
    {50, 20000, 1}, {50, 20000, 0.6}, {3, 2000, 2}, {5, 1000, 0.5}, {5, 1000, 2.5}, 25, 12, 2, 3};
constexpr Budgets kQuick{
    {20, 2000, 0.15}, {20, 2000, 0.1}, {1, 50, 0.2}, {2, 100, 0.1}, {2, 100, 0.4}, 3.0, 4, 0.5, 1};

// Issue 23's targets (the first ones were 10 us, 100 us and 100 ms).
double targetOf(int nodes, int podsPerNode) {
  const std::map<std::pair<int, int>, double> targets = {
      {{1, 110}, 5}, {{1, 1000}, 50}, {{1000, 50}, 25}};
  return targets.count({nodes, podsPerNode}) ? targets.at({nodes, podsPerNode}) : 0;
}

// The timed mix first, then the variants' (cross-checked only).
const Mix kMixes[] = {{0.25, 0.3, 4000, 8 * kGi, 0.0}, {0.60, 0.3, 2500, 5 * kGi, 0.0},
                      {1.00, 1.0, 6000, 2 * kGi, 0.0}, {0.90, 0.5, 1500, 1 * kGi, 0.0},
                      {0.10, 0.3, 500, 8 * kGi, 0.0},  {0.95, 0.8, 4000, 12 * kGi, 0.0}};

bool gMismatch = false;  // a cross-check mismatch: exit status 3

// "fits, N PDB violation(s), victims [a, b, ...]"
std::string describe(const policy::VictimSelection& s) {
  std::string out = std::string(s.fits ? "fits" : "does not fit") + ", " +
                    std::to_string(s.numPDBViolations) + " PDB violation(s), victims [";
  for (const policy::Pod* p : s.victims) out += (p == s.victims[0] ? "" : ", ") + p->key;
  return out + "]";
}

// Compares two selections; prints both after `where` when they differ and records the mismatch.
void crossCheck(const policy::VictimSelection& fast, const policy::VictimSelection& naive,
                const std::string& where) {
  if (fast.fits == naive.fits && fast.numPDBViolations == naive.numPDBViolations &&
      fast.victims == naive.victims) {
    return;
  }
  std::printf("  MISMATCH on %s: incremental %s; naive %s\n", where.c_str(), describe(fast).c_str(),
              describe(naive).c_str());
  gMismatch = true;
}

// selectVictimsOnNode on `node`, cross-checked against selectVictimsOnNodeNaive.
policy::VictimSelection checkedSelection(const Case& c, const policy::NodeInfo& node,
                                         const policy::Policy& rules, const std::string& where) {
  const auto& pdbs = c.snapshot.podDisruptionBudgets;
  auto fast = policy::selectVictimsOnNode(c.incoming, node, pdbs, rules);
  crossCheck(fast, policy::selectVictimsOnNodeNaive(c.incoming, node, pdbs, rules), where);
  return fast;
}

struct NaiveRun {
  bool finished = false;
  double nanos = 0;
  std::string note;  // why it did not finish
};

// selectVictimsOnNodeNaive once in a forked child, killed by SIGALRM after `capSeconds`, which
// cross-checks it against `fast` itself (a mismatch: exit status 3) and writes its time into a
// shared mapping.
NaiveRun runNaiveCapped(const Case& c, const policy::NodeInfo& node, const policy::Policy& rules,
                        const policy::VictimSelection& fast, double capSeconds) {
  void* shared =
      ::mmap(nullptr, sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return {false, 0, "mmap failed"};
  auto* nanos = static_cast<double*>(shared);
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(unsigned(capSeconds));
    const SteadyTime t0 = steadyNow();
    const policy::VictimSelection naive =
        policy::selectVictimsOnNodeNaive(c.incoming, node, c.snapshot.podDisruptionBudgets, rules);
    *nanos = nanosSince(t0);
    crossCheck(fast, naive, "the timed case");
    std::fflush(stdout);
    ::_exit(gMismatch ? 3 : 0);
  }
  int status = 0;
  while (pid > 0 && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  NaiveRun out{pid > 0 && (exit == 0 || exit == 3), *nanos, ""};
  if (pid > 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
    out.note = "> " + std::to_string(int(capSeconds)) + " s";
  } else if (!out.finished) {
    out.note = pid < 0 ? "fork failed" : "child failed";
  }
  gMismatch = gMismatch || exit == 3;
  ::munmap(shared, sizeof(double));
  return out;
}

struct NodeResult {
  int pods = 0, checked = 0;  // checked: nodes on which naive and incremental were compared
  Samples admit, select, naive;
  NaiveRun first;  // the capped first naive call
};

std::optional<NodeResult> runNode(int podCount, const Budgets& b, const policy::Policy& rules) {
  NodeResult r;
  r.pods = podCount;
  std::printf("== one node, %s pods ==\n", withCommas(std::uint64_t(podCount)).c_str());
  const SteadyTime genStart = steadyNow();
  auto c = clusterCase(kSeed + std::uint64_t(podCount), kMixes[0], 1, podCount);
  const double genMillis = nanosSince(genStart) * 1e-6;
  const policy::NodeInfo& node = c->index.nodes[0];
  const auto& pdbs = c->snapshot.podDisruptionBudgets;

  std::vector<const policy::Pod*> potential, violating, nonViolating;
  for (const policy::Pod* p : node.pods) {
    if (!p->terminating && !p->critical && p->priority < c->incoming.priority) {
      potential.push_back(p);
    }
  }
  policy::filterPodsWithPdbViolation(potential, pdbs, violating, nonViolating);
  std::printf(
      "  generated in %.1f ms: %zu bound active pods (%zu potential victims), %zu nominated, "
      "%zu PDBs (%zu potential victims would violate one)\n",
      genMillis, node.pods.size(), potential.size(), node.nominated.size(), pdbs.size(),
      violating.size());

  // The decision, checked once.
  const auto d = policy::admitPod(c->incoming, node, pdbs, rules);
  const auto fast = policy::selectVictimsOnNode(c->incoming, node, pdbs, rules);
  std::printf(
      "  admitPod: %s (%s), %zu victims, %d PDB violation(s), %zu nomination(s) to "
      "clear\n    %s\n",
      policy::verdictName(d.verdict), d.reason.c_str(), d.victims.size(), d.numPDBViolations,
      d.nominatedPodsToClear.size(), d.message.c_str());
  if (d.verdict != policy::Verdict::Preempt || d.victims.size() < 3) {
    std::fprintf(stderr, "generated case does not need several victims: no figures\n");
    return std::nullopt;
  }
  std::vector<const policy::Pod*> byKey = fast.victims;
  std::sort(byKey.begin(), byKey.end(), [](auto* x, auto* y) { return x->key < y->key; });
  if (byKey != d.victims || fast.numPDBViolations != d.numPDBViolations) {
    std::printf("  MISMATCH admitPod victims differ from selectVictimsOnNode's\n");
    gMismatch = true;
  }

  // The first naive call, capped; it also cross-checks the timed case.
  r.first = runNaiveCapped(*c, node, rules, fast, b.naiveCap);
  r.checked += r.first.finished;
  r.admit = measure(b.admit, b.warmups,
                    timed([&] { return policy::admitPod(c->incoming, node, pdbs, rules); }));
  r.select =
      measure(b.select, b.warmups,
              timed([&] { return policy::selectVictimsOnNode(c->incoming, node, pdbs, rules); }));
  // More naive calls only when a few fit in the budget; else the single call is the figure.
  r.naive.nanos = {r.first.nanos};
  if (r.first.finished && r.first.nanos * 1e-9 * b.naive.minIterations <= b.naive.seconds) {
    r.naive = measure(b.naive, timed([&] {
                        return policy::selectVictimsOnNodeNaive(c->incoming, node, pdbs, rules);
                      }));
  }

  // More generated nodes of this size, cycling through the other mixes, cross-checked while
  // the naive selection is cheap.
  const int variants =
      r.first.finished ? int(std::min<double>(b.variants, b.variantSeconds * 1e9 / r.first.nanos))
                       : 0;
  for (int v = 1; v <= variants; ++v) {
    const Mix& mix = kMixes[1 + std::size_t(v - 1) % (std::size(kMixes) - 1)];
    auto vc =
        clusterCase(kSeed + std::uint64_t(podCount) * 7919 + std::uint64_t(v), mix, 1, podCount);
    checkedSelection(*vc, vc->index.nodes[0], rules, "variant " + std::to_string(v));
    ++r.checked;
  }
  std::printf(
      "  cross-check naive == incremental (fits, victims in order, PDB violations): %d "
      "node(s)%s\n\n",
      r.checked,
      gMismatch       ? ", MISMATCH (see above)"
      : r.checked > 0 ? ", all equal"
                      : " (the naive selection was stopped: not cross-checked)");
  std::fflush(stdout);
  return r;
}

struct ClusterResult {
  int nodes = 0, podsPerNode = 0, checked = 0;
  Samples index, decide;
};

std::optional<ClusterResult> runCluster(int nodes, int podsPerNode, const Budgets& b,
                                        const policy::Policy& rules) {
  ClusterResult r;
  r.nodes = nodes;
  r.podsPerNode = podsPerNode;
  std::printf("== cluster, %s nodes x %s pods ==\n", withCommas(std::uint64_t(nodes)).c_str(),
              withCommas(std::uint64_t(podsPerNode)).c_str());
  Mix mix = kMixes[0];
  mix.taintedNodes = 0.05;  // tainted GPU nodes the incoming pod tolerates
  const SteadyTime genStart = steadyNow();
  auto c = clusterCase(kSeed ^ (std::uint64_t(nodes) << 20 | std::uint64_t(podsPerNode)), mix,
                       nodes, podsPerNode);
  const double genMillis = nanosSince(genStart) * 1e-6;
  const auto& pdbs = c->snapshot.podDisruptionBudgets;
  std::printf("  generated in %.0f ms: %s pods in the snapshot, %zu nodes, %zu PDBs\n", genMillis,
              withCommas(c->snapshot.pods.size()).c_str(), c->index.nodes.size(), pdbs.size());

  // The decision, checked once: no node fits as it is, every node is a candidate, and on every
  // node the incremental and the naive selections agree.
  const auto d = policy::preemptCluster(c->incoming, c->index, pdbs, rules);
  if (d.node == nullptr || d.candidates.size() + 1 != c->index.nodes.size()) {
    std::fprintf(stderr, "not every node is a candidate (%s): the cluster is not full\n",
                 d.reason.c_str());
    return std::nullopt;
  }
  std::printf(
      "  preemptCluster: node %s, %zu victims, %d PDB violation(s), %zu candidate nodes, "
      "%zu nomination(s) to clear\n",
      d.node->name.c_str(), d.victims.size(), d.numPDBViolations, d.candidates.size() + 1,
      d.nominatedPodsToClear.size());
  for (const auto& n : c->index.nodes) {
    const auto a = checkedSelection(*c, n, rules, "node " + n.node->name);
    ++r.checked;
    if (n.node == d.node && a.victims != d.victims) {
      std::printf("  MISMATCH preemptCluster's victims differ from selectVictimsOnNode's\n");
      gMismatch = true;
    }
  }
  std::printf("  cross-check naive == incremental on every node: %d node(s), %s\n\n", r.checked,
              gMismatch ? "MISMATCH (see above)" : "all equal");
  r.index = measure(b.index, 1, timed([&] { return policy::buildClusterIndex(c->snapshot); }));
  r.decide =
      measure(b.cluster, 1,
              timed([&] { return policy::preemptCluster(c->incoming, c->index, pdbs, rules); }));
  std::fflush(stdout);
  return r;
}

constexpr const char* kUsage =
    "usage: bench_admission [--sizes N[,N...]] [--clusters NxP[,NxP...]] [--naive-cap S]\n"
    "                       [--quick] [--help]\n"
    "\n"
    "Times admission with preemption and cluster preemption on synthetic snapshots.\n"
    "  --sizes 110,1000,5000     pods on the node for admitPod and victim selection\n"
    "                            (default 110,1000,5000)\n"
    "  --clusters 100x110,1000x50  nodes x pods per node for preemptCluster\n"
    "                            (default 100x110,1000x50)\n"
    "  --naive-cap S             stop one naive victim selection after S seconds\n"
    "                            (default 25, 3 with --quick)\n"
    "  --quick                   fewer iterations (smoke run; figures are noisier)\n"
    "  --help                    this text\n"
    "Targets: admitPod <= 5 us (110 pods), <= 50 us (1,000 pods); preemptCluster <= 25 ms\n"
    "(1,000 nodes x 50 pods). Missed targets print MISS but do not change the exit status.\n"
    "Exit status: 0; 1 when a generated case does not have the intended shape; 2 on bad\n"
    "arguments; 3 when the naive and the incremental victim selections ever differ.\n";

int run(int argc, char** argv) {
  std::vector<int> sizes = {110, 1000, 5000};
  std::vector<std::pair<int, int>> clusters = {{100, 110}, {1000, 50}};
  int naiveCap = 0;  // seconds, 0: the budget's
  bool quick = false;
  Args args(kUsage);
  args.flag("--quick", quick)
      .numbers("--sizes", sizes, 20, 100'000)
      .number("--naive-cap", naiveCap, 1, 3600)
      .value("--clusters",
             "NODESxPODS items (pods >= 20, at most 2,000,000 pods in all) separated by commas",
             [&](std::string_view v) {
               clusters.clear();
               return forEachItem(v, [&](std::string_view item) {
                 const auto x = item.find('x');
                 auto n = parseBounded(item.substr(0, x), 1, 20'000);
                 auto p =
                     x == item.npos ? std::nullopt : parseBounded(item.substr(x + 1), 20, 10'000);
                 if (n && p && std::int64_t(*n) * *p <= 2'000'000) clusters.push_back({*n, *p});
                 return n && p && std::int64_t(*n) * *p <= 2'000'000;
               });
             });
  if (auto status = args.parse(argc, argv)) return *status;

  const SteadyTime start = steadyNow();
  printEnvironment("nodewarden admission benchmark",
                   "; this binary only (policy/ is compiled with the same flags)", true, false);
  Budgets b = quick ? kQuick : kFull;
  if (naiveCap > 0) b.naiveCap = naiveCap;
  std::printf(
      "  mode: %s; single threaded, not pinned; times from steady_clock; policy: "
      "Policy::defaults(); naive cap %.0f s\n\n",
      quick ? "--quick" : "full", b.naiveCap);
  const policy::Policy rules = policy::Policy::defaults();
  std::vector<NodeResult> nodeResults;
  for (int n : sizes) {
    auto r = runNode(n, b, rules);
    if (!r) return 1;
    nodeResults.push_back(std::move(*r));
  }
  std::vector<ClusterResult> clusterResults;
  for (const auto& [nodes, pods] : clusters) {
    auto r = runCluster(nodes, pods, b, rules);
    if (!r) return 1;
    clusterResults.push_back(std::move(*r));
  }

  std::printf("== summary (verdicts on the median; one core) ==\n");
  std::printf("%-34s | %12s %12s %12s | %10s %5s\n", "", "median", "p99", "min", "target", "");
  auto row = [](const std::string& label, const Samples& x, double scale, const char* unit,
                double target) {
    const std::string t = target > 0 ? std::to_string(int(target)) + " " + unit : "-";
    std::printf("%-34s | %9.2f %s %9.2f %s %9.2f %s | %10s %5s\n", label.c_str(),
                x.median() / scale, unit, x.p99() / scale, unit, x.min() / scale, unit, t.c_str(),
                target > 0 ? passOrMiss(x.median() / scale <= target) : "-");
  };
  auto shape = [](int n, int p) {
    return withCommas(std::uint64_t(n)) + " x " + withCommas(std::uint64_t(p));
  };
  for (const auto& r : nodeResults) {
    row("admitPod, " + withCommas(std::uint64_t(r.pods)) + " pods", r.admit, 1e3, "us",
        targetOf(1, r.pods));
  }
  for (const auto& r : clusterResults) {
    row("preemptCluster, " + shape(r.nodes, r.podsPerNode), r.decide, 1e6, "ms",
        targetOf(r.nodes, r.podsPerNode));
    row("  buildClusterIndex, " + shape(r.nodes, r.podsPerNode), r.index, 1e6, "ms", 0);
  }
  std::printf("\n%-34s | %12s %16s %9s | %s\n", "victim selection, medians", "incremental", "naive",
              "speedup", "naive == incremental");
  for (const auto& r : nodeResults) {
    char naive[48], speedup[32];
    const double m = r.naive.median();
    if (!r.first.finished) {
      std::snprintf(naive, sizeof naive, "skipped, %s", r.first.note.c_str());
      std::snprintf(speedup, sizeof speedup, "> %.0fx", b.naiveCap * 1e9 / r.select.median());
    } else {
      std::snprintf(naive, sizeof naive, m >= 1e9 ? "%11.2f s" : "%10.1f us",
                    m * (m >= 1e9 ? 1e-9 : 1e-3));
      std::snprintf(speedup, sizeof speedup, "%8.1fx", m / r.select.median());
    }
    std::printf("%-34s | %9.2f us %16s %9s | %d node(s) checked\n",
                (withCommas(std::uint64_t(r.pods)) + " pods").c_str(), r.select.median() * 1e-3,
                naive, speedup, r.checked);
  }
  for (const auto& r : clusterResults) {
    std::printf("%-34s | %40s | %d node(s) checked\n",
                (shape(r.nodes, r.podsPerNode) + " cluster").c_str(), "", r.checked);
  }
  std::printf("\ncross-check: %s\n",
              gMismatch ? "MISMATCH between naive and incremental victim selection (exit 3)"
                        : "naive and incremental victim selection agree everywhere");
  std::printf(
      "\nVerdicts use the median. On a shared VM the medians of the same binary can move "
      "by\nhalf between runs: run it twice before trusting a PASS/MISS near its target.\n");
  std::printf("\ntotal wall time %.1f s; load average at the end %s\n", nanosSince(start) * 1e-9,
              loadAverage().c_str());
  return gMismatch ? 3 : 0;
}

}  // namespace
}  // namespace nodewarden::bench

int main(int argc, char** argv) {
  return nodewarden::bench::run(argc, argv);
}
