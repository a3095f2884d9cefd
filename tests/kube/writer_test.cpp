// kube::ApiWriter against the strict fake API server: the kubelet-like record of an eviction
// (status, Event, DELETE) in order and once, retries while the server is down, bounded
// attempts, idempotent answers (404/409), preemption through the Eviction API with a
// disruption budget's 429, nominations and node conditions.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>

#include "kube/writer.h"
#include "tests/kube/fake_apiserver.h"

using namespace nodewarden;
using namespace std::chrono_literals;
using nodewarden::testing::FakeApiServer;
using nodewarden::testing::RecordedRequest;
using Json = nlohmann::json;

namespace {

kube::ClusterConfig configFor(const FakeApiServer& server, const std::string& token) {
  kube::ClusterConfig config;
  config.host = "127.0.0.1";
  config.port = std::to_string(server.port());
  config.tls = false;
  config.token = token;
  config.description = "fake API server";
  return config;
}

Json pod(const std::string& ns, const std::string& name, const std::string& uid,
         std::map<std::string, std::string> labels = {}) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}, {"labels", labels}}},
          {"spec",
           {{"nodeName", "node-1"},
            {"containers", Json::array({{{"name", "app"}}})},
            {"terminationGracePeriodSeconds", 30}}},
          {"status", {{"phase", "Running"}}}};
}

// Runs the loop until `done` holds or `timeout` passes.
bool runUntil(boost::asio::io_context& io, const std::function<bool()>& done,
              std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(10ms);
  }
  return done();
}

std::vector<RecordedRequest> writesOf(const FakeApiServer& server) {
  std::vector<RecordedRequest> out;
  for (auto& request : server.requests())
    if (request.method != "GET") out.push_back(request);
  return out;
}

kube::WriterOptions fastOptions() {
  kube::WriterOptions options;
  options.nodeName = "node-1";
  options.initialBackoff = 50ms;
  options.maxBackoff = 400ms;
  options.seed = 7;
  return options;
}

}  // namespace

TEST_CASE("an eviction is recorded as the kubelet does: status, event, delete; once") {
  FakeApiServer server;
  server.upsertPod(pod("shop", "cart", "uid-cart"));
  boost::asio::io_context io;
  kube::Client client(io, configFor(server, "test-token"));
  kube::ApiWriter writer(io, client, fastOptions());
  std::vector<kube::WriteOutcome> outcomes;
  writer.onOutcome = [&](const kube::WriteOutcome& outcome) { outcomes.push_back(outcome); };

  kube::EvictedPod evicted;
  evicted.pod = {"shop", "cart", "uid-cart"};
  evicted.signal = "memory.available";
  evicted.resource = "memory";
  evicted.message =
      "The node was low on resource: memory. Threshold quantity: 100Mi, available: 88832Ki. ";
  evicted.gracePeriodSeconds = 0;
  evicted.annotations = {{"offending_containers", "app"}};
  writer.podEvicted(evicted);
  writer.podEvicted(evicted);  // the same UID again: nothing more
  CHECK(writer.pending() == 3);
  REQUIRE(runUntil(
      io, [&] { return writer.pending() == 0; }, 5s));

  const auto writes = writesOf(server);
  REQUIRE(writes.size() == 3);
  CHECK(writes[0].method == "PATCH");
  CHECK(writes[0].path == "/api/v1/namespaces/shop/pods/cart/status");
  CHECK(writes[0].contentType == "application/strategic-merge-patch+json");
  CHECK(writes[1].method == "POST");
  CHECK(writes[1].path == "/api/v1/namespaces/shop/events");
  CHECK(writes[2].method == "DELETE");
  CHECK(writes[2].path == "/api/v1/namespaces/shop/pods/cart");
  for (const auto& write : writes) CHECK(write.status / 100 == 2);

  const Json status = Json::parse(writes[0].body)["status"];
  CHECK(status["phase"] == "Failed");
  CHECK(status["reason"] == "Evicted");
  CHECK(status["message"] == evicted.message);
  CHECK(status["conditions"][0]["type"] == "DisruptionTarget");
  CHECK(status["conditions"][0]["status"] == "True");
  CHECK(status["conditions"][0]["reason"] == "TerminationByKubelet");
  // No generation known: no observedGeneration (the kubelet's omitempty).
  CHECK_FALSE(status.contains("observedGeneration"));
  CHECK_FALSE(status["conditions"][0].contains("observedGeneration"));

  REQUIRE(server.events().size() == 1);
  const Json event = server.events()[0];
  CHECK(event["reason"] == "Evicted");
  CHECK(event["type"] == "Warning");
  CHECK(event["message"] == evicted.message);
  CHECK(event["involvedObject"]["kind"] == "Pod");
  CHECK(event["involvedObject"]["uid"] == "uid-cart");
  CHECK(event["source"]["component"] == "nodewarden");
  CHECK(event["source"]["host"] == "node-1");
  CHECK(event["metadata"]["annotations"]["starved_resource"] == "memory");
  CHECK(event["metadata"]["annotations"]["offending_containers"] == "app");
  CHECK_FALSE(event.contains("eventTime"));  // core/v1 rules: eventTime unset

  const Json options = Json::parse(writes[2].body);
  CHECK(options["gracePeriodSeconds"] == 0);
  CHECK(options["preconditions"]["uid"] == "uid-cart");
  CHECK_FALSE(server.pod("shop", "cart").has_value());  // Failed + deleted: gone
  REQUIRE(outcomes.size() == 3);
  for (const auto& outcome : outcomes) {
    CHECK(outcome.ok);
    CHECK(outcome.attempts == 1);
    CHECK(outcome.pod == "shop/cart");
  }
}

TEST_CASE("an eviction carries the pod's generation as observedGeneration, as kubelet v1.35+") {
  FakeApiServer server;
  server.upsertPod(pod("shop", "cart", "uid-cart"));
  boost::asio::io_context io;
  kube::Client client(io, configFor(server, "test-token"));
  kube::ApiWriter writer(io, client, fastOptions());
  kube::EvictedPod evicted;
  evicted.pod = {"shop", "cart", "uid-cart"};
  evicted.resource = "memory";
  evicted.generation = 4;
  writer.podEvicted(evicted);
  REQUIRE(runUntil(
      io, [&] { return writer.pending() == 0; }, 5s));
  const auto writes = writesOf(server);
  REQUIRE(writes.size() == 3);
  CHECK(writes[0].status / 100 == 2);
  const Json status = Json::parse(writes[0].body)["status"];
  CHECK(status["observedGeneration"] == 4);
  REQUIRE(status["conditions"].size() == 1);
  CHECK(status["conditions"][0]["type"] == "DisruptionTarget");
  CHECK(status["conditions"][0]["observedGeneration"] == 4);
}

TEST_CASE("writes wait while the API server is down and go out in order when it is back") {
  FakeApiServer server;
  server.upsertPod(pod("shop", "cart", "uid-cart"));
  boost::asio::io_context io;
  kube::Client client(io, configFor(server, "test-token"));
  kube::ApiWriter writer(io, client, fastOptions());
  std::vector<kube::WriteOutcome> outcomes;
  writer.onOutcome = [&](const kube::WriteOutcome& outcome) { outcomes.push_back(outcome); };

  server.setDown(true);
  kube::EvictedPod evicted;
  evicted.pod = {"shop", "cart", "uid-cart"};
  evicted.resource = "memory";
  evicted.message = "The node was low on resource: memory. ";
  evicted.gracePeriodSeconds = 5;
  writer.podEvicted(evicted);
  runUntil(
      io, [] { return false; }, 600ms);  // several failed attempts
  CHECK(writer.pending() == 3);
  CHECK(outcomes.empty());
  CHECK(writesOf(server).empty());

  server.setDown(false);
  REQUIRE(runUntil(
      io, [&] { return writer.pending() == 0; }, 10s));
  const auto writes = writesOf(server);
  REQUIRE(writes.size() == 3);
  CHECK(writes[0].method == "PATCH");
  CHECK(writes[1].method == "POST");
  CHECK(writes[2].method == "DELETE");
  REQUIRE(outcomes.size() == 3);
  CHECK(outcomes[0].ok);
  CHECK(outcomes[0].attempts > 1);
  CHECK(Json::parse(writes[2].body)["gracePeriodSeconds"] == 5);
}

TEST_CASE("retries are bounded; a refused write is not retried") {
  FakeApiServer server;
  server.upsertPod(pod("shop", "cart", "uid-cart"));
  boost::asio::io_context io;
  SUBCASE("down for good: gives up after maxAttempts, reports each write") {
    kube::Client client(io, configFor(server, "test-token"));
    auto options = fastOptions();
    options.maxAttempts = 3;
    kube::ApiWriter writer(io, client, options);
    std::vector<kube::WriteOutcome> outcomes;
    writer.onOutcome = [&](const kube::WriteOutcome& outcome) { outcomes.push_back(outcome); };
    server.setDown(true);
    writer.nominate({"shop", "cart", "uid-cart"}, "node-1");
    REQUIRE(runUntil(
        io, [&] { return writer.pending() == 0; }, 10s));
    REQUIRE(outcomes.size() == 1);
    CHECK_FALSE(outcomes[0].ok);
    CHECK(outcomes[0].attempts == 3);
    CHECK(outcomes[0].status == 0);
    CHECK(outcomes[0].detail.find("gave up after 3 attempts") != std::string::npos);
  }
  SUBCASE("a wrong token: 401 is not retried forever") {
    kube::Client client(io, configFor(server, "wrong-token"));
    kube::ApiWriter writer(io, client, fastOptions());
    std::vector<kube::WriteOutcome> outcomes;
    writer.onOutcome = [&](const kube::WriteOutcome& outcome) { outcomes.push_back(outcome); };
    writer.nominate({"shop", "cart", "uid-cart"}, "node-1");
    REQUIRE(runUntil(
        io, [&] { return writer.pending() == 0; }, 5s));
    REQUIRE(outcomes.size() == 1);
    CHECK_FALSE(outcomes[0].ok);
    CHECK(outcomes[0].status == 401);
    CHECK(outcomes[0].attempts == 1);
  }
}

TEST_CASE("delete is idempotent: a replacement under the same name is never touched") {
  FakeApiServer server;
  // The evicted pod was replaced (same name, new UID) before the writes went out.
  server.upsertPod(pod("shop", "cart", "uid-new"));
  boost::asio::io_context io;
  kube::Client client(io, configFor(server, "test-token"));
  kube::ApiWriter writer(io, client, fastOptions());
  std::vector<kube::WriteOutcome> outcomes;
  writer.onOutcome = [&](const kube::WriteOutcome& outcome) { outcomes.push_back(outcome); };
  writer.preempt({"prod", "db", "uid-db"}, "node-1", {{"shop", "cart", "uid-old"}});
  REQUIRE(runUntil(
      io, [&] { return writer.pending() == 0; }, 5s));
  CHECK(server.pod("shop", "cart").has_value());  // the replacement lives
  // And a pod already gone: 404 means done.
  writer.preempt({"prod", "db", "uid-db"}, "node-1", {{"shop", "gone", "uid-gone"}});
  REQUIRE(runUntil(
      io, [&] { return writer.pending() == 0; }, 5s));
  bool sawGone = false;
  for (const auto& outcome : outcomes)
    if (outcome.what == "eviction" && outcome.pod == "shop/gone") {
      CHECK(outcome.ok);
      CHECK(outcome.detail == "already gone");
      sawGone = true;
    }
  CHECK(sawGone);
}

TEST_CASE("preemption evicts through the Eviction API and waits out a disruption budget") {
  FakeApiServer server;
  server.upsertPod(pod("shop", "cart", "uid-cart", {{"app", "cart"}}));
  server.upsertPodDisruptionBudget(
      {{"apiVersion", "policy/v1"},
       {"kind", "PodDisruptionBudget"},
       {"metadata", {{"name", "cart"}, {"namespace", "shop"}}},
       {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "cart"}}}}}}},
       {"status", {{"disruptionsAllowed", 0}}}});
  boost::asio::io_context io;
  kube::Client client(io, configFor(server, "test-token"));
  kube::ApiWriter writer(io, client, fastOptions());
  writer.preempt({"prod", "db", "uid-db"}, "node-1", {{"shop", "cart", "uid-cart"}});
  writer.nominate({"prod", "db", "uid-db"}, "node-1");
  runUntil(
      io, [] { return false; }, 500ms);
  // Refused by the budget (429) and retried; the pod is still there.
  std::size_t refused = 0;
  for (const auto& request : server.requests())
    if (request.path == "/api/v1/namespaces/shop/pods/cart/eviction" && request.status == 429)
      ++refused;
  CHECK(refused >= 1);
  CHECK(server.pod("shop", "cart").has_value());
  // The eviction retrying and the Preempted event behind it; nominate went through.
  CHECK(writer.pending() == 2);
  for (const auto& event : server.events()) CHECK(event["reason"] != "Preempted");

  // The budget allows one disruption now: the next attempt succeeds.
  server.upsertPodDisruptionBudget(
      {{"apiVersion", "policy/v1"},
       {"kind", "PodDisruptionBudget"},
       {"metadata", {{"name", "cart"}, {"namespace", "shop"}}},
       {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "cart"}}}}}}},
       {"status", {{"disruptionsAllowed", 1}}}});
  REQUIRE(runUntil(
      io, [&] { return writer.pending() == 0; }, 10s));
  Json eviction;
  for (const auto& request : server.requests())
    if (request.path == "/api/v1/namespaces/shop/pods/cart/eviction" && request.status == 201)
      eviction = Json::parse(request.body);
  CHECK(eviction["apiVersion"] == "policy/v1");
  CHECK(eviction["kind"] == "Eviction");
  CHECK(eviction["metadata"]["name"] == "cart");
  CHECK(eviction["deleteOptions"]["preconditions"]["uid"] == "uid-cart");
  bool preemptedEvent = false;
  for (const auto& event : server.events())
    if (event["reason"] == "Preempted" && event["involvedObject"]["name"] == "cart")
      preemptedEvent = true;
  CHECK(preemptedEvent);
}

TEST_CASE("an eviction a budget refuses: each 429 reported with its cause, no Preempted event") {
  // As the real API server answers (pkg/registry/core/pod/storage/eviction.go): 429 with the
  // budget named in details.causes; the victim keeps running, so it is told nothing.
  FakeApiServer server;
  server.upsertPod(pod("shop", "cart", "uid-cart", {{"app", "cart"}}));
  server.upsertPodDisruptionBudget(
      {{"apiVersion", "policy/v1"},
       {"kind", "PodDisruptionBudget"},
       {"metadata", {{"name", "cart"}, {"namespace", "shop"}}},
       {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "cart"}}}}}}},
       {"status", {{"disruptionsAllowed", 0}, {"desiredHealthy", 1}, {"currentHealthy", 1}}}});
  boost::asio::io_context io;
  kube::Client client(io, configFor(server, "test-token"));
  auto options = fastOptions();
  options.maxAttempts = 3;
  kube::ApiWriter writer(io, client, options);
  std::vector<kube::WriteOutcome> outcomes, retries;
  writer.onOutcome = [&](const kube::WriteOutcome& outcome) { outcomes.push_back(outcome); };
  writer.onRetry = [&](const kube::WriteOutcome& retry) { retries.push_back(retry); };
  writer.preempt({"prod", "db", "uid-db"}, "node-1", {{"shop", "cart", "uid-cart"}});
  REQUIRE(runUntil(
      io, [&] { return writer.pending() == 0; }, 10s));
  // Two retries (attempts 1 and 2), then given up at the third.
  REQUIRE(retries.size() == 2);
  for (std::size_t i = 0; i < retries.size(); ++i) {
    CHECK(retries[i].what == "eviction");
    CHECK(retries[i].pod == "shop/cart");
    CHECK_FALSE(retries[i].ok);
    CHECK(retries[i].attempts == int(i) + 1);
    CHECK(retries[i].status == 429);
    CHECK(retries[i].retryIn.count() > 0);
    CHECK(retries[i].detail ==
          "429 Too Many Requests: Cannot evict pod as it would violate the pod's disruption "
          "budget. (The disruption budget cart needs 1 healthy pods and has 1 currently)");
  }
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[0].what == "eviction");
  CHECK_FALSE(outcomes[0].ok);
  CHECK(outcomes[0].attempts == 3);
  CHECK(outcomes[0].detail.find("gave up after 3 attempts") != std::string::npos);
  CHECK(outcomes[1].what == "event");
  CHECK(outcomes[1].ok);
  CHECK(outcomes[1].detail == "not sent: the eviction before it did not take effect");
  CHECK(server.pod("shop", "cart").has_value());
  for (const auto& event : server.events()) CHECK(event["reason"] != "Preempted");
  for (const auto& request : server.requests())
    CHECK(request.path != "/api/v1/namespaces/shop/events");
}

TEST_CASE("a victim already gone gets no Preempted event either") {
  FakeApiServer server;
  boost::asio::io_context io;
  kube::Client client(io, configFor(server, "test-token"));
  kube::ApiWriter writer(io, client, fastOptions());
  std::vector<kube::WriteOutcome> outcomes;
  writer.onOutcome = [&](const kube::WriteOutcome& outcome) { outcomes.push_back(outcome); };
  writer.preempt({"prod", "db", "uid-db"}, "node-1", {{"shop", "gone", "uid-gone"}});
  REQUIRE(runUntil(
      io, [&] { return writer.pending() == 0; }, 5s));
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[0].what == "eviction");
  CHECK(outcomes[0].ok);
  CHECK(outcomes[0].detail == "already gone");
  CHECK(outcomes[1].what == "event");
  CHECK(outcomes[1].detail == "not sent: the eviction before it did not take effect");
  CHECK(server.events().empty());
}

TEST_CASE("node conditions: written on change only, transition time kept while status holds") {
  FakeApiServer server;
  server.upsertNode(
      {{"apiVersion", "v1"},
       {"kind", "Node"},
       {"metadata", {{"name", "node-1"}}},
       {"status", {{"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}});
  boost::asio::io_context io;
  kube::Client client(io, configFor(server, "test-token"));
  auto options = fastOptions();
  auto clock = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  options.now = [&] { return clock; };
  kube::ApiWriter writer(io, client, options);
  auto conditionWrites = [&] {
    std::size_t n = 0;
    for (const auto& request : server.requests())
      if (request.method == "PATCH" && request.path == "/api/v1/nodes/node-1/status") ++n;
    return n;
  };
  auto condition = [&] {
    const Json node = server.node("node-1").value_or(Json());
    for (const auto& c : node["status"]["conditions"])
      if (c["type"] == "NodewardenMemoryPressure") return c;
    return Json();
  };

  writer.setNodeCondition("node-1", kube::kMemoryPressureCondition, true, "A", "m");
  REQUIRE(runUntil(
      io, [&] { return writer.pending() == 0; }, 5s));
  CHECK(conditionWrites() == 1);
  CHECK(condition()["status"] == "True");
  const Json first = condition();
  writer.setNodeCondition("node-1", kube::kMemoryPressureCondition, true, "A", "m");
  runUntil(
      io, [] { return false; }, 100ms);
  CHECK(conditionWrites() == 1);  // identical: nothing written

  clock += std::chrono::seconds(30);
  writer.setNodeCondition("node-1", kube::kMemoryPressureCondition, true, "A", "other");
  REQUIRE(runUntil(
      io, [&] { return writer.pending() == 0; }, 5s));
  CHECK(conditionWrites() == 2);
  CHECK(condition()["lastTransitionTime"] == first["lastTransitionTime"]);
  CHECK(condition()["message"] == "other");

  clock += std::chrono::seconds(30);
  writer.setNodeCondition("node-1", kube::kMemoryPressureCondition, false, "B", "clear");
  REQUIRE(runUntil(
      io, [&] { return writer.pending() == 0; }, 5s));
  CHECK(condition()["status"] == "False");
  CHECK(condition()["lastTransitionTime"] != first["lastTransitionTime"]);
  // The kubelet's conditions are left alone (strategic merge by type).
  bool ready = false;
  const Json node = server.node("node-1").value_or(Json());
  for (const auto& c : node["status"]["conditions"])
    if (c["type"] == "Ready") ready = true;
  CHECK(ready);
  CHECK(kube::kubeletConditionFor("NodewardenMemoryPressure") == "MemoryPressure");
  CHECK(kube::kubeletConditionFor("NodewardenPIDPressure") == "PIDPressure");
  CHECK(kube::kubeletConditionFor("MemoryPressure").empty());
}

TEST_CASE("an evicted pod already gone from the API: no event or delete behind the status") {
  FakeApiServer server;
  boost::asio::io_context io;
  kube::Client client(io, configFor(server, "test-token"));
  kube::ApiWriter writer(io, client, fastOptions());
  std::vector<kube::WriteOutcome> outcomes;
  writer.onOutcome = [&](const kube::WriteOutcome& outcome) { outcomes.push_back(outcome); };
  kube::EvictedPod evicted;
  evicted.pod = {"shop", "gone", "uid-gone"};
  evicted.resource = "memory";
  writer.podEvicted(evicted);
  REQUIRE(runUntil(
      io, [&] { return writer.pending() == 0; }, 5s));
  REQUIRE(outcomes.size() == 3);
  CHECK(outcomes[0].what == "status");
  CHECK_FALSE(outcomes[0].ok);
  CHECK(outcomes[0].status == 404);
  CHECK(outcomes[1].what == "event");
  CHECK(outcomes[1].detail == "pod already gone");
  CHECK(outcomes[2].what == "delete");
  CHECK(outcomes[2].detail == "pod already gone");
  CHECK(writesOf(server).size() == 1);  // only the status PATCH went out
  CHECK(server.events().empty());
}
