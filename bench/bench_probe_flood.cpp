// bench_probe_flood: a liveness probe (GET /healthz every 50 ms, 1 s timeout, as the kubelet's)
// against server::HttpServer with the agent's limits, in this process on 127.0.0.1, while two
// threads flood it with slow clients (a header never finished) that reconnect at full speed,
// holding --clients at once; a row per flood size, the probes' outcomes and latency.
#include <algorithm>
#include <atomic>
#include <deque>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "bench/support/agent_process.h"
#include "cgroups/pods.h"
#include "server/http_server.h"

using namespace nodewarden;
using namespace nodewarden::bench;
using namespace std::chrono_literals;

namespace {

constexpr auto kInterval = 50ms;

// The flood of `clients` against a fresh server, `probes` meanwhile; prints its row.
void floodRow(int probes, int clients) {
  boost::asio::io_context context;
  server::HttpServerOptions options;  // the agent's limits, on 127.0.0.1
  options.port = 0;
  server::HttpServer server(context, options, [](const server::HttpRequest&) {
    return server::HttpResponse{200u, "text/plain", "ok"};  // only the probe asks
  });
  if (auto started = server.start(); !started) {
    std::fprintf(stderr, "bench_probe_flood: %s\n", started.error().message.c_str());
    std::exit(1);
  }
  const std::uint16_t port = server.port();
  std::thread loop([&] { context.run(); });
  std::atomic<bool> flooding{true};
  std::atomic<long> opened{0};
  std::vector<std::thread> flood;
  for (int t = 0; t < 2; ++t) {
    flood.emplace_back([&, share = std::size_t(std::max(1, clients / 2))] {
      constexpr std::string_view kSlow = "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ";
      std::deque<int> held;
      while (flooding.load()) {
        const int fd = connectLoopback(port, true, 2000ms);
        if (fd < 0) continue;
        (void)::send(fd, kSlow.data(), kSlow.size(), MSG_NOSIGNAL);
        held.push_back(fd);
        ++opened;
        for (; held.size() > share; held.pop_front()) ::close(held.front());
      }
      for (const int fd : held) ::close(fd);
    });
  }
  std::this_thread::sleep_for(500ms);  // the flood reaches its size
  int outcomes[4] = {};                // answered 200, refused 503, dropped, timed out
  std::vector<double> nanos;
  const long openedBefore = opened.load();
  const auto probing = steadyNow();
  for (int i = 0; i < probes; ++i) {
    const auto next = steadyNow() + kInterval;
    const Exchange e = exchange(port, "/healthz", 1000ms);  // a fresh connection each
    const bool ok = e.status == 200 && e.ended;
    if (ok) nanos.push_back(e.nanos);
    ++outcomes[ok ? 0 : e.status == 503 ? 1 : e.ended || !e.connected ? 2 : 3];
    std::this_thread::sleep_until(next);
  }
  const double floodPerSecond = double(opened.load() - openedBefore) / nanosSince(probing) * 1e9;
  flooding = false;
  for (std::thread& t : flood) t.join();
  boost::asio::post(context, [&] { server.stop(); });
  loop.join();
  const Samples latency = Samples::from(std::move(nanos));
  std::printf("  %-8d %11.0f %8d %6d %6d %8d %8d %8.2f %8.2f %8.2f\n", clients, floodPerSecond,
              probes, outcomes[0], outcomes[1], outcomes[2], outcomes[3], latency.median() / 1e6,
              latency.p99() / 1e6, latency.max() / 1e6);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> clients{128, 1000, 2000};
  int probes = 100;
  Args args("usage: bench_probe_flood [--clients 128,1000,2000] [--quick]\n");
  args.numbers("--clients", clients, 1, 20000).flag("--quick", [&] { probes = 30; });
  if (auto status = args.parse(argc, argv)) return *status;
  // Both ends of every flood connection are in this process.
  const std::size_t maxWaiting = server::HttpServerOptions{}.maxWaiting;
  const std::uint64_t wanted = 2 * std::uint64_t(std::ranges::max(clients)) + 2 * maxWaiting + 256;
  if (auto limit = cgroups::raiseOpenFileLimit(wanted); !limit || *limit < wanted)
    std::fprintf(stderr, "bench_probe_flood: the open-file limit may cut the flood short\n");
  std::printf(
      "build: %s; cpu: %s\n== /healthz under a reconnecting flood of slow clients (%d probes, one "
      "every %d ms, 1 s each; maxConnections 64, maxWaiting %zu) ==\n",
      buildFlavour().c_str(), cpuModel().c_str(), probes, int(kInterval.count()), maxWaiting);
  std::printf("  %-8s %11s %8s %6s %6s %8s %8s %8s %8s %8s\n", "flood", "flood conn/s", "probes",
              "200", "503", "dropped", "timeout", "p50 ms", "p99 ms", "max ms");
  for (const int n : clients) floodRow(probes, n);
  return 0;
}
