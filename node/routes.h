// Publish, over HTTP: the routes `nodewarden agent --listen` serves (docs/reference.md §7).
//   /healthz /readyz /metrics   server/probes.h, as the webhook serves them
//   GET /v1/state               the live `explain eviction -o json` of this node
//   GET /v1/decisions?pod=NS/N  the pod's decision records, as `why -o json` (always on)
//   POST /v1/admit              admission of one pod against this node (--admission-routes)
//   POST /v1/admission-review   the binding webhook answered from this node's view
//                               (--admission-routes; with --tls-client-ca, verified clients)
//
// The routes read the agent through agent_surface.h only; run.cpp owns the HTTP server and
// wires it to the agent with agentServer.
#pragma once

#include <memory>

#include <boost/asio/io_context.hpp>

#include "node/agent_surface.h"
#include "server/http_server.h"

namespace nodewarden::webhook {
class AdmissionActions;  // webhook/admission_actions.h
}

namespace nodewarden::node {

struct RouteOptions {
  // POST /v1/admit and /v1/admission-review can lead to evictions: served only when set
  // (otherwise 404).
  bool admissionRoutes = false;
  // With --tls-client-ca: the admission routes answer only a client whose certificate
  // verified (otherwise 403).
  bool verifiedClientsOnly = false;
  // What a `preempt` verdict at POST /v1/admission-review does (evict the victims, nominate
  // the pod): the API writer with --source kubernetes; null: verdicts only, nothing acts.
  webhook::AdmissionActions* admissionActions = nullptr;
};

server::HttpResponse serveAgent(AgentSurface& agent, const RouteOptions& options,
                                const server::HttpRequest& request);

// An HTTP server (not started) that answers with serveAgent and logs its problems. The agent
// and `options.admissionActions` must outlive it.
std::unique_ptr<server::HttpServer> agentServer(boost::asio::io_context& io,
                                                server::HttpServerOptions http, AgentSurface& agent,
                                                RouteOptions options);

}  // namespace nodewarden::node
