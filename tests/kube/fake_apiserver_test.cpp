// The fake API server's own wire format and strictness, spoken to with a tiny blocking Beast
// client (every operation bounded by a deadline).
#include "tests/kube/fake_apiserver.h"

#include <doctest/doctest.h>
#include <openssl/x509_vfy.h>

#include <optional>
#include <string>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace {

using namespace nodewarden::testing;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Json = nlohmann::json;
using namespace std::chrono_literals;

struct Reply {
  unsigned status = 0;
  std::string body;
  std::string retryAfter;  // the Retry-After header, "" when absent
  Json json() const { return Json::parse(body); }
};

// One connection to the server (plain or TLS); every call blocks at most its timeout.
class Client {
 public:
  explicit Client(std::uint16_t port, ssl::context* tls = nullptr) {
    if (tls != nullptr) {
      secure_.emplace(context_, *tls);
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(secure_->native_handle()), "127.0.0.1");
    } else {
      plain_.emplace(context_);
    }
    tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), port);
    lowest().expires_after(5s);
    error_ = run([&](auto handler) { lowest().async_connect(endpoint, handler); });
    if (!error_ && secure_) {
      lowest().expires_after(5s);
      error_ =
          run([&](auto handler) { secure_->async_handshake(ssl::stream_base::client, handler); });
    }
  }

  boost::system::error_code error() const { return error_; }

  Reply request(const std::string& method, const std::string& target, const std::string& body = "",
                const std::string& contentType = "application/json",
                const std::string& token = "test-token") {
    http::request<http::string_body> request = makeRequest(method, target, token);
    if (!body.empty() || method == "POST" || method == "PATCH") {
      request.set(http::field::content_type, contentType);
      request.body() = body;
    }
    request.prepare_payload();
    lowest().expires_after(5s);
    error_ =
        onStream([&](auto& stream, auto handler) { http::async_write(stream, request, handler); });
    if (error_) return {};
    http::response<http::string_body> response;
    lowest().expires_after(5s);
    error_ = onStream(
        [&](auto& stream, auto handler) { http::async_read(stream, buffer_, response, handler); });
    if (error_) return {};
    return {response.result_int(), response.body(),
            std::string(response[http::field::retry_after])};
  }

  // Sends a watch request and reads the header; returns the HTTP status.
  unsigned startWatch(const std::string& target, const std::string& token = "test-token") {
    http::request<http::string_body> request = makeRequest("GET", target, token);
    request.prepare_payload();
    lowest().expires_after(5s);
    error_ =
        onStream([&](auto& stream, auto handler) { http::async_write(stream, request, handler); });
    if (error_) return 0;
    parser_.emplace();
    parser_->body_limit(boost::none);
    lowest().expires_after(5s);
    error_ = onStream([&](auto& stream, auto handler) {
      http::async_read_header(stream, buffer_, *parser_, handler);
    });
    if (error_) return 0;
    contentType_ = std::string(parser_->get()[http::field::content_type]);
    chunked_ = parser_->get().chunked();
    return parser_->get().result_int();
  }

  // The next line of the watch stream; nullopt when the stream ended (ended() says how) or
  // nothing came within `timeout`.
  std::optional<std::string> nextLine(std::chrono::milliseconds timeout = 5000ms) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (int reads = 0; reads < 10000; ++reads) {
      std::string& body = parser_->get().body();
      auto newline = body.find('\n', consumed_);
      if (newline != std::string::npos) {
        std::string line = body.substr(consumed_, newline - consumed_);
        consumed_ = newline + 1;
        return line;
      }
      if (parser_->is_done()) {
        cleanEnd_ = true;
        return std::nullopt;
      }
      auto left = deadline - std::chrono::steady_clock::now();
      if (left <= 0ms) {
        error_ = beast::error::timeout;
        return std::nullopt;
      }
      lowest().expires_after(left);
      error_ = onStream([&](auto& stream, auto handler) {
        http::async_read_some(stream, buffer_, *parser_, handler);
      });
      if (error_) return std::nullopt;
    }
    return std::nullopt;
  }

  // The next watch event that is not a BOOKMARK.
  std::optional<Json> nextEvent(std::chrono::milliseconds timeout = 5000ms) {
    for (int i = 0; i < 1000; ++i) {
      auto line = nextLine(timeout);
      if (!line) return std::nullopt;
      Json event = Json::parse(*line);
      if (event["type"] != "BOOKMARK") return event;
    }
    return std::nullopt;
  }

  bool cleanEnd() const { return cleanEnd_; }
  bool timedOut() const { return error_ == beast::error::timeout; }
  const std::string& contentType() const { return contentType_; }
  bool chunked() const { return chunked_; }

 private:
  http::request<http::string_body> makeRequest(const std::string& method, const std::string& target,
                                               const std::string& token) {
    http::request<http::string_body> request;
    request.method_string(method);
    request.target(target);
    request.version(11);
    request.set(http::field::host, "127.0.0.1");
    if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
    return request;
  }

  beast::tcp_stream& lowest() { return plain_ ? *plain_ : beast::get_lowest_layer(*secure_); }

  template <class Start>
  boost::system::error_code run(Start start) {
    std::optional<boost::system::error_code> result;
    start([&result](boost::system::error_code ec, auto&&...) { result = ec; });
    context_.restart();
    context_.run();
    return result.value_or(net::error::timed_out);
  }

  template <class Op>
  boost::system::error_code onStream(Op op) {
    if (plain_) return run([&](auto handler) { op(*plain_, handler); });
    return run([&](auto handler) { op(*secure_, handler); });
  }

  net::io_context context_;
  std::optional<beast::tcp_stream> plain_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::size_t consumed_ = 0;
  boost::system::error_code error_;
  bool cleanEnd_ = false;
  bool chunked_ = false;
  std::string contentType_;
};

Json pod(const std::string& ns, const std::string& name, const std::string& node,
         const std::string& phase = "Running", Json labels = Json::object()) {
  return {
      {"metadata", {{"namespace", ns}, {"name", name}, {"uid", "uid-" + name}, {"labels", labels}}},
      {"spec", {{"nodeName", node}, {"terminationGracePeriodSeconds", 30}}},
      {"status", {{"phase", phase}}}};
}

Json pdb(const std::string& ns, const std::string& name, Json selector, int allowed) {
  return {
      {"metadata", {{"namespace", ns}, {"name", name}}},
      {"spec", {{"selector", selector}, {"minAvailable", 2}}},
      {"status", {{"disruptionsAllowed", allowed}, {"desiredHealthy", 2}, {"currentHealthy", 2}}}};
}

std::string evictionBody(const std::string& name, Json deleteOptions = nullptr) {
  Json body = {{"apiVersion", "policy/v1"},
               {"kind", "Eviction"},
               {"metadata", {{"name", name}, {"namespace", "ns1"}}}};
  if (!deleteOptions.is_null()) body["deleteOptions"] = deleteOptions;
  return body.dump();
}

Json event(const std::string& ns, const std::string& name, const std::string& involvedNs) {
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"involvedObject",
           {{"kind", "Pod"}, {"namespace", involvedNs}, {"name", "p"}, {"apiVersion", "v1"}}},
          {"reason", "Evicted"},
          {"message", "The node was low on resource: memory. "},
          {"type", "Warning"},
          {"source", {{"component", "nodewarden"}}}};
}

void seedPods(FakeApiServer& server) {
  server.upsertPod(pod("ns1", "a1", "node-a"));
  server.upsertPod(pod("ns1", "a2", "node-a"));
  server.upsertPod(pod("ns2", "a3", "node-a"));
  server.upsertPod(pod("ns1", "b1", "node-b"));
  server.upsertPod(pod("ns2", "b2", "node-b"));
}

std::vector<std::string> names(const Json& list) {
  std::vector<std::string> out;
  for (const auto& item : list["items"]) out.push_back(item["metadata"]["name"]);
  return out;
}

}  // namespace

TEST_CASE("LIST pages with limit/continue and filters with fieldSelector") {
  FakeApiServer server;
  seedPods(server);
  Client client(server.port());
  REQUIRE_FALSE(client.error());

  Reply first = client.request("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a&limit=2");
  REQUIRE(first.status == 200);
  Json page1 = first.json();
  CHECK(page1["kind"] == "PodList");
  CHECK(page1["apiVersion"] == "v1");
  CHECK(page1["metadata"]["resourceVersion"] == server.resourceVersion());
  CHECK(page1["items"].size() == 2);
  CHECK_FALSE(page1["items"][0].contains("kind"));  // as the real server's list items
  std::string token = page1["metadata"]["continue"];
  REQUIRE_FALSE(token.empty());

  Json page2 = client
                   .request("GET",
                            "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a&limit=2&"
                            "continue=" +
                                token)
                   .json();
  CHECK(page2["items"].size() == 1);
  CHECK_FALSE(page2["metadata"].contains("continue"));
  CHECK(page2["metadata"]["resourceVersion"] == page1["metadata"]["resourceVersion"]);
  std::vector<std::string> all = names(page1);
  for (auto& name : names(page2)) all.push_back(name);
  CHECK(all == std::vector<std::string>{"a1", "a2", "a3"});

  CHECK(
      names(client.request("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D%3Dnode-b").json()) ==
      std::vector<std::string>{"b1", "b2"});
  CHECK(names(client.request("GET", "/api/v1/pods?fieldSelector=spec.nodeName!%3Dnode-a").json()) ==
        std::vector<std::string>{"b1", "b2"});
  CHECK(names(client.request("GET", "/api/v1/pods?fieldSelector=metadata.name%3Da2").json()) ==
        std::vector<std::string>{"a2"});
  CHECK(names(client.request("GET", "/api/v1/namespaces/ns2/pods").json()) ==
        std::vector<std::string>{"a3", "b2"});

  Reply unsupported = client.request("GET", "/api/v1/pods?fieldSelector=spec.foo%3Dx");
  CHECK(unsupported.status == 400);
  CHECK(unsupported.json()["kind"] == "Status");
  CHECK(unsupported.json()["message"] == "field label not supported: spec.foo");
  CHECK(client.request("GET", "/api/v1/pods?limit=2&continue=garbage").status == 400);
  CHECK(client.request("GET", "/api/v1/pods?labelSelector=app%3Dweb").status == 400);
  Reply unknownParam = client.request("GET", "/api/v1/pods?fieldSelectr=spec.nodeName%3Da");
  CHECK(unknownParam.status == 400);
  CHECK(unknownParam.json()["reason"] == "BadRequest");

  server.upsertNode({{"metadata", {{"name", "node-a"}}}, {"status", Json::object()}});
  Reply node = client.request("GET", "/api/v1/nodes/node-a");
  CHECK(node.status == 200);
  CHECK(node.json()["kind"] == "Node");
  CHECK(client.request("GET", "/api/v1/nodes").json()["kind"] == "NodeList");
  Reply missing = client.request("GET", "/api/v1/namespaces/ns1/pods/nope");
  CHECK(missing.status == 404);
  CHECK(missing.json()["reason"] == "NotFound");
  CHECK(missing.json()["details"]["name"] == "nope");
  server.upsertPriorityClass({{"metadata", {{"name", "high"}}}, {"value", 1000}});
  CHECK(names(client.request("GET", "/apis/scheduling.k8s.io/v1/priorityclasses").json()) ==
        std::vector<std::string>{"high"});
}

TEST_CASE("a watch from the list RV gets ADDED/MODIFIED/DELETED and bookmarks") {
  FakeApiServerOptions options;
  options.bookmarkEvery = 100ms;
  FakeApiServer server(options);
  seedPods(server);
  Client lister(server.port());
  std::string rv = lister.request("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a")
                       .json()["metadata"]["resourceVersion"];

  Client watch(server.port());
  REQUIRE(watch.startWatch("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a&watch=1&"
                           "resourceVersion=" +
                           rv + "&allowWatchBookmarks=true") == 200);
  CHECK(watch.contentType() == "application/json");
  CHECK(watch.chunked());
  REQUIRE(server.waitFor([&](const auto&) { return server.openWatches() == 1; }, 5s));

  server.upsertPod(pod("ns1", "new", "node-a"));
  auto added = watch.nextEvent();
  REQUIRE(added);
  CHECK((*added)["type"] == "ADDED");
  CHECK((*added)["object"]["kind"] == "Pod");
  CHECK((*added)["object"]["metadata"]["name"] == "new");
  CHECK((*added)["object"]["metadata"]["resourceVersion"] == server.resourceVersion());

  Json changed = pod("ns1", "new", "node-a");
  changed["status"]["phase"] = "Failed";
  server.upsertPod(changed);
  server.upsertPod(pod("ns1", "b1", "node-b", "Failed"));  // another node: not sent
  server.upsertPod(pod("ns1", "a1", "node-b"));            // moved away: DELETED
  server.deletePod("ns1", "new");
  auto modified = watch.nextEvent();
  REQUIRE(modified);
  CHECK((*modified)["type"] == "MODIFIED");
  CHECK((*modified)["object"]["status"]["phase"] == "Failed");
  auto movedAway = watch.nextEvent();
  REQUIRE(movedAway);
  CHECK((*movedAway)["type"] == "DELETED");
  CHECK((*movedAway)["object"]["metadata"]["name"] == "a1");
  auto deleted = watch.nextEvent();
  REQUIRE(deleted);
  CHECK((*deleted)["type"] == "DELETED");
  CHECK((*deleted)["object"]["metadata"]["name"] == "new");

  std::optional<Json> bookmark;
  for (int i = 0; i < 20 && !bookmark; ++i) {
    auto line = watch.nextLine(2s);
    REQUIRE(line);
    Json parsed = Json::parse(*line);
    if (parsed["type"] == "BOOKMARK") bookmark = parsed;
  }
  REQUIRE(bookmark);
  CHECK((*bookmark)["object"]["kind"] == "Pod");
  CHECK((*bookmark)["object"]["metadata"]["resourceVersion"] == server.resourceVersion());

  // A replay from the old RV: the same changes, from the history.
  Client replay(server.port());
  REQUIRE(replay.startWatch("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a&watch=true&"
                            "resourceVersion=" +
                            rv) == 200);
  std::vector<std::string> types;
  for (int i = 0; i < 4; ++i) {
    auto e = replay.nextEvent();
    REQUIRE(e);
    types.push_back((*e)["type"]);
  }
  CHECK(types == std::vector<std::string>{"ADDED", "MODIFIED", "DELETED", "DELETED"});
  CHECK_FALSE(replay.nextLine(300ms));  // no bookmarks unless asked for
  CHECK(replay.timedOut());
}

TEST_CASE("a watch without RV starts with synthetic ADDED and ends after timeoutSeconds") {
  FakeApiServer server;
  seedPods(server);
  Client watch(server.port());
  auto start = std::chrono::steady_clock::now();
  REQUIRE(watch.startWatch("/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dnode-b&"
                           "timeoutSeconds=1") == 200);
  std::vector<std::string> added;
  for (int i = 0; i < 2; ++i) {
    auto e = watch.nextEvent();
    REQUIRE(e);
    CHECK((*e)["type"] == "ADDED");
    added.push_back((*e)["object"]["metadata"]["name"]);
  }
  CHECK(added == std::vector<std::string>{"b1", "b2"});
  CHECK_FALSE(watch.nextLine(5s));
  CHECK(watch.cleanEnd());
  CHECK(std::chrono::steady_clock::now() - start >= 900ms);
  CHECK(server.waitFor([&](const auto&) { return server.openWatches() == 0; }, 5s));
}

TEST_CASE("a watch from a compacted RV gets 410 Expired, in-stream or as HTTP status") {
  FakeApiServer server;
  seedPods(server);
  std::string old = server.resourceVersion();
  server.upsertPod(pod("ns1", "later", "node-a"));
  server.compact();

  Client watch(server.port());
  REQUIRE(watch.startWatch("/api/v1/pods?watch=1&resourceVersion=" + old) == 200);
  auto error = watch.nextLine();
  REQUIRE(error);
  Json event = Json::parse(*error);
  CHECK(event["type"] == "ERROR");
  CHECK(event["object"]["kind"] == "Status");
  CHECK(event["object"]["code"] == 410);
  CHECK(event["object"]["reason"] == "Expired");
  CHECK(event["object"]["status"] == "Failure");
  CHECK(event["object"]["message"] ==
        "too old resource version: " + old + " (" + server.resourceVersion() + ")");
  CHECK_FALSE(watch.nextLine());
  CHECK(watch.cleanEnd());

  // The current RV is still fine after compact().
  Client current(server.port());
  REQUIRE(current.startWatch("/api/v1/pods?watch=1&resourceVersion=" + server.resourceVersion()) ==
          200);
  server.upsertPod(pod("ns1", "after", "node-a"));
  auto added = current.nextEvent();
  REQUIRE(added);
  CHECK((*added)["object"]["metadata"]["name"] == "after");

  FakeApiServerOptions options;
  options.goneAsHttpStatus = true;
  FakeApiServer strict(options);
  seedPods(strict);
  std::string before = strict.resourceVersion();
  strict.upsertPod(pod("ns1", "later", "node-a"));
  strict.compact();
  Client client(strict.port());
  Reply gone = client.request("GET", "/api/v1/pods?watch=1&resourceVersion=" + before);
  CHECK(gone.status == 410);
  CHECK(gone.json()["reason"] == "Expired");
  CHECK(gone.json()["code"] == 410);
}

TEST_CASE("dropWatches, expireWatches and injectRawWatchLine") {
  FakeApiServer server;
  seedPods(server);
  std::string rv = server.resourceVersion();

  Client dropped(server.port());
  REQUIRE(dropped.startWatch("/api/v1/pods?watch=1&resourceVersion=" + rv) == 200);
  REQUIRE(server.waitFor([&](const auto&) { return server.openWatches() == 1; }, 5s));
  server.injectRawWatchLine("pods", "{not json");
  auto raw = dropped.nextLine();
  REQUIRE(raw);
  CHECK(*raw == "{not json");
  server.dropWatches();
  CHECK(server.openWatches() == 0);
  CHECK_FALSE(dropped.nextLine());
  CHECK_FALSE(dropped.cleanEnd());  // abrupt: no terminating chunk
  CHECK_FALSE(dropped.timedOut());

  Client expired(server.port());
  REQUIRE(expired.startWatch("/api/v1/pods?watch=1&resourceVersion=" + rv) == 200);
  REQUIRE(server.waitFor([&](const auto&) { return server.openWatches() == 1; }, 5s));
  server.expireWatches();
  auto error = expired.nextLine();
  REQUIRE(error);
  CHECK(Json::parse(*error)["type"] == "ERROR");
  CHECK(Json::parse(*error)["object"]["code"] == 410);
  CHECK_FALSE(expired.nextLine());
  CHECK(expired.cleanEnd());
}

TEST_CASE("bearer token: 401 on a bad one and after rotation") {
  FakeApiServer server;
  Client client(server.port());
  CHECK(client.request("GET", "/api/v1/pods").status == 200);
  Reply bad = client.request("GET", "/api/v1/pods", "", "", "wrong");
  CHECK(bad.status == 401);
  CHECK(bad.json()["reason"] == "Unauthorized");
  CHECK(bad.json()["kind"] == "Status");
  CHECK(client.request("GET", "/api/v1/pods", "", "", "").status == 401);
  server.setToken("rotated");
  CHECK(client.request("GET", "/api/v1/pods").status == 401);
  CHECK(client.request("GET", "/api/v1/pods", "", "", "rotated").status == 200);

  auto recorded = server.requests();
  REQUIRE(recorded.size() == 5);
  CHECK(recorded[0].method == "GET");
  CHECK(recorded[0].path == "/api/v1/pods");
  CHECK(recorded[0].authorization == "Bearer test-token");
  CHECK(recorded[1].status == 401);
  CHECK(recorded[4].status == 200);
}

TEST_CASE("strictness: content types, JSON, methods and paths") {
  FakeApiServer server;
  server.upsertPod(pod("ns1", "p", "node-a"));
  Client client(server.port());
  std::string good = event("ns1", "e1", "ns1").dump();
  Reply wrongType = client.request("POST", "/api/v1/namespaces/ns1/events", good, "text/plain");
  CHECK(wrongType.status == 415);
  CHECK(wrongType.json()["reason"] == "UnsupportedMediaType");
  CHECK(client.request("POST", "/api/v1/namespaces/ns1/events", "{not json").status == 400);
  CHECK(client.request("PATCH", "/api/v1/namespaces/ns1/pods/p/status", "{}", "application/json")
            .status == 415);
  CHECK(client
            .request("PATCH", "/api/v1/namespaces/ns1/pods/p/status", "{oops",
                     "application/merge-patch+json")
            .status == 400);
  CHECK(client
            .request("POST", "/api/v1/namespaces/ns1/pods/p/eviction", evictionBody("p"),
                     "application/yaml")
            .status == 415);
  CHECK(client.request("PUT", "/api/v1/namespaces/ns1/pods/p", "{}").status == 405);
  CHECK(client.request("DELETE", "/api/v1/nodes").status == 405);
  Reply unknown = client.request("GET", "/api/v1/configmaps");
  CHECK(unknown.status == 404);
  CHECK(unknown.json()["kind"] == "Status");
  CHECK(client.request("GET", "/healthz").status == 404);
  CHECK(client.request("DELETE", "/api/v1/namespaces/ns1/pods/p?bogus=1").status == 400);
  CHECK(server.pod("ns1", "p"));
  CHECK(server.requests().back().status == 400);
  CHECK(server.requests().back().query == "bogus=1");
}

TEST_CASE("eviction: 201, 429 with a PDB at 0, 500 with two PDBs, 400 and 404") {
  FakeApiServer server;
  Json web = {{"app", "web"}};
  server.upsertPod(pod("ns1", "w1", "node-a", "Running", web));
  server.upsertPod(pod("ns1", "w2", "node-a", "Running", web));
  server.upsertPodDisruptionBudget(pdb("ns1", "web", {{"matchLabels", web}}, 1));
  server.upsertPodDisruptionBudget(pdb("ns2", "elsewhere", Json::object(), 0));
  Client client(server.port());

  Reply ok = client.request("POST", "/api/v1/namespaces/ns1/pods/w1/eviction",
                            evictionBody("w1", {{"gracePeriodSeconds", 5}}));
  CHECK(ok.status == 201);
  CHECK(ok.json() == Json{{"kind", "Status"},
                          {"apiVersion", "v1"},
                          {"status", "Success"},
                          {"metadata", Json::object()},
                          {"code", 201}});
  CHECK(server.podDisruptionBudget("ns1", "web").value()["status"]["disruptionsAllowed"] == 0);
  auto terminating = server.pod("ns1", "w1");
  REQUIRE(terminating);
  CHECK((*terminating)["metadata"].contains("deletionTimestamp"));
  CHECK((*terminating)["metadata"]["deletionGracePeriodSeconds"] == 5);

  Reply blocked =
      client.request("POST", "/api/v1/namespaces/ns1/pods/w2/eviction", evictionBody("w2"));
  CHECK(blocked.status == 429);
  Json body = blocked.json();
  CHECK(body["kind"] == "Status");
  CHECK(body["apiVersion"] == "v1");
  CHECK(body["status"] == "Failure");
  CHECK(body["reason"] == "TooManyRequests");
  CHECK(body["code"] == 429);
  CHECK(body["message"] == "Cannot evict pod as it would violate the pod's disruption budget.");
  REQUIRE(body["details"]["causes"].size() == 1);
  CHECK(body["details"]["causes"][0]["reason"] == "DisruptionBudget");
  CHECK(body["details"]["causes"][0]["message"] ==
        "The disruption budget web needs 2 healthy pods and has 2 currently");
  // No delay suggested (the real server's retryAfterSeconds 0): no Retry-After.
  CHECK_FALSE(body["details"].contains("retryAfterSeconds"));
  CHECK(blocked.retryAfter.empty());
  CHECK(server.pod("ns1", "w2"));

  // A budget whose status the disruption controller has not caught up with: 429 with 10 s
  // suggested, in the Status and, as the real server writes it, in Retry-After.
  Json stale = pdb("ns1", "web", {{"matchLabels", web}}, 1);
  stale["metadata"]["generation"] = 2;
  stale["status"]["observedGeneration"] = 1;
  server.upsertPodDisruptionBudget(stale);
  Reply processing =
      client.request("POST", "/api/v1/namespaces/ns1/pods/w2/eviction", evictionBody("w2"));
  CHECK(processing.status == 429);
  CHECK(processing.json()["details"]["retryAfterSeconds"] == 10);
  CHECK(processing.json()["details"]["causes"][0]["message"] ==
        "The disruption budget web is still being processed by the server.");
  CHECK(processing.retryAfter == "10");
  server.upsertPodDisruptionBudget(pdb("ns1", "web", {{"matchLabels", web}}, 0));

  // A terminating pod ignores the PDB and is deleted directly (grace 0 removes it).
  Reply again = client.request("POST", "/api/v1/namespaces/ns1/pods/w1/eviction",
                               evictionBody("w1", {{"gracePeriodSeconds", 0}}));
  CHECK(again.status == 201);
  CHECK_FALSE(server.pod("ns1", "w1"));

  server.upsertPodDisruptionBudget(pdb("ns1", "everything", Json::object(), 5));
  Reply two = client.request("POST", "/api/v1/namespaces/ns1/pods/w2/eviction", evictionBody("w2"));
  CHECK(two.status == 500);
  CHECK(two.json()["message"].get<std::string>().find(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
            "not support.") != std::string::npos);

  Reply mismatch =
      client.request("POST", "/api/v1/namespaces/ns1/pods/w2/eviction", evictionBody("other"));
  CHECK(mismatch.status == 400);
  CHECK(mismatch.json()["message"] == "name in URL does not match name in Eviction object");
  Json wrongKind = Json::parse(evictionBody("w2"));
  wrongKind["kind"] = "DeleteOptions";
  CHECK(
      client.request("POST", "/api/v1/namespaces/ns1/pods/w2/eviction", wrongKind.dump()).status ==
      400);
  CHECK(client.request("POST", "/api/v1/namespaces/ns1/pods/gone/eviction", evictionBody("gone"))
            .status == 404);

  // A null selector selects nothing; a Pending pod skips the budget.
  server.upsertPod(pod("ns3", "lonely", "node-a"));
  server.upsertPodDisruptionBudget(pdb("ns3", "null", nullptr, 0));
  Json lonely = Json::parse(evictionBody("lonely"));
  lonely["metadata"]["namespace"] = "ns3";
  CHECK(
      client.request("POST", "/api/v1/namespaces/ns3/pods/lonely/eviction", lonely.dump()).status ==
      201);
}

TEST_CASE("DELETE: uid precondition, grace period, absent pod") {
  FakeApiServer server;
  server.upsertPod(pod("ns1", "p", "node-a"));
  Client client(server.port());
  Json wrongUid = {{"kind", "DeleteOptions"},
                   {"apiVersion", "v1"},
                   {"preconditions", {{"uid", "someone-else"}}}};
  Reply conflict = client.request("DELETE", "/api/v1/namespaces/ns1/pods/p", wrongUid.dump());
  CHECK(conflict.status == 409);
  CHECK(conflict.json()["reason"] == "Conflict");
  CHECK(server.pod("ns1", "p"));

  Reply graceful = client.request("DELETE", "/api/v1/namespaces/ns1/pods/p?gracePeriodSeconds=7");
  CHECK(graceful.status == 200);
  CHECK(graceful.json()["metadata"]["deletionGracePeriodSeconds"] == 7);
  REQUIRE(server.pod("ns1", "p"));

  Json rightUid = {{"preconditions", {{"uid", "uid-p"}}}, {"gracePeriodSeconds", 0}};
  Reply now = client.request("DELETE", "/api/v1/namespaces/ns1/pods/p", rightUid.dump());
  CHECK(now.status == 200);
  CHECK(now.json()["metadata"]["name"] == "p");
  CHECK_FALSE(server.pod("ns1", "p"));
  CHECK(client.request("DELETE", "/api/v1/namespaces/ns1/pods/p").status == 404);

  server.upsertPod(pod("ns1", "done", "node-a", "Succeeded"));
  CHECK(client.request("DELETE", "/api/v1/namespaces/ns1/pods/done").status == 200);
  CHECK_FALSE(server.pod("ns1", "done"));
}

TEST_CASE("status PATCH merges conditions by type (strategic) or replaces them (merge)") {
  FakeApiServer server;
  Json p = pod("ns1", "p", "node-a");
  p["status"]["conditions"] = Json::array(
      {{{"type", "Ready"}, {"status", "True"}}, {{"type", "PodScheduled"}, {"status", "True"}}});
  server.upsertPod(p);
  Client client(server.port());
  Json patch = {{"status",
                 {{"phase", "Failed"},
                  {"reason", "Evicted"},
                  {"conditions", Json::array({{{"type", "Ready"}, {"status", "False"}},
                                              {{"type", "DisruptionTarget"},
                                               {"status", "True"},
                                               {"reason", "TerminationByKubelet"}}})}}},
                {"spec", {{"nodeName", "elsewhere"}}}};
  Reply patched = client.request("PATCH", "/api/v1/namespaces/ns1/pods/p/status", patch.dump(),
                                 "application/strategic-merge-patch+json");
  REQUIRE(patched.status == 200);
  Json status = server.pod("ns1", "p").value()["status"];
  CHECK(status["phase"] == "Failed");
  CHECK(status["reason"] == "Evicted");
  REQUIRE(status["conditions"].size() == 3);
  CHECK(status["conditions"][0] == Json{{"type", "Ready"}, {"status", "False"}});
  CHECK(status["conditions"][1]["type"] == "PodScheduled");
  CHECK(status["conditions"][2]["type"] == "DisruptionTarget");
  CHECK(server.pod("ns1", "p").value()["spec"]["nodeName"] == "node-a");  // spec ignored
  CHECK(patched.json()["status"] == status);

  Json nominate = {{"status", {{"nominatedNodeName", "node-z"}}}};
  CHECK(client
            .request("PATCH", "/api/v1/namespaces/ns1/pods/p/status", nominate.dump(),
                     "application/merge-patch+json")
            .status == 200);
  CHECK(server.pod("ns1", "p").value()["status"]["nominatedNodeName"] == "node-z");
  Json replace = {{"status", {{"conditions", Json::array({{{"type", "Ready"}}})}}}};
  CHECK(client
            .request("PATCH", "/api/v1/namespaces/ns1/pods/p/status", replace.dump(),
                     "application/merge-patch+json")
            .status == 200);
  CHECK(server.pod("ns1", "p").value()["status"]["conditions"].size() == 1);
  CHECK(client
            .request("PATCH", "/api/v1/namespaces/ns1/pods/nope/status", replace.dump(),
                     "application/merge-patch+json")
            .status == 404);

  server.upsertNode(
      {{"metadata", {{"name", "n1"}}},
       {"status", {{"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}});
  Json nodePatch = {{"status",
                     {{"conditions", Json::array({{{"type", "ExampleComMemoryPressure"},
                                                   {"status", "True"}}})}}}};
  CHECK(client
            .request("PATCH", "/api/v1/nodes/n1/status", nodePatch.dump(),
                     "application/strategic-merge-patch+json")
            .status == 200);
  CHECK(server.node("n1").value()["status"]["conditions"].size() == 2);
}

TEST_CASE("event POST validation") {
  FakeApiServer server;
  Client client(server.port());
  Reply created =
      client.request("POST", "/api/v1/namespaces/ns1/events", event("ns1", "e1", "ns1").dump());
  CHECK(created.status == 201);
  CHECK(created.json()["metadata"]["name"] == "e1");
  REQUIRE(server.events().size() == 1);
  CHECK(server.events()[0]["reason"] == "Evicted");

  Reply mismatch =
      client.request("POST", "/api/v1/namespaces/ns1/events", event("ns1", "e2", "other").dump());
  CHECK(mismatch.status == 422);
  CHECK(mismatch.json()["reason"] == "Invalid");
  CHECK(mismatch.json()["details"]["causes"][0]["field"] == "involvedObject.namespace");

  Json noReason = event("ns1", "e3", "ns1");
  noReason.erase("reason");
  CHECK(client.request("POST", "/api/v1/namespaces/ns1/events", noReason.dump()).status == 422);
  Json badType = event("ns1", "e4", "ns1");
  badType["type"] = "Critical";
  CHECK(client.request("POST", "/api/v1/namespaces/ns1/events", badType.dump()).status == 422);
  CHECK(client.request("POST", "/api/v1/namespaces/ns1/events", event("ns1", "e1", "ns1").dump())
            .status == 409);
  CHECK(client.request("POST", "/api/v1/namespaces/ns2/events", event("ns1", "e5", "ns1").dump())
            .status == 400);

  Json generated = event("default", "", "");
  generated["metadata"].erase("name");
  generated["metadata"]["generateName"] = "node-a.";
  generated["involvedObject"] = {{"kind", "Node"}, {"name", "node-a"}};
  Reply named = client.request("POST", "/api/v1/namespaces/default/events", generated.dump());
  CHECK(named.status == 201);
  CHECK(named.json()["metadata"]["name"].get<std::string>().rfind("node-a.", 0) == 0);
  CHECK(server.events().size() == 2);
  CHECK(client.request("GET", "/api/v1/namespaces/default/events").json()["items"].size() == 1);
}

TEST_CASE("TLS with the test certificate as the CA") {
  TestCertificate cert = makeTestCertificate();
  CHECK(cert.certPem.find("BEGIN CERTIFICATE") != std::string::npos);
  FakeApiServerOptions options;
  options.tls = true;
  options.certPem = cert.certPem;
  options.keyPem = cert.keyPem;
  FakeApiServer server(options);
  CHECK(server.url() == "https://127.0.0.1:" + std::to_string(server.port()));

  ssl::context trusting(ssl::context::tls_client);
  trusting.add_certificate_authority(net::buffer(cert.certPem));
  trusting.set_verify_mode(ssl::verify_peer);
  Client client(server.port(), &trusting);
  REQUIRE_FALSE(client.error());
  CHECK(client.request("GET", "/api/v1/pods").status == 200);

  // Without the CA the handshake fails: the test above can fail.
  ssl::context untrusting(ssl::context::tls_client);
  untrusting.set_verify_mode(ssl::verify_peer);
  Client refused(server.port(), &untrusting);
  CHECK(refused.error());
}

TEST_CASE("setDown refuses connections, drops watches and serves again on the same port") {
  FakeApiServer server;
  std::uint16_t port = server.port();
  Client watch(port);
  REQUIRE(watch.startWatch("/api/v1/pods?watch=1") == 200);
  REQUIRE(server.waitFor([&](const auto&) { return server.openWatches() == 1; }, 5s));

  server.setDown(true);
  CHECK_FALSE(watch.nextLine());
  CHECK_FALSE(watch.cleanEnd());
  Client refused(port);
  bool failed =
      static_cast<bool>(refused.error()) || refused.request("GET", "/api/v1/pods").status == 0;
  CHECK(failed);

  server.upsertPod(pod("ns1", "while-down", "node-a"));
  server.setDown(false);
  CHECK(server.port() == port);
  Client back(port);
  REQUIRE_FALSE(back.error());
  Reply list = back.request("GET", "/api/v1/pods");
  CHECK(list.status == 200);
  CHECK(names(list.json()) == std::vector<std::string>{"while-down"});
}

TEST_CASE("setFaults: slow answers, 500s, resets and a 410 loop; cutWatchesMidObject") {
  FakeApiServer server;
  seedPods(server);
  std::string rv = server.resourceVersion();

  SUBCASE("slow") {
    server.setFaults({.delay = 300ms});
    Client client(server.port());
    auto start = std::chrono::steady_clock::now();
    CHECK(client.request("GET", "/api/v1/pods").status == 200);
    CHECK(std::chrono::steady_clock::now() - start >= 300ms);
  }
  SUBCASE("failing") {
    server.setFaults({.failWith = 500});
    Client client(server.port());
    Reply reply = client.request("GET", "/api/v1/pods");
    CHECK(reply.status == 500);
    CHECK(reply.json()["kind"] == "Status");
    CHECK(reply.json()["reason"] == "InternalError");
    server.setFaults({});
    CHECK(client.request("GET", "/api/v1/pods").status == 200);
  }
  SUBCASE("resetting") {
    server.setFaults({.resetConnections = true});
    Client client(server.port());
    bool failed =
        static_cast<bool>(client.error()) || client.request("GET", "/api/v1/pods").status == 0;
    CHECK(failed);
    server.setFaults({});
    Client again(server.port());
    CHECK(again.request("GET", "/api/v1/pods").status == 200);
  }
  SUBCASE("410 loop") {
    server.setFaults({.goneLoop = true});
    for (int i = 0; i < 3; ++i) {
      Client watch(server.port());
      REQUIRE(watch.startWatch("/api/v1/pods?watch=1&resourceVersion=" +
                               server.resourceVersion()) == 200);
      auto error = watch.nextLine();
      REQUIRE(error);
      CHECK(Json::parse(*error)["object"]["code"] == 410);
      CHECK_FALSE(watch.nextLine());
    }
  }
  SUBCASE("cut mid-object") {
    Client watch(server.port());
    REQUIRE(watch.startWatch("/api/v1/pods?watch=1&resourceVersion=" + rv) == 200);
    REQUIRE(server.waitFor([&](const auto&) { return server.openWatches() == 1; }, 5s));
    server.cutWatchesMidObject();
    CHECK_FALSE(watch.nextLine());  // half a line, then the connection ends
    CHECK_FALSE(watch.cleanEnd());
    CHECK_FALSE(watch.timedOut());
    CHECK(server.openWatches() == 0);
  }
}
