// How both daemons (`nodewarden agent`, `nodewarden webhook`) live and stop, the same way:
//   SIGINT/SIGTERM  "stopping" is logged; `stop` ends new work (no new cycles, requests or
//                   watches); then the loop drains — it keeps running while `pending` says
//                   work is under way (evictions in flight, API writes queued), for at most
//                   `drainFor`; "stopped" is logged and run() returns.
//   SIGHUP          `reload` (the policy file, TLS certificates), unless stopping.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>

#include <boost/asio/io_context.hpp>

namespace nodewarden::server {

struct DaemonHooks {
  std::function<void()> stop;
  std::function<void()> reload;
  std::function<std::size_t()> pending;  // work still under way; null: none
  std::chrono::milliseconds drainFor{5000};
};

// Runs `io` until a stop signal has been handled and the drain is over. Returns the number of
// pieces of work abandoned when the drain ran out of time (0 when everything finished).
std::size_t runUntilStopped(boost::asio::io_context& io, const DaemonHooks& hooks);

}  // namespace nodewarden::server
