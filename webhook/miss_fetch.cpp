#include "webhook/miss_fetch.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "kube/client.h"
#include "policy/json_reader.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace nodewarden::webhook {

namespace {

// Under this much time left for the GETs, a review fails open without asking.
constexpr std::chrono::milliseconds kMinFetchTimeout{50};

// One object of a GET's body, parsed as the stores parse them.
template <typename T, typename Parse>
Result<T> parseObject(const std::string& body, const char* kind, Parse parse) {
  policy::Diagnostics diagnostics;
  std::optional<policy::Json> json = policy::parseKubernetesJsonText(body, diagnostics);
  std::optional<T> parsed;
  if (json) parsed = parse(*json, "", diagnostics);
  if (!parsed || !diagnostics.empty()) {
    return Error{std::string("the API server's ") + kind +
                 " does not parse: " + diagnostics.joined()};
  }
  return std::move(*parsed);
}

}  // namespace

std::chrono::milliseconds reviewBudget(std::string_view target,
                                       std::chrono::milliseconds fallback) {
  const std::size_t query = target.find('?');
  if (query == std::string_view::npos) return fallback;
  std::string_view rest = target.substr(query + 1);
  std::string_view value;
  bool found = false;
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view item = rest.substr(0, amp);
    if (item.starts_with("timeout=")) {
      value = item.substr(8);
      found = true;
    }
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  if (!found || value.empty()) return fallback;
  // A Go duration: a sequence of decimal numbers, each with a unit (h, m, s, ms, us, ns).
  double total = 0;
  while (!value.empty()) {
    std::size_t digits = 0;
    while (digits < value.size() &&
           ((value[digits] >= '0' && value[digits] <= '9') || value[digits] == '.'))
      ++digits;
    if (digits == 0) return fallback;
    double number = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + digits, number);
    if (ec != std::errc() || end != value.data() + digits) return fallback;
    value.remove_prefix(digits);
    std::size_t unitLength = 0;
    while (unitLength < value.size() && !(value[unitLength] >= '0' && value[unitLength] <= '9') &&
           value[unitLength] != '.')
      ++unitLength;
    const std::string_view unit = value.substr(0, unitLength);
    value.remove_prefix(unitLength);
    double scale = 0;  // to milliseconds
    if (unit == "h") {
      scale = 3600e3;
    } else if (unit == "m") {
      scale = 60e3;
    } else if (unit == "s") {
      scale = 1e3;
    } else if (unit == "ms") {
      scale = 1;
    } else if (unit == "us" || unit == "\u00b5s" || unit == "\u03bcs") {
      scale = 1e-3;
    } else if (unit == "ns") {
      scale = 1e-6;
    } else {
      return fallback;
    }
    total += number * scale;
  }
  if (!std::isfinite(total) || total <= 0 || total > 3600e3) return fallback;
  return std::chrono::milliseconds(static_cast<std::int64_t>(total));
}

std::optional<std::chrono::milliseconds> fetchTimeout(std::chrono::milliseconds budget,
                                                      std::chrono::milliseconds spent,
                                                      std::chrono::milliseconds margin) {
  const auto keep = std::max(margin, budget / 4);
  const auto left = budget - keep - spent;
  if (left < kMinFetchTimeout) return std::nullopt;
  return left;
}

std::string secondsText(std::chrono::milliseconds span) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", static_cast<double>(span.count()) / 1000.0);
  return text;
}

ApiMissFetcher::ApiMissFetcher(boost::asio::io_context& io, kube::Client& client)
    : io_(io), client_(client) {}

ApiMissFetcher::~ApiMissFetcher() {
  *alive_ = false;
}

void ApiMissFetcher::get(std::string target, std::chrono::milliseconds timeout,
                         std::function<void(Result<std::string>)> done) {
  // The first of the answer and the timer calls `done`; the other finds it gone.
  struct Call {
    explicit Call(boost::asio::io_context& io) : timer(io) {}
    boost::asio::steady_timer timer;
    std::function<void(Result<std::string>)> done;
  };
  auto call = std::make_shared<Call>(io_);
  call->done = std::move(done);
  std::weak_ptr<bool> alive = alive_;
  call->timer.expires_after(timeout);
  call->timer.async_wait([call, alive, timeout, target](const boost::system::error_code& ec) {
    if (ec || alive.expired() || !call->done) return;
    auto callback = std::move(call->done);
    call->done = nullptr;
    callback(Error{"GET " + target + ": timed out after " + secondsText(timeout)});
  });
  client_.request(
      "GET", target, {}, {},
      [call, alive, target](kube::ApiResponse response) {
        if (alive.expired() || !call->done) return;
        call->timer.cancel();
        auto callback = std::move(call->done);
        call->done = nullptr;
        if (response.status == 200) {
          callback(std::move(response.body));
        } else {
          callback(Error{"GET " + target + ": " + response.describe()});
        }
      },
      timeout);
}

void ApiMissFetcher::fetchPod(const std::string& ns, const std::string& name,
                              std::chrono::milliseconds timeout, PodDone done) {
  get("/api/v1/namespaces/" + kube::queryEscape(ns) + "/pods/" + kube::queryEscape(name), timeout,
      [done = std::move(done)](Result<std::string> body) {
        if (!body) return done(body.error());
        done(parseObject<policy::Pod>(*body, "pod", policy::parsePod));
      });
}

void ApiMissFetcher::fetchNode(const std::string& name, std::chrono::milliseconds timeout,
                               NodeDone done) {
  get("/api/v1/nodes/" + kube::queryEscape(name), timeout,
      [done = std::move(done)](Result<std::string> body) {
        if (!body) return done(body.error());
        done(parseObject<policy::Node>(*body, "node", policy::parseNode));
      });
}

}  // namespace nodewarden::webhook
