// The agent's loop in-process, on a cgroup v2 tree written by the test (a fixture directory,
// not real cgroups) and a recording actuator: which pods it orders evicted, that a pod in
// flight is never chosen twice, that no second victim is chosen for a signal until the first
// one's cgroup is empty, policy reloads, and the HTTP routes.
#include <doctest/doctest.h>

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <thread>

#include <random>

#include "node/agent.h"
#include "node/agent_metrics.h"
#include "node/eviction_journal.h"
#include "node/routes.h"
#include "server/log.h"
#include "tests/support/cgroup_tree.h"

using namespace nodewarden;
using namespace nodewarden::node;
using namespace nodewarden::server;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A cgroup v2 root with a kubepods cgroup limited to 1 GiB, and /proc figures.
struct Tree {
  fs::path root;
  fs::path proc;
  fs::path manifests;
  fs::path policyFile;

  Tree() {
    char pattern[] = "/tmp/nodewarden-agent-test-XXXXXX";
    root = ::mkdtemp(pattern);
    proc = root / "proc";
    manifests = root / "manifests";
    policyFile = root / "policy.json";
    write(root / "cg/cgroup.controllers", "cpu memory pids\n");
    write(root / "cg/kubepods/cgroup.controllers", "cpu memory pids\n");
    write(root / "cg/kubepods/memory.max", std::to_string(1024 * kMiB) + "\n");
    write(proc / "meminfo",
          "MemTotal: 8388608 kB\nMemFree: 4194304 kB\nMemAvailable: 6291456 kB\nInactive(file): 0 "
          "kB\n");
    write(proc / "sys/kernel/pid_max", "4194304\n");
    fs::create_directories(manifests);
    setKubepods(0);
  }
  ~Tree() {
    std::error_code ignored;
    fs::remove_all(root, ignored);
  }
  fs::path cg() const { return root / "cg"; }

  void setKubepods(std::int64_t usage) {
    write(cg() / "kubepods/memory.current", std::to_string(usage) + "\n");
    write(cg() / "kubepods/memory.stat",
          "anon " + std::to_string(usage) + "\nfile 0\ninactive_file 0\n");
  }
  fs::path tier(const std::string& qos) const {
    return cg() / "kubepods" / (qos == "guaranteed" ? "" : qos);
  }
  // A pod cgroup with `usage` bytes; a manifest unless `withManifest` is false.
  void addPod(const std::string& name, const std::string& uid, const std::string& qos, int priority,
              std::int64_t usage, const std::string& requestMemory, bool withManifest = true) {
    setUsage(uid, qos, usage);
    if (!withManifest) return;
    std::string resources =
        requestMemory.empty() ? "{}" : R"({"requests":{"memory":")" + requestMemory + R"("}})";
    write(manifests / (name + ".json"), R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" +
                                            name + R"(","namespace":"default","uid":")" + uid +
                                            R"("},"spec":{"priority":)" + std::to_string(priority) +
                                            R"(,"containers":[{"name":"c","resources":)" +
                                            resources + "}]}}");
  }
  // The pod's figures change (its files rewritten).
  void setUsage(const std::string& uid, const std::string& qos, std::int64_t usage) {
    testing::materialize(testing::podV2(uid, testing::podFiles(usage)), tier(qos));
  }
  void removePod(const std::string& name, const std::string& uid, const std::string& qos) {
    fs::remove_all(tier(qos) / ("pod" + uid));
    fs::remove(manifests / (name + ".json"));
  }
};

struct Harness {
  boost::asio::io_context io;
  RecordingActuator* recorder = nullptr;
  std::unique_ptr<Agent> agent;
  RouteOptions routes;

  Harness(const Tree& tree, const std::string& policyText, bool dryRun = false,
          bool admissionRoutes = true, std::optional<std::string> journal = std::nullopt,
          std::optional<int> loopNice = std::nullopt,
          std::optional<int> loopRealtime = std::nullopt) {
    write(tree.policyFile, policyText);
    policy::Diagnostics diagnostics;
    auto policy = policy::parsePolicyText(policyText, diagnostics);
    REQUIRE(policy);
    cgroups::DiscoverOptions discover;
    discover.root = tree.cg().string();
    discover.useLibcgroup = false;
    auto hierarchy = cgroups::discoverHierarchy(discover);
    REQUIRE(hierarchy);
    AgentOptions options;
    options.nodeName = "node-1";
    options.policyPath = tree.policyFile.string();
    options.scan.procRoot = tree.proc.string();
    options.scan.nodeFsPath = "";
    options.notifications = false;
    options.systemdNotify = false;
    options.dryRun = dryRun;
    routes.admissionRoutes = admissionRoutes;
    options.journalPath = journal;
    options.loopNice = loopNice;
    options.loopRealtime = loopRealtime;
    agent = std::make_unique<Agent>(
        io, options, *policy, cgroups::PodCgroups(*hierarchy, "kubepods"),
        std::make_unique<StaticPodSource>(tree.manifests.string(), "node-1"),
        [this](boost::asio::io_context&, cgroups::PodCgroups&,
               const Clock&) -> std::unique_ptr<Actuator> {
          auto made = std::make_unique<RecordingActuator>(false);
          recorder = made.get();
          return made;
        });
    REQUIRE(agent->start());
    io.poll();
  }
  ~Harness() {
    agent->stop();
    io.poll();
  }
  // A request to the agent's routes, as run.cpp's HTTP server hands it over.
  HttpResponse serve(const HttpRequest& request) { return serveAgent(*agent, routes, request); }
  std::vector<std::string> ordered() const {
    std::vector<std::string> pods;
    for (const EvictionOrder& order : recorder->orders()) pods.push_back(order.pod);
    return pods;
  }
};

const char* kPolicy =
    R"({"evictionHard":{"allocatableMemory.available":"100Mi"},"evictionMaxPodsPerCycle":5})";

}  // namespace

TEST_CASE("the agent orders the policy's victims and never chooses a terminating pod twice") {
  configureLogging(LogFormat::Text, LogLevel::Error);
  Tree tree;
  // 1 GiB allocatable; 960 MiB used: 64 MiB available, 36 MiB short of the 100 MiB threshold.
  tree.addPod("critical-ish", "00000000-0000-4000-8000-000000000001", "burstable", 100000,
              400 * kMiB, "500Mi");
  tree.addPod("batch", "00000000-0000-4000-8000-000000000002", "burstable", 0, 300 * kMiB, "100Mi");
  tree.addPod("scratch", "00000000-0000-4000-8000-000000000003", "besteffort", 0, 20 * kMiB, "");
  tree.addPod("web", "00000000-0000-4000-8000-000000000004", "burstable", 1000, 240 * kMiB,
              "300Mi");
  tree.setKubepods(960 * kMiB);
  Harness h(tree, kPolicy);

  // Lowest priority first, then usage over request (a zero request is infinitely over): the
  // shortest prefix covering 36 MiB is scratch (20) + batch (300).
  CHECK(h.ordered() == std::vector<std::string>{"default/scratch", "default/batch"});
  CHECK(h.recorder->orders()[0].threshold.hard);
  CHECK(h.recorder->orders()[0].gracePeriodSeconds == 0);
  CHECK(h.recorder->orders()[0].message.starts_with("The node was low on resource: memory."));

  // Still under pressure, but both are terminating: nothing new for the same signal.
  h.agent->cycle(Trigger::Manual);
  CHECK(h.recorder->orders().size() == 2);

  // scratch's cgroup empties; batch is still exiting: still no new victim.
  h.recorder->complete("00000000-0000-4000-8000-000000000003");
  h.io.poll();
  CHECK(h.recorder->orders().size() == 2);

  // Both done, memory still short (the files did not change): the next victims come from
  // the pods left, never the evicted ones.
  h.recorder->complete("00000000-0000-4000-8000-000000000002");
  h.io.poll();  // runs the cycle the completion asked for
  REQUIRE(h.recorder->orders().size() == 3);
  CHECK(h.recorder->orders()[2].pod == "default/web");

  // /v1/state is the explain JSON: the evicted and terminating pods are not in the ranking.
  HttpResponse state = h.serve({"GET", "/v1/state", "", {}});
  CHECK(state.status == 200);
  auto json = policy::Json::parse(state.body);
  CHECK(json["node"] == "node-1");
  CHECK(json["conditions"][0] == "MemoryPressure");
  for (const auto& pod : json["ranking"]["memory"]) {
    CHECK(pod != "default/scratch");
    CHECK(pod != "default/batch");
  }
  const std::string metrics = h.agent->metricsText();
  CHECK(metrics.find("nodewarden_evictions_total{signal=\"allocatableMemory.available\",reason="
                     "\"hard-threshold\"} 3") != std::string::npos);
  CHECK(metrics.find("nodewarden_eviction_latency_seconds_count 3") != std::string::npos);
  CHECK(metrics.find("nodewarden_node_condition{condition=\"MemoryPressure\"} 1") !=
        std::string::npos);
}

TEST_CASE("pod cgroups without a manifest rank as priority 0; critical pods are never ordered") {
  configureLogging(LogFormat::Text, LogLevel::Error);
  Tree tree;
  tree.addPod("node-agent", "00000000-0000-4000-8000-00000000000a", "burstable", 2000001000,
              900 * kMiB, "100Mi");
  tree.addPod("ghost", "00000000-0000-4000-8000-00000000000b", "besteffort", 0, 50 * kMiB, "",
              false);
  tree.setKubepods(950 * kMiB);
  Harness h(tree, kPolicy);
  // Only the unknown pod can be evicted; the critical one is left even though pressure stays.
  CHECK(h.ordered() == std::vector<std::string>{"unknown/00000000-0000-4000-8000-00000000000b"});
  h.recorder->complete("00000000-0000-4000-8000-00000000000b");
  h.io.poll();
  h.agent->cycle(Trigger::Manual);
  CHECK(h.recorder->orders().size() == 1);
}

TEST_CASE("dry run decides and logs but hands nothing to an actuator that acts") {
  configureLogging(LogFormat::Text, LogLevel::Error);
  Tree tree;
  tree.addPod("batch", "00000000-0000-4000-8000-000000000002", "besteffort", 0, 980 * kMiB, "");
  tree.setKubepods(980 * kMiB);
  boost::asio::io_context io;
  write(tree.policyFile, kPolicy);
  policy::Diagnostics diagnostics;
  auto policy = policy::parsePolicyText(kPolicy, diagnostics);
  cgroups::DiscoverOptions discover;
  discover.root = tree.cg().string();
  discover.useLibcgroup = false;
  AgentOptions options;
  options.nodeName = "node-1";
  options.scan.procRoot = tree.proc.string();
  options.scan.nodeFsPath = "";
  options.notifications = false;
  options.systemdNotify = false;
  options.dryRun = true;
  Agent agent(
      io, options, *policy, cgroups::PodCgroups(*cgroups::discoverHierarchy(discover), "kubepods"),
      std::make_unique<StaticPodSource>(tree.manifests.string(), "node-1"), dryRunActuator());
  REQUIRE(agent.start());
  io.poll();
  REQUIRE(agent.evictions().size() == 1);
  CHECK(agent.evictions()[0].order.dryRun);
  CHECK(agent.metricsText().find(
            "nodewarden_dry_run_evictions_total{signal=\"allocatableMemory.available\"} 1") !=
        std::string::npos);
  // Logged once per pod per 30 s, not every cycle.
  agent.cycle(Trigger::Manual);
  CHECK(agent.evictions().size() == 1);
  agent.stop();
  io.poll();
}

TEST_CASE("a bad policy file is rejected and the last good policy kept; a good one applies") {
  configureLogging(LogFormat::Text, LogLevel::Error);
  Tree tree;
  tree.addPod("web", "00000000-0000-4000-8000-000000000004", "burstable", 1000, 100 * kMiB,
              "300Mi");
  tree.setKubepods(100 * kMiB);
  Harness h(tree, kPolicy);
  const auto thresholds = h.agent->policy().thresholds.size();
  write(tree.policyFile, R"({"evictionHard":{"allocatableMemory.available":"9x"},"bogus":1})");
  CHECK_FALSE(h.agent->reloadPolicy());
  CHECK(h.agent->policy().thresholds.size() == thresholds);
  CHECK(h.agent->metricsText().find("nodewarden_policy_reloads_total{result=\"rejected\"} 1") !=
        std::string::npos);
  write(
      tree.policyFile,
      R"({"evictionHard":{"allocatableMemory.available":"200Mi","memory.available":"1Gi"},"housekeepingInterval":"2s"})");
  CHECK(h.agent->reloadPolicy());
  CHECK(h.agent->policy().thresholds.size() == 2);
  CHECK(h.agent->policy().housekeepingInterval == std::chrono::seconds(2));
  // A change to the file is picked up by the next cycle without SIGHUP.
  write(tree.policyFile, R"({"evictionHard":{"allocatableMemory.available":"300Mi"}})");
  h.agent->cycle(Trigger::Manual);
  CHECK(h.agent->policy().thresholds.size() == 1);
}

TEST_CASE("HTTP routes answer as docs/reference.md §7 says, and bad requests get JSON errors") {
  configureLogging(LogFormat::Text, LogLevel::Error);
  Tree tree;
  tree.addPod("web", "00000000-0000-4000-8000-000000000004", "burstable", 1000, 100 * kMiB,
              "300Mi");
  tree.setKubepods(100 * kMiB);
  Harness h(tree, kPolicy);
  CHECK(h.serve({"GET", "/healthz", "", {}}).status == 200);
  CHECK(h.serve({"GET", "/readyz", "", {}}).status == 200);
  HttpResponse metrics = h.serve({"GET", "/metrics", "", {}});
  CHECK(metrics.status == 200);
  CHECK(metrics.contentType.starts_with("text/plain; version=0.0.4"));
  CHECK(h.serve({"POST", "/healthz", "", {}}).status == 405);
  CHECK(h.serve({"GET", "/nope", "", {}}).status == 404);
  HttpResponse bad = h.serve({"POST", "/v1/admit", "{not json", {}});
  CHECK(bad.status == 400);
  CHECK(policy::Json::parse(bad.body).contains("error"));
  const std::string pod =
      R"({"metadata":{"name":"new","namespace":"default","uid":"u-new"},"spec":{"priority":10,)"
      R"("containers":[{"name":"c","resources":{"requests":{"memory":"100Mi","cpu":"100m"}}}]}})";
  HttpResponse admitted = h.serve({"POST", "/v1/admit", pod, {}});
  REQUIRE(admitted.status == 200);
  CHECK(policy::Json::parse(admitted.body)["verdict"] == "admit");
  const std::string huge =
      R"({"metadata":{"name":"huge","namespace":"default","uid":"u-huge"},"spec":{"priority":10,)"
      R"("containers":[{"name":"c","resources":{"requests":{"memory":"64Gi"}}}]}})";
  HttpResponse rejected = h.serve({"POST", "/v1/admit", huge, {}});
  REQUIRE(rejected.status == 200);
  CHECK(policy::Json::parse(rejected.body)["verdict"] != "admit");
}

TEST_CASE("docs/reference.md §7: without --admission-routes the routes that can evict are 404") {
  configureLogging(LogFormat::Text, LogLevel::Error);
  Tree tree;
  tree.addPod("web", "00000000-0000-4000-8000-000000000005", "burstable", 1000, 100 * kMiB,
              "300Mi");
  tree.setKubepods(100 * kMiB);
  Harness h(tree, kPolicy, /*dryRun=*/false, /*admissionRoutes=*/false);
  const std::string pod =
      R"({"metadata":{"name":"new","namespace":"default","uid":"u-new"},"spec":{"priority":10,)"
      R"("containers":[{"name":"c","resources":{"requests":{"memory":"100Mi"}}}]}})";
  HttpResponse admit = h.serve({"POST", "/v1/admit", pod, {}});
  CHECK(admit.status == 404);
  CHECK(policy::Json::parse(admit.body)["error"].get<std::string>().find("--admission-routes") !=
        std::string::npos);
  CHECK(h.serve({"POST", "/v1/admission-review", "{}", {}}).status == 404);
  // Everything else is served as before.
  CHECK(h.serve({"GET", "/healthz", "", {}}).status == 200);
  CHECK(h.serve({"GET", "/v1/state", "", {}}).status == 200);
}

TEST_CASE("log lines: logfmt text and JSON lines carry the decision's fields") {
  const std::string text = formatEvent(LogFormat::Text, "evict",
                                       {{"pod", "default/web"},
                                        {"signal", "memory.available"},
                                        {"available", std::int64_t(62914560)},
                                        {"reason", "The node was low on resource: memory."}});
  CHECK(
      text ==
      R"(evict pod=default/web signal=memory.available available=62914560 reason="The node was low on resource: memory.")");
  const std::string json = formatEvent(LogFormat::Json, "evict",
                                       {{"pod", "a\"b"}, {"latency_ms", 1.5}, {"dry_run", true}});
  CHECK(json == R"({"event":"evict","pod":"a\"b","latency_ms":1.500,"dry_run":true})");
  CHECK(policy::Json::parse(json)["pod"] == "a\"b");

  // Bytes that are not UTF-8 (from the network) become U+FFFD, well-formed UTF-8 is kept, and
  // text lines quote anything non-ASCII: every line stays valid, no raw byte gets through.
  const std::string odd = "a\xff\xc0\xaf\xed\xa0\x80z \xc3\xa9";
  const std::string oddJson = formatEvent(LogFormat::Json, "http-problem", {{"target", odd}});
  CHECK(oddJson ==
        "{\"event\":\"http-problem\",\"target\":\"a\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffdz "
        "\xc3\xa9\"}");
  CHECK(policy::Json::parse(oddJson)["target"] ==
        "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz \xc3\xa9");
  CHECK(formatEvent(LogFormat::Text, "x", {{"target", "\xff"}}) == "x target=\"\\ufffd\"");
}

TEST_CASE("an eviction journal that cannot be written (a full disk) never stops an eviction") {
  configureLogging(LogFormat::Text, LogLevel::Error);
  Tree tree;
  tree.addPod("batch", "00000000-0000-4000-8000-000000000002", "burstable", 0, 300 * kMiB, "100Mi");
  tree.setKubepods(960 * kMiB);
  write(tree.root / "not-a-dir", "a file where the journal's directory should be");
  Harness h(tree, kPolicy, false, true, (tree.root / "not-a-dir" / "evictions.json").string());
  CHECK(h.ordered() == std::vector<std::string>{"default/batch"});
  h.recorder->complete("00000000-0000-4000-8000-000000000002");
  h.io.poll();
  REQUIRE(h.agent->evictions().size() == 1);
  REQUIRE(h.agent->evictions()[0].outcome.has_value());
  CHECK(h.agent->evictions()[0].outcome->emptied);
}

TEST_CASE("the eviction journal holds an order until its pod is gone") {
  configureLogging(LogFormat::Text, LogLevel::Error);
  Tree tree;
  tree.addPod("batch", "00000000-0000-4000-8000-000000000002", "burstable", 0, 300 * kMiB, "100Mi");
  tree.setKubepods(960 * kMiB);
  const std::string journal = (tree.root / "state" / "evictions.json").string();
  Harness h(tree, kPolicy, false, true, journal);
  REQUIRE(h.ordered() == std::vector<std::string>{"default/batch"});
  EvictionJournal reader(journal);
  auto held = reader.load();
  REQUIRE(held);
  REQUIRE(held->size() == 1);
  CHECK((*held)[0].order.uid == "00000000-0000-4000-8000-000000000002");
  CHECK((*held)[0].order.pod == "default/batch");
  CHECK((*held)[0].order.threshold.hard);
  CHECK((*held)[0].killAt == (*held)[0].orderedAt);  // a hard threshold: no grace
  h.recorder->complete("00000000-0000-4000-8000-000000000002");
  h.io.poll();
  auto after = reader.load();
  REQUIRE(after);
  CHECK(after->empty());
}

TEST_CASE("the journal is written after the first signal, and holds every order of the decision") {
  configureLogging(LogFormat::Text, LogLevel::Error);
  Tree tree;
  tree.addPod("scratch", "00000000-0000-4000-8000-000000000003", "besteffort", 0, 20 * kMiB, "");
  tree.addPod("batch", "00000000-0000-4000-8000-000000000002", "burstable", 0, 300 * kMiB, "100Mi");
  tree.setKubepods(960 * kMiB);
  const std::string journal = (tree.root / "state" / "evictions.json").string();
  // At each order, the moment the first signal would go out: nothing of the decision is on
  // disk yet (no fsync before the kill).
  std::vector<std::size_t> journaledAtOrder;
  write(tree.policyFile, kPolicy);
  policy::Diagnostics diagnostics;
  auto policy = policy::parsePolicyText(kPolicy, diagnostics);
  REQUIRE(policy);
  cgroups::DiscoverOptions discover;
  discover.root = tree.cg().string();
  discover.useLibcgroup = false;
  AgentOptions options;
  options.nodeName = "node-1";
  options.scan.procRoot = tree.proc.string();
  options.scan.nodeFsPath = "";
  options.notifications = false;
  options.systemdNotify = false;
  options.journalPath = journal;
  boost::asio::io_context io;
  RecordingActuator* recorder = nullptr;
  Agent agent(io, options, *policy,
              cgroups::PodCgroups(*cgroups::discoverHierarchy(discover), "kubepods"),
              std::make_unique<StaticPodSource>(tree.manifests.string(), "node-1"),
              [&](boost::asio::io_context&, cgroups::PodCgroups&,
                  const Clock&) -> std::unique_ptr<Actuator> {
                auto made = std::make_unique<RecordingActuator>(false);
                made->onOrder = [&journal, &journaledAtOrder](const EvictionOrder&) {
                  auto held = EvictionJournal(journal).load();
                  journaledAtOrder.push_back(held ? held->size() : 0);
                };
                recorder = made.get();
                return made;
              });
  REQUIRE(agent.start());
  io.poll();
  REQUIRE(recorder->orders().size() == 2);
  CHECK(journaledAtOrder == std::vector<std::size_t>{0, 0});
  auto held = EvictionJournal(journal).load();
  REQUIRE(held);
  CHECK(held->size() == 2);
  agent.stop();
  io.poll();
}

// Victims first against a full scan through the whole agent, on a tree churned between two
// cycles: pods grown past the last ranking's first, pods added and removed.
TEST_CASE(
    "on a churned tree the agent decides as a fresh agent's full scan does, reading few pods") {
  configureLogging(LogFormat::Text, LogLevel::Error);
  std::mt19937_64 rng(0x636875726e);  // "churn"
  auto pick = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(rng);
  };
  auto uid = [](int i) {
    char text[40];
    std::snprintf(text, sizeof text, "00000000-0000-4000-8000-%012d", i);
    return std::string(text);
  };
  const std::string qos[] = {"guaranteed", "burstable", "besteffort"};
  const int priorities[] = {0, 0, 0, 1000, 100000};
  int decidedAlone = 0;
  for (int round = 0; round < 12; ++round) {
    CAPTURE(round);
    Tree tree;
    struct Entry {
      std::string name, uid, qos;
      std::int64_t usage;
      int priority;
      bool requested;
    };
    std::vector<Entry> pods;
    auto add = [&](int i) {
      Entry e{"p" + std::to_string(i), uid(i), qos[pick(0, 2)], pick(1, 30) * kMiB, 0, false};
      e.priority = priorities[pick(0, 4)];
      e.requested = pick(0, 2) == 0;
      tree.addPod(e.name, e.uid, e.qos, e.priority, e.usage, e.requested ? "64Mi" : "");
      pods.push_back(e);
    };
    for (int i = 0; i < 40; ++i) add(i);
    auto total = [&] {
      std::int64_t sum = 0;
      for (const Entry& e : pods) sum += e.usage;
      return sum;
    };
    tree.setKubepods(total());  // far below the 1 GiB limit: nothing to do
    Harness a(tree, kPolicy);
    REQUIRE(a.recorder->orders().empty());

    // The churn: the smallest priority-0 pod without a request — last of its kind in the
    // ranking the agent read — grows past all the others, two more grow a little, three go,
    // three come; then kubepods nears its limit so that 100 MiB or more must be freed.
    Entry* smallest = nullptr;
    for (Entry& e : pods) {
      if (e.priority == 0 && !e.requested && (smallest == nullptr || e.usage < smallest->usage)) {
        smallest = &e;
      }
    }
    REQUIRE(smallest != nullptr);
    smallest->usage += pick(100, 300) * kMiB;
    tree.setUsage(smallest->uid, smallest->qos, smallest->usage);
    for (int k = 0; k < 2; ++k) {
      Entry& grown = pods[std::size_t(pick(0, std::int64_t(pods.size()) - 1))];
      grown.usage += pick(1, 20) * kMiB;
      tree.setUsage(grown.uid, grown.qos, grown.usage);
    }
    for (int k = 0; k < 3; ++k) {
      const std::size_t at = std::size_t(pick(0, std::int64_t(pods.size()) - 1));
      tree.removePod(pods[at].name, pods[at].uid, pods[at].qos);
      pods.erase(pods.begin() + std::ptrdiff_t(at));
    }
    for (int k = 0; k < 3; ++k) add(100 + round * 10 + k);
    tree.setKubepods(1024 * kMiB - pick(0, 90) * kMiB);
    a.agent->cycle(Trigger::Manual);

    Harness b(tree, kPolicy);  // a fresh agent: its first cycle reads every pod
    CHECK(a.ordered() == b.ordered());
    REQUIRE(a.recorder->orders().size() == b.recorder->orders().size());
    for (std::size_t i = 0; i < b.recorder->orders().size(); ++i) {
      CHECK(a.recorder->orders()[i].message == b.recorder->orders()[i].message);
      CHECK(a.recorder->orders()[i].gracePeriodSeconds ==
            b.recorder->orders()[i].gracePeriodSeconds);
    }
    const VictimsFirstDecision& fast = a.agent->lastVictimsFirst();
    if (fast.fullScan == FullScanReason::None) {
      ++decidedAlone;
      CHECK(fast.podsRead < pods.size());
    }
    CHECK_FALSE(b.recorder->orders().empty());
  }
  CHECK(decidedAlone > 0);
}

// The process's descriptor table size, as the kernel states it.
std::uint64_t descriptorTableSize() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("FDSize:")) return std::stoull(line.substr(7));
  }
  return 0;
}

TEST_CASE("the descriptor table has room for the pods' descriptors before any kill opens one") {
  // A kill lists cgroup.procs and opens cgroup.kill; an open that finds the table full grows
  // it, and in a process with threads that waits for an RCU grace period. The agent makes
  // the room when pods arrive: 10 descriptors a pod and 1,280 beside, twice over.
  rlimit limit{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
  rlimit raised = limit;
  raised.rlim_cur = std::min<rlim_t>(limit.rlim_max, 1 << 16);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &raised) == 0);
  Tree tree;
  for (int i = 0; i < 3; ++i) {
    const std::string uid = "00000000-0000-0000-0000-00000000000" + std::to_string(i);
    tree.addPod("p" + std::to_string(i), uid, "besteffort", 0, 10 * kMiB, "");
  }
  const std::uint64_t wanted = std::min<std::uint64_t>(2 * (10 * 3 + 1280), raised.rlim_cur);
  const std::uint64_t before = descriptorTableSize();
  if (before >= wanted) {
    MESSAGE("skipped: this process's table (" << before << ") is already that large");
  } else {
    Harness harness(tree, kPolicy);
    CHECK(descriptorTableSize() >= wanted);
  }
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &limit) == 0);
}

TEST_CASE("--nice: start() gives the loop's thread that niceness, and no other thread") {
  Tree tree;
  const auto niceOf = [] { return ::getpriority(PRIO_PROCESS, id_t(::gettid())); };
  const int before = niceOf();
  if (before >= 19) {
    MESSAGE("skipped: this thread already runs at niceness 19, none higher to ask for");
    return;
  }
  // Higher (kinder) than the test's own: allowed without CAP_SYS_NICE.
  const int wanted = before + 1;
  int inLoop = before;
  std::thread loop([&] {
    Harness harness(tree, kPolicy, false, true, std::nullopt, wanted);
    inLoop = niceOf();
  });
  loop.join();
  CHECK(inLoop == wanted);
  CHECK(niceOf() == before);
}

TEST_CASE(
    "--realtime: start() puts the loop's thread under SCHED_FIFO, not the threads it starts") {
  Tree tree;
  // Whether this process may take SCHED_FIFO at all (CAP_SYS_NICE or RLIMIT_RTPRIO, and, on
  // cgroup v1 with realtime group scheduling, a cgroup with realtime runtime): asked on a
  // thread of its own, which then ends.
  bool allowed = false;
  std::thread([&] {
    const sched_param one{1};
    allowed = ::sched_setscheduler(0, SCHED_FIFO, &one) == 0;
  }).join();
  int policy = -1;
  int priority = -1;
  int started = -1;  // the policy of a thread the loop's thread starts
  std::thread loop([&] {
    Harness harness(tree, kPolicy, false, true, std::nullopt, std::nullopt, 1);
    policy = ::sched_getscheduler(0);
    sched_param param{};
    if (::sched_getparam(0, &param) == 0) priority = param.sched_priority;
    std::thread([&] { started = ::sched_getscheduler(0); }).join();
  });
  loop.join();
  if (allowed) {
    CHECK(policy == (SCHED_FIFO | SCHED_RESET_ON_FORK));
    CHECK(priority == 1);
    CHECK(started == SCHED_OTHER);
  } else {
    // Refused: logged (loop-realtime, warn), and the agent started all the same.
    MESSAGE("this process may not use SCHED_FIFO: only the fallback is checked");
    CHECK(policy == SCHED_OTHER);
  }
  CHECK(::sched_getscheduler(0) == SCHED_OTHER);
}

TEST_CASE("nodewarden_api_reflector_total adds what each watch counter grew by, from 0") {
  AgentMetrics metrics;
  auto value = [&](const std::string& resource, const std::string& event) {
    return metrics.apiReflector.value({resource, event});
  };
  metrics.publish(std::vector<WatchCounts>{{.resource = "Node", .lists = 1, .watches = 1},
                                           {.resource = "Pod", .lists = 1, .events = 3}});
  CHECK(value("Node", "list") == 1);
  CHECK(value("Pod", "event") == 3);
  const std::string text = metrics.registry.render();
  // Every series of a resource exists once it is published, at 0 until it counts.
  CHECK(text.find("nodewarden_api_reflector_total{resource=\"Node\",event=\"bookmark\"} 0") !=
        std::string::npos);
  // Published again: only the growth is added.
  metrics.publish(std::vector<WatchCounts>{
      {.resource = "Node", .lists = 1, .watches = 2, .bookmarks = 2},
      {.resource = "Pod", .lists = 2, .events = 5, .relistsGone = 1, .failures = 1}});
  CHECK(value("Node", "list") == 1);
  CHECK(value("Node", "watch") == 2);
  CHECK(value("Node", "bookmark") == 2);
  CHECK(value("Pod", "list") == 2);
  CHECK(value("Pod", "event") == 5);
  CHECK(value("Pod", "relist_gone") == 1);
  CHECK(value("Pod", "failure") == 1);
  // A counter never goes down, whatever a source reports.
  metrics.publish(std::vector<WatchCounts>{{.resource = "Pod", .lists = 1}});
  CHECK(value("Pod", "list") == 2);
}

namespace {

// With `tree`'s pod added, a priority-1000 pod of 600 MiB beside it and kubepods at 960 MiB of
// 1 GiB (64 MiB available, 100 MiB needed): the message of the one order, which must be for
// `victim`.
std::string messageOfOnlyVictim(Tree& tree, const std::string& victim) {
  tree.addPod("web", "00000000-0000-4000-8000-0000000000f1", "burstable", 1000, 600 * kMiB,
              "700Mi");
  tree.setKubepods(960 * kMiB);
  Harness h(tree, kPolicy);
  REQUIRE(h.ordered() == std::vector<std::string>{victim});
  return h.recorder->orders()[0].message;
}

}  // namespace

TEST_CASE("a memory eviction's message names the victim's containers from their own cgroups") {
  configureLogging(LogFormat::Text, LogLevel::Error);
  Tree tree;
  // 1 GiB allocatable, 960 MiB used: the pod below (the lowest priority) goes.
  const std::string uid = "00000000-0000-4000-8000-0000000000c1";
  const std::string app(64, 'a'), proxy(64, 'b'), sidecar(64, 'd'), sandbox(64, 'e');
  tree.setUsage(uid, "burstable", 300 * kMiB);
  const fs::path pod = tree.tier("burstable") / ("pod" + uid);
  auto container = [&](const std::string& leaf, std::int64_t workingSet, std::int64_t inactive) {
    write(pod / leaf / "memory.current", std::to_string(workingSet + inactive) + "\n");
    write(pod / leaf / "memory.stat", "anon " + std::to_string(workingSet) + "\nfile " +
                                          std::to_string(inactive) + "\ninactive_file " +
                                          std::to_string(inactive) + "\n");
  };
  // As containerd lays them out with the systemd driver, and as the cgroupfs driver does.
  container("cri-containerd-" + app + ".scope", 200 * kMiB, 30 * kMiB);
  container(proxy, 20 * kMiB, 0);
  container("cri-containerd-" + sidecar + ".scope", 50 * kMiB, 0);
  container(sandbox, 1 * kMiB, 0);  // the pause container: in no status
  write(
      tree.manifests / "multi.json",
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"multi","namespace":"default","uid":")" +
          uid + R"("},"spec":{"priority":0,
          "initContainers":[{"name":"setup"},
                            {"name":"log-shipper","restartPolicy":"Always",
                             "resources":{"requests":{"memory":"10Mi"}}}],
          "containers":[{"name":"app","resources":{"requests":{"memory":"100Mi"}}},
                        {"name":"proxy","resources":{"requests":{"memory":"64Mi"}}}]},
          "status":{"initContainerStatuses":[
              {"name":"setup","containerID":"containerd://)" +
          std::string(64, 'f') + R"("},
              {"name":"log-shipper","containerID":"containerd://)" +
          sidecar + R"("}],
            "containerStatuses":[
              {"name":"app","containerID":"containerd://)" +
          app + R"("},
              {"name":"proxy","containerID":"containerd://)" +
          proxy + R"("}]}})");
  // The sidecar first (the runtime starts it first), then the containers; the proxy is within
  // its request and the exited init container has no cgroup: no sentence for either.
  CHECK(messageOfOnlyVictim(tree, "default/multi") ==
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 64Mi. "
        "Container log-shipper was using 50Mi, request is 10Mi, has larger consumption of memory. "
        "Container app was using 200Mi, request is 100Mi, has larger consumption of memory. ");
}

TEST_CASE("without runtime IDs in its status, a pod's one container is credited with the pod") {
  configureLogging(LogFormat::Text, LogLevel::Error);
  Tree tree;
  tree.addPod("single", "00000000-0000-4000-8000-0000000000d1", "burstable", 0, 300 * kMiB,
              "100Mi");
  CHECK(messageOfOnlyVictim(tree, "default/single") ==
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 64Mi. "
        "Container c was using 300Mi, request is 100Mi, has larger consumption of memory. ");
}
