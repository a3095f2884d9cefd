#include "server/probes.h"

#include "server/metrics.h"

namespace nodewarden::server {

HttpResponse methodNotAllowed(const HttpRequest& request) {
  return errorResponse(405, request.method + " is not allowed on " + requestPath(request));
}

std::string requestPath(const HttpRequest& request) {
  return request.target.substr(0, request.target.find('?'));
}

bool isRead(const HttpRequest& request) {
  return request.method == "GET" || request.method == "HEAD";
}

std::optional<HttpResponse> serveProbes(const HttpRequest& request, const ProbeRoutes& routes) {
  const std::string path = requestPath(request);
  if (path != "/healthz" && path != "/readyz" && path != "/metrics") return std::nullopt;
  if (!isRead(request)) return methodNotAllowed(request);
  if (path == "/metrics") {
    return HttpResponse{200, std::string(kMetricsContentType), routes.metrics()};
  }
  const Probe probe = path == "/healthz" ? routes.liveness() : routes.readiness();
  return jsonResponse(probe.ok ? 200 : 503, probe.body);
}

}  // namespace nodewarden::server
