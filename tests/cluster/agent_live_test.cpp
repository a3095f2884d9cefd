// `nodewarden agent --source kubernetes` against the real API server (issue 20, item 3):
// Kubernetes' own kube-apiserver, controller manager and etcd (tests/cluster/README.md), the
// shipped ServiceAccount and RBAC (systemd/kubernetes/, applied as they ship) with a token
// from the TokenRequest API, and a sandbox node of real cgroups and real processes
// (tests/e2e/e2e_env.h) whose pod cgroups are named as the kubelet names them, after the
// UIDs the API server gave the pods. Proven, in one run on one control plane:
//
//   list + watch   the agent lists this node's pods at the server's resourceVersion and
//                  watches them: a pod created appears in its ranking, one a kubelet reports
//                  Succeeded leaves it, one deleted leaves it;
//   410 → relist   its connection to the API server dropped (a relay the test cuts), a pod
//                  created and one deleted meanwhile, etcd compacted to its current revision:
//                  the resumed watch is refused (410 "too old resource version"), the agent
//                  relists, and both changes are in its view — nothing lost;
//   eviction       real memory pressure in the sandbox: the agent kills the lowest-priority
//                  pod, and the real kubectl then shows what the kubelet's eviction manager
//                  records: phase Failed, reason Evicted, the kubelet's message form, the
//                  DisruptionTarget condition (TerminationByKubelet) with the pod's
//                  generation as observedGeneration, a Warning Event
//                  "Evicted" with the same message and starved_resource, and the deletion
//                  (a finalizer of the test keeps the object readable);
//   node condition NodewardenMemoryPressure on the Node, the kubelet's own conditions
//                  untouched;
//   RBAC           the API server's audit log of the agent's ServiceAccount: no request was
//                  refused (no 403; nor in the agent's log), and every rule the shipped role
//                  grants (`kubectl auth can-i --list --as=…`) is one the agent used here, or
//                  preemption's eviction, which only --admission-routes exercises.
//
// The pods' watch cache is off (--watch-cache-sizes=pods#0): with it on, a resumed watch is
// served from the API server's memory and etcd's compaction never reaches it; off, the watch
// goes to etcd as every watch did before the cache, and compaction expires it.
// Root, cgroups and kubectl are needed: without them the test exits 77 saying why
// (tests/e2e/e2e_env.cpp's check, the lane's own checks).
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cluster/cluster_env.h"
#include "tests/cluster/lane_objects.h"
#include "tests/e2e/e2e_env.h"

using namespace std::chrono_literals;
using nodewarden::cluster::Cluster;
using nodewarden::cluster::Json;
using nodewarden::cluster::Run;
namespace e2e = nodewarden::e2e;
namespace lane = nodewarden::cluster;

namespace {

const std::string kNode = "agent-node";
const std::string kNs = "shop";
const std::string kAgentUser = "system:serviceaccount:kube-system:nodewarden-agent";
const std::string kFinalizer = "nodewarden.test/keep";

// The hard line at 200 MiB of the sandbox's 512 MiB (the Node's allocatable memory).
const std::string kPolicy = R"({
  "evictionHard": { "allocatableMemory.available": "200Mi" },
  "housekeepingInterval": "1s"
})";

// Only the agent's ServiceAccount, each request once it has been answered.
const std::string kAuditPolicy =
    "apiVersion: audit.k8s.io/v1\n"
    "kind: Policy\n"
    "omitStages: [RequestReceived]\n"
    "rules:\n"
    "- level: Metadata\n"
    "  users: [\"" +
    kAgentUser +
    "\"]\n"
    "- level: None\n";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The pod's key in the agent's /v1/state ranking.
std::vector<std::string> ranking(const e2e::AgentProcess& agent) {
  return e2e::memoryRanking(e2e::getState(agent.port()));
}
bool ranked(const std::vector<std::string>& keys, const std::string& name) {
  return std::find(keys.begin(), keys.end(), kNs + "/" + name) != keys.end();
}

// The agent's log lines of `event` whose kind is exactly `kind` ("Pod": this node's pods).
std::vector<e2e::LogLine> reflectorLines(e2e::AgentProcess& agent, const std::string& event,
                                         const std::string& kind) {
  std::vector<e2e::LogLine> out;
  for (const auto& line : agent.events(event)) {
    if (line.field("kind") == kind) out.push_back(line);
  }
  return out;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// "resource[/subresource][.group]" of an audit event's objectRef, as `kubectl auth can-i
// --list` names resources.
std::string resourceOf(const Json& ref) {
  std::string name = ref.value("resource", "");
  if (ref.contains("subresource")) name += "/" + ref["subresource"].get<std::string>();
  const std::string group = ref.value("apiGroup", "");
  if (!group.empty()) name += "." + group;
  return name;
}

// The rules `kubectl auth can-i --list` prints: resource → verbs, for the rows that name
// resources (the non-resource URLs every authenticated user has are left out).
std::map<std::string, std::set<std::string>> grantedRules(const std::string& table) {
  std::map<std::string, std::set<std::string>> rules;
  std::istringstream lines(table);
  std::string line;
  std::getline(lines, line);  // Resources  Non-Resource URLs  Resource Names  Verbs
  while (std::getline(lines, line)) {
    const auto open = line.rfind('['), close = line.rfind(']');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream words(line.substr(0, open));
    std::string resource;
    words >> resource;
    if (resource.empty() || resource.starts_with("[") || resource.starts_with("/")) continue;
    std::istringstream verbs(line.substr(open + 1, close - open - 1));
    for (std::string verb; verbs >> verb;) rules[resource].insert(verb);
  }
  return rules;
}

Json podNamed(const Cluster& cluster, const std::string& name) {
  return cluster.kubectlJson("get pod " + name + " -n " + kNs + " -o json");
}

Json conditionOf(const Json& object, const std::string& type) {
  for (const auto& c : object["status"].value("conditions", Json::array())) {
    if (c.value("type", "") == type) return c;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("the agent against the real API server: watch, relist, eviction, conditions, RBAC") {
  if (lane::kubectlPath().empty()) lane::skip("no kubectl on the PATH nor /usr/bin/kubectl");
  e2e::TempDir files;
  e2e::writeFile(files.file("audit-policy.yaml"), kAuditPolicy);
  const std::string auditLog = files.file("audit.log");
  lane::ClusterOptions options;
  options.apiserverArgs = {"--watch-cache-sizes=pods#0",
                           "--audit-policy-file=" + files.file("audit-policy.yaml"),
                           "--audit-log-path=" + auditLog};
  Cluster cluster(options);

  // The shipped ServiceAccount and RBAC, as they ship; a token for the agent's account
  // through the TokenRequest API (kubectl create token).
  const std::string manifests = std::string(NODEWARDEN_SOURCE_ROOT) + "/systemd/kubernetes/";
  const Run applied = cluster.kubectl(
      {"apply", "-f", manifests + "serviceaccount.yaml", "-f", manifests + "rbac.yaml"});
  REQUIRE_MESSAGE(applied.status == 0, applied.err);
  const Run token = cluster.kubectl("create token nodewarden-agent -n kube-system --duration=2h");
  REQUIRE_MESSAGE(token.status == 0, token.err);
  const std::string bearer = token.out.substr(0, token.out.find_last_not_of("\r\n") + 1);

  // The agent reaches the API server through a relay the test can cut.
  const std::string server = cluster.server();
  lane::TcpRelay relay(std::stoi(server.substr(server.rfind(':') + 1)));
  e2e::writeFile(files.file("kubeconfig"),
                 lane::tokenKubeconfig(cluster, bearer, "nodewarden-agent", relay.url()));
  e2e::writeFile(files.file("policy.json"), kPolicy);

  // The node as its kubelet registers and reports it; a namespace and a priority class.
  cluster.create(lane::laneNode(kNode));
  cluster.replaceStatus("/api/v1/nodes/" + kNode, lane::laneNodeStatus(kNode, "512Mi"));
  cluster.create({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNs}}}});
  REQUIRE(cluster.waitUntil(
      [&] { return cluster.kubectl("get serviceaccount default -n " + kNs).status == 0; }, 120));
  cluster.create({{"apiVersion", "scheduling.k8s.io/v1"},
                  {"kind", "PriorityClass"},
                  {"metadata", {{"name", "high"}}},
                  {"value", 1000}});

  // A pod bound to the node and running as its kubelet reports it, with its cgroup in the
  // sandbox under the UID the server gave it (kubepods/burstable/pod<uid>: a memory request
  // and no limit is Burstable, for the server and for the sandbox alike).
  nodewarden::cgroups::Sandbox sandbox = e2e::makeSandbox(512 * e2e::kMiB);
  std::map<std::string, std::string> cgroupOf;
  auto runPod = [&](const std::string& name, const std::string& priorityClass, bool keep) {
    lane::PodShape shape;
    shape.node = kNode;
    shape.memory = "10Mi";
    shape.priorityClass = priorityClass;
    Json pod = lane::lanePod(kNs, name, shape);
    if (keep) pod["metadata"]["finalizers"] = Json::array({kFinalizer});
    const Json stored = cluster.create(pod);
    const Json reported = cluster.replaceStatus("/api/v1/namespaces/" + kNs + "/pods/" + name,
                                                lane::runningStatus(stored));
    CHECK(reported["status"]["qosClass"] == "Burstable");
    e2e::PodSpec spec(kNs, name);
    spec.uid = stored["metadata"]["uid"];
    spec.request("memory", "10Mi");
    cgroupOf[name] = e2e::addPod(sandbox, nullptr, spec);
    return reported;
  };
  // A pod that ended (Succeeded, deleted) loses its cgroup, as the kubelet removes it.
  auto endPod = [&](const std::string& name) {
    const auto removed = sandbox.removeCgroup(cgroupOf[name]);
    REQUIRE_MESSAGE(bool(removed), name << ": " << removed.error().message);
  };
  runPod("batch", "", true);  // priority 0: the first to go
  const Json web = runPod("web", "high", false);
  const pid_t batchPid = e2e::spawnAllocator(sandbox, cgroupOf["batch"], 80 * e2e::kMiB);
  const pid_t webPid = e2e::spawnAllocator(sandbox, cgroupOf["web"], 8 * e2e::kMiB);

  e2e::AgentConfig config;
  config.policyFile = files.file("policy.json");
  config.kubeconfig = files.file("kubeconfig");
  config.kubepods = sandbox.kubepods();
  config.nodeName = kNode;
  e2e::AgentProcess agent(config);
  REQUIRE_MESSAGE(agent.waitForEvent("api-synced", 60s).has_value(), agent.logText());

  // ---- list + watch
  // The list of this node's pods is at a resourceVersion of the server's: not older than the
  // last write to them, not newer than what the server lists now.
  const auto lists = reflectorLines(agent, "api-list", "Pod");
  REQUIRE_MESSAGE(!lists.empty(), agent.logText());
  std::smatch found;
  const std::string listed = lists.front().field("detail");
  REQUIRE_MESSAGE(
      std::regex_search(listed, found, std::regex("listed 2 pods at resourceVersion ([0-9]+)$")),
      listed);
  const long long listedAt = std::stoll(found[1]);
  CHECK(listedAt >= std::stoll(web["metadata"]["resourceVersion"].get<std::string>()));
  const Json nowListed =
      cluster.kubectlJson("get --raw /api/v1/pods?fieldSelector=spec.nodeName%3D" + kNode);
  CHECK(listedAt <= std::stoll(nowListed["metadata"]["resourceVersion"].get<std::string>()));
  {
    const auto keys = ranking(agent);
    CHECK_MESSAGE((ranked(keys, "batch") && ranked(keys, "web")), joined(keys));
  }

  // Created, reported Succeeded by its kubelet (MODIFIED), deleted: each seen through the
  // watch, with no relist.
  runPod("done", "high", false);
  runPod("gone", "high", false);
  runPod("late", "high", false);
  CHECK_MESSAGE(e2e::waitUntil(
                    [&] {
                      const auto keys = ranking(agent);
                      return ranked(keys, "done") && ranked(keys, "gone") && ranked(keys, "late");
                    },
                    60s, 250ms),
                joined(ranking(agent)));
  Json done = podNamed(cluster, "done");
  done["status"]["phase"] = "Succeeded";
  cluster.replaceStatus("/api/v1/namespaces/" + kNs + "/pods/done", done["status"]);
  endPod("done");
  CHECK_MESSAGE(e2e::waitUntil([&] { return !ranked(ranking(agent), "done"); }, 60s, 250ms),
                joined(ranking(agent)));
  REQUIRE(cluster.kubectl("delete pod gone -n " + kNs + " --grace-period=0 --force").status == 0);
  endPod("gone");
  CHECK_MESSAGE(e2e::waitUntil([&] { return !ranked(ranking(agent), "gone"); }, 60s, 250ms),
                joined(ranking(agent)));
  CHECK(reflectorLines(agent, "api-list", "Pod").size() == 1);
  CHECK(reflectorLines(agent, "api-relist", "Pod").empty());

  // ---- a watch expired by etcd's compaction → relist, nothing lost
  const std::size_t beforeCut = agent.lines().size();
  relay.cut();
  REQUIRE_MESSAGE(agent.waitFor(
                      [](const e2e::LogLine& line) {
                        return line.event() == "api-retry" && line.field("kind") == "Pod";
                      },
                      60s, beforeCut),
                  agent.logText());
  runPod("gap", "high", false);
  REQUIRE(cluster.kubectl("delete pod late -n " + kNs + " --grace-period=0 --force").status == 0);
  endPod("late");
  const std::int64_t revision = lane::etcdRevision(cluster);
  lane::compactEtcd(cluster, revision);
  relay.resume();
  const auto relisted = agent.waitFor(
      [](const e2e::LogLine& line) {
        return line.event() == "api-relist" && line.field("kind") == "Pod";
      },
      90s, beforeCut);
  REQUIRE_MESSAGE(relisted.has_value(), agent.logText());
  CHECK_MESSAGE(relisted->field("detail").find("410 Gone") != std::string::npos,
                relisted->field("detail"));
  MESSAGE("the expired watch: " << relisted->field("detail"));
  CHECK_MESSAGE(e2e::waitUntil(
                    [&] {
                      const auto keys = ranking(agent);
                      return ranked(keys, "gap") && !ranked(keys, "late");
                    },
                    60s, 250ms),
                joined(ranking(agent)));
  long long relistedAt = 0;
  {
    const auto relists = reflectorLines(agent, "api-list", "Pod");
    REQUIRE(relists.size() >= 2);
    const std::string relistDetail = relists.back().field("detail");
    REQUIRE(std::regex_search(relistDetail, found, std::regex("at resourceVersion ([0-9]+)$")));
    relistedAt = std::stoll(found[1]);
    CHECK(relistedAt >= revision);
  }

  // ---- eviction under real memory pressure
  // The generation the API server gave the batch pod, which the eviction's observedGeneration
  // must carry (a kubelet of v1.35 or later writes it); the agent's DELETE bumps it later.
  const std::int64_t batchGeneration =
      podNamed(cluster, "batch")["metadata"].value("generation", std::int64_t(0));
  REQUIRE(batchGeneration > 0);
  // Down to 180 MiB available (measured) < 200 MiB: the batch pod (priority 0, 80 MiB over
  // its request) goes; that brings the sandbox back above the line, so nothing else does.
  const pid_t pressurePid =
      e2e::spawnAllocatorTo(sandbox, cgroupOf["gap"], 180 * std::int64_t(e2e::kMiB));
  const auto evict = agent.waitForEvent("evict", 60s);
  REQUIRE_MESSAGE(evict.has_value(), agent.logText());
  CHECK(evict->field("pod") == kNs + "/batch");
  CHECK(e2e::reapChild(sandbox, batchPid, 10s).has_value());
  CHECK(e2e::alive(pressurePid));
  CHECK(e2e::alive(webPid));

  // What kubectl shows afterwards: the kubelet's record of an eviction, and the deletion the
  // agent asks for (the test's finalizer holds the object).
  Json batch;
  REQUIRE_MESSAGE(cluster.waitUntil(
                      [&] {
                        batch = podNamed(cluster, "batch");
                        return batch["metadata"].contains("deletionTimestamp") &&
                               batch["status"].value("reason", "") == "Evicted";
                      },
                      60),
                  batch.dump(2) << "\n"
                                << agent.logText());
  CHECK(batch["status"]["phase"] == "Failed");
  const std::string message = batch["status"].value("message", "");
  // The kubelet's form (pkg/kubelet/eviction/helpers.go evictionMessage): the resource, then
  // the threshold and what was available, then each container over its request.
  CHECK_MESSAGE(
      std::regex_match(message,
                       std::regex("The node was low on resource: memory\\. "
                                  "Threshold quantity: 200Mi, available: [0-9]+(Ki|Mi|Gi)?\\. "
                                  "(Container main was using [0-9]+(Ki|Mi|Gi)?, request is 10Mi, "
                                  "has larger consumption of memory\\. )*")),
      message);
  const Json disruption = conditionOf(batch, "DisruptionTarget");
  REQUIRE_MESSAGE(disruption.is_object(), batch.dump(2));
  CHECK(disruption["status"] == "True");
  CHECK(disruption["reason"] == "TerminationByKubelet");
  CHECK(disruption["message"] == message);
  // As the kubelet (v1.35 on): the status and the condition observed the pod's generation.
  CHECK_MESSAGE(disruption.value("observedGeneration", std::int64_t(0)) == batchGeneration,
                batch.dump(2));
  CHECK_MESSAGE(batch["status"].value("observedGeneration", std::int64_t(0)) == batchGeneration,
                batch.dump(2));
  CHECK(batch["metadata"]["deletionGracePeriodSeconds"] == 0);  // a hard threshold: no grace
  const Json events =
      cluster.kubectlJson("get events -n " + kNs +
                          " --field-selector involvedObject.name=batch,reason=Evicted -o json");
  REQUIRE_MESSAGE(events["items"].size() == 1, events.dump(2));
  const Json& event = events["items"][0];
  CHECK(event["type"] == "Warning");
  CHECK(event["message"] == message);
  CHECK(event["involvedObject"]["kind"] == "Pod");
  CHECK(event["involvedObject"]["uid"] == batch["metadata"]["uid"]);
  CHECK(event["source"]["host"] == kNode);
  CHECK(event["metadata"]["annotations"]["starved_resource"] == "memory");
  // The test lets the deletion finish, as the kubelet would once the pod is gone.
  REQUIRE(cluster
              .kubectl({"patch", "pod", "batch", "-n", kNs, "--type=json", "-p",
                        R"([{"op":"remove","path":"/metadata/finalizers"}])"})
              .status == 0);
  CHECK(cluster.waitUntil([&] { return cluster.kubectl("get pod batch -n " + kNs).status != 0; },
                          60));

  // ---- node conditions
  Json node;
  REQUIRE_MESSAGE(cluster.waitUntil(
                      [&] {
                        node = cluster.kubectlJson("get node " + kNode + " -o json");
                        const Json c = conditionOf(node, "NodewardenMemoryPressure");
                        return c.is_object() && c["status"] == "True";
                      },
                      60),
                  node.dump(2));
  const Json pressure = conditionOf(node, "NodewardenMemoryPressure");
  CHECK(!pressure.value("reason", "").empty());
  CHECK(pressure.contains("lastTransitionTime"));
  // The kubelet's own conditions are the kubelet's: untouched.
  CHECK(conditionOf(node, "MemoryPressure")["status"] == "False");
  CHECK(conditionOf(node, "MemoryPressure")["reason"] == "KubeletHasSufficientMemory");
  CHECK(conditionOf(node, "Ready")["status"] == "True");

  // Every write the real server was sent, it took (a write the fake server accepts and the
  // real one refuses shows here), and every object it served, the agent read.
  std::string writes;
  for (const auto& line : agent.events("api-write")) {
    writes += line.raw + "\n";
    CHECK_MESSAGE(line.json.value("ok", false), line.raw);
  }
  MESSAGE("the agent's writes:\n" << writes << "the eviction message: " << message);
  CHECK_MESSAGE(agent.events("pod-source-problem").empty(), agent.logText());
  CHECK_MESSAGE(agent.events("api-bad event").empty(), agent.logText());

  // ---- bookmarks
  // The API server's watch cache sends each watch that allows them a BOOKMARK about a minute
  // after it starts, and 2 s before its timeoutSeconds (the cacher's nextBookmarkTime). The
  // Node, PriorityClass and PodDisruptionBudget watches are served from that cache (pods are
  // not here: --watch-cache-sizes=pods#0, for the compaction above): their bookmarks are
  // taken as the resume point, counted in /metrics, and lead to no relist.
  const auto reflectorCount = [&](const std::string& resource, const std::string& what) {
    const e2e::HttpReply metrics = e2e::httpRequest(agent.port(), "GET", "/metrics");
    return e2e::metricValue(metrics.body, "nodewarden_api_reflector_total",
                            "resource=\"" + resource + "\",event=\"" + what + "\"")
        .value_or(-1);
  };
  CHECK_MESSAGE(e2e::waitUntil([&] { return reflectorCount("Node", "bookmark") >= 1; }, 150s, 1s),
                e2e::httpRequest(agent.port(), "GET", "/metrics").body);
  CHECK(reflectorCount("Node", "relist_gone") == 0);
  CHECK(reflectorCount("Node", "bad_event") == 0);
  CHECK(reflectorCount("Pod", "relist_gone") >= 1);  // the compaction above
  MESSAGE("bookmarks counted: Node " << reflectorCount("Node", "bookmark") << ", PriorityClass "
                                     << reflectorCount("PriorityClass", "bookmark")
                                     << ", PodDisruptionBudget "
                                     << reflectorCount("PodDisruptionBudget", "bookmark"));

  // ---- RBAC: refused nothing, granted nothing unused
  std::string refused;
  for (const auto& line : agent.lines()) {
    if (line.json.is_object() && line.event().starts_with("api-") &&
        (line.number("status") == 403 || line.raw.find("orbidden") != std::string::npos)) {
      refused += line.raw + "\n";
    }
  }
  CHECK_MESSAGE(refused.empty(), refused);
  std::map<std::string, std::set<std::string>> used;
  std::string auditRefused;
  std::vector<std::string> podWatches;
  {
    std::istringstream audit(slurp(auditLog));
    for (std::string line; std::getline(audit, line);) {
      if (line.empty()) continue;
      const Json entry = Json::parse(line);
      if (entry["user"].value("username", "") != kAgentUser) continue;
      if (entry.contains("impersonatedUser")) continue;
      if (!entry.contains("objectRef")) continue;
      used[resourceOf(entry["objectRef"])].insert(entry.value("verb", ""));
      const std::string uri = entry.value("requestURI", "");
      if (entry.value("verb", "") == "watch" && uri.starts_with("/api/v1/pods?") &&
          uri.find("spec.nodeName%3D" + kNode) != std::string::npos &&
          entry.value("stage", "") == "ResponseStarted") {
        podWatches.push_back(uri);
      }
      const int code = entry.value("responseStatus", Json::object()).value("code", 0);
      if (code == 401 || code == 403) auditRefused += line + "\n";
    }
  }
  CHECK_MESSAGE(auditRefused.empty(), auditRefused);
  // The first watch of the node's pods starts at the list's resourceVersion, asking for
  // bookmarks; one later starts at the relist's.
  REQUIRE(!podWatches.empty());
  CHECK_MESSAGE(podWatches.front().find("resourceVersion=" + std::to_string(listedAt) + "&") !=
                    std::string::npos,
                podWatches.front());
  CHECK_MESSAGE(podWatches.front().find("allowWatchBookmarks=true") != std::string::npos,
                podWatches.front());
  CHECK(std::any_of(podWatches.begin(), podWatches.end(), [&](const std::string& uri) {
    return uri.find("resourceVersion=" + std::to_string(relistedAt) + "&") != std::string::npos;
  }));
  const Run canI = cluster.kubectl({"auth", "can-i", "--list", "--as=" + kAgentUser});
  REQUIRE_MESSAGE(canI.status == 0, canI.err);
  // What the shipped role adds to what every ServiceAccount has (self-reviews, cluster
  // trust bundles): the rules of an account bound to nothing are left out.
  const Run baseline = cluster.kubectl(
      {"auth", "can-i", "--list", "--as=system:serviceaccount:" + kNs + ":bound-to-nothing"});
  REQUIRE_MESSAGE(baseline.status == 0, baseline.err);
  auto granted = grantedRules(canI.out);
  for (const auto& [resource, verbs] : grantedRules(baseline.out)) {
    for (const auto& verb : verbs) granted[resource].erase(verb);
  }
  // Used here, or (pods/eviction) by preemption at /v1/admission-review, which this test
  // does not exercise (tests/e2e/kube_test.cpp does, against the fake server).
  std::map<std::string, std::set<std::string>> needed = used;
  needed["pods/eviction"].insert("create");
  std::string extra, missing;
  for (const auto& [resource, verbs] : granted) {
    for (const auto& verb : verbs) {
      if (!needed[resource].contains(verb)) extra += resource + " " + verb + "\n";
    }
  }
  for (const auto& [resource, verbs] : used) {
    for (const auto& verb : verbs) {
      if (!granted.contains(resource) || !granted.at(resource).contains(verb)) {
        missing += resource + " " + verb + "\n";
      }
    }
  }
  CHECK_MESSAGE(extra.empty(), "granted and never used:\n" << extra << canI.out);
  CHECK_MESSAGE(missing.empty(), "used and not granted:\n" << missing);
  // What a node's agent does with its rights: every one of these was exercised above.
  for (const auto& [resource, verb] : std::vector<std::pair<std::string, std::string>>{
           {"pods", "list"},
           {"pods", "watch"},
           {"pods", "delete"},
           {"pods/status", "patch"},
           {"events", "create"},
           {"nodes", "list"},
           {"nodes", "watch"},
           {"nodes/status", "patch"},
           {"priorityclasses.scheduling.k8s.io", "list"},
           {"poddisruptionbudgets.policy", "watch"}}) {
    CHECK_MESSAGE(used[resource].contains(verb), resource << " " << verb);
  }

  const auto stopped = agent.stop();
  REQUIRE(stopped.has_value());
  CHECK(WIFEXITED(*stopped));
}
