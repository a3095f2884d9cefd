#include "node/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "cgroups/fs.h"

namespace nodewarden::node {

Result<void> notifyServiceManager(std::string_view socket, std::string_view state) {
  if (socket.empty()) return {};
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const bool abstract = socket.front() == '@';
  if ((!abstract && socket.front() != '/') || socket.size() > sizeof address.sun_path ||
      (!abstract && socket.size() == sizeof address.sun_path)) {
    return Error{"NOTIFY_SOCKET " + std::string(socket) +
                 ": expected an absolute path or @name of at most " +
                 std::to_string(sizeof address.sun_path - 1) + " bytes"};
  }
  std::memcpy(address.sun_path, socket.data(), socket.size());
  if (abstract) address.sun_path[0] = '\0';
  // A path is NUL-terminated in the address; an abstract name is exactly its bytes.
  const socklen_t length =
      socklen_t(offsetof(sockaddr_un, sun_path) + socket.size() + (abstract ? 0 : 1));
  cgroups::UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return Error{"NOTIFY_SOCKET " + std::string(socket) + ": socket: " + std::strerror(errno)};
  }
  ssize_t sent = -1;
  do {
    sent = ::sendto(fd.get(), state.data(), state.size(), MSG_NOSIGNAL,
                    reinterpret_cast<const sockaddr*>(&address), length);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    return Error{"NOTIFY_SOCKET " + std::string(socket) + ": sendto: " + std::strerror(errno)};
  }
  if (std::size_t(sent) != state.size()) {
    return Error{"NOTIFY_SOCKET " + std::string(socket) + ": sent " + std::to_string(sent) +
                 " of " + std::to_string(state.size()) + " bytes"};
  }
  return {};
}

}  // namespace nodewarden::node
