#include "server/http_server.h"
#include "server/log.h"
#include "server/tls.h"

#include <fcntl.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <exception>
#include <list>
#include <optional>
#include <type_traits>
#include <unordered_set>
#include <vector>

// GCC 12 with -fsanitize=address,undefined reports a false -Wmaybe-uninitialized inside
// Beast's parser (a boost::optional content length); keep it out of -Werror builds.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#pragma GCC diagnostic pop

namespace nodewarden::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr std::uint32_t kHeaderLimit = 8192;
// After an error answer, how long and how much we keep reading (and discarding) so that the
// client receives the answer rather than a reset (the "lingering close" of nginx and Apache).
constexpr std::chrono::milliseconds kMaxLinger{2000};
constexpr std::size_t kDrainChunk = 4096;
constexpr std::size_t kMaxDrained = std::size_t{1} << 20;

std::string jsonError(std::string_view message) {
  std::string out = "{\"error\":";
  appendJsonString(out, message);
  out += "}";
  return out;
}

std::string hostPort(std::string_view host, std::uint16_t port) {
  std::string out;
  if (host.find(':') != std::string_view::npos) {
    out = "[" + std::string(host) + "]";
  } else {
    out = std::string(host);
  }
  return out + ":" + std::to_string(port);
}

// Asio opens and accepts without SOCK_CLOEXEC; a process the agent starts must not inherit
// the listening socket or a client connection.
template <typename Socket>
void setCloseOnExec(Socket& socket) {
  const int fd = socket.native_handle();
  if (fd >= 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// A header value from the handler must not smuggle line breaks into the response.
std::string sanitizedHeaderValue(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') out += c;
  }
  return out;
}

std::string busyResponse(std::string_view message) {
  const std::string body = jsonError(message);
  return "HTTP/1.1 503 Service Unavailable\r\nServer: nodewarden\r\n"
         "Content-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

// A connection refused for lack of room: one non-blocking write of a canned 503 into the
// socket's send buffer (plain HTTP only: plain text would be garbage to a TLS client), then
// close. Never waits on the peer, so a flood costs nothing but the accept.
void refuseBusy(tcp::socket& socket, bool tls, const std::string& answer) {
  beast::error_code ec;
  socket.non_blocking(true, ec);
  if (!ec && !tls) socket.write_some(asio::buffer(answer), ec);
  socket.shutdown(tcp::socket::shutdown_send, ec);
  socket.close(ec);
}

bool isHttpParseError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

}  // namespace

namespace detail {

using SslContext = asio::ssl::context;
using SslStream = beast::ssl_stream<beast::tcp_stream>;

// What the server's pools and stop() need of every kind of session.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Outstanding operations complete with operation_aborted and drop their owner.
  virtual void close() = 0;
  // Since when the connection waits for the client (handshake, request header, keep-alive
  // idle), and its place in the server's queue of waiters; nullopt while a request is in
  // progress, and once the connection was closed for another.
  std::optional<std::chrono::steady_clock::time_point> waitingSince;
  std::list<SessionBase*>::iterator waitingEntry;
  bool holdsSlot = false;  // a request in progress: counted against maxConnections
};

struct HttpServerState : std::enable_shared_from_this<HttpServerState> {
  HttpServerState(asio::io_context& context, HttpServerOptions opts, HttpHandler h,
                  AsyncHttpHandler a)
      : options(std::move(opts)),
        handler(std::move(h)),
        asyncHandler(std::move(a)),
        acceptor(context),
        retryTimer(context),
        tls({options.tlsCertFile, options.tlsKeyFile, options.tlsClientCaFile},
            [this](const std::string& problem) { report(problem); }) {}

  Result<void> listenOn(const tcp::endpoint& endpoint, const std::string& where);
  void accept();
  void onAccept(beast::error_code ec, tcp::socket socket);
  bool reclaimWaiter();
  // The two pools ("Connections are counted in two pools" in http_server.h).
  void startWaiting(SessionBase& session);
  void stopWaiting(SessionBase& session);
  bool takeSlot(SessionBase& session);
  void releaseSlot(SessionBase& session);
  bool tlsConfigured() const { return !options.tlsCertFile.empty() || !options.tlsKeyFile.empty(); }
  void report(const std::string& problem) {
    if (!options.onProblem) return;
    try {
      options.onProblem(problem);
    } catch (...) {
      // A failing logger must not take the server down.
    }
  }

  HttpServerOptions options;
  HttpHandler handler;            // one of the two is set
  AsyncHttpHandler asyncHandler;  // used when set
  tcp::acceptor acceptor;
  asio::steady_timer retryTimer;
  std::unordered_set<SessionBase*> sessions;  // every live Session, registered by itself
  // The waiting connections, longest waiter first (a connection joins at the back when it
  // starts to wait, so the order is that of waitingSince).
  std::list<SessionBase*> waiting;
  std::size_t slotsHeld = 0;  // requests in progress
  TlsPair tls;  // the HTTPS certificate pair (server/tls.h); its context is null for plain HTTP
  std::uint16_t port = 0;
  bool started = false;
  bool stopped = false;
};

// One connection, shaped like Beast's http_server_async.cpp: owned by the completion handlers
// of its single outstanding operation (shared_from_this), a deadline on every operation, a
// body limit, and at most one write in flight (the next read starts after the write ends).
// `Stream` is beast::tcp_stream (plain HTTP) or SslStream (HTTPS, which first handshakes).
template <typename Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, SslStream>;

 public:
  // `tls` is the context for an SslStream, null for a plain one.
  Session(tcp::socket socket, std::shared_ptr<HttpServerState> server,
          std::shared_ptr<SslContext> tls)
      : tls_(std::move(tls)),
        stream_(makeStream(std::move(socket), tls_.get())),
        answerTimer_(beast::get_lowest_layer(stream_).get_executor()),
        server_(std::move(server)) {
    server_->sessions.insert(this);
  }
  ~Session() override {
    server_->stopWaiting(*this);
    server_->releaseSlot(*this);
    server_->sessions.erase(this);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void run() {
    server_->startWaiting(*this);
    if constexpr (kTls) {
      lowest().expires_after(server_->options.timeout);
      stream_.async_handshake(asio::ssl::stream_base::server,
                              beast::bind_front_handler(&Session::onHandshake, self()));
    } else {
      readRequest();
    }
  }

  void close() override {
    beast::error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    lowest().close();
    answerTimer_.cancel();
    if (answered_) answered_->store(true);  // a late respond() finds nothing to answer
  }

 private:
  static Stream makeStream(tcp::socket&& socket, SslContext* tls) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *tls);
    } else {
      (void)tls;
      return Stream(std::move(socket));
    }
  }

  std::shared_ptr<Session> self() { return this->shared_from_this(); }
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  // A failed handshake (plain HTTP, garbage, an old protocol, a timeout) only closes.
  void onHandshake(beast::error_code ec) {
    if (server_->stopped) return;
    if (ec) {
      lowest().close();
      return;
    }
    readRequest();
  }

  void readRequest() {
    // Between keep-alive requests the connection waits again, and its slot is free.
    server_->releaseSlot(*this);
    server_->startWaiting(*this);
    parser_.emplace();
    parser_->body_limit(static_cast<std::uint64_t>(server_->options.bodyLimit));
    parser_->header_limit(kHeaderLimit);
    lowest().expires_after(server_->options.timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::onHeader, self()));
  }

  // curl and other clients send "Expect: 100-continue" before a larger body and wait (curl: 1 s)
  // for a go-ahead; give it at once. A body over the limit announced by Content-Length has
  // already failed the header read, so it is answered 413 without a go-ahead.
  void onHeader(beast::error_code ec, std::size_t bytes) {
    if (ec || server_->stopped) return onRead(ec, bytes);
    server_->stopWaiting(*this);
    if (!server_->takeSlot(*this)) {
      // Every slot holds a request in progress, none of which is cut for this one.
      refuseBusy(lowest().socket(), kTls, busyResponse("too many requests in progress"));
      return;
    }
    const auto& header = parser_->get();
    if (auto framing = transferEncodingProblem(header)) {
      // RFC 9112 §6.3: the body's length cannot be known, so nothing after the header can be
      // trusted as a next request either (request smuggling): 400 and close.
      try {
        sendError(400, "bad request: " + *framing);
      } catch (const std::exception& e) {
        server_->report(std::string("HTTP connection dropped: ") + e.what());
        lowest().close();
      }
      return;
    }
    if (header.version() >= 11 &&
        beast::iequals(header[http::field::expect], std::string_view("100-continue"))) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      lowest().expires_after(server_->options.timeout);
      asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                        beast::bind_front_handler(&Session::onContinueSent, self()));
      return;
    }
    readBody();
  }

  // A request's Transfer-Encoding must end in exactly one "chunked" (RFC 9112 §6.1, §6.3);
  // Beast would read any other as an empty body and parse the real body as a new request.
  static std::optional<std::string> transferEncodingProblem(
      const http::request_parser<http::string_body>::value_type& header) {
    std::vector<std::string> codings;
    for (const auto& field : header) {
      if (field.name() != http::field::transfer_encoding) continue;
      std::string_view value = field.value();
      while (!value.empty()) {
        const std::size_t comma = value.find(',');
        std::string_view item = value.substr(0, comma);
        while (!item.empty() && (item.front() == ' ' || item.front() == '\t'))
          item.remove_prefix(1);
        while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
        item = item.substr(0, item.find(';'));  // transfer parameters
        while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
        std::string lower(item);
        for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
        if (!lower.empty()) codings.push_back(std::move(lower));
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
      }
    }
    if (codings.empty()) {
      if (header.find(http::field::transfer_encoding) != header.end())
        return "an empty Transfer-Encoding";
      return std::nullopt;
    }
    if (codings.back() != "chunked")
      return "Transfer-Encoding must end in chunked (got \"" + codings.back() + "\")";
    if (std::count(codings.begin(), codings.end(), "chunked") != 1)
      return "Transfer-Encoding names chunked more than once";
    return std::nullopt;
  }

  void onContinueSent(beast::error_code ec, std::size_t /*bytes*/) {
    if (server_->stopped) return;
    if (ec) {
      lowest().close();
      return;
    }
    readBody();
  }

  void readBody() {
    lowest().expires_after(server_->options.timeout);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::onRead, self()));
  }

  void onRead(beast::error_code ec, std::size_t /*bytes*/) {
    if (server_->stopped) return;
    // On timeout tcp_stream has closed the socket already; nothing to answer.
    if (ec == beast::error::timeout || ec == asio::error::operation_aborted) return;
    if (ec == http::error::end_of_stream) {
      lowest().close();
      return;
    }
    try {
      if (ec == http::error::body_limit) {
        sendError(413, "request body larger than " + std::to_string(server_->options.bodyLimit) +
                           " bytes");
      } else if (ec == http::error::header_limit) {
        sendError(431, "request header larger than " + std::to_string(kHeaderLimit) + " bytes");
      } else if (ec == http::error::partial_message) {
        sendError(400, "bad request: the connection ended inside the request");
      } else if (isHttpParseError(ec)) {
        sendError(400, "bad request: " + ec.message());
      } else if (ec) {
        lowest().close();  // reset, broken pipe, a TLS alert, ...: the peer is gone
      } else {
        handleRequest(parser_->release());
      }
    } catch (const std::exception& e) {
      // Beast or the allocator threw while composing an answer; drop just this connection.
      server_->report(std::string("HTTP connection dropped: ") + e.what());
      lowest().close();
    }
  }

  void handleRequest(http::request<http::string_body> request) {
    HttpRequest in;
    in.method = std::string(request.method_string());
    in.target = std::string(request.target());
    for (const auto& field : request) {
      std::string name(field.name_string());
      for (char& c : name) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      }
      auto [it, inserted] = in.headers.try_emplace(std::move(name), std::string(field.value()));
      if (!inserted) {
        it->second += ", ";
        it->second += field.value();
      }
    }
    in.body = std::move(request.body());
    if constexpr (kTls) {
      // With SSL_VERIFY_PEER a presented certificate that does not verify fails the
      // handshake, so one that is here verified.
      X509* peer = SSL_get1_peer_certificate(stream_.native_handle());
      in.clientCertificateVerified = peer != nullptr &&
                                     SSL_get_verify_result(stream_.native_handle()) == X509_V_OK &&
                                     !server_->options.tlsClientCaFile.empty();
      if (peer != nullptr) X509_free(peer);
    }

    requestVersion_ = request.version();
    requestKeepAlive_ = request.keep_alive();
    requestHead_ = request.method() == http::verb::head;
    requestTarget_ = in.target;
    if (server_->asyncHandler) {
      callAsync(in);
      return;
    }

    HttpResponse out;
    try {
      out = server_->handler(in);
    } catch (const std::exception& e) {
      server_->report("HTTP handler failed on " + in.method + " " + in.target + ": " + e.what());
      out = HttpResponse{500, "application/json", jsonError("internal error")};
    } catch (...) {
      server_->report("HTTP handler failed on " + in.method + " " + in.target +
                      ": unknown exception");
      out = HttpResponse{500, "application/json", jsonError("internal error")};
    }
    if (server_->stopped) return;  // the handler stopped the server
    answer(std::move(out));
  }

  // An AsyncHttpHandler's request: the slot stays held until respond() or answerTimeout,
  // whichever comes first (answered_ decides, once); nothing is read from the connection
  // meanwhile. respond() may run on any thread: it only posts the answer to the loop, where
  // the session (if still open) writes it.
  void callAsync(const HttpRequest& in) {
    auto answered = std::make_shared<std::atomic<bool>>(false);
    answered_ = answered;
    answerTimer_.expires_after(server_->options.answerTimeout);
    answerTimer_.async_wait([self = self(), answered](beast::error_code ec) {
      if (ec || self->server_->stopped || answered->exchange(true)) return;
      self->answerSafely(
          HttpResponse{503, "application/json", jsonError("the handler did not answer in time")});
    });
    std::weak_ptr<Session> weak = self();
    auto executor = lowest().get_executor();
    HttpRespond respond = [weak, executor, answered](HttpResponse out) {
      if (answered->exchange(true)) return;
      asio::post(executor, [weak, out = std::move(out)]() mutable {
        const auto session = weak.lock();
        if (!session || session->server_->stopped) return;
        session->answerTimer_.cancel();
        session->answerSafely(std::move(out));
      });
    };
    try {
      server_->asyncHandler(in, respond);
    } catch (const std::exception& e) {
      server_->report("HTTP handler failed on " + in.method + " " + in.target + ": " + e.what());
      respond(HttpResponse{500, "application/json", jsonError("internal error")});
    } catch (...) {
      server_->report("HTTP handler failed on " + in.method + " " + in.target +
                      ": unknown exception");
      respond(HttpResponse{500, "application/json", jsonError("internal error")});
    }
  }

  // answer() outside onRead's try: Beast or the allocator throwing drops just this connection.
  void answerSafely(HttpResponse out) {
    try {
      answer(std::move(out));
    } catch (const std::exception& e) {
      server_->report(std::string("HTTP connection dropped: ") + e.what());
      lowest().close();
    }
  }

  // Writes the handler's answer to the request read last.
  void answer(HttpResponse out) {
    if (out.status < 200 || out.status > 999) {
      server_->report("HTTP handler returned status " + std::to_string(out.status) + " for " +
                      requestTarget_);
      out = HttpResponse{500, "application/json", jsonError("internal error")};
    }
    res_ = {};
    res_.version(requestVersion_);
    res_.keep_alive(requestKeepAlive_);
    res_.result(out.status);
    res_.set(http::field::server, "nodewarden");
    if (!out.contentType.empty()) {
      res_.set(http::field::content_type, sanitizedHeaderValue(out.contentType));
    }
    const bool bodyForbidden = out.status == 204 || out.status == 304;
    if (!bodyForbidden) res_.body() = std::move(out.body);
    res_.prepare_payload();
    // A HEAD answer announces the length of the body it does not send.
    if (requestHead_) res_.body().clear();
    write();
  }

  void sendError(unsigned status, std::string_view message) {
    res_ = {};
    res_.version(11);
    res_.keep_alive(false);
    res_.result(status);
    res_.set(http::field::server, "nodewarden");
    res_.set(http::field::content_type, "application/json");
    res_.body() = jsonError(message);
    res_.prepare_payload();
    write();
  }

  void write() {
    lowest().expires_after(server_->options.timeout);
    http::async_write(stream_, res_, beast::bind_front_handler(&Session::onWrite, self()));
  }

  void onWrite(beast::error_code ec, std::size_t /*bytes*/) {
    if (server_->stopped) return;
    if (ec) {
      lowest().close();
      return;
    }
    if (res_.need_eof()) {
      lingeringClose();
    } else {
      readRequest();
    }
  }

  // Plain: half-closes, then reads and discards what the client still sends until it closes
  // too, or for a bounded time and amount: closing with unread data would send a reset that
  // can destroy the answer before the client reads it. TLS: sends close_notify and waits
  // (bounded) for the client's, as Beast's TLS servers do.
  void lingeringClose() {
    lowest().expires_after(
        std::min<std::chrono::milliseconds>(server_->options.timeout, kMaxLinger));
    if constexpr (kTls) {
      stream_.async_shutdown([self = self()](beast::error_code) { self->lowest().close(); });
    } else {
      beast::error_code ec;
      lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
      if (ec) {
        lowest().close();
        return;
      }
      drain();
    }
  }

  void drain() {
    buffer_.clear();
    // No expires_after here: the deadline set by lingeringClose() bounds the whole drain.
    lowest().async_read_some(buffer_.prepare(kDrainChunk),
                             beast::bind_front_handler(&Session::onDrain, self()));
  }

  void onDrain(beast::error_code ec, std::size_t bytes) {
    if (server_->stopped) return;
    drained_ += bytes;
    if (ec || drained_ > kMaxDrained) {
      lowest().close();
      return;
    }
    drain();
  }

  std::shared_ptr<SslContext> tls_;  // before stream_, which refers to it
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;        // kept alive until its write completes
  asio::steady_timer answerTimer_;               // an AsyncHttpHandler's answerTimeout
  std::shared_ptr<std::atomic<bool>> answered_;  // the pending async request's, once answered
  unsigned requestVersion_ = 11;                 // of the request being answered
  bool requestKeepAlive_ = true;
  bool requestHead_ = false;
  std::string requestTarget_;
  std::shared_ptr<HttpServerState> server_;
  std::size_t drained_ = 0;
};

Result<void> HttpServerState::listenOn(const tcp::endpoint& endpoint, const std::string& where) {
  beast::error_code ec;
  auto fail = [&](const beast::error_code& failure) -> Result<void> {
    beast::error_code ignored;
    acceptor.close(ignored);
    const int sysErrno =
        failure.category() == boost::system::system_category() ? failure.value() : 0;
    return Error{"listening on " + where + ": " + failure.message(), sysErrno};
  };
  acceptor.open(endpoint.protocol(), ec);
  if (ec) return fail(ec);
  setCloseOnExec(acceptor);
  acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (ec) return fail(ec);
  acceptor.bind(endpoint, ec);
  if (ec) return fail(ec);
  acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail(ec);
  const tcp::endpoint bound = acceptor.local_endpoint(ec);
  if (ec) return fail(ec);
  port = bound.port();
  return {};
}

void HttpServerState::accept() {
  acceptor.async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
    self->onAccept(ec, std::move(socket));
  });
}

void HttpServerState::onAccept(beast::error_code ec, tcp::socket socket) {
  if (stopped) {
    beast::error_code ignored;
    socket.close(ignored);
    return;
  }
  if (ec == asio::error::operation_aborted) return;
  if (ec == asio::error::connection_aborted) {
    accept();  // the client gave up while queued; nothing wrong on our side
    return;
  }
  if (ec) {
    // Out of file descriptors and the like: retry shortly rather than spin or stop serving.
    report("accepting an HTTP connection on port " + std::to_string(port) + ": " + ec.message());
    retryTimer.expires_after(std::chrono::milliseconds(100));
    retryTimer.async_wait([self = shared_from_this()](beast::error_code waited) {
      if (!waited && !self->stopped) self->accept();
    });
    return;
  }
  setCloseOnExec(socket);
  if (waiting.size() >= std::max<std::size_t>(options.maxWaiting, 1) && !reclaimWaiter()) {
    static const std::string answer = busyResponse("too many connections");
    refuseBusy(socket, tls.context() != nullptr, answer);
  } else {
    try {
      if (tls.context()) {
        if (options.tlsAutoReload) tls.reloadIfDue(options.tlsReloadInterval);
        std::make_shared<Session<SslStream>>(std::move(socket), shared_from_this(), tls.context())
            ->run();
      } else {
        std::make_shared<Session<beast::tcp_stream>>(std::move(socket), shared_from_this(), nullptr)
            ->run();
      }
    } catch (const std::exception& e) {
      report(std::string("starting an HTTP session: ") + e.what());
    }
  }
  accept();
}

// maxWaiting connections wait: closes the one that has waited longest for its client, if it
// has waited reclaimAfter or more. Its session ends once its cancelled operation completes.
bool HttpServerState::reclaimWaiter() {
  if (waiting.empty()) return false;
  SessionBase* oldest = waiting.front();
  if (std::chrono::steady_clock::now() - *oldest->waitingSince < options.reclaimAfter) {
    return false;
  }
  stopWaiting(*oldest);  // closed once
  oldest->close();
  return true;
}

void HttpServerState::startWaiting(SessionBase& session) {
  if (session.waitingSince) return;
  session.waitingSince = std::chrono::steady_clock::now();
  session.waitingEntry = waiting.insert(waiting.end(), &session);
}

void HttpServerState::stopWaiting(SessionBase& session) {
  if (!session.waitingSince) return;
  waiting.erase(session.waitingEntry);
  session.waitingSince.reset();
}

bool HttpServerState::takeSlot(SessionBase& session) {
  if (session.holdsSlot) return true;
  if (slotsHeld >= std::max<std::size_t>(options.maxConnections, 1)) return false;
  ++slotsHeld;
  session.holdsSlot = true;
  return true;
}

void HttpServerState::releaseSlot(SessionBase& session) {
  if (!session.holdsSlot) return;
  --slotsHeld;
  session.holdsSlot = false;
}

}  // namespace detail

HttpServer::HttpServer(asio::io_context& context, HttpServerOptions options, HttpHandler handler)
    : state_(std::make_shared<detail::HttpServerState>(context, std::move(options),
                                                       std::move(handler), AsyncHttpHandler{})) {}

HttpServer::HttpServer(asio::io_context& context, HttpServerOptions options,
                       AsyncHttpHandler handler)
    : state_(std::make_shared<detail::HttpServerState>(context, std::move(options), HttpHandler{},
                                                       std::move(handler))) {}

HttpServer::~HttpServer() {
  stop();
}

Result<void> HttpServer::start() {
  detail::HttpServerState& s = *state_;
  const std::string where = hostPort(s.options.address, s.options.port);
  if (s.started || s.stopped) {
    return Error{"listening on " + where + ": the server was started or stopped before"};
  }

  if (s.tlsConfigured()) {
    if (s.options.tlsCertFile.empty() || s.options.tlsKeyFile.empty()) {
      return Error{
          "listening on " + where + ": TLS needs both a certificate file and a key file (" +
          (s.options.tlsCertFile.empty() ? "the certificate" : "the key") + " file is not set)"};
    }
    auto loaded = s.tls.load(/*reportFailure=*/false);
    if (!loaded) return loaded.error().withContext("listening on " + where);
  }

  std::vector<tcp::endpoint> endpoints;
  beast::error_code ec;
  const asio::ip::address literal = asio::ip::make_address(s.options.address, ec);
  if (!ec) {
    endpoints.emplace_back(literal, s.options.port);
  } else {
    tcp::resolver resolver(s.acceptor.get_executor());
    const auto results =
        resolver.resolve(s.options.address, std::to_string(s.options.port),
                         tcp::resolver::numeric_service | tcp::resolver::address_configured, ec);
    if (ec) return Error{"listening on " + where + ": resolving the host: " + ec.message()};
    for (const auto& entry : results) endpoints.push_back(entry.endpoint());
    if (endpoints.empty()) return Error{"listening on " + where + ": the host has no address"};
  }

  // A host name may resolve to several addresses (localhost: ::1 and 127.0.0.1); the first
  // one that binds wins.
  std::optional<Error> firstError;
  for (const tcp::endpoint& endpoint : endpoints) {
    Result<void> listening = s.listenOn(endpoint, where);
    if (listening.ok()) {
      s.started = true;
      s.accept();
      return {};
    }
    if (!firstError) firstError = listening.error();
  }
  return *firstError;
}

Result<bool> HttpServer::reloadTls() {
  detail::HttpServerState& s = *state_;
  if (!s.tlsConfigured()) return Error{"reloading TLS: the server does not use TLS"};
  if (!s.tls.context()) return Error{"reloading TLS: start() has not loaded a certificate yet"};
  return s.tls.load(/*reportFailure=*/true);
}

std::uint16_t HttpServer::port() const {
  return state_->port;
}

std::size_t HttpServer::openConnections() const {
  return state_->sessions.size();
}

void HttpServer::stop() {
  detail::HttpServerState& s = *state_;
  if (s.stopped) return;
  s.stopped = true;
  beast::error_code ec;
  s.acceptor.close(ec);
  s.retryTimer.cancel();
  // close() only schedules completions, so the set does not change under us; copy anyway.
  const std::vector<detail::SessionBase*> open(s.sessions.begin(), s.sessions.end());
  for (detail::SessionBase* session : open) session->close();
}

Result<std::pair<std::string, std::uint16_t>> parseListenAddress(std::string_view text) {
  const auto fail = [&](const std::string& problem) {
    return Error{"listen address \"" + std::string(text) + "\": " + problem};
  };
  if (text.empty()) return Error{"empty listen address: expected HOST:PORT, e.g. 127.0.0.1:10290"};

  std::string_view host;
  std::string_view portText;
  bool bracketed = false;
  if (text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return fail("missing ']' after the IPv6 address");
    host = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (rest.empty()) return fail("missing :PORT, e.g. [::1]:10290");
    if (rest.front() != ':') return fail("expected ':' and a port after ']'");
    portText = rest.substr(1);
    bracketed = true;
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return fail("missing :PORT, e.g. 127.0.0.1:10290");
    host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos) {
      return fail("an IPv6 address needs brackets, e.g. [::1]:10290");
    }
    portText = text.substr(colon + 1);
  }

  if (portText.empty()) return fail("missing port after ':'");
  if (!std::all_of(portText.begin(), portText.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return fail("port \"" + std::string(portText) + "\" is not a number");
  }
  unsigned long port = 0;
  const auto [end, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
  if (ec != std::errc() || end != portText.data() + portText.size() || port > 65535) {
    return fail("port " + std::string(portText) + " is out of range 0-65535");
  }

  const std::string hostString(host);
  beast::error_code addressError;
  if (bracketed) {
    asio::ip::make_address_v6(hostString, addressError);
    if (addressError) return fail("\"" + hostString + "\" is not an IPv6 address");
  } else if (host.empty()) {
    return fail("missing host: use 127.0.0.1 for this node only or 0.0.0.0 for every interface");
  } else if (std::all_of(host.begin(), host.end(),
                         [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) {
    asio::ip::make_address_v4(hostString, addressError);
    if (addressError) return fail("\"" + hostString + "\" is not an IPv4 address");
  } else {
    const bool nameChars = std::all_of(host.begin(), host.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
    });
    if (!nameChars || host.size() > 253 || host.front() == '-' || host.front() == '.') {
      return fail("\"" + hostString + "\" is neither an IP address nor a host name");
    }
  }
  return std::pair<std::string, std::uint16_t>{hostString, static_cast<std::uint16_t>(port)};
}

}  // namespace nodewarden::server
