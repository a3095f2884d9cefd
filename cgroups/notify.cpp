#include "cgroups/notify.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>
#include <cctype>
#include <cerrno>

namespace nodewarden::cgroups {

Result<MemoryThresholdNotifier> MemoryThresholdNotifier::arm(const CgroupDir& memoryDir,
                                                             std::uint64_t thresholdBytes) {
  if (memoryDir.version() != Version::V1) {
    return Error{"memory thresholds need cgroup v1 (cgroup v2 has no cgroup.event_control); " +
                 memoryDir.path() + " is cgroup v2: use PSI triggers or polling"};
  }
  const int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) return errnoError("eventfd", errno);
  MemoryThresholdNotifier notifier;
  notifier.eventFd_ = UniqueFd(efd);
  notifier.threshold_ = thresholdBytes;
  auto usage = openFileAt(memoryDir.fd(), "memory.usage_in_bytes");
  if (!usage) return usage.error().withContext(memoryDir.path());
  const std::string request = std::to_string(efd) + " " + std::to_string(usage->get()) + " " +
                              std::to_string(thresholdBytes);
  auto written = writeFileAt(memoryDir.fd(), "cgroup.event_control", request);
  if (!written) {
    return written.error().withContext("arming a memory threshold on " + memoryDir.path());
  }
  return notifier;
}

Result<std::uint64_t> MemoryThresholdNotifier::consume() {
  std::uint64_t count = 0;
  const ssize_t n = ::read(eventFd_.get(), &count, sizeof count);
  if (n < 0) {
    if (errno == EAGAIN) return std::uint64_t{0};
    return errnoError("reading the memory threshold eventfd", errno);
  }
  if (n != sizeof count) return Error{"reading the memory threshold eventfd: short read"};
  return count;
}

bool hasCapSysResource() {
  auto status = readFile("/proc/self/status");
  if (!status) return false;
  const std::size_t at = status->find("CapEff:");
  if (at == std::string::npos) return false;
  std::size_t i = at + 7;
  while (i < status->size() && ((*status)[i] == ' ' || (*status)[i] == '\t')) ++i;
  std::uint64_t mask = 0;
  for (; i < status->size() && std::isxdigit(static_cast<unsigned char>((*status)[i])); ++i) {
    const char c = (*status)[i];
    mask = mask << 4 | static_cast<std::uint64_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  constexpr int kCapSysResource = 24;
  return (mask >> kCapSysResource & 1) != 0;
}

Result<PsiTrigger> PsiTrigger::armOn(int dirfd, const std::string& name, const std::string& path,
                                     PressureKind kind, std::uint64_t stallMicros,
                                     std::uint64_t windowMicros) {
  auto trigger = formatPsiTrigger(kind, stallMicros, windowMicros, hasCapSysResource());
  if (!trigger) return trigger.error().withContext(path);
  const int fd = ::openat(dirfd, name.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int saved = errno;
    if (saved == ENOENT) {
      return Error{path + ": no such file (kernel without PSI, or not a cgroup2 directory)", saved};
    }
    return errnoError(path, saved);
  }
  PsiTrigger armed;
  armed.fd_ = UniqueFd(fd);
  armed.path_ = path;
  armed.trigger_ = std::move(trigger).value();
  // The kernel's own example writes the terminating NUL too.
  if (::write(fd, armed.trigger_.c_str(), armed.trigger_.size() + 1) < 0) {
    const int saved = errno;
    if (saved == EOPNOTSUPP) {
      return Error{path + ": PSI is disabled in this kernel (boot with psi=1)", saved};
    }
    return errnoError(path + ": writing trigger \"" + armed.trigger_ + "\"", saved);
  }
  return armed;
}

Result<PsiTrigger> PsiTrigger::arm(const std::string& path, PressureKind kind,
                                   std::uint64_t stallMicros, std::uint64_t windowMicros) {
  return armOn(AT_FDCWD, path, path, kind, stallMicros, windowMicros);
}

Result<PsiTrigger> PsiTrigger::armAt(const CgroupDir& dir, const std::string& resource,
                                     PressureKind kind, std::uint64_t stallMicros,
                                     std::uint64_t windowMicros) {
  if (dir.version() != Version::V2) {
    return Error{"PSI triggers need a cgroup2 directory; " + dir.path() + " is cgroup v1"};
  }
  const std::string name = resource + ".pressure";
  return armOn(dir.fd(), name, dir.path() + "/" + name, kind, stallMicros, windowMicros);
}

Result<PsiTrigger::Event> PsiTrigger::check() const {
  pollfd p{fd_.get(), POLLPRI, 0};
  const int n = ::poll(&p, 1, 0);
  if (n < 0) return errnoError("poll " + path_, errno);
  if (n == 0) return Event::None;
  if ((p.revents & (POLLERR | POLLNVAL)) != 0) return Event::Gone;
  if ((p.revents & POLLPRI) != 0) return Event::Pressure;
  return Event::None;
}

Result<Pressure> PsiTrigger::read() const {
  char buffer[512];
  auto n = preadWhole(fd_.get(), buffer, sizeof buffer);
  if (!n) return n.error().withContext(path_);
  auto parsed = parsePressure(std::string_view(buffer, *n));
  if (!parsed) return parsed.error().withContext(path_);
  return parsed;
}

Result<FileModifiedWatcher> FileModifiedWatcher::watch(const std::string& path) {
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return errnoError("inotify_init1", errno);
  FileModifiedWatcher watcher;
  watcher.fd_ = UniqueFd(fd);
  watcher.path_ = path;
  if (::inotify_add_watch(fd, path.c_str(), IN_MODIFY) < 0) {
    return errnoError("watching " + path, errno);
  }
  return watcher;
}

Result<std::uint64_t> FileModifiedWatcher::consume() {
  std::uint64_t events = 0;
  alignas(inotify_event) char buffer[4096];
  for (int round = 0; round < 64; ++round) {
    const ssize_t n = ::read(fd_.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EAGAIN) break;
      return errnoError("reading inotify events for " + path_, errno);
    }
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      if ((event->mask & IN_IGNORED) != 0) {
        return Error{path_ + ": the watched file was removed", ENOENT};
      }
      if ((event->mask & IN_MODIFY) != 0) ++events;
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
  return events;
}

}  // namespace nodewarden::cgroups
