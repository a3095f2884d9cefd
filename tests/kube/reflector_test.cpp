// kube/reflector: LIST (paged) + WATCH against the strict fake API server, with its faults:
// dropped streams, compaction (410 as HTTP status and in-stream), expiry, an unreachable
// server, malformed events and objects, field selectors.
#include "kube/reflector.h"

#include <doctest/doctest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <set>

#include "policy/model.h"
#include "tests/kube/fake_apiserver.h"

namespace asio = boost::asio;
using nodewarden::kube::Client;
using nodewarden::kube::ClusterConfig;
using nodewarden::kube::Reflector;
using nodewarden::kube::ReflectorOptions;
using nodewarden::kube::Store;
using nodewarden::policy::Pod;
using nodewarden::testing::FakeApiServer;
using nodewarden::testing::FakeApiServerOptions;
using nodewarden::testing::RecordedRequest;
using Json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

Json pod(const std::string& name, const std::string& node = "node-1",
         const std::string& generation = "1") {
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"namespace", "default"},
                {"name", name},
                {"uid", "uid-" + name},
                {"labels", {{"generation", generation}}}}},
              {"spec",
               {{"nodeName", node},
                {"priority", 0},
                {"containers", Json::array({Json{{"name", "c"}, {"image", "busybox"}}})}}},
              {"status", {{"phase", "Running"}, {"qosClass", "BestEffort"}}}};
}

struct Fixture {
  explicit Fixture(FakeApiServerOptions serverOptions = withBookmarks(),
                   std::string fieldSelector = {})
      : server(serverOptions),
        client(loop, config(server)),
        store("Pod", [](const Json& json, const std::string& path,
                        nodewarden::policy::Diagnostics& diagnostics) {
          return nodewarden::policy::parsePod(json, path, diagnostics);
        }) {
    options.listPath = "/api/v1/pods";
    options.fieldSelector = std::move(fieldSelector);
    options.pageSize = 3;
    options.watchTimeout = 60s;
    options.initialBackoff = 20ms;
    options.maxBackoff = 160ms;
    options.seed = 42;
  }
  static FakeApiServerOptions withBookmarks() {
    FakeApiServerOptions o;
    o.bookmarkEvery = 200ms;
    return o;
  }
  static ClusterConfig config(const FakeApiServer& s) {
    ClusterConfig c;
    c.host = "127.0.0.1";
    c.port = std::to_string(s.port());
    c.tls = false;
    c.token = "test-token";
    return c;
  }
  void start() {
    reflector = std::make_unique<Reflector>(
        loop, client, options, store, [this](const std::string& event, const std::string& detail) {
          logs.push_back(event + ": " + detail);
          if (event == "retry") backoffs.push_back(reflector->stats().lastBackoff);
        });
    reflector->start();
  }
  template <typename Pred>
  bool runUntil(Pred&& done, std::chrono::milliseconds timeout = 10000ms) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < deadline) loop.run_for(5ms);
    return done();
  }
  void runFor(std::chrono::milliseconds d) {
    auto deadline = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < deadline) loop.run_for(5ms);
  }
  // The store holds exactly the server's pods on node-1, each at the server's generation.
  bool matchesServer(const std::set<std::string>& names) const {
    if (store.objects().size() != names.size()) return false;
    for (const auto& name : names) {
      auto it = store.objects().find("default/" + name);
      auto onServer = server.pod("default", name);
      if (it == store.objects().end() || !onServer) return false;
      if (it->second.labels.at("generation") !=
          (*onServer)["metadata"]["labels"]["generation"].get<std::string>())
        return false;
    }
    return true;
  }
  std::vector<RecordedRequest> requestsWith(const std::string& queryPart) const {
    std::vector<RecordedRequest> out;
    for (auto& r : server.requests())
      if (r.query.find(queryPart) != std::string::npos) out.push_back(r);
    return out;
  }
  std::size_t logsWith(const std::string& text) const {
    std::size_t n = 0;
    for (const auto& l : logs) n += l.find(text) != std::string::npos ? 1 : 0;
    return n;
  }

  asio::io_context loop;
  asio::executor_work_guard<asio::io_context::executor_type> guard{loop.get_executor()};
  FakeApiServer server;
  Client client;
  Store<Pod> store;
  ReflectorOptions options;
  std::unique_ptr<Reflector> reflector;
  std::vector<std::string> logs;
  std::vector<std::chrono::milliseconds> backoffs;
};

}  // namespace

TEST_CASE("reflector: paged initial list, then the watch applies every change") {
  Fixture f;
  std::set<std::string> names;
  for (int i = 0; i < 10; ++i) {
    std::string name = "p" + std::to_string(i);
    f.server.upsertPod(pod(name));
    names.insert(name);
  }
  f.start();
  CHECK_FALSE(f.reflector->synced());
  REQUIRE(f.runUntil([&] { return f.reflector->synced(); }));
  CHECK(f.matchesServer(names));
  CHECK(f.store.version() == 1);  // one replace for the four pages
  CHECK(f.reflector->stats().lists == 1);
  auto lists = f.requestsWith("limit=3");
  REQUIRE(lists.size() == 4);
  CHECK(lists[0].query == "limit=3");
  for (std::size_t i = 1; i < lists.size(); ++i)
    CHECK(lists[i].query.find("&continue=") != std::string::npos);
  CHECK(f.logsWith("list: listed 10 pods at resourceVersion " + f.server.resourceVersion()) == 1);
  CHECK(f.reflector->resourceVersion() == f.server.resourceVersion());

  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1; }));
  auto watches = f.requestsWith("watch=1");
  REQUIRE(watches.size() == 1);
  CHECK(watches[0].query == "watch=1&resourceVersion=" + f.server.resourceVersion() +
                                "&allowWatchBookmarks=true&timeoutSeconds=60");

  f.server.upsertPod(pod("new"));
  names.insert("new");
  f.server.upsertPod(pod("p1", "node-1", "2"));
  f.server.deletePod("default", "p2");
  names.erase("p2");
  REQUIRE(f.runUntil([&] { return f.matchesServer(names); }));
  CHECK(f.reflector->stats().events == 3);
  REQUIRE(f.runUntil([&] { return f.reflector->stats().bookmarks >= 1; }));
  CHECK(f.reflector->resourceVersion() == f.server.resourceVersion());
  CHECK(f.reflector->connected());
  CHECK(f.reflector->stats().failures == 0);
  CHECK(f.store.takeProblems().empty());

  // stop(): nothing reaches the store or the log afterwards.
  f.reflector->stop();
  auto version = f.store.version();
  auto logCount = f.logs.size();
  f.server.upsertPod(pod("after-stop"));
  f.runFor(300ms);
  CHECK(f.store.version() == version);
  CHECK(f.logs.size() == logCount);
}

TEST_CASE(
    "reflector: a dropped watch resumes from the last resourceVersion, nothing lost or doubled") {
  Fixture f;
  std::set<std::string> names = {"a", "b"};
  f.server.upsertPod(pod("a"));
  f.server.upsertPod(pod("b"));
  f.start();
  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1; }));
  f.server.upsertPod(pod("c"));
  names.insert("c");
  REQUIRE(f.runUntil([&] { return f.matchesServer(names); }));
  std::string rvBeforeDrop = f.reflector->resourceVersion();
  std::uint64_t eventsBefore = f.reflector->stats().events;

  for (int round = 0; round < 3; ++round) {
    f.server.dropWatches();
    // Changes while the reflector reconnects.
    f.server.upsertPod(pod("d" + std::to_string(round)));
    names.insert("d" + std::to_string(round));
    f.server.upsertPod(pod("a", "node-1", std::to_string(round + 2)));
    REQUIRE(f.runUntil([&] { return f.matchesServer(names); }));
    REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1; }));
  }
  f.server.deletePod("default", "b");
  names.erase("b");
  REQUIRE(f.runUntil([&] { return f.matchesServer(names); }));
  const auto& stats = f.reflector->stats();
  CHECK(stats.lists == 1);
  CHECK(stats.relists410 == 0);
  CHECK(stats.watches == 4);
  CHECK(stats.events == eventsBefore + 3 * 2 + 1);  // every change exactly once
  auto watches = f.requestsWith("watch=1");
  REQUIRE(watches.size() == 4);
  // The first resumption starts from what the reflector had seen (a bookmark may have moved
  // it past the last change, never before it).
  CHECK(std::stoull(watches[1].query.substr(watches[1].query.find("resourceVersion=") + 16)) >=
        std::stoull(rvBeforeDrop));
  CHECK(f.logsWith("watch ended: ") == 3);
  CHECK(f.logsWith("resuming from ") == 3);
}

TEST_CASE("reflector: compaction while away → 410 → relist to the server's state") {
  bool httpGone = false;
  SUBCASE("410 as the HTTP status") {
    httpGone = true;
  }
  SUBCASE("410 as an in-stream ERROR event") {
    httpGone = false;
  }
  FakeApiServerOptions options = Fixture::withBookmarks();
  options.goneAsHttpStatus = httpGone;
  Fixture f(options);
  std::set<std::string> names = {"a", "b", "c", "d"};
  for (const auto& n : names) f.server.upsertPod(pod(n));
  f.start();
  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1 && f.matchesServer(names); }));
  std::string rv = f.reflector->resourceVersion();

  // Away (stopped) while things change and the server forgets its history.
  f.reflector->stop();
  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 0; }));
  f.server.deletePod("default", "a");
  names.erase("a");
  f.server.upsertPod(pod("b", "node-1", "7"));
  f.server.upsertPod(pod("e"));
  names.insert("e");
  f.server.compact();
  f.server.dropWatches();
  f.reflector->start();  // resumes the watch from `rv`: too old

  REQUIRE(
      f.runUntil([&] { return f.reflector->stats().relists410 == 1 && f.matchesServer(names); }));
  CHECK(f.requestsWith("watch=1&resourceVersion=" + rv).size() >= 2);
  CHECK(f.reflector->stats().lists == 2);
  CHECK(f.logsWith("relist: 410 Gone") == 1);
  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1; }));
  f.server.upsertPod(pod("f"));
  names.insert("f");
  REQUIRE(f.runUntil([&] { return f.matchesServer(names); }));
  CHECK(f.reflector->stats().relists410 == 1);
  CHECK(f.reflector->stats().failures == 0);
}

TEST_CASE("reflector: compaction while the server is down → 410 → relist") {
  Fixture f;
  std::set<std::string> names = {"a", "b"};
  for (const auto& n : names) f.server.upsertPod(pod(n));
  f.start();
  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1 && f.matchesServer(names); }));
  f.server.setDown(true);
  f.server.deletePod("default", "a");
  names.erase("a");
  f.server.upsertPod(pod("c"));
  names.insert("c");
  f.server.compact();
  f.server.dropWatches();
  f.server.setDown(false);
  REQUIRE(
      f.runUntil([&] { return f.reflector->stats().relists410 == 1 && f.matchesServer(names); }));
  CHECK(f.reflector->stats().lists == 2);
}

TEST_CASE("reflector: an expired watch (in-stream 410) relists") {
  Fixture f;
  std::set<std::string> names = {"a"};
  f.server.upsertPod(pod("a"));
  f.start();
  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1; }));
  f.server.expireWatches();
  f.server.upsertPod(pod("b"));
  names.insert("b");
  REQUIRE(
      f.runUntil([&] { return f.reflector->stats().relists410 == 1 && f.matchesServer(names); }));
  CHECK(f.reflector->stats().lists == 2);
  CHECK(f.reflector->stats().failures == 0);
}

TEST_CASE("reflector: an unreachable server, jittered bounded backoff, then catching up") {
  Fixture f;
  std::set<std::string> names = {"a"};
  f.server.upsertPod(pod("a"));
  f.start();
  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1 && f.reflector->connected(); }));

  f.server.setDown(true);
  f.server.upsertPod(pod("b"));
  names.insert("b");
  f.server.upsertPod(pod("a", "node-1", "5"));
  REQUIRE(f.runUntil([&] { return f.backoffs.size() >= 8; }));
  CHECK_FALSE(f.reflector->connected());
  // The k-th delay is in [0.5, 1.5) × min(20 ms × 2^k, 160 ms).
  for (std::size_t k = 0; k < f.backoffs.size(); ++k) {
    auto nominal = std::min<std::int64_t>(20 << std::min<std::size_t>(k, 10), 160);
    CHECK(f.backoffs[k].count() >= nominal / 2);
    CHECK(f.backoffs[k].count() < nominal * 3 / 2);
  }
  CHECK(f.logsWith("retry: retrying in ") == f.backoffs.size());
  CHECK(f.reflector->stats().failures == f.backoffs.size());

  f.server.setDown(false);
  REQUIRE(f.runUntil([&] { return f.matchesServer(names) && f.reflector->connected(); }));
  CHECK(f.reflector->stats().lists == 1);  // resumed from its resourceVersion: no relist
  CHECK(f.logsWith("connected: ") == 1);

  // After a success the backoff starts over.
  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1; }));
  std::size_t before = f.backoffs.size();
  f.server.setDown(true);
  REQUIRE(f.runUntil([&] { return f.backoffs.size() > before; }));
  CHECK(f.backoffs[before].count() >= 10);
  CHECK(f.backoffs[before].count() < 30);
  f.server.setDown(false);
}

TEST_CASE("reflector: the initial list retries while the server is down") {
  Fixture f;
  f.server.upsertPod(pod("a"));
  f.server.setDown(true);
  f.start();
  REQUIRE(f.runUntil([&] { return f.backoffs.size() >= 2; }));
  CHECK_FALSE(f.reflector->synced());
  CHECK_FALSE(f.reflector->connected());
  f.server.setDown(false);
  REQUIRE(f.runUntil([&] { return f.reflector->synced(); }));
  CHECK(f.matchesServer({"a"}));
  CHECK(f.reflector->connected());
}

TEST_CASE("reflector: malformed events are counted and skipped; the stream goes on") {
  Fixture f;
  std::set<std::string> names = {"a"};
  f.server.upsertPod(pod("a"));
  f.start();
  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1; }));
  f.server.injectRawWatchLine("pods", R"({"type":"ADDED","object":"not an object"})");
  f.server.injectRawWatchLine("pods", R"({"type":"EXPLODED","object":{"metadata":{"name":"x"}}})");
  f.server.injectRawWatchLine("pods", R"({"type":"ADDED","object":{"kind":"Pod"}})");
  f.server.injectRawWatchLine("pods", R"({"object":{"metadata":{"name":"x"}}})");
  f.server.injectRawWatchLine("pods", R"([1, 2, 3])");
  f.server.injectRawWatchLine("pods", R"({"type":"MODIFIED","object":{"metadata":{"name":"a",)");
  f.server.injectRawWatchLine("pods", R"({"type":"ADDED","object":{"metadata":{"name":"x"}}})");
  f.server.upsertPod(pod("b"));
  names.insert("b");
  REQUIRE(f.runUntil([&] { return f.matchesServer(names); }));
  const auto& stats = f.reflector->stats();
  CHECK(stats.badEvents == 7);
  CHECK(stats.events == 1);
  CHECK(stats.watches == 1);
  CHECK(stats.lists == 1);
  CHECK(f.logsWith("bad event: skipped a malformed watch event: ") == 7);
  CHECK(f.logsWith("unknown event type \"EXPLODED\"") == 1);
  CHECK(f.logsWith("ADDED event whose object has no metadata") == 2);
  CHECK(f.logsWith("ADDED event whose object has no metadata.resourceVersion") == 1);
}

TEST_CASE("reflector: a malformed Pod is reported by the Store while the others count") {
  Fixture f;
  Json bad = pod("bad");
  bad["spec"]["priority"] = "high";
  f.server.upsertPod(pod("good"));
  f.server.upsertPod(bad);
  f.start();
  REQUIRE(f.runUntil([&] { return f.reflector->synced(); }));
  CHECK(f.store.objects().count("default/good") == 1);
  auto problems = f.store.takeProblems();
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("Pod default/bad skipped: items[0].spec.priority: ") == 0);

  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1; }));
  Json worse = pod("good", "node-1", "2");
  worse["spec"]["containers"] = "none";
  f.server.upsertPod(worse);
  f.server.upsertPod(pod("other"));
  REQUIRE(f.runUntil([&] { return f.store.objects().count("default/other") == 1; }));
  problems = f.store.takeProblems();
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("Pod default/good skipped: object.spec.containers: ") == 0);
  // The last good version stays.
  CHECK(f.store.objects().at("default/good").labels.at("generation") == "1");
  CHECK(f.reflector->stats().badEvents == 0);
  CHECK(f.reflector->stats().events == 2);
}

TEST_CASE("reflector: the field selector is sent on the list and the watch") {
  Fixture f(Fixture::withBookmarks(), "spec.nodeName=node-1");
  f.server.upsertPod(pod("mine"));
  f.server.upsertPod(pod("theirs", "node-2"));
  f.start();
  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1; }));
  CHECK(f.matchesServer({"mine"}));
  f.server.upsertPod(pod("theirs-2", "node-2"));
  f.server.upsertPod(pod("mine-2"));
  REQUIRE(f.runUntil([&] { return f.store.objects().size() == 2; }));
  f.runFor(100ms);
  CHECK(f.matchesServer({"mine", "mine-2"}));
  auto selected = f.requestsWith("fieldSelector=spec.nodeName%3Dnode-1");
  CHECK(selected.size() == 2);  // the list and the watch
  CHECK(f.server.requests().size() == 2);
}

TEST_CASE("reflector: a 410 loop (every watch from a fresh list too old) backs off, then heals") {
  Fixture f;
  std::set<std::string> names = {"a"};
  f.server.upsertPod(pod("a"));
  f.start();
  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1 && f.matchesServer(names); }));
  f.server.setFaults({.goneLoop = true});
  f.server.expireWatches();
  f.runFor(1500ms);
  // Without a backoff this loop lists thousands of times a second (bench_agent part 5); with
  // 20 ms doubling to 160 ms (jittered ×0.5–1.5) it is at most about 1.5 s / 80 ms + 4.
  const auto lists = f.reflector->stats().lists;
  CHECK(lists >= 3);
  CHECK(lists <= 25);
  CHECK(f.reflector->stats().lastBackoff >= 80ms);
  CHECK(f.logsWith("410 Gone at once after a list") >= 2);
  CHECK(f.reflector->stats().failures == 0);  // answered, not failed: no "disconnected" state

  f.server.setFaults({});
  f.server.upsertPod(pod("b"));
  names.insert("b");
  REQUIRE(f.runUntil([&] { return f.server.openWatches() == 1 && f.matchesServer(names); }));
  f.runFor(300ms);  // a bookmark: the watch is healthy, the backoff starts over
  f.server.upsertPod(pod("c"));
  names.insert("c");
  REQUIRE(f.runUntil([&] { return f.matchesServer(names); }));
}
