#include "server/daemon.h"

#include <csignal>
#include <memory>
#include <string>

#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "server/log.h"

namespace nodewarden::server {

std::size_t runUntilStopped(boost::asio::io_context& io, const DaemonHooks& hooks) {
  boost::asio::signal_set stopSignals(io, SIGINT, SIGTERM);
  boost::asio::signal_set hup(io, SIGHUP);
  boost::asio::steady_timer drain(io);
  bool stopping = false;
  std::size_t abandoned = 0;
  std::chrono::steady_clock::time_point deadline{};
  const auto pending = [&] { return hooks.pending ? hooks.pending() : std::size_t(0); };

  std::function<void()> waitForWork = [&] {
    const std::size_t left = pending();
    if (left == 0 || std::chrono::steady_clock::now() >= deadline) {
      if (left != 0) {
        abandoned = left;
        logEvent(LogLevel::Warn, "drain-incomplete",
                 {{"pending", static_cast<std::int64_t>(left)},
                  {"waited_ms", static_cast<std::int64_t>(hooks.drainFor.count())}});
      }
      io.stop();
      return;
    }
    drain.expires_after(std::chrono::milliseconds(100));
    drain.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) waitForWork();
    });
  };
  stopSignals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    stopping = true;
    logEvent(LogLevel::Info, "stopping", {{"signal", signal == SIGINT ? "SIGINT" : "SIGTERM"}});
    hup.cancel();
    if (hooks.stop) hooks.stop();
    if (pending() > 0) {
      logEvent(LogLevel::Info, "draining", {{"pending", static_cast<std::int64_t>(pending())}});
    }
    deadline = std::chrono::steady_clock::now() + hooks.drainFor;
    waitForWork();
  });
  std::function<void()> waitHup = [&] {
    hup.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec || stopping) return;
      logEvent(LogLevel::Info, "reload", {{"signal", "SIGHUP"}});
      if (hooks.reload) hooks.reload();
      waitHup();
    });
  };
  waitHup();
  io.run();
  return abandoned;
}

}  // namespace nodewarden::server
