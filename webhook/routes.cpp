#include "webhook/routes.h"

#include <string>

#include "server/http_json.h"
#include "webhook/binding_webhook.h"

namespace nodewarden::webhook {

server::HttpResponse serveWebhook(BindingWebhook& webhook, const WebhookRoutes& routes,
                                  const server::HttpRequest& request) {
  if (auto answered = server::serveProbes(request, routes.probes)) return *answered;
  const std::string path = server::requestPath(request);
  if (path == "/v1/admission-review") {
    if (routes.requireClientCertificate && !request.clientCertificateVerified) {
      return server::errorResponse(403,
                                   "POST /v1/admission-review needs a client certificate "
                                   "signed by the --tls-client-ca authority");
    }
    return webhook.handle(request);
  }
  return server::errorResponse(404, "no such path: " + path +
                                        " (try POST /v1/admission-review, /healthz, /readyz, "
                                        "/metrics)");
}

}  // namespace nodewarden::webhook
