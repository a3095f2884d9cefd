// kube/client with what a kubeconfig can ask for beyond a token: exec credential plugins (real
// scripts: a token, a client certificate, cached until they expire, run again after a 401,
// once for requests that wait together), proxies (http:// and https://: a real CONNECT proxy
// for https and absolute-form requests for http; socks5://: a real SOCKS5 proxy, with and
// without a password) and impersonation headers — against the fake API server.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <fstream>
#include <sstream>

#include "kube/client.h"
#include "tests/kube/connect_proxy.h"
#include "tests/kube/fake_apiserver.h"
#include "tests/support/temp_dir.h"

namespace asio = boost::asio;
namespace kube = nodewarden::kube;
using nodewarden::testing::ConnectProxy;
using nodewarden::testing::ConnectProxyOptions;
using nodewarden::testing::FakeApiServer;
using nodewarden::testing::FakeApiServerOptions;
using nodewarden::testing::makeTestCertificate;
using nodewarden::testing::Socks5Proxy;
using nodewarden::testing::Socks5ProxyOptions;
using nodewarden::testing::TempDir;
using Json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

struct Loop {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  template <typename Pred>
  bool runUntil(Pred&& done, std::chrono::milliseconds timeout = 15000ms) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < deadline) io.run_for(5ms);
    return done();
  }
};

kube::ApiResponse get(Loop& loop, kube::Client& client, const std::string& target) {
  std::optional<kube::ApiResponse> out;
  client.request("GET", target, {}, {}, [&](kube::ApiResponse r) { out = std::move(r); });
  REQUIRE(loop.runUntil([&] { return out.has_value(); }));
  return *out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::size_t lines(const std::string& path) {
  std::string text = slurp(path);
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// A plugin that logs each run to `runs` and answers the token in `tokenFile`, with the
// expiry in `expiryFile` when there is one.
std::string tokenPlugin(const TempDir& dir) {
  std::string path =
      dir.write("plugin",
                "#!/bin/sh\n"
                "echo run >> '" +
                    (dir.path / "runs").string() +
                    "'\n"
                    "token=$(cat '" +
                    (dir.path / "token").string() +
                    "')\n"
                    "expiry=$(cat '" +
                    (dir.path / "expiry").string() +
                    "' 2>/dev/null)\n"
                    "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\","
                    "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"%s}}' "
                    "\"$token\" \"${expiry:+,\\\"expirationTimestamp\\\":\\\"$expiry\\\"}\"\n");
  ::chmod(path.c_str(), 0755);
  return path;
}

kube::ClusterConfig execCluster(const FakeApiServer& server, const std::string& command) {
  kube::ClusterConfig c;
  c.host = "127.0.0.1";
  c.port = std::to_string(server.port());
  c.tls = false;
  c.server = server.url();
  kube::ExecConfig exec;
  exec.apiVersion = "client.authentication.k8s.io/v1";
  exec.command = command;
  exec.interactiveMode = kube::ExecConfig::Interactive::Never;
  exec.user = "robot";
  c.exec = exec;
  return c;
}

}  // namespace

TEST_CASE("client with an exec plugin: one run for waiting requests, cached, expired, 401") {
  TempDir dir;
  dir.write("token", "plugin-token");
  FakeApiServerOptions options;
  options.token = "plugin-token";
  FakeApiServer server(options);
  const std::string runs = (dir.path / "runs").string();
  Loop loop;
  auto now = std::chrono::system_clock::now();
  kube::ClientOptions clientOptions;
  clientOptions.wallClock = [&now] { return now; };
  kube::Client client(loop.io, execCluster(server, tokenPlugin(dir)), clientOptions);

  // Three requests at once: the plugin runs once for all of them.
  int answered = 0;
  for (int i = 0; i < 3; ++i) {
    client.request("GET", "/api/v1/nodes", {}, {}, [&](kube::ApiResponse r) {
      CHECK_MESSAGE(r.status == 200, r.describe());
      ++answered;
    });
  }
  REQUIRE(loop.runUntil([&] { return answered == 3; }));
  CHECK(lines(runs) == 1);
  CHECK(get(loop, client, "/api/v1/nodes").status == 200);
  CHECK(lines(runs) == 1);  // no expiry: kept until a 401
  for (const auto& r : server.requests()) CHECK(r.authorization == "Bearer plugin-token");

  SUBCASE("an answer that expires is kept until then, and asked for again after") {
    dir.write("expiry", "2030-01-01T00:00:00Z");
    server.setToken("second-token");
    dir.write("token", "second-token");
    CHECK(get(loop, client, "/api/v1/nodes").status == 200);  // 401, run again, retried
    CHECK(lines(runs) == 2);
    CHECK(get(loop, client, "/api/v1/nodes").status == 200);
    CHECK(lines(runs) == 2);  // before its expiry
    now = std::chrono::sys_days(std::chrono::year(2030) / 1 / 1) + 1s;
    CHECK(get(loop, client, "/api/v1/nodes").status == 200);
    CHECK(lines(runs) == 3);  // after it
  }
  SUBCASE("a 401 runs the plugin again and the request is retried once; a watch too") {
    server.setToken("rotated");
    dir.write("token", "rotated");
    auto answer = get(loop, client, "/api/v1/nodes");
    CHECK_MESSAGE(answer.status == 200, answer.describe());
    CHECK(lines(runs) == 2);
    server.setToken("rotated-again");
    dir.write("token", "rotated-again");
    int events = 0;
    std::optional<kube::ApiResponse> end;
    auto watch = client.watch(
        "/api/v1/nodes?watch=1&timeoutSeconds=1",
        {[&](const Json&) { ++events; }, nullptr, [&](kube::ApiResponse r) { end = std::move(r); }},
        5000ms);
    REQUIRE(loop.runUntil([&] { return end.has_value(); }));
    CHECK_MESSAGE(end->status == 200, end->describe());
    CHECK(lines(runs) == 3);
    SUBCASE("a server that keeps refusing: one retry, then the 401") {
      server.setToken("nobody-has-it");
      auto refused = get(loop, client, "/api/v1/nodes");
      CHECK(refused.status == 401);
      CHECK(lines(runs) == 4);
    }
  }
  SUBCASE("a plugin that fails fails the request, and runs again for the next one") {
    server.setToken("other");
    std::filesystem::remove(dir.path / "token");
    dir.write("plugin", "#!/bin/sh\necho 'cannot log in' >&2\nexit 1\n");
    auto failed = get(loop, client, "/api/v1/nodes");
    CHECK(failed.status == 0);
    CHECK(failed.error.starts_with("getting credentials: exec credential plugin "));
    CHECK(failed.error.ends_with(": exited with status 1; its standard error: cannot log in"));
  }
}

TEST_CASE("client with an exec plugin that answers a client certificate") {
  TempDir dir;
  auto serverCert = makeTestCertificate("127.0.0.1");
  auto clientCert = makeTestCertificate("plugin-user");
  FakeApiServerOptions options;
  options.tls = true;
  options.certPem = serverCert.certPem;
  options.keyPem = serverCert.keyPem;
  options.clientCaPem = clientCert.certPem;
  FakeApiServer server(options);
  dir.write(
      "answer.json",
      Json{{"apiVersion", "client.authentication.k8s.io/v1beta1"},
           {"kind", "ExecCredential"},
           {"status",
            {{"clientCertificateData", clientCert.certPem}, {"clientKeyData", clientCert.keyPem}}}}
          .dump());
  std::string plugin =
      dir.write("cert-plugin", "#!/bin/sh\ncat '" + (dir.path / "answer.json").string() + "'\n");
  ::chmod(plugin.c_str(), 0755);
  kube::ClusterConfig c = execCluster(server, plugin);
  c.tls = true;
  c.caData = serverCert.certPem;
  c.exec->apiVersion = "client.authentication.k8s.io/v1beta1";
  Loop loop;
  kube::Client client(loop.io, c);
  auto answer = get(loop, client, "/api/v1/nodes");
  CHECK_MESSAGE(answer.status == 200, answer.describe());
  auto seen = server.requests();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].clientCertificate);
  CHECK(seen[0].authorization.empty());
}

namespace {

// The servers a proxy test reaches — the fake API server over TLS (a certificate for
// 127.0.0.1, which the https:// proxies serve too) and plain — and the loop the client runs
// on.
struct ProxiedServers {
  nodewarden::testing::TestCertificate serverCert = makeTestCertificate("127.0.0.1");
  FakeApiServer tlsServer{tlsOptions(serverCert)};
  FakeApiServer plainServer;
  Loop loop;

  static FakeApiServerOptions tlsOptions(const nodewarden::testing::TestCertificate& cert) {
    FakeApiServerOptions options;
    options.tls = true;
    options.certPem = cert.certPem;
    options.keyPem = cert.keyPem;
    return options;
  }

  // A cluster at `host`:`server`'s port (over TLS when `server` is tlsServer, trusting the
  // server's certificate) with a token, reached through `proxy` as a kubeconfig's proxy-url
  // of `scheme` says.
  template <typename Proxy>
  kube::ClusterConfig through(const FakeApiServer& server, const Proxy& proxy,
                              kube::ProxyScheme scheme,
                              const std::string& host = "127.0.0.1") const {
    kube::ClusterConfig c;
    c.host = host;
    c.port = std::to_string(server.port());
    c.tls = &server == &tlsServer;
    c.caData = serverCert.certPem;
    c.token = "test-token";
    c.proxyUrl = proxy.url();
    c.proxyScheme = scheme;
    c.proxyHost = "127.0.0.1";
    c.proxyPort = std::to_string(proxy.port());
    return c;
  }

  // A GET and a watch through `client`, both answered 200.
  void requestAndWatch(kube::Client& client) {
    auto nodes = get(loop, client, "/api/v1/nodes");
    CHECK_MESSAGE(nodes.status == 200, nodes.describe());
    std::optional<kube::ApiResponse> end;
    auto watch =
        client.watch("/api/v1/pods?watch=1&timeoutSeconds=1",
                     {nullptr, nullptr, [&](kube::ApiResponse r) { end = std::move(r); }}, 5000ms);
    REQUIRE(loop.runUntil([&] { return end.has_value(); }));
    CHECK_MESSAGE(end->status == 200, end->describe());
  }

  // Every connection the client made to tlsServer went through `proxy` as a CONNECT tunnel
  // (the watch may reuse the request's tunnel: a kept-alive connection); the server saw the
  // GET and the watch.
  void checkTunnelled(const ConnectProxy& proxy) {
    auto seen = proxy.requests();
    REQUIRE(seen.size() >= 1);
    for (const auto& r : seen) {
      CHECK(r.method == "CONNECT");
      CHECK(r.target == "127.0.0.1:" + std::to_string(tlsServer.port()));
    }
    CHECK(tlsServer.requests().size() == 2);
  }

  // A proxy that wants "Basic dXNlcjpzZWNyZXQ=" answers `c` 407 (as the client's error says),
  // and lets it through with the URL's user info.
  void checkProxyCredentials(kube::ClusterConfig c, const ConnectProxy& proxy) {
    {
      kube::Client client(loop.io, c);
      auto refused = get(loop, client, "/api/v1/nodes");
      CHECK(refused.status == 0);
      CHECK(refused.error == "CONNECT to 127.0.0.1:" + std::to_string(tlsServer.port()) +
                                 " through the proxy 127.0.0.1:" + std::to_string(proxy.port()) +
                                 ": the proxy answered 407 Proxy Authentication Required");
    }
    c.proxyAuthorization = "Basic dXNlcjpzZWNyZXQ=";
    kube::Client client(loop.io, c);
    CHECK(get(loop, client, "/api/v1/nodes").status == 200);
  }
};

}  // namespace

TEST_CASE("client through an http:// proxy: CONNECT for https, absolute form for http") {
  ProxiedServers at;
  const auto http = kube::ProxyScheme::Http;

  SUBCASE("https: a tunnel per connection, requests and watches through it") {
    ConnectProxy proxy;
    kube::Client client(at.loop.io, at.through(at.tlsServer, proxy, http));
    at.requestAndWatch(client);
    at.checkTunnelled(proxy);
  }
  SUBCASE("http: absolute-form requests") {
    ConnectProxy proxy;
    kube::Client client(at.loop.io, at.through(at.plainServer, proxy, http));
    CHECK(get(at.loop, client, "/api/v1/nodes?limit=5").status == 200);
    auto seen = proxy.requests();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].method == "GET");
    CHECK(seen[0].target ==
          "http://127.0.0.1:" + std::to_string(at.plainServer.port()) + "/api/v1/nodes?limit=5");
  }
  SUBCASE("a proxy that wants credentials: 407 without, through with the URL's user info") {
    ConnectProxy proxy("Basic dXNlcjpzZWNyZXQ=");
    at.checkProxyCredentials(at.through(at.tlsServer, proxy, http), proxy);
  }
}

TEST_CASE("client through an https:// proxy: TLS to the proxy, then CONNECT or absolute form") {
  // As client-go: the proxy's certificate is verified with the cluster's own TLS settings
  // (here the one certificate authority signed both, as the proxy serves the same certificate).
  ProxiedServers at;
  const auto https = kube::ProxyScheme::Https;
  ConnectProxyOptions options;
  options.tlsCertPem = at.serverCert.certPem;
  options.tlsKeyPem = at.serverCert.keyPem;

  SUBCASE("https server: TLS inside the proxy's TLS, requests and a watch") {
    ConnectProxy proxy(options);
    kube::Client client(at.loop.io, at.through(at.tlsServer, proxy, https));
    at.requestAndWatch(client);
    CHECK(proxy.tlsHandshakes() >= 1);
    at.checkTunnelled(proxy);
  }
  SUBCASE("http server: absolute form inside the proxy's TLS") {
    ConnectProxy proxy(options);
    kube::Client client(at.loop.io, at.through(at.plainServer, proxy, https));
    auto nodes = get(at.loop, client, "/api/v1/nodes?limit=5");
    CHECK_MESSAGE(nodes.status == 200, nodes.describe());
    auto seen = proxy.requests();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].method == "GET");
    CHECK(proxy.tlsHandshakes() == 1);
  }
  SUBCASE("credentials: 407 without, through with the URL's user info") {
    options.requiredAuthorization = "Basic dXNlcjpzZWNyZXQ=";
    ConnectProxy proxy(options);
    at.checkProxyCredentials(at.through(at.tlsServer, proxy, https), proxy);
  }
  SUBCASE("a proxy whose certificate no authority of the kubeconfig signed is refused") {
    auto other = makeTestCertificate("127.0.0.1");
    options.tlsCertPem = other.certPem;
    options.tlsKeyPem = other.keyPem;
    ConnectProxy proxy(options);
    kube::Client client(at.loop.io, at.through(at.tlsServer, proxy, https));
    auto refused = get(at.loop, client, "/api/v1/nodes");
    CHECK(refused.status == 0);
    CHECK(refused.error.starts_with(
        "TLS handshake with the proxy 127.0.0.1:" + std::to_string(proxy.port()) + ": "));
    CHECK(refused.error.find("signed the proxy's certificate") != std::string::npos);
    CHECK(proxy.requests().empty());
    CHECK(at.tlsServer.requests().empty());
  }
}

TEST_CASE("client through a socks5:// proxy: RFC 1928, RFC 1929, the name resolved remotely") {
  ProxiedServers at;
  const auto socks5 = kube::ProxyScheme::Socks5;

  SUBCASE("no authentication, an address: TLS through the tunnel, requests and a watch") {
    Socks5Proxy proxy;
    kube::Client client(at.loop.io, at.through(at.tlsServer, proxy, socks5));
    at.requestAndWatch(client);
    auto seen = proxy.requests();
    REQUIRE(seen.size() >= 1);
    for (const auto& r : seen) {
      CHECK(r.methods == std::vector<unsigned>{0});
      CHECK(r.addressType == 1);
      CHECK(r.host == "127.0.0.1");
      CHECK(r.port == at.tlsServer.port());
      CHECK(r.reply == 0);
    }
    CHECK(at.tlsServer.requests().size() == 2);
  }
  SUBCASE("a host name goes to the proxy to resolve (socks5h), plain http in origin form") {
    Socks5Proxy proxy;
    kube::Client client(at.loop.io, at.through(at.plainServer, proxy, socks5, "localhost"));
    auto nodes = get(at.loop, client, "/api/v1/nodes?limit=5");
    CHECK_MESSAGE(nodes.status == 200, nodes.describe());
    auto seen = proxy.requests();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].addressType == 3);
    CHECK(seen[0].host == "localhost");
    auto atServer = at.plainServer.requests();
    REQUIRE(atServer.size() == 1);
    CHECK(atServer[0].path == "/api/v1/nodes");
  }
  SUBCASE("username/password: accepted, refused, and none offered to a proxy that wants them") {
    Socks5ProxyOptions options;
    options.user = "user";
    options.password = "s3cret";
    Socks5Proxy proxy(options);
    kube::ClusterConfig c = at.through(at.tlsServer, proxy, socks5);
    const std::string proxyAt = "127.0.0.1:" + std::to_string(proxy.port());
    {
      kube::Client client(at.loop.io, c);
      auto refused = get(at.loop, client, "/api/v1/nodes");
      CHECK(refused.status == 0);
      CHECK(refused.error == "SOCKS5 greeting to the proxy " + proxyAt +
                                 ": the proxy accepts none of the authentication methods offered "
                                 "(none; put user:password@ in proxy-url if it needs them)");
    }
    c.proxyCredentials = std::make_pair(std::string("user"), std::string("wrong"));
    {
      kube::Client client(at.loop.io, c);
      auto refused = get(at.loop, client, "/api/v1/nodes");
      CHECK(refused.status == 0);
      CHECK(refused.error == "SOCKS5 username/password authentication with the proxy " + proxyAt +
                                 ": the proxy refused the user name and password (status 1)");
    }
    c.proxyCredentials = std::make_pair(std::string("user"), std::string("s3cret"));
    kube::Client client(at.loop.io, c);
    auto nodes = get(at.loop, client, "/api/v1/nodes");
    CHECK_MESSAGE(nodes.status == 200, nodes.describe());
    auto seen = proxy.requests();
    REQUIRE(seen.size() == 3);
    CHECK(seen[0].methods == std::vector<unsigned>{0});
    CHECK(seen[1].methods == std::vector<unsigned>{0, 2});
    CHECK(seen[1].password == "wrong");
    CHECK(seen[2].user == "user");
    CHECK(seen[2].password == "s3cret");
    CHECK(seen[2].reply == 0);
  }
  SUBCASE("a proxy that refuses the CONNECT: its RFC 1928 reply, and nothing reaches the server") {
    Socks5ProxyOptions options;
    options.refuseWith = 2;
    Socks5Proxy proxy(options);
    kube::Client client(at.loop.io, at.through(at.tlsServer, proxy, socks5));
    auto refused = get(at.loop, client, "/api/v1/nodes");
    CHECK(refused.status == 0);
    CHECK(refused.error == "SOCKS5 CONNECT to 127.0.0.1:" + std::to_string(at.tlsServer.port()) +
                               " through the proxy 127.0.0.1:" + std::to_string(proxy.port()) +
                               ": the proxy answered connection not allowed by ruleset");
    CHECK(at.tlsServer.requests().empty());
  }
}

TEST_CASE("client: impersonation headers, as kubectl sends them for as, as-groups, …") {
  Loop loop;
  asio::ip::tcp::acceptor acceptor(loop.io, {asio::ip::make_address("127.0.0.1"), 0});
  asio::ip::tcp::socket socket(loop.io);
  asio::streambuf request;
  std::string head;
  const std::string reply =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
  acceptor.async_accept(socket, [&](boost::system::error_code ec) {
    if (ec) return;
    asio::async_read_until(
        socket, request, "\r\n\r\n", [&](boost::system::error_code, std::size_t) {
          head.assign(asio::buffers_begin(request.data()), asio::buffers_end(request.data()));
          asio::async_write(socket, asio::buffer(reply),
                            [](boost::system::error_code, std::size_t) {});
        });
  });
  kube::ClusterConfig c;
  c.host = "127.0.0.1";
  c.port = std::to_string(acceptor.local_endpoint().port());
  c.tls = false;
  c.impersonateUser = "jane";
  c.impersonateUid = "42";
  c.impersonateGroups = {"devs", "ops"};
  c.impersonateExtra = {{"scopes", {"view", "edit"}}};
  kube::Client client(loop.io, c);
  CHECK(get(loop, client, "/api/v1/nodes").status == 200);
  CHECK(head.find("Impersonate-User: jane\r\n") != std::string::npos);
  CHECK(head.find("Impersonate-Uid: 42\r\n") != std::string::npos);
  CHECK(head.find("Impersonate-Group: devs\r\nImpersonate-Group: ops\r\n") != std::string::npos);
  CHECK(head.find("Impersonate-Extra-scopes: view\r\nImpersonate-Extra-scopes: edit\r\n") !=
        std::string::npos);
}
