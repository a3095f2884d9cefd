// The binding admission webhook: AdmissionReview parsing and answers for every verdict of
// docs/reference.md §5, the actions a verdict asks for (and never twice, never on dry runs),
// failing open, malformed reviews, and the caches over a snapshot and over the reflectors' stores.
#include "tests/support/admission_review.h"
#include "webhook/binding_webhook.h"
#include "webhook/routes.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/reflector.h"
#include "policy/model.h"
#include "server/metrics.h"

// Pods are described with designated initializers naming only what matters to each test;
// GCC warns about the members left to their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace {

using nlohmann::json;
using nodewarden::server::HttpRequest;
using nodewarden::server::HttpResponse;
using nodewarden::server::MetricsRegistry;
using nodewarden::webhook::AdmissionActions;
using nodewarden::webhook::BindingReview;
using nodewarden::webhook::BindingWebhook;
using nodewarden::webhook::BindingWebhookOptions;
using nodewarden::webhook::parseBindingReview;
using nodewarden::webhook::RecordingAdmissionActions;
using nodewarden::webhook::ReviewRecord;
using nodewarden::webhook::ReviewVerdict;
using nodewarden::webhook::SnapshotClusterCache;
using nodewarden::webhook::StoreClusterCache;
namespace policy = nodewarden::policy;
namespace kube = nodewarden::kube;

// ---- objects ----

json nodeJson(const std::string& name, const std::string& memory = "4Gi",
              json conditions = json::array(), json labels = json::object()) {
  return json{{"metadata", {{"name", name}, {"labels", labels}}},
              {"status",
               {{"capacity", {{"cpu", "8"}, {"memory", memory}, {"pods", "110"}}},
                {"allocatable", {{"cpu", "8"}, {"memory", memory}, {"pods", "110"}}},
                {"conditions", conditions}}}};
}

struct PodArgs {
  std::string node;       // spec.nodeName
  std::string nominated;  // status.nominatedNodeName
  std::string memory;     // request; "" = BestEffort
  std::optional<int> priority;
  std::string priorityClass;
  std::string preemptionPolicy;
  bool terminating = false;
  bool disruptionTarget = false;  // condition DisruptionTarget=True, PreemptionByScheduler
  std::string startTime = "2026-01-01T00:00:00Z";
  json labels = json::object();
  json nodeSelector = json::object();
  std::string uid;  // default: "uid-<name>"
};

json podJson(const std::string& ns, const std::string& name, const PodArgs& a) {
  json container = {{"name", "c"}};
  if (!a.memory.empty()) {
    container["resources"] = {{"requests", {{"memory", a.memory}, {"cpu", "100m"}}}};
  }
  json pod = {{"metadata",
               {{"name", name},
                {"namespace", ns},
                {"uid", a.uid.empty() ? "uid-" + name : a.uid},
                {"labels", a.labels}}},
              {"spec", {{"containers", json::array({container})}}},
              {"status", {{"phase", a.node.empty() ? "Pending" : "Running"}}}};
  if (!a.node.empty()) pod["spec"]["nodeName"] = a.node;
  if (!a.nominated.empty()) pod["status"]["nominatedNodeName"] = a.nominated;
  if (a.priority) pod["spec"]["priority"] = *a.priority;
  if (!a.priorityClass.empty()) pod["spec"]["priorityClassName"] = a.priorityClass;
  if (!a.preemptionPolicy.empty()) pod["spec"]["preemptionPolicy"] = a.preemptionPolicy;
  if (!a.nodeSelector.empty()) pod["spec"]["nodeSelector"] = a.nodeSelector;
  if (a.terminating) pod["metadata"]["deletionTimestamp"] = "2026-01-01T01:00:00Z";
  if (a.disruptionTarget) {
    pod["status"]["conditions"] = json::array(
        {{{"type", "DisruptionTarget"}, {"status", "True"}, {"reason", "PreemptionByScheduler"}}});
  }
  if (!a.node.empty()) pod["status"]["startTime"] = a.startTime;
  return pod;
}

policy::Snapshot snapshotOf(json nodes, json pods, json classes = json::array(),
                            json pdbs = json::array()) {
  policy::Diagnostics diagnostics;
  json doc = {{"nodes", std::move(nodes)},
              {"pods", std::move(pods)},
              {"priorityClasses", std::move(classes)},
              {"podDisruptionBudgets", std::move(pdbs)}};
  auto snapshot = policy::parseSnapshot(doc, diagnostics);
  REQUIRE_MESSAGE(snapshot.has_value(), diagnostics.joined());
  REQUIRE_MESSAGE(diagnostics.empty(), diagnostics.joined());
  return std::move(*snapshot);
}

// ---- reviews ----

json reviewJson(const std::string& uid, const std::string& ns, const std::string& name,
                const std::string& node, bool dryRun = false) {
  return nodewarden::testing::bindingReview(uid, ns, name, node, "uid-" + name, dryRun);
}

HttpRequest post(const std::string& body) {
  HttpRequest request;
  request.method = "POST";
  request.target = "/v1/admission-review";
  request.body = body;
  request.headers["content-type"] = "application/json";
  return request;
}

// The AdmissionReview response, checked for its fixed parts.
json responseOf(const HttpResponse& response, const std::string& uid) {
  REQUIRE(response.status == 200);
  CHECK(response.contentType == "application/json");
  const json body = json::parse(response.body);
  CHECK(body["apiVersion"] == "admission.k8s.io/v1");
  CHECK(body["kind"] == "AdmissionReview");
  REQUIRE(body.contains("response"));
  CHECK(body["response"]["uid"] == uid);
  return body["response"];
}

std::string errorOf(const HttpResponse& response) {
  REQUIRE(response.status == 400);
  const json body = json::parse(response.body);
  REQUIRE(body.contains("error"));
  return body["error"].get<std::string>();
}

// A webhook over a snapshot with recording actions and a steppable clock.
struct Fixture {
  explicit Fixture(policy::Snapshot snapshot)
      : cache(std::move(snapshot)),
        webhook(cache, actions, policy::Policy::defaults(), &metrics, options()) {}

  BindingWebhookOptions options() {
    BindingWebhookOptions o;
    o.clock = &clock;
    o.onReview = [this](const ReviewRecord& r) { records.push_back(r); };
    return o;
  }

  json review(const std::string& uid, const std::string& ns, const std::string& name,
              const std::string& node, bool dryRun = false) {
    return responseOf(webhook.handle(post(reviewJson(uid, ns, name, node, dryRun).dump())), uid);
  }

  SnapshotClusterCache cache;
  RecordingAdmissionActions actions;
  MetricsRegistry metrics;
  nodewarden::ManualClock clock;
  std::vector<ReviewRecord> records;
  BindingWebhook webhook;
};

// node-1 (4Gi) is full: mid (prio 500, 1Gi), low-a (prio 10, 1.5Gi, older), low-b (prio 10,
// 1.5Gi, newer). nom-low (prio 5) is nominated to node-1. high (prio 1000, 1.5Gi) is pending.
policy::Snapshot preemptionCluster(bool victimsTerminating = false, bool highNominated = false,
                                   bool nomLowNominated = true) {
  json pods = json::array();
  pods.push_back(podJson("ns", "mid", {.node = "node-1", .memory = "1Gi", .priority = 500}));
  pods.push_back(podJson(
      "ns", "low-a",
      {.node = "node-1", .memory = "1536Mi", .priority = 10, .startTime = "2026-01-01T00:00:00Z"}));
  pods.push_back(podJson("ns", "low-b",
                         {.node = "node-1",
                          .memory = "1536Mi",
                          .priority = 10,
                          .terminating = victimsTerminating,
                          .startTime = "2026-01-02T00:00:00Z"}));
  pods.push_back(
      podJson("ns", "nom-low",
              {.nominated = nomLowNominated ? "node-1" : "", .memory = "100Mi", .priority = 5}));
  pods.push_back(
      podJson("ns", "high",
              {.nominated = highNominated ? "node-1" : "", .memory = "1536Mi", .priority = 1000}));
  return snapshotOf(json::array({nodeJson("node-1")}), pods);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parsing

TEST_CASE("parseBindingReview reads a scheduler's binding review") {
  auto review = parseBindingReview(reviewJson("u-1", "shop", "web-1", "worker-2", true).dump());
  REQUIRE_MESSAGE(review.ok(), (review.ok() ? "" : review.error().message));
  CHECK(review->uid == "u-1");
  CHECK(review->isBinding);
  CHECK(review->dryRun);
  CHECK(review->podKey() == "shop/web-1");
  CHECK(review->podUid == "uid-web-1");
  CHECK(review->node == "worker-2");
  CHECK(review->targetApiVersion.empty());  // the scheduler's literal has none
  CHECK(review->kind == "Binding");
  CHECK(review->operation == "CREATE");

  // The Binding's metadata may lack the namespace: the request's is used.
  json noNs = reviewJson("u-2", "shop", "web-1", "worker-2");
  noNs["request"]["object"]["metadata"].erase("namespace");
  noNs["request"]["object"]["target"]["apiVersion"] = "v1";
  auto second = parseBindingReview(noNs.dump());
  REQUIRE(second.ok());
  CHECK(second->podKey() == "shop/web-1");
  CHECK(second->targetApiVersion == "v1");
}

TEST_CASE("parseBindingReview names the JSON path of what is wrong") {
  auto errorFor = [](const std::string& body) {
    auto parsed = parseBindingReview(body);
    REQUIRE_FALSE(parsed.ok());
    return parsed.error().message;
  };
  json base = reviewJson("u-1", "ns", "p", "node-1");

  CHECK(errorFor("{not json").find("the body is not JSON: invalid JSON") == 0);
  CHECK(errorFor("[1,2]") == "the body: expected an AdmissionReview object, got an array");
  CHECK(errorFor("").find("not JSON") != std::string::npos);

  json wrongVersion = base;
  wrongVersion["apiVersion"] = "admission.k8s.io/v1beta1";
  CHECK(errorFor(wrongVersion.dump()) ==
        "apiVersion: expected \"admission.k8s.io/v1\", got \"admission.k8s.io/v1beta1\"");

  json wrongKind = base;
  wrongKind["kind"] = "Pod";
  CHECK(errorFor(wrongKind.dump()) == "kind: expected \"AdmissionReview\", got \"Pod\"");

  json noUid = base;
  noUid["request"].erase("uid");
  CHECK(errorFor(noUid.dump()) == "request.uid: missing (a string is required)");

  json noRequest = base;
  noRequest.erase("request");
  CHECK(errorFor(noRequest.dump()) == "request: missing (an object is required)");

  json targetName = base;
  targetName["request"]["object"]["target"]["name"] = 12;
  CHECK(errorFor(targetName.dump()) == "request.object.target.name: expected a string, got 12");

  json targetKind = base;
  targetKind["request"]["object"]["target"]["kind"] = "Pod";
  CHECK(errorFor(targetKind.dump()) ==
        "request.object.target.kind: expected \"Node\", got \"Pod\"");

  json noTarget = base;
  noTarget["request"]["object"].erase("target");
  CHECK(errorFor(noTarget.dump()) == "request.object.target: missing (an object is required)");

  json dryRun = base;
  dryRun["request"]["dryRun"] = "yes";
  CHECK(errorFor(dryRun.dump()) == "request.dryRun: expected true or false, got \"yes\"");

  json objectType = base;
  objectType["request"]["object"] = "binding";
  CHECK(errorFor(objectType.dump()) == "request.object: expected an object, got \"binding\"");

  // Several problems are all reported.
  json two = base;
  two["apiVersion"] = 1;
  two["request"]["uid"] = false;
  const std::string both = errorFor(two.dump());
  CHECK(both.find("apiVersion: expected \"admission.k8s.io/v1\", got 1") != std::string::npos);
  CHECK(both.find("request.uid: expected a string, got false") != std::string::npos);
}

TEST_CASE("a CREATE of the bindings resource is a binding too") {
  // What the real API server sends for POST /api/v1/namespaces/NS/bindings (`kubectl create
  // -f` of a Binding): resource "bindings", no subresource; it binds the pod just the same.
  json legacy = reviewJson("u-1", "shop", "web-1", "worker-2");
  legacy["request"]["resource"] = {{"group", ""}, {"version", "v1"}, {"resource", "bindings"}};
  legacy["request"]["subResource"] = nullptr;
  auto parsed = parseBindingReview(legacy.dump());
  REQUIRE(parsed.ok());
  CHECK(parsed->isBinding);
  CHECK(parsed->podKey() == "shop/web-1");
  CHECK(parsed->node == "worker-2");
  // bindings/status is no such thing: not a binding.
  legacy["request"]["subResource"] = "status";
  auto sub = parseBindingReview(legacy.dump());
  REQUIRE(sub.ok());
  CHECK_FALSE(sub->isBinding);
}

TEST_CASE("a review of something other than pods/binding CREATE parses as not a binding") {
  json pods = reviewJson("u-1", "ns", "p", "node-1");
  pods["request"]["subResource"] = nullptr;
  pods["request"]["object"] = {{"kind", "Pod"}};  // no target: not read for a non-binding
  auto parsed = parseBindingReview(pods.dump());
  REQUIRE(parsed.ok());
  CHECK_FALSE(parsed->isBinding);

  json update = reviewJson("u-2", "ns", "p", "node-1");
  update["request"]["operation"] = "UPDATE";
  auto second = parseBindingReview(update.dump());
  REQUIRE(second.ok());
  CHECK_FALSE(second->isBinding);
}

// ---------------------------------------------------------------------------------------------
// Verdicts

TEST_CASE("admit: allowed, uid echoed, no status, no actions") {
  json pods = json::array({podJson("ns", "old", {.node = "node-1", .memory = "1Gi"}),
                           podJson("ns", "p", {.memory = "1Gi", .priority = 100})});
  Fixture f(snapshotOf(json::array({nodeJson("node-1")}), pods));
  const json response = f.review("uid-admit-1", "ns", "p", "node-1");
  CHECK(response["allowed"] == true);
  CHECK_FALSE(response.contains("status"));
  CHECK_FALSE(response.contains("warnings"));
  CHECK(f.actions.calls.empty());
  REQUIRE(f.records.size() == 1);
  CHECK(f.records[0].verdict == ReviewVerdict::Admit);
  CHECK(f.records[0].pod == "ns/p");
  CHECK(f.records[0].node == "node-1");
  CHECK(f.metrics
            .counter("nodewarden_admissions_total", "Admission verdicts, by verdict and reason.",
                     {"verdict", "reason"})
            .value({"admit", ""}) == 1);
  CHECK(f.metrics.render().find("nodewarden_admission_review_duration_seconds_count 1") !=
        std::string::npos);
}

TEST_CASE("reject PriorityClassNotFound: 403 with the reason in status.message") {
  json pods = json::array({podJson("ns", "p", {.memory = "1Gi", .priorityClass = "gold"})});
  Fixture f(snapshotOf(json::array({nodeJson("node-1")}), pods));
  const json response = f.review("u-pc", "ns", "p", "node-1");
  CHECK(response["allowed"] == false);
  CHECK(response["status"]["code"] == 403);
  CHECK(response["status"]["reason"] == "PriorityClassNotFound");
  CHECK(response["status"]["message"] == "PriorityClassNotFound");  // docs/reference.md §7
  CHECK(response["status"]["details"]["causes"][0]["message"] ==
        "PriorityClassNotFound: no PriorityClass with name gold was found");
  CHECK(f.actions.calls.empty());
}

TEST_CASE("reject Evicted under nodewarden's own pressure conditions") {
  json memory = json::array({{{"type", "NodewardenMemoryPressure"}, {"status", "True"}},
                             {{"type", "MemoryPressure"}, {"status", "False"}}});
  json disk = json::array({{{"type", "NodewardenDiskPressure"}, {"status", "True"}}});
  json off = json::array({{{"type", "NodewardenMemoryPressure"}, {"status", "False"}}});
  json pods = json::array(
      {podJson("ns", "best-effort", {}), podJson("ns", "burstable", {.memory = "100Mi"})});
  Fixture f(snapshotOf(
      json::array({nodeJson("node-mem", "4Gi", memory), nodeJson("node-disk", "4Gi", disk),
                   nodeJson("node-off", "4Gi", off)}),
      pods));

  // Memory pressure turns away BestEffort pods only.
  json response = f.review("u-1", "ns", "best-effort", "node-mem");
  CHECK(response["allowed"] == false);
  CHECK(response["status"]["reason"] == "Evicted");
  CHECK(response["status"]["details"]["causes"][0]["message"] ==
        "Evicted: The node had condition: [MemoryPressure]. ");
  CHECK(f.review("u-2", "ns", "burstable", "node-mem")["allowed"] == true);

  // Any other pressure turns away every non-critical pod.
  response = f.review("u-3", "ns", "burstable", "node-disk");
  CHECK(response["allowed"] == false);
  CHECK(response["status"]["details"]["causes"][0]["message"] ==
        "Evicted: The node had condition: [DiskPressure]. ");

  // "False" is no pressure.
  CHECK(f.review("u-4", "ns", "best-effort", "node-off")["allowed"] == true);
  CHECK(f.actions.calls.empty());
}

TEST_CASE("reject NodeAffinity and TaintToleration") {
  json tainted = nodeJson("node-t");
  tainted["spec"] = {{"taints", json::array({{{"key", "dedicated"}, {"effect", "NoExecute"}}})}};
  json pods =
      json::array({podJson("ns", "picky", {.memory = "1Gi", .nodeSelector = {{"disk", "ssd"}}}),
                   podJson("ns", "plain", {.memory = "1Gi"})});
  Fixture f(snapshotOf(
      json::array({nodeJson("node-1", "4Gi", json::array(), {{"disk", "hdd"}}), tainted}), pods));
  json response = f.review("u-1", "ns", "picky", "node-1");
  CHECK(response["allowed"] == false);
  CHECK(response["status"]["reason"] == "NodeAffinity");
  CHECK(response["status"]["details"]["causes"][0]["message"].get<std::string>().starts_with(
      "NodeAffinity: "));
  response = f.review("u-2", "ns", "plain", "node-t");
  CHECK(response["status"]["reason"] == "TaintToleration");
}

TEST_CASE("reject OutOfmemory for a pod that may not preempt") {
  json pods = json::array(
      {podJson("ns", "big", {.node = "node-1", .memory = "4Gi", .priority = 10}),
       podJson("ns", "p", {.memory = "1Gi", .priority = 1000, .preemptionPolicy = "Never"})});
  Fixture f(snapshotOf(json::array({nodeJson("node-1")}), pods));
  const json response = f.review("u-never", "ns", "p", "node-1");
  CHECK(response["allowed"] == false);
  CHECK(response["status"]["code"] == 403);
  CHECK(response["status"]["reason"] == "OutOfmemory");
  CHECK(response["status"]["details"]["causes"][0]["message"] ==
        "OutOfmemory: Node didn't have enough resource: memory, requested: 1073741824, used: "
        "4294967296, capacity: 4294967296");
  CHECK(f.actions.calls.empty());
}

TEST_CASE("wait: room comes once terminating pods are gone; denied, no eviction") {
  json pods = json::array(
      {podJson("ns", "going",
               {.node = "node-1", .memory = "2Gi", .priority = 10, .terminating = true}),
       podJson("ns", "stays", {.node = "node-1", .memory = "2Gi", .priority = 10}),
       podJson("ns", "p", {.memory = "2Gi", .priority = 1000})});
  Fixture f(snapshotOf(json::array({nodeJson("node-1")}), pods));
  const json response = f.review("u-wait", "ns", "p", "node-1");
  CHECK(response["allowed"] == false);
  CHECK(response["status"]["reason"] == "OutOfmemory");
  const std::string message = response["status"]["details"]["causes"][0]["message"];
  CHECK(message.starts_with("OutOfmemory: Node didn't have enough resource: memory"));
  CHECK(message.find("it fits once the terminating pods on the node are gone") !=
        std::string::npos);
  REQUIRE(f.records.size() == 1);
  CHECK(f.records[0].verdict == ReviewVerdict::Wait);
  CHECK(f.actions.calls.empty());
}

TEST_CASE(
    "preempt: denied naming the victims; victims evicted, pod nominated, nominations cleared") {
  Fixture f(preemptionCluster());
  const json response = f.review("u-preempt", "ns", "high", "node-1");
  CHECK(response["allowed"] == false);
  CHECK(response["status"]["code"] == 403);
  CHECK(response["status"]["reason"] == "OutOfmemory");
  const std::string message = response["status"]["details"]["causes"][0]["message"];
  CHECK(message.starts_with("OutOfmemory: Node didn't have enough resource: memory"));
  CHECK(message.ends_with("; preempting 1 lower-priority pod(s): ns/low-b"));

  REQUIRE(f.actions.calls.size() == 2);
  CHECK(f.actions.calls[0].what == "preempt");
  CHECK(f.actions.calls[0].pod == "ns/high");
  CHECK(f.actions.calls[0].node == "node-1");
  CHECK(f.actions.calls[0].victims == std::vector<std::string>{"ns/low-b"});
  CHECK(f.actions.calls[1].what == "clearNomination");
  CHECK(f.actions.calls[1].pod == "ns/nom-low");

  REQUIRE(f.records.size() == 1);
  CHECK(f.records[0].verdict == ReviewVerdict::Preempt);
  CHECK(f.records[0].victims == std::vector<std::string>{"ns/low-b"});
  CHECK(f.records[0].nominationsCleared == std::vector<std::string>{"ns/nom-low"});
  CHECK(f.records[0].acted);
}

TEST_CASE("a second review while the victims terminate waits and does not evict again") {
  Fixture f(preemptionCluster());
  CHECK(f.review("u-1", "ns", "high", "node-1")["allowed"] == false);
  REQUIRE(f.actions.calls.size() == 2);

  // What the cluster looks like a moment later: the victim terminating, high nominated to
  // node-1, nom-low's nomination cleared.
  f.cache.reset(preemptionCluster(/*victimsTerminating=*/true, /*highNominated=*/true,
                                  /*nomLowNominated=*/false));
  f.clock.advance(std::chrono::minutes(10));  // long past the action memory: §5 alone must hold
  const json response = f.review("u-2", "ns", "high", "node-1");
  CHECK(response["allowed"] == false);
  CHECK(response["status"]["details"]["causes"][0]["message"].get<std::string>().find(
            "once the terminating pods") != std::string::npos);
  REQUIRE(f.records.size() == 2);
  CHECK(f.records[1].verdict == ReviewVerdict::Wait);
  CHECK_FALSE(f.records[1].acted);
  CHECK(f.actions.calls.size() == 2);  // nothing new

  // Once the victim is gone the pod is admitted.
  policy::Snapshot gone = preemptionCluster(false, true, false);
  gone.pods.erase(std::remove_if(gone.pods.begin(), gone.pods.end(),
                                 [](const policy::Pod& p) { return p.name == "low-b"; }),
                  gone.pods.end());
  f.cache.reset(std::move(gone));
  CHECK(f.review("u-3", "ns", "high", "node-1")["allowed"] == true);
  CHECK(f.actions.calls.size() == 2);
}

TEST_CASE(
    "async preemption: nominated before its victims are deleted, the pod waits, no eviction") {
  // The scheduler (SchedulerAsyncPreemption, on since 1.33) nominated high to node-1 and
  // marked low-b DisruptionTarget=True before deleting it; the binding arrives in between.
  json pods = json::array();
  pods.push_back(podJson("ns", "mid", {.node = "node-1", .memory = "1Gi", .priority = 500}));
  pods.push_back(podJson("ns", "low-a", {.node = "node-1", .memory = "1536Mi", .priority = 10}));
  pods.push_back(
      podJson("ns", "low-b",
              {.node = "node-1", .memory = "1536Mi", .priority = 10, .disruptionTarget = true}));
  pods.push_back(
      podJson("ns", "high", {.nominated = "node-1", .memory = "1536Mi", .priority = 1000}));
  Fixture f(snapshotOf(json::array({nodeJson("node-1")}), pods));
  const json response = f.review("u-async", "ns", "high", "node-1");
  CHECK(response["allowed"] == false);
  REQUIRE(f.records.size() == 1);
  CHECK(f.records[0].verdict == ReviewVerdict::Wait);
  CHECK_FALSE(f.records[0].acted);
  CHECK(f.actions.calls.empty());  // low-b is the scheduler's to delete, not ours to evict again
}

TEST_CASE("a nomination as a plain reservation (1.35): the pod's own does not count against it") {
  // res (prio 100, 2.5Gi) reserved node-1 (NominatedNodeNameForExpectation) where mid holds
  // 1Gi of 4Gi: it fits once, and would not if its reservation were counted beside it.
  json pods = json::array();
  pods.push_back(podJson("ns", "mid", {.node = "node-1", .memory = "1Gi", .priority = 500}));
  pods.push_back(
      podJson("ns", "res", {.nominated = "node-1", .memory = "2560Mi", .priority = 100}));
  pods.push_back(podJson("ns", "other", {.memory = "1Gi", .priority = 50}));
  Fixture f(snapshotOf(json::array({nodeJson("node-1")}), pods));
  CHECK(f.review("u-res", "ns", "res", "node-1")["allowed"] == true);
  CHECK(f.actions.calls.empty());
  // Another, lower-priority pod may not take the reserved room.
  const json other = f.review("u-other", "ns", "other", "node-1");
  CHECK(other["allowed"] == false);
  CHECK(other["status"]["reason"] == "OutOfmemory");
}

TEST_CASE("a repeated review before the cache shows the eviction does not evict twice") {
  Fixture f(preemptionCluster());
  CHECK(f.review("u-1", "ns", "high", "node-1")["allowed"] == false);
  REQUIRE(f.actions.calls.size() == 2);
  f.clock.advance(std::chrono::seconds(5));
  CHECK(f.review("u-2", "ns", "high", "node-1")["allowed"] == false);
  CHECK(f.records.at(1).verdict == ReviewVerdict::Preempt);
  CHECK_FALSE(f.records.at(1).acted);
  CHECK(f.actions.calls.size() == 2);
  // After the memory (120 s) the same decision acts again: something went wrong with the first.
  f.clock.advance(std::chrono::seconds(200));
  CHECK(f.review("u-3", "ns", "high", "node-1")["allowed"] == false);
  CHECK(f.actions.calls.size() == 4);
}

TEST_CASE("a dryRun review gets the verdict but never acts") {
  Fixture f(preemptionCluster());
  const json response = f.review("u-dry", "ns", "high", "node-1", /*dryRun=*/true);
  CHECK(response["allowed"] == false);
  CHECK(response["status"]["details"]["causes"][0]["message"].get<std::string>().ends_with(
      "ns/low-b"));
  CHECK(f.actions.calls.empty());
  REQUIRE(f.records.size() == 1);
  CHECK(f.records[0].dryRun);
  CHECK_FALSE(f.records[0].acted);
  // And it leaves no memory behind: a real review afterwards acts.
  f.review("u-real", "ns", "high", "node-1");
  CHECK(f.actions.calls.size() == 2);
}

// ---------------------------------------------------------------------------------------------
// The verdict mapping

TEST_CASE("each §5 verdict is its own review verdict and keeps its name; failing open is apart") {
  using nodewarden::webhook::reviewVerdictName;
  using nodewarden::webhook::reviewVerdictOf;
  const std::vector<std::pair<policy::Verdict, ReviewVerdict>> rows = {
      {policy::Verdict::Admit, ReviewVerdict::Admit},
      {policy::Verdict::Reject, ReviewVerdict::Reject},
      {policy::Verdict::Wait, ReviewVerdict::Wait},
      {policy::Verdict::Preempt, ReviewVerdict::Preempt}};
  for (const auto& [verdict, review] : rows) {
    CAPTURE(policy::verdictName(verdict));
    CHECK(reviewVerdictOf(verdict) == review);
    CHECK(std::string(reviewVerdictName(review)) == policy::verdictName(verdict));
    CHECK(std::string(reviewVerdictName(review)) != "allow-unchecked");
  }
  // The label docs/reference.md §7 and the shipped alert rules count failed-open reviews by.
  CHECK(std::string(reviewVerdictName(ReviewVerdict::FailedOpen)) == "allow-unchecked");
}

TEST_CASE(
    "answerFor: admit is allowed bare; a denial carries the §5 reason; preempt names victims") {
  using nodewarden::webhook::answerFor;
  policy::AdmissionDecision admit;
  admit.verdict = policy::Verdict::Admit;
  const auto allowed = answerFor(admit);
  CHECK(allowed.allowed);
  CHECK(allowed.reason.empty());
  CHECK(allowed.detail.empty());
  CHECK(allowed.warnings.empty());

  policy::AdmissionDecision reject;
  reject.verdict = policy::Verdict::Reject;
  reject.reason = "NodeAffinity";
  reject.message = "node(s) didn't match Pod's node affinity/selector";
  const auto denied = answerFor(reject);
  CHECK_FALSE(denied.allowed);
  CHECK(denied.code == 403);
  CHECK(denied.reason == "NodeAffinity");
  CHECK(denied.message == "NodeAffinity");  // docs/reference.md §7: the reason, not the story
  CHECK(denied.detail == "NodeAffinity: node(s) didn't match Pod's node affinity/selector");

  // Preempt: the victims follow the message, the first 20 by name.
  std::vector<policy::Pod> pods(23);
  policy::AdmissionDecision preempt;
  preempt.verdict = policy::Verdict::Preempt;
  preempt.reason = "OutOfmemory";
  preempt.message = "no room";
  for (std::size_t i = 0; i < pods.size(); ++i) {
    pods[i].key = "ns/v" + std::to_string(i);
    preempt.victims.push_back(&pods[i]);
  }
  const auto preempting = answerFor(preempt);
  CHECK_FALSE(preempting.allowed);
  CHECK(preempting.detail.starts_with("OutOfmemory: no room: ns/v0, ns/v1, "));
  CHECK(preempting.detail.ends_with(", ns/v19 and 3 more"));
  CHECK(preempting.detail.find("ns/v20") == std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The action memory

TEST_CASE("dedup keys name the action and its pods by uid, by namespace/name without one") {
  using nodewarden::webhook::clearNominationKey;
  using nodewarden::webhook::evictionKey;
  policy::Pod high;
  high.key = "ns/high";
  high.uid = "uid-high";
  policy::Pod low;
  low.key = "ns/low";
  low.uid = "uid-low";
  policy::Pod noUid;
  noUid.key = "ns/static";
  CHECK(evictionKey(high, low) == "evict/uid-high/uid-low");
  CHECK(evictionKey(low, high) == "evict/uid-low/uid-high");  // who makes room for whom
  CHECK(evictionKey(high, noUid) == "evict/uid-high/ns/static");
  CHECK(clearNominationKey(low, "node-1") == "clear/uid-low/node-1");
  CHECK(clearNominationKey(noUid, "node-2") == "clear/ns/static/node-2");
  // A nomination cleared on one node is another action than on the next.
  CHECK(clearNominationKey(low, "node-1") != clearNominationKey(low, "node-2"));
}

TEST_CASE("ActionMemory holds a key for its span, then lets it be requested again") {
  nodewarden::webhook::ActionMemory memory(std::chrono::seconds(120));
  nodewarden::ManualClock clock;
  CHECK_FALSE(memory.recent("evict/a/b", clock.now()));
  memory.remember("evict/a/b", clock.now());
  CHECK(memory.recent("evict/a/b", clock.now()));
  CHECK_FALSE(memory.recent("evict/a/c", clock.now()));
  clock.advance(std::chrono::seconds(119));
  CHECK(memory.recent("evict/a/b", clock.now()));
  clock.advance(std::chrono::seconds(1));
  CHECK_FALSE(memory.recent("evict/a/b", clock.now()));  // exactly the span: expired
  // Remembering again starts a new span.
  memory.remember("evict/a/b", clock.now());
  clock.advance(std::chrono::seconds(60));
  CHECK(memory.recent("evict/a/b", clock.now()));
}

TEST_CASE("ActionMemory drops expired keys once it holds many, and keeps the live ones") {
  nodewarden::webhook::ActionMemory memory(std::chrono::seconds(10));
  nodewarden::ManualClock clock;
  for (int i = 0; i < 5000; ++i) memory.remember("old/" + std::to_string(i), clock.now());
  CHECK(memory.size() == 5000);
  clock.advance(std::chrono::seconds(5));
  memory.remember("live", clock.now());
  CHECK(memory.size() == 5001);  // nothing expired yet
  clock.advance(std::chrono::seconds(6));
  memory.remember("new", clock.now());
  CHECK(memory.size() == 2);  // "live" (6 s old) and "new"
  CHECK(memory.recent("live", clock.now()));
  CHECK_FALSE(memory.recent("old/0", clock.now()));
}

// ---------------------------------------------------------------------------------------------
// Failing open and bad requests

TEST_CASE("a review that is not a pods/binding CREATE is allowed with a warning") {
  Fixture f(preemptionCluster());
  json pods = reviewJson("u-np", "ns", "high", "node-1");
  pods["request"]["subResource"] = "";
  const json response = responseOf(f.webhook.handle(post(pods.dump())), "u-np");
  CHECK(response["allowed"] == true);
  REQUIRE(response["warnings"].size() == 1);
  CHECK(response["warnings"][0].get<std::string>().starts_with(
      "nodewarden only reviews pods/binding and bindings"));
  CHECK(f.actions.calls.empty());
  CHECK(f.records.at(0).verdict == ReviewVerdict::FailedOpen);
  CHECK(f.records.at(0).reason == "NotABinding");
}

TEST_CASE("an unknown pod or node is allowed with a warning that says why") {
  Fixture f(preemptionCluster());
  json response = f.review("u-pod", "ns", "ghost", "node-1");
  CHECK(response["allowed"] == true);
  CHECK(response["warnings"][0] ==
        "nodewarden: pod ns/ghost is not in its cache yet; allowed unchecked");
  response = f.review("u-node", "ns", "high", "node-9");
  CHECK(response["allowed"] == true);
  CHECK(response["warnings"][0] ==
        "nodewarden: node node-9 is not in its cache yet; allowed unchecked");

  // A same-named pod with another uid: the cache is behind.
  json otherUid = reviewJson("u-uid", "ns", "high", "node-1");
  otherUid["request"]["object"]["metadata"]["uid"] = "uid-new";
  response = responseOf(f.webhook.handle(post(otherUid.dump())), "u-uid");
  CHECK(response["allowed"] == true);
  CHECK(response["warnings"][0].get<std::string>().find("older pod ns/high") != std::string::npos);
  CHECK(f.actions.calls.empty());
}

TEST_CASE("malformed reviews get a 400 naming the problem, never a crash") {
  Fixture f(preemptionCluster());
  CHECK(errorOf(f.webhook.handle(post("{\"apiVersion\":")))
            .starts_with("not an admission.k8s.io/v1 AdmissionReview: the body is not JSON"));
  json noUid = reviewJson("u", "ns", "high", "node-1");
  noUid["request"].erase("uid");
  CHECK(errorOf(f.webhook.handle(post(noUid.dump())))
            .ends_with("request.uid: missing (a string is required)"));
  json notNode = reviewJson("u", "ns", "high", "node-1");
  notNode["request"]["object"]["target"]["kind"] = "Pod";
  CHECK(errorOf(f.webhook.handle(post(notNode.dump())))
            .ends_with("request.object.target.kind: expected \"Node\", got \"Pod\""));
  json wrongType = reviewJson("u", "ns", "high", "node-1");
  wrongType["request"]["object"]["target"]["name"] = 12;
  CHECK(errorOf(f.webhook.handle(post(wrongType.dump())))
            .ends_with("request.object.target.name: expected a string, got 12"));

  // Big and deep bodies (the server's body limit answers 413 before this; the handler copes
  // anyway).
  CHECK(errorOf(f.webhook.handle(post(std::string(8u << 20, 'x')))).find("not JSON") !=
        std::string::npos);
  CHECK(errorOf(f.webhook.handle(post(std::string(200000, '[') + std::string(200000, ']'))))
            .find("expected an AdmissionReview object, got an array") != std::string::npos);
  json huge = reviewJson("u-huge", "ns", "high", "node-1");
  huge["request"]["object"]["metadata"]["annotations"] = {{"x", std::string(3u << 20, 'a')}};
  CHECK(responseOf(f.webhook.handle(post(huge.dump())), "u-huge")["allowed"] == false);

  HttpRequest get = post("");
  get.method = "GET";
  CHECK(f.webhook.handle(get).status == 405);
  CHECK(f.actions.calls.size() == 2);  // only the huge-but-valid review acted
  CHECK(f.metrics.render().find("nodewarden_admission_review_errors_total 7") != std::string::npos);
}

TEST_CASE("admissionReviewResponse: status only when denied, warnings only when present") {
  nodewarden::webhook::ReviewAnswer allowed;
  CHECK(json::parse(nodewarden::webhook::admissionReviewResponse("a\"b", allowed)) ==
        json::parse(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
                        "response":{"uid":"a\"b","allowed":true}})"));
  nodewarden::webhook::ReviewAnswer denied{false, 403, "Evicted", "Evicted", "Evicted: x", {"w"}};
  CHECK(json::parse(nodewarden::webhook::admissionReviewResponse("u", denied)) ==
        json::parse(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
                        "response":{"uid":"u","allowed":false,
                                    "status":{"code":403,"reason":"Evicted","message":"Evicted",
                                              "details":{"causes":[{"reason":"Evicted",
                                                                    "message":"Evicted: x"}]}},
                                    "warnings":["w"]}})"));
}

// ---------------------------------------------------------------------------------------------
// StoreClusterCache

namespace {

struct Stores {
  kube::Store<policy::Pod> pods{"Pod", policy::parsePod};
  kube::Store<policy::Node> nodes{"Node", policy::parseNode};
  kube::Store<policy::PriorityClass> classes{"PriorityClass", policy::parsePriorityClass};
  kube::Store<policy::PodDisruptionBudget> pdbs{"PodDisruptionBudget",
                                                policy::parsePodDisruptionBudget};
};

std::vector<std::string> keys(const std::vector<const policy::Pod*>& pods) {
  std::vector<std::string> out;
  for (const policy::Pod* p : pods) out.push_back(p->key);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("StoreClusterCache indexes pods by node and nomination and follows watch events") {
  Stores s;
  StoreClusterCache cache(s.pods, s.nodes, s.classes, s.pdbs);
  s.nodes.replace({nodeJson("node-1"), nodeJson("node-2")});
  s.classes.replace({json{{"metadata", {{"name", "gold"}}}, {"value", 700}}});
  cache.podSink().replace({podJson("ns", "a", {.node = "node-1", .memory = "1Gi"}),
                           podJson("ns", "b", {.node = "node-2", .memory = "1Gi"}),
                           podJson("ns", "n", {.nominated = "node-1", .priorityClass = "gold"}),
                           podJson("ns", "done", {.node = "node-1"})});
  // A finished pod holds nothing.
  json done = podJson("ns", "done", {.node = "node-1"});
  done["status"]["phase"] = "Succeeded";
  cache.podSink().apply("MODIFIED", done);

  cache.refresh();
  CHECK(cache.fullRebuilds() == 1);
  auto info = cache.nodeInfo("node-1");
  REQUIRE(info.has_value());
  CHECK(info->node->name == "node-1");
  CHECK(keys(info->pods) == std::vector<std::string>{"ns/a"});
  CHECK(keys(info->nominated) == std::vector<std::string>{"ns/n"});
  REQUIRE(cache.findPod("ns/n") != nullptr);
  CHECK(cache.findPod("ns/n")->priority == 700);  // resolved against the classes
  CHECK(cache.findPod("ns/a")->requests.at("memory") == 1073741824);
  CHECK_FALSE(cache.nodeInfo("node-9").has_value());

  // Watch events through the sink: one pod each, no rebuild.
  cache.podSink().apply("MODIFIED",
                        podJson("ns", "n", {.node = "node-1", .priorityClass = "gold"}));  // bound
  cache.podSink().apply("ADDED", podJson("ns", "c", {.node = "node-2", .memory = "1Gi"}));
  cache.podSink().apply("DELETED", podJson("ns", "a", {.node = "node-1"}));
  cache.refresh();
  CHECK(cache.fullRebuilds() == 1);
  CHECK(cache.podUpdates() == 3);
  info = cache.nodeInfo("node-1");
  CHECK(keys(info->pods) == std::vector<std::string>{"ns/n"});
  CHECK(info->nominated.empty());
  CHECK(keys(cache.nodeInfo("node-2")->pods) == std::vector<std::string>{"ns/b", "ns/c"});
  CHECK(cache.findPod("ns/a") == nullptr);

  // A change the sink did not see (the store fed directly) rebuilds.
  s.pods.apply("ADDED", podJson("ns", "d", {.node = "node-2"}));
  cache.refresh();
  CHECK(cache.fullRebuilds() == 2);
  CHECK(keys(cache.nodeInfo("node-2")->pods) == std::vector<std::string>{"ns/b", "ns/c", "ns/d"});
  // So does a priority class change, and priorities follow.
  s.classes.apply("MODIFIED", json{{"metadata", {{"name", "gold"}}}, {"value", 800}});
  cache.refresh();
  CHECK(cache.fullRebuilds() == 3);
  CHECK(cache.findPod("ns/n")->priority == 800);
  // Nothing changed: nothing done.
  cache.refresh();
  CHECK(cache.fullRebuilds() == 3);
  CHECK(cache.podUpdates() == 3);
}

TEST_CASE("StoreClusterCache maps nodewarden's conditions and keeps lookups stable until refresh") {
  Stores s;
  StoreClusterCache cache(s.pods, s.nodes, s.classes, s.pdbs);
  s.nodes.replace({nodeJson(
      "node-1", "4Gi", json::array({{{"type", "NodewardenPIDPressure"}, {"status", "True"}}}))});
  s.pdbs.replace({json{{"metadata", {{"name", "b"}, {"namespace", "ns"}}},
                       {"spec", {{"selector", {{"matchLabels", {{"app", "x"}}}}}}},
                       {"status", {{"disruptionsAllowed", 0}}}}});
  cache.refresh();
  auto info = cache.nodeInfo("node-1");
  REQUIRE(info.has_value());
  const auto& conditions = info->node->conditions;
  CHECK(std::any_of(conditions.begin(), conditions.end(), [](const policy::NodeCondition& c) {
    return c.type == "PIDPressure" && c.status == "True";
  }));
  CHECK(cache.podDisruptionBudgets().size() == 1);

  // The store changes; the node handed out stays valid and unchanged until refresh().
  const policy::Node* before = info->node;
  s.nodes.replace({nodeJson("node-1", "8Gi")});
  CHECK(before->allocatable.at("memory").value() == 4294967296);
  cache.refresh();
  CHECK(cache.nodeInfo("node-1")->node->allocatable.at("memory").value() == 8589934592);
}

TEST_CASE("the webhook decides the same over the stores as over a snapshot") {
  // A cluster with some of everything, in both caches.
  json nodes = json::array({nodeJson("node-1"), nodeJson("node-2", "2Gi")});
  json pods = json::array();
  for (int i = 0; i < 6; ++i) {
    pods.push_back(podJson("ns", "run-" + std::to_string(i),
                           {.node = i % 2 == 0 ? "node-1" : "node-2",
                            .memory = "600Mi",
                            .priority = i * 100,
                            .terminating = i == 3}));
  }
  for (int i = 0; i < 4; ++i) {
    pods.push_back(podJson("ns", "pending-" + std::to_string(i),
                           {.nominated = i == 1 ? "node-1" : "",
                            .memory = std::to_string(i + 1) + "00Mi",
                            .priority = 250 * i}));
  }
  Stores s;
  StoreClusterCache stores(s.pods, s.nodes, s.classes, s.pdbs);
  s.nodes.replace({nodes[0], nodes[1]});
  std::vector<json> items(pods.begin(), pods.end());
  stores.podSink().replace(items);
  SnapshotClusterCache snapshot(snapshotOf(nodes, pods));

  RecordingAdmissionActions actionsA, actionsB;
  BindingWebhook a(stores, actionsA, policy::Policy::defaults());
  BindingWebhook b(snapshot, actionsB, policy::Policy::defaults());
  int denied = 0;
  for (int i = 0; i < 4; ++i) {
    for (const char* node : {"node-1", "node-2"}) {
      const std::string body =
          reviewJson("u", "ns", "pending-" + std::to_string(i), node, true).dump();
      const json ra = json::parse(a.handle(post(body)).body);
      const json rb = json::parse(b.handle(post(body)).body);
      CHECK(ra == rb);
      if (ra["response"]["allowed"] == false) ++denied;
    }
  }
  CHECK(denied > 0);
  CHECK(denied < 8);
}

TEST_CASE("a review at 1,000 nodes x 30 pods after the index is built (measured, not timed)") {
  Stores s;
  StoreClusterCache cache(s.pods, s.nodes, s.classes, s.pdbs);
  std::vector<json> nodes;
  std::vector<json> pods;
  for (int n = 0; n < 1000; ++n) {
    const std::string node = "node-" + std::to_string(n);
    nodes.push_back(nodeJson(node, "64Gi"));
    for (int p = 0; p < 30; ++p) {
      pods.push_back(podJson("ns-" + std::to_string(p % 7), node + "-pod-" + std::to_string(p),
                             {.node = node, .memory = "2Gi", .priority = p * 10}));
    }
  }
  pods.push_back(podJson("ns", "incoming", {.memory = "8Gi", .priority = 1000}));
  s.nodes.replace(nodes);
  cache.podSink().replace(pods);

  using std::chrono::steady_clock;
  auto t0 = steady_clock::now();
  cache.refresh();
  const double rebuildMs =
      std::chrono::duration<double, std::milli>(steady_clock::now() - t0).count();

  RecordingAdmissionActions actions;
  BindingWebhook webhook(cache, actions, policy::Policy::defaults());
  std::vector<double> micros;
  for (int i = 0; i < 200; ++i) {
    // A pod changes between reviews, as in a busy cluster: one incremental update each.
    cache.podSink().apply(
        "MODIFIED", podJson("ns-" + std::to_string(i % 7),
                            "node-" + std::to_string(i % 1000) + "-pod-" + std::to_string(i % 7),
                            {.node = "node-" + std::to_string(i % 1000),
                             .memory = i % 2 ? "2Gi" : "1Gi",
                             .priority = (i % 7) * 10}));
    const std::string body =
        reviewJson("u", "ns", "incoming", "node-" + std::to_string((i * 37) % 1000), true).dump();
    const auto start = steady_clock::now();
    const HttpResponse response = webhook.handle(post(body));
    micros.push_back(
        std::chrono::duration<double, std::micro>(steady_clock::now() - start).count());
    REQUIRE(response.status == 200);
  }
  CHECK(cache.fullRebuilds() == 1);
  CHECK(cache.podUpdates() == 200);
  std::sort(micros.begin(), micros.end());
  MESSAGE("1000 nodes x 30 pods: full index build "
          << rebuildMs
          << " ms; review (incl. JSON "
             "parse, one incremental pod update, admitPod, answer) median "
          << micros[micros.size() / 2] << " us, p99 " << micros[micros.size() * 99 / 100]
          << " us, max " << micros.back() << " us");
  CHECK(actions.calls.empty());  // dry runs
}

// ---------------------------------------------------------------------------------------------
// The router of `nodewarden webhook`

namespace {

HttpRequest request(const std::string& method, const std::string& target,
                    const std::string& body = "") {
  HttpRequest r;
  r.method = method;
  r.target = target;
  r.body = body;
  return r;
}

std::string errorIn(const HttpResponse& response) {
  return json::parse(response.body).at("error").get<std::string>();
}

// The router over a webhook that admits ns/p on node-1, with probes that answer what the
// test sets.
struct RoutedFixture {
  RoutedFixture()
      : fixture(snapshotOf(json::array({nodeJson("node-1")}),
                           json::array({podJson("ns", "p", {.memory = "1Gi"})}))) {
    routes.probes.liveness = [] { return nodewarden::server::Probe{true, {{"status", "ok"}}}; };
    routes.probes.readiness = [this] {
      return nodewarden::server::Probe{ready, {{"status", ready ? "ready" : "not ready"}}};
    };
    routes.probes.metrics = [] { return std::string("nodewarden_up 1\n"); };
  }

  HttpResponse serve(const HttpRequest& r) {
    return nodewarden::webhook::serveWebhook(fixture.webhook, routes, r);
  }

  Fixture fixture;
  nodewarden::webhook::WebhookRoutes routes;
  bool ready = false;
};

}  // namespace

TEST_CASE("the webhook's router: probes, the review, and 404 naming the paths there are") {
  RoutedFixture f;
  CHECK(f.serve(request("GET", "/healthz")).status == 200);
  CHECK(f.serve(request("GET", "/readyz")).status == 503);
  f.ready = true;
  CHECK(f.serve(request("GET", "/readyz")).status == 200);
  const HttpResponse metrics = f.serve(request("GET", "/metrics"));
  CHECK(metrics.status == 200);
  CHECK(metrics.body == "nodewarden_up 1\n");
  CHECK(f.serve(request("POST", "/healthz")).status == 405);

  // The API server calls the webhook with ?timeout=10s appended.
  const std::string body = reviewJson("u-routed", "ns", "p", "node-1").dump();
  const json answer =
      responseOf(f.serve(request("POST", "/v1/admission-review?timeout=10s", body)), "u-routed");
  CHECK(answer["allowed"] == true);
  REQUIRE(f.fixture.records.size() == 1);
  CHECK(f.fixture.records[0].verdict == ReviewVerdict::Admit);

  const HttpResponse wrongMethod = f.serve(request("GET", "/v1/admission-review"));
  CHECK(wrongMethod.status == 405);
  CHECK(errorIn(wrongMethod) == "GET is not allowed: POST an AdmissionReview");

  const HttpResponse unknown = f.serve(request("POST", "/v1/admit?x=1"));
  CHECK(unknown.status == 404);
  CHECK(unknown.contentType == "application/json");
  CHECK(errorIn(unknown) ==
        "no such path: /v1/admit (try POST /v1/admission-review, /healthz, /readyz, /metrics)");
  CHECK(f.fixture.records.size() == 1);  // only the one review reached the webhook
}

TEST_CASE("with --tls-client-ca only a verified client reaches the review; probes need none") {
  RoutedFixture f;
  f.routes.requireClientCertificate = true;
  const std::string body = reviewJson("u-cert", "ns", "p", "node-1").dump();

  const HttpResponse refused = f.serve(request("POST", "/v1/admission-review", body));
  CHECK(refused.status == 403);
  CHECK(errorIn(refused) ==
        "POST /v1/admission-review needs a client certificate signed by the --tls-client-ca "
        "authority");
  CHECK(f.fixture.records.empty());
  CHECK(f.serve(request("GET", "/healthz")).status == 200);
  CHECK(f.serve(request("GET", "/metrics")).status == 200);

  HttpRequest verified = request("POST", "/v1/admission-review", body);
  verified.clientCertificateVerified = true;
  CHECK(responseOf(f.serve(verified), "u-cert")["allowed"] == true);
  CHECK(f.fixture.records.size() == 1);
}
