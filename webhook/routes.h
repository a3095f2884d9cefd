// The routes `nodewarden webhook` serves (docs/reference.md §7), as a free function apart from
// the HTTP session (server/http_server.h) and from the service that owns the objects
// (webhook/service.h), the way Boost.Beast's example servers route with handle_request():
//   /healthz /readyz /metrics    server/probes.h, as the agent serves them
//   POST /v1/admission-review    the binding webhook; with --tls-client-ca, only for a client
//                                whose certificate verified (403 otherwise)
//   anything else                404, naming the paths there are
#pragma once

#include "server/http_server.h"
#include "server/probes.h"

namespace nodewarden::webhook {

class BindingWebhook;

struct WebhookRoutes {
  server::ProbeRoutes probes;
  // POST /v1/admission-review can lead to evictions: with --tls-client-ca it answers only a
  // client whose certificate verified against that authority (the API server's).
  bool requireClientCertificate = false;
};

// Answers one request. Called on the loop thread, as the server's handler.
server::HttpResponse serveWebhook(BindingWebhook& webhook, const WebhookRoutes& routes,
                                  const server::HttpRequest& request);
// The same as the server's asynchronous handler: a review may be answered later, once what
// the cache missed is fetched (BindingWebhook::handleAsync); everything else at once.
void serveWebhookAsync(BindingWebhook& webhook, const WebhookRoutes& routes,
                       const server::HttpRequest& request, server::HttpRespond respond);

}  // namespace nodewarden::webhook
