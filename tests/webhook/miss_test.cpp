// The binding webhook's cache misses against the fake API server (tests/kube/fake_apiserver):
// a pod or node the watch has not delivered is fetched with one bounded GET and judged; a
// server slower than the review's budget makes the review fail open with the reason of the
// miss. The webhook and the kube::Client run on this thread's io_context, the fake server on
// its own; every wait is bounded.
#include "tests/kube/fake_apiserver.h"
#include "tests/support/admission_review.h"
#include "webhook/binding_webhook.h"

#include <doctest/doctest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "kube/client.h"
#include "policy/model.h"
#include "server/metrics.h"
#include "webhook/miss_fetch.h"

namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using nodewarden::server::HttpRequest;
using nodewarden::server::HttpResponse;
using nodewarden::webhook::ApiMissFetcher;
using nodewarden::webhook::BindingWebhook;
using nodewarden::webhook::BindingWebhookOptions;
using nodewarden::webhook::RecordingAdmissionActions;
using nodewarden::webhook::ReviewRecord;
using nodewarden::webhook::ReviewVerdict;
using nodewarden::webhook::SnapshotClusterCache;
namespace policy = nodewarden::policy;
namespace kube = nodewarden::kube;
using FakeApiServer = nodewarden::testing::FakeApiServer;

json nodeJson(const std::string& name, json conditions = json::array()) {
  return json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}}},
              {"status",
               {{"capacity", {{"cpu", "8"}, {"memory", "4Gi"}, {"pods", "110"}}},
                {"allocatable", {{"cpu", "8"}, {"memory", "4Gi"}, {"pods", "110"}}},
                {"conditions", conditions}}}};
}

// A pending pod; BestEffort without `memory`.
json podJson(const std::string& name, const std::string& memory = "") {
  json container = {{"name", "c"}};
  if (!memory.empty()) {
    container["resources"] = {{"requests", {{"memory", memory}, {"cpu", "100m"}}}};
  }
  return json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "ns"}, {"uid", "uid-" + name}}},
              {"spec", {{"containers", json::array({container})}}},
              {"status", {{"phase", "Pending"}}}};
}

policy::Snapshot snapshotOf(json nodes, json pods) {
  policy::Diagnostics diagnostics;
  json doc = {{"nodes", std::move(nodes)},
              {"pods", std::move(pods)},
              {"priorityClasses", json::array()},
              {"podDisruptionBudgets", json::array()}};
  auto snapshot = policy::parseSnapshot(doc, diagnostics);
  REQUIRE_MESSAGE(snapshot.has_value(), diagnostics.joined());
  return std::move(*snapshot);
}

kube::ClusterConfig configFor(const FakeApiServer& server) {
  kube::ClusterConfig c;
  c.host = "127.0.0.1";
  c.port = std::to_string(server.port());
  c.tls = false;
  c.token = "test-token";
  return c;
}

// The webhook over a snapshot (the watch's view), fetching misses from `server`.
struct Fixture {
  explicit Fixture(FakeApiServer& server, policy::Snapshot snapshot)
      : client(io, configFor(server)),
        fetcher(io, client),
        cache(std::move(snapshot)),
        webhook(cache, actions, policy::Policy::defaults(), &metrics, options()) {}

  BindingWebhookOptions options() {
    BindingWebhookOptions o;
    o.fetcher = &fetcher;
    o.onReview = [this](const ReviewRecord& r) { records.push_back(r); };
    return o;
  }

  // Sends a review with `?timeout=` as the API server does and runs the loop until it is
  // answered (at most 20 s); the response object.
  json review(const std::string& uid, const std::string& pod, const std::string& node,
              const std::string& timeout = "2s") {
    HttpRequest request;
    request.method = "POST";
    request.target = "/v1/admission-review?timeout=" + timeout;
    request.body =
        nodewarden::testing::bindingReview(uid, "ns", pod, node, "uid-" + pod, false).dump();
    std::optional<HttpResponse> answer;
    webhook.handleAsync(request, [&answer](HttpResponse response) { answer = response; });
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (int i = 0; i < 100000 && !answer && std::chrono::steady_clock::now() < deadline; ++i) {
      io.run_for(5ms);
    }
    REQUIRE(answer.has_value());
    REQUIRE(answer->status == 200);
    return json::parse(answer->body)["response"];
  }

  boost::asio::io_context io;
  // run_for returns at once when nothing is queued; the guard keeps it waiting for the GET.
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{io.get_executor()};
  kube::Client client;
  ApiMissFetcher fetcher;
  SnapshotClusterCache cache;
  RecordingAdmissionActions actions;
  nodewarden::server::MetricsRegistry metrics;
  std::vector<ReviewRecord> records;
  BindingWebhook webhook;
};

std::size_t getsOf(const FakeApiServer& server, const std::string& path) {
  std::size_t n = 0;
  for (const auto& request : server.requests()) {
    if (request.method == "GET" && request.path == path) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("fetchTimeout leaves a quarter of the budget, at least the margin, and needs 50 ms") {
  using nodewarden::webhook::fetchTimeout;
  CHECK(fetchTimeout(2000ms, 0ms, 250ms) == 1500ms);
  CHECK(fetchTimeout(2000ms, 100ms, 250ms) == 1400ms);
  CHECK(fetchTimeout(800ms, 0ms, 250ms) == 550ms);  // the margin, more than a quarter
  CHECK(fetchTimeout(300ms, 0ms, 250ms) == 50ms);
  CHECK_FALSE(fetchTimeout(300ms, 1ms, 250ms).has_value());
  CHECK_FALSE(fetchTimeout(2000ms, 1500ms, 250ms).has_value());
}

TEST_CASE("secondsText writes three significant digits") {
  using nodewarden::webhook::secondsText;
  CHECK(secondsText(2000ms) == "2 s");
  CHECK(secondsText(1500ms) == "1.5 s");
  CHECK(secondsText(50ms) == "0.05 s");
}

TEST_CASE("reviewBudget reads the API server's timeout parameter, else the fallback") {
  using nodewarden::webhook::reviewBudget;
  CHECK(reviewBudget("/v1/admission-review?timeout=2s", 7s) == 2000ms);
  CHECK(reviewBudget("/v1/admission-review?x=1&timeout=1.5s", 7s) == 1500ms);
  CHECK(reviewBudget("/v1/admission-review?timeout=500ms", 7s) == 500ms);
  CHECK(reviewBudget("/v1/admission-review?timeout=1m0s", 7s) == 60000ms);
  CHECK(reviewBudget("/v1/admission-review", 7s) == 7000ms);
  CHECK(reviewBudget("/v1/admission-review?timeout=", 7s) == 7000ms);
  CHECK(reviewBudget("/v1/admission-review?timeout=2x", 7s) == 7000ms);
  CHECK(reviewBudget("/v1/admission-review?timeout=s", 7s) == 7000ms);
  CHECK(reviewBudget("/v1/admission-review?timeout=-1s", 7s) == 7000ms);
}

TEST_CASE("a node only on the API server is fetched once and judged: reject under pressure") {
  FakeApiServer server;
  server.upsertNode(nodeJson(
      "node-new", json::array({{{"type", "NodewardenMemoryPressure"}, {"status", "True"}}})));
  server.upsertNode(nodeJson("node-calm"));
  // The watch has the pods but neither node.
  Fixture f(server, snapshotOf(json::array({nodeJson("node-old")}),
                               json::array({podJson("best-effort"), podJson("burstable", "1Gi")})));

  json response = f.review("u-1", "best-effort", "node-new");
  CHECK(response["allowed"] == false);
  CHECK(response["status"]["reason"] == "Evicted");
  REQUIRE(f.records.size() == 1);
  CHECK(f.records[0].verdict == ReviewVerdict::Reject);
  CHECK(getsOf(server, "/api/v1/nodes/node-new") == 1);

  response = f.review("u-2", "burstable", "node-calm");
  CHECK(response["allowed"] == true);
  CHECK_FALSE(response.contains("warnings"));
  REQUIRE(f.records.size() == 2);
  CHECK(f.records[1].verdict == ReviewVerdict::Admit);
  CHECK(getsOf(server, "/api/v1/nodes/node-calm") == 1);
  // A node the watch has is not fetched.
  CHECK(f.review("u-3", "burstable", "node-old")["allowed"] == true);
  CHECK(getsOf(server, "/api/v1/nodes/node-old") == 0);
  CHECK(f.metrics.render().find("verdict=\"allow-unchecked\"") == std::string::npos);
}

TEST_CASE("a pod only on the API server is fetched and judged; a missing one fails open") {
  FakeApiServer server;
  server.upsertPod(podJson("fresh"));
  Fixture f(
      server,
      snapshotOf(json::array({nodeJson(
                     "node-mem", json::array({{{"type", "MemoryPressure"}, {"status", "True"}}}))}),
                 json::array()));
  json response = f.review("u-1", "fresh", "node-mem");
  CHECK(response["allowed"] == false);  // BestEffort under memory pressure: the real verdict
  CHECK(response["status"]["reason"] == "Evicted");
  CHECK(getsOf(server, "/api/v1/namespaces/ns/pods/fresh") == 1);

  // Not on the server either: 404, allowed unchecked with the miss's reason and the error.
  response = f.review("u-2", "ghost", "node-mem");
  CHECK(response["allowed"] == true);
  const std::string warning = response["warnings"][0];
  CHECK(warning.starts_with("nodewarden: pod ns/ghost is not in its cache yet; allowed unchecked"));
  CHECK(warning.find("404") != std::string::npos);
  REQUIRE(f.records.size() == 2);
  CHECK(f.records[1].verdict == ReviewVerdict::FailedOpen);
  CHECK(f.records[1].reason == "PodNotFound");
  CHECK(getsOf(server, "/api/v1/namespaces/ns/pods/ghost") == 1);
}

TEST_CASE("a server slower than the review's budget: allow-unchecked with the reason, one GET") {
  FakeApiServer server;
  server.upsertNode(nodeJson("node-new"));
  Fixture f(server, snapshotOf(json::array(), json::array({podJson("burstable", "1Gi")})));
  nodewarden::testing::FaultMode slow;
  slow.delay = 8s;
  server.setFaults(slow);

  const auto started = std::chrono::steady_clock::now();
  json response = f.review("u-1", "burstable", "node-new", "1s");
  const auto took = std::chrono::steady_clock::now() - started;
  CHECK(response["allowed"] == true);
  const std::string warning = response["warnings"][0];
  CHECK(
      warning.starts_with("nodewarden: node node-new is not in its cache yet; allowed unchecked"));
  CHECK(warning.find("timed out") != std::string::npos);
  REQUIRE(f.records.size() == 1);
  CHECK(f.records[0].verdict == ReviewVerdict::FailedOpen);
  CHECK(f.records[0].reason == "NodeNotFound");
  // Answered within the budget's GET share, long before the server would have answered.
  CHECK(took < 6s);
  CHECK(f.metrics.render().find(
            "nodewarden_admissions_total{verdict=\"allow-unchecked\",reason=\"NodeNotFound\"} 1") !=
        std::string::npos);
  CHECK(server.waitFor(
      [](const auto& requests) {
        std::size_t n = 0;
        for (const auto& r : requests) n += r.path == "/api/v1/nodes/node-new";
        return n >= 1;
      },
      10s));
  CHECK(getsOf(server, "/api/v1/nodes/node-new") == 1);
}
