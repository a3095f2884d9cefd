// What both daemons answer the same way: the probe routes /healthz, /readyz and /metrics
// (docs/reference.md §7), and the small routing helpers around them. The daemon says whether
// it is alive and ready; this file turns that into HTTP (with server/http_json.h's answers),
// so `nodewarden agent` and `nodewarden webhook` cannot drift apart.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/http_json.h"
#include "server/http_server.h"

namespace nodewarden::server {

// 405 "METHOD is not allowed on PATH".
HttpResponse methodNotAllowed(const HttpRequest& request);

// The request target without its query.
std::string requestPath(const HttpRequest& request);
bool isRead(const HttpRequest& request);  // GET or HEAD

// A probe's answer: 200 when ok, else 503, with `body` (which has at least "status").
struct Probe {
  bool ok = false;
  nlohmann::ordered_json body;
};

struct ProbeRoutes {
  std::function<Probe()> liveness;       // /healthz
  std::function<Probe()> readiness;      // /readyz
  std::function<std::string()> metrics;  // /metrics, the text exposition
};

// Serves /healthz, /readyz and /metrics (GET or HEAD; 405 otherwise); nullopt for any other
// path, which the daemon routes itself.
std::optional<HttpResponse> serveProbes(const HttpRequest& request, const ProbeRoutes& routes);

}  // namespace nodewarden::server
