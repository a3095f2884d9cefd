// A small asynchronous Kubernetes API client on Boost.Asio/Beast with OpenSSL: one-shot
// requests (GET, POST, PATCH, DELETE) and watch streams, authenticated and routed as the
// ClusterConfig says (tokens, client certificates, exec credential plugins, an http://, https://
// or socks5:// proxy, impersonation). Errors from the server come back as the status code and
// the Status object's message; transport errors as status 0.
//
// Threading: every call and every callback runs on the io_context's thread (the agent's
// loop). Callbacks are never called from inside the call that started the request. The
// io_context must outlive the Client; destroying the Client cancels everything in flight
// without calling callbacks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kube/config.h"
#include "kube/credentials.h"
#include "kube/json_stream.h"  // findJsonString, for the callers that read Lists
#include "policy/json_reader.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace nodewarden::kube {

struct ApiResponse {
  unsigned status = 0;  // HTTP status; 0: no answer (connect/TLS/timeout error)
  std::string body;
  std::string contentType;
  std::optional<std::chrono::seconds> retryAfter;  // the Retry-After header
  std::string error;  // status 0: what failed ("connect to 10.96.0.1:443: Connection refused")
  // For logs: "403 Forbidden: pods \"x\" is forbidden: …" (the Status object's message when
  // the body is one) or the transport error.
  std::string describe() const;
};

struct ClientOptions {
  std::chrono::milliseconds requestTimeout{10000};  // connect + TLS + request + response
  std::string userAgent = "nodewarden";
  std::size_t maxResponseBytes = 256u << 20;  // lists of large clusters
  // An exec credential plugin (ClusterConfig::exec) runs before the first request, when its
  // answer expires and after a 401, for at most `execTimeout` (requests wait for it, then
  // their own timeout starts). `terminal`: standard input is a terminal the plugin may use
  // (interactiveMode IfAvailable, Always) — the CLI run by a person, never the daemons.
  std::chrono::milliseconds execTimeout{60000};
  bool terminal = false;
  // The wall clock an answer's expirationTimestamp is compared with; default the system's.
  std::function<std::chrono::system_clock::time_point()> wallClock;
};

class WatchStream;

class Client {
 public:
  Client(boost::asio::io_context& io, ClusterConfig config, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  using Callback = std::function<void(ApiResponse)>;
  // `target` is the path and query ("/api/v1/pods?limit=500"); basePath is prepended.
  // `contentType` is sent when `body` is not empty ("application/json",
  // "application/strategic-merge-patch+json", "application/merge-patch+json"). A 401 with a
  // token file or an exec plugin re-reads the file or runs the plugin again, and the request
  // is retried once. A plugin that fails fails the request (status 0, its message in error).
  void request(std::string method, std::string target, std::string body, std::string contentType,
               Callback done);
  // The same with `timeout` instead of ClientOptions::requestTimeout (a request that must
  // answer within a caller's own budget, e.g. the binding webhook's GET on a cache miss).
  void request(std::string method, std::string target, std::string body, std::string contentType,
               Callback done, std::chrono::milliseconds timeout);

  // A watch: GET `target` (with watch=1) and calls `onEvent` with each complete JSON object
  // of the stream (split by object, not by line; a malformed event is passed as text to
  // `onBadEvent` and the stream goes on), then `onEnd` exactly once when the stream ends
  // (server closed, timeout without any byte for `idleTimeout`, transport error, or a non-200
  // answer, whose body it carries). Cancel by destroying or calling cancel() on the handle.
  // Each event reaches `onEvent` as {"type": T, "object": O}: O trimmed by
  // policy::parseKubernetesJsonText but with its metadata.resourceVersion kept, and complete
  // (a Status) for "ERROR" events. Text that is not such an envelope but is valid JSON is
  // passed as parsed, for the caller to judge. `onEnd`: status 200 and no error when the
  // server ended the stream cleanly; status 0 with `error` for a transport error, a stream cut
  // off, or `idleTimeout` ("watch idle for 5 s"); the HTTP status and body otherwise.
  struct WatchHandlers {
    std::function<void(const policy::Json& event)> onEvent;
    std::function<void(std::string_view text, const std::string& problem)> onBadEvent;
    std::function<void(ApiResponse)> onEnd;
  };
  std::shared_ptr<WatchStream> watch(std::string target, WatchHandlers handlers,
                                     std::chrono::milliseconds idleTimeout);

  const ClusterConfig& config() const;
  TokenSource& tokens();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

class WatchStream {
 public:
  virtual ~WatchStream() = default;
  virtual void cancel() = 0;  // no handler is called afterwards
};

// "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1" — percent-encodes a query value.
std::string queryEscape(std::string_view value);

}  // namespace nodewarden::kube
