// A running agent's HTTP surface from the command line (`status`, `why`): plain HTTP, as the
// agent serves it on loopback by default.
#pragma once

#include <string>

#include "base/result.h"

namespace nodewarden::cli {

struct Endpoint {
  std::string host;
  std::string port;
  std::string base;  // a path prefix, without the trailing slash
};

// http://HOST[:PORT][/PREFIX]; the agent serves plain HTTP on loopback by default.
Result<Endpoint> parseAgentUrl(const std::string& url);

// One GET with a 5 s deadline over connect, request and answer; the body of a 200. A
// connection that could not be made carries its errno (ECONNREFUSED, …) in sysErrno.
Result<std::string> get(const Endpoint& endpoint, const std::string& target,
                        const std::string& url);

}  // namespace nodewarden::cli
