// bench_probe_flood: how a liveness probe fares against a flood of slow clients that keep
// reconnecting, as the kubelet's probe would against the agent's HTTP server.
//
// The server is server::HttpServer with the agent's limits (64 slots for requests in
// progress, 1,024 waiting connections, 10 s timeout), on 127.0.0.1, in this process. Two
// flood threads open connections as fast as they can, each sending the start of a request
// header and never finishing it, and close their oldest connection whenever they hold more
// than their share of --clients (so they reconnect at full speed). Meanwhile a probe
// connects every --interval ms, sends `GET /healthz` and waits up to 1 s (the kubelet's
// default timeoutSeconds) for its answer.
//
// Figures, per flood size: flood connections a second, probes answered 200, refused (503),
// dropped (closed without an answer) or timed out, and the answered probes' latency
// p50/p99/max from connect to the whole answer. The server's guarantee (server/http_server.h)
// is that no probe is dropped while fewer than maxWaiting connections wait at once; beyond
// that the longest waiter gives way, and this program shows what is then left to chance.
// tests/server/http_test.cpp checks the guarantee itself, deterministically.
//
// Run: ninja -C BUILD bench/bench_probe_flood && BUILD/bench/bench_probe_flood
//        [--clients 128,1000,2000] [--probes N] [--interval MS] [--max-waiting N] [--quick]
#include <sys/resource.h>

#include <atomic>
#include <deque>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "bench/support/agent_process.h"
#include "server/http_server.h"

namespace nodewarden::bench {
namespace {

using namespace std::chrono_literals;

struct Settings {
  std::vector<int> clients{128, 1000, 2000};
  int probes = 100;
  int intervalMs = 50;
  std::size_t maxWaiting = server::HttpServerOptions{}.maxWaiting;
};

enum class Outcome { Ok, Refused, Dropped, TimedOut };

// One probe on a fresh connection: connect, GET /healthz (Connection: close), read to the end
// or the kubelet's default timeout of 1 s.
Outcome probe(std::uint16_t port, std::vector<double>& okNanos) {
  const Exchange e = exchange(port, "/healthz", 1000ms);
  if (e.status == 200 && e.ended) {
    okNanos.push_back(e.nanos);
    return Outcome::Ok;
  }
  if (e.status == 503) return Outcome::Refused;
  return e.ended || !e.connected ? Outcome::Dropped : Outcome::TimedOut;
}

struct Row {
  int clients = 0;
  double floodPerSecond = 0;
  int outcomes[4] = {};  // by Outcome
  Samples latency;
};

Row measure(const Settings& settings, int clients) {
  boost::asio::io_context context;
  server::HttpServerOptions options;  // the agent's limits
  options.address = "127.0.0.1";
  options.port = 0;
  options.maxWaiting = settings.maxWaiting;
  server::HttpServer server(context, options, [](const server::HttpRequest& request) {
    if (request.target == "/healthz") return server::HttpResponse{200, "text/plain", "ok"};
    return server::HttpResponse{404, "text/plain", "not found"};
  });
  if (auto started = server.start(); !started) {
    std::fprintf(stderr, "bench_probe_flood: %s\n", started.error().message.c_str());
    std::exit(1);
  }
  const std::uint16_t port = server.port();
  std::thread loop([&] { context.run(); });

  constexpr int kFloodThreads = 2;
  std::atomic<bool> flooding{true};
  std::atomic<long> opened{0};
  std::vector<std::thread> flood;
  for (int t = 0; t < kFloodThreads; ++t) {
    flood.emplace_back([&, share = std::size_t(std::max(1, clients / kFloodThreads))] {
      constexpr std::string_view kSlow = "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ";
      std::deque<int> held;
      const auto until = steadyNow() + 10min;  // a bound; the probes end it long before
      while (flooding.load() && steadyNow() < until) {
        const int fd = connectLoopback(port, true, 2000ms);
        if (fd >= 0) {
          (void)::send(fd, kSlow.data(), kSlow.size(), MSG_NOSIGNAL);
          held.push_back(fd);
          ++opened;
        }
        while (held.size() > share) {
          ::close(held.front());
          held.pop_front();
        }
      }
      for (const int fd : held) ::close(fd);
    });
  }

  std::this_thread::sleep_for(500ms);  // the flood reaches its size
  Row row;
  row.clients = clients;
  const long openedBefore = opened.load();
  const auto probing = steadyNow();
  std::vector<double> nanos;
  for (int i = 0; i < settings.probes; ++i) {
    const auto next = steadyNow() + std::chrono::milliseconds(settings.intervalMs);
    ++row.outcomes[int(probe(port, nanos))];
    std::this_thread::sleep_until(next);
  }
  const double seconds = std::chrono::duration<double>(steadyNow() - probing).count();
  row.floodPerSecond = double(opened.load() - openedBefore) / seconds;
  row.latency = Samples::from(std::move(nanos));

  flooding = false;
  for (std::thread& t : flood) t.join();
  boost::asio::post(context, [&] { server.stop(); });
  loop.join();
  return row;
}

void printUsage(std::FILE* out) {
  std::fprintf(out,
               "usage: bench_probe_flood [--clients 128,1000,2000] [--probes N] "
               "[--interval MS] [--max-waiting N] [--quick]\n");
}

int run(int argc, char** argv) {
  Settings settings;
  Args args(printUsage);
  args.value("--clients", "numbers 1..20000 separated by commas, e.g. 128,1000",
             [&](std::string_view text) {
               auto list = parseBoundedList(text, 1, 20000);
               if (list) settings.clients = *list;
               return list.has_value();
             })
      .number("--probes", settings.probes, 1, 1'000'000)
      .number("--interval", settings.intervalMs, 1, 1'000'000)
      .number<std::size_t>("--max-waiting", settings.maxWaiting, 1, 1'000'000)
      .flag("--quick", [&] { settings.probes = 30; });
  if (auto status = args.parse(argc, argv)) return *status;
  // Both ends of every flood connection are in this process.
  int most = 0;
  for (const int c : settings.clients) most = std::max(most, c);
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &limit);
    if (limit.rlim_cur < rlim_t(2 * most + 2 * settings.maxWaiting + 256)) {
      std::fprintf(stderr,
                   "bench_probe_flood: the open-file limit (%llu) may cut the flood short\n",
                   static_cast<unsigned long long>(limit.rlim_cur));
    }
  }

  std::printf("build: %s; cpu: %s\n", buildFlavour().c_str(), cpuModel().c_str());
  std::printf(
      "== /healthz under a reconnecting flood of slow clients (%d probes, one every %d ms, "
      "1 s each; maxConnections 64, maxWaiting %zu) ==\n",
      settings.probes, settings.intervalMs, settings.maxWaiting);
  std::printf("  %-8s %11s %8s %6s %6s %8s %8s %8s %8s %8s\n", "flood", "flood conn/s", "probes",
              "200", "503", "dropped", "timeout", "p50 ms", "p99 ms", "max ms");
  for (const int clients : settings.clients) {
    const Row row = measure(settings, clients);
    std::printf("  %-8d %11.0f %8d %6d %6d %8d %8d %8.2f %8.2f %8.2f\n", row.clients,
                row.floodPerSecond, settings.probes, row.outcomes[0], row.outcomes[1],
                row.outcomes[2], row.outcomes[3], row.latency.median() / 1e6,
                row.latency.p99() / 1e6,
                (row.latency.nanos.empty() ? 0.0 : row.latency.nanos.back()) / 1e6);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace nodewarden::bench

int main(int argc, char** argv) {
  return nodewarden::bench::run(argc, argv);
}
