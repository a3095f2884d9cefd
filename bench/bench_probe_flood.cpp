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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "bench/support/measure.h"
#include "server/http_server.h"

namespace {

using nodewarden::bench::Samples;
using nodewarden::bench::steadyNow;
using namespace std::chrono_literals;

struct Settings {
  std::vector<int> clients{128, 1000, 2000};
  int probes = 100;
  int intervalMs = 50;
  std::size_t maxWaiting = nodewarden::server::HttpServerOptions{}.maxWaiting;
};

// A blocking loopback socket connected to `port`, every call bounded by `limit`; -1 on
// failure.
int connectTo(std::uint16_t port, std::chrono::milliseconds limit) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{static_cast<time_t>(limit.count() / 1000),
             static_cast<suseconds_t>(limit.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool sendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(sent));
  }
  return true;
}

enum class Outcome { Ok, Refused, Dropped, TimedOut };

struct ProbeResult {
  Outcome outcome;
  double nanos;
};

// One probe on a fresh connection: connect, GET /healthz (Connection: close), read to the end.
ProbeResult probe(std::uint16_t port) {
  constexpr auto kLimit = 1000ms;
  const auto start = steadyNow();
  const auto deadline = start + kLimit;
  const int fd = connectTo(port, kLimit);
  if (fd < 0) return {Outcome::Dropped, 0};
  std::string answer;
  bool ended = false;
  if (sendAll(fd, "GET /healthz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")) {
    for (int i = 0; i < 10000; ++i) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steadyNow());
      if (left <= 0ms) break;
      pollfd polled{fd, POLLIN, 0};
      const int ready = ::poll(&polled, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) break;
      char chunk[4096];
      const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        ended = true;
        break;
      }
      answer.append(chunk, static_cast<std::size_t>(got));
    }
  } else {
    ended = true;
  }
  ::close(fd);
  const double nanos = nodewarden::bench::nanosSince(start);
  if (answer.starts_with("HTTP/1.1 200 ") && ended) return {Outcome::Ok, nanos};
  if (answer.starts_with("HTTP/1.1 503 ")) return {Outcome::Refused, nanos};
  if (ended) return {Outcome::Dropped, nanos};
  return {Outcome::TimedOut, nanos};
}

struct Row {
  int clients = 0;
  double floodPerSecond = 0;
  int ok = 0, refused = 0, dropped = 0, timedOut = 0;
  Samples latency;
};

Row measure(const Settings& settings, int clients) {
  boost::asio::io_context context;
  nodewarden::server::HttpServerOptions options;  // the agent's limits
  options.address = "127.0.0.1";
  options.port = 0;
  options.maxWaiting = settings.maxWaiting;
  nodewarden::server::HttpServer server(
      context, options, [](const nodewarden::server::HttpRequest& request) {
        if (request.target == "/healthz")
          return nodewarden::server::HttpResponse{200, "text/plain", "ok"};
        return nodewarden::server::HttpResponse{404, "text/plain", "not found"};
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
        const int fd = connectTo(port, 2000ms);
        if (fd >= 0) {
          (void)sendAll(fd, kSlow);
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
    const ProbeResult result = probe(port);
    switch (result.outcome) {
      case Outcome::Ok:
        ++row.ok;
        nanos.push_back(result.nanos);
        break;
      case Outcome::Refused:
        ++row.refused;
        break;
      case Outcome::Dropped:
        ++row.dropped;
        break;
      case Outcome::TimedOut:
        ++row.timedOut;
        break;
    }
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

std::vector<int> parseList(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p != '\0';) {
    char* end = nullptr;
    const long value = std::strtol(p, &end, 10);
    if (end == p || value < 1 || value > 20000) {
      std::fprintf(stderr, "bench_probe_flood: --clients wants numbers 1..20000, e.g. 128,1000\n");
      std::exit(2);
    }
    out.push_back(int(value));
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') {
      std::fprintf(stderr, "bench_probe_flood: --clients wants numbers separated by commas\n");
      std::exit(2);
    }
  }
  return out;
}

int positive(const char* text, const char* flag) {
  const int value = std::atoi(text);
  if (value < 1) {
    std::fprintf(stderr, "bench_probe_flood: %s wants a positive number\n", flag);
    std::exit(2);
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool hasValue = i + 1 < argc;
    if (arg == "--clients" && hasValue) {
      settings.clients = parseList(argv[++i]);
    } else if (arg == "--probes" && hasValue) {
      settings.probes = positive(argv[++i], "--probes");
    } else if (arg == "--interval" && hasValue) {
      settings.intervalMs = positive(argv[++i], "--interval");
    } else if (arg == "--max-waiting" && hasValue) {
      settings.maxWaiting = std::size_t(positive(argv[++i], "--max-waiting"));
    } else if (arg == "--quick") {
      settings.probes = 30;
    } else {
      std::fprintf(stderr,
                   "usage: bench_probe_flood [--clients 128,1000,2000] [--probes N] "
                   "[--interval MS] [--max-waiting N] [--quick]\n");
      return arg == "--help" || arg == "-h" ? 0 : 2;
    }
  }
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

  std::printf("build: %s; cpu: %s\n", nodewarden::bench::buildFlavour().c_str(),
              nodewarden::bench::cpuModel().c_str());
  std::printf(
      "== /healthz under a reconnecting flood of slow clients (%d probes, one every %d ms, "
      "1 s each; maxConnections 64, maxWaiting %zu) ==\n",
      settings.probes, settings.intervalMs, settings.maxWaiting);
  std::printf("  %-8s %11s %8s %6s %6s %8s %8s %8s %8s %8s\n", "flood", "flood conn/s", "probes",
              "200", "503", "dropped", "timeout", "p50 ms", "p99 ms", "max ms");
  for (const int clients : settings.clients) {
    const Row row = measure(settings, clients);
    std::printf("  %-8d %11.0f %8d %6d %6d %8d %8d %8.2f %8.2f %8.2f\n", row.clients,
                row.floodPerSecond, settings.probes, row.ok, row.refused, row.dropped, row.timedOut,
                row.latency.median() / 1e6, row.latency.p99() / 1e6,
                (row.latency.nanos.empty() ? 0.0 : row.latency.nanos.back()) / 1e6);
    std::fflush(stdout);
  }
  return 0;
}
