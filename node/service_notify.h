// The service manager's readiness protocol (systemd's sd_notify(3)), spoken directly: one
// datagram of "KEY=value" lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or
// "@name" for the abstract namespace). The same bytes libsystemd's sd_notify sends, without
// loading libsystemd and the six libraries it pulls in (about 0.8 MiB resident in the agent).
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace nodewarden::node {

// Sends `state` (e.g. "READY=1\nSTATUS=watching 3 pods") to `socket`; nothing when `socket`
// is empty. An error names the socket and what failed; the caller decides whether it matters
// (the agent's loop goes on either way, as it did with sd_notify).
Result<void> notifyServiceManager(std::string_view socket, std::string_view state);

}  // namespace nodewarden::node
