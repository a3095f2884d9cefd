// bench/support: running the nodewarden binary from a benchmark and reading it from outside —
// subprocesses that die with the benchmark, /proc samples (CPU, RSS, threads), a bounded HTTP
// GET on loopback, Prometheus text and JSON log lines; and the shapes the benchmarks share
// (Pod manifests, percentiles in milliseconds, a temporary directory).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/support/measure.h"
#include "bench/support/process.h"
#include "bench/support/report.h"

namespace nodewarden::bench {

using Json = nlohmann::json;

inline std::int64_t steadyNanos(SteadyTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// The last `lines` lines of a log, indented, for failure messages.
inline std::string tail(const std::filesystem::path& path, int lines) {
  const std::string text = readText(path);
  std::size_t at = text.size();
  for (int n = 0; n <= lines && at > 0; ++n) {
    at = text.rfind('\n', at - 1);
    if (at == std::string::npos) {
      at = 0;
      break;
    }
  }
  std::string out;
  std::istringstream in(text.substr(at));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out += "      | " + line + "\n";
  }
  return out;
}

struct TempDir {
  std::filesystem::path path;
  ~TempDir() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
};

// A Pod object as a static manifest.
inline Json podManifest(const std::string& ns, const std::string& name, const std::string& uid,
                        std::int64_t priority, const Json& requests, const Json& limits) {
  Json resources = Json::object();
  if (!requests.empty()) resources["requests"] = requests;
  if (!limits.empty()) resources["limits"] = limits;
  Json container = {{"name", "main"}, {"resources", resources}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
          {"spec",
           {{"containers", Json::array({container})},
            {"priority", priority},
            {"terminationGracePeriodSeconds", 5}}},
          {"status", {{"phase", "Running"}}}};
}

// An idle pod's manifest by QoS class: "guaranteed" requests 100m and 64Mi with equal limits,
// "burstable" requests 50m and 32Mi, "besteffort" nothing.
inline Json idlePodManifest(const std::string& ns, const std::string& name, const std::string& uid,
                            std::int64_t priority, const std::string& qos) {
  Json requests = Json::object();
  Json limits = Json::object();
  if (qos == "guaranteed") {
    requests = {{"cpu", "100m"}, {"memory", "64Mi"}};
    limits = requests;
  } else if (qos == "burstable") {
    requests = {{"cpu", "50m"}, {"memory", "32Mi"}};
  }
  return podManifest(ns, name, uid, priority, requests, limits);
}

// Percentiles of a sample in milliseconds (Samples' fields say nanos; the unit is ours).
struct Millis {
  Samples s;
  explicit Millis(std::vector<double> values) : s(Samples::from(std::move(values))) {}
  std::size_t n() const { return s.count(); }
  double p50() const { return s.median(); }
  double p99() const { return s.p99(); }
  double max() const { return s.nanos.empty() ? 0 : s.nanos.back(); }
};

// ---------------------------------------------------------------------------------------------
// Subprocesses (the nodewarden binary). Output goes to a log file; they get SIGTERM if the
// benchmark dies, and on a stop request here (then SIGKILL if they do not exit in time).

inline pid_t startProcess(const std::vector<std::string>& args, const std::filesystem::path& log) {
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return -1;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(126);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::close_range(3, ~0U, 0);
    std::vector<char*> raw;
    for (const std::string& arg : args) raw.push_back(const_cast<char*>(arg.c_str()));
    raw.push_back(nullptr);
    ::execv(raw[0], raw.data());
    ::_exit(127);
  }
  ::close(out);
  return pid;
}

// Waits for `pid` up to `seconds` (returning early, without reaping, when `stop` asks);
// returns the wait status, or nullopt when it did not exit in time.
inline std::optional<int> waitProcess(pid_t pid, double seconds,
                                      const std::function<bool()>& stop) {
  const std::int64_t deadline = monotonicNanos() + std::int64_t(seconds * 1e9);
  while (monotonicNanos() < deadline) {
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno != EINTR) return std::nullopt;
    if (stop && stop()) return std::nullopt;
    sleepMillis(50);
  }
  return std::nullopt;
}

// SIGTERM, up to `graceSeconds` to exit, then SIGKILL; reaps. Returns the wait status.
inline std::optional<int> stopProcess(pid_t pid, double graceSeconds) {
  ::kill(pid, SIGTERM);
  if (auto status = waitProcess(pid, graceSeconds, nullptr)) return status;
  ::kill(pid, SIGKILL);
  return waitProcess(pid, 5, nullptr);
}

// A subprocess that is stopped (SIGTERM, then SIGKILL after `grace` seconds) when this goes.
struct OwnedProcess {
  pid_t pid = -1;
  double grace = 10;
  std::optional<int> status;  // once stopped
  OwnedProcess(pid_t started, double graceSeconds) : pid(started), grace(graceSeconds) {}
  OwnedProcess(const OwnedProcess&) = delete;
  OwnedProcess& operator=(const OwnedProcess&) = delete;
  ~OwnedProcess() { stop(); }
  void stop() {
    if (pid > 0) status = stopProcess(pid, grace);
    pid = -1;
  }
};

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
  std::uint64_t hwmKiB = 0;   // VmHWM
  std::size_t threads = 0;
  bool ok = false;
};

inline ProcSample sampleProcess(pid_t pid) {
  ProcSample s;
  s.wallNs = monotonicNanos();
  const std::string base = "/proc/" + std::to_string(pid);
  const std::string stat = readText(base + "/stat");
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos) return s;
  std::istringstream fields(stat.substr(paren + 2));
  std::vector<std::string> f;
  std::string field;
  while (fields >> field) f.push_back(field);
  // After the comm: field 3 (state) is f[0], so utime (14) is f[11] and stime (15) f[12].
  if (f.size() < 13) return s;
  s.ticks = std::strtoull(f[11].c_str(), nullptr, 10) + std::strtoull(f[12].c_str(), nullptr, 10);
  std::istringstream status(readText(base + "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) s.rssKiB = std::strtoull(line.c_str() + 6, nullptr, 10);
    if (line.starts_with("VmHWM:")) s.hwmKiB = std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(base + "/task", ec)) {
    const std::string sched = readText(task.path() / "schedstat");
    s.schedNs += std::strtoull(sched.c_str(), nullptr, 10);
    ++s.threads;
  }
  s.ok = true;
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
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
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
  const std::int64_t start = monotonicNanos();
  const std::int64_t deadline = start + std::int64_t(limit.count()) * 1'000'000;
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  const int fd = connectLoopback(port, false);
  std::size_t sent = 0;
  for (int i = 0; fd >= 0 && i < 100000 && !out.ended; ++i) {
    const std::int64_t left = (deadline - monotonicNanos()) / 1'000'000;
    if (left <= 0) break;
    pollfd p{fd, short(sent < request.size() ? POLLOUT : POLLIN), 0};
    const int ready = ::poll(&p, 1, int(std::min<std::int64_t>(left, 50)));
    if (ready <= 0) continue;
    if (sent < request.size()) {
      const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += std::size_t(n);
        out.connected = true;
      } else if (errno != EAGAIN && errno != EINTR) {
        out.ended = out.failed = true;
      }
      continue;
    }
    char chunk[16384];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n > 0) {
      out.response.append(chunk, std::size_t(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      out.ended = true;
      out.failed = n < 0;
    }
  }
  if (fd >= 0) ::close(fd);
  out.nanos = double(monotonicNanos() - start);
  if (out.response.starts_with("HTTP/1.1 ") && out.response.size() >= 12) {
    out.status = std::atoi(out.response.c_str() + 9);
  }
  return out;
}

// GET http://127.0.0.1:port/path; the body, or nullopt. Bounded: 5 s.
inline std::optional<std::string> httpGet(std::uint16_t port, const std::string& path) {
  const Exchange e = exchange(port, path, std::chrono::milliseconds(5000));
  const auto body = e.response.find("\r\n\r\n");
  if (body == std::string::npos) return std::nullopt;
  return e.response.substr(body + 4);
}

// Sum of the samples of a metric family (all label sets) in Prometheus text; nullopt if absent.
inline std::optional<double> metricSum(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  std::optional<double> sum;
  while (std::getline(in, line)) {
    if (!line.starts_with(name)) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != ' ' && next != '{') continue;
    const auto space = line.rfind(' ');
    sum = sum.value_or(0) + std::strtod(line.c_str() + space + 1, nullptr);
  }
  return sum;
}

// Reads the agent's JSON log lines; calls `each` with every complete line's object.
inline void forEachLogLine(const std::filesystem::path& log,
                           const std::function<void(const Json&)>& each) {
  std::istringstream in(readText(log));
  std::string line;
  while (std::getline(in, line)) {
    Json json = Json::parse(line, nullptr, false);
    if (!json.is_discarded() && json.is_object()) each(json);
  }
}

// ---------------------------------------------------------------------------------------------
// The nodewarden agent as a node runs it: static pod source, JSON log.

// `nodewarden agent` over the manifests in `manifests` and the pod cgroups below `kubepods`.
inline std::vector<std::string> agentCommand(const std::string& exe, const std::string& manifests,
                                             const std::string& kubepods, const std::string& policy,
                                             const std::string& node, const std::string& listen,
                                             const std::string& nodefs) {
  return {exe,
          "agent",
          "--source",
          "static",
          "--manifests",
          manifests,
          "--kubepods-cgroup",
          kubepods,
          "--policy",
          policy,
          "--node",
          node,
          "--listen",
          listen,
          "--nodefs",
          nodefs,
          "--log-format",
          "json"};
}

// Reads the agent's JSON log every 100 ms for up to `seconds` until `ready` says so of one of
// its lines (it sees every line; `port` gets the port of "agent-start"). "" when ready, else
// why not: it did not start (`pid` < 0, from startProcess), it exited (then reaped, and `pid`
// is -1), the time ran out, or a stop.
inline std::string awaitAgent(pid_t& pid, const std::filesystem::path& log, int seconds,
                              const std::function<bool(const Json&)>& ready,
                              std::uint16_t* port = nullptr) {
  if (pid < 0) return std::string("cannot start the agent: ") + std::strerror(errno);
  for (int i = 0; i < seconds * 10 && !stopped(); ++i) {
    sleepMillis(100);
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid = -1;
      return "the agent exited (" + describeStatus(status) + "); its log:\n" + tail(log, 12);
    }
    bool done = false;
    forEachLogLine(log, [&](const Json& line) {
      if (port != nullptr && line.value("event", std::string()) == "agent-start") {
        const std::string listen = line.value("listen", std::string());
        const auto colon = listen.rfind(':');
        if (colon != std::string::npos)
          *port = std::uint16_t(std::atoi(listen.c_str() + colon + 1));
      }
      done = ready(line) || done;
    });
    if (done) return {};
  }
  if (stopped()) return "interrupted";
  return "the agent was not ready within " + std::to_string(seconds) + " s; its log:\n" +
         tail(log, 12);
}

}  // namespace nodewarden::bench
