// `nodewarden webhook` end to end: the real binary lists and watches the fake API server
// (over TLS, with a kubeconfig) and answers AdmissionReviews for pods/binding with every
// docs/reference.md §5 verdict; preempt evicts through the Eviction API and nominates; a node's
// pressure published by an agent reaches the verdicts through the watch; malformed reviews
// get a 400 and the webhook goes on. (TLS on the webhook's own port is covered by
// agent/http; here it serves plain HTTP on 127.0.0.1.)
#include <doctest/doctest.h>

#include <fstream>

#include <sys/wait.h>

#include <algorithm>
#include <thread>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/kube_env.h"

using namespace nodewarden;
using namespace nodewarden::e2e;
using namespace std::chrono_literals;

namespace {

Json pendingPod(PodSpec& spec) {
  if (spec.uid.empty()) spec.uid = makeUid();
  return podObject(spec);  // no spec.nodeName: not bound yet
}

}  // namespace

TEST_CASE(
    "webhook binary: every verdict from the API server's objects, preemption through the API") {
  TempDir files;
  const auto certificate = nodewarden::testing::makeTestCertificate();
  FakeApiServerOptions serverOptions;
  serverOptions.tls = true;
  serverOptions.certPem = certificate.certPem;
  serverOptions.keyPem = certificate.keyPem;
  serverOptions.token = "webhook-token";
  FakeApiServer server(serverOptions);

  // n-pressure: an agent published memory pressure; n-full: 1Gi with a 600Mi batch pod;
  // n-free: room.
  Json pressured = nodeObject("n-pressure", "4Gi");
  pressured["status"]["conditions"].push_back(
      {{"type", "NodewardenMemoryPressure"}, {"status", "True"}});
  server.upsertNode(pressured);
  server.upsertNode(nodeObject("n-full", "1Gi"));
  server.upsertNode(nodeObject("n-free", "4Gi"));
  server.upsertPriorityClass({{"apiVersion", "scheduling.k8s.io/v1"},
                              {"kind", "PriorityClass"},
                              {"metadata", {{"name", "urgent"}}},
                              {"value", 1000}});
  PodSpec batch = PodSpec("shop", "batch").withPriority(0).request("memory", "600Mi");
  batch.uid = makeUid();
  server.upsertPod(apiPod(batch, "n-full"));

  PodSpec bestEffort("shop", "best-effort");
  PodSpec small = PodSpec("shop", "small").request("memory", "100Mi").request("cpu", "100m");
  PodSpec big = PodSpec("shop", "big").withClass("urgent").request("memory", "800Mi");
  PodSpec never = PodSpec("shop", "never").withPriority(1000).request("memory", "800Mi");
  PodSpec typo = PodSpec("shop", "typo").withClass("no-such-class");
  Json neverObject = pendingPod(never);
  neverObject["spec"]["preemptionPolicy"] = "Never";
  for (PodSpec* spec : {&bestEffort, &small, &big, &typo}) server.upsertPod(pendingPod(*spec));
  server.upsertPod(neverObject);

  writeFile(files.file("kubeconfig"), kubeconfigFor(server, certificate.certPem, "webhook-token"));
  AgentConfig config;
  config.webhook = true;
  config.kubeconfig = files.file("kubeconfig");
  config.extraArgs = {"--decision-log", files.file("decisions.jsonl")};
  AgentProcess webhook(config);
  REQUIRE_MESSAGE(
      waitUntil([&] { return httpRequest(webhook.port(), "GET", "/readyz").status == 200; }, 15s,
                100ms),
      webhook.logText());

  auto review = [&](const std::string& uid, const PodSpec& pod, const std::string& node,
                    bool dryRun = false) {
    HttpReply reply = httpRequest(webhook.port(), "POST", "/v1/admission-review",
                                  bindingReview(uid, pod, node, dryRun));
    REQUIRE_MESSAGE(reply.status == 200, reply.body);
    const Json answer = Json::parse(reply.body);
    CHECK(answer["apiVersion"] == "admission.k8s.io/v1");
    CHECK(answer["kind"] == "AdmissionReview");
    CHECK(answer["response"]["uid"] == uid);
    return answer["response"];
  };
  // status.message is the §5 reason (docs/reference.md §7); the details carry the whole message.
  auto message = [](const Json& response) {
    CHECK(response["status"]["message"] == response["status"]["reason"]);
    return response["status"]["details"]["causes"][0]["message"].get<std::string>();
  };

  // admit
  const Json admitted = review("u-admit", small, "n-free");
  CHECK(admitted["allowed"] == true);
  // reject: unknown priority class; BestEffort under nodewarden's memory pressure; Never.
  const Json noClass = review("u-class", typo, "n-free");
  CHECK(noClass["allowed"] == false);
  CHECK(message(noClass).starts_with("PriorityClassNotFound"));
  const Json pressure = review("u-pressure", bestEffort, "n-pressure");
  CHECK(pressure["allowed"] == false);
  CHECK(message(pressure) == "Evicted: The node had condition: [MemoryPressure]. ");
  CHECK(review("u-small-pressure", small, "n-pressure")["allowed"] == true);  // Burstable
  const Json noRoom = review("u-never", never, "n-full");
  CHECK(noRoom["allowed"] == false);
  CHECK(message(noRoom).starts_with("OutOfmemory: Node didn't have enough resource: memory"));
  // A dry run decides and does nothing.
  CHECK(review("u-dry", big, "n-full", true)["allowed"] == false);
  std::this_thread::sleep_for(300ms);
  const auto afterDryRun = server.requests();
  CHECK(std::none_of(afterDryRun.begin(), afterDryRun.end(), [](const RecordedRequest& r) {
    return r.method == "POST" && r.path.ends_with("/eviction");
  }));

  // preempt: denied now; batch evicted through the Eviction API; big nominated to n-full.
  const Json preempt = review("u-preempt", big, "n-full");
  CHECK(preempt["allowed"] == false);
  CHECK(message(preempt).find("shop/batch") != std::string::npos);
  REQUIRE_MESSAGE(
      server.waitFor(
          [&](const std::vector<RecordedRequest>& all) {
            bool evicted = false, nominated = false;
            for (const auto& r : all) {
              if (r.method == "POST" && r.path == "/api/v1/namespaces/shop/pods/batch/eviction" &&
                  r.status == 201)
                evicted = true;
              if (r.method == "PATCH" && r.path == "/api/v1/namespaces/shop/pods/big/status" &&
                  r.status == 200)
                nominated = true;
            }
            return evicted && nominated;
          },
          15s),
      webhook.logText());
  CHECK((*server.pod("shop", "big"))["status"]["nominatedNodeName"] == "n-full");
  REQUIRE(server.pod("shop", "batch").has_value());  // terminating, 30 s grace
  CHECK((*server.pod("shop", "batch"))["metadata"].contains("deletionTimestamp"));

  // The scheduler retries while the victim terminates: wait, and no second eviction.
  Json waiting;
  REQUIRE(waitUntil(
      [&] {
        waiting = review("u-retry", big, "n-full");
        return waiting["allowed"] == false &&
               message(waiting).find("terminat") != std::string::npos;
      },
      10s, 200ms));
  std::size_t evictions = 0;
  for (const auto& r : server.requests())
    if (r.method == "POST" && r.path == "/api/v1/namespaces/shop/pods/batch/eviction") ++evictions;
  CHECK(evictions == 1);
  // The victim is gone: the next binding is admitted.
  server.deletePod("shop", "batch");
  CHECK(waitUntil([&] { return review("u-bind", big, "n-full")["allowed"] == true; }, 10s, 200ms));

  // Pressure clears on n-pressure (the agent rewrote its condition): the watch brings it.
  Json cleared = nodeObject("n-pressure", "4Gi");
  cleared["status"]["conditions"].push_back(
      {{"type", "NodewardenMemoryPressure"}, {"status", "False"}});
  server.upsertNode(cleared);
  CHECK(waitUntil([&] { return review("u-cleared", bestEffort, "n-pressure")["allowed"] == true; },
                  10s, 200ms));

  // Fail open, with a reason: an unknown pod; not a binding.
  PodSpec ghost("shop", "ghost");
  ghost.uid = makeUid();
  const Json unknown = review("u-ghost", ghost, "n-free");
  CHECK(unknown["allowed"] == true);
  REQUIRE(unknown.contains("warnings"));
  // Malformed: 400 naming the path; the webhook goes on.
  HttpReply bad = httpRequest(
      webhook.port(), "POST", "/v1/admission-review",
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","kind":{"group":"","version":"v1","kind":"Binding"},"resource":{"group":"","version":"v1","resource":"pods"},"subResource":"binding","operation":"CREATE","object":{"kind":"Binding","metadata":{"name":"a","namespace":"b"},"target":{"kind":"Node","name":12}}}})");
  CHECK(bad.status == 400);
  CHECK(bad.body.find("request.object.target.name") != std::string::npos);
  CHECK(httpRequest(webhook.port(), "POST", "/v1/admission-review", "garbage").status == 400);
  CHECK(review("u-after", small, "n-free")["allowed"] == true);

  const HttpReply metrics = httpRequest(webhook.port(), "GET", "/metrics");
  CHECK(metrics.body.find("nodewarden_admissions_total{verdict=\"preempt\"") != std::string::npos);
  CHECK(metrics.body.find(
            "nodewarden_admissions_total{verdict=\"reject\",reason=\"PriorityClassNotFound\"}") !=
        std::string::npos);
  CHECK(webhook.events("admission-review").size() >= 10);
  // --decision-log: a JSON line per verdict, and one per preemption victim, as `why` shows
  // them (docs/reference.md §8).
  std::ifstream decisionLog(files.file("decisions.jsonl"));
  std::vector<Json> decisions;
  for (std::string line; std::getline(decisionLog, line);) decisions.push_back(Json::parse(line));
  auto decided = [&](const std::string& pod, const std::string& kind, const std::string& action) {
    return std::any_of(decisions.begin(), decisions.end(), [&](const Json& d) {
      return d["pod"] == pod && d["kind"] == kind && d["action"] == action;
    });
  };
  CHECK(decided(typo.key(), "admission", "reject"));
  CHECK(decided(big.key(), "admission", "preempt"));
  CHECK(decided("shop/batch", "preemption", "preempt"));
  CHECK(decided(big.key(), "admission", "preempt-dry-run"));
  CHECK(decided(small.key(), "admission", "admit"));
  for (const Json& d : decisions) {
    CHECK(d.contains("time"));
    CHECK(d["node"].is_string());
  }
  auto stopped = webhook.stop();
  REQUIRE(stopped.has_value());
  CHECK(WIFEXITED(*stopped));
  CHECK(WEXITSTATUS(*stopped) == 0);
}
