#include "webhook/routes.h"

#include <optional>
#include <string>
#include <utility>

#include "server/http_json.h"
#include "webhook/binding_webhook.h"

namespace nodewarden::webhook {

namespace {

// The answer of everything but a review, or nullopt for a review.
std::optional<server::HttpResponse> serveOther(const WebhookRoutes& routes,
                                               const server::HttpRequest& request) {
  if (auto answered = server::serveProbes(request, routes.probes)) return *answered;
  const std::string path = server::requestPath(request);
  if (path == "/v1/admission-review") {
    if (routes.requireClientCertificate && !request.clientCertificateVerified) {
      return server::errorResponse(403,
                                   "POST /v1/admission-review needs a client certificate "
                                   "signed by the --tls-client-ca authority");
    }
    return std::nullopt;
  }
  return server::errorResponse(404, "no such path: " + path +
                                        " (try POST /v1/admission-review, /healthz, /readyz, "
                                        "/metrics)");
}

}  // namespace

server::HttpResponse serveWebhook(BindingWebhook& webhook, const WebhookRoutes& routes,
                                  const server::HttpRequest& request) {
  if (auto answered = serveOther(routes, request)) return *answered;
  return webhook.handle(request);
}

void serveWebhookAsync(BindingWebhook& webhook, const WebhookRoutes& routes,
                       const server::HttpRequest& request, server::HttpRespond respond) {
  if (auto answered = serveOther(routes, request)) return respond(std::move(*answered));
  webhook.handleAsync(request, std::move(respond));
}

}  // namespace nodewarden::webhook
