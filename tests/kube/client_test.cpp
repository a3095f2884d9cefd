// kube/client: requests and watch streams against the strict fake API server (plain HTTP
// and TLS), plus raw sockets for what a well-behaved server never does (no answer, events
// split across chunks).
#include "kube/client.h"
#include "kube/utf8.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/kube/fake_apiserver.h"

namespace asio = boost::asio;
namespace fs = std::filesystem;
using nodewarden::kube::ApiResponse;
using nodewarden::kube::Client;
using nodewarden::kube::ClientOptions;
using nodewarden::kube::ClusterConfig;
using nodewarden::kube::WatchStream;
using nodewarden::testing::FakeApiServer;
using nodewarden::testing::FakeApiServerOptions;
using nodewarden::testing::makeTestCertificate;
using Json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

struct Loop {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};

  // Runs the loop until `done()` or `timeout`; returns done().
  template <typename Pred>
  bool runUntil(Pred&& done, std::chrono::milliseconds timeout = 5000ms) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < deadline) io.run_for(5ms);
    return done();
  }
  void runFor(std::chrono::milliseconds d) {
    auto deadline = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < deadline) io.run_for(5ms);
  }
};

ClusterConfig configFor(const FakeApiServer& server, const std::string& token = "test-token") {
  ClusterConfig c;
  c.host = "127.0.0.1";
  c.port = std::to_string(server.port());
  c.tls = false;
  c.token = token;
  return c;
}

Json pod(const std::string& ns, const std::string& name) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"namespace", ns}, {"name", name}, {"uid", "uid-" + name}}},
              {"spec", {{"nodeName", "node-1"}, {"containers", Json::array()}}},
              {"status", {{"phase", "Running"}}}};
}

// Sends a request and runs the loop until its answer.
ApiResponse call(Loop& loop, Client& client, const std::string& method, const std::string& target,
                 std::string body = {}, std::string contentType = {}) {
  std::optional<ApiResponse> out;
  client.request(method, target, std::move(body), std::move(contentType),
                 [&](ApiResponse r) { out = std::move(r); });
  REQUIRE(loop.runUntil([&] { return out.has_value(); }, 15000ms));
  return *out;
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "nwkube-client-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A TCP server on the test's loop that reads one request header and then does what it is
// told: nothing (a server that never answers) or write a raw response in pieces.
class RawServer {
 public:
  explicit RawServer(asio::io_context& io)
      : acceptor_(io, {asio::ip::make_address("127.0.0.1"), 0}) {}
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  // Accepts one connection; after its request writes `pieces`, each after `gap`.
  void serve(std::vector<std::string> pieces, std::chrono::milliseconds gap) {
    pieces_ = std::move(pieces);
    gap_ = gap;
    acceptor_.async_accept([this](boost::system::error_code ec, asio::ip::tcp::socket socket) {
      if (ec) return;
      ++accepted;
      socket_ = std::make_unique<asio::ip::tcp::socket>(std::move(socket));
      asio::async_read_until(*socket_, request_, "\r\n\r\n",
                             [this](boost::system::error_code readEc, std::size_t) {
                               if (readEc) return;
                               ++requests;
                               writeNext(0);
                             });
    });
  }
  int accepted = 0;
  int requests = 0;

 private:
  void writeNext(std::size_t i) {
    if (i >= pieces_.size()) return;
    timer_ = std::make_unique<asio::steady_timer>(acceptor_.get_executor(), gap_);
    timer_->async_wait([this, i](boost::system::error_code ec) {
      if (ec || !socket_) return;
      asio::async_write(*socket_, asio::buffer(pieces_[i]),
                        [this, i](boost::system::error_code writeEc, std::size_t) {
                          if (!writeEc) writeNext(i + 1);
                        });
    });
  }

  asio::ip::tcp::acceptor acceptor_;
  std::unique_ptr<asio::ip::tcp::socket> socket_;
  std::unique_ptr<asio::steady_timer> timer_;
  asio::streambuf request_;
  std::vector<std::string> pieces_;
  std::chrono::milliseconds gap_{0};
};

std::string chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

struct WatchRecord {
  std::vector<Json> events;
  std::vector<std::pair<std::string, std::string>> bad;
  std::optional<ApiResponse> end;
  int ends = 0;
  Client::WatchHandlers handlers() {
    return {[this](const Json& e) { events.push_back(e); },
            [this](std::string_view text, const std::string& problem) {
              bad.emplace_back(std::string(text), problem);
            },
            [this](ApiResponse r) {
              end = std::move(r);
              ++ends;
            }};
  }
  std::size_t count(const std::string& type) const {
    std::size_t n = 0;
    for (const auto& e : events) n += e.value("type", "") == type ? 1 : 0;
    return n;
  }
};

}  // namespace

TEST_CASE("client: GET, a 404 Status in describe(), keep-alive, headers") {
  FakeApiServer server;
  server.upsertPod(pod("default", "web-1"));
  Loop loop;
  Client client(loop.io, configFor(server));

  auto ok = call(loop, client, "GET", "/api/v1/namespaces/default/pods/web-1");
  CHECK(ok.status == 200);
  CHECK(ok.contentType == "application/json");
  auto body = Json::parse(ok.body);
  CHECK(body["metadata"]["name"] == "web-1");
  CHECK(ok.describe() == "200 OK: " + ok.body.substr(0, 200) + (ok.body.size() > 200 ? "…" : ""));

  auto missing = call(loop, client, "GET", "/api/v1/namespaces/default/pods/nope");
  CHECK(missing.status == 404);
  CHECK(missing.describe() == "404 Not Found: pods \"nope\" not found");

  // Many requests in a row (a connection reused each time) all succeed.
  for (int i = 0; i < 20; ++i) {
    auto again = call(loop, client, "GET", "/api/v1/namespaces/default/pods/web-1");
    REQUIRE(again.status == 200);
  }
  auto requests = server.requests();
  REQUIRE(requests.size() == 22);
  CHECK(requests[0].method == "GET");
  CHECK(requests[0].path == "/api/v1/namespaces/default/pods/web-1");
  CHECK(requests[0].authorization == "Bearer test-token");

  // A body and its content type.
  auto event =
      call(loop, client, "POST", "/api/v1/namespaces/default/events",
           R"({"apiVersion":"v1","kind":"Event","metadata":{"name":"e1","namespace":"default"},
                        "involvedObject":{"kind":"Pod","name":"web-1","namespace":"default"},
                        "reason":"Test","message":"m","type":"Normal"})",
           "application/json");
  CHECK_MESSAGE(event.status / 100 == 2, event.describe());
  CHECK(server.requests().back().contentType == "application/json");

  auto unknown = call(loop, client, "FROB", "/api/v1/pods");
  CHECK(unknown.status == 0);
  CHECK(unknown.describe() == "unknown HTTP method");
}

TEST_CASE("client: a wrong token gets 401 and describe() says so") {
  FakeApiServer server;
  Loop loop;
  Client client(loop.io, configFor(server, "wrong"));
  auto r = call(loop, client, "GET", "/api/v1/pods");
  CHECK(r.status == 401);
  CHECK(r.describe() == "401 Unauthorized: Unauthorized");
  CHECK(server.requests().size() == 1);  // a fixed token: nothing to re-read, no retry
}

TEST_CASE("client: transport errors are status 0 with what failed") {
  Loop loop;
  // A port nobody listens on: bind one, close it.
  std::uint16_t port;
  {
    asio::ip::tcp::acceptor a(loop.io, {asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }
  ClusterConfig c;
  c.host = "127.0.0.1";
  c.port = std::to_string(port);
  c.tls = false;
  Client client(loop.io, c);
  auto r = call(loop, client, "GET", "/api/v1/pods");
  CHECK(r.status == 0);
  CHECK(r.error == "connect to 127.0.0.1:" + std::to_string(port) + ": Connection refused");
  CHECK(r.describe() == r.error);
}

TEST_CASE("client: the request timeout fires against a server that never answers") {
  Loop loop;
  RawServer raw(loop.io);
  raw.serve({}, 0ms);
  ClusterConfig c;
  c.host = "127.0.0.1";
  c.port = std::to_string(raw.port());
  c.tls = false;
  ClientOptions options;
  options.requestTimeout = 300ms;
  Client client(loop.io, c, options);
  auto started = std::chrono::steady_clock::now();
  auto r = call(loop, client, "GET", "/api/v1/pods");
  auto elapsed = std::chrono::steady_clock::now() - started;
  CHECK(raw.requests == 1);
  CHECK(r.status == 0);
  CHECK(r.error == "read from 127.0.0.1:" + std::to_string(raw.port()) +
                       ": timed out (request timeout 300 ms)");
  CHECK(elapsed >= 280ms);
  CHECK(elapsed < 2000ms);
}

TEST_CASE("client: TLS against the fake server") {
  auto cert = makeTestCertificate();
  FakeApiServerOptions options;
  options.tls = true;
  options.certPem = cert.certPem;
  options.keyPem = cert.keyPem;
  FakeApiServer server(options);
  server.upsertPod(pod("default", "web-1"));
  Loop loop;
  ClusterConfig c = configFor(server);
  c.tls = true;
  c.caData = cert.certPem;

  SUBCASE("the right CA, by IP address") {
    Client client(loop.io, c);
    auto r = call(loop, client, "GET", "/api/v1/namespaces/default/pods/web-1");
    CHECK_MESSAGE(r.status == 200, r.describe());
    for (int i = 0; i < 5; ++i) CHECK(call(loop, client, "GET", "/api/v1/pods").status == 200);
  }
  SUBCASE("the right CA from a file, a DNS name through tls-server-name") {
    TempDir dir;
    std::ofstream(dir.path / "ca.crt") << cert.certPem;
    c.caData.clear();
    c.caFile = (dir.path / "ca.crt").string();
    c.tlsServerName = "localhost";
    Client client(loop.io, c);
    auto r = call(loop, client, "GET", "/api/v1/pods");
    CHECK_MESSAGE(r.status == 200, r.describe());
  }
  SUBCASE("a name the certificate does not carry") {
    c.tlsServerName = "api.example.com";
    Client client(loop.io, c);
    auto r = call(loop, client, "GET", "/api/v1/pods");
    CHECK(r.status == 0);
    CHECK(r.error.find("TLS handshake with 127.0.0.1:" + c.port + ": ") == 0);
    CHECK(r.error.find("hostname mismatch") != std::string::npos);
  }
  SUBCASE("a wrong CA") {
    c.caData = makeTestCertificate().certPem;
    Client client(loop.io, c);
    auto r = call(loop, client, "GET", "/api/v1/pods");
    CHECK(r.status == 0);
    CHECK(r.error.find("TLS handshake with 127.0.0.1:" + c.port + ": certificate verify failed") ==
          0);
    CHECK(server.requests().empty());
  }
  SUBCASE("insecure-skip-tls-verify accepts any certificate") {
    c.caData.clear();
    c.insecureSkipTlsVerify = true;
    Client client(loop.io, c);
    CHECK(call(loop, client, "GET", "/api/v1/pods").status == 200);
  }
  SUBCASE("a client certificate and key load (data and files)") {
    auto clientCert = makeTestCertificate("nodewarden");
    c.clientCertData = clientCert.certPem;
    c.clientKeyData = clientCert.keyPem;
    {
      Client client(loop.io, c);
      CHECK(call(loop, client, "GET", "/api/v1/pods").status == 200);
    }
    TempDir dir;
    std::ofstream(dir.path / "client.crt") << clientCert.certPem;
    std::ofstream(dir.path / "client.key") << clientCert.keyPem;
    c.clientCertData.clear();
    c.clientKeyData.clear();
    c.clientCertFile = (dir.path / "client.crt").string();
    c.clientKeyFile = (dir.path / "client.key").string();
    {
      Client client(loop.io, c);
      CHECK(call(loop, client, "GET", "/api/v1/pods").status == 200);
    }
    c.clientKeyFile = (dir.path / "absent.key").string();
    Client broken(loop.io, c);
    auto r = call(loop, broken, "GET", "/api/v1/pods");
    CHECK(r.status == 0);
    CHECK(r.error.find("TLS setup: client key " + c.clientKeyFile + ": ") == 0);
  }
  SUBCASE("a key that does not match the certificate") {
    c.clientCertData = makeTestCertificate("a").certPem;
    c.clientKeyData = makeTestCertificate("b").keyPem;
    Client client(loop.io, c);
    auto r = call(loop, client, "GET", "/api/v1/pods");
    CHECK(r.status == 0);
    CHECK(r.error.find("TLS setup: client key data: key values mismatch") == 0);
  }
  SUBCASE("CA data that holds no certificate") {
    c.caData = "not a certificate";
    Client client(loop.io, c);
    auto r = call(loop, client, "GET", "/api/v1/pods");
    CHECK(r.error == "TLS setup: certificate authority data: no PEM certificate found");
  }
}

TEST_CASE("client: a 401 re-reads the token file and retries once") {
  TempDir dir;
  fs::path tokenFile = dir.path / "token";
  std::ofstream(tokenFile) << "test-token\n";
  FakeApiServer server;
  Loop loop;
  ClusterConfig c = configFor(server, "");
  c.tokenFile = tokenFile.string();
  Client client(loop.io, c);
  CHECK(call(loop, client, "GET", "/api/v1/pods").status == 200);

  // Rotation: the server takes only the new token; the file has it (within the second in
  // which the token source would not look at the file by itself).
  server.setToken("rotated-token");
  std::ofstream(tokenFile, std::ios::trunc) << "rotated-token\n";
  auto r = call(loop, client, "GET", "/api/v1/pods");
  CHECK_MESSAGE(r.status == 200, r.describe());
  auto requests = server.requests();
  REQUIRE(requests.size() == 3);
  CHECK(requests[1].authorization == "Bearer test-token");
  CHECK(requests[1].status == 401);
  CHECK(requests[2].authorization == "Bearer rotated-token");
  CHECK(requests[2].status == 200);

  // A token the server refuses even after a re-read: one retry, then the 401 comes back.
  server.setToken("another");
  auto refused = call(loop, client, "GET", "/api/v1/pods");
  CHECK(refused.status == 401);
  CHECK(server.requests().size() == 5);
}

TEST_CASE("client: watch streams events and bookmarks; bad events are skipped") {
  FakeApiServerOptions options;
  options.bookmarkEvery = 100ms;
  FakeApiServer server(options);
  server.upsertPod(pod("default", "a"));
  std::string rv = server.resourceVersion();
  Loop loop;
  Client client(loop.io, configFor(server));
  WatchRecord record;
  auto handle = client.watch("/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=" + rv,
                             record.handlers(), 5000ms);
  CHECK(record.events.empty());  // never from inside watch()
  REQUIRE(loop.runUntil([&] { return server.openWatches() == 1; }));
  server.upsertPod(pod("default", "b"));
  REQUIRE(
      loop.runUntil([&] { return record.count("ADDED") == 1 && record.count("BOOKMARK") >= 1; }));
  const Json& added = record.events[0];
  CHECK(added["type"] == "ADDED");
  CHECK(added["object"]["metadata"]["name"] == "b");
  CHECK(added["object"]["metadata"]["namespace"] == "default");
  CHECK(added["object"]["metadata"]["resourceVersion"] == server.resourceVersion());
  CHECK(added["object"]["spec"]["nodeName"] == "node-1");
  CHECK_FALSE(added["object"].contains("apiVersion"));  // trimmed to what nodewarden reads
  for (const auto& e : record.events) {
    if (e["type"] == "BOOKMARK") CHECK(e["object"]["metadata"].contains("resourceVersion"));
  }

  server.injectRawWatchLine("pods", R"({"type":"ADDED","object":{"metadata":{"name": x}}})");
  server.injectRawWatchLine("pods", "this is not json");
  server.injectRawWatchLine("pods", R"({"type":"MODIFIED","object":{"metadata":{"name":"tr)");
  server.upsertPod(pod("default", "c"));
  REQUIRE(loop.runUntil([&] { return record.count("ADDED") == 2; }));
  REQUIRE(record.bad.size() == 3);
  CHECK(record.bad[0].first == R"({"type":"ADDED","object":{"metadata":{"name": x}}})");
  CHECK(record.bad[0].second ==
        "invalid JSON at line 1, column 47: syntax error while parsing value - invalid literal; "
        "last read: '\"name\": x'");
  CHECK(record.bad[1] ==
        std::make_pair(std::string("this is not json"), std::string("not a JSON object")));
  CHECK(record.bad[2].second == "truncated JSON object");
  CHECK(record.count("ADDED") == 2);
  CHECK(record.ends == 0);

  SUBCASE("dropWatches ends the stream with status 0") {
    server.dropWatches();
    REQUIRE(loop.runUntil([&] { return record.ends == 1; }));
    CHECK(record.end->status == 0);
    CHECK_FALSE(record.end->error.empty());
  }
  SUBCASE("cancel: no callback afterwards") {
    std::size_t before = record.events.size();
    handle->cancel();
    server.upsertPod(pod("default", "d"));
    server.injectRawWatchLine("pods", "garbage");
    server.dropWatches();
    loop.runFor(300ms);
    CHECK(record.events.size() == before);
    CHECK(record.bad.size() == 3);
    CHECK(record.ends == 0);
  }
  SUBCASE("destroying the handle cancels it") {
    std::size_t before = record.events.size();
    handle.reset();
    REQUIRE(loop.runUntil([&] { return server.openWatches() == 0; }));
    server.upsertPod(pod("default", "d"));
    loop.runFor(200ms);
    CHECK(record.events.size() == before);
    CHECK(record.ends == 0);
  }
}

TEST_CASE("client: a watch ends: server timeout, idle timeout, non-200 answer") {
  FakeApiServer server;
  Loop loop;
  Client client(loop.io, configFor(server));

  WatchRecord timedOut;
  auto a = client.watch("/api/v1/pods?watch=1&timeoutSeconds=1", timedOut.handlers(), 5000ms);
  WatchRecord idle;
  auto b = client.watch("/api/v1/pods?watch=1&resourceVersion=" + server.resourceVersion(),
                        idle.handlers(), 300ms);
  WatchRecord bad;
  auto c = client.watch("/api/v1/pods?watch=1&bogus=1", bad.handlers(), 5000ms);
  auto started = std::chrono::steady_clock::now();
  REQUIRE(loop.runUntil([&] { return timedOut.ends && idle.ends && bad.ends; }, 8000ms));
  CHECK(std::chrono::steady_clock::now() - started < 3000ms);

  CHECK(timedOut.end->status == 200);
  CHECK(timedOut.end->error.empty());
  CHECK(idle.end->status == 0);
  CHECK(idle.end->error == "watch idle for 300 ms");
  CHECK(bad.end->status == 400);
  CHECK(bad.end->describe() == "400 Bad Request: unknown query parameter: bogus");
  loop.runFor(100ms);
  CHECK(timedOut.ends == 1);
  CHECK(idle.ends == 1);
  CHECK(bad.ends == 1);
}

TEST_CASE("client: watch events are split by object, not by line or chunk") {
  Loop loop;
  RawServer raw(loop.io);
  std::string e1 =
      R"({"type":"ADDED","object":{"metadata":{"name":"a\"}{","resourceVersion":"5"}}})";
  std::string e2 =
      "{\"type\":\"MODIFIED\",\n \"object\": {\"metadata\": {\"name\": \"b\",\n"
      "   \"resourceVersion\": \"6\"}}\n}";
  std::string e3 = R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}})";
  std::string stream = e1 + e2 + "\n" + e3 + "\n";
  std::vector<std::string> pieces = {
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"};
  // Chunks cut through objects, strings and escapes.
  for (std::size_t at = 0; at < stream.size(); at += 7)
    pieces.push_back(chunk(stream.substr(at, 7)));
  pieces.push_back("0\r\n\r\n");
  raw.serve(pieces, 1ms);
  ClusterConfig c;
  c.host = "127.0.0.1";
  c.port = std::to_string(raw.port());
  c.tls = false;
  Client client(loop.io, c);
  WatchRecord record;
  auto handle = client.watch("/api/v1/pods?watch=1", record.handlers(), 2000ms);
  REQUIRE(loop.runUntil([&] { return record.ends == 1; }));
  CHECK(record.bad.empty());
  REQUIRE(record.events.size() == 3);
  CHECK(record.events[0]["object"]["metadata"]["name"] == "a\"}{");
  CHECK(record.events[0]["object"]["metadata"]["resourceVersion"] == "5");
  CHECK(record.events[1]["type"] == "MODIFIED");
  CHECK(record.events[1]["object"]["metadata"]["resourceVersion"] == "6");
  CHECK(record.events[2]["object"]["metadata"]["resourceVersion"] == "7");
  CHECK(record.end->status == 200);
}

TEST_CASE("client: destroying the Client cancels everything without callbacks") {
  FakeApiServer server;
  Loop loop;
  int calls = 0;
  WatchRecord record;
  std::shared_ptr<WatchStream> handle;
  {
    Client client(loop.io, configFor(server));
    client.request("GET", "/api/v1/pods", {}, {}, [&](ApiResponse) { ++calls; });
    handle = client.watch("/api/v1/pods?watch=1", record.handlers(), 5000ms);
    loop.runUntil([&] { return server.openWatches() == 1; }, 2000ms);
  }
  server.upsertPod(pod("default", "x"));
  loop.runFor(300ms);
  handle.reset();
  CHECK(record.events.empty());
  CHECK(record.ends == 0);
  // The request may have been answered before the destruction; never after it.
  CHECK(calls <= 1);
}

TEST_CASE("client: queryEscape") {
  using nodewarden::kube::queryEscape;
  CHECK(queryEscape("spec.nodeName=node-1") == "spec.nodeName%3Dnode-1");
  CHECK(queryEscape("a b&c/d~_-") == "a+b%26c%2Fd~_-");
}

TEST_CASE(
    "validUtf8: what dump() accepts, and a watch event type that is not UTF-8 is a bad event") {
  using nodewarden::kube::validUtf8;
  CHECK(validUtf8(""));
  CHECK(validUtf8("ADDED"));
  CHECK(validUtf8("gr\xc3\xbc\xc3\x9f"));         // grüß
  CHECK(validUtf8("\xf0\x9f\x98\x80"));           // U+1F600
  CHECK_FALSE(validUtf8("ADDED\xdc\xad\xa2st"));  // the fuzzer's: a continuation too many
  CHECK_FALSE(validUtf8("\xc3"));                 // cut short
  CHECK_FALSE(validUtf8("\xc0\xaf"));             // overlong
  CHECK_FALSE(validUtf8("\xed\xa0\x80"));         // a surrogate
  CHECK_FALSE(validUtf8("\xf4\x90\x80\x80"));     // above U+10FFFF
  CHECK_FALSE(validUtf8("\xff"));
}
