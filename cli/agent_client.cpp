#include "cli/agent_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

#include "server/http_server.h"

namespace nodewarden::cli {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

Result<Endpoint> parseAgentUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.starts_with("https://")) {
    return Error{"--agent " + url +
                 ": https is not supported; use the agent's plain loopback address"};
  }
  if (!url.starts_with(scheme)) {
    return Error{"--agent " + url + ": expected http://HOST[:PORT], e.g. http://127.0.0.1:10290"};
  }
  std::string rest = url.substr(scheme.size());
  Endpoint endpoint;
  const std::size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    endpoint.base = rest.substr(slash);
    rest = rest.substr(0, slash);
    while (!endpoint.base.empty() && endpoint.base.back() == '/') endpoint.base.pop_back();
  }
  auto address = server::parseListenAddress(rest.find(':') == std::string::npos ||
                                                    (rest.starts_with('[') && rest.ends_with(']'))
                                                ? rest + ":80"
                                                : rest);
  if (!address) return Error{"--agent " + url + ": " + address.error().message};
  endpoint.host = address->first;
  endpoint.port = std::to_string(address->second);
  return endpoint;
}

Result<std::string> get(const Endpoint& endpoint, const std::string& target,
                        const std::string& url) {
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(5));
    beast::error_code ec;
    auto endpoints = resolver.resolve(endpoint.host, endpoint.port, ec);
    if (ec) return Error{"cannot reach the agent at " + url + ": " + ec.message()};
    stream.connect(endpoints, ec);
    if (ec) return Error{"cannot reach the agent at " + url + ": " + ec.message(), ec.value()};
    http::request<http::empty_body> request{http::verb::get, endpoint.base + target, 11};
    request.set(http::field::host, endpoint.host);
    request.set(http::field::user_agent, "nodewarden-status");
    http::write(stream, request, ec);
    if (ec) return Error{"the agent at " + url + ": sending the request: " + ec.message()};
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    http::read(stream, buffer, parser, ec);
    if (ec) return Error{"the agent at " + url + ": reading the answer: " + ec.message()};
    auto response = parser.release();
    if (response.result_int() != 200) {
      return Error{"the agent at " + url + " answered " + std::to_string(response.result_int()) +
                   " to GET " + target + ": " + response.body()};
    }
    return std::move(response.body());
  } catch (const std::exception& e) {
    return Error{"the agent at " + url + ": " + e.what()};
  }
}

}  // namespace nodewarden::cli
