// The HTTP server's request path, end to end: the input is what a client sends on one
// connection (one or more requests, pipelined, any framing: Content-Length, chunked,
// Transfer-Encoding lists, Expect: 100-continue, HTTP/1.0, garbage). A real server::HttpServer
// runs in-process on 127.0.0.1; the harness connects, writes the bytes, half-closes and
// reads until the server closes. Checks:
//   - the server answers with well-formed HTTP/1.x responses only (or closes cleanly), one
//     final response per request the handler saw, in order, plus at most one error answer
//     (400/413/431), which comes last;
//   - no request body the handler sees exceeds bodyLimit;
//   - the server closes the connection (no connection left open, nothing hangs).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

// GCC with the sanitizers warns falsely inside Beast (as in server/ and kube/).
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#pragma GCC diagnostic pop

#include "server/http_server.h"

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using std::chrono::steady_clock;

namespace {

constexpr std::size_t kBodyLimit = 4096;

struct World {
  asio::io_context io;
  std::vector<std::string> handled;  // methods, in the order the handler saw them
  std::unique_ptr<nodewarden::server::HttpServer> server;

  World() {
    nodewarden::server::HttpServerOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.bodyLimit = kBodyLimit;
    options.timeout = std::chrono::milliseconds(2000);
    options.maxConnections = 4;
    server = std::make_unique<nodewarden::server::HttpServer>(
        io, options, [this](const nodewarden::server::HttpRequest& request) {
          handled.push_back(request.method);
          if (request.body.size() > kBodyLimit) std::abort();
          if (request.target == "/throw") throw std::runtime_error("handler failed");
          nodewarden::server::HttpResponse response;
          if (request.target.rfind("/status/", 0) == 0) {
            response.status = unsigned(std::strtoul(request.target.c_str() + 8, nullptr, 10));
          }
          response.contentType = request.target == "/type" ? "text/plain\r\nX: y" : "text/plain";
          response.body =
              request.method + " " + request.target + " " + std::to_string(request.body.size());
          return response;
        });
    if (!server->start()) std::abort();
  }
};

World& world() {
  static World* w = new World();  // never destroyed: the fuzzer exits without unwinding
  return *w;
}

// Runs the loop until `done` or aborts after `limit` (a hang).
template <typename Done>
void runUntil(asio::io_context& io, Done&& done, std::chrono::milliseconds limit) {
  const auto deadline = steady_clock::now() + limit;
  while (!done()) {
    if (steady_clock::now() > deadline) std::abort();
    io.run_one_for(std::chrono::milliseconds(50));
  }
}

// Splits the server's output into responses; aborts on anything that is not HTTP/1.x.
void checkResponses(const std::string& out, const std::vector<std::string>& handled) {
  std::string_view rest(out);
  std::size_t finals = 0;
  bool errorSeen = false;
  while (!rest.empty()) {
    if (errorSeen) std::abort();  // nothing may follow an error answer
    http::response_parser<http::string_body> parser;
    parser.eager(true);
    parser.body_limit(boost::none);
    if (finals < handled.size() && handled[finals] == "HEAD") parser.skip(true);
    boost::beast::error_code ec;
    std::size_t used = parser.put(asio::buffer(rest.data(), rest.size()), ec);
    if (!ec && !parser.is_done()) {
      // A body delimited by the end of the stream (never sent by this server).
      parser.put_eof(ec);
    }
    if (ec || !parser.is_done() || used == 0) std::abort();
    rest.remove_prefix(used);
    const unsigned status = parser.get().result_int();
    if (status < 200) continue;  // 100 Continue before a body
    if (finals < handled.size()) {
      ++finals;
    } else if (status == 400 || status == 413 || status == 431) {
      errorSeen = true;
    } else {
      std::abort();  // a final response for no request
    }
  }
  if (finals != handled.size()) std::abort();  // a request without its answer
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  World& w = world();
  w.io.restart();
  w.handled.clear();
  tcp::socket client(w.io);
  std::string out;
  std::vector<char> chunk(16384);
  bool closed = false;
  bool connected = false;
  boost::beast::error_code ec;
  // Each connection from its own loopback source address (127.1.0.0/16, rotating): the
  // client closes first, and millions of TIME_WAIT sockets from one address would use up
  // its ephemeral ports.
  static std::uint32_t source = 0;
  source = (source + 1) % 65534;
  client.open(tcp::v4());
  client.bind(tcp::endpoint(asio::ip::address_v4((127u << 24) | (1u << 16) | (source + 1)), 0), ec);
  if (!ec) {
    // Asynchronously: a blocking connect() fails with EINTR on libFuzzer's timer signal.
    bool connectDone = false;
    client.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), w.server->port()),
                         [&](boost::beast::error_code connectError) {
                           ec = connectError;
                           connectDone = true;
                         });
    runUntil(
        w.io, [&] { return connectDone; }, std::chrono::milliseconds(10000));
  }
  if (ec) {
    std::fprintf(stderr, "fuzz_http_request: connect: %s\n", ec.message().c_str());
    std::abort();
  }
  connected = true;
  asio::async_write(client, asio::buffer(data, size),
                    [&](boost::beast::error_code written, std::size_t) {
                      boost::beast::error_code ignored;
                      if (!written) client.shutdown(tcp::socket::shutdown_send, ignored);
                    });
  std::function<void()> readMore = [&] {
    client.async_read_some(asio::buffer(chunk), [&](boost::beast::error_code got, std::size_t n) {
      out.append(chunk.data(), n);
      if (got) {
        closed = true;
        return;
      }
      readMore();
    });
  };
  readMore();
  runUntil(
      w.io, [&] { return closed; }, std::chrono::milliseconds(10000));
  (void)connected;
  client.close(ec);
  runUntil(
      w.io, [&] { return w.server->openConnections() == 0; }, std::chrono::milliseconds(10000));
  checkResponses(out, w.handled);
  return 0;
}
