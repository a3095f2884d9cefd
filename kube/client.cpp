#include "kube/client.h"

#include <cctype>
#include <charconv>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>

#include "kube/exchange.h"
#include "kube/json_stream.h"
#include "kube/transport.h"

namespace nodewarden::kube {

using namespace detail;

namespace {

constexpr std::uint32_t kHeaderLimit = 64 * 1024;
constexpr std::size_t kWatchChunk = 64 * 1024;
constexpr std::size_t kMaxErrorBody = 1 << 20;

}  // namespace

std::string ApiResponse::describe() const {
  if (status == 0) return error.empty() ? std::string("no answer") : error;
  std::string out = std::to_string(status);
  auto reason = http::obsolete_reason(static_cast<http::status>(status));
  if (!reason.empty() && reason != "<unknown-status>") {
    out += ' ';
    out.append(reason.data(), reason.size());
  }
  if (!error.empty()) return out + ": " + error;
  if (auto message = findJsonString(body, {"message"}); message && !message->empty()) {
    // The Status' causes say what the message does not: which disruption budget refused an
    // eviction and why, which field was invalid.
    std::string causes;
    const policy::Json statusObject = policy::Json::parse(body, nullptr, false);
    if (statusObject.is_object() && statusObject.contains("details") &&
        statusObject["details"].is_object()) {
      const policy::Json list = statusObject["details"].value("causes", policy::Json::array());
      for (const policy::Json& cause : list.is_array() ? list : policy::Json::array()) {
        if (!cause.is_object()) continue;
        const auto text = cause.find("message");
        if (text == cause.end() || !text->is_string()) continue;
        const std::string& said = text->get_ref<const std::string&>();
        if (said.empty() || said == *message) continue;
        causes += (causes.empty() ? "" : "; ") + said;
      }
    }
    return out + ": " + *message + (causes.empty() ? "" : " (" + causes + ")");
  }
  std::string_view text(body);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  if (text.empty()) return out;
  if (text.size() > 200) return out + ": " + std::string(text.substr(0, 200)) + "…";
  return out + ": " + std::string(text);
}

std::string queryEscape(std::string_view value) {
  boost::urls::encoding_opts options;
  options.space_as_plus = true;
  return boost::urls::encode(value, boost::urls::unreserved_chars, options);
}

namespace {

ApiResponse responseFrom(const http::response<http::string_body>& res) {
  ApiResponse out;
  out.status = res.result_int();
  out.body = res.body();
  if (auto it = res.find(http::field::content_type); it != res.end())
    out.contentType = std::string(it->value());
  if (auto it = res.find(http::field::retry_after); it != res.end()) {
    std::string_view v = it->value();
    long long seconds = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
    if (ec == std::errc() && end == v.data() + v.size() && seconds >= 0)
      out.retryAfter = std::chrono::seconds(seconds);
  }
  return out;
}

class RequestExchange final : public Exchange {
 public:
  RequestExchange(std::shared_ptr<ClientCore> core, http::verb method, std::string target,
                  std::string body, std::string contentType, Client::Callback done)
      : Exchange(std::move(core), method, std::move(target), std::move(body),
                 std::move(contentType)),
        done_(std::move(done)) {}

 private:
  void readResponse() override {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(core_->options.maxResponseBytes);
    if (method_ == http::verb::head) parser_->skip(true);
    conn_->visit([this](auto& stream) {
      http::async_read(stream, conn_->buffer, *parser_,
                       [self = std::static_pointer_cast<RequestExchange>(shared_from_this())](
                           error_code ec, std::size_t) { self->onRead(ec); });
    });
  }

  void onRead(error_code ec) {
    if (stopped()) return;
    if (ec) {
      if (retryStale(ec)) return;
      if (ec == http::error::body_limit)
        return fail(phase_ + ": response larger than " +
                    std::to_string(core_->options.maxResponseBytes) + " bytes");
      return failTransport(ec);
    }
    auto& res = parser_->get();
    bool reusable = res.keep_alive() && !parser_->need_eof();
    if (reusable)
      core_->putIdle(std::move(conn_));
    else
      conn_.reset();
    if (retryUnauthorized(res.result_int())) return;
    finishDeadline();
    deliver(responseFrom(res));
  }

  void fail(std::string error) override {
    if (conn_) {
      conn_->close();
      conn_.reset();
    }
    ApiResponse out;
    out.error = std::move(error);
    finishDeadline();
    // Never from inside request(): the attempt runs posted, so this is already a handler.
    deliver(std::move(out));
  }

  void deliver(ApiResponse response) {
    if (stopped() || !done_) return;
    auto done = std::move(done_);
    done_ = nullptr;
    done(std::move(response));
  }

  Client::Callback done_;
  std::optional<http::response_parser<http::string_body>> parser_;
};

class WatchExchange;

class WatchHandle final : public WatchStream {
 public:
  explicit WatchHandle(std::weak_ptr<WatchExchange> exchange) : exchange_(std::move(exchange)) {}
  ~WatchHandle() override { cancel(); }
  void cancel() override;

 private:
  std::weak_ptr<WatchExchange> exchange_;
};

class WatchExchange final : public Exchange {
 public:
  WatchExchange(std::shared_ptr<ClientCore> core, std::string target,
                Client::WatchHandlers handlers, std::chrono::milliseconds idleTimeout)
      : Exchange(std::move(core), http::verb::get, std::move(target), {}, {}),
        handlers_(std::move(handlers)),
        idleTimeout_(idleTimeout),
        idleTimer_(core_->io),
        chunk_(kWatchChunk),
        decoder_(WatchDecoder::Handlers{[this](const policy::Json& event) {
                                          if (handlers_.onEvent) handlers_.onEvent(event);
                                        },
                                        [this](std::string_view text, const std::string& problem) {
                                          if (handlers_.onBadEvent)
                                            handlers_.onBadEvent(text, problem);
                                        }}) {}

  void cancel() { abort(); }

 private:
  void onInterrupt() override { idleTimer_.cancel(); }

  void readResponse() override {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(boost::none);
    conn_->visit([this](auto& stream) {
      http::async_read_header(stream, conn_->buffer, *parser_,
                              [self = std::static_pointer_cast<WatchExchange>(shared_from_this())](
                                  error_code ec, std::size_t) { self->onHeader(ec); });
    });
  }

  void onHeader(error_code ec) {
    if (stopped()) return;
    if (ec) {
      if (retryStale(ec)) return;
      return failTransport(ec);
    }
    status_ = parser_->get().result_int();
    if (retryUnauthorized(status_)) {
      // Its body is unread: the connection cannot serve the retry.
      conn_->close();
      conn_.reset();
      return;
    }
    finishDeadline();
    phase_ = "watch " + target_;
    lastByte_ = std::chrono::steady_clock::now();
    armIdle();
    readSome();
  }

  void armIdle() {
    idleTimer_.expires_at(lastByte_ + idleTimeout_);
    idleTimer_.async_wait(
        [weak = std::weak_ptr<WatchExchange>(
             std::static_pointer_cast<WatchExchange>(shared_from_this()))](error_code ec) {
          auto self = weak.lock();
          if (!self || ec || self->stopped() || self->ended_) return;
          // Bytes came meanwhile: wait for the rest of the window.
          if (self->lastByte_ + self->idleTimeout_ > std::chrono::steady_clock::now())
            return self->armIdle();
          self->idleExpired_ = true;
          if (self->conn_) self->conn_->close();
        });
  }

  void readSome() {
    if (parser_->is_done()) return finishBody();
    parser_->get().body().data = chunk_.data();
    parser_->get().body().size = chunk_.size();
    parser_->get().body().more = true;
    conn_->visit([this](auto& stream) {
      http::async_read_some(stream, conn_->buffer, *parser_,
                            [self = std::static_pointer_cast<WatchExchange>(shared_from_this())](
                                error_code ec, std::size_t bytes) { self->onSome(ec, bytes); });
    });
  }

  void onSome(error_code ec, std::size_t bytes) {
    if (stopped()) return;
    if (ec == http::error::need_buffer) ec = {};
    if (bytes > 0) lastByte_ = std::chrono::steady_clock::now();
    std::size_t got = chunk_.size() - parser_->get().body().size;
    if (got > 0) {
      std::string_view data(chunk_.data(), got);
      if (status_ == 200) {
        decoder_.feed(data, cancelled_);
        if (stopped()) return;
        if (decoder_.pending() > core_->options.maxResponseBytes)
          return end(0, {},
                     "watch event larger than " + std::to_string(core_->options.maxResponseBytes) +
                         " bytes");
      } else if (errorBody_.size() < kMaxErrorBody) {
        errorBody_.append(data.substr(0, kMaxErrorBody - errorBody_.size()));
      }
    }
    if (ec) {
      if (idleExpired_) return end(0, {}, "watch idle for " + formatDuration(idleTimeout_));
      if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
          ec == asio::error::eof || ec == ssl::error::stream_truncated)
        return end(0, {}, "watch stream closed by the server before its end");
      return end(0, {}, phase_ + ": " + ec.message());
    }
    readSome();
  }

  void finishBody() {
    decoder_.finish();
    if (stopped()) return;
    if (parser_->keep_alive() && conn_) core_->putIdle(std::move(conn_));
    if (status_ == 200) return end(200, {}, {});
    end(status_, std::move(errorBody_), {});
  }

  void fail(std::string error) override { end(0, {}, std::move(error)); }

  void end(unsigned status, std::string body, std::string error) {
    idleTimer_.cancel();
    finishDeadline();
    if (conn_) {
      conn_->close();
      conn_.reset();
    }
    if (stopped() || ended_) return;
    ended_ = true;
    ApiResponse out;
    out.status = status;
    out.body = std::move(body);
    out.error = std::move(error);
    if (parser_ && status != 0) {
      if (auto it = parser_->get().find(http::field::content_type); it != parser_->get().end())
        out.contentType = std::string(it->value());
    }
    auto onEnd = std::move(handlers_.onEnd);
    handlers_ = {};
    if (onEnd) onEnd(std::move(out));
  }

  Client::WatchHandlers handlers_;
  std::chrono::milliseconds idleTimeout_;
  asio::steady_timer idleTimer_;
  SteadyTime lastByte_ = std::chrono::steady_clock::now();
  std::vector<char> chunk_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  WatchDecoder decoder_;
  std::string errorBody_;
  unsigned status_ = 0;
  bool idleExpired_ = false;
  bool ended_ = false;
};

void WatchHandle::cancel() {
  if (auto exchange = exchange_.lock()) exchange->cancel();
  exchange_.reset();
}

http::verb verbOf(const std::string& method) {
  return http::string_to_verb(method);
}

}  // namespace

struct Client::Impl : ClientCore {
  using ClientCore::ClientCore;
};

Client::Client(asio::io_context& io, ClusterConfig config, ClientOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(config), std::move(options))) {}

Client::~Client() {
  impl_->shutdown();
}

void Client::request(std::string method, std::string target, std::string body,
                     std::string contentType, Callback done) {
  auto exchange =
      std::make_shared<RequestExchange>(impl_, verbOf(method), std::move(target), std::move(body),
                                        std::move(contentType), std::move(done));
  exchange->start();
}

void Client::request(std::string method, std::string target, std::string body,
                     std::string contentType, Callback done, std::chrono::milliseconds timeout) {
  auto exchange =
      std::make_shared<RequestExchange>(impl_, verbOf(method), std::move(target), std::move(body),
                                        std::move(contentType), std::move(done));
  exchange->setTimeout(timeout);
  exchange->start();
}

std::shared_ptr<WatchStream> Client::watch(std::string target, WatchHandlers handlers,
                                           std::chrono::milliseconds idleTimeout) {
  auto exchange =
      std::make_shared<WatchExchange>(impl_, std::move(target), std::move(handlers), idleTimeout);
  exchange->start();
  return std::make_shared<WatchHandle>(exchange);
}

const ClusterConfig& Client::config() const {
  return impl_->config;
}

TokenSource& Client::tokens() {
  return impl_->credentials.tokens();
}

}  // namespace nodewarden::kube
