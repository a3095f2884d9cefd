#include "server/probes.h"

#include "server/metrics.h"

namespace nodewarden::server {

HttpResponse jsonResponse(unsigned status, const nlohmann::ordered_json& body) {
  return HttpResponse{
      status, "application/json",
      body.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n"};
}

HttpResponse errorResponse(unsigned status, std::string_view message) {
  nlohmann::ordered_json body = nlohmann::ordered_json::object();
  body["error"] = std::string(message);
  return jsonResponse(status, body);
}

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
