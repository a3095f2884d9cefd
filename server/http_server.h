// The agent's small HTTP/1.1 server (docs/reference.md §7): /healthz, /metrics, /v1/... are routed
// by one handler function that the daemon supplies.
//
// Threading: everything runs on one caller-owned boost::asio::io_context driven by a single
// thread (the agent's loop). The handler is called on that thread, one request at a time, so it
// may touch loop-owned state without locks. An AsyncHttpHandler may answer later, from any
// thread; other connections are served meanwhile. The io_context must outlive the HttpServer.
//
// Robustness promises (nothing a peer sends may crash or wedge the agent):
//   - HTTP/1.1 keep-alive; HTTP/1.0 and "Connection: close" are honoured.
//   - A malformed request (garbage, bad request line, bad header) is answered 400 with a JSON
//     body {"error":"..."} and the connection is closed; a body over bodyLimit gets 413, a
//     header block over 8 KiB gets 431, both closing the connection.
//   - Every read and write has a deadline (`timeout`): a client idle or trickling past it is
//     disconnected.
//   - A handler that throws is answered 500 with a JSON body; the server keeps serving.
//   - Connections are counted in two pools, so that clients that never finish a request
//     cannot take the place of one that does (a liveness probe starved into 503 would have
//     the kubelet restart the agent):
//       * A slot (at most maxConnections, the agent's 64) is held only by a request in
//         progress: from the moment its header is complete until its answer is written (body
//         read, handler, answer; with an AsyncHttpHandler, until it answers or answerTimeout
//         passes, which bounds how long a slot waits for a handler). A request in progress is never
//         closed for another. A request whose header completes while every slot is held is answered
//         503 (best effort, without reading further) and closed.
//       * Waiting connections (TLS handshake or request header not yet complete, or idle
//         between keep-alive requests) hold no slot; at most maxWaiting (1,024) wait at once.
//         A new connection beyond that takes the place of the one that has waited longest, if
//         that one has waited reclaimAfter or more (default 0: always); otherwise it is
//         answered 503 (best effort, without reading it) and closed at once.
//     So a probe that sends its request is read and served whatever slow clients do with
//     their headers: while fewer than maxWaiting connections wait at once (however fast they
//     reconnect), no waiting connection is ever closed for another, and its complete header
//     then needs only a slot, which slow headers never hold. Beyond maxWaiting waiting
//     connections the longest waiter gives way (a minimum wait there, as the old 250 ms, is
//     what reconnecting clients beat: bench_soak found 93 % of probes refused). What is left
//     to chance is a flood of more than maxWaiting connections at once (bench_probe_flood
//     prints how probes fare under one), and clients that complete headers but send their
//     bodies or read their answers slowly: they hold slots, each bounded by `timeout`.
//     At most maxConnections + maxWaiting connections are open at once.
//   - After an error answer the server half-closes and discards what the client still sends
//     (bounded in bytes and time) so that the answer is not lost to a TCP reset.
//
// TLS (tlsCertFile and tlsKeyFile set): the port speaks HTTPS only, TLS 1.2 or newer. The
// handshake runs under the same per-operation deadline; a failed handshake (plain HTTP,
// garbage, an old protocol version) just closes the connection. Connections refused (beyond
// maxWaiting, or a request beyond maxConnections) are closed without an answer (a plain-text
// 503 would be garbage to a TLS client). The certificate pair (loaded and reloaded by
// server/tls.h) can be replaced while running (cert-manager rotates the Secret's files in
// place): reloadTls(), and an automatic re-read when a connection arrives at most every
// tlsReloadInterval. New connections use the new pair, open ones keep theirs; a new pair
// that does not load keeps the old one and is reported through onProblem.
// Beast stays out of this header (pimpl): include it anywhere cheaply.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "base/result.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace nodewarden::server {

// One parsed request, as the handler sees it.
struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent
  std::string target;  // the request target, e.g. "/metrics" or "/v1/state?x=1"
  std::string body;    // the whole body (at most bodyLimit bytes), de-chunked
  // Header fields by lower-case name; repeated fields are joined with ", " (RFC 9110 §5.3).
  std::map<std::string, std::string> headers;
  // HTTPS with tlsClientCaFile: the client presented a certificate that verified against it.
  bool clientCertificateVerified = false;
};

// The handler's answer. The server adds Server: nodewarden, Content-Length and Connection.
struct HttpResponse {
  unsigned status = 200;                         // outside 200..999 is answered 500
  std::string contentType = "application/json";  // empty: no Content-Type header
  std::string body;
};

// Called on the loop thread for every well-formed request. May throw std::exception (answered
// 500); should not block, as the whole agent waits for it.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// How an asynchronous handler answers: call it once, at any time, from any thread (the answer
// is written on the loop thread). Calls after the first, and calls after the server answered
// 503 (answerTimeout) or stopped, are ignored. Copyable; dropping it unanswered is harmless
// (the server answers 503 after answerTimeout). stop() and ~HttpServer make later calls no-ops;
// a call from another thread must still not race the io_context's destruction.
using HttpRespond = std::function<void(HttpResponse)>;

// The asynchronous form: called on the loop thread like HttpHandler, but answers through
// `respond`, now or later (e.g. once a request to another server has returned), so that the
// loop serves other connections meanwhile. The request keeps its slot until it is answered;
// one not answered within answerTimeout is answered 503 {"error":"the handler did not answer
// in time"}. A throw before respond was called is answered 500.
using AsyncHttpHandler = std::function<void(const HttpRequest&, HttpRespond)>;

struct HttpServerOptions {
  std::string address = "127.0.0.1";         // an IPv4/IPv6 literal or a host name (resolved once)
  std::uint16_t port = 10290;                // 0: any free port, see HttpServer::port()
  std::size_t bodyLimit = 1 << 20;           // larger request bodies are answered 413
  std::chrono::milliseconds timeout{10000};  // per read/write, including keep-alive idle time
  // See "Connections are counted in two pools" above; each at least 1.
  std::size_t maxConnections = 64;            // requests in progress at once (slots)
  std::size_t maxWaiting = 1024;              // connections waiting for a request header
  std::chrono::milliseconds reclaimAfter{0};  // how long a waiter is safe from a newcomer
  // An AsyncHttpHandler's request not answered this long after the handler was called is
  // answered 503 and its slot freed (unused with a synchronous HttpHandler).
  std::chrono::milliseconds answerTimeout{30000};
  // Optional: told (on the loop thread) about server-side problems worth a log line: accept
  // failures, handler exceptions, a rotated TLS pair that does not load. Peer misbehaviour
  // (garbage, timeouts, failed handshakes) is not reported.
  std::function<void(const std::string&)> onProblem;
  // HTTPS: PEM files, both or neither. tlsCertFile may hold a chain (leaf first); the key
  // must not be encrypted.
  std::string tlsCertFile;
  std::string tlsKeyFile;
  // Optional, with the pair: PEM CA certificates. A client certificate is then asked for and,
  // when one is presented, verified against them (a bad one fails the handshake); whether the
  // request came with one is HttpRequest::clientCertificateVerified, so probes without one
  // still reach the routes that do not need it.
  std::string tlsClientCaFile;
  // How often, at most, the files are compared with the loaded pair when a connection
  // arrives (zero: on every connection); false disables the automatic check.
  bool tlsAutoReload = true;
  std::chrono::milliseconds tlsReloadInterval{60000};
};

namespace detail {
struct HttpServerState;
}  // namespace detail

class HttpServer {
 public:
  // Stores the options and the handler; opens nothing until start(). Any thread.
  HttpServer(boost::asio::io_context& context, HttpServerOptions options, HttpHandler handler);
  // The same with an asynchronous handler.
  HttpServer(boost::asio::io_context& context, HttpServerOptions options, AsyncHttpHandler handler);
  // Calls stop(). Call on the loop thread, or when the loop is not running.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Resolves the address, binds, listens and starts accepting (the accepting happens when
  // the io_context runs). Returns true, or an error naming the address and the OS reason:
  // "listening on 127.0.0.1:10290: Address already in use" (Error::sysErrno set). With TLS
  // the pair is loaded first and an error names the file: "TLS certificate /etc/tls.crt:
  // reading: No such file or directory", "TLS key /etc/tls.key does not match the
  // certificate /etc/tls.crt". Call once, on the loop thread or before the loop runs.
  Result<void> start();

  // Re-reads the TLS pair now. Returns true when a different pair was loaded (new
  // connections use it), false when the files hold the loaded pair already. On an error the
  // old pair stays in use, the error is returned and reported through onProblem (once per
  // distinct bad content). An error as well when TLS is not configured or start() has not
  // loaded a pair yet. Loop thread.
  Result<bool> reloadTls();

  // The port actually bound (useful with port 0); 0 before a successful start(). Any thread
  // once start() has returned.
  std::uint16_t port() const;

  // Closes the acceptor and every open connection (pending handlers complete with
  // operation_aborted), so io_context::run() can return once the caller's other work ends.
  // No handler is called after stop(). Idempotent. Call on the loop thread (from another
  // thread: boost::asio::post(context, [&] { server.stop(); })), or when the loop is not
  // running.
  void stop();

  // Connections currently open (including ones draining after an error answer). Loop thread.
  std::size_t openConnections() const;

 private:
  std::shared_ptr<detail::HttpServerState> state_;
};

// Parses a --listen value "HOST:PORT": "127.0.0.1:10290", "0.0.0.0:80", "[::1]:10290",
// "localhost:1". HOST is an IPv4 literal, a bracketed IPv6 literal or a host name (not
// resolved here); PORT is 0..65535. Errors name the input and the problem:
// `listen address "x:99999": port 99999 is out of range 0-65535`. Pure; any thread.
Result<std::pair<std::string, std::uint16_t>> parseListenAddress(std::string_view text);

}  // namespace nodewarden::server
