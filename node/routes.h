// Publish, over HTTP: the routes `nodewarden agent --listen` serves (docs/reference.md §7).
//   /healthz /readyz /metrics   server/probes.h, as the webhook serves them
//   GET /v1/state               the live `explain eviction -o json` of this node
//   GET /v1/decisions?pod=NS/N  the pod's decision records, as `why -o json` (always on)
//   POST /v1/admit              admission of one pod against this node (--admission-routes)
//   POST /v1/admission-review   the binding webhook answered from this node's view
//                               (--admission-routes; with --tls-client-ca, verified clients)
#pragma once

#include "server/http_server.h"

namespace nodewarden::node {

class Agent;

server::HttpResponse serveAgent(Agent& agent, const server::HttpRequest& request);

}  // namespace nodewarden::node
