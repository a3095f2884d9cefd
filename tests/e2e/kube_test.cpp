// `nodewarden agent --source kubernetes` end to end: the real binary against the strict fake
// API server (tests/kube/fake_apiserver.h, TLS with a kubeconfig as kubectl writes it) and a
// sandbox node of real cgroups and processes. Pods, priorities and the Node come only from
// the API; the local kill happens first and the eviction is then recorded in the API (status
// Failed/Evicted with DisruptionTarget, a Warning Event, DELETE with the UID precondition);
// node pressure is published as NodewardenMemoryPressure. With the API server down the local
// kill still happens and the writes catch up when it returns.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <algorithm>
#include <thread>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/kube_env.h"

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;
using nodewarden::testing::FakeApiServer;
using nodewarden::testing::FakeApiServerOptions;
using nodewarden::testing::RecordedRequest;

namespace {

// The agent with --source kubernetes on the sandbox node.
AgentConfig kubeAgent(const std::string& policyFile, const std::string& kubeconfig,
                      cgroups::Sandbox& sandbox) {
  AgentConfig config;
  config.policyFile = policyFile;
  config.kubeconfig = kubeconfig;
  config.kubepods = sandbox.kubepods();
  return config;
}

std::vector<RecordedRequest> matching(const std::vector<RecordedRequest>& requests,
                                      const std::string& method, const std::string& path) {
  std::vector<RecordedRequest> out;
  for (const auto& request : requests)
    if (request.method == method && request.path == path) out.push_back(request);
  return out;
}

bool hasWrite(const std::vector<RecordedRequest>& requests, const std::string& method,
              const std::string& path, unsigned status) {
  for (const auto& request : requests)
    if (request.method == method && request.path == path && request.status == status) return true;
  return false;
}

const std::string kPolicy = R"({
  "evictionHard": { "allocatableMemory.available": "200Mi" },
  "housekeepingInterval": "1s"
})";

}  // namespace

TEST_CASE("kubernetes source: priorities from the API, local kill, then status, event, delete") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir files;
  const auto certificate = nodewarden::testing::makeTestCertificate();
  FakeApiServerOptions serverOptions;
  serverOptions.tls = true;
  serverOptions.certPem = certificate.certPem;
  serverOptions.keyPem = certificate.keyPem;
  serverOptions.token = "e2e-token";
  FakeApiServer server(serverOptions);
  server.upsertNode(nodeObject("e2e-node", "512Mi"));
  server.upsertPriorityClass({{"apiVersion", "scheduling.k8s.io/v1"},
                              {"kind", "PriorityClass"},
                              {"metadata", {{"name", "important"}}},
                              {"value", 100000}});

  // Without priorities from the API both would be priority 0 and the larger user (important)
  // would rank first; with them the batch pod goes first.
  PodSpec batch = PodSpec("e2e", "batch").withPriority(0).request("memory", "10Mi");
  PodSpec important = PodSpec("e2e", "important")
                          .withClass("important")
                          .withPriority(100000)
                          .request("memory", "10Mi")
                          .withGrace(7);
  const std::string batchCgroup = addPod(sandbox, nullptr, batch);
  const std::string importantCgroup = addPod(sandbox, nullptr, important);
  server.upsertPod(apiPod(batch, "e2e-node"));
  server.upsertPod(apiPod(important, "e2e-node"));
  // A pod of another node is not listed by the agent (fieldSelector spec.nodeName).
  PodSpec elsewhere = PodSpec("e2e", "elsewhere").withPriority(5);
  elsewhere.uid = makeUid();
  server.upsertPod(apiPod(elsewhere, "other-node"));

  const pid_t batchPid = spawnAllocator(sandbox, batchCgroup, 60 * kMiB);
  const pid_t importantPid = spawnAllocator(sandbox, importantCgroup, 100 * kMiB);

  const std::string kubeconfig = files.file("kubeconfig");
  writeFile(kubeconfig, kubeconfigFor(server, certificate.certPem, "e2e-token"));
  writeFile(files.file("policy.json"), kPolicy);
  AgentProcess agent(kubeAgent(files.file("policy.json"), kubeconfig, sandbox));
  REQUIRE_MESSAGE(agent.waitForEvent("api-synced", 15s).has_value(), agent.logText());

  // The agent listed only its node's pods, with TLS and the token, and watches them.
  const auto requests = server.requests();
  bool listedPods = false;
  for (const auto& request : requests) {
    CHECK_MESSAGE(request.authorization == "Bearer e2e-token", request.path);
    if (request.method == "GET" && request.path == "/api/v1/pods" &&
        request.query.find("fieldSelector=spec.nodeName%3De2e-node") != std::string::npos)
      listedPods = true;
  }
  CHECK(listedPods);
  const Json before = getState(agent.port());
  const std::vector<std::string> expected = {batch.key(), important.key()};
  CHECK_MESSAGE(memoryRanking(before) == expected, before.dump(2));

  // Pressure down to 180 MiB available (measured) < 200 MiB: the batch pod goes, which
  // leaves 240 MiB and more available, so nothing else.
  const pid_t pressurePid = spawnAllocatorTo(sandbox, importantCgroup, 180 * std::int64_t(kMiB));
  auto evict = agent.waitForEvent("evict", 15s);
  REQUIRE_MESSAGE(evict.has_value(), agent.logText());
  CHECK(evict->field("pod") == batch.key());
  CHECK(reapChild(sandbox, batchPid, 5s).has_value());
  CHECK(alive(importantPid));
  CHECK(alive(pressurePid));

  // Then the API: status, event, delete, in that order, for the batch pod only.
  const std::string podPath = "/api/v1/namespaces/e2e/pods/batch";
  REQUIRE_MESSAGE(server.waitFor(
                      [&](const std::vector<RecordedRequest>& all) {
                        return hasWrite(all, "DELETE", podPath, 200);
                      },
                      15s),
                  agent.logText());
  const auto all = server.requests();
  const auto status = matching(all, "PATCH", podPath + "/status");
  const auto events = matching(all, "POST", "/api/v1/namespaces/e2e/events");
  const auto deletes = matching(all, "DELETE", podPath);
  REQUIRE(status.size() == 1);
  REQUIRE(events.size() == 1);
  REQUIRE(deletes.size() == 1);
  CHECK(status[0].contentType == "application/strategic-merge-patch+json");
  const Json patch = Json::parse(status[0].body);
  CHECK(patch["status"]["phase"] == "Failed");
  CHECK(patch["status"]["reason"] == "Evicted");
  CHECK(patch["status"]["message"].get<std::string>().starts_with(
      "The node was low on resource: memory. "));
  CHECK(patch["status"]["conditions"][0]["type"] == "DisruptionTarget");
  const Json event = Json::parse(events[0].body);
  CHECK(event["reason"] == "Evicted");
  CHECK(event["type"] == "Warning");
  CHECK(event["involvedObject"]["uid"] == batch.uid);
  CHECK(event["message"] == patch["status"]["message"]);
  CHECK(event["metadata"]["annotations"]["starved_resource"] == "memory");
  const Json options = Json::parse(deletes[0].body);
  CHECK(options["preconditions"]["uid"] == batch.uid);
  CHECK(options["gracePeriodSeconds"] == 0);  // a hard threshold: no grace
  std::size_t statusIndex = 0, eventIndex = 0, deleteIndex = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].method == "PATCH" && all[i].path == podPath + "/status") statusIndex = i;
    if (all[i].method == "POST" && all[i].path == "/api/v1/namespaces/e2e/events") eventIndex = i;
    if (all[i].method == "DELETE" && all[i].path == podPath) deleteIndex = i;
  }
  CHECK(statusIndex < eventIndex);
  CHECK(eventIndex < deleteIndex);
  CHECK(matching(all, "DELETE", "/api/v1/namespaces/e2e/pods/important").empty());
  // The fake server removed the Failed pod at once; the agent saw it go through its watch.
  CHECK_FALSE(server.pod("e2e", "batch").has_value());

  // Node pressure as nodewarden's own condition.
  REQUIRE(server.waitFor(
      [&](const std::vector<RecordedRequest>&) {
        auto node = server.node("e2e-node");
        if (!node) return false;
        for (const auto& condition : (*node)["status"]["conditions"])
          if (condition["type"] == "NodewardenMemoryPressure") return true;
        return false;
      },
      10s));
  CHECK(agent.events("api-write").size() >= 3);
  auto stopped = agent.stop();
  REQUIRE(stopped.has_value());
  CHECK(WIFEXITED(*stopped));
  CHECK(WEXITSTATUS(*stopped) == 0);
}

TEST_CASE(
    "kubernetes source: API server down while pressure rises; the kill happens, writes catch up") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir files;
  FakeApiServerOptions serverOptions;
  serverOptions.token = "e2e-token";
  FakeApiServer server(serverOptions);
  server.upsertNode(nodeObject("e2e-node", "512Mi"));
  PodSpec batch = PodSpec("e2e", "batch").withPriority(0).request("memory", "10Mi");
  PodSpec web = PodSpec("e2e", "web").withPriority(1000).request("memory", "10Mi");
  const std::string batchCgroup = addPod(sandbox, nullptr, batch);
  const std::string webCgroup = addPod(sandbox, nullptr, web);
  server.upsertPod(apiPod(batch, "e2e-node"));
  server.upsertPod(apiPod(web, "e2e-node"));
  const pid_t batchPid = spawnAllocator(sandbox, batchCgroup, 80 * kMiB);

  writeFile(files.file("kubeconfig"), kubeconfigFor(server, "", "e2e-token"));
  writeFile(files.file("policy.json"), kPolicy);
  AgentProcess agent(kubeAgent(files.file("policy.json"), files.file("kubeconfig"), sandbox));
  REQUIRE_MESSAGE(agent.waitForEvent("api-synced", 15s).has_value(), agent.logText());

  server.setDown(true);
  const auto downAt = now();
  // Down to 150 MiB available (measured): the batch pod's 80 MiB brings it back above the
  // 200 MiB threshold, so web is never a victim.
  const pid_t webPid = spawnAllocatorTo(sandbox, webCgroup, 150 * std::int64_t(kMiB));
  auto evict = agent.waitForEvent("evict", 15s);
  REQUIRE_MESSAGE(evict.has_value(), agent.logText());
  CHECK(evict->field("pod") == batch.key());
  // The local kill did not wait for the API server.
  CHECK(reapChild(sandbox, batchPid, 5s).has_value());
  CHECK(secondsSince(downAt) < 10.0);
  CHECK(alive(webPid));
  const std::string podPath = "/api/v1/namespaces/e2e/pods/batch";
  std::this_thread::sleep_for(1500ms);  // writes are being retried meanwhile
  CHECK_FALSE(hasWrite(server.requests(), "DELETE", podPath, 200));

  // Back up: the queued writes go out, in order, once each.
  server.setDown(false);

  REQUIRE_MESSAGE(server.waitFor(
                      [&](const std::vector<RecordedRequest>& all) {
                        return hasWrite(all, "DELETE", podPath, 200);
                      },
                      45s),
                  agent.logText());
  const auto all = server.requests();
  CHECK(matching(all, "POST", "/api/v1/namespaces/e2e/events").size() == 1);
  CHECK(matching(all, "DELETE", podPath).size() == 1);
  CHECK(server.events().size() == 1);
  // The watches reconnected too: a pod added now is seen by the agent.
  PodSpec late = PodSpec("e2e", "late").withPriority(7);
  const std::string lateCgroup = addPod(sandbox, nullptr, late);
  server.upsertPod(apiPod(late, "e2e-node"));
  CHECK(waitUntil(
      [&] {
        const auto ranking = memoryRanking(getState(agent.port()));
        return std::find(ranking.begin(), ranking.end(), late.key()) != ranking.end();
      },
      40s, 200ms));
  (void)lateCgroup;
}

TEST_CASE("kubernetes source: a malformed pod object is reported and skipped, the agent goes on") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir files;
  FakeApiServerOptions serverOptions;
  serverOptions.token = "e2e-token";
  FakeApiServer server(serverOptions);
  server.upsertNode(nodeObject("e2e-node", "512Mi"));
  PodSpec good = PodSpec("e2e", "good").withPriority(10);
  addPod(sandbox, nullptr, good);
  server.upsertPod(apiPod(good, "e2e-node"));
  writeFile(files.file("kubeconfig"), kubeconfigFor(server, "", "e2e-token"));
  writeFile(files.file("policy.json"), kPolicy);
  AgentProcess agent(kubeAgent(files.file("policy.json"), files.file("kubeconfig"), sandbox));
  REQUIRE_MESSAGE(agent.waitForEvent("api-synced", 15s).has_value(), agent.logText());

  Json bad = apiPod(PodSpec("e2e", "bad"), "e2e-node");
  bad["metadata"]["uid"] = makeUid();
  bad["spec"]["priority"] = "very high";
  server.upsertPod(bad);
  auto problem = agent.waitFor(
      [](const LogLine& line) {
        return line.event() == "pod-source-problem" &&
               line.field("problem").find("e2e/bad") != std::string::npos;
      },
      15s);
  REQUIRE_MESSAGE(problem.has_value(), agent.logText());
  CHECK(problem->field("problem").find("spec.priority") != std::string::npos);
  server.injectRawWatchLine("pods", "{\"type\":\"ADDED\",\"object\":");
  server.injectRawWatchLine("pods", "this is not json");
  std::this_thread::sleep_for(1500ms);
  CHECK(agent.running());
  const auto ranking = memoryRanking(getState(agent.port()));
  CHECK(std::find(ranking.begin(), ranking.end(), good.key()) != ranking.end());
}

TEST_CASE("kubernetes source: a binding review at the agent preempts through the Eviction API") {
  cgroups::Sandbox sandbox = makeSandbox(512 * kMiB);
  TempDir files;
  FakeApiServerOptions serverOptions;
  serverOptions.token = "e2e-token";
  FakeApiServer server(serverOptions);
  server.upsertNode(nodeObject("e2e-node", "512Mi"));
  PodSpec batch = PodSpec("e2e", "batch").withPriority(0).request("memory", "300Mi");
  PodSpec web = PodSpec("e2e", "web").withPriority(5000).request("memory", "100Mi");
  addPod(sandbox, nullptr, batch);
  addPod(sandbox, nullptr, web);
  server.upsertPod(apiPod(batch, "e2e-node"));
  server.upsertPod(apiPod(web, "e2e-node"));
  // Pending (not bound): fits only without the batch pod.
  PodSpec urgent = PodSpec("e2e", "urgent").withPriority(1000).request("memory", "300Mi");
  urgent.uid = makeUid();
  server.upsertPod(podObject(urgent));
  PodSpec never = PodSpec("e2e", "never").withPriority(1000).request("memory", "300Mi");
  never.uid = makeUid();
  Json neverPod = podObject(never);
  neverPod["spec"]["preemptionPolicy"] = "Never";
  server.upsertPod(neverPod);

  writeFile(files.file("kubeconfig"), kubeconfigFor(server, "", "e2e-token"));
  writeFile(files.file("policy.json"), kPolicy);
  AgentConfig config = kubeAgent(files.file("policy.json"), files.file("kubeconfig"), sandbox);
  config.extraArgs = {"--admission-routes"};  // loopback: no client certificate needed
  AgentProcess agent(config);
  REQUIRE_MESSAGE(agent.waitForEvent("api-synced", 15s).has_value(), agent.logText());

  auto review = [&](const PodSpec& pod, const std::string& uid) {
    HttpReply reply = httpRequest(agent.port(), "POST", "/v1/admission-review",
                                  bindingReview(uid, pod, "e2e-node"));
    REQUIRE_MESSAGE(reply.status == 200, reply.body);
    return Json::parse(reply.body);
  };

  // preemptionPolicy Never: rejected, nothing evicted.
  const Json rejected = review(never, "review-1");
  CHECK(rejected["response"]["uid"] == "review-1");
  CHECK(rejected["response"]["allowed"] == false);
  CHECK(rejected["response"]["status"]["message"] == "OutOfmemory");  // docs/reference.md §7

  // Preempt: denied now, the batch pod evicted through the Eviction API, urgent nominated.
  const Json preempt = review(urgent, "review-2");
  CHECK(preempt["response"]["uid"] == "review-2");
  CHECK(preempt["response"]["allowed"] == false);
  REQUIRE(server.waitFor(
      [&](const std::vector<RecordedRequest>& all) {
        return hasWrite(all, "POST", "/api/v1/namespaces/e2e/pods/batch/eviction", 201) &&
               hasWrite(all, "PATCH", "/api/v1/namespaces/e2e/pods/urgent/status", 200);
      },
      15s));
  CHECK(matching(server.requests(), "POST", "/api/v1/namespaces/e2e/pods/web/eviction").empty());
  auto urgentNow = server.pod("e2e", "urgent");
  REQUIRE(urgentNow.has_value());
  CHECK((*urgentNow)["status"]["nominatedNodeName"] == "e2e-node");
  CHECK(agent.events("admission-review").size() == 2);
}
