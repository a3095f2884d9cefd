// bench/support: what the benchmarks that run processes share — the stop on SIGINT/SIGTERM,
// monotonic time, small files, and the children they fork into pod cgroups.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "bench/support/measure.h"

namespace nodewarden::bench {

// SIGINT/SIGTERM set the stop flag of measure.h (stopped()), without SA_RESTART so that
// blocking calls return EINTR at once.
inline void installStopHandlers() {
  struct sigaction action {};  // an empty sa_mask
  action.sa_handler = [](int) { gStop = 1; };
  for (int signal : {SIGINT, SIGTERM}) ::sigaction(signal, &action, nullptr);
}

inline std::int64_t monotonicNanos() {  // CLOCK_MONOTONIC, as steady_clock
  return std::chrono::nanoseconds(steadyNow().time_since_epoch()).count();
}

inline void sleepMillis(int millis) {  // a signal ends it early
  const timespec ts{millis / 1000, long(millis % 1000) * 1'000'000};
  ::nanosleep(&ts, nullptr);
}

inline bool writeText(const std::filesystem::path& path, const std::string& text) {
  return bool(std::ofstream(path) << text);
}

inline std::string readText(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A child (forked by cgroups::Sandbox::spawn) dies with the benchmark, leaving none behind;
// false when the parent went before prctl took effect (the child should return at once).
inline bool dieWithParent(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  return ::getppid() == parent;
}

// Holds `bytes` of touched anonymous memory until killed, a stop, or 30 minutes.
inline int holdMemory(std::size_t bytes, pid_t parent) {
  if (!dieWithParent(parent)) return 0;
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return 2;
  std::memset(memory, 0x5a, bytes);
  for (int i = 0; i < 18000 && !stopped(); ++i) sleepMillis(100);
  return 0;
}

// Anonymous private memory of `length` bytes in small pages (with THP one touch would charge
// 2 MiB, and a log of page touches would not say which); nullptr on failure.
inline volatile char* mapSmallPages(std::size_t length) {
  void* memory = ::mmap(nullptr, length, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) return nullptr;
  ::madvise(memory, length, MADV_NOHUGEPAGE);
  return static_cast<volatile char*>(memory);
}

// The siginfo once `pid` has exited, without reaping it (the sandbox reaps its own children).
inline std::optional<siginfo_t> exited(pid_t pid) {
  siginfo_t info{};
  const bool gone = ::waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0;
  return gone || info.si_pid == pid ? std::optional(info) : std::nullopt;
}

// Waits up to `millis` for `fd` to be readable: > 0 when it is, 0 on timeout, < 0 on an error
// or a stop.
inline int waitReadable(int fd, int millis) {
  const std::int64_t deadline = monotonicNanos() + std::int64_t(millis) * 1'000'000;
  for (std::int64_t left = millis; left >= 0; left = (deadline - monotonicNanos()) / 1'000'000) {
    if (stopped()) return -1;
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, int(left) + 1);
    if (n >= 0 || errno != EINTR) return n;
  }
  return 0;
}

// Waits up to `millis` for one byte on `fd`; returns it, or 0 on timeout, EOF or a stop.
inline char readByte(int fd, int millis) {
  char byte = 0;
  return waitReadable(fd, millis) > 0 && ::read(fd, &byte, 1) == 1 ? byte : 0;
}

// A pipe (O_CLOEXEC) whose ends still open close with it; `ok` is false when pipe2 failed.
struct Pipe {
  int fd[2] = {-1, -1};
  bool ok = ::pipe2(fd, O_CLOEXEC) == 0;
  Pipe() = default;
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() { close(0), close(1); }
  void close(int end) {
    if (fd[end] >= 0) ::close(std::exchange(fd[end], -1));
  }
};

}  // namespace nodewarden::bench
