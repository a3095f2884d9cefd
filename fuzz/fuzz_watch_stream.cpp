// The watch stream: what the API server (or anything that answers in its place) sends after
// a watch request, through kube::Client::watch as the reflectors use it: HTTP framing,
// splitting the body into JSON objects, the event envelope and the trimmed object parse.
// A fake server runs in-process on 127.0.0.1.
//   First byte even: the rest is a watch body. It is served twice, once with Content-Length
//   in one write and once chunked in small pieces (sizes from the first byte): the events
//   and the bad events must be the same (the splitter does not depend on where reads or
//   chunks end), and both streams end with status 200.
//   First byte odd: the rest is the whole raw HTTP response (status line, headers, body).
// Always: onEnd is called exactly once, and nothing hangs.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// GCC with the sanitizers warns falsely inside Beast (as in server/ and kube/).
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#pragma GCC diagnostic pop

#include "kube/client.h"

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
namespace kube = nodewarden::kube;

namespace {

struct World {
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
};

World& world() {
  static World* w = new World();  // never destroyed: the fuzzer exits without unwinding
  return *w;
}

struct Outcome {
  std::vector<std::string> events;
  std::vector<std::pair<std::string, std::string>> bad;
  int ends = 0;
  kube::ApiResponse end;
};

// Serves `response` to the next connection, then closes it.
struct OneShotServer {
  explicit OneShotServer(World& w) : socket(w.io) {}
  tcp::socket socket;
  std::string request;
  std::string response;
  bool accepted = false;
  bool done = false;

  void start(World& w) {
    w.acceptor.async_accept(socket, [this](boost::system::error_code ec) {
      accepted = !ec;
      if (ec) {
        done = true;
        return;
      }
      asio::async_read_until(socket, asio::dynamic_buffer(request), "\r\n\r\n",
                             [this](boost::system::error_code read, std::size_t) {
                               if (read) return finish();
                               asio::async_write(socket, asio::buffer(response),
                                                 [this](boost::system::error_code, std::size_t) {
                                                   finish();
                                                 });
                             });
    });
  }
  void finish() {
    boost::system::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    done = true;
  }
};

Outcome watchOnce(const std::string& response) {
  World& w = world();
  w.io.restart();  // the last poll() may have run out of work, which stops the loop
  Outcome outcome;
  OneShotServer server(w);
  server.response = response;
  server.start(w);
  {
    kube::ClusterConfig config;
    config.host = "127.0.0.1";
    config.port = std::to_string(w.acceptor.local_endpoint().port());
    config.tls = false;
    kube::ClientOptions options;
    options.requestTimeout = std::chrono::milliseconds(5000);
    kube::Client client(w.io, config, options);
    kube::Client::WatchHandlers handlers;
    handlers.onEvent = [&](const nodewarden::policy::Json& event) {
      // Replace, not throw: the envelope's "type" comes from kube/client.cpp's own scanner,
      // which (unlike nlohmann's parser) lets invalid UTF-8 through; reported, see the
      // fuzzing notes. Its "object" must be valid (nlohmann parsed it).
      outcome.events.push_back(
          event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      auto object = event.find("object");
      if (object != event.end()) (void)object->dump();
    };
    handlers.onBadEvent = [&](std::string_view text, const std::string& problem) {
      outcome.bad.emplace_back(std::string(text), problem);
    };
    handlers.onEnd = [&](kube::ApiResponse end) {
      ++outcome.ends;
      outcome.end = std::move(end);
    };
    auto handle = client.watch("/api/v1/pods?watch=1", handlers, std::chrono::milliseconds(5000));
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    // Until the client has ended and the server has finished (or never got a connection:
    // the client could not connect).
    while (outcome.ends == 0 || (server.accepted && !server.done)) {
      if (Clock::now() > deadline) {  // a hang
        std::fprintf(stderr, "watch: no end after 10 s (ends %d, server done %d)\n", outcome.ends,
                     int(server.done));
        std::abort();
      }
      w.io.run_one_for(std::chrono::milliseconds(50));
    }
    handle.reset();
  }
  if (!server.accepted) {
    w.acceptor.cancel();
    while (!server.done) w.io.run_one_for(std::chrono::milliseconds(50));
  }
  w.io.poll();
  if (outcome.ends != 1) std::abort();
  return outcome;
}

std::string chunked(std::string_view body, unsigned seed) {
  std::string out;
  unsigned state = seed * 2654435761u + 1;
  while (!body.empty()) {
    state = state * 1103515245u + 12345u;
    const std::size_t n = std::min<std::size_t>(body.size(), 1 + (state >> 16) % 23);
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", n);
    out += size;
    out.append(body.substr(0, n));
    out += "\r\n";
    body.remove_prefix(n);
  }
  return out + "0\r\n\r\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((data[0] & 1) != 0) {
    (void)watchOnce(std::string(rest));
    return 0;
  }
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n";
  Outcome whole = watchOnce(head + "Content-Length: " + std::to_string(rest.size()) + "\r\n\r\n" +
                            std::string(rest));
  Outcome pieces = watchOnce(head + "Transfer-Encoding: chunked\r\n\r\n" + chunked(rest, data[0]));
  // Out of local ports or the like (the machine, not the code under test): no comparison.
  for (const Outcome* o : {&whole, &pieces}) {
    if (o->end.status == 0 && o->end.error.rfind("connect to ", 0) == 0) return 0;
  }
  if (whole.end.status != 200 || pieces.end.status != 200) {
    std::fprintf(stderr, "fuzz_watch_stream: ends %u \"%s\" and %u \"%s\"\n",
                 whole.end.status, whole.end.error.c_str(), pieces.end.status,
                 pieces.end.error.c_str());
    std::abort();
  }
  if (whole.events != pieces.events) std::abort();
  if (whole.bad != pieces.bad) std::abort();
  return 0;
}
