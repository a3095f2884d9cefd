// node/service_notify.h: the readiness datagram reaches a socket named by a path or in the
// abstract namespace, byte for byte as given; a bad name is an error naming it.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>

#include "node/service_notify.h"
#include "tests/support/temp_dir.h"

using namespace nodewarden;
using namespace nodewarden::node;

namespace {

// A datagram socket bound to `name` (a path, or "@name": abstract), as systemd binds its own.
struct Listener {
  int fd = -1;
  explicit Listener(const std::string& name) {
    fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    REQUIRE(name.size() < sizeof address.sun_path);
    std::memcpy(address.sun_path, name.data(), name.size());
    const bool abstract = name.front() == '@';
    if (abstract) address.sun_path[0] = '\0';
    const auto length =
        socklen_t(offsetof(sockaddr_un, sun_path) + name.size() + (abstract ? 0 : 1));
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), length) == 0);
  }
  ~Listener() { ::close(fd); }
  // The next datagram, waiting up to 5 s; "" if none came.
  std::string receive() const {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return "";
    char buffer[512];
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    return n > 0 ? std::string(buffer, std::size_t(n)) : "";
  }
};

}  // namespace

TEST_CASE("the readiness datagram reaches a socket by path and in the abstract namespace") {
  testing::TempDir dir("nodewarden-notify");
  const std::string path = (dir.path / "notify").string();
  Listener byPath(path);
  const std::string state = "READY=1\nSTATUS=watching 3 pods";
  REQUIRE(notifyServiceManager(path, state));
  CHECK(byPath.receive() == state);

  const std::string abstract = "@nodewarden-notify-test-" + std::to_string(::getpid());
  Listener inAbstract(abstract);
  REQUIRE(notifyServiceManager(abstract, "WATCHDOG=1"));
  CHECK(inAbstract.receive() == "WATCHDOG=1");
}

TEST_CASE("no socket named: nothing sent; a bad name or no listener: an error naming it") {
  CHECK(notifyServiceManager("", "READY=1"));
  auto relative = notifyServiceManager("relative/notify", "READY=1");
  REQUIRE_FALSE(relative);
  CHECK(relative.error().message.find("relative/notify") != std::string::npos);
  CHECK_FALSE(notifyServiceManager("/" + std::string(200, 'x'), "READY=1"));
  testing::TempDir dir("nodewarden-notify");
  auto nobody = notifyServiceManager((dir.path / "absent").string(), "READY=1");
  REQUIRE_FALSE(nobody);
  CHECK(nobody.error().message.find("absent") != std::string::npos);
}
