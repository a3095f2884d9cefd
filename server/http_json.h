// The JSON answers both daemons give the same way (docs/reference.md §7): a JSON body, and
// {"error": "..."} for every request they refuse or cannot serve. One writer, so that
// `nodewarden agent` and `nodewarden webhook` cannot drift apart, and so that nothing a peer
// sent (a request target or a body echoed in a message) can make an answer throw.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/http_server.h"

namespace nodewarden::server {

// `body` as JSON indented by two spaces, with a final newline. Bytes that are not UTF-8 are
// replaced (U+FFFD), never thrown on. Pure; any thread.
inline HttpResponse jsonResponse(unsigned status, const nlohmann::ordered_json& body) {
  return HttpResponse{
      status, "application/json",
      body.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n"};
}

// {"error": message}, written as jsonResponse writes. Pure; any thread.
inline HttpResponse errorResponse(unsigned status, std::string_view message) {
  nlohmann::ordered_json body = nlohmann::ordered_json::object();
  body["error"] = std::string(message);
  return jsonResponse(status, body);
}

}  // namespace nodewarden::server
