// node/victims_first.h alone: the decision it makes from the figures last read and a few fresh
// reads is the one evaluateEviction makes from every pod's fresh figures — on nodes churned
// between the two (pods added, removed, growing, shrinking), in both ranking styles, with one
// or several victims a cycle. The figures are served from memory here; tests/node/agent_test
// does the same through the agent on a cgroup tree.
#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <sstream>

#include "node/victims_first.h"
#include "tests/support/memory_pod.h"

using namespace nodewarden;
using namespace nodewarden::node;

namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

// A node's pods and their figures: `last` as the last full read saw them, `now` as a read
// now would. A pod absent from `now` has gone; one absent from `last` is new.
struct Node {
  std::vector<policy::Pod> pods;
  std::map<std::string, std::int64_t> last;  // UID → working set
  std::map<std::string, std::int64_t> now;
  std::map<std::string, std::int64_t> cache;  // UID → inactive file now (usage − working set)
  std::int64_t limit = 2048 * kMiB;           // kubepods' memory limit
  std::int64_t residual = 0;                  // kubepods' usage outside any pod
};

policy::Pod makePod(int index, std::int32_t priority, std::int64_t request) {
  return testing::memoryPod("ns", index, priority, request);
}

// Serves `now` as the agent reads cgroups: whole figures into stable storage, or the usage.
class Reader final : public PodFigureReader {
 public:
  explicit Reader(const Node& node) : node_(node) {}
  Read read(const policy::Pod& pod) override {
    ++whole;
    ++readsOf[pod.uid];
    auto it = node_.now.find(pod.uid);
    if (it == node_.now.end()) return {};
    policy::PodStats& stats = store_.emplace_back();
    stats.uid = pod.uid;
    stats.memoryWorkingSetBytes = std::uint64_t(it->second);
    served[pod.uid] = &stats;
    return {&stats, std::uint64_t(it->second + cacheOf(pod.uid))};
  }
  std::optional<std::uint64_t> usage(const policy::Pod& pod) override {
    ++usages;
    ++readsOf[pod.uid];
    auto it = node_.now.find(pod.uid);
    if (it == node_.now.end()) return std::nullopt;
    return std::uint64_t(it->second + cacheOf(pod.uid));
  }
  int whole = 0;
  int usages = 0;
  std::map<std::string, int> readsOf;                     // whole or usage
  std::map<std::string, const policy::PodStats*> served;  // the last figures read whole

 private:
  std::int64_t cacheOf(const std::string& uid) const {
    auto it = node_.cache.find(uid);
    return it == node_.cache.end() ? 0 : it->second;
  }
  const Node& node_;
  std::deque<policy::PodStats> store_;
};

std::int64_t kubepodsUsage(const Node& node) {
  std::int64_t usage = node.residual;
  for (const auto& [uid, ws] : node.now) {
    usage += ws;
    if (auto it = node.cache.find(uid); it != node.cache.end()) usage += it->second;
  }
  return usage;
}

policy::NodeStats nodeStats(const Node& node) {
  policy::NodeStats stats;
  const std::int64_t usage = kubepodsUsage(node);
  std::int64_t cache = 0;
  for (const auto& [uid, bytes] : node.cache) {
    if (node.now.contains(uid)) cache += bytes;
  }
  const std::int64_t ws = usage - cache;
  stats.podsMemoryWorkingSetBytes = std::uint64_t(ws);
  stats.podsMemoryAvailableBytes = std::uint64_t(std::max<std::int64_t>(0, node.limit - ws));
  return stats;
}

// The view over `pods` with each pod's figures from `figures` (none when absent), pointing
// into `storage`.
policy::NodeView viewOf(const std::vector<const policy::Pod*>& pods,
                        const std::map<std::string, std::int64_t>& figures,
                        const policy::NodeStats& stats, std::deque<policy::PodStats>& storage) {
  policy::NodeView view;
  view.name = "n";
  view.stats = &stats;
  for (const policy::Pod* pod : pods) {
    policy::PodStats& entry = storage.emplace_back();
    entry.uid = pod->uid;
    if (auto it = figures.find(pod->uid); it != figures.end()) {
      entry.memoryWorkingSetBytes = std::uint64_t(it->second);
    }
    view.pods.push_back(pod);
    view.podStats.push_back(&entry);
  }
  policy::assignKeyOrder(view);
  return view;
}

std::string describe(const std::vector<policy::Eviction>& evictions) {
  std::ostringstream out;
  for (const policy::Eviction& e : evictions) {
    out << e.pod->key << " " << policy::toString(e.signal) << (e.hard ? "/hard" : "/soft")
        << " usage=" << e.usage << " request=" << e.request << " grace=" << e.gracePeriodSeconds
        << " [" << e.message << "]\n";
  }
  return out.str();
}

std::string describe(const policy::Ranking& ranking) {
  std::ostringstream out;
  for (const policy::RankedPod& r : ranking.pods) {
    out << r.pod->key << " " << (r.hasUsage ? std::to_string(r.usage) : "-") << " " << r.request
        << (r.evictable ? "" : " not evictable") << " stats=" << r.stats << "\n";
  }
  return out.str();
}

// The same without where the figures are stored (two readers store them apart).
std::string describeFigures(const policy::Ranking& ranking) {
  std::ostringstream out;
  for (const policy::RankedPod& r : ranking.pods) {
    out << r.pod->key << " " << (r.hasUsage ? std::to_string(r.usage) : "-") << " " << r.request
        << (r.evictable ? "" : " not evictable") << (r.stats == nullptr ? " no stats" : "") << "\n";
  }
  return out.str();
}

// The ranking the decision kept, re-placing each pod it read, must be the one a ranking of the
// whole view builds with the figures it read: the stale view, each pod read whole given its
// fresh figures, the pods found gone left out.
void checkRanking(const policy::NodeView& stale, const VictimsFirstDecision& got,
                  const Reader& reader, const policy::Policy& policy) {
  policy::NodeView view;
  view.name = stale.name;
  view.stats = stale.stats;
  for (std::size_t i = 0; i < stale.pods.size(); ++i) {
    const policy::Pod* pod = stale.pods[i];
    if (std::find(got.vanished.begin(), got.vanished.end(), pod->uid) != got.vanished.end()) {
      continue;
    }
    auto served = reader.served.find(pod->uid);
    view.pods.push_back(pod);
    view.podStats.push_back(served == reader.served.end() ? stale.podStats[i] : served->second);
  }
  policy::assignKeyOrder(view);
  CHECK(describe(got.result->decision.memory) ==
        describe(policy::rankMemoryPressure(view, policy)));
}

struct Tally {
  int decided = 0;           // victims first decided alone
  int evicting = 0;          // … and evicted someone
  int fellBack = 0;          // a full scan was needed
  int certifiedByUsage = 0;  // step 3 read usages
  int severalRounds = 0;     // read pods whole in more than one round
  int vanished = 0;          // found a pod gone
  int podsRead = 0;
};

// One churned node: victims first against a full read, same policy, state and time.
void compare(const Node& node, const policy::Policy& policy, Tally& tally) {
  const policy::NodeStats stats = nodeStats(node);
  std::vector<const policy::Pod*> all;
  std::vector<const policy::Pod*> present;
  for (const policy::Pod& pod : node.pods) {
    all.push_back(&pod);
    if (node.now.contains(pod.uid)) present.push_back(&pod);
  }
  std::deque<policy::PodStats> storage;
  // A full scan: every pod still there, read now.
  const policy::NodeView full = viewOf(present, node.now, stats, storage);
  const policy::EvictionState state;
  const SteadyTime at{};
  const policy::EvictionResult expected =
      policy::evaluateEviction(full, policy, state, at, policy::Rankings::Needed);
  // Victims first: the index still lists the pods gone since (their cgroups vanish when
  // read), the figures are the last read's.
  const policy::NodeView stale = viewOf(all, node.last, stats, storage);
  Reader reader(node);
  const VictimsFirstDecision got =
      decideVictimsFirst(stale, std::uint64_t(kubepodsUsage(node)), policy, state, at, reader);
  if (got.fullScan != FullScanReason::None) {
    ++tally.fellBack;
    return;
  }
  REQUIRE(got.result.has_value());
  ++tally.decided;
  if (!expected.decision.evict.empty()) ++tally.evicting;
  if (got.usagesRead > 0) ++tally.certifiedByUsage;
  if (got.rounds > 1) ++tally.severalRounds;
  if (!got.vanished.empty()) ++tally.vanished;
  tally.podsRead += int(got.podsRead);
  checkRanking(stale, got, reader, policy);
  CHECK(describe(got.result->decision.evict) == describe(expected.decision.evict));
  // The same with the ranking of the figures before the last read as the starting order (the
  // agent gives its last decision's): only the cost changes.
  {
    std::map<std::string, std::int64_t> older = node.last;
    for (auto& [uid, ws] : older) ws = ws / 2 + (ws % 7) * kMiB;
    std::deque<policy::PodStats> olderStorage;
    policy::Ranking last =
        policy::rankMemoryPressure(viewOf(all, older, stats, olderStorage), policy);
    Reader again(node);
    VictimsFirstOptions options;
    options.lastRanking = &last;
    const VictimsFirstDecision reused = decideVictimsFirst(
        stale, std::uint64_t(kubepodsUsage(node)), policy, state, at, again, options);
    REQUIRE(reused.result.has_value());
    CHECK(describe(reused.result->decision.evict) == describe(got.result->decision.evict));
    CHECK(describeFigures(reused.result->decision.memory) ==
          describeFigures(got.result->decision.memory));
    CHECK(reused.podsRead == got.podsRead);
    CHECK(reused.usagesRead == got.usagesRead);
  }
  CHECK(got.result->decision.conditions == expected.decision.conditions);
  REQUIRE(got.result->decision.signals.size() == expected.decision.signals.size());
  for (std::size_t i = 0; i < expected.decision.signals.size(); ++i) {
    CHECK(got.result->decision.signals[i].met == expected.decision.signals[i].met);
    CHECK(got.result->decision.signals[i].available == expected.decision.signals[i].available);
  }
}

policy::Policy makePolicy(const std::string& ranking, int maxPods) {
  policy::Diagnostics diagnostics;
  const std::string text = R"({"evictionHard":{"allocatableMemory.available":"300Mi"},)"
                           R"("evictionMaxPodsPerCycle":)" +
                           std::to_string(maxPods) + R"(,"ranking":")" + ranking + R"("})";
  auto policy = policy::parsePolicyText(text, diagnostics);
  REQUIRE_MESSAGE(policy, diagnostics.joined());
  return *policy;
}

// A node of `count` pods with a few priorities and requests, then churned.
Node churnedNode(std::mt19937_64& rng, int count) {
  Node node;
  auto pick = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(rng);
  };
  const std::int32_t priorities[] = {0, 0, 0, 1000, 100000, 2000001000};
  for (int i = 0; i < count; ++i) {
    const std::int32_t priority = priorities[pick(0, 5)];
    const std::int64_t request = pick(0, 3) == 0 ? 0 : pick(1, 64) * kMiB;
    node.pods.push_back(makePod(i, priority, request));
    const std::int64_t ws = pick(0, 40) * kMiB + pick(0, kMiB);
    node.last[node.pods.back().uid] = ws;
    node.now[node.pods.back().uid] = ws;
    if (pick(0, 4) == 0) node.cache[node.pods.back().uid] = pick(0, 20) * kMiB;
  }
  // Churn between the last read and now.
  for (policy::Pod& pod : node.pods) {
    switch (pick(0, 9)) {
      case 0:  // gone
        node.now.erase(pod.uid);
        break;
      case 1:  // grew, sometimes a lot
        node.now[pod.uid] += pick(0, 1) == 0 ? pick(1, 30) * kMiB : pick(100, 600) * kMiB;
        break;
      case 2:  // shrank
        node.now[pod.uid] = node.now[pod.uid] / 3;
        break;
      default:
        break;
    }
  }
  const int added = int(pick(0, 4));
  for (int i = 0; i < added; ++i) {  // new pods, never read
    node.pods.push_back(makePod(count + i, priorities[pick(0, 4)], pick(0, 1) * 16 * kMiB));
    node.now[node.pods.back().uid] = pick(0, 300) * kMiB;
  }
  policy::resolvePods(node.pods, {});
  // kubepods' limit just above or below its working set, so thresholds are met or not.
  node.residual = pick(0, 1) == 0 ? 0 : pick(0, 64) * kMiB;
  node.limit = nodeStats(node).podsMemoryWorkingSetBytes.value() + pick(-200, 500) * kMiB;
  return node;
}

}  // namespace

TEST_CASE("victims first decides as a full read does, on churned nodes") {
  std::mt19937_64 rng(0x76696374696d73ULL);  // "victims"
  Tally tally;
  for (int round = 0; round < 400; ++round) {
    const int pods = round % 4 == 0 ? 300 : 5 + int(round % 40);
    Node node = churnedNode(rng, pods);
    const policy::Policy policy =
        makePolicy(round % 2 == 0 ? "priority" : "kubelet", 1 + round % 5);
    CAPTURE(round);
    compare(node, policy, tally);
  }
  MESSAGE("decided alone " << tally.decided << " (evicting in " << tally.evicting
                           << ", certified by usage reads in " << tally.certifiedByUsage
                           << ", in several rounds " << tally.severalRounds
                           << ", finding pods gone " << tally.vanished << "), fell back "
                           << tally.fellBack << ", pods read " << tally.podsRead);
  // The comparison ran, and on nodes that evict: not a vacuous pass.
  CHECK(tally.certifiedByUsage > 0);
  CHECK(tally.severalRounds > 0);
  CHECK(tally.vanished > 0);
  CHECK(tally.decided > 0);
  CHECK(tally.evicting > 0);
}

TEST_CASE("a quiet node is decided from the node's figures alone") {
  std::mt19937_64 rng(1);
  Node node = churnedNode(rng, 50);
  node.limit = 64 * 1024 * kMiB;  // far from any threshold
  const policy::Policy policy = makePolicy("priority", 5);
  const policy::NodeStats stats = nodeStats(node);
  std::vector<const policy::Pod*> all;
  for (const policy::Pod& pod : node.pods) all.push_back(&pod);
  std::deque<policy::PodStats> storage;
  Reader reader(node);
  const VictimsFirstDecision got = decideVictimsFirst(
      viewOf(all, node.last, stats, storage), std::nullopt, policy, {}, SteadyTime{}, reader);
  REQUIRE(got.result);
  CHECK(got.result->decision.evict.empty());
  CHECK(reader.whole == 0);
  CHECK(reader.usages == 0);
}

TEST_CASE("a pod that grew unseen past the victim is caught, and a bounded one is not read") {
  // Three priority-0 pods without requests rank by working set. Last read: a 300 MiB, b 100,
  // c 10. Now b has grown to 500 MiB. 100 MiB must go.
  Node node;
  for (int i = 0; i < 3; ++i) node.pods.push_back(makePod(i, 0, 0));
  node.pods.push_back(makePod(3, 1000, 0));  // higher priority: never before them
  policy::resolvePods(node.pods, {});
  node.last = {
      {"uid-0", 300 * kMiB}, {"uid-1", 100 * kMiB}, {"uid-2", 10 * kMiB}, {"uid-3", 900 * kMiB}};
  node.now = node.last;
  node.now["uid-1"] = 500 * kMiB;
  node.limit = 300 * kMiB + 500 * kMiB + 10 * kMiB + 900 * kMiB + 200 * kMiB;  // 200 available
  const policy::Policy policy = makePolicy("priority", 1);
  Tally tally;
  compare(node, policy, tally);
  REQUIRE(tally.decided == 1);

  const policy::NodeStats stats = nodeStats(node);
  std::vector<const policy::Pod*> all;
  for (const policy::Pod& pod : node.pods) all.push_back(&pod);
  std::deque<policy::PodStats> storage;
  VictimsFirstOptions options;
  options.lookahead = 0;  // read only the victims, so the bound has work to do
  Reader reader(node);
  const VictimsFirstDecision got =
      decideVictimsFirst(viewOf(all, node.last, stats, storage), std::uint64_t(kubepodsUsage(node)),
                         policy, {}, SteadyTime{}, reader, options);
  REQUIRE(got.result);
  REQUIRE(got.result->decision.evict.size() == 1);
  CHECK(got.result->decision.evict[0].pod->name == "pod-1");  // the one that grew
  CHECK(got.result->decision.evict[0].usage == 500 * kMiB);
  // pod-0, the last read's victim, and pod-1 were read whole; pod-2's usage kept it behind;
  // pod-3 (priority 1000) could never rank before them and was not read at all.
  CHECK(reader.readsOf["uid-0"] == 1);
  CHECK(reader.readsOf["uid-1"] == 2);  // its usage, then whole
  CHECK(reader.readsOf["uid-2"] == 1);
  CHECK(reader.readsOf["uid-3"] == 0);
}

TEST_CASE("thresholds of other resources, and swap in the ranking, are left to a full scan") {
  Node node;
  node.pods.push_back(makePod(0, 0, 0));
  policy::resolvePods(node.pods, {});
  node.last = node.now = {{"uid-0", 100 * kMiB}};
  policy::Diagnostics diagnostics;
  auto pids = policy::parsePolicyText(R"({"evictionHard":{"pid.available":"99%"}})", diagnostics);
  REQUIRE(pids);
  policy::NodeStats stats = nodeStats(node);
  stats.maxPid = 1000;
  stats.curProc = 500;
  std::vector<const policy::Pod*> all{&node.pods[0]};
  std::deque<policy::PodStats> storage;
  Reader reader(node);
  const VictimsFirstDecision other = decideVictimsFirst(
      viewOf(all, node.last, stats, storage), std::nullopt, *pids, {}, SteadyTime{}, reader);
  CHECK((other.fullScan == FullScanReason::OtherResource));
  CHECK_FALSE(other.result);

  auto swap = policy::parsePolicyText(
      R"({"evictionHard":{"allocatableMemory.available":"300Mi"},"memoryRankingCountsSwap":true})",
      diagnostics);
  REQUIRE(swap);
  node.limit = 200 * kMiB;
  const policy::NodeStats tight = nodeStats(node);
  const VictimsFirstDecision swapped = decideVictimsFirst(
      viewOf(all, node.last, tight, storage), std::nullopt, *swap, {}, SteadyTime{}, reader);
  CHECK((swapped.fullScan == FullScanReason::SwapRanked));
}

namespace {

// Five pods: four of priority 0 without requests (ranked by working set), one of priority
// 1000 (never before them); 150 MiB to free, one pod a cycle, the pods read only as victims
// (no lookahead) so that each round reads one.
struct Small {
  Node node;
  std::deque<policy::PodStats> storage;
  policy::NodeStats stats;
  std::vector<const policy::Pod*> all;
  policy::NodeView stale;  // the figures as last read
  policy::Policy policy;

  explicit Small(const std::map<std::string, std::int64_t>& last,
                 const std::map<std::string, std::int64_t>& now, int lookahead = 0)
      : lookahead_(lookahead) {
    for (int i = 0; i < 4; ++i) node.pods.push_back(makePod(i, 0, 0));
    node.pods.push_back(makePod(4, 1000, 0));
    policy::resolvePods(node.pods, {});
    node.last = last;
    node.now = now;
    std::int64_t ws = 0;
    for (const auto& [uid, bytes] : now) ws += bytes;
    node.limit = ws + 150 * kMiB;  // 150 available against 300: 150 to free
    stats = nodeStats(node);
    for (const policy::Pod& pod : node.pods) all.push_back(&pod);
    stale = viewOf(all, node.last, stats, storage);
    policy = makePolicy("priority", 1);
  }

  VictimsFirstDecision decide(Reader& reader) {
    VictimsFirstOptions options;
    options.lookahead = lookahead_;
    return decideVictimsFirst(stale, std::uint64_t(kubepodsUsage(node)), policy, {}, SteadyTime{},
                              reader, options);
  }

  std::vector<std::string> ranked(const VictimsFirstDecision& got) const {
    std::vector<std::string> names;
    for (const auto& r : got.result->decision.memory.pods) names.push_back(r.pod->name);
    return names;
  }

 private:
  int lookahead_;
};

}  // namespace

TEST_CASE("victims that shrank since their last read are re-placed, round after round") {
  // Last read: pod-0 300 MiB, pod-1 250, pod-2 200, pod-3 100. Now pod-0 and pod-1 hold 10
  // MiB each: each read as the victim drops behind, until pod-2 (200 ≥ 150) is read as it was.
  Small small({{"uid-0", 300 * kMiB},
               {"uid-1", 250 * kMiB},
               {"uid-2", 200 * kMiB},
               {"uid-3", 100 * kMiB},
               {"uid-4", 900 * kMiB}},
              {{"uid-0", 10 * kMiB},
               {"uid-1", 10 * kMiB},
               {"uid-2", 200 * kMiB},
               {"uid-3", 100 * kMiB},
               {"uid-4", 900 * kMiB}});
  Tally tally;
  compare(small.node, small.policy, tally);
  REQUIRE(tally.decided == 1);

  Reader reader(small.node);
  const VictimsFirstDecision got = small.decide(reader);
  REQUIRE(got.result);
  REQUIRE(got.result->decision.evict.size() == 1);
  CHECK(got.result->decision.evict[0].pod->name == "pod-2");
  CHECK(got.result->decision.evict[0].usage == 200 * kMiB);
  CHECK(got.rounds == 3);
  CHECK(got.podsRead == 3);
  // pod-3's bound (what kubepods holds beyond the pods read) could put it before pod-2: its
  // usage was read, and keeps it behind. pod-4's priority keeps it behind whatever it uses.
  CHECK(got.usagesRead == 1);
  CHECK(reader.readsOf["uid-3"] == 1);
  CHECK(reader.readsOf["uid-4"] == 0);
  // The two that shrank, at their fresh figures; ties (10 MiB each) by key.
  CHECK(small.ranked(got) == std::vector<std::string>{"pod-2", "pod-3", "pod-0", "pod-1", "pod-4"});
  checkRanking(small.stale, got, reader, small.policy);
}

TEST_CASE("a pod read with the victim that grew past it becomes the victim") {
  // pod-0 is the victim as last read (300 MiB); pod-1, read with it (lookahead), now holds
  // 500 MiB: it moves before pod-0 and alone covers the 150 MiB.
  Small small({{"uid-0", 300 * kMiB},
               {"uid-1", 100 * kMiB},
               {"uid-2", 50 * kMiB},
               {"uid-3", 10 * kMiB},
               {"uid-4", 900 * kMiB}},
              {{"uid-0", 300 * kMiB},
               {"uid-1", 500 * kMiB},
               {"uid-2", 50 * kMiB},
               {"uid-3", 10 * kMiB},
               {"uid-4", 900 * kMiB}},
              /*lookahead=*/1);
  Tally tally;
  compare(small.node, small.policy, tally);
  REQUIRE(tally.decided == 1);

  Reader reader(small.node);
  const VictimsFirstDecision got = small.decide(reader);
  REQUIRE(got.result);
  REQUIRE(got.result->decision.evict.size() == 1);
  CHECK(got.result->decision.evict[0].pod->name == "pod-1");
  CHECK(got.result->decision.evict[0].usage == 500 * kMiB);
  CHECK(got.rounds == 1);
  CHECK(small.ranked(got) == std::vector<std::string>{"pod-1", "pod-0", "pod-2", "pod-3", "pod-4"});
  checkRanking(small.stale, got, reader, small.policy);
}

TEST_CASE("a victim whose cgroup vanished leaves the ranking, and the next pod is chosen") {
  Small small({{"uid-0", 300 * kMiB},
               {"uid-1", 200 * kMiB},
               {"uid-2", 100 * kMiB},
               {"uid-3", 10 * kMiB},
               {"uid-4", 900 * kMiB}},
              {// pod-0 is gone
               {"uid-1", 200 * kMiB},
               {"uid-2", 100 * kMiB},
               {"uid-3", 10 * kMiB},
               {"uid-4", 900 * kMiB}});
  Tally tally;
  compare(small.node, small.policy, tally);
  REQUIRE(tally.decided == 1);

  Reader reader(small.node);
  const VictimsFirstDecision got = small.decide(reader);
  REQUIRE(got.result);
  CHECK(got.vanished == std::vector<std::string>{"uid-0"});
  REQUIRE(got.result->decision.evict.size() == 1);
  CHECK(got.result->decision.evict[0].pod->name == "pod-1");
  CHECK(got.rounds == 2);
  CHECK(small.ranked(got) == std::vector<std::string>{"pod-1", "pod-2", "pod-3", "pod-4"});
  checkRanking(small.stale, got, reader, small.policy);
}

TEST_CASE("a ranking started from an earlier one's order is the one a sort builds") {
  // policy::rankMemoryPressure with `reuse` (the agent passes its last decision's ranking):
  // the same pods with a few figures changed, many changed, pods added or gone (the earlier
  // order is then not used), the other style's order; both styles, pods that may not be
  // evicted, pods without figures, ties, a terminating pod.
  std::mt19937_64 rng(0x7265757365);  // "reuse"
  auto pick = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(rng);
  };
  std::vector<policy::Pod> pods;
  const std::int32_t priorities[] = {0, 0, 1000, 100000, 2000001000};
  for (int i = 0; i < 150; ++i) {
    pods.push_back(makePod(i, priorities[pick(0, 4)], pick(0, 2) == 0 ? 0 : pick(1, 8) * kMiB));
  }
  pods[11].terminating = true;
  policy::resolvePods(pods, {});
  std::deque<policy::PodStats> storage;
  policy::NodeStats stats;
  auto figures = [&]() -> const policy::PodStats* {
    if (pick(0, 9) == 0) return nullptr;
    policy::PodStats& entry = storage.emplace_back();
    if (pick(0, 9) != 0) entry.memoryWorkingSetBytes = std::uint64_t(pick(0, 6) * 4 * kMiB);
    return &entry;
  };
  policy::NodeView view;
  view.name = "n";
  view.stats = &stats;
  for (const policy::Pod& pod : pods) {
    view.pods.push_back(&pod);
    view.podStats.push_back(figures());
  }
  policy::assignKeyOrder(view);
  const policy::Policy priority = makePolicy("priority", 5);
  const policy::Policy kubelet = makePolicy("kubelet", 5);
  policy::Ranking kept = policy::rankMemoryPressure(view, priority);
  int repaired = 0;
  for (int step = 0; step < 400; ++step) {
    CAPTURE(step);
    const policy::Policy& policy = step % 50 < 40 ? priority : kubelet;
    policy::NodeView now = view;
    switch (pick(0, 5)) {
      case 0:  // nothing moved
        break;
      case 1:  // every figure anew
        for (auto& entry : now.podStats) entry = figures();
        break;
      case 2: {  // a pod gone
        const std::int64_t gone = pick(0, std::int64_t(now.pods.size()) - 1);
        now.pods.erase(now.pods.begin() + gone);
        now.podStats.erase(now.podStats.begin() + gone);
        policy::assignKeyOrder(now);
        break;
      }
      default:  // a few pods read again
        for (int n = int(pick(1, 4)); n > 0; --n) {
          now.podStats[std::size_t(pick(0, std::int64_t(now.pods.size()) - 1))] = figures();
        }
        break;
    }
    const std::string fresh = describe(policy::rankMemoryPressure(now, policy));
    const bool samePods = kept.pods.size() + 1 == now.pods.size();  // pod 11 is never ranked
    policy::Ranking reused = policy::rankMemoryPressure(now, policy, &kept);
    REQUIRE(describe(reused) == fresh);
    if (samePods) ++repaired;
    if (now.pods.size() == view.pods.size()) {
      view = now;
      kept = std::move(reused);
    } else {
      kept = policy::rankMemoryPressure(view, policy);
    }
  }
  CHECK(repaired > 200);  // the earlier order was used, not only refused
  // A ranking of other pods is not used, and the result is still the sort's.
  policy::NodeView half = view;
  half.pods.resize(half.pods.size() / 2);
  half.podStats.resize(half.pods.size());
  policy::assignKeyOrder(half);
  policy::Ranking other = policy::rankMemoryPressure(half, priority);
  std::reverse(other.pods.begin(), other.pods.end());
  other.pods.resize(kept.pods.size(), other.pods.front());
  CHECK(describe(policy::rankMemoryPressure(view, priority, &other)) ==
        describe(policy::rankMemoryPressure(view, priority)));
}

TEST_CASE("re-placing pods one by one keeps the ranking a full ranking builds") {
  // The ranking victims first keeps (policy::rerankMemoryPressure) against
  // policy::rankMemoryPressure over the changed view: both styles, pods that may not be
  // evicted, pods without figures, ties.
  std::mt19937_64 rng(0x72616e6b);  // "rank"
  auto pick = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(rng);
  };
  for (const char* style : {"priority", "kubelet"}) {
    CAPTURE(style);
    const policy::Policy policy = makePolicy(style, 5);
    std::vector<policy::Pod> pods;
    const std::int32_t priorities[] = {0, 0, 1000, 100000, 2000001000};
    for (int i = 0; i < 120; ++i) {
      pods.push_back(makePod(i, priorities[pick(0, 4)], pick(0, 2) == 0 ? 0 : pick(1, 8) * kMiB));
    }
    pods[7].terminating = true;  // on its way out: in no ranking
    policy::resolvePods(pods, {});
    std::deque<policy::PodStats> storage;
    policy::NodeStats stats;
    policy::NodeView view;
    view.name = "n";
    view.stats = &stats;
    // Working sets from a few values, so that ties on usage are common.
    auto figures = [&]() -> const policy::PodStats* {
      if (pick(0, 9) == 0) return nullptr;
      policy::PodStats& entry = storage.emplace_back();
      if (pick(0, 9) != 0) entry.memoryWorkingSetBytes = std::uint64_t(pick(0, 6) * 4 * kMiB);
      return &entry;
    };
    for (const policy::Pod& pod : pods) {
      view.pods.push_back(&pod);
      view.podStats.push_back(figures());
    }
    policy::assignKeyOrder(view);
    policy::Ranking kept = policy::rankMemoryPressure(view, policy);
    for (int step = 0; step < 300; ++step) {
      CAPTURE(step);
      const std::size_t at = std::size_t(pick(0, std::int64_t(pods.size()) - 1));
      view.podStats[at] = figures();
      CHECK(policy::rerankMemoryPressure(kept, pods[at], view.podStats[at], policy) == (at != 7));
      REQUIRE(describe(kept) == describe(policy::rankMemoryPressure(view, policy)));
    }
  }
}
