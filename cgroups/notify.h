// Kernel notifications as file descriptors the agent's event loop waits on (epoll/Asio).
// Each notifier's arm() says plainly when the kernel or the hierarchy cannot do it, so the
// agent can fall back to polling. All are move-only and unregister when destroyed (closing
// the descriptor is how the kernel drops a trigger). Not thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "cgroups/fs.h"
#include "cgroups/parsers.h"
#include "cgroups/pods.h"

namespace nodewarden::cgroups {

// cgroup v1 memory threshold (memory.rst §9): an eventfd that becomes readable when the
// cgroup's memory.usage_in_bytes crosses `threshold` in either direction. Thresholds cannot
// be moved: to re-arm at a new value, arm a new notifier and drop the old one.
class MemoryThresholdNotifier {
 public:
  // Fails on cgroup v2 ("no cgroup.event_control"), on a vanished cgroup and when the kernel
  // rejects the registration.
  static Result<MemoryThresholdNotifier> arm(const CgroupDir& memoryDir,
                                             std::uint64_t thresholdBytes);

  int fd() const { return eventFd_.get(); }  // readable (POLLIN) when crossed
  std::uint64_t threshold() const { return threshold_; }
  // Reads and resets the eventfd counter: the number of crossings since the last call, 0
  // when none (non-blocking).
  Result<std::uint64_t> consume();

 private:
  UniqueFd eventFd_;
  std::uint64_t threshold_ = 0;
};

// A PSI trigger (psi.rst "Monitoring for pressure thresholds") on a cgroup2 *.pressure file
// or /proc/pressure/*: POLLPRI when the stall over the window exceeds the threshold,
// POLLERR when the cgroup is gone. One trigger per descriptor.
class PsiTrigger {
 public:
  // `path` is e.g. "/proc/pressure/memory" or "<cgroup>/memory.pressure".
  static Result<PsiTrigger> arm(const std::string& path, PressureKind kind,
                                std::uint64_t stallMicros, std::uint64_t windowMicros);
  // The same below an open cgroup2 directory (`resource`: "memory", "cpu", "io").
  static Result<PsiTrigger> armAt(const CgroupDir& dir, const std::string& resource,
                                  PressureKind kind, std::uint64_t stallMicros,
                                  std::uint64_t windowMicros);

  int fd() const { return fd_.get(); }  // wait for POLLPRI (epoll: EPOLLPRI)
  const std::string& path() const { return path_; }
  const std::string& trigger() const { return trigger_; }

  enum class Event { None, Pressure, Gone };
  // Polls without blocking: what happened since the last check.
  Result<Event> check() const;
  // Reads the file's current figures through the same descriptor.
  Result<Pressure> read() const;

 private:
  static Result<PsiTrigger> armOn(int dirfd, const std::string& name, const std::string& path,
                                  PressureKind kind, std::uint64_t stallMicros,
                                  std::uint64_t windowMicros);

  UniqueFd fd_;
  std::string path_;
  std::string trigger_;
};

// True when this process has CAP_SYS_RESOURCE (PSI windows below 2 s need it).
bool hasCapSysResource();

// A cgroup v2 "file modified" notification (memory.events, cgroup.events): an inotify
// descriptor readable when the file changes. Works on v2 files only; v1 files never notify.
class FileModifiedWatcher {
 public:
  static Result<FileModifiedWatcher> watch(const std::string& path);
  int fd() const { return fd_.get(); }  // readable (POLLIN) after a change
  const std::string& path() const { return path_; }
  // Drains pending events; returns how many arrived (0 when none). An IN_IGNORED event
  // (the watch was dropped) is reported as an error with sysErrno ENOENT. kernfs does not
  // reliably report a removed cgroup here: vanished cgroups are found by PodCgroups::refresh.
  Result<std::uint64_t> consume();

 private:
  UniqueFd fd_;
  std::string path_;
};

}  // namespace nodewarden::cgroups
