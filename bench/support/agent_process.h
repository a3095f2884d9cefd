// bench/support: a process run from a benchmark and read from outside — subprocesses that die with
// it, /proc samples (CPU, RSS, threads, descriptors) and a bounded HTTP exchange on loopback.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/support/measure.h"
#include "bench/support/process.h"  // and the POSIX and std headers of its processes and files
#include "bench/support/report.h"

namespace nodewarden::bench {

// A subprocess with its output in `log`; it gets SIGTERM if the benchmark dies. -1 on failure.
inline pid_t startProcess(const std::vector<std::string>& args, const std::filesystem::path& log) {
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return -1;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(126);
    ::dup2(::open("/dev/null", O_RDONLY), 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::close_range(3, ~0U, 0);
    std::vector<char*> raw(args.size() + 1, nullptr);
    std::ranges::transform(args, raw.begin(), [](auto& a) { return const_cast<char*>(a.c_str()); });
    ::execv(raw[0], raw.data());
    ::_exit(127);
  }
  ::close(out);
  return pid;
}

// Reaps `pid` within `seconds`; its wait status, or nullopt.
inline std::optional<int> waitProcess(pid_t pid, double seconds) {
  const std::int64_t deadline = monotonicNanos() + std::int64_t(seconds * 1e9);
  for (int status = 0;; sleepMillis(50)) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if ((done < 0 && errno != EINTR) || monotonicNanos() >= deadline) return std::nullopt;
  }
}

// SIGTERM (or `signal`), up to `graceSeconds` to exit, then SIGKILL; reaps.
inline std::optional<int> stopProcess(pid_t pid, double graceSeconds, int signal = SIGTERM) {
  ::kill(pid, signal);
  if (auto status = waitProcess(pid, graceSeconds)) return status;
  ::kill(pid, SIGKILL);
  return waitProcess(pid, 5);
}

inline std::string describeStatus(std::optional<int> status) {
  if (!status) return "did not exit";
  if (WIFEXITED(*status)) return "exit " + std::to_string(WEXITSTATUS(*status));
  if (WIFSIGNALED(*status)) return std::string("killed by ") + ::strsignal(WTERMSIG(*status));
  return "status " + std::to_string(*status);
}

struct ProcSample {
  std::int64_t wallNs = 0;
  std::uint64_t ticks = 0;    // utime + stime, clock ticks
  std::uint64_t schedNs = 0;  // Σ over threads of schedstat's on-CPU time
  std::uint64_t rssKiB = 0;   // VmRSS
  std::size_t fds = 0;        // open descriptors, when asked
  bool ok = false;            // its threads were read
  double rssMiB() const { return double(rssKiB) / 1024; }
  // CPU time since `earlier` in % of one core: utime + stime, or schedstat's on-CPU time.
  double cpuPercentSince(const ProcSample& earlier) const {
    return double(ticks - earlier.ticks) / double(::sysconf(_SC_CLK_TCK)) /
           (double(wallNs - earlier.wallNs) * 1e-9) * 100.0;
  }
  double schedPercentSince(const ProcSample& earlier) const {
    return double(schedNs - earlier.schedNs) / double(wallNs - earlier.wallNs) * 100.0;
  }
};

inline ProcSample sampleProcess(pid_t pid, bool countFds = false) {
  ProcSample s{.wallNs = monotonicNanos()};
  const std::string base = "/proc/" + std::to_string(pid);
  const std::string stat = readText(base + "/stat"), status = readText(base + "/status");
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos) return s;
  unsigned long long utime = 0, stime = 0;  // fields 14 and 15; 3 to 13 follow the comm's ')'
  (void)std::sscanf(stat.c_str() + paren + 1, "%*s%*s%*s%*s%*s%*s%*s%*s%*s%*s%*s %llu %llu", &utime,
                    &stime);
  s.ticks = utime + stime;
  if (const auto at = status.find("\nVmRSS:"); at != std::string::npos)
    s.rssKiB = std::strtoull(&status[at + 7], nullptr, 10);
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(base + "/task", ec)) {
    s.schedNs += std::strtoull(readText(task.path() / "schedstat").c_str(), nullptr, 10);
    s.ok = true;
  }
  for (auto it = std::filesystem::directory_iterator(base + "/fd", ec);
       countFds && !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++s.fds;
  }
  return s;
}

// A socket connected (or, `blocking` false, connecting) to 127.0.0.1:port; with a blocking
// one, every send is bounded by `sendLimit`. -1 on failure.
inline int connectLoopback(std::uint16_t port, bool blocking,
                           std::chrono::milliseconds sendLimit = std::chrono::milliseconds(0)) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (blocking ? 0 : SOCK_NONBLOCK), 0);
  if (fd < 0) return -1;
  if (sendLimit.count() > 0) {
    timeval tv{time_t(sendLimit.count() / 1000), suseconds_t(sendLimit.count() % 1000 * 1000)};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  sockaddr_in address{AF_INET, htons(port), {htonl(INADDR_LOOPBACK)}, {}};
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 &&
      (blocking || errno != EINPROGRESS)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One HTTP/1.1 exchange on a fresh loopback connection ("Connection: close"): the request
// sent, then everything read until the peer closes or `limit` (from the start) runs out.
struct Exchange {
  bool connected = false;  // the connection was made (a request byte went out)
  bool ended = false;      // the peer closed (or reset) the connection
  bool failed = false;     // ... by an error (a reset), not an orderly close
  int status = 0;          // the answer's status code; 0 without one
  std::string response;
  double nanos = 0;  // from before the connect to the end
};

inline Exchange exchange(std::uint16_t port, const std::string& path,
                         std::chrono::milliseconds limit) {
  Exchange out;
  const std::int64_t start = monotonicNanos(), deadline = start + limit.count() * 1'000'000;
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  const int fd = connectLoopback(port, false);
  std::size_t sent = 0;
  for (int i = 0; fd >= 0 && i < 100000 && !out.ended; ++i) {
    const std::int64_t left = (deadline - monotonicNanos()) / 1'000'000;
    if (left <= 0) break;
    const bool sending = sent < request.size();
    pollfd p{fd, short(sending ? POLLOUT : POLLIN), 0};
    if (::poll(&p, 1, int(std::min<std::int64_t>(left, 50))) <= 0) continue;
    char chunk[16384];
    const ssize_t n = sending
                          ? ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL)
                          : ::recv(fd, chunk, sizeof chunk, 0);
    if (n > 0 && sending) sent += std::size_t(n);
    if (n > 0 && !sending) out.response.append(chunk, std::size_t(n));
    if ((n == 0 && !sending) || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      out.ended = true;
      out.failed = n < 0;
    }
  }
  if (fd >= 0) ::close(fd);
  out.nanos = double(monotonicNanos() - start);
  out.connected = sent > 0;
  if (out.response.starts_with("HTTP/1.1 ")) out.status = std::atoi(&out.response[9]);
  return out;
}

}  // namespace nodewarden::bench
